"""Compaction jobs that need the ledger or a model call (issue 6); headless.

The pure engine (`slop_tui.context.guards`, `.compaction`, `.summaries`)
decides what to summarise and how; this module does it:

- `summarize_for_request`: the guard ladder's summarize step, before a
  request (also inside a tool loop). The summary request is the applied
  request itself plus the instruction (`summary_request`), so the provider's
  prefix cache covers it.
- `after_reply`: background compaction after an answer (seed 003): when the
  next request's history is above `compaction_trigger_tokens`, a topic
  boundary (`[compaction] detector_model`; none configured or a failed call
  gives `SAFE_BOUNDARY`), `decide`, then truncate (the detector's one-line
  summary, no model call) or summarize (the last sent request plus the reply,
  same prefix again).
- `lane_summary`: the rolling summary of the rows of a lane that left the
  recency window (seed 002), with a standalone request. One active lane
  summary per lane: each roll covers the previous one's span plus the new
  rows (`Ledger.roll_summary`), integrates its prose (cut to about
  `summary_budget_tokens`) and carries its anchors (`merge_anchors`: deduplicated,
  at most `lane_max_anchors`, the user's constraints and decisions always kept);
  it reports the same `Compaction` started / done / failed phases.

Every path ends the same way: the summary text (or `extractive_summary` of
the covered rows when the model call fails or answers with tool calls or
nothing) goes through `complete_summary` (missing anchors appended, secrets
redacted), `Ledger.summarize_span` hides EVERY visible row of the lane up to
the last covered id (rows older than the window too, or the window would
pull them back in), the request is re-assembled and measured, and
`log_compaction` writes the audit record. Compactions (not lane summaries)
also record a `compaction` handoff. Nothing is deleted: `/context uncompact
SUMMARY_ID` restores the rows exactly.

Compaction summaries (guard, after-reply) stack: each covers its own span and
the summary layer shows every active summary of the lane, oldest first. A new summary is asked not to
repeat the ones already in the request (and anchors they hold are not
appended again), so un-compacting any one of them restores the exact
request from before it.

`[compaction] summary_model` sends summaries to a (cheaper) model of the same
provider with a standalone request over the covered rows (a different model
shares no cache with the session's prefix).

This runs as the turn's background job while the user types, so it never holds
the event loop for long (issue 5): the pure work over many messages (building a
summary request, the extractive fallback, anchors, redaction, `decide`, a roll
over a whole backlog) runs in a worker thread (`asyncio.to_thread`; the ledger
stays on the loop), and the ledger is asked for the rows a step needs (the
oldest rows that left the window, the ids a summary hides), never for the whole
lane: at 20,000 messages that read was ~35 MB of rows and half a second of the
loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from slop_tui.context.budget import CompactionSettings, budget_report
from slop_tui.context.compaction import (
    CASE_NONE,
    CASE_SUMMARIZE,
    CASE_TRUNCATE,
    SAFE_BOUNDARY,
    boundary_request,
    decide,
    lane_summary_due,
    parse_boundary,
    truncate_summary,
)
from slop_tui.context.guards import GuardStep
from slop_tui.context.prompt import KIND_SUMMARY, LAYER_SUMMARY, Prompt, PromptMessage
from slop_tui.context.summaries import (
    bound_prose,
    carried_anchor_items,
    clean_summary,
    complete_summary,
    extract_anchor_items,
    extractive_summary,
    merge_anchors,
    standalone_summary_request,
    strip_anchor_section,
    summary_instruction,
    summary_request,
)
from slop_tui.ledger.core import LedgerError
from slop_tui.records import Handoff, Message, Summary

if TYPE_CHECKING:
    from slop_tui.workspace import Workspace

# (request, model) -> the reply text, or None when the call failed, answered with
# tool calls or said nothing. Supplied by the orchestrator (its provider and retry policy).
ModelCall = Callable[[Prompt, str], Awaitable[str | None]]
# (phase, case, tokens before, tokens after, text): "started" | "done" | "failed".
Notify = Callable[[str, str, int, int, str], Awaitable[None]]

KIND_GUARD = "guard"  # summarize step of the guard ladder, before a request
KIND_COMPACTION = "compaction"  # after-reply compaction, summarize case
KIND_TRUNCATE = "truncate"  # after-reply compaction, truncate case
KIND_LANE = "lane"  # rolling lane summary

STACKED_NOTE = (
    " The `## Summary of earlier conversation` already in your context stays there: "
    "do not repeat it, summarise only the messages after it."
)


def _integrate_sentence() -> str:
    """What `summary_instruction` inserts for an existing summary (found by difference)."""
    plain = summary_instruction(1, "", "", False)
    asked = summary_instruction(1, "", "", True)
    start = next(
        (i for i, (a, b) in enumerate(zip(plain, asked, strict=False)) if a != b), len(plain)
    )
    inserted = asked[start : start + len(asked) - len(plain)]
    return inserted if asked == plain[:start] + inserted + plain[start:] else ""


_INTEGRATE = _integrate_sentence()


def stacked_request(
    prompt: Prompt,
    keep_ids: Sequence[int],
    budget: int,
    extra: Sequence[PromptMessage] = (),
    count_tokens: Callable[[str], int] | None = None,
) -> Prompt:
    """`summary_request` for a stacked summary: an existing one is kept, not integrated."""
    kwargs = {"count_tokens": count_tokens} if count_tokens else {}
    req = summary_request(prompt, keep_ids, budget, extra=extra, **kwargs)
    existing = any(la.name == LAYER_SUMMARY for la in prompt.layers) or any(
        m.kind == KIND_SUMMARY for m in req.messages
    )
    if not existing or not _INTEGRATE:
        return req
    ask = req.messages[-1]
    text = ask.text.replace(_INTEGRATE, STACKED_NOTE)
    tokens = count_tokens(text) if count_tokens else ask.tokens
    return replace(req, messages=(*req.messages[:-1], replace(ask, text=text, tokens=tokens)))


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
    """Runs compactions for one workspace; `call` talks to the model."""

    def __init__(self, ws: Workspace, call: ModelCall) -> None:
        self.ws = ws
        self.call = call

    # -- shared steps ------------------------------------------------------------

    async def _summary_text(
        self, request: Prompt, model: str, rows: Sequence[Message]
    ) -> tuple[str, bool]:
        """(text, fallback): the model's summary, or the extractive one when it failed."""
        max_in = self.ws.model_info(model).max_input_tokens
        reply = await self.call(request, model) if request.request_tokens <= max_in else None
        text = clean_summary(reply or "")
        if text:
            return text, False
        return await asyncio.to_thread(extractive_summary, rows), True

    async def _request(
        self,
        own: Prompt | None,
        keep_ids: Sequence[int],
        rows: Sequence[Message],
        model: str,
        strategy: str,
        extra: Sequence[PromptMessage] = (),
    ) -> tuple[Prompt, str]:
        """The summary request and the model it goes to (built in a worker thread)."""
        s = self.ws.compaction_settings()
        count = self.ws.ledger.count_tokens
        budget = s.summary_budget_tokens
        if own is not None and (not s.summary_model or s.summary_model == model):
            request = await asyncio.to_thread(stacked_request, own, keep_ids, budget, extra, count)
            if request.request_tokens <= self.ws.model_info(model).max_input_tokens:
                return request, model
        target = s.summary_model or model
        request = await asyncio.to_thread(
            standalone_summary_request, rows, strategy, budget, count_tokens=count
        )
        return request, target

    async def _complete(self, text: str, rows: Sequence[Message], lane: str) -> str:
        """`complete_summary` against STATE, the scratchpad and the lane's other summaries."""
        ws = self.ws
        state = await ws.ledger.current_state(ws.session)
        sess = await ws.current()
        others = "\n".join(s.content for s in await ws.ledger.active_summaries(ws.session, lane))
        return await asyncio.to_thread(
            _completed,
            text,
            rows,
            state.content if state else "",
            sess.scratchpad + ("\n" + others if others else ""),
            ws.compaction_settings().lane_max_anchors,
        )

    async def _lane_ids_up_to(self, lane: str, last: int) -> list[int]:
        """Every visible row of the lane with id <= last (older than the window too)."""
        return await self.ws.ledger.lane_ids_up_to(self.ws.session, lane, last)

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
        previous: Summary | None = None,
    ) -> tuple[Summary, int]:
        """summarize_span (or roll_summary over `previous`), measure the next request,
        log_compaction; (summary, tokens after)."""
        ws = self.ws
        if previous is not None:
            summary = await ws.ledger.roll_summary(
                ws.session, lane, kind, previous.id, ids, content
            )
        else:
            summary = await ws.ledger.summarize_span(ws.session, lane, kind, ids, content)
        after = (await ws.prompt(strategy)).request_tokens
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
        self, prompt: Prompt, step: GuardStep, model: str, trigger: str
    ) -> CompactionResult:
        """Summarise `step.message_ids` of the (applied) request `prompt`, before sending it."""
        ws = self.ws
        lane = (await ws.current()).lane
        rows = await ws.ledger.messages_by_ids(step.message_ids)
        request, target = await self._request(prompt, step.keep_ids, rows, model, prompt.strategy)
        text, fallback = await self._summary_text(request, target, rows)
        content = await self._complete(text, rows, lane)
        ids = await self._lane_ids_up_to(lane, max(step.message_ids))
        how = "extractive fallback (the summary call failed)" if fallback else f"model {target}"
        summary, after = await self._store(
            lane=lane,
            kind=KIND_GUARD,
            case=CASE_SUMMARIZE,
            ids=ids,
            content=content,
            trigger=trigger,
            detail=f"{step.detail}; {len(ids)} row(s) hidden behind the summary; {how}",
            tokens_before=step.tokens_before,
            strategy=prompt.strategy,
        )
        handoff = await ws.write_handoff("compaction")
        return CompactionResult(
            CASE_SUMMARIZE,
            step.tokens_before,
            after,
            f"summarised {len(ids)} message(s) into summary {summary.id}"
            + (" (extractive: the summary call failed)" if fallback else ""),
            summary,
            fallback,
            handoff,
        )

    # -- after the reply ---------------------------------------------------------------

    async def after_reply(
        self,
        sent: Prompt | None,
        reply_text: str,
        model: str,
        strategy: str,
        notify: Notify,
    ) -> CompactionResult | None:
        """Compact the lane when the next request's history is above the trigger (else None)."""
        ws = self.ws
        s = ws.compaction_settings()
        if not s.enabled:
            return None
        count = ws.ledger.count_tokens
        lane = (await ws.current()).lane
        prompt = await ws.prompt(strategy)
        report = budget_report(prompt, ws.model_info(model), s)
        if not report.needs_summary:
            return None
        before = prompt.request_tokens
        trigger = (
            f"history {report.history_tokens:,} tokens > compaction_trigger_tokens "
            f"{s.compaction_trigger_tokens:,}"
        )
        await notify("started", "", before, before, f"compacting: {trigger}")
        rows = await self._rows_in(prompt)
        boundary = SAFE_BOUNDARY
        if s.detector_model:
            request = await asyncio.to_thread(boundary_request, rows, strategy, count)
            boundary = parse_boundary(await self.call(request, s.detector_model))
        decision = await asyncio.to_thread(decide, rows, boundary, s, count)
        if decision.case == CASE_NONE:
            result = CompactionResult(CASE_NONE, before, before, decision.reason)
            await notify("done", CASE_NONE, before, before, decision.reason)
            return result
        covered_ids = set(decision.covered_ids)
        covered = [r for r in rows if r.id in covered_ids]
        fallback = False
        if decision.case == CASE_TRUNCATE:
            text, kind, how = truncate_summary(decision), KIND_TRUNCATE, "no model call"
        else:
            reply = PromptMessage(role="assistant", text=reply_text, tokens=count(reply_text))
            request, target = await self._request(
                sent, decision.verbatim_ids, covered, model, strategy, extra=(reply,)
            )
            text, fallback = await self._summary_text(request, target, covered)
            kind = KIND_COMPACTION
            how = "extractive fallback (the summary call failed)" if fallback else f"model {target}"
        content = await self._complete(text, covered, lane)
        last = decision.last_covered
        assert last is not None
        ids = await self._lane_ids_up_to(lane, last)
        summary, after = await self._store(
            lane=lane,
            kind=kind,
            case=decision.case,
            ids=ids,
            content=content,
            trigger=trigger,
            detail=f"{decision.reason}; {len(ids)} row(s) hidden behind the summary; {how}",
            tokens_before=before,
            strategy=strategy,
        )
        handoff = await ws.write_handoff("compaction")
        line = (
            f"{decision.case}: {len(ids)} message(s) into summary {summary.id}, "
            f"{before:,} → {after:,} tokens"
            + (" (extractive: the summary call failed)" if fallback else "")
        )
        await notify("done", decision.case, before, after, line)
        return CompactionResult(decision.case, before, after, line, summary, fallback, handoff)

    # -- lane rolling summaries ----------------------------------------------------------

    async def lane_summary(
        self,
        model: str,
        strategy: str,
        now: float | None = None,
        notify: Notify | None = None,
    ) -> CompactionResult | None:
        """Roll the lane's rows that left the window into its summary when one is due (seed 002).

        One active lane summary per lane: the new one covers the previous
        one's span plus the new rows (`Ledger.roll_summary`), its prose is the
        model's integration of the previous summary and the new rows (cut to
        about `summary_budget_tokens`), and its anchors are the previous ones
        plus the new rows', merged and capped (`merge_anchors`). Un-compacting
        it brings the previous summary back. `notify` gets the same
        started / done / failed phases as the after-reply compaction.
        """
        ws = self.ws
        s = ws.compaction_settings()
        sess = await ws.current()
        if not s.enabled or sess.window_size <= 0:
            return None
        lane = sess.lane
        count = ws.ledger.count_tokens
        last_at = await ws.ledger.last_summary_at(ws.session, lane)
        now = time.time() if now is None else now
        if s.lane_keep_recent > 0:
            # The thresholds count the whole backlog: read it all (it stays short once
            # rolling keeps up; a long one is an imported history, absorbed over turns).
            left = await ws.ledger.lane_backlog(ws.session, lane, sess.window_size)
            wanted = await asyncio.to_thread(_roll_selection, left, s, last_at, now, count)
        else:
            left, wanted = await self._oldest_backlog(lane, sess.window_size, s, last_at, now)
        if not wanted:
            return None
        covered = [m for m in left if m.id in wanted]
        del left  # a long backlog is not kept while the model is asked
        previous = next(
            (
                x
                for x in reversed(await ws.ledger.active_summaries(ws.session, lane))
                if x.kind == KIND_LANE
            ),
            None,
        )
        before = (await ws.prompt(strategy)).request_tokens
        tokens = sum(m.tokens for m in covered)
        trigger = f"lane {lane}: {len(covered)} message(s), {tokens:,} tokens left the window"
        if notify is not None:
            await notify("started", "", before, before, f"lane summary: {trigger}")
        try:
            target = s.summary_model or model
            prev_text = previous.content if previous is not None else ""
            request = await asyncio.to_thread(
                standalone_summary_request,
                covered,
                strategy,
                s.summary_budget_tokens,
                prev_text,
                count_tokens=count,
            )
            text, fallback = await self._summary_text(request, target, covered)
            content = await self._complete_rolled(text, covered, lane, previous)
            how = "extractive fallback (the summary call failed)" if fallback else f"model {target}"
            rolled = f", rolled into summary {previous.id}'s successor" if previous else ""
            summary, after = await self._store(
                lane=lane,
                kind=KIND_LANE,
                case=CASE_SUMMARIZE,
                ids=sorted(wanted),
                content=content,
                trigger=trigger,
                detail=(
                    f"rolling lane summary of {len(wanted)} message(s) that left the window"
                    f"{rolled}; {how}"
                ),
                tokens_before=before,
                strategy=strategy,
                previous=previous,
            )
        except (LedgerError, OSError, ValueError) as exc:
            # Anything else reaches the orchestrator, which reports it as `failed`.
            if notify is None:
                raise
            await notify("failed", CASE_SUMMARIZE, before, before, f"lane summary failed: {exc}")
            return None
        line = (
            f"lane {lane}: {len(wanted)} message(s) that left the window into summary "
            f"{summary.id}"
            + (f" (replaces {previous.id})" if previous else "")
            + f", {before:,} → {after:,} tokens"
            + (" (extractive: the summary call failed)" if fallback else "")
        )
        if notify is not None:
            await notify("done", CASE_SUMMARIZE, before, after, line)
        return CompactionResult(CASE_SUMMARIZE, before, after, line, summary, fallback)

    async def _complete_rolled(
        self, text: str, rows: Sequence[Message], lane: str, previous: Summary | None
    ) -> str:
        """The rolled summary: bounded prose plus the merged, capped anchors (the previous
        summary's first), checked against STATE, the scratchpad and the lane's other
        (non-lane) summaries."""
        ws = self.ws
        s = ws.compaction_settings()
        state = await ws.ledger.current_state(ws.session)
        sess = await ws.current()
        others = "\n".join(
            x.content
            for x in await ws.ledger.active_summaries(ws.session, lane)
            if previous is None or x.id != previous.id
        )
        return await asyncio.to_thread(
            _rolled,
            text,
            rows,
            previous.content if previous is not None else "",
            state.content if state else "",
            sess.scratchpad + ("\n" + others if others else ""),
            s,
            ws.ledger.count_tokens,
        )

    async def _oldest_backlog(
        self,
        lane: str,
        window_size: int,
        s: CompactionSettings,
        last_at: float | None,
        now: float,
    ) -> tuple[list[Message], set[int]]:
        """`_roll_selection` over the lane's backlog, reading only its oldest rows.

        With `lane_keep_recent = 0` every whole group that left the window is due,
        so the selection is the oldest `MAX_ROLL_MESSAGES` rows, completed to a
        whole group: a prefix of the backlog decides it once the selection ends
        before the prefix does (or the prefix is the whole backlog).
        """
        ws = self.ws
        limit = MAX_ROLL_MESSAGES + 1
        while True:
            left = await ws.ledger.lane_backlog(ws.session, lane, window_size, limit)
            wanted = _roll_selection(left, s, last_at, now, ws.ledger.count_tokens)
            if len(left) < limit or (wanted and max(wanted) < left[-1].id):
                return left, wanted
            limit *= 2  # the last group is longer than what was read


__all__ = [
    "KIND_COMPACTION",
    "KIND_GUARD",
    "KIND_LANE",
    "KIND_TRUNCATE",
    "CompactionResult",
    "Compactor",
    "ModelCall",
    "Notify",
    "stacked_request",
]


# A lane summary folds at most this many messages at a time (whole groups,
# oldest first). A long backlog (an imported or pre-compaction history) is
# then absorbed over several turns instead of freezing the workspace while
# tens of thousands of messages are scanned at once.
MAX_ROLL_MESSAGES = 200


def _roll_selection(
    left: Sequence[Message],
    settings: CompactionSettings,
    last_at: float | None,
    now: float,
    count_tokens: Callable[[str], int],
) -> set[int]:
    """Ids of the backlog rows the next roll folds (empty: no lane summary is due)."""
    ids = lane_summary_due(
        left, settings, last_summary_at=last_at, now=now, count_tokens=count_tokens
    )
    return _oldest_groups(left, set(ids), MAX_ROLL_MESSAGES) if ids else set()


def _completed(text: str, rows: Sequence[Message], state: str, notes: str, limit: int) -> str:
    """`complete_summary` with the covered rows' anchors (merged, capped): pure, for a thread."""
    anchors = merge_anchors([], extract_anchor_items(rows), limit)
    return complete_summary(text, anchors, state, notes)


def _rolled(
    text: str,
    rows: Sequence[Message],
    previous: str,
    state: str,
    notes: str,
    s: CompactionSettings,
    count_tokens: Callable[[str], int],
) -> str:
    """The rolled summary's text (see `Compactor._complete_rolled`): pure, for a thread."""
    prose = bound_prose(
        strip_anchor_section(clean_summary(text) or text), s.summary_budget_tokens, count_tokens
    )
    carried = carried_anchor_items(previous) if previous else []
    anchors = merge_anchors(carried, extract_anchor_items(rows), s.lane_max_anchors)
    return complete_summary(prose, anchors, state, notes)


def _oldest_groups(rows, wanted: set[int], limit: int) -> set[int]:
    """The oldest wanted rows, up to `limit`, never splitting a group."""
    chosen: set[int] = set()
    last_group = None
    for m in sorted((r for r in rows if r.id in wanted), key=lambda r: r.id):
        if len(chosen) >= limit and m.group_id != last_group:
            break
        chosen.add(m.id)
        last_group = m.group_id
    return chosen
