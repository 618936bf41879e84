"""The turn loop: the only place that sequences a turn.

persist the user message → plan (assemble, guard) → stream → run tools →
persist → loop, then parse STATE and SCRATCHPAD blocks from the final answer.
Every step emits an event; the UI, `slop-tui ask` and the tests subscribe to
them. No Textual import here. What is sent is the context plan's request
(`Workspace.plan`), the one the panes show.

Before EVERY request (inside a tool loop too) the guard ladder runs, as part
of the plan (`context.guards.plan_reduction`): a `BudgetWarning` once when the request
crosses `warn_pct` (80 %); at `reduce_pct` (90 %) tool results are elided,
then older history is summarised (a model call, `Compaction` events, the
summary stored in the ledger), then emergency truncation and file shedding;
a request that still cannot fit ends the turn with one `ErrorEvent`
(`context_overflow`). Elide, emergency and shed steps are audited in
`compaction_log` when they differ from the previous request's.

After the answer is delivered, background work runs in
`Orchestrator.compaction_task` (await it, or `wait_background()`): after-reply
compaction when the history is above `compaction_trigger_tokens`, then lane
summaries while the plan says one is due (`continuity/compactor.py`). Its
`Compaction` events (with their `job`) go to the same `emit` callback as the
turn's. Each background model call gets one retry at most and a deadline,
then the extractive fallback; `finish_background` bounds the whole job (a
headless `ask` returns within seconds of its answer), and `upkeep` runs the
same job after an edit of the history. The next turn waits for it (after
persisting its user message), so a compaction always takes effect on the
next request. Elision only grows within a turn (`_Turn.elided`).

Handoffs: a `checkpoint` one every `[compaction] checkpoint_interval` tool-loop
iterations; the `## Resuming` layer of `Workspace.pending_resume()` is sent in
every request of the first turn after a resume and consumed once that turn's
first request went through.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import os
import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from typing import IO, Any

from slop_tui.context import extract_scratchpad_signal, extract_state, redact_secrets
from slop_tui.context.budget import LEVEL_OK
from slop_tui.context.guards import (
    STEP_ELIDE,
    STEP_EMERGENCY,
    STEP_SHED,
    TIER_ELIDED,
    GuardPlan,
)
from slop_tui.context.isolation import message_tokens
from slop_tui.context.prompt import LAYER_FILES, LAYER_SUMMARY, Prompt, PromptMessage
from slop_tui.continuity.compactor import JOB_GUARD, Compactor
from slop_tui.continuity.handoff import should_checkpoint
from slop_tui.events import (  # noqa: F401  (re-exported: the turn's event types)
    Approver,
    BudgetWarning,
    Compaction,
    Emit,
    ErrorEvent,
    Event,
    Notice,
    PlanSent,
    TextChunk,
    ThinkingChunk,
    ToolCallEvent,
    ToolResultEvent,
    TurnFinished,
    TurnStarted,
    UsageEvent,
    Waiting,
)
from slop_tui.ledger import LedgerError, TurnJournal
from slop_tui.pricing import BUDGET_OVER, BUDGET_WARN
from slop_tui.providers import ProviderError, create_provider
from slop_tui.providers.base import Provider, ProviderReply, TextDelta, ThinkingDelta
from slop_tui.providers.retry import RetryPolicy, stream_with_retries
from slop_tui.records import (
    STATUS_COMPLETED,
    STATUS_INTERRUPTED,
    STATUS_TOOL_CALL,
    Handoff,
    NewMessage,
    ToolCall,
)
from slop_tui.tools import KIND_SHELL, approval_decision, get_tool, run_tool
from slop_tui.tools.args import argument_problem
from slop_tui.tools.base import ToolContext, ToolResult, error_result
from slop_tui.workspace import Workspace

# How often a turn waiting for its session (another turn holds it) checks again.
TURN_WAIT_POLL = 0.2
# A background model call (a summary, a topic boundary) gives up after this long;
# the summary then falls back to the extractive one.
BACKGROUND_CALL_TIMEOUT = 60.0
# `slop-tui ask` waits at most this long after its answer for the background job.
BACKGROUND_GRACE = 3.0
# Lane summaries one background job makes at most (each folds up to 200 messages):
# a long backlog is absorbed over a few turns, not in one long job on a 2-core machine.
MAX_SUMMARIES_PER_JOB = 2
# The loop-time deadline of the turn this task runs (`[tools] turn_timeout`): every
# request of the turn, its compaction requests and its tool runs end there. A
# context variable, so background work scheduled after the turn does not inherit it.
_TURN_UNTIL: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "turn_until", default=None
)

NO_USAGE_NOTICE = (
    "{provider} reported no usage for this call: its tokens and cost are unknown and not "
    "counted (/stats lists such calls as 'without usage')."
)

REBUILD_INSTRUCTION = (
    "Re-read the conversation above and write a fresh, accurate `### STATE` block for it "
    "(Goal, Context, Resolved, Technical Anchors). Reply with the STATE block only."
)


@dataclass
class TurnOutcome:
    group_id: int | None = None
    text: str = ""
    error: str | None = None
    events: list[Event] = field(default_factory=list)

    def events_json(self) -> list[dict[str, Any]]:
        # A tool result's stored message is for the panes; its text is in `text`.
        return [{k: v for k, v in asdict(e).items() if k != "message"} for e in self.events]


@dataclass
class _Turn:
    """What the steps of one turn share."""

    gid: int
    send: Callable[[Event], Awaitable[None]]
    outcome: TurnOutcome
    resume: Handoff | None = None
    consumed: bool = False  # the resume handoff was marked consumed
    strategy: str = "openai"
    model: str = ""
    journal: TurnJournal | None = None  # the in-flight record a killed process leaves
    elided: frozenset[int] = frozenset()  # tool results elided in this turn: they stay so
    sent_plan: Any = None  # the context plan of the request being sent (ContextPlan)


@dataclass
class TurnState:
    """The turns of one orchestrator, written by it alone: the group whose turn runs
    now, and whether any turn ran (closing then records an `exit` handoff). Other parts
    (commands, other processes) read a running turn from its in-flight record in the
    ledger (`Ledger.running_here`), never from here."""

    running: int | None = None
    ran: bool = False


class Orchestrator:
    """Runs turns for one workspace."""

    def __init__(
        self,
        ws: Workspace,
        *,
        approve: str = "reads",
        approver: Approver | None = None,
        confirm_spend: Callable[[str], Awaitable[bool]] | None = None,
        provider_factory: Callable[..., Provider] = create_provider,
        retry_policy: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.ws = ws
        self.approve = approve
        self.approver = approver
        # Asked, with the budget line, before a turn once a `[budget]` limit is reached.
        self.confirm_spend = confirm_spend
        self.provider_factory = provider_factory
        self.retry_policy = retry_policy or RetryPolicy()
        self.sleep = sleep
        self.session_allowed: set[str] = set()
        self.turn = TurnState()
        self._provider: Provider | None = None
        self._provider_key: tuple | None = None
        self.compactor = Compactor(ws, self._call_model)
        # The background job after a reply (compaction, lane summary); await it.
        self.compaction_task: asyncio.Task | None = None
        self._deadline: float | None = None  # loop time after which background calls give up
        self._warned: set[tuple[str, str]] = set()  # (session, lane) above warn_pct
        self._guard_seen: dict[tuple[str, str, str], tuple] = {}  # last logged step per kind
        ws.rebuild_state = self.rebuild_state

    # -- providers -----------------------------------------------------------

    async def provider(self) -> tuple[Provider, str]:
        choice = await self.ws.provider_choice()
        cfg = self.ws.provider_configs()[choice.name]
        key = (cfg, choice.model)
        if self._provider is None or self._provider_key != key:
            await self._close_provider()  # not aclose(): the background job may be the caller
            self._provider = self.provider_factory(cfg)
            self._provider_key = key
        return self._provider, choice.model

    async def aclose(self) -> None:
        """Cancel background work still running and close the provider client; when a
        turn ran, record the `exit` handoff the next start resumes from."""
        task = self.compaction_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._close_provider()
        if self.turn.ran:
            self.turn.ran = False
            with contextlib.suppress(LedgerError):
                await self.ws.write_handoff("exit")

    async def _close_provider(self) -> None:
        if self._provider is not None:
            with contextlib.suppress(Exception):
                await self._provider.aclose()
            self._provider = None

    # -- the turn ------------------------------------------------------------

    async def run_turn(
        self, text: str, emit: Emit | None = None, *, reply_to: int | None = None
    ) -> TurnOutcome:
        """One whole turn; the user message is in the ledger before any network call.
        `reply_to`: the group this prompt replies to from a topic lane (`/reply`)."""
        outcome = TurnOutcome()

        async def send(event: Event) -> None:
            if not isinstance(event, PlanSent):  # for the panes; the outcome keeps the rest
                outcome.events.append(event)
            if emit is not None:
                result = emit(event)
                if inspect.isawaitable(result):
                    await result

        ws = self.ws
        self.turn.ran = True
        choice = await ws.provider_choice()
        session = ws.session
        try:
            # The prompt and the turn's in-flight record in one write: from here on no
            # edit (here or in another process) can take the group away mid-turn.
            user = await ws.ledger.open_turn(
                session, text, strategy=choice.strategy, reply_to=reply_to
            )
        except LedgerError as exc:
            return await self._ledger_failed(exc, send, outcome)
        gid = user.group_id
        outcome.group_id = gid
        token = uuid.uuid4().hex
        self.turn.running = gid
        journal = TurnJournal(ws.ledger, session, gid, opened=True)
        answered = False
        try:
            await send(TurnStarted(group_id=gid, provider=choice.name, model=choice.model))
            await self._claim_turn(session, gid, token, send)
            answered = await self._claimed_turn(gid, journal, send, outcome)
        except LedgerError as exc:
            await self._ledger_failed(exc, send, outcome)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await send(Notice(text=await asyncio.shield(self._interrupted_notice(gid))))
            raise
        finally:
            if not answered:  # failed or cancelled before any answer: the error mark
                await asyncio.shield(self._mark_failed(session, gid))
            await asyncio.shield(journal.close())  # the turn's rows are stored (or never will be)
            self.turn.running = None
            with contextlib.suppress(LedgerError, sqlite3.Error):
                await asyncio.shield(ws.ledger.release_turn(session, token))
        return outcome

    async def _claim_turn(self, session: str, gid: int, token: str, send) -> None:
        """Wait until this turn holds its session: one turn per session at a time, in
        every process on the ledger, so two turns never interleave their rows."""
        told = False
        while (held := await self.ws.ledger.claim_turn(session, gid, token)) is not None:
            if not told:
                told = True
                where = (
                    "this process"
                    if held.get("pid") == os.getpid()
                    else (f"slop-tui process {held.get('pid')}")
                )
                await send(
                    Notice(
                        text=f"Another turn on session '{session}' is running (group "
                        f"{held.get('group')}, {where}); this turn waits for it to finish. "
                        "Cancel to stop waiting."
                    )
                )
            await asyncio.sleep(TURN_WAIT_POLL)

    async def _claimed_turn(self, gid: int, journal: TurnJournal, send, outcome) -> bool:
        """The turn once it holds its session; whether it produced an answer."""
        ws = self.ws
        await self.wait_background()  # a compaction still running takes effect first
        for warning in ws.pop_warnings():
            await send(Notice(text=f"Configuration: {warning}"))
        if not await self._within_budget(send, outcome):
            return False
        resume = ws.pending_resume()
        turn = _Turn(gid=gid, send=send, outcome=outcome, resume=resume, journal=journal)
        until = _TURN_UNTIL.set(asyncio.get_running_loop().time() + ws.config.turn_timeout)
        try:
            reply = await self._loop(turn)
            if reply is not None:
                await self._finish(reply, turn.strategy, gid, send, outcome)
        except LedgerError as exc:  # a full disk, a read-only database: one clear error
            await self._ledger_failed(exc, send, outcome)
            reply = None
        finally:
            _TURN_UNTIL.reset(until)
            if turn.consumed and resume is not None:
                ws.resume_consumed(resume)
        if reply is None:
            return False
        await asyncio.shield(journal.close())  # the turn's rows are stored
        self._schedule_background(turn, reply.text)
        return True

    async def _within_budget(self, send, outcome: TurnOutcome) -> bool:
        """`[budget]`: a notice from 80 % of a limit; at 100 % the turn runs only when
        `confirm_spend` says yes (headless: never). A turn that does not run keeps its
        prompt, marked failed (`/retry` sends it again)."""
        check = await self.ws.budget_check()
        if check.level == BUDGET_WARN:
            await send(Notice(text=f"Spending: {check.text}"))
        if check.level != BUDGET_OVER:
            return True
        if self.confirm_spend is not None and await self.confirm_spend(check.text):
            await send(Notice(text=f"Spending: {check.text} Sent anyway, as you confirmed."))
            return True
        how = "declined" if self.confirm_spend is not None else "nobody to ask (headless)"
        msg = (
            f"Not sent: {check.text} The prompt is kept ({how}); raise the limit in "
            "config.toml [budget], or confirm to send it (/retry)."
        )
        await send(ErrorEvent(error_kind="budget", message=msg))
        outcome.error = msg
        return False

    async def _turn_ended(self, send, outcome: TurnOutcome) -> None:
        """The turn's deadline passed: one line; what it produced is already stored."""
        msg = (
            f"The turn stopped at its deadline of {self.ws.config.turn_timeout:g} s ([tools] "
            "turn_timeout); what it produced is kept. Ask again to continue."
        )
        await send(ErrorEvent(error_kind="turn_timeout", message=msg))
        outcome.error = msg

    async def _interrupted_notice(self, gid: int) -> str:
        """What a turn the user stopped kept, in the words the group's mark uses
        (docs/context.md, "An interrupted turn")."""
        rows = await self.ws.ledger.group_messages(self.ws.session, gid)
        if not any(m.role in ("assistant", "tool") for m in rows):
            return (
                "Turn interrupted before any answer: the prompt is marked ! and not sent "
                "again; /retry sends it."
            )
        return (
            "Turn interrupted: marked ‖ interrupted. A partial answer is shown, never sent to "
            "the model; a tool call it cut short is sent with its result 'cancelled by the "
            "user', and finished calls with theirs."
        )

    async def _mark_failed(self, session: str, gid: int) -> None:
        """A prompt with no answer at all is marked (shown `!`, not replayed, /retry)."""
        with contextlib.suppress(LedgerError, sqlite3.Error):
            await self.ws.ledger.mark_failed_prompt(session, gid)

    async def _ledger_failed(self, exc: LedgerError, send, outcome: TurnOutcome) -> TurnOutcome:
        """The ledger refused a write: the turn ends with one error; stored rows stay whole."""
        msg = f"The ledger could not be written: {exc}"
        await send(ErrorEvent(error_kind="ledger", message=msg))
        outcome.error = msg
        return outcome

    async def _loop(self, turn: _Turn) -> ProviderReply | None:
        """Requests and tool steps until a final answer (None: the turn ended with an error)."""
        ws = self.ws
        send, gid, outcome = turn.send, turn.gid, turn.outcome
        fixed_history = False
        iteration = 0
        while True:
            if _turn_expired():
                await self._turn_ended(send, outcome)
                return None
            if iteration >= ws.config.max_iterations:
                msg = (
                    f"Stopped after {iteration} tool-loop iterations (the limit is "
                    f"[tools] max_iterations = {ws.config.max_iterations}); ask again to continue."
                )
                await send(ErrorEvent(error_kind="max_iterations", message=msg))
                outcome.error = msg
                return None
            if iteration > 0 and ws.throttle > 0:
                await self.sleep(ws.throttle)
            await self._mcp_ready(send)
            provider, model = await self.provider()
            turn.strategy, turn.model = provider.strategy, model
            if iteration == 0 and not ws.vision(model):
                images = await ws.ledger.message_images([gid])
                if images.get(gid):
                    msg = (
                        f"{model} reads no images, and this prompt has "
                        f"{len(images[gid])}: nothing was sent. Switch to a model with vision "
                        "(/provider) and /retry, or set [models.NAME] vision = true."
                    )
                    await send(ErrorEvent(error_kind="vision", message=msg))
                    outcome.error = msg
                    return None
            prompt, plan = await self._planned_request(provider.strategy, model, send, turn)
            if plan.fails:
                await self._overflow(plan, prompt, turn)
                return None
            await send(PlanSent(plan=turn.sent_plan))
            try:
                reply = await self._stream(provider, prompt, model, gid, send, turn.journal)
            except ProviderError as err:
                if err.kind == "bad_request" and not fixed_history:
                    dropped = await self._drop_last_tool_exchange(gid)
                    if dropped:
                        fixed_history = True
                        await send(
                            Notice(
                                text=f"The provider rejected the request ({err.message}); "
                                f"dropped the most recent tool exchange ({dropped} "
                                "messages) and retried once."
                            )
                        )
                        continue
                await self._keep_partial(gid, err.partial_text, provider.strategy)
                if err.kind == "deadline":  # the turn's, passed while the model replied
                    await self._turn_ended(send, outcome)
                    return None
                await send(ErrorEvent(error_kind=err.kind, message=err.message))
                outcome.error = err.message
                return None
            if turn.resume is not None and not turn.consumed:
                await ws.ledger.mark_handoff_consumed(turn.resume.id)
                turn.consumed = True
            ws.note_sent(prompt)
            await ws.record_call(provider, model, reply, gid)
            if not reply.usage_reported:
                await send(Notice(text=NO_USAGE_NOTICE.format(provider=provider.name)))
            if reply.notice:
                await send(Notice(text=reply.notice))
            await ws.learn_tokens(prompt.request_tokens, reply.prompt_tokens)
            await send(
                UsageEvent(
                    prompt_tokens=reply.prompt_tokens,
                    completion_tokens=reply.completion_tokens,
                    cached_tokens=reply.cached_tokens,
                )
            )
            if not reply.tool_calls:
                return reply
            await self._tool_step(reply, provider.strategy, gid, send, turn.journal)
            iteration += 1
            interval = ws.compaction_settings().checkpoint_interval
            if should_checkpoint(iteration, interval):
                await ws.write_handoff("checkpoint")

    # -- the plan and its guard ladder -----------------------------------------

    async def _planned_request(
        self, strategy: str, model: str, send, turn: _Turn | None = None
    ) -> tuple[Prompt, GuardPlan]:
        """The next request as the context plan has it, after the guard ladder
        (`guard.fails`: it cannot be sent).

        With `turn`: only its group and older ones (groups another workspace opened
        since are not in it), and the tool results elided earlier in the turn stay
        elided (elision only grows within a turn)."""
        ws = self.ws
        gid = turn.gid if turn is not None else None
        elided = turn.elided if turn is not None else frozenset()
        info = ws.model_info(model)
        plan = await ws.plan(strategy, upto=gid, elided=elided)
        guard = plan.guard
        assert guard is not None  # the workspace always plans with the model's limits
        key = (ws.session, plan.lane)
        if guard.level == LEVEL_OK:
            self._warned.discard(key)
        elif key not in self._warned:
            self._warned.add(key)
            percent = round(guard.tokens_before * 100 / guard.max_input_tokens, 1)
            await send(BudgetWarning(percent=percent, text=guard.warning or ""))
        if guard.summarize is not None:
            before = plan.request_tokens
            step = guard.summarize
            trigger = (
                f"request at {before * 100 / info.max_input_tokens:.1f} % of max input "
                f"({before:,} of {info.max_input_tokens:,} tokens)"
            )
            await send(
                Compaction(
                    phase="started",
                    case="summarize",
                    tokens_before=before,
                    tokens_after=before,
                    text=step.detail,
                    job=JOB_GUARD,
                )
            )
            summarized = False
            try:
                result = await self.compactor.summarize_for_request(plan, step, model, trigger)
            except (LedgerError, OSError, ValueError) as exc:
                await send(
                    Compaction(
                        phase="failed",
                        case="summarize",
                        tokens_before=before,
                        tokens_after=before,
                        text=f"the summary was not stored: {exc}",
                        job=JOB_GUARD,
                    )
                )
            else:
                summarized = True
                await send(
                    Compaction(
                        phase="done",
                        case="summarize",
                        tokens_before=before,
                        tokens_after=result.tokens_after,
                        text=result.text,
                        job=JOB_GUARD,
                    )
                )
            plan = await ws.plan(
                strategy,
                upto=gid,
                elided=elided,
                summarized=True,
                before_summary=before if summarized else None,
            )
            guard = plan.guard
            assert guard is not None
        await self._log_guard(guard, plan.lane, send)
        await ws.keep_elided(plan.request)
        if turn is not None:
            turn.sent_plan = plan
            turn.elided = turn.elided | {
                m.message_id
                for m in plan.request.messages
                if m.tier == TIER_ELIDED and m.message_id is not None
            }
        return plan.request, guard

    async def _log_guard(self, plan: GuardPlan, lane: str, send) -> None:
        """Audit elide/emergency/shed steps that differ from the previous request's; a
        shed file leaves the `/file` set (so it is not shed again every turn)."""
        ws = self.ws
        taken = {s.kind: s for s in plan.steps if s.applied}
        shed = taken.get(STEP_SHED)
        if shed is not None:
            for path in shed.files:
                await ws.ledger.remove_context_file(ws.session, path)
        for kind in (STEP_ELIDE, STEP_EMERGENCY, STEP_SHED):
            key = (ws.session, lane, kind)
            step = taken.get(kind)
            if step is None:
                self._guard_seen.pop(key, None)
                continue
            signature = (step.message_ids, step.files, step.level)
            if self._guard_seen.get(key) == signature:
                continue
            self._guard_seen[key] = signature
            ids = step.message_ids
            pct = step.tokens_before * 100 / plan.max_input_tokens
            await ws.ledger.log_compaction(
                ws.session,
                case_kind=kind,
                lane=lane,
                trigger=f"request at {pct:.1f} % of max input",
                tokens_before=step.tokens_before,
                tokens_after=step.tokens_after,
                first_message_id=min(ids) if ids else None,
                last_message_id=max(ids) if ids else None,
                detail=step.detail + (f" (messages {', '.join(map(str, ids))})" if ids else ""),
            )
            if kind == STEP_SHED and not step.files:
                await send(Notice(text=step.detail + " for this request"))
            elif kind == STEP_SHED:
                again = " ".join(step.files)
                await send(
                    Notice(
                        text=f"{step.detail}; they left the /file list "
                        f"(/file add {again} puts them back)"
                    )
                )
            elif kind == STEP_EMERGENCY:
                await send(Notice(text=step.detail + "; query_db reads them back"))

    async def _overflow(self, plan: GuardPlan, prompt: Prompt, turn: _Turn) -> None:
        """One clear error that says what is large; when this turn's own messages are what
        cannot fit, set them aside."""
        ws = self.ws
        own = sum(m.tokens for m in prompt.messages if m.group_id == turn.gid)
        msg = f"The request cannot be sent: {plan.reason}."
        if own and plan.tokens_after - own <= plan.max_input_tokens:
            await ws.ledger.set_aside_group(ws.session, turn.gid)
            msg += (
                f" Group {turn.gid} ({own:,} tokens) alone is too large, so it was set aside "
                f"(/undo or /context restore {turn.gid} brings it back)."
            )
        else:
            sizes = prompt.layer_tokens()
            sizes["history"] = prompt.history_tokens - own
            if own:
                sizes[f"group {turn.gid}"] = own
            if prompt.tool_tokens:
                sizes["tool declarations"] = prompt.tool_tokens
            largest = sorted(((n, k) for k, n in sizes.items() if n > 0), reverse=True)[:3]
            parts = ", ".join(f"{k} {n:,}" for n, k in largest)
            msg += f" Largest parts (tokens): {parts}."
            top = largest[0][1] if largest else ""
            if top == LAYER_SUMMARY:
                msg += " The summary layer is the cause: /context log lists the summaries."
            elif top == LAYER_FILES:
                msg += " Files in context are the cause: /file remove drops one."
        await turn.send(ErrorEvent(error_kind="context_overflow", message=msg))
        turn.outcome.error = msg

    # -- background work after the reply -----------------------------------------

    def _schedule_background(self, turn: _Turn, reply_text: str) -> None:
        self._deadline = None
        self.compaction_task = asyncio.create_task(self._background(turn, reply_text))

    async def wait_background(self) -> None:
        """Wait for the background job of the last turn, if one is running."""
        task = self.compaction_task
        if task is None or task.done():
            return
        try:
            await asyncio.shield(task)  # a cancelled turn does not cancel the compaction
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we were cancelled, not the background job

    async def finish_background(self, grace: float = BACKGROUND_GRACE) -> None:
        """Let the background job finish within `grace` seconds: model calls still
        running then give up (their summaries fall back to the extractive ones), and a
        job still running a second after that is cancelled. What it did not fold stays
        in the next request word for word. `slop-tui ask` returns this way within
        seconds of its answer whatever the background calls do."""
        task = self.compaction_task
        if task is None or task.done():
            return
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + grace
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), grace + 1.0)
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def upkeep(self, emit: Emit | None = None) -> None:
        """Bring derived layers up to date after an edit of the history (undo, drop,
        remove...): the lane summaries an edit took out of date are made again in the
        background, with the same events as after a turn."""
        if self.compaction_task is not None and not self.compaction_task.done():
            return
        choice = await self.ws.provider_choice()

        async def send(event: Event) -> None:
            if emit is not None:
                result = emit(event)
                if inspect.isawaitable(result):
                    await result

        turn = _Turn(gid=0, send=send, outcome=TurnOutcome(), model=choice.model)
        turn.strategy = choice.strategy
        self._deadline = None
        self.compaction_task = asyncio.create_task(self._background(turn, None))

    async def _background(self, turn: _Turn, reply_text: str | None) -> None:
        """After-reply compaction, then lane summaries while one is due, then the session
        summary when it is on and due; errors become a `failed` event."""
        send = turn.send

        async def notify(
            phase: str, case: str, before: int, after: int, text: str, job: str
        ) -> None:
            await send(
                Compaction(
                    phase=phase,
                    case=case,
                    tokens_before=before,
                    tokens_after=after,
                    text=text,
                    job=job,
                )
            )

        try:
            if reply_text is not None:
                await self.compactor.after_reply(turn.model, turn.strategy, notify)
            for _ in range(MAX_SUMMARIES_PER_JOB):
                if self._past_deadline():
                    break
                done = await self.compactor.lane_summary(turn.model, turn.strategy, notify=notify)
                if done is None:
                    break
            if not self._past_deadline():
                await self.compactor.session_summary(turn.model, turn.strategy, notify=notify)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # background housekeeping must never break the app
            with contextlib.suppress(Exception):
                await notify("failed", "", 0, 0, f"compaction failed: {exc}", "")

    def _past_deadline(self) -> bool:
        return self._deadline is not None and asyncio.get_running_loop().time() >= self._deadline

    def _call_time_left(self) -> float:
        """Seconds a background model call may take: BACKGROUND_CALL_TIMEOUT, or what is
        left before the deadline `finish_background` set."""
        if self._deadline is None:
            return BACKGROUND_CALL_TIMEOUT
        left = self._deadline - asyncio.get_running_loop().time()
        return max(0.0, min(BACKGROUND_CALL_TIMEOUT, left))

    async def _call_model(self, request: Prompt, model: str, purpose: str) -> str | None:
        """One silent background request (a summary, a topic boundary): at most one
        retry and a deadline; None when it fails (the caller falls back)."""
        ws = self.ws
        left = self._call_time_left()
        if left <= 0:
            return None
        policy = RetryPolicy(
            max_retries=min(1, self.retry_policy.max_retries),
            base_delay=self.retry_policy.base_delay,
            max_delay=self.retry_policy.max_delay,
        )

        async def once() -> ProviderReply | None:
            reply = None
            async for item in stream_with_retries(
                provider, request, model, policy, self.sleep, until=_TURN_UNTIL.get()
            ):
                if isinstance(item, ProviderReply):
                    reply = item
            return reply

        try:
            provider, _ = await self.provider()
            reply = await asyncio.wait_for(once(), left)
        except (TimeoutError, ProviderError):
            return None
        if reply is None:
            return None
        gid = await ws.ledger.last_group_id(ws.session)
        await ws.record_call(provider, model, reply, gid, purpose=purpose)
        if reply.tool_calls or not reply.text.strip():
            return None
        return reply.text

    async def _stream(
        self,
        provider: Provider,
        prompt,
        model: str,
        gid: int,
        send,
        journal: TurnJournal | None = None,
    ) -> ProviderReply:
        partial: list[str] = []
        if journal is not None:
            journal.stream_started()

        async def on_retry(err: ProviderError, delay: float, attempt: int) -> None:
            await send(
                Notice(
                    text=f"{err.message} Retrying in {delay:.0f} s "
                    f"(attempt {attempt} of {self.retry_policy.max_retries}).",
                    retry_in=delay,
                )
            )

        try:
            async for item in stream_with_retries(
                provider, prompt, model, self.retry_policy, self.sleep, on_retry, _TURN_UNTIL.get()
            ):
                if isinstance(item, TextDelta):
                    partial.append(item.text)
                    await send(TextChunk(text=item.text))
                    if journal is not None:  # a SIGKILL now keeps what was shown
                        await journal.text(partial, provider.strategy)
                elif isinstance(item, ThinkingDelta):
                    await send(ThinkingChunk(text=item.text))
                elif isinstance(item, ProviderReply):
                    if journal is not None:
                        await journal.text([item.text], provider.strategy, final=True)
                    return item
        except asyncio.CancelledError:
            await asyncio.shield(self._keep_partial(gid, "".join(partial), provider.strategy))
            raise
        raise ProviderError(
            "truncated",
            f"{provider.name}: the stream ended without a reply.",
            output_started=bool(partial),
            partial_text="".join(partial),
        )

    async def _mcp_ready(self, send) -> None:
        """Start the MCP servers this request needs (the first turn's, or a failed one's
        whose back-off has passed); what they offer or changed is told to the user. A
        project file trusted since the configuration was read (`slop-tui trust` while this
        runs) is taken first, so its servers join."""
        if self.ws.take_new_trust():
            await send(
                Notice(
                    text=f"{self.ws.config.project_config} is trusted now: its settings, "
                    "MCP servers included, apply from this request (the approval policy "
                    "of this run stays as it started)."
                )
            )
        mcp = self.ws.mcp
        if mcp is None:
            return
        for warning in self.ws.pop_warnings():  # the [mcp] table's, read on first use
            await send(Notice(text=f"Configuration: {warning}"))
        names = await mcp.pending()
        if names:
            await send(Waiting(text=f"starting MCP {', '.join(names)}"))
            await mcp.ensure_started()
            await send(Waiting(text="streaming"))
        await mcp.settle()  # a list a server said changed is read before the request
        for text in mcp.pop_notices():
            await send(Notice(text=text))

    async def _keep_partial(self, gid: int, text: str, strategy: str) -> None:
        """Partial text is kept as `interrupted`: shown, never replayed to the model."""
        if text:
            await self.ws.ledger.append(
                self.ws.session,
                gid,
                [
                    NewMessage(
                        role="assistant", content=text, status=STATUS_INTERRUPTED, strategy=strategy
                    )
                ],
            )

    async def _tool_step(
        self,
        reply: ProviderReply,
        strategy: str,
        gid: int,
        send,
        journal: TurnJournal | None = None,
    ) -> None:
        ws = self.ws
        # Counted once, as the context engine will count it: text plus the calls.
        tokens = message_tokens(reply.text, reply.tool_calls, ws.ledger.count_tokens)
        await ws.ledger.append(
            ws.session,
            gid,
            [
                NewMessage(
                    role="assistant",
                    content=reply.text,
                    status=STATUS_TOOL_CALL,
                    payload=reply.payload,
                    tool_call_id=reply.tool_calls[0].id,
                    tool_name=reply.tool_calls[0].name,
                    strategy=strategy,
                    tokens=tokens,
                )
            ],
        )
        if journal is not None:  # a SIGKILL while tools run leaves them an `error` result
            await journal.calls(reply.tool_calls, strategy)
        for call in reply.tool_calls:
            await send(
                ToolCallEvent(call_id=call.id, name=call.name, arguments=dict(call.arguments))
            )
        servers: list[str] = []
        if ws.mcp is not None:
            servers = sorted({ws.mcp.server_of(c.name) for c in reply.tool_calls} - {""})
            if servers:
                await send(Waiting(text=f"waiting on MCP {', '.join(servers)}"))
        cancel = asyncio.Event()
        ctx = ToolContext(
            ledger=ws.ledger,
            session=ws.session,
            project_root=ws.config.project_root,
            bash_timeout=ws.config.bash_timeout,
            db_time_limit=ws.config.query_time_limit,
            cancel_event=cancel,
            sandbox=ws.sandbox,
            secret_env_names=ws.secret_env_names(),
            allow_private=ws.config.allow_private,
        )
        limit = asyncio.Semaphore(max(1, ws.config.parallel_tools))

        async def one(call: ToolCall) -> ToolResult:
            async with limit:
                return await self._run_call(call, ctx)

        tasks = [asyncio.create_task(one(c)) for c in reply.tool_calls]
        window = asyncio.timeout_at(_TURN_UNTIL.get())
        try:
            async with window:
                results = await asyncio.gather(*tasks)
        except (asyncio.CancelledError, TimeoutError) as exc:
            # The user cancelled, or the turn's deadline passed: cancelling the gather
            # cancelled every call once; the event stops the ones not started yet.
            deadline = isinstance(exc, TimeoutError) and window.expired()
            cancel.set()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            why = "cancelled by the user before the tool finished."
            if deadline:
                why = (
                    f"stopped at the turn's deadline ({ws.config.turn_timeout:g} s, [tools] "
                    "turn_timeout) before it finished; a running command and its processes "
                    "were killed."
                )
            results = [
                r if isinstance(r, ToolResult) else error_result(c.name, why)
                for c, r in zip(reply.tool_calls, done, strict=True)
            ]
            # A call the user cut short is `interrupted`, as the turn is; its result
            # ('cancelled by the user') is still sent, so the model knows it did not finish.
            cut = None if deadline else [not isinstance(r, ToolResult) for r in done]
            stored = await asyncio.shield(
                self._store_results(reply.tool_calls, results, strategy, gid, cut)
            )
            if not deadline:
                for text in ctx.notices:
                    await send(Notice(text=text))
                raise
        else:
            stored = await self._store_results(reply.tool_calls, results, strategy, gid)
            for res, msg in zip(results, stored, strict=True):
                for image in res.images:  # read_file on an image: it goes with the result
                    name = f"{msg.tool_name or 'tool'} image"
                    await ws.ledger.add_image(
                        ws.session,
                        image.sha256,
                        name,
                        image.mime,
                        image.width,
                        image.height,
                        image.size,
                        message_id=msg.id,
                    )
        if ws.mcp is not None:
            for text in ws.mcp.pop_notices():  # a server that failed during its call
                ctx.notices.append(text)
            if servers:  # the header no longer says it waits on them
                await send(Waiting(text="running tools"))
        for call, res, msg in zip(reply.tool_calls, results, stored, strict=True):
            await send(
                ToolResultEvent(
                    call_id=call.id,
                    name=call.name,
                    ok=res.ok,
                    text=res.text,
                    message_id=msg.id,
                    message=msg,
                )
            )
            if res.notice:
                await send(Notice(text=res.notice))
        for text in ctx.notices:
            await send(Notice(text=text))
        await ws.reload_active_skills()

    async def _store_results(self, calls, results, strategy: str, gid: int, cut=None):
        # One transaction for the whole batch, in call order; `cut[i]`: call i was cut short.
        cut = cut or [False] * len(calls)
        return await self.ws.ledger.append(
            self.ws.session,
            gid,
            [
                NewMessage(
                    role="tool",
                    content=r.text,
                    status=STATUS_INTERRUPTED if short else r.status,
                    tool_call_id=c.id,
                    tool_name=c.name,
                    strategy=strategy,
                )
                for c, r, short in zip(calls, results, cut, strict=True)
            ],
        )

    async def _run_call(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        if self.ws.mcp is not None:  # MCP code is loaded only where servers are configured
            from slop_tui.mcpclient.naming import is_mcp_name

            if is_mcp_name(call.name):
                return await self._run_mcp_call(call, ctx)
        tool = get_tool(call.name)
        info = await self.ws.ledger.get_tool(call.name) if tool is not None else None
        if tool is None or info is None:
            enabled = ", ".join(s.name for s in await self.ws.enabled_tools())
            return error_result(
                call.name,
                f"there is no tool named '{call.name}'; it was not run. "
                f"Enabled tools: {enabled or 'none'}.",
            )
        refused = _not_runnable(call, info.enabled)
        if refused is not None:
            return refused
        problem = argument_problem(tool, call.arguments)
        if problem is not None:  # refused before anyone is asked: it cannot run as sent
            return error_result(call.name, problem)
        decision = approval_decision(
            tool, self.approve, self.session_allowed, sandboxed=self.ws.sandbox.available
        )
        if decision == "ask":
            answer = await self.approver(call) if self.approver else "deny"
            if answer == "allow_session":
                self.session_allowed.add(call.name)
            decision = "allow" if answer in ("allow", "allow_session") else "deny"
        if decision != "allow":
            why = "the user did not approve this call; it was not run."
            if tool.kind == KIND_SHELL and not self.ws.sandbox.available:
                why = (
                    f"it was not run: there is no shell sandbox here ({self.ws.sandbox.reason}), "
                    "so every shell command needs the user's approval, and it was not given."
                )
            return error_result(call.name, why)
        return await run_tool(call.name, dict(call.arguments), ctx)

    async def _run_mcp_call(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """A call of an MCP server's tool: the same checks as a built-in one (known,
        enabled, readable arguments), then the server's `approve` policy: `ask` (the
        default) asks every time unless allowed for the session; under the global
        policy `none` only read-only tools the server's policy lets run are run."""
        mcp = self.ws.mcp
        assert mcp is not None
        info = await self.ws.ledger.get_tool(call.name)
        if mcp.find(call.name) is None or info is None:
            enabled = ", ".join(s.name for s in await self.ws.enabled_tools())
            return error_result(
                call.name,
                f"there is no tool named '{call.name}' now (its MCP server is not running "
                f"or no longer offers it); it was not run. Enabled tools: {enabled or 'none'}.",
            )
        refused = _not_runnable(call, info.enabled)
        if refused is not None:
            return refused
        if self.approve == "none":  # read-only tools the server's policy lets run, only
            allowed = mcp.auto_approved(call.name) and mcp.find(call.name)[1].read_only
        else:
            allowed = mcp.auto_approved(call.name) or call.name in self.session_allowed
        if not allowed and self.approve != "none" and self.approver is not None:
            answer = await self.approver(call)
            if answer == "allow_session":
                self.session_allowed.add(call.name)
            allowed = answer in ("allow", "allow_session")
        if not allowed:
            return error_result(call.name, "the user did not approve this call; it was not run.")
        if ctx.cancelled():
            raise asyncio.CancelledError("tool call cancelled before it started")
        result = await mcp.call(call.name, dict(call.arguments))
        if result.ok:
            with contextlib.suppress(LedgerError, sqlite3.Error):
                await self.ws.ledger.count_tool_call(call.name)
        return result

    async def _finish(
        self, reply: ProviderReply, strategy: str, gid: int, send, outcome: TurnOutcome
    ) -> TurnOutcome:
        ws = self.ws
        status = STATUS_COMPLETED if reply.text.strip() else STATUS_INTERRUPTED
        await ws.ledger.append(
            ws.session,
            gid,
            [
                NewMessage(
                    role="assistant",
                    content=reply.text,
                    status=status,
                    payload=reply.payload,
                    strategy=strategy,
                )
            ],
        )
        state = extract_state(reply.text)
        if state:
            await ws.ledger.add_state(ws.session, gid, state)
        pad = extract_scratchpad_signal(reply.text)
        if pad is not None:  # sent with every request: no key lives on in it
            await ws.ledger.set_scratchpad(ws.session, redact_secrets(pad))
        if not reply.complete:
            await send(
                Notice(
                    text=f"The model stopped early ({reply.finish_reason}); the answer may be cut."
                )
            )
        await send(
            TurnFinished(
                group_id=gid,
                text=reply.text,
                state_updated=bool(state),
                scratchpad_updated=pad is not None,
            )
        )
        outcome.text = reply.text
        return outcome

    async def _drop_last_tool_exchange(self, gid: int) -> int:
        """Soft-drop the most recent tool call row and its results (the 400 auto-fix)."""
        ws = self.ws
        sess = await ws.current()
        window = await ws.ledger.window(ws.session, max(sess.window_size, 10), lane=sess.lane)
        calls = [m for m in window if m.status == STATUS_TOOL_CALL]
        if not calls:
            return 0
        last = calls[-1]
        from slop_tui import message_parser

        ids = {c.id for c in message_parser.tool_calls(last)}
        victims = [last] + [
            m for m in window if m.role == "tool" and m.tool_call_id in ids and m.id > last.id
        ]
        return await ws.ledger.auto_drop_messages(ws.session, [m.id for m in victims])

    # -- STATE rebuild -------------------------------------------------------

    async def rebuild_state(self) -> str | None:
        """Ask the model for a fresh STATE from the current window; None if unreachable."""
        try:
            provider, model = await self.provider()
            prompt = await self.ws.prompt(provider.strategy)
            prompt = replace(
                prompt,
                tools=(),
                messages=(*prompt.messages, PromptMessage(role="user", text=REBUILD_INSTRUCTION)),
            )
            reply = None
            async for item in stream_with_retries(
                provider, prompt, model, RetryPolicy(max_retries=0), self.sleep
            ):
                if isinstance(item, ProviderReply):
                    reply = item
        except ProviderError:
            return None
        if reply is None:
            return None
        gid = await self.ws.ledger.last_group_id(self.ws.session)
        await self.ws.record_call(provider, model, reply, gid, purpose="rebuild")
        state = extract_state(reply.text)
        if not state:
            return None
        await self.ws.ledger.add_state(self.ws.session, gid, state)
        return state


def _not_runnable(call: ToolCall, enabled: bool) -> ToolResult | None:
    """The refusal of a call that cannot run whatever the user would answer: its tool is
    switched off (/tool disable: not declared, and not run when called anyway), or its
    arguments could not be read. None: it may run."""
    if not enabled:
        return error_result(
            call.name,
            f"the tool '{call.name}' is disabled by the user; it was not run. Do not "
            "call it again; use another way or ask the user.",
        )
    if call.arguments_error is not None:
        return error_result(
            call.name,
            f"{call.arguments_error}; the call was not run. Send it again with the "
            "arguments as one JSON object.",
        )
    return None


def _turn_expired() -> bool:
    until = _TURN_UNTIL.get()
    return until is not None and asyncio.get_running_loop().time() >= until


async def run_headless_turn(
    ws: Workspace,
    prompt: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    approve: str = "reads",
    echo: IO[str] | None = None,
    reply_to: int | None = None,
) -> TurnOutcome:
    """`slop-tui ask`: one turn, nobody to ask for approval (writes are refused unless --approve all)."""
    if provider or model:
        configs = ws.provider_configs()
        choice = await ws.provider_choice()
        name = provider or choice.name
        if name not in configs:
            return TurnOutcome(
                error=f"there is no provider '{name}'; configured: {', '.join(configs)}."
            )
        await ws.ledger.set_provider(ws.session, name, model or configs[name].model)
    orch = Orchestrator(ws, approve=approve)

    def show(event: Event) -> None:
        if echo is None:
            return
        if isinstance(event, TextChunk):
            echo.write(event.text)
            echo.flush()
        elif isinstance(event, ToolCallEvent):
            echo.write(
                f"\n[tool] {event.name} {json.dumps(event.arguments, ensure_ascii=False)[:120]}\n"
            )
        elif isinstance(event, Notice):
            echo.write(f"\n[notice] {event.text}\n")
        elif isinstance(event, BudgetWarning):
            echo.write(f"\n[context] {event.text}\n")
        elif isinstance(event, Compaction) and event.phase != "started":
            echo.write(f"[compaction] {event.phase}: {event.text}\n")
        elif isinstance(event, TurnFinished):
            echo.write("\n")

    try:
        outcome = await orch.run_turn(prompt, show, reply_to=reply_to)
        await orch.finish_background()  # bounded: the answer is out, the process should end
        return outcome
    finally:
        await orch.aclose()
