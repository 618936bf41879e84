"""Summaries that need the ledger or a model call; headless.

The pure engine decides what a request holds and when a summary is needed
(`slop_tui.context.plan`, `.guards`, `.compaction`); this module makes the
summaries and stores them:

- `summarize_for_request`: the guard ladder's summarize step, before a
  request (also inside a tool loop).
- `after_reply`: background compaction after an answer (seed 003): when the
  next request's history is above `compaction_trigger_tokens` (measured as
  that request will send it: the finished turn's paste is an older group's
  then, `cut_older_pastes`), a topic boundary (`[compaction] detector_model`;
  none configured or a failed call gives `SAFE_BOUNDARY`), `decide`, then
  truncate (the detector's one-line summary, no model call) or summarize.
- `lane_summary`: when the plan says a lane summary is due (seed 002's
  thresholds over the rows that left the window and are not summarized yet),
  the oldest of those rows are summarised.
- `session_summary`: with `[compaction] session_summary` on (an optional
  per-session summary), once two or more lanes have a summary and one
  of them is newer than the session summary, an overview of the session is
  made from the newest summary of each lane.

Every summary request is standalone (`standalone_summary_request`): the rows
it summarises, tool results cut as an older group's are, and the summary it
rolls over; never the session's whole request, which under pressure is near
the window itself (a request of 90 % plus the instruction was the largest one
a session sent). It goes to `[compaction] summary_model`, else the session's
model.

Every summary rolls over the one the request holds (`ContextPlan.head`): it
covers the lane from that summary's first message to its own last, its prose
integrates the earlier one (cut to about `summary_budget_tokens`), and its
anchors are the earlier ones plus the new rows', merged and capped
(`merge_anchors`). A summary never changes a row: it is a cache the plan uses
while its span lies outside the window (or, for a compaction, while the
request is under pressure); an edit of the history under it takes it out of
date (`Ledger.history_changed`) and the plan falls back to an older one.

Each model call is made through `call` (the orchestrator's: one retry at
most, a deadline); when it fails, answers with tool calls or says nothing, the
extractive summary of the covered rows is stored instead. Secrets are
redacted, the audit record written, and compactions (not lane summaries)
record a `compaction` handoff.

This runs as the turn's background job while the user types, so it never
holds the event loop for long: the pure work over many messages (summary
requests, the extractive fallback, anchors, redaction, `decide`) runs in a
worker thread (`asyncio.to_thread`; the ledger stays on the loop), and the
ledger is asked for the rows a step needs, never for the whole lane.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from slop_tui.context.budget import CompactionSettings, budget_report
from slop_tui.context.compaction import (
    CASE_NONE,
    CASE_SUMMARIZE,
    CASE_TRUNCATE,
    SAFE_BOUNDARY,
    boundary_request,
    decide,
    parse_boundary,
    truncate_summary,
)
from slop_tui.context.guards import GuardStep
from slop_tui.context.plan import (
    KIND_COMPACTION,
    KIND_GUARD,
    KIND_LANE,
    KIND_SESSION,
    KIND_TRUNCATE,
    ContextPlan,
    cut_older_pastes,
)
from slop_tui.context.prompt import Prompt
from slop_tui.context.redact import redact_secrets
from slop_tui.context.summaries import (
    bound_prose,
    carried_anchor_items,
    clean_summary,
    complete_summary,
    extract_anchor_items,
    extractive_session_summary,
    extractive_summary,
    merge_anchors,
    session_summary_request,
    standalone_summary_request,
    strip_anchor_section,
)
from slop_tui.ledger.core import LedgerError
from slop_tui.records import SESSION_LANE, STATUS_DROPPED, Handoff, Message, Summary

if TYPE_CHECKING:
    from slop_tui.context.assemble import ContextSettings
    from slop_tui.context.budget import ModelInfo
    from slop_tui.ledger import Ledger
    from slop_tui.records import Session


class CompactorHost(Protocol):
    """What the compactor needs of the workspace it makes summaries for."""

    ledger: Ledger
    session: str

    def compaction_settings(self) -> CompactionSettings: ...

    def context_settings(self) -> ContextSettings: ...

    def model_info(self, model: str) -> ModelInfo: ...

    async def current(self) -> Session: ...

    async def plan(self, strategy: str | None = None) -> ContextPlan: ...

    async def write_handoff(self, reason: str) -> Handoff | None: ...


# (request, model, purpose) -> the reply text, or None when the call failed, answered
# with tool calls or said nothing. Supplied by the orchestrator (its provider, one
# retry at most, a deadline). `purpose` is recorded with the call's usage.
ModelCall = Callable[[Prompt, str, str], Awaitable[str | None]]
# (phase, case, tokens before, tokens after, text, job): phase "started" | "done" |
# "failed"; job "summary" (a lane summary) | "compaction" (after the reply) | "guard".
Notify = Callable[[str, str, int, int, str, str], Awaitable[None]]

JOB_SUMMARY = "summary"
JOB_COMPACTION = "compaction"
JOB_GUARD = "guard"

# Usage purposes of the background calls (`usage.purpose`).
PURPOSE_SUMMARY = "summary"
PURPOSE_COMPACTION = "compaction"
PURPOSE_BOUNDARY = "boundary"

# A lane summary folds at most this many messages at a time (whole groups,
# oldest first). A long backlog (an imported history, a summary taken out of
# date by an edit) is then absorbed in several steps instead of freezing the
# workspace while tens of thousands of messages are scanned at once.
MAX_ROLL_MESSAGES = 200


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction did (case "none": nothing)."""

    case: str  # "truncate" | "summarize" | "none"
    tokens_before: int
    tokens_after: int
    text: str  # one line for the workspace
    summary: Summary | None = None
    fallback: bool = False  # the extractive summary was stored (the model call failed)
    handoff: Handoff | None = None


class Compactor:
    """Makes summaries for one workspace; `call` talks to the model."""

    def __init__(self, ws: CompactorHost, call: ModelCall) -> None:
        self.ws = ws
        self.call = call

    # -- shared steps ------------------------------------------------------------

    async def _summary_text(
        self, request: Prompt, model: str, rows: Sequence[Message], purpose: str
    ) -> tuple[str, bool]:
        """(text, fallback): the model's summary, or the extractive one when it failed."""
        max_in = self.ws.model_info(model).max_input_tokens
        fits = request.request_tokens <= max_in
        reply = await self.call(request, model, purpose) if fits else None
        text = clean_summary(reply or "")
        if text:
            return text, False
        return await asyncio.to_thread(extractive_summary, rows), True

    async def _request(
        self, rows: Sequence[Message], model: str, strategy: str, previous: Summary | None
    ) -> tuple[Prompt, str]:
        """The summary request and the model it goes to (built in a worker thread): only
        the rows being summarised, tool results cut as an older group's are, and the
        summary it rolls over; never the rest of the session's request."""
        s = self.ws.compaction_settings()
        request = await asyncio.to_thread(
            standalone_summary_request,
            rows,
            strategy,
            s.summary_budget_tokens,
            previous.content if previous is not None else "",
            count_tokens=self.ws.ledger.count_tokens,
            tool_limit=self.ws.context_settings().truncation.inactive_limit,
        )
        return request, s.summary_model or model

    async def _rolled_text(
        self, text: str, rows: Sequence[Message], previous: Summary | None
    ) -> str:
        """The stored text: bounded prose plus the merged, capped anchors (the previous
        summary's first), checked against STATE and the scratchpad."""
        ws = self.ws
        s = ws.compaction_settings()
        state = await ws.ledger.current_state(ws.session)
        sess = await ws.current()
        return await asyncio.to_thread(
            _rolled,
            text,
            rows,
            previous.content if previous is not None else "",
            state.content if state else "",
            sess.scratchpad,
            s,
            ws.ledger.count_tokens,
        )

    async def _store(
        self,
        *,
        lane: str,
        kind: str,
        case: str,
        ids: Sequence[int],
        content: str,
        trigger: str,
        detail: str,
        tokens_before: int,
        strategy: str,
        previous: Summary | None,
    ) -> tuple[Summary, int]:
        """Store the summary, measure the next request, write the audit record;
        (summary, tokens after)."""
        ws = self.ws
        summary = await ws.ledger.add_summary(ws.session, lane, kind, ids, content, previous)
        after = (await ws.plan(strategy)).request_tokens
        await ws.ledger.log_compaction(
            ws.session,
            case_kind=case,
            trigger=trigger,
            tokens_before=tokens_before,
            tokens_after=after,
            lane=lane,
            summary_id=summary.id,
            first_message_id=summary.first_message_id,
            last_message_id=summary.last_message_id,
            detail=detail,
        )
        return summary, after

    async def _rows_in(self, prompt: Prompt) -> list[Message]:
        """The ledger rows of the request's conversation history, oldest first."""
        ids = sorted(
            {m.message_id for m in prompt.messages if m.message_id is not None and m.kind is None}
        )
        return await self.ws.ledger.messages_by_ids(ids)

    # -- the guard's summarize step ---------------------------------------------------

    async def summarize_for_request(
        self, plan: ContextPlan, step: GuardStep, model: str, trigger: str
    ) -> CompactionResult:
        """Summarise `step.message_ids` of the planned request before sending it."""
        ws = self.ws
        prompt = plan.request
        ids = [*plan.unsent_backlog, *step.message_ids]
        rows = await ws.ledger.messages_by_ids(ids)
        request, target = await self._request(rows, model, prompt.strategy, plan.head)
        text, fallback = await self._summary_text(request, target, rows, PURPOSE_COMPACTION)
        content = await self._rolled_text(text, rows, plan.head)
        how = "extractive fallback (the summary call failed)" if fallback else f"model {target}"
        summary, after = await self._store(
            lane=plan.lane,
            kind=KIND_GUARD,
            case=CASE_SUMMARIZE,
            ids=ids,
            content=content,
            trigger=trigger,
            detail=f"{step.detail}; {how}",
            tokens_before=step.tokens_before,
            strategy=prompt.strategy,
            previous=plan.head,
        )
        handoff = await ws.write_handoff("compaction")
        return CompactionResult(
            CASE_SUMMARIZE,
            step.tokens_before,
            after,
            f"summarised {len(step.message_ids)} message(s) into summary {summary.id}"
            + (" (extractive: the summary call failed)" if fallback else ""),
            summary,
            fallback,
            handoff,
        )

    # -- after the reply ---------------------------------------------------------------

    async def after_reply(
        self, model: str, strategy: str, notify: Notify
    ) -> CompactionResult | None:
        """Compact the lane when the next request's history is above the trigger (else None)."""
        ws = self.ws
        s = ws.compaction_settings()
        if not s.enabled:
            return None
        count = ws.ledger.count_tokens
        plan = await ws.plan(strategy)
        # The next request opens a group of its own: this turn's paste is an older
        # group's then, cut under pressure like the others (`cut_older_pastes`).
        upcoming = cut_older_pastes(
            plan.assembled, ws.context_settings().truncation, count, every_group=True
        )
        report = budget_report(upcoming, ws.model_info(model), s)
        if not report.needs_summary:
            return None
        before = plan.request_tokens
        trigger = (
            f"history {report.history_tokens:,} tokens > compaction_trigger_tokens "
            f"{s.compaction_trigger_tokens:,}"
        )
        job = JOB_COMPACTION
        await notify("started", "", before, before, f"compacting: {trigger}", job)
        rows = await self._rows_in(plan.assembled)
        boundary = SAFE_BOUNDARY
        if s.detector_model:
            request = await asyncio.to_thread(boundary_request, rows, strategy, count)
            answer = await self.call(request, s.detector_model, PURPOSE_BOUNDARY)
            boundary = parse_boundary(answer)
        decision = await asyncio.to_thread(decide, rows, boundary, s, count)
        if decision.case == CASE_NONE:
            await notify("done", CASE_NONE, before, before, decision.reason, job)
            return CompactionResult(CASE_NONE, before, before, decision.reason)
        covered_ids = set(decision.covered_ids)
        # Rows awaiting a summary that the request does not carry come first: the new
        # summary stands for them too, so it must read them.
        unsent = await ws.ledger.messages_by_ids(plan.unsent_backlog)
        covered = [*unsent, *(r for r in rows if r.id in covered_ids)]
        fallback = False
        if decision.case == CASE_TRUNCATE:
            text, kind, how = truncate_summary(decision), KIND_TRUNCATE, "no model call"
        else:
            request, target = await self._request(covered, model, strategy, plan.head)
            text, fallback = await self._summary_text(request, target, covered, PURPOSE_COMPACTION)
            kind = KIND_COMPACTION
            how = "extractive fallback (the summary call failed)" if fallback else f"model {target}"
        content = await self._rolled_text(text, covered, plan.head)
        summary, after = await self._store(
            lane=plan.lane,
            kind=kind,
            case=decision.case,
            ids=[*plan.unsent_backlog, *decision.covered_ids],
            content=content,
            trigger=trigger,
            detail=f"{decision.reason}; {len(covered)} message(s) summarised; {how}",
            tokens_before=before,
            strategy=strategy,
            previous=plan.head,
        )
        handoff = await ws.write_handoff("compaction")
        line = (
            f"{decision.case}: {len(covered)} message(s) into summary {summary.id}, "
            f"{before:,} → {after:,} tokens"
            + (" (extractive: the summary call failed)" if fallback else "")
        )
        await notify("done", decision.case, before, after, line, job)
        return CompactionResult(decision.case, before, after, line, summary, fallback, handoff)

    # -- lane summaries ------------------------------------------------------------------

    async def lane_summary(
        self, model: str, strategy: str, notify: Notify | None = None
    ) -> CompactionResult | None:
        """Summarise the oldest rows awaiting a summary when the plan says one is due
        (seed 002's thresholds); None when none is due.

        The new summary rolls over the plan's head summary: it covers the lane
        from that summary's first message to the newest row folded now.
        """
        ws = self.ws
        plan = await ws.plan(strategy)
        if not plan.summary_due:
            return None
        head = plan.head
        rows = await ws.ledger.lane_backlog(
            ws.session,
            plan.lane,
            plan.window_start,
            head.last_message_id if head is not None else 0,
            MAX_ROLL_MESSAGES + 1,
        )
        covered = _oldest_groups(rows, MAX_ROLL_MESSAGES)
        if not covered and rows:  # one group longer than a roll: folded whole
            group = await ws.ledger.group_messages(ws.session, rows[0].group_id or 0)
            covered = [m for m in group if m.status != STATUS_DROPPED]
        if not covered:
            return None
        before = plan.request_tokens
        tokens = sum(m.tokens for m in covered)
        trigger = f"lane {plan.lane}: {plan.due_reason}"
        job = JOB_SUMMARY
        if notify is not None:
            await notify("started", "", before, before, f"summarizing: {trigger}", job)
        try:
            request, target = await self._request(covered, model, strategy, head)
            text, fallback = await self._summary_text(request, target, covered, PURPOSE_SUMMARY)
            content = await self._rolled_text(text, covered, head)
            how = "extractive fallback (the summary call failed)" if fallback else f"model {target}"
            rolled = f", rolled over summary {head.id}" if head is not None else ""
            summary, after = await self._store(
                lane=plan.lane,
                kind=KIND_LANE,
                case=CASE_SUMMARIZE,
                ids=[m.id for m in covered],
                content=content,
                trigger=trigger,
                detail=(
                    f"lane summary of {len(covered)} message(s) ({tokens:,} tokens stored) "
                    f"that left the window{rolled}; {how}"
                ),
                tokens_before=before,
                strategy=strategy,
                previous=head,
            )
        except (LedgerError, OSError, ValueError) as exc:
            # Anything else reaches the orchestrator, which reports it as `failed`.
            if notify is None:
                raise
            text = f"lane summary failed: {exc}"
            await notify("failed", CASE_SUMMARIZE, before, before, text, job)
            return None
        line = (
            f"lane {plan.lane}: {len(covered)} message(s) that left the window into summary "
            f"{summary.id}, {before:,} → {after:,} tokens"
            + (" (extractive: the summary call failed)" if fallback else "")
        )
        if notify is not None:
            await notify("done", CASE_SUMMARIZE, before, after, line, job)
        return CompactionResult(CASE_SUMMARIZE, before, after, line, summary, fallback)

    # -- the session summary ---------------------------------------------------------------

    async def session_summary(
        self, model: str, strategy: str, notify: Notify | None = None
    ) -> CompactionResult | None:
        """With `[compaction] session_summary` on: make the session summary when two or
        more lanes have a summary and one of them is newer than it (None otherwise).

        Its request holds the newest summary of each lane (their prose; the anchors
        stay in the lane summaries) and nothing else; a failed call stores the lanes'
        prose, cut to the budget. It stands for every lane from the first message its
        summaries cover to the last, so an edit under that span of any lane takes it
        out of date (`Ledger.history_changed`)."""
        ws = self.ws
        s = ws.compaction_settings()
        if not (s.enabled and s.session_summary):
            return None
        heads = await ws.ledger.lane_heads(ws.session)
        if len(heads) < 2:
            return None
        made = await ws.ledger.session_summaries(ws.session)
        if made and made[-1].id > max(h.id for h in heads):
            return None
        count = ws.ledger.count_tokens
        before = (await ws.plan(strategy)).request_tokens
        lanes = ", ".join(h.lane for h in heads)
        job = JOB_SUMMARY
        if notify is not None:
            await notify("started", "", before, before, f"session summary of {lanes}", job)
        request = await asyncio.to_thread(
            session_summary_request, heads, strategy, s.summary_budget_tokens, count
        )
        target = s.summary_model or model
        max_in = ws.model_info(target).max_input_tokens
        reply = (
            await self.call(request, target, PURPOSE_SUMMARY)
            if request.request_tokens <= max_in
            else None
        )
        text = strip_anchor_section(clean_summary(reply or ""))
        fallback = not text
        if fallback:
            text = extractive_session_summary(heads, s.summary_budget_tokens, count)
        content = redact_secrets(bound_prose(text, s.summary_budget_tokens, count)) + "\n"
        how = "extractive fallback (the summary call failed)" if fallback else f"model {target}"
        summary, after = await self._store(
            lane=SESSION_LANE,
            kind=KIND_SESSION,
            case=CASE_SUMMARIZE,
            ids=[min(h.first_message_id for h in heads), max(h.last_message_id for h in heads)],
            content=content,
            trigger=f"a lane summary newer than the session summary ({lanes})",
            detail=f"session summary of {len(heads)} lane(s): {lanes}; {how}",
            tokens_before=before,
            strategy=strategy,
            previous=None,
        )
        line = f"session summary {summary.id} of {len(heads)} lane(s) ({lanes})" + (
            " (extractive: the summary call failed)" if fallback else ""
        )
        if notify is not None:
            await notify("done", CASE_SUMMARIZE, before, after, line, job)
        return CompactionResult(CASE_SUMMARIZE, before, after, line, summary, fallback)


__all__ = [
    "JOB_COMPACTION",
    "JOB_GUARD",
    "JOB_SUMMARY",
    "MAX_ROLL_MESSAGES",
    "CompactionResult",
    "Compactor",
    "ModelCall",
    "Notify",
]


def _rolled(
    text: str,
    rows: Sequence[Message],
    previous: str,
    state: str,
    notes: str,
    s: CompactionSettings,
    count_tokens: Callable[[str], int],
) -> str:
    """A summary's stored text (see `Compactor._rolled_text`): pure, for a thread."""
    prose = bound_prose(
        strip_anchor_section(clean_summary(text) or text), s.summary_budget_tokens, count_tokens
    )
    carried = carried_anchor_items(previous) if previous else []
    anchors = merge_anchors(carried, extract_anchor_items(rows), s.lane_max_anchors)
    return complete_summary(prose, anchors, state, notes)


def _oldest_groups(rows: Sequence[Message], limit: int) -> list[Message]:
    """The rows of the oldest whole groups of `rows` (read group by group, at most
    `limit + 1` rows; `limit + 1` means the read was cut). The last group read may be
    incomplete then, and waits for the next step; empty when it is the only one."""
    if len(rows) <= limit:
        return list(rows)
    cut = max(m.group_id or 0 for m in rows)
    return [m for m in rows if m.group_id != cut]
