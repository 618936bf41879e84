"""The answers' lines kept between starts (`blocks.keep_answer_lines`): a session
opened again draws its first frame's answers from the lines the last start drew,
the same lines the Markdown path draws, without importing markdown-it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from slop_tui.records import NewMessage
from slop_tui.ui.widgets import blocks
from tests import test_app
from tests.probes import first_frame_probe
from tests.workspace_fixtures import open_workspace

ROOT = Path(__file__).resolve().parent.parent
project = test_app.project

ANSWERS = [
    "# Title\n\nSome *em* and **strong**, ~~gone~~, a [link](http://x.org) and `code`.\n",
    "- one\n- two\n  1. nested\n\n> quoted\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    "Here:\n\n```python\ndef f(x):\n    return x + 1\n```\n\nand `inline` text " * 3,
    "A plain answer that wraps over more than one line at a narrow width, " * 4,
]


def _look(highlight: bool) -> blocks.MarkdownLook:
    """A look as the app's dark theme makes it (the app is faked: only its theme)."""
    variables = {
        "background": "#1e1e1e",
        "primary": "#4a90d9",
        "warning": "#ffa62b",
        "text-warning": "#ffa62b",
        "error": "#ba3c5b",
        "text-error": "#ba3c5b",
    }
    app = SimpleNamespace(
        theme="test-dark",
        theme_variables=variables,
        current_theme=SimpleNamespace(dark=True),
        console=SimpleNamespace(color_system="truecolor"),
    )
    was = blocks.code_highlighting_held()
    try:
        if highlight:
            blocks.release_code_highlighting()
        else:
            blocks.hold_code_highlighting()
        return blocks.markdown_look(app)
    finally:
        (blocks.hold_code_highlighting if was else blocks.release_code_highlighting)()


def _segments(lines) -> list:
    return [[(s.text, s.style, s.control) for s in line] for line in lines]


@pytest.fixture
def kept(tmp_path: Path):
    """The lines kept in `tmp_path`, as the command keeps them; forgotten after."""
    assert blocks.keep_answer_lines(tmp_path)
    yield tmp_path
    blocks.forget_answer_lines()


def _next_start(folder: Path) -> None:
    """What the next process reads: the table saved, forgotten, read back."""
    blocks._kept_lines.save()
    blocks.forget_answer_lines()
    assert blocks.keep_answer_lines(folder)


def test_kept_lines_equal_what_markdown_draws(kept: Path) -> None:
    looks = [_look(True), _look(False)]
    for look in looks:
        for source in ANSWERS:
            for width in (30, 90):
                assert blocks.answer_lines(look, source, width)  # rendered, and kept
    assert blocks._kept_lines.unsaved == len(looks) * len(ANSWERS) * 2
    _next_start(kept)
    table = blocks._kept_lines
    for look in looks:
        for source in ANSWERS:
            for width in (30, 90):
                drawn = blocks.answer_lines(look, source, width)
                assert table.unsaved == 0  # every one from the table
                rendered = blocks.markdown_lines(look, source, width)
                assert _segments(drawn) == _segments(rendered), (source, width)
                assert [line.cell_length for line in drawn] == [width] * len(drawn)
    # Another width, look or text is rendered, not taken from a neighbour.
    other = blocks.answer_lines(looks[0], ANSWERS[0], 31)
    assert table.unsaved == 1
    assert _segments(other) == _segments(blocks.markdown_lines(looks[0], ANSWERS[0], 31))


def test_a_damaged_entry_or_file_is_rendered_again(kept: Path) -> None:
    look = _look(False)
    blocks.answer_lines(look, ANSWERS[2], 60)
    _next_start(kept)
    table = blocks._kept_lines
    for key in table.table:
        table.table[key] = b"\x80damaged"
    drawn = blocks.answer_lines(look, ANSWERS[2], 60)
    assert _segments(drawn) == _segments(blocks.markdown_lines(look, ANSWERS[2], 60))
    assert table.unsaved == 1  # rendered and put back whole
    (path,) = kept.glob("answer-lines-*.marshal")
    path.write_bytes(b"\x00not marshal")
    blocks.forget_answer_lines()
    assert blocks.keep_answer_lines(kept)
    assert blocks._kept_lines.table == {}


def test_lines_rendered_after_the_first_screen_are_not_kept(kept: Path) -> None:
    look = _look(False)
    blocks.answer_lines(look, ANSWERS[0], 50)
    blocks.first_screen_drawn()
    blocks.answer_lines(look, ANSWERS[1], 50)  # paging, highlighting: not added
    assert [key[2] for key in blocks._kept_lines.table] == [ANSWERS[0]]
    _next_start(kept)
    blocks.first_screen_drawn()
    blocks.answer_lines(look, ANSWERS[0], 50)
    assert blocks._kept_lines.unsaved == 0  # but what is kept still serves


def test_a_start_adds_its_first_answers_and_the_file_keeps_the_last_starts(
    kept: Path,
) -> None:
    look = _look(False)
    per_start = blocks.KEPT_PER_START
    starts = [
        [f"start {n} answer {i}\n" for i in range(per_start + 5)]
        for n in range(blocks.KEPT_ANSWERS // per_start + 2)
    ]
    for sources in starts:
        for source in sources:
            blocks.answer_lines(look, source, 40)
        assert len(blocks._kept_lines.table) <= 2 * blocks.KEPT_ANSWERS  # bounded in memory
        _next_start(kept)
    kept_sources = {key[2] for key in blocks._kept_lines.table}
    firsts = [source for sources in starts for source in sources[:per_start]]
    assert kept_sources == set(firsts[-blocks.KEPT_ANSWERS :])  # each start's first ones


# A start as the command makes it (the kept lines, the first frame held until the
# panes are filled): what was imported when the first frame was written, and the
# screen once the app is ready.
PROBE = first_frame_probe(
    size=(120, 40),
    before_app="""
        from slop_tui.ui.widgets import blocks
        blocks.keep_answer_lines(sys.argv[2])
    """,
    while_running="""
        await pilot.pause(0.3)
        shot = app.export_screenshot()
        await pilot.pause(startup.HIGHLIGHT_AFTER + 1.0)
        later = "markdown_it" in sys.modules  # loaded after the first screen, in a thread
    """,
    after_exit="""
        from slop_tui.codecache import save_code_cache
        save_code_cache()
    """,
    result='{"first": seen[0], "shot": shot, "kept": len(blocks._kept_lines.table), "later": later}',
)


async def _seed(root: Path) -> None:
    ws = await open_workspace(root)
    try:
        for i, answer in enumerate(ANSWERS):
            user = await ws.ledger.append_user(ws.session, f"question {i}", strategy="openai")
            await ws.ledger.append(
                ws.session, user.group_id, [NewMessage("assistant", answer, strategy="openai")]
            )
    finally:
        await ws.close()


def _start(root: Path, folder: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(root / ".slop" / "slop.db"), str(folder)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env=os.environ.copy(),
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


async def test_a_session_opened_again_draws_its_answers_without_markdown(
    project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    await _seed(project)
    folder = tmp_path_factory.mktemp("cache")  # outside the project: its file tree is shown
    first = _start(project, folder)
    assert "markdown_it" in first["first"]  # rendered: nothing kept yet
    assert first["kept"] >= len(ANSWERS)
    second = _start(project, folder)
    assert "markdown_it" not in second["first"]
    assert "rich.markdown" not in second["first"] and "pygments" not in second["first"]
    assert second["later"]  # and loaded once the first screen is up
    assert second["shot"] == first["shot"]  # the same screen, highlighted code included
    (path,) = folder.glob("answer-lines-*.marshal")
    path.write_bytes(b"")  # damaged: rendered as the first time
    third = _start(project, folder)
    assert "markdown_it" in third["first"] and third["shot"] == first["shot"]


def test_a_new_table_adds_lines_after_an_earlier_apps_first_screen(tmp_path: Path) -> None:
    """The first screen's end is process-wide: a table made after it (another app in
    the same process) adds its own first answers; one forgotten is saved no more."""
    from slop_tui.codecache import save_code_cache

    blocks.first_screen_drawn()  # an earlier app's first screen
    try:
        assert blocks.keep_answer_lines(tmp_path)
        blocks.answer_lines(_look(False), ANSWERS[0], 40)
        assert blocks._kept_lines.unsaved == 1
    finally:
        blocks.forget_answer_lines()
    save_code_cache()
    assert not list(tmp_path.glob("answer-lines-*"))  # forgotten: never written


async def test_emptying_the_trash_leaves_no_answer_text_in_the_user_cache(
    tmp_path: Path, monkeypatch
) -> None:
    """The one hard delete reaches the answers' lines kept in the user cache: the file
    goes, this process's table is emptied, and another running process that read the
    file before does not write the deleted answer back when it saves."""
    from slop_tui.codecache import CacheFile
    from slop_tui.commands import dispatch

    cache = tmp_path / "cache" / "slop-tui"
    cache.mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache.parent))
    code = cache / "dataclass-code-test.marshal"  # not the user's text: stays
    code.write_bytes(b"kept")
    secret = "The launch code is 0000; delete this answer for good."
    root = tmp_path / "project"
    root.mkdir()
    ws = await open_workspace(root)
    try:
        user = await ws.ledger.append_user(ws.session, "the code?", strategy="openai")
        await ws.ledger.append(
            ws.session, user.group_id, [NewMessage("assistant", secret, strategy="openai")]
        )
        assert blocks.keep_answer_lines(cache)
        look = _look(False)
        blocks.answer_lines(look, secret, 60)  # drawn by a first screen: kept
        _next_start(cache)
        (path,) = cache.glob("answer-lines-*.marshal")
        assert secret.encode() in path.read_bytes()
        other = CacheFile(path, blocks._lines_key)  # another app, started before
        assert any(key[2] == secret for key in other.table)

        refused = await dispatch(ws, "/trash empty --yes")  # nothing in the trash yet
        assert refused.ok and path.exists()
        assert (await dispatch(ws, f"/message remove {user.group_id}")).ok
        assert path.exists()  # in the trash: it can come back, and so can its lines
        emptied = await dispatch(ws, "/trash empty --yes")
        assert emptied.ok and "deleted for good" in emptied.text

        assert not path.exists() and code.read_bytes() == b"kept"
        assert blocks._kept_lines.table == {}
        blocks.answer_lines(look, ANSWERS[0], 60)  # this app goes on drawing
        blocks._kept_lines.save()
        other.put(("other-look", 60, ANSWERS[1]), b"lines")  # the other app, too
        other.save()
        assert secret.encode() not in path.read_bytes()
        assert {key[2] for key in CacheFile(path, blocks._lines_key).table} == {
            ANSWERS[0],
            ANSWERS[1],
        }
    finally:
        blocks.forget_answer_lines()
        await ws.close()
