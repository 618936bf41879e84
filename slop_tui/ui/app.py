"""The full-screen workspace (minimal frame; the workspace issue fills it in).

Start-up imports no provider SDK, so the first frame is fast; the ledger
opens in a worker after the first frame.
"""

from __future__ import annotations

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Header, Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option


class SlopApp(App):
    """Groups on the left, the conversation in the middle, STATE and scratchpad on the right."""

    TITLE = "slop-tui"
    CSS = """
    #groups { width: 32; border-right: solid $panel; }
    #side { width: 40; border-left: solid $panel; }
    #conversation { height: 1fr; }
    #prompt { dock: bottom; }
    .pane-title { text-style: bold; padding: 0 1; background: $panel; }
    """
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit"),
        Binding("f2", "focus_prompt", "Prompt", id="focus_prompt"),
    ]

    def __init__(self, db: str | None = None, session: str | None = None) -> None:
        super().__init__()
        self._db = db
        self._session_arg = session
        self.workspace = None
        self.startup_error: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            with Vertical(id="groups"):
                yield Static("Groups", classes="pane-title")
                yield OptionList(id="group-list")
            with Vertical():
                with VerticalScroll(id="conversation"):
                    yield Markdown("", id="transcript")
                yield Input(placeholder="Type a prompt or /help", id="prompt")
            with Vertical(id="side"):
                yield Static("STATE", classes="pane-title")
                yield Markdown("", id="state")
                yield Static("Scratchpad", classes="pane-title")
                yield Markdown("", id="scratchpad")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#prompt", Input).focus()
        self.open_workspace()

    @work(exclusive=True, group="open")
    async def open_workspace(self) -> None:
        from slop_tui.config import load_config
        from slop_tui.ledger import LedgerError
        from slop_tui.workspace import Workspace

        config = load_config(db=self._db)
        for warning in config.warnings:
            self.notify(warning, severity="warning")
        try:
            self.workspace = await Workspace.open(config, self._session_arg)
        except LedgerError as exc:
            self.startup_error = str(exc)
            self.notify(str(exc), severity="error", timeout=30)
            return
        await self.refresh_panes()

    async def refresh_panes(self) -> None:
        ws = self.workspace
        if ws is None:
            return
        sess = await ws.current()
        self.sub_title = f"session {ws.session} · window {sess.window_size or 'all'}"
        groups = await ws.ledger.list_groups(ws.session, 500)
        options = self.query_one("#group-list", OptionList)
        options.clear_options()
        options.add_options(
            [Option(f"{g.group_id:>5} {g.prompt[:22]!s} · {g.tokens}", id=str(g.group_id)) for g in groups]
        )
        state = await ws.ledger.current_state(ws.session)
        await self.query_one("#state", Markdown).update(state.content if state else "*(no STATE yet)*")
        await self.query_one("#scratchpad", Markdown).update(sess.scratchpad or "*(empty)*")

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        from slop_tui.commands import dispatch

        text = event.value
        if not text.strip() or self.workspace is None:
            return
        event.input.value = ""
        result = await dispatch(self.workspace, text)
        if result.quit:
            self.exit()
            return
        if result.send is not None:
            self.notify("Sending prompts arrives with the providers issue.", severity="warning")
            event.input.value = text  # never lose what the user typed
            return
        transcript = self.query_one("#transcript", Markdown)
        await transcript.update(result.text if result.ok else f"**Error:** {result.text}")
        if result.changed:
            await self.refresh_panes()

    def action_focus_prompt(self) -> None:
        self.query_one("#prompt", Input).focus()

    async def on_unmount(self) -> None:
        if self.workspace is not None:
            await self.workspace.close()


def run_app(db: str | None = None, session: str | None = None) -> int:
    app = SlopApp(db=db, session=session)
    app.run()
    return 1 if app.startup_error else 0
