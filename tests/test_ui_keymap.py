"""`[keymap]` remaps bindings by id; unknown ids warn; F1 rows come from the bindings."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from slop_tui.ui.keymap import (
    apply_keymap,
    binding_help_markdown,
    binding_help_rows,
    check_keymap,
    known_bindings,
)


class _Dialog(ModalScreen[None]):
    """Never pushed in these tests: its ids must still count as known."""

    BINDINGS = [Binding("escape", "dismiss", "Close", id="dialog_close")]


class _KeyApp(App):
    BINDINGS = [
        Binding("f2", "ping", "Ping", id="ping"),
        Binding("f3", "pong", "Pong", id="pong"),
        Binding("f4", "noop", show=False),  # no id: not remappable, not in help
    ]

    def __init__(self, keymap: dict[str, str]) -> None:
        super().__init__()
        self.keymap = keymap
        self.warnings: list[str] = []
        self.pings = 0
        self.pongs = 0

    def compose(self) -> ComposeResult:
        yield Static("keys")

    def on_mount(self) -> None:
        self.warnings = apply_keymap(self, self.keymap)

    def action_ping(self) -> None:
        self.pings += 1

    def action_pong(self) -> None:
        self.pongs += 1


async def test_remapped_key_runs_the_action_and_the_old_key_does_not():
    app = _KeyApp({"ping": "f5"})
    async with app.run_test() as pilot:
        await pilot.press("f5")
        assert app.pings == 1
        await pilot.press("f2")
        assert app.pings == 1
        await pilot.press("f3")  # untouched bindings keep their keys
        assert app.pongs == 1
    assert app.warnings == []


async def test_several_keys_for_one_binding():
    app = _KeyApp({"pong": "f6, ctrl+t"})
    async with app.run_test() as pilot:
        await pilot.press("f6", "ctrl+t", "f3")
        assert app.pongs == 2
        rows = binding_help_rows(app)
    assert ("pong", "f6, ^t", "Pong") in rows


async def test_unknown_id_gives_one_warning_and_the_rest_applies():
    app = _KeyApp({"pingg": "f7", "pong": "f8", "ping": " "})
    async with app.run_test() as pilot:
        await pilot.press("f8", "f7", "f2")
        assert (app.pongs, app.pings) == (1, 1)
    assert app.warnings == [
        "[keymap] unknown binding id 'pingg' ignored; did you mean 'ping'?",
        "[keymap] 'ping' has no key; keeping its default.",
    ]


def test_known_bindings_include_screens_that_are_not_shown():
    app = _KeyApp({})
    known = known_bindings(app)
    assert {"ping", "pong", "dialog_close"} <= set(known)
    assert known["ping"].key == "f2" and known["ping"].owner == "_KeyApp"
    good, warnings = check_keymap(app, {"dialog_close": "q", "zzz": "x"})
    assert good == {"dialog_close": "q"}
    assert warnings == ["[keymap] unknown binding id 'zzz' ignored; see F1 for the binding ids."]


async def test_help_rows_show_ids_current_keys_and_descriptions():
    app = _KeyApp({"ping": "f9"})
    async with app.run_test():
        rows = binding_help_rows(app.screen)
        table = binding_help_markdown(app)
    assert ("ping", "f9", "Ping") in rows
    assert ("pong", "f3", "Pong") in rows
    assert all(row[2] != "noop" for row in rows)
    assert "| `f9` | Ping | `ping` |" in table
