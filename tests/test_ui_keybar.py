"""The footer (`KeyBar`): one widget, redrawn only when the keys change; clicks run keys."""

from __future__ import annotations

from contextlib import asynccontextmanager

from textual.app import App
from textual.binding import Binding
from textual.widgets import Static

from slop_tui.ui.screens.dialogs import SessionScreen
from slop_tui.ui.widgets.keybar import KeyBar
from tests import test_app
from tests.fakeserver import wait_for
from tests.test_app import started
from tests.test_ui_startup import app_for, seed

project = test_app.project  # a temporary project folder, no provider keys


def line(bar: KeyBar) -> str:
    return str(bar.render())


async def click_key(pilot, bar: KeyBar, description: str) -> None:
    line(bar)  # the spans are those of the line last drawn
    (span,) = [s for s in bar._spans if s.key is not None and s.key.description == description]
    await pilot.click(KeyBar, offset=(span.start + 1, 0))


@asynccontextmanager
async def workspace_bar(project):
    """The workspace on a seeded project, started: (app, pilot, its KeyBar)."""
    await seed(project, n=2)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        yield app, pilot, app.query_one(KeyBar)


async def test_the_keys_follow_the_focus_without_mounting_anything(project):
    async with workspace_bar(project) as (app, pilot, bar):
        assert list(bar.children) == [] and not app.query("FooterKey")
        assert "Send" in line(bar) and "Drop/restore" not in line(bar)
        widgets = len(list(app.screen.walk_children()))
        redraws = bar.redraws
        await pilot.press("f3")
        await wait_for(pilot, lambda: "Drop/restore" in line(bar))
        assert bar.redraws == redraws + 1
        assert "Send" not in line(bar)
        app.screen.refresh_bindings()  # the same keys: nothing to redraw
        await pilot.pause()
        await pilot.pause()
        assert bar.redraws == redraws + 1
        await pilot.press("f2")
        await wait_for(pilot, lambda: "Drop/restore" not in line(bar))
        assert bar.redraws == redraws + 2
        assert len(list(app.screen.walk_children())) == widgets


async def test_a_click_on_a_key_runs_it_and_the_palette_key_sits_on_the_right(project):
    async with workspace_bar(project) as (app, pilot, bar):
        text = line(bar)
        assert text.rstrip().endswith("Palette") and len(text) == bar.size.width
        assert text.index("▏") > text.index("Sessions")
        await click_key(pilot, bar, "Sessions")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, SessionScreen))
        await click_key(pilot, bar, "Palette")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SlopPalette")


class _Keys(App):
    BINDINGS = [
        Binding("a", "note('a')", "Alpha"),
        Binding("b", "note('b')", "Beta"),
        Binding("c", "note('c')", "Gamma"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []
        self.bells = 0
        self.beta_enabled = False

    def compose(self):
        yield Static("body")
        yield KeyBar()

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "note" and parameters == ("b",):
            return True if self.beta_enabled else None  # None: shown dimmed, not run
        return True

    def action_note(self, which: str) -> None:
        self.notes.append(which)

    def bell(self) -> None:
        self.bells += 1


async def test_a_disabled_key_is_dimmed_and_a_click_on_it_only_rings_the_bell():
    app = _Keys()
    async with app.run_test(size=(60, 5)) as pilot:
        bar = app.query_one(KeyBar)
        await wait_for(pilot, lambda: "Gamma" in line(bar))
        beta = next(k for k in bar.shown_keys if k.description == "Beta")
        assert not beta.enabled
        rendered = bar.render()
        start = str(rendered).index("Beta")
        assert any(span.style.dim for span in rendered.spans if span.start <= start < span.end)
        await click_key(pilot, bar, "Beta")
        await click_key(pilot, bar, "Alpha")
        await wait_for(pilot, lambda: app.notes == ["a"])
        assert app.bells == 1
        app.beta_enabled = True
        app.refresh_bindings()
        await wait_for(pilot, lambda: next(k for k in bar.shown_keys if k.key == "b").enabled)
        await click_key(pilot, bar, "Beta")
        await wait_for(pilot, lambda: app.notes == ["a", "b"])


async def test_keys_that_do_not_fit_are_left_out_and_the_palette_key_stays():
    app = _Keys()
    async with app.run_test(size=(30, 5)) as pilot:
        bar = app.query_one(KeyBar)
        await wait_for(pilot, lambda: "Alpha" in line(bar))
        text = line(bar)
        assert len(text) == 30 and text.rstrip().endswith("palette")
        assert "Gamma" not in text
        assert bar.key_at(len(text) - 3).description == "palette"
