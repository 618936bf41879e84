"""The prompt: Enter sends, newlines, history, slash-command completion, nothing lost."""

from __future__ import annotations

from textual.app import App, ComposeResult

from slop_tui.ui.widgets.prompt import PromptInput
from tests.fakeserver import wait_for


class PromptApp(App):
    def __init__(self, history: list[str] | None = None) -> None:
        super().__init__()
        self.history = history
        self.sent: list[str] = []

    def compose(self) -> ComposeResult:
        yield PromptInput(id="prompt", blink=False, history=self.history)

    def on_mount(self) -> None:
        self.query_one(PromptInput).focus()

    def on_prompt_input_submitted(self, event: PromptInput.Submitted) -> None:
        self.sent.append(event.text)


async def test_enter_submits_and_the_text_stays_until_cleared() -> None:
    app = PromptApp()
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        await pilot.press(*"hello", "enter")
        await wait_for(pilot, lambda: app.sent == ["hello"])
        assert prompt.text == "hello"  # not cleared until the app says so
        assert prompt.clear() == "hello"
        assert prompt.text == "" and prompt.history == ["hello"]
        await pilot.press("enter")  # an empty prompt is not sent
        await pilot.pause()
        assert app.sent == ["hello"]
        prompt.restore("given back")
        assert prompt.text == "given back" and prompt.value == "given back"


async def test_shift_enter_and_ctrl_j_insert_a_newline() -> None:
    app = PromptApp()
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        await pilot.press(*"one", "shift+enter", *"two", "ctrl+j", *"three", "alt+enter", "x")
        assert prompt.text == "one\ntwo\nthree\nx"
        assert app.sent == []
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.sent == ["one\ntwo\nthree\nx"])


async def test_up_and_down_walk_the_history_and_keep_the_draft() -> None:
    app = PromptApp()
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.set_history(["first", "second\nline two"])
        await pilot.press(*"draft")
        await pilot.press("up")
        assert prompt.text == "second\nline two"
        await pilot.press("up")  # on the last line of a multi-line entry: move up inside it
        assert prompt.text == "second\nline two"
        await pilot.press("up")
        assert prompt.text == "first"
        await pilot.press("up")  # the oldest stays
        assert prompt.text == "first"
        await pilot.press("down")
        assert prompt.text == "second\nline two"
        await pilot.press("down", "down")
        assert prompt.text == "draft"
        # An edited entry becomes the draft: walking away and back keeps the edit.
        await pilot.press("up", "up", "up", *"!", "up")
        assert prompt.text == "second\nline two"
        await pilot.press("down")
        assert prompt.text == "first!"
        # A submitted prompt joins the history when the app clears it.
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.sent == ["first!"])
        prompt.clear()
        await pilot.press("up")
        assert prompt.text == "first!"
        assert prompt.history == ["first", "second\nline two", "first!"]


async def test_slash_shows_commands_with_usage_hints_and_tab_completes() -> None:
    app = PromptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        await pilot.press(*"/ses")
        assert prompt.completions_shown
        items = dict(prompt.completion_items)
        assert items["/session activate"] == "/session activate NAME"
        assert prompt.completion_list.region.height > 0  # on screen
        await pilot.press("tab")
        assert prompt.text == "/session activate "
        # The argument hint stays while the arguments are typed.
        assert prompt.completion_items == [("/session activate", "/session activate NAME")]
        await pilot.press(*"work", "enter")
        await wait_for(pilot, lambda: app.sent == ["/session activate work"])
        assert not prompt.completions_shown


async def test_completion_navigation_enter_and_escape() -> None:
    app = PromptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        await pilot.press(*"/ses", "down", "enter")  # pick the second command
        assert prompt.text == f"{prompt_second(prompt)} " and app.sent == []
        prompt.clear()
        await pilot.press(*"/ses", "enter")  # not a command yet: Enter completes
        assert prompt.text == "/session activate " and app.sent == []
        prompt.clear()
        await pilot.press(*"/session", "enter")  # already a command: Enter runs it
        await wait_for(pilot, lambda: app.sent == ["/session"])
        prompt.clear()
        await pilot.press(*"/he", "escape")
        assert not prompt.completions_shown and prompt.text == "/he"
        await pilot.press("tab")  # nothing to complete: Tab moves the focus on
        assert prompt.text == "/he"


def prompt_second(prompt: PromptInput) -> str:
    from slop_tui.commands import completions

    return completions("/ses")[1][0]


async def test_blink_flag_turns_the_cursor_blink_off() -> None:
    app = PromptApp()
    async with app.run_test():
        assert app.query_one(PromptInput).area.cursor_blink is False
    assert PromptInput().area.cursor_blink is True
