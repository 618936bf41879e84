"""The MCP servers dialog (the palette's "MCP servers…"): each server's status, tools and
sandbox, and the three things a user does to one: restart, enable, disable.

It shows what `/mcp list` returns and answers with the command to run
(`/mcp restart|enable|disable NAME`), which the app runs as if typed: the
dialog holds no rule of its own. Server names, statuses and errors come from
the servers (untrusted): drawn as plain text, never markup.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from slop_tui.ui.screens.base import Dialog, DialogBox, PickList, option_row, plain

McpRow = tuple[str, str, str]  # (server, its one-line state, its last error or "")
VERBS = ("restart", "enable", "disable")


class McpScreen(Dialog[str | None]):
    """Pick a server, then restart (ctrl+r), enable (ctrl+e) or disable (ctrl+d) it.
    Dismisses with the command line to run, or None (Escape, Close)."""

    DEFAULT_CSS = """
    McpScreen #mcp-error { color: $text-muted; height: auto; margin-top: 1; }
    """
    AUTO_FOCUS = "#servers"
    BINDINGS = [
        Binding("ctrl+r", "run('restart')", "Restart", id="mcp_restart"),
        Binding("ctrl+e", "run('enable')", "Enable", id="mcp_enable"),
        Binding("ctrl+d", "run('disable')", "Disable", id="mcp_disable"),
        Binding("escape", "close", "Close", show=False, id="mcp_close"),
    ]

    def __init__(self, rows: Sequence[McpRow]) -> None:
        super().__init__()
        self.rows = list(rows)

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog"):
            yield Static("MCP servers", classes="dialog-title")
            yield PickList(*[self._option(row) for row in self.rows], id="servers")
            yield Static("", id="mcp-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Restart ^r", id="restart", variant="primary")
                yield Button("Enable ^e", id="enable")
                yield Button("Disable ^d", id="disable")
                yield Button("Close esc", id="close")

    @staticmethod
    def _option(row: McpRow) -> Option:
        name, state, _error = row
        line = option_row(False)
        line.append_text(plain(name[:24].ljust(24), "bold"))
        line.append_text(plain(f" {state}", "dim"))
        return Option(line, id=name)

    def on_mount(self) -> None:
        if self.rows:
            self.query_one("#servers", PickList).highlighted = 0
            self._show_error()

    @on(OptionList.OptionHighlighted, "#servers")
    def _show_error(self) -> None:
        name = self.highlighted_name
        error = next((e for n, _s, e in self.rows if n == name), "")
        self.query_one("#mcp-error", Static).update(plain(f"last error: {error}" if error else ""))

    @property
    def highlighted_name(self) -> str | None:
        index = self.query_one("#servers", PickList).highlighted
        return self.rows[index][0] if index is not None and self.rows else None

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "close":
            self.dismiss(None)
        elif event.button.id in VERBS:
            self.action_run(event.button.id)

    def action_run(self, verb: str) -> None:
        name = self.highlighted_name
        if name is not None and verb in VERBS:
            self.dismiss(f"/mcp {verb} {name}")

    def action_close(self) -> None:
        self.dismiss(None)
