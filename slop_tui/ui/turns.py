"""The turn controller: runs what the prompt submits (a slash command or a turn).

It owns the running turn (busy, its phase), the orchestrator, the background upkeep
after an edit, and the dialogs a command asks before it acts (overwrite a file,
empty the trash). It never calls a widget: what the workspace screen should show
travels as the typed messages of ui/messages.py (the phase, a stale status, the
banner, a command's result, an approval request, the turn's events and its end).
Every action is the slash command the prompt would run
(`slop_tui.commands.dispatch`), so `slop exec` can do what the UI does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from slop_tui.ui import messages

# Seconds without work that counts exactly before the tokenizer is released.
TOKENIZER_IDLE_S = 5.0

_BUILDER: list[ThreadPoolExecutor] = []


def _builder() -> ThreadPoolExecutor:
    """The one thread the tokenizer is built on. Always the same thread, so malloc
    serves every build from the same arena: what a released build gave back is
    reused by the next one instead of another arena growing by as much."""
    if not _BUILDER:
        _BUILDER.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="slop-tokenizer"))
    return _BUILDER[0]


if TYPE_CHECKING:
    from slop_tui.commands.base import CommandResult
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
        # The line just run opens a question (a confirmation): keys typed behind it are
        # not the workspace's (`WorkspaceScreen.prompt_submitted`).
        self.asking = False
        self._tokenizer_holds = 0  # work under `exact_counts` now running

    @property
    def screen(self):
        """Where the messages go: the workspace screen."""
        return self.app.workspace_screen

    def _post(self, message) -> None:
        self.screen.post_message(message)

    async def _posted(self, message, target=None) -> None:
        """Post a message that carries a `done` event (to `target`, the screen by default)
        and wait until it is handled, or the app has closed."""
        (target or self.screen).post_message(message)
        while self.app.is_running:
            try:
                await asyncio.wait_for(message.done.wait(), 0.5)
                return
            except TimeoutError:
                continue

    async def ensure_tokenizer(self) -> None:
        """Build the tokenizer in a thread if it is not built; a submit waits for it. A
        gauge that shows estimates is then counted again, exactly."""
        from slop_tui.context.tokens import encoding_loaded, get_encoding

        if not encoding_loaded():
            await asyncio.get_running_loop().run_in_executor(_builder(), get_encoding)
            if self.app.is_running and self.app.workspace is not None:
                screen = self.screen
                with screen.unless_closing():
                    if screen.counts_are_estimates():
                        self.app.call_later(screen.refresh_context)

    @contextlib.asynccontextmanager
    async def exact_counts(self) -> AsyncIterator[None]:
        """Hold the tokenizer for work that counts exactly (a turn, a command, a copy of
        the context): built first, in a thread, if needed. Once nothing holds it, no
        turn runs and the turn's background job has ended, it is released
        (`release_tokenizer`): ~46 MB that a reading user does not need."""
        self._tokenizer_holds += 1
        try:
            await self.ensure_tokenizer()
            yield
        finally:
            self._tokenizer_holds -= 1
            if self.app.is_running:
                self.app.run_worker(
                    self.release_tokenizer(), group="tokenizer-release", exclusive=True
                )

    def _tokenizer_needed(self) -> bool:
        return bool(self._tokenizer_holds or self.busy or not self.app.is_running)

    async def release_tokenizer(self) -> None:
        """Release the tokenizer once the app is idle: after `TOKENIZER_IDLE_S`, the
        turn's background job (it counts the summaries it writes) and an exact count
        of the next request while it is still built. Every count taken is in the
        count cache, so the panes stay exact without it; the next `exact_counts`
        builds it again (~0.3 s of CPU). SQLite's page cache is freed with it."""
        from slop_tui.context.tokens import encoding_ready, release_encoding, trim_heap

        await asyncio.sleep(TOKENIZER_IDLE_S)
        if self.orchestrator is not None:
            await self.orchestrator.wait_background()
        if self._tokenizer_needed() or encoding_ready() is None:
            return
        if self.app.workspace is not None:
            # The panes drawn once more while it is built: what changed since the
            # last exact count (the summary the background job wrote) is counted
            # and cached, so the panes stay exact without it.
            screen = self.screen
            with screen.unless_closing():
                await screen.refresh_context()
        if self._tokenizer_needed():
            return
        release_encoding()
        if self.app.workspace is not None:
            # The turn filled SQLite's page cache (up to its 32 MB `cache_size`) with
            # pages a reading user does not need; the next turn reads them again from
            # the system's file cache.
            await self.app.workspace.ledger.release_memory()
        await asyncio.to_thread(trim_heap)

    # -- commands ----------------------------------------------------------

    async def execute(self, text: str):
        """Run a line exactly as if it was typed in the prompt; its `CommandResult` for
        the screen to report, or None when there is nothing to report (a dialog asks
        first, the app quits). A line to send while a turn runs is refused with
        `error_kind` "busy"."""
        from slop_tui.commands import dispatch
        from slop_tui.commands.base import CommandResult

        app = self.app
        if app.workspace is None:
            return None
        if empties_trash(text):
            self.confirm_empty_trash()  # the one hard delete asks first
            return None
        # A submit (or command key) builds the tokenizer, in a thread: commands and
        # turns count exactly, and would otherwise build it on the event loop.
        async with self.exact_counts():
            result = await dispatch(app.workspace, text)
        if result.quit:
            await app.action_quit()
            return None
        if result.send is not None and self.busy:
            # A turn started while this line was being read (a key that runs one): the
            # line is refused, and a surface that took it from the user gives it back.
            return CommandResult(
                ok=False, text="A turn is running; Esc cancels it.", error_kind="busy"
            )
        if result.send is not None:
            self.run_turn(result.send, reply_to=result.reply_to)
        elif (
            not result.ok
            and result.error_kind == "exists"
            and not text.rstrip().endswith("--force")
        ):
            # A file the command would overwrite (an export): ask, never overwrite silently.
            self.confirm_overwrite(text, str(result.data))
            return None
        return result

    def reported(self, result) -> None:
        """After the screen reported a command: an edit of the history has the summaries
        it took out of date made again in the background."""
        from slop_tui.commands import Changed

        if result.send is None and result.changed & (Changed.HISTORY | Changed.WINDOW):
            self.upkeep()

    async def run_command(self, text: str) -> CommandResult | None:
        """Run a line and have the workspace screen report it (from outside the screen:
        the palette, a dialog, a test, a pasted image's offer); its result."""
        result = await self.execute(text)
        if result is not None:
            await self._posted(messages.CommandFinished(text, result))
            self.reported(result)
        return result

    def confirm_empty_trash(self) -> None:
        self.asking = True
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
        self.asking = True
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

    def reconfigured(self) -> None:
        """The workspace's configuration was reloaded: the next call uses its approvals."""
        if self.orchestrator is not None:
            self.orchestrator.approve = self.app.workspace.config.approve

    # -- turns -------------------------------------------------------------

    def set_phase(self, phase: str) -> None:
        """Say in the header what the app is doing now (at once, not at the next turn's
        event); any phase but a retry ends the retry's countdown."""
        if not phase.startswith("retrying") and self._retry_timer is not None:
            self._retry_timer.stop()
            self._retry_timer = None
        if phase != self.phase:
            self.phase = phase
            self._post(messages.PhaseChanged(phase))

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
            # `ask_approval`, looked up now: a test may put its own in its place.
            self.orchestrator = Orchestrator(
                ws,
                approve=ws.config.approve,
                approver=self.ask_approval,
                confirm_spend=self.confirm_spend,
            )
        return self.orchestrator

    def run_turn(self, text: str, reply_to: int | None = None):
        """Start a turn in the app's "turn" worker group (one at a time)."""
        return self.app.run_worker(self._turn(text, reply_to), group="turn", exclusive=True)

    async def _on_event(self, event) -> None:
        """One orchestrator event: the phase changes here; the panes get the event as a
        message, posted to the conversation (most bubble on to the screen and the app)."""
        kind = event.kind
        if kind in ("text", "thinking"):
            self.set_phase("streaming")
        elif kind == "tool_call":
            self.set_phase("running tools")
        elif kind == "waiting":  # an MCP server starting or answering
            self.set_phase(event.text)
            return
        elif kind == "notice" and event.retry_in is not None:
            self._retrying(event.retry_in)
        elif kind == "compaction":
            # Compaction runs in the background after the answer; the input stays usable.
            self.compaction_event(event)
            return
        self.screen.conversation.post_message(messages.turn_message(event))

    async def _turn(self, text: str, reply_to: int | None = None) -> None:
        async with self.exact_counts():  # the turn counts what it writes
            await self._turn_counted(text, reply_to)

    async def _turn_counted(self, text: str, reply_to: int | None) -> None:
        app = self.app
        orchestrator = self._orchestrator()
        self.busy = True
        self.set_phase("streaming")
        self._post(messages.BannerRequested(""))
        self.screen.conversation.post_message(messages.TurnBegins(text))
        group_id: int | None = None
        try:
            outcome = await orchestrator.run_turn(text, self._on_event, reply_to=reply_to)
            group_id = outcome.group_id if outcome is not None else None
        finally:
            # ctrl+q mid-turn cancels this worker while the panes are taken down: the
            # orchestrator keeps the partial answer; settling the view would fail.
            if app.is_running:
                await self._posted(messages.TurnEnded(group_id), self.screen.conversation)
            self.busy = False
            self.set_phase("")

    def compaction_event(self, ev) -> None:
        """Background model work on summaries: the phase, and a notice when it failed or
        saved much; the panes show its result."""
        app = self.app
        if not app.is_running or app.workspace is None:
            return
        if ev.phase == "started":
            self.set_phase("summarizing" if ev.job == "summary" else "compacting")
            return
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
        self._post(messages.PanesStale())

    def upkeep(self) -> None:
        """After an edit of the history: the summaries it took out of date are made again
        in the background (the header shows it), as after a turn."""
        self.app.run_worker(self._upkeep(), group="upkeep")

    async def _upkeep(self) -> None:
        if self.app.workspace is None or self.busy:
            return
        async with self.exact_counts():  # the job counts the summaries it writes
            await self._orchestrator().upkeep(self.compaction_event)

    async def ask_approval(self, call) -> str:
        from slop_tui.tools.approval import session_allow_applies

        ws = self.app.workspace
        title, details = call.name, json.dumps(call.arguments, indent=2, ensure_ascii=False)
        found = ws.mcp.find(call.name) if ws.mcp is not None else None
        if found is not None:  # an MCP tool: which server, which of its tools, what it says
            title = f"{found[1].name} of MCP server '{found[0].name}'"
            details = f"{found[1].description}\n\n{details}"
        request = messages.ApprovalRequested(
            call,
            session_allow_applies(call.name, sandboxed=ws.sandbox.available),
            title=title,
            details=details,
        )
        self._post(request)
        try:
            return await request.answer
        except asyncio.CancelledError:
            # The turn ended (its deadline passed) while the question was open: the
            # screen closes the dialog when the answer is withdrawn.
            request.answer.cancel()
            raise

    async def confirm_spend(self, text: str) -> bool:
        """A `[budget]` limit is reached: send this turn anyway?"""
        from slop_tui.ui.screens.dialogs import ConfirmScreen

        dialog = ConfirmScreen("Spending limit reached", f"{text}\n\nSend this prompt anyway?")
        try:
            return bool(await self.app.push_screen_wait(dialog))
        except asyncio.CancelledError:
            if self.app.screen is dialog:
                dialog.dismiss(False)
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
