"""STATE pane and scratchpad editor: edits are saved, nothing typed is ever overwritten."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input, Static, TextArea

from slop_tui.ui.widgets.anchors import (
    CONFLICT_NOTICE,
    SCRATCHPAD_DEBOUNCE,
    ScratchpadEditor,
    StatePane,
    StateView,
)


class AnchorsApp(App):
    BINDINGS = [Binding("escape", "app_escape", "cancel turn")]

    def __init__(self, scratchpad: str = "", debounce: float = SCRATCHPAD_DEBOUNCE) -> None:
        super().__init__()
        self.seen: list[Message] = []
        self.escapes = 0
        self._scratchpad = scratchpad
        self._debounce = debounce

    def compose(self) -> ComposeResult:
        yield StatePane("### STATE\n- goal: ship", id="state")
        yield ScratchpadEditor(self._scratchpad, session="s1", debounce=self._debounce)
        yield Input(id="elsewhere")

    def on_scratchpad_editor_scratchpad_saved(self, m: ScratchpadEditor.ScratchpadSaved) -> None:
        self.seen.append(m)

    def on_state_pane_state_edited(self, m: StatePane.StateEdited) -> None:
        self.seen.append(m)

    def action_app_escape(self) -> None:
        self.escapes += 1

    def saves(self) -> list[ScratchpadEditor.ScratchpadSaved]:
        return [m for m in self.seen if isinstance(m, ScratchpadEditor.ScratchpadSaved)]


def notice_shown(app: App) -> bool:
    return app.query_one("#scratchpad-notice", Static).display and app.query_one(
        ScratchpadEditor
    ).has_class("-conflict")


async def test_scratchpad_debounce_saves_once_after_several_keys():
    # Twice the shipped pause: five keys through Pilot on a loaded machine took
    # most of 0.8 s once, and the save came before the last key.
    debounce = 2 * SCRATCHPAD_DEBOUNCE
    app = AnchorsApp("# notes\n", debounce=debounce)
    async with app.run_test(size=(60, 30)) as pilot:
        pad = app.query_one(ScratchpadEditor)
        pad.area.focus()
        pad.area.move_cursor(pad.area.document.end)
        await pilot.press(*"- one")
        assert pad.dirty and app.saves() == []
        await pilot.pause(debounce / 4)
        assert app.saves() == []  # still inside the pause
        await pilot.pause(debounce)
        saves = app.saves()
        assert [(m.text, m.base, m.session) for m in saves] == [
            ("# notes\n- one", "# notes\n", "s1")
        ]
        assert not pad.dirty
        await pilot.pause(0.2)
        assert len(app.saves()) == 1


async def test_leaving_the_editor_saves_at_once_and_flush_reports():
    app = AnchorsApp("", debounce=30)
    async with app.run_test(size=(60, 30)) as pilot:
        pad = app.query_one(ScratchpadEditor)
        pad.area.focus()
        await pilot.press(*"abc")
        app.query_one("#elsewhere", Input).focus()
        await pilot.pause()
        assert [m.text for m in app.saves()] == ["abc"]
        assert pad.flush() is False  # nothing left to save


async def test_external_update_without_edits_replaces_silently():
    app = AnchorsApp("old plan")
    async with app.run_test(size=(60, 30)) as pilot:
        pad = app.query_one(ScratchpadEditor)
        pad.external_update("new plan from the model")
        await pilot.pause()
        assert pad.text == "new plan from the model"
        assert not pad.dirty and not notice_shown(app) and app.saves() == []


async def test_external_update_with_unsaved_edits_keeps_the_users_text():
    # Typed with a debounce no stall of a loaded machine reaches (an autosave between
    # two keys would be a save the test did not make), the last key with a short one.
    app = AnchorsApp("plan", debounce=60)
    async with app.run_test(size=(60, 30)) as pilot:
        pad = app.query_one(ScratchpadEditor)
        pad.area.focus()
        pad.area.move_cursor(pad.area.document.end)
        await pilot.press(*" + min")
        pad.debounce = 0.2
        await pilot.press("e")  # an autosave is now 0.2 s away
        pad.external_update("plan by the model")
        await pilot.pause()
        assert pad.text == "plan + mine" and pad.dirty and pad.in_conflict
        assert notice_shown(app)
        assert str(app.query_one("#scratchpad-notice", Static).render()) == CONFLICT_NOTICE
        await pilot.pause(0.4)  # autosave waits for the user's choice
        assert app.saves() == []
        # ctrl+r loads the model's version; ctrl+z brings the user's text back.
        await pilot.press("ctrl+r")
        assert pad.text == "plan by the model" and not pad.dirty and not notice_shown(app)
        await pilot.press("ctrl+z")
        assert pad.text == "plan + mine"
        await pilot.pause(0.4)
        assert [(m.text, m.base) for m in app.saves()] == [("plan + mine", "plan by the model")]


async def test_typing_after_the_notice_overwrites_the_models_version():
    app = AnchorsApp("plan", debounce=0.2)
    async with app.run_test(size=(60, 30)) as pilot:
        pad = app.query_one(ScratchpadEditor)
        pad.area.focus()
        pad.area.move_cursor(pad.area.document.end)
        await pilot.press("!")
        pad.external_update("model v2")
        await pilot.pause(0.4)
        assert app.saves() == [] and notice_shown(app)
        await pilot.press("!")
        await pilot.pause(0.4)
        assert [(m.text, m.base) for m in app.saves()] == [("plan!!", "model v2")]
        assert not notice_shown(app) and not pad.dirty
        # The app stores it stripped and echoes it back: not a change, no notice.
        pad.external_update("plan!!  \n")
        assert pad.text == "plan!!" and not notice_shown(app)


async def test_load_replaces_everything_for_a_new_session():
    app = AnchorsApp("first", debounce=0.2)
    async with app.run_test(size=(60, 30)) as pilot:
        pad = app.query_one(ScratchpadEditor)
        pad.load("second session's pad", session="s2")
        await pilot.pause(0.4)
        assert pad.text == "second session's pad" and pad.session == "s2"
        assert not pad.dirty and app.saves() == []


async def test_state_edit_posts_state_edited():
    app = AnchorsApp()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(StatePane)
        pane.focus()
        await pilot.press("e")
        editor = app.query_one("#state-editor", TextArea)
        assert pane.editing and editor.has_focus and editor.text == "### STATE\n- goal: ship"
        assert editor.language == "markdown"  # highlighting loaded when it first opens
        editor.move_cursor(editor.document.end)
        await pilot.press("enter", *"- be")
        pane.set_state("### STATE\n- from a turn")  # arrives while editing: text kept
        assert editor.text.endswith("- be")
        await pilot.press("ctrl+s")
        await pilot.pause()
        edited = [m.text for m in app.seen if isinstance(m, StatePane.StateEdited)]
        assert edited == ["### STATE\n- goal: ship\n- be"]  # "e" typed, not the binding
        assert not pane.editing and pane.state_text == edited[0]
        view = app.query_one("#state-view", StateView)
        await pilot.pause()
        # The pane's title says STATE: the text's own heading is not drawn a second time.
        assert view.display and view.source.replace("  \n", "\n").rstrip() == ("- goal: ship\n- be")


async def test_state_escape_cancels_only_while_editing():
    app = AnchorsApp()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(StatePane)
        pane.focus()
        await pilot.press("escape")  # not editing: the app's escape (cancel turn) runs
        assert app.escapes == 1
        await pilot.press("e", "x", "escape")
        assert not pane.editing and app.escapes == 1
        assert not [m for m in app.seen if isinstance(m, StatePane.StateEdited)]
        pane.set_state("### STATE\n- newer")
        assert pane.state_text == "### STATE\n- newer"


def test_binding_ids():
    assert {b.id for b in StatePane.BINDINGS} == {"state_edit", "state_save", "state_cancel"}
    assert {b.id for b in ScratchpadEditor.BINDINGS} == {"scratchpad_load_model", "scratchpad_save"}


async def test_state_pane_scrolls_and_keeps_every_line():
    """A long STATE scrolls in the pane (keys and wheel), each line on its own row."""
    lines = [f"Goal line {i}: keep this" for i in range(40)]
    app = AnchorsApp()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(StatePane)
        pane.set_state("### STATE\n" + "\n".join(lines))
        await pilot.pause()
        view = app.query_one("#state-view", StateView)
        assert view.source.splitlines() == [line + "  " for line in lines]
        # Drawn as lines, one row per STATE line: no Markdown widget, no children.
        drawn = [strip.text.strip() for strip in view.rendered(view.content_size.width)]
        assert drawn[:3] == lines[:3] and not view.children
        assert pane.max_scroll_y > 0  # taller than the pane
        pane.focus()
        await pilot.press("pagedown")
        await pilot.pause()
        assert pane.scroll_y > 0
        await pilot.press("home")
        await pilot.pause()
        assert pane.scroll_y == 0
        await pilot.press("down")
        await pilot.pause()
        assert pane.scroll_y == 1


PLAIN_STATES = [
    "Goal: task 499\nTechnical Anchors: port 8499",
    "### STATE\nGoal: ship the parser (v2)\nContext: the tests pass; 3 left, 40 % done\n\n"
    "Next: a long line that goes on and on, well past the width of the side pane, so it wraps",
    "",  # no STATE: the notice
]
MARKDOWN_STATES = [
    "- goal: ship",
    "Goal: *ship* it",
    "1. first\n2. second",
    "Goal: a\n\n\nContext: b",  # two blank lines: Markdown folds them
    "    indented: code",
    "Goal: `x`",
    "Goal — the dash",
]


async def test_a_plain_state_is_drawn_without_markdown_it_in_the_lines_markdown_draws(
    monkeypatch,
):
    from slop_tui.ui.widgets import anchors
    from slop_tui.ui.widgets.blocks import markdown_lines, markdown_look

    async with AnchorsApp().run_test(size=(60, 20)) as pilot:
        pane = pilot.app.query_one(StatePane)
        look = markdown_look(pilot.app)
        drawn_by_markdown: list[str] = []

        def recording(look, source, width):
            drawn_by_markdown.append(source)
            return markdown_lines(look, source, width)

        monkeypatch.setattr(anchors, "markdown_lines", recording)
        for state in PLAIN_STATES + MARKDOWN_STATES:
            pane.set_state(state or None)
            view = pane.query_one(StateView)
            for width in (12, 31, 58):
                lines = view.rendered(width)
                assert lines == markdown_lines(look, view.source, width), (state, width)
        assert len(drawn_by_markdown) == 3 * len(MARKDOWN_STATES)
        assert not any(anchors._plain_paragraphs(s) for s in drawn_by_markdown)
