"""The full-screen workspace: groups and sessions on the left, the conversation in the
middle, STATE, scratchpad, token gauge and context preview on the right.

The app holds no business rules: every action is the slash command the prompt
would run (`slop_tui.commands.dispatch`), and turns run in the orchestrator,
whose events the conversation view renders. Start-up imports no provider SDK;
the ledger opens in a worker after the first frame.

Start-up path: the module imports only what the first frame draws;
the command layer, the orchestrator and the dialogs come when first used.
The ledger is read once for the group list and the conversation
(`Ledger.group_rows`), and the tokenizer is not built: the gauge and the
preview count with `Workspace.display_prompt` (stored and cached counts,
estimates marked `≈`), and the encoding is built in a thread at the first
submit (or when an estimate shows up later), never before the screen is up.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from textual import events, on, work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widget import WidgetError
from textual.widgets import Header, Input, Markdown, Static, TextArea
from textual.widgets._header import HeaderTitle

from slop_tui.ui.collector import CollectorPacing
from slop_tui.ui.palette import SlopCommands
from slop_tui.ui.text import keep_lines, neutralise
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
from slop_tui.ui.widgets.anchors import ScratchpadEditor, StatePane
from slop_tui.ui.widgets.conversation import ConversationView, CopyRequested
from slop_tui.ui.widgets.gauge import TokenGauge
from slop_tui.ui.widgets.groups import PROMPTS_FIRST, SNIPPET_SOURCE, GroupList, SessionList
from slop_tui.ui.widgets.keybar import KeyBar
from slop_tui.ui.widgets.preview import ContextPreview
from slop_tui.ui.widgets.prompt import PromptInput

__all__ = ["SlopApp", "run_app"]  # and ApprovalScreen, imported on first use


def _type_into(target: TextArea | Input, text: str) -> None:
    """Focus a text field and insert `text` at its cursor, as if typed there."""
    target.focus()
    if isinstance(target, Input):
        target.insert_text_at_cursor(text)
    else:
        start, end = target.selection
        target.move_cursor(target.replace(text, start, end).end_location)


def _any_error(rows) -> bool:
    return any(row[5] == "error" for row in rows)  # GroupRow status


def __getattr__(name: str):
    # The dialogs are imported when first shown, not at start-up; `ApprovalScreen`
    # stays importable from here.
    if name == "ApprovalScreen":
        from slop_tui.ui.screens.dialogs import ApprovalScreen

        return ApprovalScreen
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The layout at any size (docs/usage.md, "The screen at every size"): the side panes
# take a share of the terminal (never less than their minimum), the conversation keeps
# MIN_CONVERSATION columns, and a pane that would squeeze it below gives way.
NARROW = 110  # below this many columns both side panes start hidden
MIN_CONVERSATION = 44
SHORT = 32  # below this many rows the gauge leaves out its chart (app.tcss)
LEFT_SHARE, LEFT_MIN = 0.25, 30
RIGHT_SHARES, RIGHT_MIN = (0.22, 0.28, 0.36, 0.44), 32  # alt+→ / alt+← step through them
# The app's keys in the footer, in this order (after the focused widget's own); a
# hidden pane's key comes right after help, a shown one's at the end.
FOOTER_ORDER = (
    "help",
    "focus_prompt",
    "focus_groups",
    "provider_dialog",
    "session_dialog",
    "search_history",
    "retry",
    "quit",
)
# Seconds the group list's highlight must rest before the gauge shows what dropping
# the group would save (see group_selected).
PROJECTION_REST = 0.25


class SlopApp(App):
    """The slop-tui workspace."""

    TITLE = "slop-tui"
    CSS_PATH = "app.tcss"
    COMMANDS = {SlopCommands}
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        Binding(
            "ctrl+p", "command_palette", "Palette", id="command_palette", show=False, priority=True
        ),
        Binding("f1", "help", "Help", id="help"),
        Binding("f2", "focus_prompt", "Prompt", id="focus_prompt"),
        Binding("f3", "focus_groups", "Groups", id="focus_groups"),
        Binding("f4", "provider", "Model", id="provider_dialog"),
        Binding("f5", "sessions", "Sessions", id="session_dialog"),
        # TextArea binds f6 (select line) and f7 (select all): without priority these
        # keys did nothing while the prompt, the scratchpad or the STATE editor had focus.
        Binding("f6", "search", "Search", id="search_history", priority=True),
        Binding("f7", "toggle_left", "Left pane", id="toggle_left", priority=True),
        Binding("f8", "toggle_right", "Right pane", id="toggle_right"),
        # alt+arrows work everywhere; ctrl+arrows move by word inside an editor.
        Binding("ctrl+right,alt+right", "side_wider", "Wider side", id="side_wider", show=False),
        Binding(
            "ctrl+left,alt+left", "side_narrower", "Narrower side", id="side_narrower", show=False
        ),
        Binding("f9", "focus_side", "Side pane", id="focus_side", show=False),
        Binding("escape", "cancel_turn", "Cancel turn", id="cancel_turn", show=False),
        # Undo and redo of the history work wherever the focused widget does not take
        # ctrl+z / ctrl+y itself: an editor keeps them for its text, except an empty
        # prompt (PromptArea passes them on). The group list shows them in the footer.
        # No plain letter outside a list takes anything away (docs/usage.md).
        Binding("ctrl+z", "undo", "Undo", id="undo", show=False),
        Binding("ctrl+y", "redo", "Redo", id="redo", show=False),
        Binding("ctrl+r", "retry", "Resend", id="retry"),
    ]

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
        super().__init__()
        self._db = db
        self._session_arg = session
        self._cwd = cwd
        self._env = env
        self._blink = blink
        self.workspace = None
        self.startup_error: str | None = None
        self.turns = TurnController(self)  # commands, turns, approvals (ui/turns.py)
        self.ready = False  # the ledger is open and the panes show it
        self.collector = CollectorPacing()  # full collections between keys, not during
        self._side_width = 1  # the index in RIGHT_SHARES
        self._panes = {"left": True, "right": True}  # which side panes the user wants
        self._narrow: bool | None = None
        self._projection: int | None = None  # the group list's latest Selected.saving
        self._projection_timer: Timer | None = None
        self._banner_text = ""
        self._banner_cause = ""
        self._status_of = None  # the (provider choice, session) the header last showed
        self._drawn_title = ""
        self._header = Header()
        self.theme_load = load_themes(user_themes_dir() if user_themes else None)
        register_themes(self, self.theme_load)
        self.theme = DEFAULT_THEME

    # -- layout ------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self._header
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Static("Sessions", classes="pane-title")
                yield SessionList(id="session-list")
                yield Static(
                    "Groups  ● window ◉ unsummarized Σ summary ○ out × dropped",
                    classes="pane-title",
                )
                yield GroupList(id="group-list")
            with Vertical(id="centre"):
                yield Static("", id="banner", markup=False)
                yield ConversationView(id="conversation")
                with VerticalScroll(id="output"):
                    yield Markdown("", id="output-text")
                yield PromptInput(id="prompt", blink=self._blink)
            with Vertical(id="right"):
                yield TokenGauge(id="gauge")
                yield Static("STATE", classes="pane-title")
                yield StatePane(id="state")
                yield Static("Scratchpad", classes="pane-title")
                yield ScratchpadEditor(id="scratchpad")
                yield Static("Context preview", classes="pane-title")
                yield ContextPreview(id="preview")
        yield KeyBar(id="keys")

    def on_resize(self, event) -> None:
        # Below NARROW columns both side panes start hidden (f7/f8, named in the footer,
        # open them); crossing back shows them again.
        narrow = event.size.width < NARROW
        if narrow != self._narrow:
            self._narrow = narrow
            self._panes = {"left": not narrow, "right": not narrow}
        self.fit_panes(event.size.width)
        self.query_one("#right").set_class(event.size.height < SHORT, "-short")
        self.redraw_status()

    def fit_panes(self, width: int, opened: str | None = None) -> None:
        """Size and show the side panes for a terminal `width`: each a share of it, the
        conversation at least MIN_CONVERSATION columns. When both do not fit, the one
        not just `opened` gives way (the right one on a resize); a lone pane narrows."""
        widths = {
            "left": max(LEFT_MIN, round(width * LEFT_SHARE)),
            "right": max(RIGHT_MIN, round(width * RIGHT_SHARES[self._side_width])),
        }
        room = width - MIN_CONVERSATION
        if self._panes["left"] and self._panes["right"] and sum(widths.values()) > room:
            gives_way = "left" if opened == "right" else "right"
            self._panes[gives_way] = False
            if opened is not None:
                key = self.key_for(f"toggle_{gives_way}", "")
                self.notify(
                    f"The {gives_way} pane gave way: the conversation keeps at least "
                    f"{MIN_CONVERSATION} columns ({key} brings it back).",
                    timeout=6,
                )
        for name, pane in (("left", "#left"), ("right", "#right")):
            widget = self.query_one(pane)
            widget.set_class(not self._panes[name], "-hidden")
            widget.styles.width = max(16, min(widths[name], room))
        self.refresh_bindings()  # the footer names the key of a hidden pane first

    def footer_rank(self, binding) -> float:
        """Where an app key stands in the footer (ui/widgets/keybar.py)."""
        pane = {"toggle_left": "left", "toggle_right": "right"}.get(binding.id or "")
        if pane is not None:  # a hidden pane's key right after help, a shown one's last
            return len(FOOTER_ORDER) + 1 if self._panes[pane] else 0.5
        if binding.id in FOOTER_ORDER:
            return FOOTER_ORDER.index(binding.id)
        return len(FOOTER_ORDER)

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

    def on_mount(self) -> None:
        from slop_tui.ui.startup import hold_first_frame

        hold_first_frame(self)  # the command's first frame shows the filled panes
        self.query_one(PromptInput).focus()
        self.open_workspace()

    @work(exclusive=True, group="open")
    async def open_workspace(self) -> None:
        from slop_tui.config import load_config
        from slop_tui.ledger import LedgerError
        from slop_tui.workspace import Workspace

        config = load_config(db=self._db, cwd=self._cwd, env=self._env)
        warnings = list(config.warnings)
        if config.keymap:  # an empty [keymap] changes nothing: skip importing every dialog
            from slop_tui.ui.keymap import apply_keymap
            from slop_tui.ui.screens import dialogs, help, search

            extra = (
                dialogs.ApprovalScreen,
                dialogs.ConfirmScreen,
                dialogs.ProviderScreen,
                dialogs.SessionScreen,
                search.SearchScreen,
                help.HelpScreen,
            )
            warnings += apply_keymap(self, config.keymap, extra)
        for warning in warnings:
            self.notify(warning, severity="warning", timeout=15)
        if config.untrusted:
            self.show_banner(
                f"{config.project_config} sets {', '.join(config.untrusted)}; ignored until "
                "you trust this folder (ctrl+p → Trust this folder's config)"
            )
        if note := self.theme_load.notification():
            self.notify(note, severity="warning", timeout=15)
        from slop_tui.ui.startup import first_screen_shown, release_first_frame

        try:
            self.workspace = await Workspace.open(
                config, self._session_arg, env=self._env, defer_writes=True
            )
            await self._show_workspace(config)
        except LedgerError as exc:  # e.g. a database with damaged pages: one banner
            if self.workspace is not None:
                await self.workspace.ledger.close()
                self.workspace = None
            self.startup_error = str(exc)
            self.show_banner(str(exc))
            return
        finally:
            release_first_frame(self)
        # What start-up built (Textual, the widgets, the first screen: ~1M objects) lives
        # as long as the app: frozen, no collection walks it again. From here on the
        # full collections run between the user's keys (ui/collector.py).
        self.collector.start()
        self.set_interval(0.5, self._pace_collector, name="collector")
        first_screen_shown(self)  # what the first screen left for later (ui/startup.py)
        if (
            await self.workspace.provider_choice()
        ).name == "demo" and not await self._has_history():
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

    async def _show_workspace(self, config) -> None:
        """Fill the screen from the workspace just opened."""
        assert self.workspace is not None
        for recovered in self.workspace.ledger.recovered:  # a killed process's turn, finished
            self.notify(recovered.note(), severity="warning", timeout=20)
        for warning in self.workspace.pop_warnings():  # provider settings, default_provider
            self.notify(warning, severity="warning", timeout=15)
        import asyncio

        # Probing bwrap starts a process (~30 ms): not on the event loop.
        await asyncio.to_thread(lambda: self.workspace.sandbox)
        name, warns = pick_theme(
            self.available_themes, await saved_theme(self.workspace.ledger), config.theme
        )
        self.theme = name
        for w in warns:
            self.notify(w, severity="warning")
        # No tokenizer here: building it costs ~0.4 s of CPU and ~46 MB. The panes
        # count with stored and cached counts (see refresh_context); the encoding is
        # built at the first submit (`_tokenizer`).
        history = await self.workspace.ledger.get_setting("prompt_history")
        if history:
            self.query_one(PromptInput).set_history(json.loads(history))
        await self.refresh_all(reload_conversation=True)

    def show_status(self, text: str) -> None:
        """The header's status line (session, provider, model, window, phase).

        Not through `App.sub_title`'s own refresh: that repaints the whole screen,
        45-80 ms at 120x40, at every turn's end and status change (bench/tui.py).
        Only the header's title is redrawn."""
        if text == self.sub_title and self._drawn_title == self.title:
            return
        self._drawn_title = self.title
        self.set_reactive(SlopApp.sub_title, text)
        if self._header.is_mounted:  # the workspace's own header (no DOM walk per status)
            self._header.query_one(HeaderTitle).update(self._header.format_title())

    def _pace_collector(self) -> None:
        self.collector.tick(busy=self.busy or bool(self.phase))

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
        await super().on_event(event)

    def on_key(self, event: events.Key) -> None:
        """Typing is safe: a printable key that nothing focused binds is typed into the
        screen's text field (the prompt, or the dialog's field), which takes the focus.

        Runs before the app's own binding check; a key some binding in the focus
        chain handles (the group list's `d`, a dialog's `y`) is left to it."""
        if not event.is_printable or not event.character or event.key in ("tab", "enter"):
            return
        if isinstance(self.focused, (TextArea, Input)):
            return  # an editor types it itself
        if event.key in self.screen.active_bindings:
            return
        target = self._typing_target()
        if target is None:
            return
        event.prevent_default()
        event.stop()
        _type_into(target, event.character)

    def on_paste(self, event: events.Paste) -> None:
        """A paste into a list or pane lands in the screen's text field, as typing does."""
        if isinstance(self.focused, (TextArea, Input)) or not event.text:
            return
        target = self._typing_target()
        if target is None:
            return
        event.stop()
        _type_into(target, event.text)

    def _typing_target(self) -> TextArea | Input | None:
        """Where stray typing goes: the prompt, or the first text field of a dialog."""
        screen = self.screen
        if screen is self.screen_stack[0]:
            return self.query_one(PromptInput).area
        fields = screen.query(Input)
        return fields.first() if fields else None

    async def _has_history(self) -> bool:
        return bool(await self.workspace.ledger.list_sessions())

    # -- refreshing panes ------------------------------------------------

    @contextmanager
    def _unless_closing(self) -> Iterator[None]:
        """Work still awaiting the ledger when the app shuts down finds its panes gone
        (NoMatches, or a MountError for the live turn); that is not an error."""
        try:
            yield
        except (NoMatches, WidgetError):
            if self.is_running:
                raise

    async def refresh_all(self, *, reload_conversation: bool = False) -> None:
        ws = self.workspace
        if ws is None or not self.is_running:
            return
        with self._unless_closing():
            # Read everything first, then show it in one go: an await between two pane
            # updates let a frame through, and each one laid out the whole screen.
            choice = await ws.provider_choice()
            sess = await ws.current()
            sessions = await ws.ledger.list_sessions()
            rows = await ws.ledger.group_rows(
                ws.session, SNIPPET_SOURCE, prompts_for_newest=PROMPTS_FIRST
            )
            state = await ws.ledger.current_state(ws.session)
            context = await self._read_context(choice)
            plan = context[0]
            # Only a group with an error row can hold a failed prompt: no query otherwise.
            failed = await ws.ledger.failed_prompts(ws.session) if _any_error(rows) else []
            if reload_conversation:
                # The group list's read gives the conversation its group ids too.
                await self.query_one(ConversationView).load(
                    ws, group_ids=[r[0] for r in rows], plan=plan
                )
            # From here on nothing awaits: the panes change in the same frame as the
            # conversation.
            self.show_status(self._status(choice, sess))
            self.query_one(SessionList).load(sessions, ws.session)
            group_list = self.query_one(GroupList)
            group_list.load_rows(rows, plan)
            group_list.fill_prompts(ws)  # the older groups' prompts, after this frame
            self.query_one(StatePane).set_state(state.content if state else None)
            pad = self.query_one(ScratchpadEditor)
            if pad.session != ws.session:
                pad.flush()  # unsaved edits belong to the session left (F6 jump, commands)
                pad.load(sess.scratchpad, session=ws.session)
            else:
                pad.external_update(sess.scratchpad)
            self._show_context(*context)
            newest_failed = failed[0] if failed else None
            if newest_failed != self.turns.failed_prompt:
                self.turns.failed_prompt = newest_failed
                self.refresh_bindings()  # the footer shows ctrl+r only while there is one

    async def refresh_context(self, choice=None) -> None:
        ws = self.workspace
        if ws is None or not self.is_running:
            return
        with self._unless_closing():
            self._show_context(*await self._read_context(choice or await ws.provider_choice()))

    async def _read_context(self, choice) -> tuple:
        """What the panes show: the plan of the next request, and whether its counts
        are estimates (never builds the tokenizer), the model's window, the prompt
        tokens per call, the last call's cached tokens and the background calls."""
        ws = self.workspace
        plan, estimated = await ws.display_plan(choice.strategy)
        info = ws.model_info(choice.model)
        last = await ws.ledger.last_usage(ws.session)
        cached = last.cached_tokens if last is not None else None
        series = await ws.ledger.prompt_token_series(ws.session)
        calls, prompt_tokens, completion_tokens = await ws.ledger.background_usage(ws.session)
        background = (calls, prompt_tokens + completion_tokens)
        return plan, estimated, info.context_window, series, cached, background

    def _show_context(self, plan, estimated: bool, window: int, series, cached, background) -> None:
        """Every pane that shows the next request draws the same plan."""
        self.query_one(TokenGauge).update_from(
            plan, window, series, cached, estimated=estimated, background=background
        )
        self.query_one(ContextPreview).set_prompt(plan.request, estimated=estimated)
        self.query_one(GroupList).set_plan(plan)
        self.query_one(ConversationView).set_plan(plan)
        if estimated and self.ready:
            # Something changed after start-up that no stored count covers: count
            # it exactly, off the event loop (never on the start path).
            self._exact_counts()

    async def _tokenizer(self) -> None:
        """Build the tokenizer in a thread (once); the first submit waits for it. A
        gauge that shows estimates is then counted again, exactly."""
        import asyncio

        from slop_tui.context.tokens import encoding_loaded, get_encoding

        if not encoding_loaded():
            await asyncio.to_thread(get_encoding)
            with self._unless_closing():
                if self.is_running and self.query_one(TokenGauge).estimated:
                    self.call_later(self.refresh_context)

    @work(exclusive=True, group="tokenizer")
    async def _exact_counts(self) -> None:
        await self._tokenizer()

    def _status(self, choice, sess) -> str:
        """The header's line: what the app is doing first (idle, streaming, running
        tools, retrying in N s, summarizing, compacting), then the session, the
        provider and model, the window. Shortened to fit the header's width: the
        words go first, then the app's name, then the end of the line."""
        self._status_of = (choice, sess)
        phase = self.phase or "idle"
        session = self.workspace.session
        lane = "" if sess.lane == "main" else f" · lane {sess.lane}"
        # Without an OS sandbox every shell command asks first: say so where it is always seen.
        shell = "" if self.workspace.sandbox.available else " · shell: NO SANDBOX"
        mcp = self.workspace.mcp_if_built
        outside = mcp.outside_sandbox() if mcp is not None else []
        if outside:  # MCP servers started as programs of their own, without bubblewrap
            shell += f" · mcp NO SANDBOX: {', '.join(outside)}"
        window = sess.window_size or "all"
        room = max(20, self.size.width - 12)  # the header's icon and margins
        demo = choice.name == "demo"
        long = "DEMO (offline, scripted)" if demo else f"{choice.name} · {choice.model}"
        short = "demo" if demo else choice.model
        for label, win in ((long, "window"), (short, "win")):
            text = f"{phase} · {session} · {label} · {win} {window}{lane}{shell}"
            if len(text) + len(self.TITLE) + 3 <= room:
                self._title_shown(True)
                return neutralise(text)
        self._title_shown(False)
        return neutralise(text)

    def _title_shown(self, shown: bool) -> None:
        title = self.TITLE if shown else ""
        if self.title != title:
            self.set_reactive(SlopApp.title, title)

    def redraw_status(self) -> None:
        """The header again, with the phase now (ui/turns.py calls it as it changes)."""
        if self._status_of is not None and self.workspace is not None and self.is_running:
            with self._unless_closing():
                self.show_status(self._status(*self._status_of))

    def show_banner(self, text: str, *, cause: str = "") -> None:
        """The banner above the conversation ("" hides it). `cause` says what it is
        about ("turn": a provider's error, "config", "startup"), so it can be cleared
        when that is gone (`clear_banner`)."""
        self._banner_text = text
        self._banner_cause = cause if text else ""
        banner = self.query_one("#banner", Static)
        banner.update(f"⚠ {neutralise(text)}  (Esc or click to dismiss)" if text else "")
        banner.set_class(bool(text), "-shown")

    def clear_banner(self, cause: str) -> None:
        """Hide the banner if it is about `cause` (a new provider or session: "turn")."""
        if self._banner_text and self._banner_cause == cause:
            self.show_banner("")

    async def show_output(self, command: str, text: str) -> None:
        """A command's result, above the prompt (Esc closes it)."""
        out = self.query_one("#output", VerticalScroll)
        if not text and not out.has_class("-shown"):
            return
        # Line-by-line output (/context show, a STATE) keeps its line breaks.
        await self.query_one("#output-text", Markdown).update(
            keep_lines(neutralise(f"`{command.strip()}`\n\n{text}")) if text else ""
        )
        out.set_class(bool(text), "-shown")
        out.scroll_home(animate=False)

    def on_click(self, event) -> None:
        if getattr(event.widget, "id", None) == "banner":
            self.show_banner("")

    # -- commands and prompts ------------------------------------------

    async def run_command(self, text: str) -> None:
        """Run a line exactly as if it was typed in the prompt (ui/turns.py)."""
        await self.turns.run_command(text)

    def key_for(self, binding_id: str, default: str) -> str:
        """The (first) key of the app binding with this id, as remapped by `[keymap]`,
        for a sentence ("ctrl+y brings it back"); `default` when it is not bound now."""
        for key, active in self.screen_stack[0].active_bindings.items():
            if active.binding.id == binding_id:
                return key
        return default

    @on(PromptInput.Submitted)
    async def prompt_submitted(self, event: PromptInput.Submitted) -> None:
        text = event.text
        if not text.strip() or self.workspace is None:
            return
        if self.busy and not text.lstrip().startswith("/"):
            self.notify("A turn is running; Esc cancels it. Your text is kept.", severity="warning")
            return
        event.prompt_input.clear()
        await self._remember_prompt(text)
        await self.run_command(text)

    async def _remember_prompt(self, text: str) -> None:
        prompt = self.query_one(PromptInput)
        history = [h for h in prompt.history if h != text][-199:] + [text]
        prompt.set_history(history)
        await self.workspace.ledger.set_setting("prompt_history", json.dumps(history))

    def prefill_prompt(self, text: str) -> None:
        prompt = self.query_one(PromptInput)
        prompt.restore(text)
        prompt.focus()

    async def choose_theme(self, name: str) -> None:
        if self.workspace is not None:
            await save_theme(self.workspace.ledger, name)

    def palette_actions(self):
        return [
            (
                "Drop or restore the highlighted group",
                "Soft drop (reversible)",
                self.action_toggle_drop,
            ),
            ("Undo the last group", "/undo (to the trash)", self.action_undo),
            ("Redo", "/redo: bring back what was last taken away", self.action_redo),
            ("Show the trash", "/trash list", partial(self.run_command, "/trash list")),
            ("Empty the trash…", "Asks first: the one hard delete", self.turns.confirm_empty_trash),
            ("Switch provider or model…", "Provider dialog", self.action_provider),
            ("Sessions…", "Switch, new, clone or remove a session", self.action_sessions),
            ("Search history…", "Across all sessions", self.action_search),
            ("Copy the scratchpad", "System clipboard or OSC 52", self.action_copy_scratchpad),
            ("Copy the whole context", "The exact next request", self.action_copy_context),
            ("Export session as Markdown", "/export markdown", self.action_export_markdown),
            ("Export session as JSON", "/export json", self.action_export_json),
            ("Toggle the left pane", "Groups and sessions", self.action_toggle_left),
            (
                "Toggle the right pane",
                "STATE, scratchpad, gauge, preview",
                self.action_toggle_right,
            ),
            (
                "Trust this folder's config…",
                "Let .slop/config.toml set providers, keys and approvals",
                self.action_trust_project,
            ),
            ("Help", "Every key and command", self.action_help),
        ]

    # -- turns (ui/turns.py) ------------------------------------------------

    def run_turn(self, text: str):
        return self.turns.run_turn(text)

    async def ask_approval(self, call) -> str:
        return await self.turns.ask_approval(call)

    @property
    def busy(self) -> bool:
        return self.turns.busy

    @property
    def phase(self) -> str:
        return self.turns.phase

    @property
    def failed_prompt(self) -> int | None:
        return self.turns.failed_prompt

    @property
    def orchestrator(self):
        return self.turns.orchestrator

    @orchestrator.setter
    def orchestrator(self, orchestrator) -> None:
        self.turns.orchestrator = orchestrator

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
        await self._reload_config()
        self.notify(f"Trusted {config.project_config}; its settings apply now.")

    async def _reload_config(self) -> None:
        from slop_tui.config import load_config

        ws = self.workspace
        config = load_config(db=self._db, cwd=self._cwd, env=self._env)
        ws.config = config
        ws._sandbox = None  # [tools] sandbox / shell_network may have changed
        if self.turns.orchestrator is not None:
            self.turns.orchestrator.approve = config.approve
        self.show_banner("")
        await self.refresh_all()

    def action_cancel_turn(self) -> None:
        if self.turns.cancel():
            self.notify("Turn cancelled; the partial answer is kept as interrupted.")
        elif self.query_one("#output").has_class("-shown"):
            self.query_one("#output").remove_class("-shown")
        elif self.query_one("#banner", Static).has_class("-shown"):
            self.show_banner("")

    # -- group list intents ------------------------------------------------

    @on(GroupList.DropToggled)
    async def drop_toggled(self, event: GroupList.DropToggled) -> None:
        verb = "drop" if event.dropped else "restore"
        await self.run_command(f"/context {verb} {event.group_id}")

    @on(GroupList.RemoveRequested)
    async def remove_requested(self, event: GroupList.RemoveRequested) -> None:
        # To the trash at once: the announcement names the key that brings it back.
        await self.run_command(f"/message remove {event.group_id}")

    @on(GroupList.ShowRequested)
    async def show_requested(self, event: GroupList.ShowRequested) -> None:
        await self.query_one(ConversationView).show_group(event.group_id)

    @on(GroupList.Selected)
    def group_selected(self, event: GroupList.Selected) -> None:
        # The gauge's projection is drawn once the highlight has rested for
        # PROJECTION_REST, never in the frame of the key that moved it (or focused
        # the list): drawn in the same frame as the list, the two far-apart changes
        # made Textual repaint the rectangle around them, i.e. every pane (~34
        # widgets, 20-30 ms). Taking it away (leaving the list) is immediate.
        self._projection = (event.group_id, event.dropped) if event.group_id is not None else None
        if self._projection_timer is not None:
            self._projection_timer.stop()
            self._projection_timer = None
        if self._projection is not None:
            self._projection_timer = self.set_timer(PROJECTION_REST, self._project)
        else:
            with self._unless_closing():
                self.query_one(TokenGauge).set_projection(None)

    def _project(self) -> None:
        self._projection_timer = None
        if self._projection is not None and self.workspace is not None:
            self._show_projection(self._projection)

    @work(exclusive=True, group="projection")
    async def _show_projection(self, target: tuple[int, bool]) -> None:
        """What `d` would do to the highlighted group: the plan built again with that
        edit applied, against the plan shown."""
        from slop_tui.workspace import Edit

        gid, dropped = target
        ws = self.workspace
        edit = Edit.restore(gid) if dropped else Edit.drop(gid)
        current, _ = await ws.display_plan()
        projected, _ = await ws.display_plan(edit=edit)
        if self._projection != target or not self.is_running:
            return  # the highlight moved on meanwhile
        saving = current.request_tokens - projected.request_tokens
        with self._unless_closing():
            self.query_one(TokenGauge).set_projection(saving, "restore" if dropped else "drop")

    @on(SessionList.SessionChosen)
    async def session_chosen(self, event: SessionList.SessionChosen) -> None:
        self.query_one(ScratchpadEditor).flush()
        await self.run_command(f"/session activate {event.name}")

    # -- side panes --------------------------------------------------------

    @on(StatePane.StateEdited)
    async def state_edited(self, event: StatePane.StateEdited) -> None:
        from slop_tui.commands import dispatch

        result = await dispatch(self.workspace, f"/state set {event.text}")
        self.notify(result.text, severity="information" if result.ok else "error")
        await self.refresh_context()

    @on(ScratchpadEditor.ScratchpadSaved)
    async def scratchpad_saved(self, event: ScratchpadEditor.ScratchpadSaved) -> None:
        ws = self.workspace
        session = event.session or ws.session
        if session != ws.session and await ws.ledger.get_session(session) is None:
            return  # removed while the save was on its way: do not bring it back
        stored = (await ws.ledger.session_or_default(session)).scratchpad
        if stored.strip() != (event.base or "").strip():
            pad = self.query_one(ScratchpadEditor)
            if pad.session == session:  # not another session's editor
                pad.external_update(stored)
            return
        from slop_tui.commands import dispatch

        target = ws if session == ws.session else ws.for_session(session)
        result = await dispatch(target, f"/session scratchpad set {event.text}")
        if not result.ok:
            self.notify(result.text, severity="error", timeout=10)
        await self.refresh_context()

    @on(ContextPreview.JsonRequested)
    def json_requested(self, event: ContextPreview.JsonRequested) -> None:
        self._load_json()

    @work(group="preview")
    async def _load_json(self) -> None:
        from slop_tui.commands import dispatch

        await self._tokenizer()
        result = await dispatch(self.workspace, "/context show --json")
        if not self.is_running:
            return  # the app closed while the body was built
        with self._unless_closing():
            if result.ok:
                self.query_one(ContextPreview).set_json(result.data)
            else:
                self.notify(result.text, severity="error")

    @on(CopyRequested)
    async def copy_requested(self, event: CopyRequested) -> None:
        await self._copy(event.text, event.what)

    async def _copy(self, text: str, what: str) -> None:
        from slop_tui.ui.clipboard import copy_text_async, describe

        method = await copy_text_async(self, text)
        self.notify(f"Copied {what}: {describe(method)}")

    # -- actions -------------------------------------------------------------

    def action_focus_prompt(self) -> None:
        self.query_one(PromptInput).focus()

    def action_focus_groups(self) -> None:
        self.query_one(GroupList).focus()

    def action_focus_side(self) -> None:
        # The editor is a container; its TextArea is what takes the focus.
        self.query_one(ScratchpadEditor).area.focus()

    def action_toggle_left(self) -> None:
        self._toggle_pane("left")

    def action_toggle_right(self) -> None:
        self._toggle_pane("right")

    def _toggle_pane(self, name: str) -> None:
        self._panes[name] = not self._panes[name]
        self.fit_panes(self.size.width, opened=name if self._panes[name] else None)

    def _set_side_width(self, step: int) -> None:
        self._side_width = max(0, min(len(RIGHT_SHARES) - 1, self._side_width + step))
        self.fit_panes(self.size.width, opened="right" if self._panes["right"] else None)

    def action_side_wider(self) -> None:
        self._set_side_width(+1)

    def action_side_narrower(self) -> None:
        self._set_side_width(-1)

    async def action_toggle_drop(self) -> None:
        group = self.query_one(GroupList).highlighted_group
        if group is not None:
            verb = "restore" if group.status == "dropped" else "drop"
            await self.run_command(f"/context {verb} {group.group_id}")

    def action_reply(self) -> None:
        """Start a reply to the highlighted group: its own lane, the group quoted."""
        group = self.query_one(GroupList).highlighted_group
        if group is None:
            self.notify("Highlight a group in the groups pane first (f3).", severity="warning")
            return
        self.prefill_prompt(f"/reply {group.group_id} ")

    async def action_undo(self) -> None:
        await self._history_key("/undo")

    async def action_redo(self) -> None:
        await self._history_key("/redo")

    async def _history_key(self, command: str) -> None:
        """ctrl+z / ctrl+y on the history (/undo, /redo); not while a dialog is open."""
        if self.screen is not self.screen_stack[0]:
            raise SkipAction()
        await self.run_command(command)

    async def action_retry(self) -> None:
        await self.run_command("/retry")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "retry":
            return self.failed_prompt is not None  # shown only when there is one
        return True

    async def _change_window(self, step: int) -> None:
        # 0 is the full history, the largest window: ] there changed it to 1 group and
        # [ at 1 group changed it to the full history.
        sess = await self.workspace.current()
        size = sess.window_size
        if size == 0:
            if step > 0:
                self.notify("The window is the full history already.")
                return
            plan = self.query_one(GroupList).plan
            size = len(plan.window_groups) if plan is not None else 1
        await self.run_command(f"/context window {max(1, size + step)}")

    async def action_window_up(self) -> None:
        await self._change_window(+1)

    async def action_window_down(self) -> None:
        await self._change_window(-1)

    def action_help(self) -> None:
        from slop_tui.ui.screens.help import HelpScreen, binding_rows

        self.push_screen(HelpScreen(binding_rows(self)))

    @work(group="dialogs")
    async def action_provider(self) -> None:
        from slop_tui.ui.screens.dialogs import ProviderScreen, provider_dialog_args

        choices, current, hidden = await provider_dialog_args(self.workspace)
        result = await self.push_screen_wait(ProviderScreen(choices, current, hidden))
        if result:
            await self.run_command(f"/provider {result[0]} {result[1]}")

    @work(group="dialogs")
    async def action_sessions(self) -> None:
        from slop_tui.ui.screens.dialogs import SessionScreen

        ws = self.workspace
        result = await self.push_screen_wait(
            SessionScreen(await ws.ledger.list_sessions(), ws.session)
        )
        if result:
            action, name = result
            verb = {"switch": "activate", "new": "activate"}.get(action, action)
            if action != "remove":
                # A save racing `/session remove` brought the removed session back; after
                # the removal, refresh_all's flush is dropped by scratchpad_saved instead.
                self.query_one(ScratchpadEditor).flush()
            await self.run_command(f"/session {verb} {name}")

    @work(group="dialogs")
    async def action_search(self) -> None:
        from slop_tui.ui.screens.search import SearchScreen

        result = await self.push_screen_wait(SearchScreen(self.workspace))
        if result:
            session, gid = result
            if session != self.workspace.session:
                await self.run_command(f"/session activate {session}")
            if gid is not None:
                await self.query_one(ConversationView).show_group(gid)
                self.query_one(GroupList).select_group(gid)

    async def action_copy_scratchpad(self) -> None:
        await self._copy(self.query_one(ScratchpadEditor).text, "the scratchpad")

    async def action_copy_context(self) -> None:
        from slop_tui.context import render_prompt

        await self._tokenizer()
        prompt = await self.workspace.prompt()
        await self._copy(render_prompt(prompt), "the whole context")

    async def action_export_markdown(self) -> None:
        await self.run_command("/export markdown")

    async def action_export_json(self) -> None:
        await self.run_command("/export json")

    async def action_quit(self) -> None:
        await self._save_scratchpad()
        self.exit()

    async def _save_scratchpad(self) -> None:
        """Never lose a keystroke: unsaved scratchpad edits are written before exit."""
        ws = self.workspace
        pads = self.query(ScratchpadEditor)
        if ws is None or not pads:
            return
        pad = pads.first()
        if pad.dirty:
            await ws.ledger.set_scratchpad(pad.session or ws.session, pad.text)

    async def on_unmount(self) -> None:
        self.collector.stop()
        ws = self.workspace
        if ws is None:
            return
        # The ledger stays open until a running turn has stored its partial answer.
        await self.turns.close()
        await ws.close()


def run_app(db: str | None = None, session: str | None = None) -> int:
    app = SlopApp(db=db, session=session)
    app.run()
    return 1 if app.startup_error else 0
