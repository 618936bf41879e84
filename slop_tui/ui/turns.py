"""The turn controller: runs what the prompt submits (a slash command or a turn) and
turns the orchestrator's events into updates of the workspace's panes.

The screen's layout, its keys and its panes live in `ui/app.py`; this module owns
the running turn (busy, its phase), the orchestrator, the tool-call approvals, the
background upkeep after an edit, and the dialogs a command asks before it acts
(overwrite a file, empty the trash). Every action is the slash command the prompt
would run (`slop_tui.commands.dispatch`), so `slop exec` can do what the UI does.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from slop_tui.ui.frames import frame_drawn

if TYPE_CHECKING:
    from slop_tui.ui.app import SlopApp


def empties_trash(line: str) -> bool:
    """`/trash empty` typed without `--yes`: the workspace asks instead."""
    words = line.split()
    return words[:2] == ["/trash", "empty"] and "--yes" not in words


class TurnController:
    """Commands and turns for one `SlopApp`; workers run on the app (groups "turn",
    "upkeep", "dialogs"), so cancelling the app's "turn" group cancels the turn."""

    def __init__(self, app: SlopApp) -> None:
        self.app = app
        self.orchestrator = None
        self.busy = False
        # What the header says the app is doing: "" (idle), "streaming", "running
        # tools", "retrying in N s", "summarizing", "compacting" (set_phase).
        self.phase = ""
        self._retry_at = 0.0  # loop time of the next attempt while retrying
        self._retry_timer = None
        self.failed_prompt: int | None = None  # the newest prompt marked ! (ctrl+r resends it)

    # -- commands ----------------------------------------------------------

    async def run_command(self, text: str) -> None:
        """Run a line exactly as if it was typed in the prompt."""
        from slop_tui.commands import dispatch

        app = self.app
        if app.workspace is None:
            return
        if empties_trash(text):
            self.confirm_empty_trash()  # the one hard delete asks first
            return
        # The first submit (or command key) builds the tokenizer, in a thread: commands
        # and turns count exactly, and would otherwise build it on the event loop.
        await app._tokenizer()
        # The panel shows the last command's output: the next line closes it.
        await app.show_output(text, "")
        result = await dispatch(app.workspace, text)
        if result.quit:
            await app.action_quit()
            return
        if result.send is not None:
            if self.busy:
                app.notify("A turn is running; Esc cancels it.", severity="warning")
                return
            self.run_turn(result.send)
            if result.changed:
                await app.refresh_all(reload_conversation=True)
            return
        if (
            not result.ok
            and result.error_kind == "exists"
            and not text.rstrip().endswith("--force")
        ):
            # A file the command would overwrite (an export): ask, never overwrite silently.
            self.confirm_overwrite(text, str(result.data))
        elif not result.ok:
            app.notify(result.text, severity="error", timeout=10)
        elif result.revert:
            # A destructive edit is announced with the one key that reverts it.
            app.notify(result.announcement(app.key_for("redo", "/redo")), timeout=10)
        elif result.changed and result.text and "\n" not in result.text.strip():
            # An edit's one-line report is a notice that goes away by itself; the panel
            # above the prompt is for what a command shows (lists, the context, help).
            app.notify(result.text, timeout=8)
        elif result.text:
            await app.show_output(text, result.text)
        if result.changed & {"provider", "session"}:
            app.clear_banner("turn")  # a provider's error does not apply any more
        if result.changed:
            await app.refresh_all(
                reload_conversation=bool(result.changed & {"history", "session", "window"})
            )
        if result.changed & {"history", "window"}:
            self.upkeep()

    def confirm_empty_trash(self) -> None:
        self.app.run_worker(self._confirm_empty_trash(), group="dialogs")

    async def _confirm_empty_trash(self) -> None:
        from slop_tui.commands.base import plural
        from slop_tui.ui.screens.dialogs import ConfirmScreen

        app = self.app
        entries = await app.workspace.ledger.trash()
        if not entries:
            app.notify("The trash is empty.")
            return
        count = sum(e.messages for e in entries)
        if await app.push_screen_wait(
            ConfirmScreen(
                f"Delete everything in the trash ({plural(len(entries), 'entry', 'entries')}, "
                f"{plural(count, 'message')}) for good?",
                "This is the one edit that cannot be taken back.",
                yes="Delete",
                no="Keep",
            )
        ):
            await self.run_command("/trash empty --yes")

    def confirm_overwrite(self, line: str, path: str) -> None:
        self.app.run_worker(self._confirm_overwrite(line, path), group="dialogs")

    async def _confirm_overwrite(self, line: str, path: str) -> None:
        from slop_tui.ui.screens.dialogs import ConfirmScreen

        app = self.app
        if await app.push_screen_wait(
            ConfirmScreen(
                f"{path} already exists. Overwrite it?",
                "Its current content is replaced and cannot be restored.",
                yes="Overwrite",
                no="Keep it",
            )
        ):
            await self.run_command(f"{line} --force")
        else:
            app.notify(f"Kept {path}; nothing was written.", timeout=6)

    # -- turns -------------------------------------------------------------

    def set_phase(self, phase: str) -> None:
        """Say in the header what the app is doing now (at once, not at the next turn's
        event); any phase but a retry ends the retry's countdown."""
        if not phase.startswith("retrying") and self._retry_timer is not None:
            self._retry_timer.stop()
            self._retry_timer = None
        if phase != self.phase:
            self.phase = phase
            self.app.redraw_status()

    def _retrying(self, delay: float) -> None:
        """The provider failed and is tried again in `delay` s: count down in the header."""
        loop = asyncio.get_running_loop()
        self._retry_at = loop.time() + delay
        self.set_phase(f"retrying in {max(0, round(delay))} s")
        if self._retry_timer is None:
            self._retry_timer = self.app.set_interval(1.0, self._retry_tick, name="retry")

    def _retry_tick(self) -> None:
        if not self.phase.startswith("retrying"):
            return
        left = max(0, round(self._retry_at - asyncio.get_running_loop().time()))
        self.set_phase(f"retrying in {left} s")

    def _orchestrator(self):
        from slop_tui.orchestrator import Orchestrator

        if self.orchestrator is None:
            ws = self.app.workspace
            # `app.ask_approval`, looked up now: a test may put its own in its place.
            self.orchestrator = Orchestrator(
                ws, approve=ws.config.approve, approver=self.app.ask_approval
            )
        return self.orchestrator

    def run_turn(self, text: str):
        """Start a turn in the app's "turn" worker group (one at a time)."""
        return self.app.run_worker(self._turn(text), group="turn", exclusive=True)

    async def _turn(self, text: str) -> None:
        from slop_tui.orchestrator import (
            BudgetWarning,
            Compaction,
            ErrorEvent,
            Notice,
            ToolCallEvent,
            TurnStarted,
            Waiting,
        )
        from slop_tui.ui.widgets.conversation import ConversationView
        from slop_tui.ui.widgets.groups import GroupList

        app = self.app
        ws = app.workspace
        await app._tokenizer()  # the turn counts what it writes: not on the event loop
        orchestrator = self._orchestrator()
        view = app.query_one(ConversationView)
        self.busy = True
        self.set_phase("streaming")
        app.show_banner("")

        started: list[int] = []

        async def on_event(ev) -> None:
            if isinstance(ev, TurnStarted):
                started.append(ev.group_id)
                await view.begin_turn(ev.group_id, text)
                await app.query_one(GroupList).refresh_from(ws)
            elif isinstance(ev, ToolCallEvent):
                self.set_phase("running tools")
            elif isinstance(ev, Waiting):  # an MCP server starting or answering
                self.set_phase(ev.text)
                return
            elif isinstance(ev, Notice):
                app.notify(ev.text, severity="warning", timeout=10)
                if ev.retry_in is not None:
                    self._retrying(ev.retry_in)
            elif isinstance(ev, ErrorEvent):
                app.show_banner(ev.message, cause="turn")
            elif isinstance(ev, BudgetWarning):
                app.notify(ev.text, severity="warning", timeout=10)
            elif isinstance(ev, Compaction):
                # Compaction runs in the background after the answer; the input stays usable.
                await self.compaction_event(ev)
                return
            if ev.kind in ("text", "thinking"):
                self.set_phase("streaming")
            await view.on_event(ev)
            if ev.kind in ("tool_result", "usage"):
                app.show_status(app._status(await ws.provider_choice(), await ws.current()))

        try:
            await orchestrator.run_turn(text, on_event)
        finally:
            # ctrl+q mid-turn cancels this worker while the panes are taken down: the
            # orchestrator keeps the partial answer; settling the view would fail.
            if app.is_running:
                with app._unless_closing():
                    await view.end_turn()
            self.busy = False
            self.set_phase("")
            if app.is_running:
                # The settled answer gets a frame of its own: drawn together with every
                # side pane, the frame after a reply was the longest of a session
                # (30-40 ms) and a key typed then waited for all of it.
                await frame_drawn(app, timeout=0.1)
                await app.refresh_all()
                if started and self.failed_prompt == started[0] and app._banner_text:
                    key = app.key_for("retry", "/retry")
                    app.show_banner(
                        f"{app._banner_text} · The prompt got no answer: {key} sends it again.",
                        cause="turn",
                    )

    async def compaction_event(self, ev) -> None:
        app = self.app
        if not app.is_running or app.workspace is None:
            return
        if ev.phase == "started":
            self.set_phase("summarizing" if ev.job == "summary" else "compacting")
        else:
            self.set_phase("streaming" if self.busy else "")
            if ev.phase == "failed":
                what = "Summary" if ev.job == "summary" else "Compaction"
                app.notify(f"{what} failed: {ev.text}", severity="error", timeout=10)
            elif ev.tokens_before and ev.tokens_after < 0.9 * ev.tokens_before:
                # Routine lane-summary rolls stay quiet (the header shows "compacting").
                app.notify(
                    f"Compacted: {ev.tokens_before:,} → {ev.tokens_after:,} tokens "
                    "(/context log; /context uncompact restores).",
                    timeout=6,
                )
            with app._unless_closing():
                await app.refresh_all(reload_conversation=False)
        with app._unless_closing():
            choice = await app.workspace.provider_choice()
            app.show_status(app._status(choice, await app.workspace.current()))

    def upkeep(self) -> None:
        """After an edit of the history: the summaries it took out of date are made again
        in the background (the header shows it), as after a turn."""
        self.app.run_worker(self._upkeep(), group="upkeep")

    async def _upkeep(self) -> None:
        if self.app.workspace is None or self.busy:
            return
        await self._orchestrator().upkeep(self.compaction_event)

    async def ask_approval(self, call) -> str:
        from slop_tui.tools.approval import session_allow_applies
        from slop_tui.ui.screens.dialogs import ApprovalScreen

        app = self.app
        args = json.dumps(call.arguments, indent=2, ensure_ascii=False)
        sandboxed = app.workspace.sandbox.available
        session = session_allow_applies(call.name, sandboxed=sandboxed)
        title = call.name
        found = app.workspace.mcp.find(call.name) if app.workspace.mcp is not None else None
        if found is not None:  # an MCP tool: which server, which of its tools, what it says
            title = f"{found[1].name} of MCP server '{found[0].name}'"
            args = f"{found[1].description}\n\n{args}"
        dialog = ApprovalScreen(title, args, session_option=session)
        try:
            return await app.push_screen_wait(dialog)
        except asyncio.CancelledError:
            # The turn ended (its deadline passed) while the question was open: close it.
            if app.screen is dialog:
                dialog.dismiss("deny")
            raise

    def cancel(self) -> bool:
        """Cancel the running turn; False when none runs."""
        if not self.busy:
            return False
        self.app.workers.cancel_group(self.app, "turn")
        return True

    async def close(self) -> None:
        """At the app's end: a turn still running (ctrl+q mid-reply) is cancelled and
        stores its partial answer as interrupted before the ledger closes."""
        from contextlib import suppress

        app = self.app
        turns = [w for w in app.workers if w.group == "turn" and not w.is_finished]
        if turns:
            app.workers.cancel_group(app, "turn")
            for worker in turns:
                with suppress(Exception):
                    await worker.wait()
        if self.orchestrator is not None:
            await self.orchestrator.aclose()
