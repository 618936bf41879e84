"""The workspace screen: groups and sessions on the left, the conversation in the
middle, STATE, scratchpad, token gauge and context preview on the right.

It composes the panes, lays them out for the terminal's size (ui/layout.py), fills
them from the workspace and handles what they ask for (each intent is the slash
command the prompt would run, through the app's turn controller). The turn
controller talks to it only through the typed messages of ui/messages.py: the
phase, the status, the banner, a command's result, an approval, the turn's events
(which reach the conversation first and bubble up here) and the turn's end.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import WidgetError
from textual.widgets import Header, Static

from slop_tui.records import Changed
from slop_tui.ui import messages
from slop_tui.ui.frames import frame_drawn
from slop_tui.ui.layout import MIN_CONVERSATION, PROMPTS_FIRST, SHORT, SNIPPET_SOURCE, PaneLayout
from slop_tui.ui.screens.workspace_sides import SidePanes
from slop_tui.ui.status import TITLE, status_line
from slop_tui.ui.text import keep_lines, neutralise
from slop_tui.ui.widgets.conversation import ConversationView, CopyRequested
from slop_tui.ui.widgets.keybar import KeyBar
from slop_tui.ui.widgets.prompt import PromptInput

if TYPE_CHECKING:
    # The side panes' widgets are imported after the first frame (workspace_sides.py).
    from slop_tui.ui.widgets.anchors import ScratchpadEditor, StatePane
    from slop_tui.ui.widgets.gauge import TokenGauge
    from slop_tui.ui.widgets.groups import GroupList, SessionList
    from slop_tui.ui.widgets.preview import ContextPreview
    from slop_tui.ui.widgets.sideswitch import SideSwitch

# The prompt's text when the app quit unsent (app_state): the next start shows it again.
KEY_PROMPT_DRAFT = "prompt_draft"
KEY_PROMPT_HISTORY = "prompt_history"
# How often the screen asks SQLite whether another process wrote to the ledger.
LEDGER_POLL = 0.5
# Seconds the group list's highlight must rest before the gauge shows what dropping
# the group would save (see on_group_list_selected).
PROJECTION_REST = 0.25


class WorkspacePanes(Screen):
    """The panes of the workspace: composed, laid out for the terminal's size, filled
    from the workspace (and again when another process writes to the ledger), the
    header, the banner and the output panel, and the keys that move between panes.
    What the panes and the turn controller ask for is `WorkspaceScreen`'s."""

    def __init__(self, *, blink: bool = True) -> None:
        super().__init__()
        self._blink = blink
        self.layout_state = PaneLayout()
        self.header = Header()
        self._projection: tuple[int, bool] | None = None  # the highlighted group, dropped?
        self._projection_timer: Timer | None = None
        self.banner_text = ""
        self._banner_cause = ""
        self._status_of = None  # the (provider choice, session) the header last showed
        self._drawn_title = ""
        self._data_version: int | None = None  # the ledger's, as the panes show it
        self._draft_shown = False  # the prompt shows the text kept at the last quit
        self.side_panes_filled = False  # shown (`SidePanes.reveal`)
        self.side_panes_mounted = False  # their widgets mounted (`SidePanes.mount`)
        self.sides = SidePanes(self)

    # -- layout ------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self.header
        with Horizontal(id="main"):
            # The side panes are laid out at their widths in the first frame, empty;
            # their widgets are mounted after it and drawn once filled
            # (workspace_sides.py): no placeholder text, no gauge growing in view.
            yield Vertical(id="left", classes="-filling")
            with Vertical(id="centre"):
                yield Static("", id="banner", markup=False)
                yield ConversationView(id="conversation")
                yield VerticalScroll(id="output")  # its text: at the first command's output
                yield PromptInput(id="prompt", blink=self._blink, hold_after_submit=True)
            yield Vertical(id="right", classes="-part-state -filling")
        yield KeyBar(id="keys")

    # The side panes' widgets, once mounted (`SidePanes.mount`).

    @property
    def group_list(self) -> GroupList:
        return self.query_one("#group-list")

    @property
    def session_list(self) -> SessionList:
        return self.query_one("#session-list")

    @property
    def gauge(self) -> TokenGauge:
        return self.query_one("#gauge")

    @property
    def state_pane(self) -> StatePane:
        return self.query_one("#state")

    @property
    def scratchpad(self) -> ScratchpadEditor:
        return self.query_one("#scratchpad")

    @property
    def preview(self) -> ContextPreview:
        return self.query_one("#preview")

    def on_mount(self) -> None:
        self.query_one(PromptInput).focus()
        self.app.open_workspace()

    def on_resize(self, event) -> None:
        self.layout_state.resized(event.size.width)
        self.fit_panes(event.size.width)
        self.layout_state.short = event.size.height < SHORT
        self.query_one("#right").set_class(self.layout_state.short, "-short")
        self.sides.show_part(self.layout_state.side_part)
        self.redraw_status()

    def fit_panes(self, width: int, opened: str | None = None) -> None:
        """Size and show the side panes for a terminal `width` (ui/layout.py)."""
        widths, gave_way = self.layout_state.fit(width, opened)
        if gave_way is not None and opened is not None:
            key = self.app.key_for(f"toggle_{gave_way}", "")
            self.notify(
                f"The {gave_way} pane gave way: the conversation keeps at least "
                f"{MIN_CONVERSATION} columns ({key} brings it back).",
                timeout=6,
            )
        for name in ("left", "right"):
            pane = self.query_one(f"#{name}")
            pane.set_class(not self.layout_state.shown[name], "-hidden")
            pane.styles.width = widths[name]
        self.conversation.expected_width = width - sum(
            widths[name] for name in widths if self.layout_state.shown[name]
        )
        self.app.refresh_bindings()  # the footer names the key of a hidden pane first

    def footer_rank(self, binding) -> float:
        """Where a workspace key stands in the footer (ui/widgets/keybar.py)."""
        return self.layout_state.footer_rank(binding.id)

    # -- filling the panes ---------------------------------------------------

    @property
    def workspace(self):
        return self.app.workspace

    @property
    def conversation(self) -> ConversationView:
        return self.query_one(ConversationView)

    @contextmanager
    def unless_closing(self) -> Iterator[None]:
        """Work still awaiting the ledger when the app shuts down finds its panes gone
        (NoMatches, or a MountError for the live turn); that is not an error."""
        try:
            yield
        except (NoMatches, WidgetError):
            if self.app.is_running:
                raise

    async def show_conversation(self, prompt_history: list[str], draft: str = "") -> None:
        """The first screen of the workspace just opened: the conversation's newest
        groups, the header and the prompt (with its history, and the text it held
        unsent when the app last quit, `draft`); the side panes are empty containers
        at their widths. Their widgets are mounted and filled after this frame
        (`show_side_panes`): neither they nor the plan of the next request they show
        (the repository map, the file tree, the counts) are on the first frame's
        path."""
        prompt = self.query_one(PromptInput)
        if prompt_history:
            prompt.set_history(prompt_history)
        if draft:  # what was typed at start-up goes on after it, on a line of its own
            typed = prompt.text
            prompt.restore(f"{draft}\n{typed}" if typed else draft)
            self._draft_shown = True
        ws = self.workspace
        with self.unless_closing():
            # What another process writes from here on shows: the ledger poll, started
            # with the side panes, compares against the version these panes were read at.
            self._data_version = await ws.ledger.data_version()
            # The group ids only: the group list's rows (each group's counts, status and
            # prompt) are read with the side panes.
            await self.query_one(ConversationView).load(ws.history())
            self.show_status(await ws.provider_choice(), await ws.current())

    async def show_side_panes(self) -> None:
        """After the conversation's frame: every side pane filled in one frame
        (`SidePanes.fill`); from then on a write of another process (`slop-tui exec`, a
        second workspace) shows within a second."""
        await self.sides.fill()
        self.set_interval(LEDGER_POLL, self._check_ledger, name="ledger-watch")

    async def _check_ledger(self) -> None:
        """Reload the panes when another connection committed to the ledger (SQLite's
        `data_version` moved); during a turn of this app, after it."""
        ws = self.workspace
        if ws is None or not self.app.is_running or self.app.turns.busy:
            return
        try:
            version = await ws.ledger.data_version()
        except (ValueError, sqlite3.Error):
            return  # the ledger closed as the app ends
        if self._data_version is None:
            self._data_version = version
        elif version != self._data_version:
            self._data_version = version
            await ws.reload_pending_handoff()
            await self.refresh_all(reload_conversation=True)

    async def refresh_all(
        self, changed: Changed = Changed.ALL, *, reload_conversation: bool = False
    ) -> None:
        """Draw the panes again from one read of the workspace for `changed`."""
        ws = self.workspace
        if ws is None or not self.app.is_running:
            return
        with self.unless_closing():
            # Read everything first, then show it in one go: an await between two pane
            # updates let a frame through, and each one laid out the whole screen.
            snap = await ws.snapshot(
                changed, rows_prompt_chars=SNIPPET_SOURCE, prompts_for_newest=PROMPTS_FIRST
            )
            if reload_conversation and snap.rows is not None:
                # The group list's read gives the conversation its group ids too.
                await self.query_one(ConversationView).load(
                    ws.history(), group_ids=[r[0] for r in snap.rows], plan=snap.plan
                )
            # From here on nothing awaits: the panes change in the same frame as the
            # conversation.
            self.sides.show(snap)

    async def refresh_context(self) -> None:
        """The panes that show the next request (after an edit of STATE or the scratchpad)."""
        ws = self.workspace
        if ws is None or not self.app.is_running:
            return
        with self.unless_closing():
            self.sides.show_context(await ws.snapshot(Changed.NONE))

    @work(exclusive=True, group="tokenizer")
    async def count_exactly(self) -> None:
        """The figures counted exactly, off the event loop (the side panes ask)."""
        async with self.app.turns.exact_counts():  # counts again once built
            pass

    def counts_are_estimates(self) -> bool:
        return self.gauge.estimated

    # -- the header, the banner and the output panel ---------------------------

    def show_status(self, choice, sess) -> None:
        """The header's status line (session, provider, model, window, phase).

        Not through `App.sub_title`'s own refresh: that repaints the whole screen,
        45-80 ms at 120x40, at every turn's end and status change (bench/tui.py).
        Only the header's title is redrawn."""
        self._status_of = (choice, sess)
        ws = self.workspace
        text, titled = status_line(
            self.app.turns.phase,
            ws.session,
            choice,
            sess,
            sandboxed=ws.sandboxed,
            width=self.app.size.width,
            # Started in a subfolder: the repository root's ledger is used, say which.
            root="" if ws.config.started_in is None else ws.config.project_root.name,
            cost=ws.cost_label(),
            mcp_outside=mcp.outside_sandbox() if (mcp := ws.mcp_if_built) is not None else (),
        )
        self.app.set_header(text, TITLE if titled else "")

    def redraw_status(self) -> None:
        """The header again, with the phase now."""
        if self._status_of is not None and self.workspace is not None and self.app.is_running:
            with self.unless_closing():
                self.show_status(*self._status_of)

    async def _restatus(self) -> None:
        ws = self.workspace
        if ws is not None and self.app.is_running:
            with self.unless_closing():
                self.show_status(await ws.provider_choice(), await ws.current())

    def show_banner(self, text: str, *, cause: str = "") -> None:
        """The banner above the conversation ("" hides it). `cause` says what it is
        about ("turn": a provider's error, "config", "startup"), so it can be cleared
        when that is gone (`clear_banner`)."""
        self.banner_text = text
        self._banner_cause = cause if text else ""
        banner = self.query_one("#banner", Static)
        banner.update(f"⚠ {neutralise(text)}  (Esc or click to dismiss)" if text else "")
        banner.set_class(bool(text), "-shown")

    def clear_banner(self, cause: str) -> None:
        """Hide the banner if it is about `cause` (a new provider or session: "turn")."""
        if self.banner_text and self._banner_cause == cause:
            self.show_banner("")

    async def show_output(self, command: str, text: str) -> None:
        """A command's result, above the prompt (Esc closes it)."""
        out = self.query_one("#output", VerticalScroll)
        if not text and not out.has_class("-shown"):
            return
        # Line-by-line output (/context show, a STATE) keeps its line breaks.
        await (await self.sides.output_text()).update(
            keep_lines(neutralise(f"`{command.strip()}`\n\n{text}")) if text else ""
        )
        out.set_class(bool(text), "-shown")
        out.scroll_home(animate=False)

    def on_click(self, event) -> None:
        if getattr(event.widget, "id", None) == "banner":
            self.show_banner("")

    # -- the turn controller's messages -------------------------------------

    def prefill_prompt(self, text: str) -> None:
        prompt = self.query_one(PromptInput)
        prompt.restore(text)
        prompt.focus()

    def action_focus_prompt(self) -> None:
        self.query_one(PromptInput).focus()

    def _reveal(self, pane: str) -> None:
        """Show a hidden side pane before its keyboard is taken: the keys never go to
        a list or an editor the user cannot see."""
        if not self.layout_state.shown[pane]:
            self.fit_panes(self.app.size.width, opened=self.layout_state.toggle(pane))

    def action_focus_groups(self) -> None:
        self._reveal("left")
        self.group_list.focus()

    def action_focus_side(self) -> None:
        """The side pane's keyboard: the scratchpad editor; on a short terminal the shown
        part, and the next part when the shown one has the focus already."""
        self._reveal("right")
        layout = self.layout_state
        if not layout.short:
            self.scratchpad.area.focus()  # the editor's TextArea
            return
        if self.sides.part_has_focus(layout.side_part):
            layout.next_part()
        self.sides.show_part(layout.side_part)
        self.sides.part_focus(layout.side_part).focus()

    def on_side_switch_chosen(self, message: SideSwitch.Chosen) -> None:
        self.layout_state.side_part = message.part
        self.sides.show_part(message.part)

    def action_toggle_left(self) -> None:
        self.fit_panes(self.app.size.width, opened=self.layout_state.toggle("left"))

    def action_toggle_right(self) -> None:
        self.fit_panes(self.app.size.width, opened=self.layout_state.toggle("right"))

    def action_side_wider(self) -> None:
        self.fit_panes(self.app.size.width, opened=self.layout_state.step_side(+1))

    def action_side_narrower(self) -> None:
        self.fit_panes(self.app.size.width, opened=self.layout_state.step_side(-1))

    def action_cancel_turn(self) -> None:
        if self.app.turns.cancel():
            return  # the turn's notice says what it kept (Orchestrator._interrupted_notice)
        elif self.query_one("#output").has_class("-shown"):
            self.query_one("#output").remove_class("-shown")
        elif self.query_one("#banner", Static).has_class("-shown"):
            self.show_banner("")


class WorkspaceScreen(WorkspacePanes):
    """The panes of the workspace and their handlers."""

    HELP_TITLE = "Everywhere"  # F1 lists these keys with the app's: they work on every pane
    BINDINGS = [
        Binding("f2", "focus_prompt", "Prompt", id="focus_prompt"),
        Binding("f3", "focus_groups", "Groups", id="focus_groups"),
        Binding("f4", "app.provider", "Model", id="provider_dialog"),
        Binding("f5", "app.sessions", "Sessions", id="session_dialog"),
        # TextArea binds f6 (select line) and f7 (select all): without priority these
        # keys did nothing while the prompt, the scratchpad or the STATE editor had focus.
        Binding("f6", "app.search", "Search", id="search_history", priority=True),
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

    @on(messages.PhaseChanged)
    def phase_changed(self, _message: messages.PhaseChanged) -> None:
        self.redraw_status()

    @on(messages.PanesStale)
    async def panes_stale(self, _message: messages.PanesStale) -> None:
        await self.refresh_all(reload_conversation=False)
        await self._restatus()

    @on(messages.BannerRequested)
    def banner_requested(self, message: messages.BannerRequested) -> None:
        if message.clear_only:
            self.clear_banner(message.cause)
        else:
            self.show_banner(message.text, cause=message.cause)

    async def run_command(self, line: str):
        """Run a line as if typed in the prompt, and report it (the panes' intents);
        its `CommandResult`, or None when there was nothing to report."""
        turns = self.app.turns
        await self.show_output(line, "")  # the panel shows the last command's output
        result = await turns.execute(line)
        if result is not None:
            await self.report(line, result)
            turns.reported(result)
        return result

    @on(messages.CommandFinished)
    async def command_finished(self, message: messages.CommandFinished) -> None:
        try:
            await self.report(message.line, message.result)
        finally:
            message.done.set()

    async def report(self, line: str, result) -> None:
        """A command's result: a notice, the output panel, and the panes it changed."""
        await self.show_output(line, "")  # the panel shows the last command's output only
        app = self.app
        if result.send is None:
            if not result.ok:
                app.notify(result.text, severity="error", timeout=10)
            elif result.revert:
                # A destructive edit is announced with the one key that reverts it.
                app.notify(result.announcement(app.key_for("redo", "/redo")), timeout=10)
            elif result.changed and result.text and "\n" not in result.text.strip():
                # An edit's one-line report is a notice that goes away by itself; the
                # panel above the prompt is for what a command shows (lists, help).
                app.notify(result.text, timeout=8)
            elif result.text:
                await self.show_output(line, result.text)
        if result.changed & (Changed.PROVIDER | Changed.SESSION):
            self.clear_banner("turn")  # a provider's error does not apply any more
        if result.changed:
            reload = result.send is not None or bool(
                result.changed & (Changed.HISTORY | Changed.SESSION | Changed.WINDOW)
            )
            await self.refresh_all(result.changed, reload_conversation=reload)

    @on(messages.ApprovalRequested)
    def approval_requested(self, message: messages.ApprovalRequested) -> None:
        self._ask(message)

    @work(group="dialogs")
    async def _ask(self, message: messages.ApprovalRequested) -> None:
        from slop_tui.ui.screens.dialogs import ApprovalScreen

        dialog = ApprovalScreen(
            message.title, message.details, session_option=message.session_option
        )

        def answered(answer: str | None) -> None:
            if not message.answer.done():
                message.answer.set_result(answer or "deny")

        def withdrawn(future) -> None:
            # The turn ended (its deadline passed, Esc) while the question was open.
            if future.cancelled() and dialog.is_attached and self.app.screen is dialog:
                dialog.dismiss("deny")

        message.answer.add_done_callback(withdrawn)
        await self.app.push_screen(dialog, answered)

    @on(messages.TurnEnded)
    async def turn_ended(self, message: messages.TurnEnded) -> None:
        try:
            if not self.app.is_running:
                return
            # The settled answer gets a frame of its own: drawn together with every
            # side pane, the frame after a reply was the longest of a session
            # (30-40 ms) and a key typed then waited for all of it.
            await frame_drawn(self.app, timeout=0.1)
            await self.refresh_all()
            if (
                message.group_id is not None
                and self.app.turns.failed_prompt == message.group_id
                and self.banner_text
            ):
                key = self.app.key_for("retry", "/retry")
                self.show_banner(
                    f"{self.banner_text} · The prompt got no answer: {key} sends it again.",
                    cause="turn",
                )
        finally:
            message.done.set()

    async def on_turn_turn_started(self, _message) -> None:
        ws = self.workspace
        if ws is not None:
            with self.unless_closing():
                await self.group_list.refresh_from(ws.history())

    def on_turn_notice(self, message) -> None:
        self.app.notify(message.event.text, severity="warning", timeout=10)

    def on_turn_error_event(self, message) -> None:
        self.show_banner(message.event.message, cause="turn")

    def on_turn_budget_warning(self, message) -> None:
        self.app.notify(message.event.text, severity="warning", timeout=10)

    async def on_turn_usage_event(self, _message) -> None:
        await self._restatus()

    async def on_turn_tool_result_event(self, _message) -> None:
        await self._restatus()

    def on_turn_plan_sent(self, message) -> None:
        """The request just sent: the marks, labels, gauge and preview show it."""
        plan = message.event.plan
        if plan is None:
            return
        with self.unless_closing():
            self.gauge.show_plan(plan)
            self.preview.set_prompt(plan.request, estimated=False)
            self.group_list.set_plan(plan)  # the conversation takes it itself

    # -- what the panes ask for ------------------------------------------------

    @on(PromptInput.Submitted)
    async def prompt_submitted(self, event: PromptInput.Submitted) -> None:
        turns = self.app.turns
        turns.asking = False
        try:
            await self._take_line(event.prompt_input, event.text)
        finally:
            # Keys typed behind a question that opened are the question's or nobody's.
            asking = turns.asking or self.app.screen is not self
            turns.asking = False
            await event.prompt_input.release_keys(drop=asking)

    async def _take_line(self, prompt: PromptInput, text: str) -> None:
        ws = self.workspace
        if not text.strip() or ws is None:
            return
        if self.app.turns.busy and not text.lstrip().startswith("/"):
            self.notify("A turn is running; Esc cancels it. Your text is kept.", severity="warning")
            return
        prompt.clear()
        history = [h for h in prompt.history if h != text][-199:] + [text]
        prompt.set_history(history)
        await ws.ledger.set_setting(KEY_PROMPT_HISTORY, json.dumps(history))
        if self._draft_shown:  # the draft kept at the last quit is taken: not shown again
            self._draft_shown = False
            await ws.ledger.set_setting(KEY_PROMPT_DRAFT, "")
        result = await self.run_command(text)
        if result is not None and result.error_kind == "busy" and not prompt.text.strip():
            # A turn began between the key and the line's run: the text comes back
            # (a prompt typed into since keeps what was typed; the history has the line).
            prompt.restore(text)

    async def on_group_list_drop_toggled(self, event: GroupList.DropToggled) -> None:
        verb = "drop" if event.dropped else "restore"
        await self.run_command(f"/context {verb} {event.group_id}")

    async def on_group_list_remove_requested(self, event: GroupList.RemoveRequested) -> None:
        # To the trash at once: the announcement names the key that brings it back.
        await self.run_command(f"/message remove {event.group_id}")

    async def on_group_list_show_requested(self, event: GroupList.ShowRequested) -> None:
        await self.query_one(ConversationView).show_group(event.group_id)

    def on_group_list_selected(self, event: GroupList.Selected) -> None:
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
            with self.unless_closing():
                self.gauge.set_projection(None)

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
        if self._projection != target or not self.app.is_running:
            return  # the highlight moved on meanwhile
        saving = current.request_tokens - projected.request_tokens
        with self.unless_closing():
            self.gauge.set_projection(saving, "restore" if dropped else "drop")

    async def on_session_list_session_chosen(self, event: SessionList.SessionChosen) -> None:
        self.scratchpad.flush()
        await self.run_command(f"/session activate {event.name}")

    async def on_state_pane_state_edited(self, event: StatePane.StateEdited) -> None:
        from slop_tui.commands import dispatch

        result = await dispatch(self.workspace, f"/state set {event.text}")
        self.notify(result.text, severity="information" if result.ok else "error")
        await self.refresh_context()

    async def on_scratchpad_editor_scratchpad_saved(
        self, event: ScratchpadEditor.ScratchpadSaved
    ) -> None:
        ws = self.workspace
        session = event.session or ws.session
        if session != ws.session and await ws.ledger.get_session(session) is None:
            return  # removed while the save was on its way: do not bring it back
        stored = (await ws.ledger.session_or_default(session)).scratchpad
        if stored.strip() != (event.base or "").strip():
            pad = self.scratchpad
            if pad.session == session:  # not another session's editor
                pad.external_update(stored)
            return
        from slop_tui.commands import dispatch

        target = ws if session == ws.session else ws.for_session(session)
        result = await dispatch(target, f"/session scratchpad set {event.text}")
        if not result.ok:
            self.notify(result.text, severity="error", timeout=10)
        elif "[REDACTED]" in result.text:  # shown, not a silent change
            self.notify(result.text, severity="warning", timeout=10)
        await self.refresh_context()

    async def keep_what_was_typed(self) -> None:
        """Before the app ends: the scratchpad's unsaved edits and the prompt's text."""
        await self.save_scratchpad()
        await self.save_prompt_draft()

    async def save_prompt_draft(self) -> None:
        """Never lose a keystroke: the prompt's unsent text is kept for the next start
        (before exit); an empty prompt leaves none."""
        ws = self.workspace
        if ws is None:
            return
        text = self.query_one(PromptInput).text
        if text.strip() or self._draft_shown:
            await ws.ledger.set_setting(KEY_PROMPT_DRAFT, text if text.strip() else "")

    async def save_scratchpad(self) -> None:
        """Never lose a keystroke: unsaved scratchpad edits are written (before exit)."""
        ws = self.workspace
        if ws is None or not self.side_panes_mounted:
            return
        pad = self.scratchpad
        if pad.dirty:  # as `/session scratchpad set` stores it: no secret kept
            from slop_tui.context.redact import redact_secrets

            await ws.ledger.set_scratchpad(pad.session or ws.session, redact_secrets(pad.text))

    def on_context_preview_json_requested(self, _event: ContextPreview.JsonRequested) -> None:
        self._load_json()

    @work(group="preview")
    async def _load_json(self) -> None:
        from slop_tui.commands import dispatch

        async with self.app.turns.exact_counts():
            result = await dispatch(self.workspace, "/context show --json")
        if not self.app.is_running:
            return  # the app closed while the body was built
        with self.unless_closing():
            if result.ok:
                self.preview.set_json(result.data)
            else:
                self.notify(result.text, severity="error")

    @on(CopyRequested)
    async def copy_requested(self, event: CopyRequested) -> None:
        await self.app.copy(event.text, event.what)

    # -- keys ------------------------------------------------------------------

    async def action_toggle_drop(self) -> None:
        group = self.group_list.highlighted_group
        if group is not None:
            verb = "restore" if group.status == "dropped" else "drop"
            await self.run_command(f"/context {verb} {group.group_id}")

    def action_reply(self) -> None:
        """Start a reply to the highlighted group: its own lane, the group quoted."""
        group = self.group_list.highlighted_group
        if group is None:
            self.notify("Highlight a group in the groups pane first (f3).", severity="warning")
            return
        self.prefill_prompt(f"/reply {group.group_id} ")

    async def action_undo(self) -> None:
        await self.run_command("/undo")

    async def action_redo(self) -> None:
        await self.run_command("/redo")

    async def action_retry(self) -> None:
        await self.run_command("/retry")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "retry":  # shown only when there is a failed prompt
            return self.app.turns.failed_prompt is not None
        return True

    async def action_window(self, step: int) -> None:
        """The window one group larger (+1) or smaller (-1). 0 is the full history, the
        largest window: ] there says so, and [ goes to one group fewer than shown."""
        sess = await self.workspace.current()
        size = sess.window_size
        if size == 0:
            if step > 0:
                self.notify("The window is the full history already.")
                return
            plan = self.group_list.plan
            size = len(plan.window_groups) if plan is not None else 1
        await self.run_command(f"/context window {max(1, size + step)}")
