"""Command output tables fit the output pane: at 80, 120 and 200 columns every short
cell (an id, a count, a date, a name) is drawn whole on one line of the screen, and
the free-text column is there too (wrapped, or cut with `…`). The screen is read
as drawn, the output pane scrolled a page at a time."""

from __future__ import annotations

import pytest
from textual.containers import VerticalScroll

from slop_tui.ui.widgets.output import fit_columns, records
from tests import test_app
from tests.test_app import started
from tests.test_app_actions import make_app, seed

project = test_app.project

PROMPT = "question {} about the build system, its caches and why the second run is slow"


def screen_lines(app) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def output_lines(pilot) -> list[str]:
    """Every line of the output pane as drawn, scrolled from top to bottom."""
    app = pilot.app
    out = app.query_one("#output", VerticalScroll)
    out.scroll_home(animate=False)
    await pilot.pause()
    lines: list[str] = []
    while True:
        region = out.content_region
        drawn = screen_lines(app)[region.y : region.bottom]
        lines += [line[region.x : region.right] for line in drawn]
        if out.scroll_y >= out.max_scroll_y:
            return lines
        out.scroll_to(y=out.scroll_y + region.height, animate=False)
        await pilot.pause()


def table_cells(text: str) -> list[list[str]]:
    """The body rows of the Markdown table in a command's text."""
    rows = [line for line in text.splitlines() if line.startswith("|")][2:]
    return [[c.strip().replace("\\|", "|") for c in row.strip("|").split(" | ")] for row in rows]


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
@pytest.mark.parametrize("command", ["/session list", "/trash", "/message list"])
async def test_every_short_cell_of_a_table_is_drawn_whole(project, size, command):
    await seed(project, [(PROMPT.format(i), f"answer {i}") for i in range(1, 5)])
    app = make_app(project)
    async with app.run_test(size=size) as pilot:
        await started(pilot)
        ws = app.workspace
        for cmd in (
            "/message remove 3",
            "/session new a-second-session",
            "/session activate default_session",
        ):
            await app.run_command(cmd)
        await app.run_command(command)
        await pilot.pause()
        text = app.query_one("#output-text").source
        cells = table_cells(text)
        assert cells, text
        lines = await output_lines(pilot)
        drawn = "\n".join(lines)
        short = [c for row in cells for c in row if c and len(c) <= 24]
        assert short
        for cell in short:
            assert any(cell in line for line in lines), (cell, size, drawn)
        free = [c for row in cells for c in row if len(c) > 24]
        for cell in free:
            assert cell.split()[0] in drawn and cell.split()[1] in drawn, (cell, drawn)
        assert ws.session == "default_session"


def test_columns_get_their_content_width_when_the_table_fits():
    headers = ["id", "when", "prompt"]
    rows = [["12", "2026-11-29 08:43", "a short prompt"]]
    widths = fit_columns(headers, rows, 200)
    assert widths == [2 + 2, 16 + 2, 14 + 2]


def test_the_free_text_column_gives_way_and_the_short_ones_stay_whole():
    headers = ["id", "when", "prompt"]
    rows = [["12", "2026-11-29 08:43", "a prompt " * 10]]
    widths = fit_columns(headers, rows, 50)
    assert widths[:2] == [4, 18]
    assert sum(widths) + len(headers) + 1 == 50  # the rest goes to the prompt, which wraps
    assert fit_columns(headers, rows, 30) is None  # the prompt would get under 12 cells


def test_records_keep_every_short_field_whole_on_a_line():
    headers = ["", "session", "groups", "last used", "first prompt"]
    rows = [["✓", "default_session", "5", "2026-11-29 08:43", "why is the second run slow " * 3]]
    lines = records(headers, rows, 30).plain.splitlines()
    assert all(len(line) <= 30 for line in lines), lines
    for field in ("session default_session", "groups 5", "last used 2026-11-29 08:43"):
        assert any(field in line for line in lines), (field, lines)
    assert "first prompt" in lines
