"""The slop-tui app: themes, the keymap, start-up, and the screens.

The workspace itself (the panes and their handlers) is `WorkspaceScreen`
(ui/screens/workspace.py); the turn controller (ui/turns.py) runs what the prompt
submits and talks to that screen through the typed messages of ui/messages.py.
The app holds no business rules: every action is the slash command the prompt
would run (`slop_tui.commands.dispatch`). Start-up imports no provider SDK; the
ledger opens in a worker after the first frame.

Start-up path: the module imports only what the first frame draws;
the command layer, the orchestrator and the dialogs come when first used.
The ledger is read once for the group list and the conversation
(`Ledger.group_rows`), and the tokenizer is not built: the gauge and the
preview count with `Workspace.display_plan` (stored and cached counts,
estimates marked `≈`), and the encoding is built in a thread at the first
submit (or when an estimate shows up later), never before the screen is up.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import sys
from collections.abc import Awaitable, Callable
from functools import partial, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from textual import events, work
from textual.app import App
from textual.binding import ActiveBinding, Binding
from textual.screen import Screen
from textual.widgets import Input, TextArea

from slop_tui.ui import textual_fixes
from slop_tui.ui.collector import CollectorPacing, release_held_collections
from slop_tui.ui.keyroute import KeyRouter, for_an_input
from slop_tui.ui.screens.workspace import KEY_PROMPT_DRAFT, KEY_PROMPT_HISTORY, WorkspaceScreen
from slop_tui.ui.text import neutralise
from slop_tui.ui.themes import (
    DEFAULT_THEME,
    app_variable_defaults,
    load_themes,
    pick_theme,
    register_themes,
    save_theme,
    saved_theme,
    user_themes_dir,
)
from slop_tui.ui.turns import TurnController
from slop_tui.ui.widgets.prompt import PromptInput

if TYPE_CHECKING:
    from slop_tui.ui.startup import WorkspaceOpening

__all__ = ["SlopApp", "run_app"]  # and ApprovalScreen, imported on first use

T = TypeVar("T")
ShowDialog = Callable[[Screen[T]], Awaitable[T]]


def opens_dialog(method: Callable[[SlopApp, ShowDialog], Awaitable[None]]) -> Callable:
    """An action that shows a dialog: the keys typed behind the key that asked for it
    go to the dialog. The action runs as a worker (what it reads first does not hold
    the app); `method` shows its dialog with the `show` it is given, which waits for
    the answer. From the key (`KeyRouter.kept` marks it as it comes) or from now, the
    keys wait until the dialog is up, then go to it in order; when `method` ends
    without showing one (an error, a notice), they land as if it had not been asked."""

    async def run(app: SlopApp, opening) -> None:
        async def show(dialog: Screen[T]) -> T:
            answer = app.push_screen(dialog, wait_for_dismiss=True)
            app.keys.dialog_shown(opening, dialog)
            return await answer

        try:
            await method(app, show)
        finally:
            app.keys.no_dialog(opening)

    worker = work(run, group="dialogs", name=method.__name__)

    @wraps(method)
    def action(app: SlopApp) -> None:
        worker(app, app.keys.opening_dialog())

    action.opens_dialog = True
    return action


def __getattr__(name: str):
    # The dialogs are imported when first shown, not at start-up; `ApprovalScreen`
    # stays importable from here.
    if name == "ApprovalScreen":
        from slop_tui.ui.screens.dialogs import ApprovalScreen

        return ApprovalScreen
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# SIGHUP (the terminal closed) and SIGTERM end the workspace as ctrl+q does.
STOP_SIGNALS = ("SIGHUP", "SIGTERM")
HANG_UP_S = 10.0  # the most a closed terminal's app takes to keep what was typed
# How often the command's app looks whether its terminal is still there: one closed
# without a hang-up reaching the app (it was not the terminal's controlling process)
# ends it as SIGHUP does, instead of leaving it running on nothing.
TERMINAL_CHECK_S = 1.0


def terminal_gone(fd: int) -> bool:
    """The terminal on `fd` was closed (the other end of its pty is gone)."""
    poller = select.poll()
    poller.register(fd, 0)  # no event asked for: a hang-up and an error are always told
    gone = select.POLLHUP | select.POLLERR | select.POLLNVAL
    return any(mask & gone for _fd, mask in poller.poll(0))


def slop_commands() -> type:
    """The command palette's provider (`App.COMMANDS` takes a callable): its module is
    imported with the palette, not with the app."""
    from slop_tui.ui.palette import SlopCommands

    return SlopCommands


class SlopApp(App):
    """The slop-tui workspace."""

    TITLE = "slop-tui"
    CSS_PATH = "app.tcss"
    COMMANDS = {slop_commands}
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        Binding(
            "ctrl+p", "command_palette", "Palette", id="command_palette", show=False, priority=True
        ),
        Binding("f1", "help", "Help", id="help"),
    ]  # the workspace's own keys (f2-f9, Esc, ctrl+z/y/r) are WorkspaceScreen's
    # The command's app (`run_app`) quits on STOP_SIGNALS as on ctrl+q; an app a test
    # runs leaves the process's signals alone.
    quits_on_signals = False
    stopped_by: str | None = None  # the signal that quit it

    def __init__(
        self,
        db: str | None = None,
        session: str | None = None,
        *,
        user_themes: bool = True,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        blink: bool = True,
    ) -> None:
        textual_fixes.install()  # Textual's fixes, before the first widget is made
        super().__init__()
        self._db = db
        self._session_arg = session
        self._cwd = cwd
        self._env = env
        self._opening: WorkspaceOpening | None = None  # begun as the app runs (`on_load`)
        self.workspace = None
        self.startup_error: str | None = None
        self.turns = TurnController(self)  # commands, turns, approvals (ui/turns.py)
        self.ready = False  # the ledger is open and the panes show it
        self.collector = CollectorPacing()  # full collections between keys, not during
        self.workspace_screen = WorkspaceScreen(blink=blink)
        self.keys = KeyRouter(
            self,
            panes_screen=lambda: self.workspace_screen,
            typing_target=self._typing_target,
            busy=self._prompt_busy,
            opens_dialog=self._opens_dialog,
        )
        self._drawn_title = ""
        self.theme_load = load_themes(user_themes_dir() if user_themes else None)
        register_themes(self, self.theme_load)
        self.theme = DEFAULT_THEME

    def get_default_screen(self) -> WorkspaceScreen:
        return self.workspace_screen

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity="information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Notifications carry untrusted text (command echoes, provider errors, config
        values): plain text by default, controls neutralised, so `[/x]` cannot crash it."""
        super().notify(
            neutralise(message),
            title=neutralise(title),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    def action_help_quit(self) -> None:
        """ctrl+c outside an editor: say how to quit (Textual's own notice is markup,
        and notices here are plain text)."""
        key = self.key_for("quit", "ctrl+q")
        self.notify(f"Press {key} to quit the app", title="Do you want to quit?")

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return app_variable_defaults(self.current_theme)

    def footer_rank(self, binding) -> float:
        """Where an app or workspace key stands in the footer (ui/widgets/keybar.py)."""
        return self.workspace_screen.footer_rank(binding)

    def set_header(self, status: str, title: str) -> None:
        """The header's title and status line, redrawn alone: `App.sub_title`'s own
        refresh repaints the whole screen (45-80 ms at 120x40, bench/tui.py)."""
        if status == self.sub_title and title == self.title and self._drawn_title == title:
            return
        self._drawn_title = title
        if self.title != title:
            self.set_reactive(SlopApp.title, title)
        self.set_reactive(SlopApp.sub_title, status)
        header = self.workspace_screen.header
        if header.is_mounted:  # the workspace's own header (no DOM walk per status)
            header.query_one(textual_fixes.HeaderTitle).update(header.format_title())

    # -- start-up ------------------------------------------------------------

    def on_mount(self) -> None:
        from slop_tui.ui.startup import hold_first_frame

        hold_first_frame(self)  # the command's first frame shows the filled panes
        if self.quits_on_signals:
            loop = asyncio.get_running_loop()
            for name in STOP_SIGNALS:
                loop.add_signal_handler(getattr(signal, name), self._stopped_by, name)
            stdin = sys.__stdin__
            if stdin is not None and hasattr(select, "poll") and stdin.isatty():
                self.set_interval(
                    TERMINAL_CHECK_S, partial(self._check_terminal, stdin.fileno()), name="tty"
                )

    def _check_terminal(self, fd: int) -> None:
        if self.stopped_by is None and terminal_gone(fd):
            self._stopped_by("SIGHUP")  # as if the hang-up had come

    def _stopped_by(self, name: str) -> None:
        """SIGTERM: the app quits as ctrl+q quits it, the scratchpad's edits and the
        prompt's text kept. SIGHUP (the terminal was closed): the same is kept, a turn
        running stores what it has, the ledger is closed, and the process ends there:
        there is no terminal to give back (Textual's shutdown waits on writes to it). A
        second signal, or SIGHUP's work taking over HANG_UP_S, ends it at once."""
        code = 128 + getattr(signal, name)
        if self.stopped_by is not None:
            os._exit(code)
        self.stopped_by = name
        if name != "SIGHUP":
            self.call_later(self.action_quit)
            return

        async def keep_and_leave() -> None:
            try:
                async with asyncio.timeout(HANG_UP_S):
                    await self.workspace_screen.keep_what_was_typed()
                    await self.on_unmount()
            finally:
                os._exit(code)

        self.run_worker(keep_and_leave, group="hang-up", exit_on_error=False)

    def on_load(self) -> None:
        """The ledger starts opening as soon as the app runs, before its first screen is
        composed (ui/startup.py's `WorkspaceOpening`); `open_workspace` takes the open
        workspace once the screen is mounted."""
        from slop_tui.config import load_config
        from slop_tui.ui.startup import WorkspaceOpening

        config = load_config(db=self._db, cwd=self._cwd, env=self._env)
        self._opening = WorkspaceOpening(config, self._session_arg, self._env)

    @work(exclusive=True, group="open")
    async def open_workspace(self) -> None:
        """Take the workspace `on_load` began opening and fill the workspace screen (its
        panes are mounted)."""
        from slop_tui.ledger import LedgerError

        if self._opening is None:  # its open was taken before: open it again
            self.on_load()
        opening, self._opening = self._opening, None
        assert opening is not None
        config = opening.config
        screen = self.workspace_screen
        warnings = list(config.warnings)
        if config.keymap:  # an empty [keymap] changes nothing: skip importing every dialog
            from slop_tui.ui.keymap import apply_keymap
            from slop_tui.ui.screens import dialogs, firstrun, help, search, workspace_sides

            extra = (
                firstrun.FirstRunScreen,
                dialogs.ApprovalScreen,
                dialogs.ConfirmScreen,
                dialogs.ProviderScreen,
                dialogs.SessionScreen,
                search.SearchScreen,
                help.HelpScreen,
                *workspace_sides.widgets(),  # mounted after the first frame
            )
            warnings += apply_keymap(self, config.keymap, extra)
        for warning in warnings:
            self.notify(warning, severity="warning", timeout=15)
        if config.untrusted:
            screen.show_banner(
                f"{config.project_config} sets {', '.join(config.untrusted)}; ignored until "
                "you trust this folder (ctrl+p → Trust this folder's config)"
            )
        if note := self.theme_load.notification():
            self.notify(note, severity="warning", timeout=15)
        from slop_tui.ui.startup import first_screen_shown, release_first_frame

        try:
            self.workspace, probe = await opening.task
            self.workspace.editor = self._edit_outside
            await self._show_workspace(config, probe)
        except LedgerError as exc:  # e.g. a database with damaged pages: one banner
            if self.workspace is not None:
                await self.workspace.ledger.close()
                self.workspace = None
            self.startup_error = str(exc)
            screen.show_banner(str(exc))
            await screen.sides.reveal()
            return
        finally:
            release_first_frame(self)
            # The collector, off since the command started (`hold_full_collections`),
            # back on over what start-up made, frozen.
            release_held_collections()
            self.keys.panes_filled()  # the keys typed before the side panes, in order
        # What start-up built (Textual, the widgets, the first screen: ~1M objects) lives
        # as long as the app: frozen, no collection walks it again. From here on the
        # full collections run between the user's keys (ui/collector.py).
        self.collector.start()
        self.set_interval(
            0.5,
            lambda: self.collector.tick(busy=self.turns.busy or bool(self.turns.phase)),
            name="collector",
        )
        first_screen_shown(self)  # what the first screen left for later (ui/startup.py)
        from slop_tui.ui.palette import build_palette_later

        build_palette_later(self)  # the command palette, built once the user pauses
        if (await self.workspace.provider_choice()).name == "demo" and not (
            await self.workspace.ledger.list_sessions()
        ):
            from slop_tui.ui.screens.firstrun import FirstRunScreen

            self.push_screen(FirstRunScreen())
        # Ready once the first-run panel (if any) is up: a key pressed after this lands on
        # the screen the user will see.
        self.ready = True
        # Last: nothing on the first screen needs the stored session, and the write
        # queues behind the group list's read of the older prompts.
        try:
            await self.workspace.save_session()
        except LedgerError as exc:
            self.notify(f"could not store the current session: {exc}", severity="warning")

    async def _show_workspace(self, config, probe) -> None:
        """Fill the screen from the workspace just opened (`probe`: its sandbox, being
        detected)."""
        ws = self.workspace
        for recovered in ws.ledger.recovered:  # a killed process's turn, finished
            self.notify(recovered.note(), severity="warning", timeout=20)
        for warning in ws.pop_warnings():  # provider settings, default_provider
            self.notify(warning, severity="warning", timeout=15)
        name, warns = pick_theme(self.available_themes, await saved_theme(ws.ledger), config.theme)
        self.theme = name
        for w in warns:
            self.notify(w, severity="warning")
        # No tokenizer here: building it costs ~0.4 s of CPU and ~46 MB. The panes
        # count with stored and cached counts; the encoding is built for a submit
        # (`TurnController.exact_counts`) and released when the app is idle.
        history = await ws.ledger.get_setting(KEY_PROMPT_HISTORY)
        draft = await ws.ledger.get_setting(KEY_PROMPT_DRAFT)
        ws.use_sandbox_verdict(await probe)  # the header says whether they are sandboxed
        # The conversation first: its frame is drawn before the side panes are built.
        await self.workspace_screen.show_conversation(
            json.loads(history) if history else [], draft or ""
        )
        from slop_tui.ui.startup import release_first_frame

        release_first_frame(self)
        await self.workspace_screen.show_side_panes()

    # -- typing ----------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        if isinstance(
            event,
            (
                events.Key,
                events.MouseDown,
                events.MouseScrollDown,
                events.MouseScrollUp,
                events.Paste,
            ),
        ):
            self.collector.note_input()
            if isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded:
                if self.keys.kept(event):
                    return  # before the side panes, or on the first-run panel: handled in order
                if self.screen is not self.workspace_screen:
                    if self.keys.close_for_typing(event):
                        return  # typing on the first-run panel: it closes, the text goes on behind
                elif isinstance(event, events.Key) and await self.keys.intercept(event):
                    return  # typed into the prompt, or a pane's letter waiting (ui/keyroute.py)
        if isinstance(event, events.Paste) and isinstance(self.focused, Input):
            safe = for_an_input(event.text)
            if safe != event.text:
                event = events.Paste(safe)  # a field draws what it holds as it is
        await super().on_event(event)

    def on_key(self, event: events.Key) -> None:
        """On a dialog, a printable key nothing binds is typed into its field. Runs after
        the focused widget's own handlers, before the focus chain's bindings."""
        self.keys.route(event)
        self.keys.handled(event)

    def on_paste(self, event: events.Paste) -> None:
        self.keys.route_paste(event)

    def _prompt_busy(self) -> bool:
        """The prompt holds the keys typed behind a line it sent, until the line is taken."""
        prompts = self.workspace_screen.query(PromptInput)
        return bool(prompts) and prompts.first().held is not None

    def _opens_dialog(self, active: ActiveBinding) -> bool:
        """The binding runs an action that shows a dialog (`opens_dialog`)."""
        namespace, _, name = active.binding.action.partition("(")[0].rpartition(".")
        owner: Any = self if namespace == "app" else active.node if not namespace else None
        action = getattr(owner, f"action_{name}", None)
        return bool(getattr(action, "opens_dialog", False))

    def _typing_target(self) -> TextArea | Input | None:
        """Where stray typing goes: the prompt, or the first text field of a dialog."""
        screen = self.screen
        if screen is self.workspace_screen:
            return screen.query_one(PromptInput).area
        fields = screen.query(Input)
        return fields.first() if fields else None

    def key_for(self, binding_id: str, default: str) -> str:
        """The (first) key of the app binding with this id, as remapped by `[keymap]`,
        for a sentence ("ctrl+y brings it back"); `default` when it is not bound now."""
        for key, active in self.workspace_screen.active_bindings.items():
            if active.binding.id == binding_id:
                return key
        return default

    def _edit_outside(self, text: str, suffix: str) -> str | None:
        """$EDITOR for the commands that open one (`/context show --editor`, `/session
        scratchpad edit`, ...), with the app suspended so the editor has the terminal."""
        from textual.app import SuspendNotSupported

        from slop_tui.commands.base import run_editor

        try:
            with self.suspend():
                return run_editor(self.workspace.env, text, suffix)
        except SuspendNotSupported:
            return None

    # -- commands, the palette and the dialogs ---------------------------------

    async def run_command(self, text: str) -> None:
        """Run a line exactly as if it was typed in the prompt (ui/turns.py)."""
        await self.turns.run_command(text)

    def prefill_prompt(self, text: str) -> None:
        self.workspace_screen.prefill_prompt(text)

    async def choose_theme(self, name: str) -> None:
        if self.workspace is not None:
            await save_theme(self.workspace.ledger, name)

    def action_command_palette(self) -> None:
        """The command palette (ui/palette.py's `SlopPalette`)."""
        from slop_tui.ui.palette import SlopPalette, kept_palette

        if self.use_command_palette and not SlopPalette.is_open(self):
            self.push_screen(kept_palette(self))

    def palette_actions(self):
        screen = self.workspace_screen
        return [
            (
                "Drop or restore the highlighted group",
                "Soft drop (reversible)",
                screen.action_toggle_drop,
            ),
            ("Undo the last group", "/undo (to the trash)", screen.action_undo),
            ("Redo", "/redo: bring back what was last taken away", screen.action_redo),
            ("Show the trash", "/trash list", partial(self.run_command, "/trash list")),
            ("Empty the trash…", "Asks first: the one hard delete", self.turns.confirm_empty_trash),
            ("Switch provider or model…", "Provider dialog", self.action_provider),
            ("Sessions…", "Switch, new, clone or remove a session", self.action_sessions),
            ("Search history…", "Across all sessions", self.action_search),
            ("MCP servers…", "Status; restart, enable or disable one", self.action_mcp),
            ("Copy the scratchpad", "System clipboard or OSC 52", self.action_copy_scratchpad),
            ("Copy the whole context", "The exact next request", self.action_copy_context),
            ("Export session as Markdown", "/export markdown", self.action_export_markdown),
            ("Export session as JSON", "/export json", self.action_export_json),
            ("Toggle the left pane", "Groups and sessions", screen.action_toggle_left),
            (
                "Toggle the right pane",
                "STATE, scratchpad, gauge, preview",
                screen.action_toggle_right,
            ),
            (
                "Trust this folder's config…",
                "Let .slop/config.toml set providers, keys and approvals",
                self.action_trust_project,
            ),
            ("Help", "Every key and command", self.action_help),
        ]

    def action_trust_project(self) -> None:
        self._trust_project()

    @work(group="dialogs")
    async def _trust_project(self) -> None:
        """Show what the project file sets that needs trust; record the trust on yes."""
        from slop_tui.trust import record_trust
        from slop_tui.ui.screens.dialogs import ConfirmScreen

        ws = self.workspace
        if ws is None:
            return
        config = ws.config
        if not config.project_config.is_file():
            self.notify(f"There is no {config.project_config} to trust.", severity="warning")
            return
        held = ", ".join(config.untrusted) or "nothing that needs trust (it may change later)"
        body = (
            f"{config.project_config}\n\nIgnored until trusted: {held}.\n\nTrusted, it may send "
            "your requests and keys to the servers it names and loosen approvals. A later "
            "change to the file needs trusting again."
        )
        if not await self.push_screen_wait(
            ConfirmScreen("Trust this folder's config?", body, yes="Trust")
        ):
            return
        record_trust(config.project_root, config.user_config_dir or Path.home())
        from slop_tui.config import load_config

        ws.reconfigure(load_config(db=self._db, cwd=self._cwd, env=self._env))
        self.turns.reconfigured()
        self.workspace_screen.show_banner("")
        await self.workspace_screen.refresh_all()
        self.notify(f"Trusted {config.project_config}; its settings apply now.")

    def action_help(self) -> None:
        from slop_tui.ui.screens.help import HelpScreen, binding_rows

        opening = self.keys.opening_dialog()
        dialog = HelpScreen(binding_rows(self))
        self.push_screen(dialog)
        self.keys.dialog_shown(opening, dialog)  # it has no field: it ignores the letters

    action_help.opens_dialog = True

    @opens_dialog
    async def action_provider(self, show: ShowDialog) -> None:
        from slop_tui.ui.screens.dialogs import (
            ProviderScreen,
            keyless_providers,
            provider_dialog_args,
        )

        ws = self.workspace
        choices, current, hidden = await provider_dialog_args(ws)
        keyless = keyless_providers(ws)
        result = await show(ProviderScreen(choices, current, hidden, keyless))
        if result:
            await self.run_command(f"/provider {result[0]} {result[1]}")

    @opens_dialog
    async def action_sessions(self, show: ShowDialog) -> None:
        from slop_tui.ui.screens.dialogs import SessionScreen
        from slop_tui.ui.widgets.anchors import ScratchpadEditor

        ws = self.workspace
        result = await show(SessionScreen(await ws.ledger.list_sessions(), ws.session))
        if result:
            action, name = result
            verb = {"switch": "activate", "new": "activate"}.get(action, action)
            if action != "remove":
                # A save racing `/session remove` brought the removed session back; after
                # the removal, refresh_all's flush is dropped by on_scratchpad_editor_scratchpad_saved instead.
                self.workspace_screen.query_one(ScratchpadEditor).flush()
            await self.run_command(f"/session {verb} {name}")

    @opens_dialog
    async def action_mcp(self, show: ShowDialog) -> None:
        """The MCP servers dialog: what `/mcp list` says, and the command it answers with."""
        from slop_tui.commands import dispatch
        from slop_tui.ui.screens.mcp import McpScreen

        ws = self.workspace
        listed = await dispatch(ws, "/mcp list")
        if not listed.ok:
            self.notify(listed.text, severity="warning", timeout=8)
            return
        mcp = ws.mcp
        rows = [(s.name, mcp.status_line(s), s.error or "") for s in listed.data]
        line = await show(McpScreen(rows))
        if line:
            await self.run_command(line)

    @opens_dialog
    async def action_search(self, show: ShowDialog) -> None:
        from slop_tui.ui.screens.search import SearchScreen
        from slop_tui.ui.widgets.conversation import ConversationView
        from slop_tui.ui.widgets.groups import GroupList

        result = await show(SearchScreen(self.workspace))
        if result:
            session, gid = result
            if session != self.workspace.session:
                await self.run_command(f"/session activate {session}")
            if gid is not None:
                screen = self.workspace_screen
                await screen.query_one(ConversationView).show_group(gid)
                screen.query_one(GroupList).select_group(gid)

    async def copy(self, text: str, what: str) -> None:
        from slop_tui.ui.clipboard import copy_text_async, describe

        method = await copy_text_async(self, text)
        self.notify(f"Copied {what}: {describe(method)}")

    async def action_copy_scratchpad(self) -> None:
        from slop_tui.ui.widgets.anchors import ScratchpadEditor

        await self.copy(self.workspace_screen.query_one(ScratchpadEditor).text, "the scratchpad")

    async def action_copy_context(self) -> None:
        from slop_tui.context import render_prompt

        async with self.turns.exact_counts():
            prompt = await self.workspace.prompt()
        await self.copy(render_prompt(prompt), "the whole context")

    async def action_export_markdown(self) -> None:
        await self.run_command("/export markdown")

    async def action_export_json(self) -> None:
        await self.run_command("/export json")

    # -- the end -----------------------------------------------------------------

    async def action_quit(self) -> None:
        await self.workspace_screen.keep_what_was_typed()
        self.exit()

    async def on_unmount(self) -> None:
        self.collector.stop()
        opening, self._opening = self._opening, None
        if opening is not None:  # the app ends before its screen took the open
            await opening.close()
        ws = self.workspace
        if ws is None:
            return
        # The ledger stays open until a running turn has stored its partial answer.
        await self.turns.close()
        await ws.close()


def run_app(db: str | None = None, session: str | None = None) -> int:
    textual_fixes.install()
    app = SlopApp(db=db, session=session)
    app.quits_on_signals = True
    app.run()
    if app.stopped_by is not None:
        return 128 + getattr(signal, app.stopped_by)
    return 1 if app.startup_error else 0
