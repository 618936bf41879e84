"""The full-screen workspace (minimal frame; the workspace issue fills it in).

Start-up imports no provider SDK, so the first frame is fast; the ledger
opens in a worker after the first frame.
"""

from __future__ import annotations

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Header, Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option


class ApprovalScreen(ModalScreen[str]):
    """Allow once / always for this session / deny, for a writing tool or the shell."""

    BINDINGS = [Binding("escape", "deny", "Deny", id="approval_deny")]

    def __init__(self, name: str, arguments: str) -> None:
        super().__init__()
        self.tool_name = name
        self.arguments = arguments

    def compose(self) -> ComposeResult:
        with Vertical(id="approval"):
            yield Static(f"The model wants to run **{self.tool_name}**", classes="pane-title")
            yield Static(self.arguments[:2000], markup=False)
            with Horizontal():
                yield Button("Allow once", id="allow", variant="primary")
                yield Button("Always this session", id="allow_session")
                yield Button("Deny", id="deny", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "deny")

    def action_deny(self) -> None:
        self.dismiss("deny")


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
        Binding("escape", "cancel_turn", "Cancel turn", id="cancel_turn"),
    ]

    def __init__(self, db: str | None = None, session: str | None = None) -> None:
        super().__init__()
        self._db = db
        self._session_arg = session
        self.workspace = None
        self.orchestrator = None
        self.startup_error: str | None = None
        self.busy = False
        self.ready = False  # the ledger is open and the panes show it

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
        self.ready = True

    async def refresh_panes(self) -> None:
        ws = self.workspace
        if ws is None:
            return
        sess = await ws.current()
        choice = await ws.provider_choice()
        label = "DEMO (offline, scripted)" if choice.name == "demo" else f"{choice.name} {choice.model}"
        state = " · busy" if self.busy else ""
        self.sub_title = f"session {ws.session} · {label} · window {sess.window_size or 'all'}{state}"
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
            if self.busy:
                self.notify("A turn is running; Esc cancels it.", severity="warning")
                event.input.value = text  # never lose what the user typed
                return
            self.run_turn(text)
            return
        transcript = self.query_one("#transcript", Markdown)
        await transcript.update(result.text if result.ok else f"**Error:** {result.text}")
        if result.changed:
            await self.refresh_panes()

    @work(exclusive=True, group="turn")
    async def run_turn(self, text: str) -> None:
        import json

        from slop_tui.orchestrator import (
            ErrorEvent,
            Notice,
            Orchestrator,
            TextChunk,
            ToolCallEvent,
            ToolResultEvent,
        )

        ws = self.workspace
        if self.orchestrator is None:
            self.orchestrator = Orchestrator(ws, approve=ws.config.approve, approver=self.ask_approval)
        transcript = self.query_one("#transcript", Markdown)
        await transcript.update(f"> {text}\n\n")
        stream = Markdown.get_stream(transcript)
        self.busy = True
        await self.refresh_panes()

        async def on_event(ev) -> None:
            if isinstance(ev, TextChunk):
                await stream.write(ev.text)
            elif isinstance(ev, ToolCallEvent):
                args = json.dumps(ev.arguments, ensure_ascii=False)[:120]
                await stream.write(f"\n\n`🛠 {ev.name} {args}`\n\n")
            elif isinstance(ev, ToolResultEvent):
                mark = "✅" if ev.ok else "❌"
                await stream.write(f"`┗ {mark} {ev.name}: {len(ev.text.splitlines())} lines`\n\n")
            elif isinstance(ev, Notice):
                self.notify(ev.text, severity="warning")
            elif isinstance(ev, ErrorEvent):
                self.notify(ev.message, severity="error", timeout=15)

        try:
            await self.orchestrator.run_turn(text, on_event)
        finally:
            await stream.stop()
            self.busy = False
            await self.refresh_panes()

    async def ask_approval(self, call) -> str:
        import json

        args = json.dumps(call.arguments, indent=2, ensure_ascii=False)
        return await self.push_screen_wait(ApprovalScreen(call.name, args))

    def action_cancel_turn(self) -> None:
        if self.busy:
            self.workers.cancel_group(self, "turn")
            self.notify("Turn cancelled; the partial answer is kept as interrupted.")

    def action_focus_prompt(self) -> None:
        self.query_one("#prompt", Input).focus()

    async def on_unmount(self) -> None:
        if self.orchestrator is not None:
            await self.orchestrator.aclose()
        if self.workspace is not None:
            await self.workspace.close()


def run_app(db: str | None = None, session: str | None = None) -> int:
    app = SlopApp(db=db, session=session)
    app.run()
    return 1 if app.startup_error else 0
