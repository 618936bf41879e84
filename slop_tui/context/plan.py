"""The context plan: the one decision of what the next request holds.

`build_plan(inputs, settings, count_tokens)` turns ledger records and settings
into a `ContextPlan`: for every group and message its place (in the window,
waiting for a summary, covered by summary N, outside the window, in another
lane, dropped), each tool result's tier and limit or elision, each
layer's tokens, the guard ladder's verdict and the exact request. The
orchestrator sends `plan.request`; the workspace's panes draw the plan (group
marks, tool-block labels, the gauge, the preview); a "what if I drop this"
projection is the plan built again from the ledger with the edit applied.
Nothing else decides any of it.

The window is a view. Summaries are a cache of what lies outside it, never a
status of a row:

- The window holds the last N visible groups of the session's lane (0: all).
- With compaction enabled, the rows of the lane older than the window are
  covered by the newest valid summary that lies wholly outside the window
  (`head_summary`); the rows between that summary and the window are not sent
  (the strict window, `PLACE_WAITING`): the summary layer lists them in
  one line with the `query_db` query that reads them (`unsummarized_index`)
  until a lane summary covers them. Widening the window uncovers rows at once;
  narrowing it reuses a stored summary whose range still fits, or lists the
  rows until a new one is made. With compaction disabled, rows older than the
  window are simply not sent and not listed.
- A compaction summary (after-reply or guard) may reach into the window: it
  is used while the request is under pressure (history above
  `compaction_trigger_tokens`, or the request at `reduce_pct` of max input),
  which is when it was made. Under pressure, too, a user message of an older
  group longer than the full limit (a pasted log) is cut like a tool result
  (`cut_older_pastes`); the current turn's own message is cut only when it
  alone is longer than `own_message_max_pct` of the input budget, and then to
  that share (`cap_own_message`).
- A lane summary is due (`summary_due`) when the rows awaiting one pass seed
  002's thresholds: more than `lane_max_messages` rows, more than
  `lane_max_tokens` tokens in their short form (`pending_form`), or
  `lane_max_age_hours` since the last summary.

Pure: no I/O. A group's messages stay together: places are decided per group.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from slop_tui.context.anchors import STATE_HEADER, without_state
from slop_tui.context.assemble import (
    BEGIN_MARKER,
    END_MARKER,
    AssemblyInputs,
    ContextSettings,
    assemble_rows,
    rough_tokens,
    window_note,
)
from slop_tui.context.budget import CompactionSettings, ModelInfo
from slop_tui.context.guards import (
    TIER_ELIDED,
    GuardPlan,
    apply_plan,
    elide_messages,
    elided_pointer,
    plan_reduction,
)
from slop_tui.context.isolation import message_tokens, same_family
from slop_tui.context.prompt import ENGINE_KINDS, KIND_PAIR, Prompt, PromptMessage
from slop_tui.context.summaries import (
    state_corrections,
    summary_corrections,
    without_corrected,
)
from slop_tui.context.tiers import TIER_OVERSIZE, TIER_PASTE, TruncationSettings, truncate
from slop_tui.context.window import window_and_groups
from slop_tui.records import (
    STATUS_COMPLETED,
    STATUS_DROPPED,
    STATUS_ERROR,
    STATUS_TOOL_CALL,
    Message,
    Summary,
)

CountTokens = Callable[[str], int]

# Where a group stands in the next request.
PLACE_WINDOW = "window"  # in the rolling window: sent
PLACE_SUMMARY = "summary"  # covered by a summary (`GroupPlace.summary_id`): not sent itself
PLACE_WAITING = "waiting"  # left the window, not summarized yet: listed in one line
PLACE_OUTSIDE = "outside"  # outside the window (compaction off): not sent
PLACE_OTHER_LANE = "other_lane"  # another lane of the session: never sent here
PLACE_DROPPED = "dropped"  # `/context drop`: not sent, kept in the ledger
SENT_PLACES = frozenset({PLACE_WINDOW})

# Summary kinds (`summaries.kind`); compaction kinds may cover rows of the window.
KIND_GUARD = "guard"  # the guard ladder's summarize step, before a request
KIND_COMPACTION = "compaction"  # after-reply compaction, summarize case
KIND_TRUNCATE = "truncate"  # after-reply compaction, truncate case
KIND_LANE = "lane"  # rolling lane summary of rows that left the window
KIND_SESSION = "session"  # the session summary: an overview made from the lanes' summaries
COMPACTION_KINDS = frozenset({KIND_GUARD, KIND_COMPACTION, KIND_TRUNCATE})


def pending_cap(settings: CompactionSettings) -> int:
    """How many of the newest rows awaiting a summary the plan reads at most: twice the
    `lane_max_messages` threshold (60 by default), so the steady state (a summary is due
    past the threshold) never reaches it. A longer backlog (an imported history, a
    summary an edit took out of date) waits beyond it while the lane summaries absorb
    it, oldest first, instead of being read whole for every request."""
    return max(60, 2 * settings.lane_max_messages)


LABEL_OTHER_PROVIDER = "not sent: other provider"  # a tool row of another provider family
# A tool result of a group awaiting a summary, as its short form measures it: its
# `query_db` pointer, not its text.
TIER_POINTER = "pointer"

MARKS = {
    PLACE_WINDOW: "●",
    PLACE_SUMMARY: "Σ",
    PLACE_WAITING: "◌",
    PLACE_OUTSIDE: "○",
    PLACE_OTHER_LANE: "○",
    PLACE_DROPPED: "×",
}


@dataclass(frozen=True, slots=True)
class GroupPlace:
    """Where one group stands: its place, and the summary covering it (PLACE_SUMMARY)."""

    place: str
    summary_id: int | None = None

    @property
    def sent(self) -> bool:
        return self.place in SENT_PLACES

    @property
    def mark(self) -> str:
        return MARKS[self.place]

    @property
    def label(self) -> str:
        """One phrase: `in window`, `covered by summary 7`, `dropped (not sent)`, ..."""
        if self.place == PLACE_SUMMARY:
            return f"covered by summary {self.summary_id}"
        return {
            PLACE_WINDOW: "in window",
            PLACE_WAITING: "not sent: waiting for a summary",
            PLACE_OUTSIDE: "not sent: outside window",
            PLACE_OTHER_LANE: "not sent: other lane",
            PLACE_DROPPED: "dropped (not sent)",
        }[self.place]


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """Everything besides the ledger's records that decides a request."""

    context: ContextSettings = field(default_factory=ContextSettings)
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    model: ModelInfo | None = None  # None: no guard ladder (nothing to measure against)


@dataclass(frozen=True, slots=True)
class PlanInputs:
    """The ledger's records for one plan.

    `assembly.messages` are the window rows (`Ledger.window`); `backlog` the
    lane's visible rows older than the window and newer than the summary
    `head_summary` picks (`Ledger.lane_backlog`, the newest `pending_cap` rows);
    `summaries` the lane's valid summaries.
    """

    assembly: AssemblyInputs
    backlog: Sequence[Message] = ()
    backlog_complete: bool = True  # False: older rows than `backlog` wait beyond the cap
    summaries: Sequence[Summary] = ()
    elided: frozenset[int] = frozenset()  # tool results elided earlier in this turn
    now: float = 0.0  # epoch seconds, for the lane summary's age threshold
    summarized: bool = False  # a guard summary was already made for this request
    before_summary: int | None = None  # the request's tokens before that summary
    # The last message id an out-of-date summary covered (an edit took it out of date):
    # rows it stood for are summarized again at once, thresholds or not.
    stale_top: int | None = None


@dataclass(frozen=True, slots=True)
class ContextPlan:
    """The next request and every fact the panes show about it (see the module docstring)."""

    request: Prompt  # exactly what the provider adapter is given
    assembled: Prompt  # before the guard ladder
    guard: GuardPlan | None
    lane: str
    window_size: int
    window_groups: frozenset[int]
    window_start: int | None  # the oldest window group's id (None: an empty window)
    head: Summary | None  # the summary in the request (None: none)
    compaction_enabled: bool
    waiting: bool  # rows that left the window wait for a summary, not sent
    summary_due: bool  # a lane summary should be made now
    due_reason: str
    pending_tokens: int  # tokens (in their short form) of the rows awaiting a summary
    pending_messages: int
    messages: Mapping[int, str] = field(default_factory=dict)  # message id -> label (sent groups)
    sent: frozenset[int] = frozenset()  # ledger ids of the rows the request carries
    # Ids of the rows awaiting a summary, which the request does not carry (it lists
    # them in one line): a summary of the request's older rows folds them in first, so
    # it never stands for rows it did not read.
    unsent_backlog: tuple[int, ...] = ()
    # The last message id the head summary stands for in this request (None: its own
    # end): a summary that reaches into the window while the window is sent whole
    # stands only for the rows before it.
    covered_upto: int | None = None

    # -- places ------------------------------------------------------------

    def group_place(self, group_id: int, lane: str, status: str) -> GroupPlace:
        """The place of a group from its ledger facts (`Ledger.group_rows`: worst status)."""
        if status == STATUS_DROPPED:
            return GroupPlace(PLACE_DROPPED)
        if lane != self.lane:
            return GroupPlace(PLACE_OTHER_LANE)
        head = self.head
        upto = self.covered_upto
        if head is not None and group_id <= (upto if upto is not None else head.last_message_id):
            return GroupPlace(PLACE_SUMMARY, head.id)
        if group_id in self.window_groups:
            return GroupPlace(PLACE_WINDOW)
        if self.waiting and (self.window_start is None or group_id < self.window_start):
            return GroupPlace(PLACE_WAITING)
        return GroupPlace(PLACE_OUTSIDE)

    def message_label(self, msg: Message) -> str:
        """What happens to one row: `full 5000`, `inactive 300`, `elided`, `dropped`,
        `covered by summary 7`, `not sent: other provider`, `not sent: outside window`, ..."""
        if msg.status == STATUS_DROPPED:
            return "dropped"
        if msg.group_id is None:
            return "not sent: no group"
        place = self.group_place(msg.group_id, msg.lane, msg.status)
        if not place.sent:
            return "dropped" if place.place == PLACE_DROPPED else place.label
        return self.messages.get(msg.id, "not sent")

    # -- tokens ------------------------------------------------------------

    def layer_tokens(self) -> dict[str, int]:
        """Tokens per layer of the request, in order: the engine's layers, then `history`
        (the window) and `tools`. They add up to `request_tokens`: the heading of a
        pinned or context message counts with the first layer it carries."""
        counts = {layer.name: layer.tokens for layer in self.request.layers}
        history = 0
        for m in self.request.messages:
            if m.kind == KIND_PAIR:
                continue  # a pair layer's tokens are its two messages'
            if m.kind in ENGINE_KINDS:
                names = [la.name for la in self.request.layers if la.placement == m.kind]
                if names:
                    counts[names[0]] += m.tokens - sum(counts[n] for n in names)
                continue
            history += m.tokens + m.image_tokens
        counts["history"] = history
        counts["tools"] = self.request.tool_tokens
        return counts

    @property
    def request_tokens(self) -> int:
        return self.request.request_tokens

    @property
    def notes(self) -> tuple[str, ...]:
        return self.request.notes


# -- choosing what is sent ---------------------------------------------------------------


def head_summary(
    summaries: Iterable[Summary], window_start: int | None, lane: str
) -> Summary | None:
    """The summary that covers the rows older than the window: the valid one of the lane
    whose span ends last while lying wholly before the window (`window_start`: the
    oldest window group's id; None: the window is empty)."""
    best = None
    for s in summaries:
        if s.lane != lane or (window_start is not None and s.last_message_id >= window_start):
            continue
        if best is None or (s.last_message_id, s.id) > (best.last_message_id, best.id):
            best = s
    return best


def _compaction_summary(
    summaries: Iterable[Summary], lane: str, after: int, before: int
) -> Summary | None:
    """The newest compaction summary of the lane ending after `after` and before `before`."""
    best = None
    for s in summaries:
        if s.lane != lane or s.kind not in COMPACTION_KINDS:
            continue
        if not after < s.last_message_id < before:
            continue
        if best is None or (s.last_message_id, s.id) > (best.last_message_id, best.id):
            best = s
    return best


def _covered_upto(head: Summary | None, rows: Sequence[Message]) -> int | None:
    """What the head summary stands for: up to its end, or up to the oldest sent group."""
    if head is None:
        return None
    sent = [m.group_id for m in rows if m.group_id is not None]
    return min(head.last_message_id, min(sent) - 1) if sent else head.last_message_id


def _under_pressure(prompt: Prompt, s: CompactionSettings, model: ModelInfo | None) -> bool:
    if prompt.history_tokens > s.compaction_trigger_tokens:
        return True
    return model is not None and prompt.request_tokens * 100 >= s.reduce_pct * (
        model.max_input_tokens
    )


def _due(
    pending: Sequence[Message],
    tokens: int,
    waiting: bool,
    head: Summary | None,
    s: CompactionSettings,
    now: float,
    stale_top: int | None,
    corrections: Sequence[str] = (),
) -> tuple[bool, str]:
    """Seed 002's triggers over the rows awaiting a summary, the rebuild of a summary an
    edit took out of date, and a correction of a value the summary in the request
    holds (the rows are not sent)."""
    if waiting:
        return True, "older rows than the ones read wait for a summary"
    if not pending:
        return False, ""
    if stale_top is not None and pending[0].id <= stale_top:
        return True, "the history under a summary changed: it is made again"
    if len(pending) > s.lane_max_messages:
        return True, f"{len(pending)} messages await a summary (> {s.lane_max_messages})"
    if tokens > s.lane_max_tokens:
        return True, f"{tokens:,} tokens await a summary (> {s.lane_max_tokens:,})"
    since = head.created_at if head is not None else min(m.created_at for m in pending)
    hours = s.lane_max_age_hours
    if hours > 0 and now and now - since > hours * 3600:
        return True, f"the last summary is older than {hours:g} h"
    if corrections:
        # The summary in the request holds a value the unsent rows correct: the index
        # lists the correction until a summary folds it in, which is due now.
        return True, "a row awaiting a summary corrects a value of the summary"
    return False, ""


def cut_older_pastes(
    prompt: Prompt,
    limits: TruncationSettings,
    count_tokens: CountTokens,
    *,
    every_group: bool = False,
) -> Prompt:
    """The request with every user message of an older group (not the group of its last
    message) longer than the full limit cut like a tool result: head, the `query_db`
    hint, tail (`TIER_PASTE`). The current turn's own message is not cut here
    (`cap_own_message`).

    `every_group`: no group of `prompt` is the current one (measuring the request that
    follows a finished turn, which opens a group of its own)."""
    history = [m for m in prompt.messages if m.kind is None]
    if not history:
        return prompt
    active = None if every_group else history[-1].group_id
    limit = limits.limit_for(TIER_PASTE)
    out: list[PromptMessage] = []
    cut = 0
    for m in prompt.messages:
        if (
            m.kind is None
            and m.role == "user"
            and m.message_id is not None
            and m.group_id != active
            and len(m.text) > limit
        ):
            marker, body = _split_marker(m.text)
            short = truncate(body, limit, m.message_id, limits.head_ratio)
            if short != body:
                text = marker + short
                tokens = message_tokens(text, m.tool_calls, count_tokens)
                m = replace(m, text=text, tokens=tokens, truncated=True, tier=TIER_PASTE)
                cut += 1
        out.append(m)
    if not cut:
        return prompt
    note = (
        f"paste: {cut} user message(s) of older groups cut to {limit} characters while the "
        "history is under pressure; full text via query_db"
    )
    return replace(prompt, messages=tuple(out), notes=(*prompt.notes, note))


def _split_marker(text: str) -> tuple[str, str]:
    """A user message's topic marker (kept whole when the rest is cut) and the rest."""
    marker = next((k for k in (BEGIN_MARKER, END_MARKER) if text.startswith(k)), "")
    return marker, text[len(marker) :]


def cap_own_message(
    prompt: Prompt,
    max_tokens: int,
    limits: TruncationSettings,
    count_tokens: CountTokens,
    *,
    unsendable: int,
) -> Prompt:
    """The request with each user message of the current turn (the group of its last
    message) longer than `max_tokens` cut to about that size: head, the `query_db`
    hint, tail (`TIER_OVERSIZE`). A message that alone fills most of the input budget
    leaves no room for the tool results its turn reads, and the next request cuts it
    anyway (`cut_older_pastes`); it is cut once, to the cap, never further.

    A message longer than `unsendable` tokens (the whole input budget) is left as it
    is: it could never have been sent, so the guard ladder sets its group aside with
    one clear error and nothing is sent (a mistaken paste costs nothing)."""
    history = [m for m in prompt.messages if m.kind is None]
    if not history or max_tokens <= 0:
        return prompt
    active = history[-1].group_id
    out: list[PromptMessage] = []
    cut = 0
    for m in prompt.messages:
        if (
            m.kind is None
            and m.role == "user"
            and m.message_id is not None
            and m.group_id == active
            and max_tokens < m.tokens <= unsendable
        ):
            marker, body = _split_marker(m.text)
            limit = len(body) * max_tokens // m.tokens
            text, tokens = m.text, m.tokens
            # Characters per token vary along a text: shrink until the cut fits.
            for _ in range(4):
                text = marker + truncate(body, limit, m.message_id, limits.head_ratio)
                tokens = message_tokens(text, m.tool_calls, count_tokens)
                if tokens <= max_tokens:
                    break
                limit = limit * max_tokens // tokens * 95 // 100
            if tokens < m.tokens:
                m = replace(m, text=text, tokens=tokens, truncated=True, tier=TIER_OVERSIZE)
                cut += 1
        out.append(m)
    if not cut:
        return prompt
    note = (
        f"oversize: the turn's own message cut to {max_tokens:,} tokens (its share of the "
        "input budget); full text via query_db"
    )
    return replace(prompt, messages=tuple(out), notes=(*prompt.notes, note))


def pending_form(prompt: Prompt, groups: frozenset[int], count_tokens: CountTokens) -> Prompt:
    """The request with the rows of `groups` (left the window, awaiting a summary) in
    their short form: each tool result replaced by its one-line `query_db` pointer
    (`TIER_POINTER`; a result no longer than its pointer stays), each answer without
    its `### STATE` block (the STATE layer holds the current one). Seed 002's token
    threshold measures those rows this way (`_short_form_tokens`): what they hold
    that a summary would keep, not the tool output it keeps only as anchors."""
    if not groups:
        return prompt
    out: list[PromptMessage] = []
    for m in prompt.messages:
        if m.kind is None and m.message_id is not None and m.group_id in groups:
            if m.role == "tool":
                pointer = elided_pointer(m.message_id)
                tokens = count_tokens(pointer)
                if tokens < m.tokens:
                    m = replace(m, text=pointer, tokens=tokens, truncated=True, tier=TIER_POINTER)
            elif m.role == "assistant" and STATE_HEADER in m.text:
                text = without_state(m.text)
                if text != m.text:
                    # A changed text drops the stored payload, so an adapter cannot replay
                    # the old one (as the history markers do).
                    native = m.native if m.tool_calls else None
                    tokens = message_tokens(text, m.tool_calls, count_tokens)
                    m = replace(m, text=text, tokens=tokens, native=native)
        out.append(m)
    return replace(prompt, messages=tuple(out))


def named_lanes(text: str, lanes: Iterable[str], current: str) -> list[str]:
    """The lanes other than `current` the user names in `text`: by their key
    (`topic:deploy`, `reply:12`), or a topic's name next to the word lane, topic or
    thread ("the deploy lane", "topic deploy"). Seed 002: another lane's summary is
    retrieved only when the user refers to it explicitly."""
    out = []
    for lane in lanes:
        if lane == current or lane in out:
            continue
        kind, _, name = lane.partition(":")
        named = re.search(rf"(?<![\w:]){re.escape(lane)}(?![\w-])", text) is not None
        if not named and kind == "topic" and len(name) >= 3:
            word = re.escape(name)
            named = (
                re.search(
                    rf"(?i)\b(?:lane|topic|thread)\s+[\"'`]?{word}\b"
                    rf"|\b{word}[\"'`]?\s+(?:lane|topic|thread)\b",
                    text,
                )
                is not None
            )
        if named:
            out.append(lane)
    return out


def unsummarized_index(
    rows: Sequence[Message], older: bool = False, corrections: Sequence[str] = ()
) -> str:
    """The one line that stands for the rows that left the window and no summary covers
    yet (the strict window sends none of them): which groups, how many messages, and the
    `query_db` query that reads them. `older`: still older rows wait beyond these.
    `corrections`: the user's statements among them that correct a value of the summary
    in the request, listed after the line so that value is not taken as current."""
    if not rows:
        return ""
    groups = sorted({m.group_id for m in rows if m.group_id is not None})
    first, last = min(m.id for m in rows), max(m.id for m in rows)
    span = f"group {groups[0]}" if len(groups) == 1 else f"groups {groups[0]}–{groups[-1]}"
    if older:
        span += " and older ones"
    return (
        f"{span} ({len(rows)} message(s)): not summarized yet; query_db reads them: "
        f'query_db(sql="SELECT id, role, content FROM messages WHERE id BETWEEN {first} '
        f"AND {last} AND status != 'dropped'\")\n"
        + "".join(f"- corrected there (the later value wins): {c}\n" for c in corrections)
    )


def _short_form_tokens(
    rows: Sequence[Message],
    asm: AssemblyInputs,
    ctx: ContextSettings,
    count_tokens: CountTokens,
) -> int:
    """Tokens of `rows` in the short form (`pending_form`): how seed 002's token
    threshold measures the rows awaiting a summary when they are not sent."""
    if not rows:
        return 0
    alone = assemble_rows(replace(asm, summaries=()), rows, ctx, count_tokens, [])
    # As the short form would send them: a pasted log of theirs cut like an older
    # group's (`cut_older_pastes`), each tool result its pointer.
    alone = cut_older_pastes(alone, ctx.truncation, count_tokens, every_group=True)
    groups = frozenset(m.group_id for m in rows if m.group_id is not None)
    short = pending_form(alone, groups, count_tokens)
    return sum(m.tokens for m in short.messages if not m.kind and m.group_id in groups)


# -- labels of the rows that are sent --------------------------------------------------------


def _labels(
    rows: Sequence[Message],
    request: Prompt,
    settings: ContextSettings,
    strategy: str,
    enabled: frozenset[str],
) -> dict[int, str]:
    sent: dict[int, PromptMessage] = {
        m.message_id: m for m in request.messages if m.message_id is not None and not m.kind
    }
    limits = settings.truncation
    out: dict[int, str] = {}
    for msg in rows:
        m = sent.get(msg.id)
        if m is not None:
            if m.tier == TIER_ELIDED:
                out[msg.id] = "elided"
            elif m.tier == TIER_OVERSIZE:
                out[msg.id] = f"{m.tier} {len(m.text)}"
            elif m.tier:
                out[msg.id] = f"{m.tier} {limits.limit_for(m.tier)}"
            else:
                out[msg.id] = "sent"
        elif msg.is_tool_related and not same_family(msg, strategy):
            out[msg.id] = LABEL_OTHER_PROVIDER
        elif msg.role == "tool" and (msg.tool_name or "") not in enabled:
            out[msg.id] = "not sent: tool disabled"
        elif msg.role == "tool" and msg.status not in (STATUS_COMPLETED, STATUS_ERROR):
            out[msg.id] = f"not sent: {msg.status}"
        elif msg.status not in (STATUS_COMPLETED, STATUS_TOOL_CALL, STATUS_ERROR) or (
            msg.status == STATUS_ERROR and msg.role != "tool"
        ):
            out[msg.id] = f"not sent: {msg.status}"
        else:
            out[msg.id] = "not sent: left out to fit the context window"
    return out


# -- the plan --------------------------------------------------------------------------------


def build_plan(
    inputs: PlanInputs,
    settings: PlanSettings | None = None,
    count_tokens: CountTokens = rough_tokens,
) -> ContextPlan:
    """The plan of the next request (see the module docstring)."""
    settings = settings or PlanSettings()
    ctx, comp = settings.context, settings.compaction
    asm = inputs.assembly
    sess = asm.session
    lane = sess.lane
    size = ctx.window if ctx.window is not None else sess.window_size
    window, groups = window_and_groups(asm.messages, size, lane=lane)
    window_start = groups[0] if groups else None
    enabled = comp.enabled
    summaries = [s for s in inputs.summaries if s.lane == lane] if enabled else []

    head = head_summary(summaries, window_start, lane)
    after = head.last_message_id if head is not None else 0
    pending = [
        m
        for m in inputs.backlog
        if m.group_id is not None
        and m.lane == lane
        and m.status != STATUS_DROPPED
        and m.id > after
        and (window_start is None or m.group_id < window_start)
    ]
    if not enabled:
        pending = []
    # Seed 000's strict window: rows that left it reach the model through a summary,
    # query_db, or the one-line index of what is not summarized yet.
    beyond_cap = enabled and not inputs.backlog_complete
    fixes: list[str] = []  # the user's corrections of the summary among unsent rows

    def assemble_with(rows: list[Message], summary: Summary | None) -> Prompt:
        notes = [window_note(window, groups, size)]
        nonlocal fixes
        index, fixes = "", []
        if pending:
            fixes = summary_corrections(summary.content, pending) if summary is not None else []
            index = unsummarized_index(pending, older=beyond_cap, corrections=fixes)
            if fixes and summary is not None:
                # The later value wins: the anchors it corrects are not sent beside it.
                summary = replace(summary, content=without_corrected(summary.content, fixes))
            notes.append(
                f"not summarized yet: {len({m.group_id for m in pending})} group(s) that left "
                "the window are listed in one line, not sent"
            )
        if summary is not None:
            notes.append(f"summary {summary.id} covers messages up to #{summary.last_message_id}")
        if asm.session_summary is not None:
            overview = asm.session_summary
            notes.append(
                f"session summary {overview.id}: every lane, messages up to "
                f"#{overview.last_message_id}"
            )
        with_summary = replace(
            asm, summaries=(summary,) if summary is not None else (), unsummarized=index
        )
        return assemble_rows(with_summary, rows, ctx, count_tokens, notes)

    # A value the user corrected after the STATE was written is flagged next to it.
    if asm.state and asm.state_group is not None:
        later = [m for m in window if m.group_id is not None and m.group_id > asm.state_group]
        fixes = tuple(state_corrections(asm.state, later))
        if fixes != tuple(asm.state_corrections):
            asm = replace(asm, state_corrections=fixes)
    rows = list(window)
    newest = groups[-1] if groups else None
    if pending and newest is not None:
        # A compaction summary that reaches into the window also stands for the rows
        # before it: better than their one-line index; the window is still sent whole.
        deeper = _compaction_summary(summaries, lane, after, newest)
        if deeper is not None and deeper.last_message_id >= pending[-1].id:
            head, pending = deeper, []
    prompt = assemble_with(rows, head)
    # A compaction summary reaches into the window while the request needs it.
    if enabled and newest is not None and _under_pressure(prompt, comp, settings.model):
        deeper = _compaction_summary(summaries, lane, after, newest)
        if deeper is not None:
            head = deeper
            rows = [
                m for m in rows if m.group_id is not None and m.group_id > deeper.last_message_id
            ]
            pending = [
                m for m in pending if m.group_id is not None and m.group_id > deeper.last_message_id
            ]
            prompt = assemble_with(rows, head)
    # Under pressure a pasted log or document of an older group stops riding whole in
    # every request: it is cut like a tool result, and recoverable the same way.
    if enabled and _under_pressure(prompt, comp, settings.model):
        prompt = cut_older_pastes(prompt, ctx.truncation, count_tokens)
    # A message that alone takes more than its share of the input budget is cut to it,
    # even in its own turn.
    if enabled and settings.model is not None and comp.own_message_max_pct:
        cap = settings.model.max_input_tokens * comp.own_message_max_pct // 100
        prompt = cap_own_message(
            prompt,
            cap,
            ctx.truncation,
            count_tokens,
            unsendable=settings.model.max_input_tokens,
        )

    pending_tokens = _short_form_tokens(pending, asm, ctx, count_tokens)
    waiting = beyond_cap or bool(pending)
    due, reason = (False, "")
    if enabled:
        due, reason = _due(
            pending,
            pending_tokens,
            beyond_cap,
            head,
            comp,
            inputs.now,
            inputs.stale_top,
            fixes,
        )

    request, guard = prompt, None
    if inputs.elided:
        prompt = elide_messages(prompt, inputs.elided, count_tokens)
        request = prompt
    if settings.model is not None:
        guard = plan_reduction(
            prompt,
            settings.model,
            comp,
            count_tokens,
            summarized=inputs.summarized,
            before_summary=inputs.before_summary,
        )
        request = apply_plan(prompt, guard, count_tokens)

    enabled_tools = frozenset(t.name for t in asm.tools)
    return ContextPlan(
        request=request,
        assembled=prompt,
        guard=guard,
        lane=lane,
        window_size=size,
        window_groups=frozenset(groups),
        window_start=window_start,
        head=head,
        compaction_enabled=enabled,
        waiting=waiting,
        summary_due=due,
        due_reason=reason,
        pending_tokens=pending_tokens,
        pending_messages=len(pending),
        messages=_labels(rows, request, ctx, asm.strategy, enabled_tools),
        sent=frozenset(
            m.message_id for m in request.messages if m.message_id is not None and not m.kind
        ),
        unsent_backlog=tuple(m.id for m in pending),
        covered_upto=_covered_upto(head, rows),
    )


__all__ = [
    "COMPACTION_KINDS",
    "KIND_COMPACTION",
    "KIND_GUARD",
    "KIND_LANE",
    "KIND_SESSION",
    "KIND_TRUNCATE",
    "LABEL_OTHER_PROVIDER",
    "PLACE_DROPPED",
    "PLACE_OTHER_LANE",
    "PLACE_OUTSIDE",
    "PLACE_SUMMARY",
    "PLACE_WAITING",
    "PLACE_WINDOW",
    "TIER_POINTER",
    "ContextPlan",
    "GroupPlace",
    "PlanInputs",
    "PlanSettings",
    "build_plan",
    "cap_own_message",
    "cut_older_pastes",
    "head_summary",
    "pending_cap",
    "pending_form",
]
