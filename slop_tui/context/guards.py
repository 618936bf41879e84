"""The guard ladder, run before every request, also inside a tool loop (seed 004, seed 003).

`plan_reduction(prompt, info, settings, count_tokens)` measures an assembled
request against the model's input budget (window minus output reserve) and
describes, in order, what to do:

(a) warn: at >= `warn_pct` (80 %) a warning note, nothing else.
(b) elide: at >= `reduce_pct` (90 %), elide tool results middle-out at the
    removal levels 0/10/20/50/100 % until the request is under 80 % of that
    threshold (72 % of the budget). An elided result becomes a one-line
    pointer to `query_db`; the message stays, so call/result pairs stay valid.
(c) summarize: still at or above that target, a request to summarise every
    history message older than the verbatim part (the last
    `keep_recent_messages` messages, at least `min_verbatim_exchanges` user
    messages, starting at a user message). This needs a model call, so the
    ladder pauses there: `plan.summarize` is the pending step. The caller
    summarises (see `summaries.py`), persists, re-assembles, and plans again
    with `summarized=True` (or calls `apply_summary`).
(d) emergency: still at or above `reduce_pct` and the history is more than
    twice `compaction_trigger_tokens`: drop the oldest exchanges (then the
    oldest call runs of the current turn), never the current request, and
    leave a `query_db` notice where they were.
(e) shed: the whole request still above `reduce_pct` of max input: leave out
    the repository's own layers (map, file tree), largest first, then files
    from the files layer, largest first, until it is at the target of (b)
    (72 %), with a note that names what left.

Never loop: every step is taken at most once per plan and the summary at most
once per request (the re-plan passes `summarized=True`). A step is taken
only when it frees at least `min_shrink_pct` % of the request, reaches its
own goal, or makes a request that did not fit fit; otherwise the plan notes
that it was not worth it (a cache miss or a model call for nothing) and
moves on. After the last step the verdict is: it fits in max input (sent,
with a note when still above `reduce_pct`), or `fails=True` with a one-line
reason. `plan.stopped` names the steps that were skipped as not worth it.

`apply_plan(prompt, plan)` replays the taken steps by message id and file
path, so it gives the same request the plan measured.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from slop_tui.context.assemble import (
    BEGIN_MARKER,
    FILES_HEADER,
    SUMMARY_HEADER,
    SUMMARY_SOURCE,
    engine_message,
    place_engine_messages,
    rough_tokens,
)
from slop_tui.context.budget import (
    LEVEL_OK,
    CompactionSettings,
    ModelInfo,
    usage_level,
)
from slop_tui.context.isolation import message_tokens
from slop_tui.context.prompt import (
    ENGINE_KINDS,
    KIND_NOTICE,
    KIND_SUMMARY,
    LAYER_FILE_TREE,
    LAYER_FILES,
    LAYER_REPO_MAP,
    LAYER_RESOURCES,
    LAYER_URLS,
    PLACEMENT_SYSTEM,
    Layer,
    Prompt,
    PromptMessage,
)

CountTokens = Callable[[str], int]

STEP_WARN = "warn"
STEP_ELIDE = "elide"
STEP_SUMMARIZE = "summarize"
STEP_EMERGENCY = "emergency"
STEP_SHED = "shed"
STEP_ORDER = (STEP_WARN, STEP_ELIDE, STEP_SUMMARIZE, STEP_EMERGENCY, STEP_SHED)
# Layers the shed step leaves out before any file, largest first, with their names.
SHEDDABLE_LAYERS = {
    LAYER_URLS: "the URL context",
    LAYER_RESOURCES: "the MCP resources",
    LAYER_REPO_MAP: "the repository map",
    LAYER_FILE_TREE: "the file tree",
}

TIER_ELIDED = "elided"
ELIDED_TEMPLATE = (
    '[tool result elided to save context: use query_db(sql="SELECT content FROM messages '
    'WHERE id={id}") to read it]'
)
DROPPED_TEMPLATE = (
    "[{n} earlier message(s) (#{first}..#{last}) left out to fit the context window; "
    'read them with query_db(sql="SELECT id, role, content FROM messages '
    'WHERE id BETWEEN {first} AND {last} ORDER BY id")]'
)


def elided_pointer(message_id: int) -> str:
    """The one line an elided tool result is replaced by."""
    return ELIDED_TEMPLATE.format(id=message_id)


@dataclass(frozen=True, slots=True)
class GuardStep:
    """One rung of the ladder, as measured on the request."""

    kind: str  # one of STEP_ORDER
    detail: str
    tokens_before: int
    tokens_after: int
    applied: bool = True  # False: described only (a pending summary, a skipped step)
    level: int = 0  # elide: the removal level used, in percent
    message_ids: tuple[int, ...] = ()  # elided / to summarise / dropped message ids
    keep_ids: tuple[int, ...] = ()  # summarize: the ids kept verbatim
    files: tuple[str, ...] = ()  # shed: the paths removed
    layers: tuple[str, ...] = ()  # shed: the source layers left out (SHEDDABLE_LAYERS)

    @property
    def freed(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclass(frozen=True, slots=True)
class GuardPlan:
    """What to do before sending a request; see the module docstring."""

    level: str  # "ok" | "warning" | "critical", of the request as given
    tokens_before: int
    tokens_after: int  # after the taken steps (a pending summary not included)
    max_input_tokens: int
    steps: tuple[GuardStep, ...] = ()
    summarize: GuardStep | None = None  # pending: run it, then plan again with summarized=True
    fails: bool = False
    reason: str = ""  # one line when fails
    notes: tuple[str, ...] = ()
    stopped: tuple[str, ...] = ()  # steps not taken because they would not free enough

    @property
    def warning(self) -> str | None:
        """The warning text when the request was at or above warn_pct, else None."""
        for step in self.steps:
            if step.kind == STEP_WARN:
                return step.detail
        return None

    @property
    def changed(self) -> bool:
        """True when `apply_plan` changes the request."""
        return any(s.applied and s.kind != STEP_WARN for s in self.steps)

    def kinds(self) -> list[str]:
        """The kinds of the taken steps, in order (a pending summary last)."""
        out = [s.kind for s in self.steps if s.applied]
        if self.summarize is not None:
            out.append(STEP_SUMMARIZE)
        return out


# --- elision (seed 004 filterToolResponses) ------------------------------------------------


def middle_out(n: int, percent: int) -> list[int]:
    """Seed 004's choice of tool responses to remove, as positions 0..n-1 in removal order.

    Exactly the seed's algorithm: remove `n * percent // 100` (at least one
    when percent > 0), alternating around the middle: middle-1, middle,
    middle-2, middle+1, … A position that falls off the list is skipped, not
    replaced, so with an odd n even 100 % keeps the newest response, and with
    n == 1 nothing is removed.
    """
    if percent <= 0 or n <= 0:
        return []
    count = n * percent // 100
    if count == 0:
        count = 1
    middle = n // 2
    out: list[int] = []
    for i in range(count):
        offset = i // 2
        j = middle - offset - 1 if i % 2 == 0 else middle + offset
        if 0 <= j < n:
            out.append(j)
    return out


def _tool_candidates(prompt: Prompt) -> list[int]:
    """Indices of the tool results that may be elided: all but the results of the newest
    assistant message that called tools (what the model just asked for, a parallel
    batch of calls included), and all but the newest result when no such message is
    in the request."""
    msgs = prompt.messages
    found = [
        i
        for i, m in enumerate(msgs)
        if m.role == "tool" and m.message_id is not None and not m.kind
    ]
    caller = next(
        (
            i
            for i in range(len(msgs) - 1, -1, -1)
            if msgs[i].role == "assistant" and msgs[i].tool_calls
        ),
        None,
    )
    if caller is None:
        return found[:-1]
    asked = {c.id for c in msgs[caller].tool_calls}
    newest = [i for i in found if i > caller and msgs[i].tool_call_id in asked]
    keep = set(newest) if newest else set(found[-1:])
    return [i for i in found if i not in keep]


def elide_messages(
    prompt: Prompt, ids: Collection[int], count_tokens: CountTokens = rough_tokens
) -> Prompt:
    """Replace the tool results with these message ids by their `query_db` pointer.

    A result whose text is not longer than the pointer is left as it is.
    """
    wanted = set(ids)
    out = []
    for m in prompt.messages:
        if m.role == "tool" and m.message_id in wanted and m.kind is None:
            assert m.message_id is not None
            pointer = elided_pointer(m.message_id)
            tokens = count_tokens(pointer)
            if tokens < m.tokens:
                m = replace(m, text=pointer, tokens=tokens, truncated=True, tier=TIER_ELIDED)
        out.append(m)
    return replace(prompt, messages=tuple(out))


def _elision_ids(prompt: Prompt, percent: int) -> list[int]:
    cands = _tool_candidates(prompt)
    msgs = prompt.messages
    return [msgs[cands[j]].message_id for j in middle_out(len(cands), percent)]  # type: ignore[misc]


def elide_tool_results(
    prompt: Prompt, percent: int, count_tokens: CountTokens = rough_tokens
) -> Prompt:
    """Elide `percent` % of the tool results, middle-out (see `middle_out`)."""
    return elide_messages(prompt, _elision_ids(prompt, percent), count_tokens)


def _elided_ids(before: Prompt, after: Prompt) -> tuple[int, ...]:
    return tuple(
        b.message_id
        for b, a in zip(before.messages, after.messages, strict=True)
        if b.message_id is not None and a.tier == TIER_ELIDED and b.tier != TIER_ELIDED
    )


# --- dropping messages (emergency truncation, summaries) ------------------------------------


def _with_begin_marker(text: str) -> str:
    return text if text.startswith(BEGIN_MARKER) else BEGIN_MARKER + text


def _remove(
    prompt: Prompt,
    ids: Collection[int],
    filler: Callable[[list[PromptMessage]], PromptMessage | None],
    count_tokens: CountTokens,
    first_run_only: bool = False,
) -> Prompt:
    """Remove history messages by id, with the results of removed calls, and put
    `filler(run)` (if any) where each run of removed messages was."""
    wanted = set(ids)
    msgs = prompt.messages
    history = [i for i, m in enumerate(msgs) if m.kind not in ENGINE_KINDS]
    first_hist = history[0] if history else None
    dropped_calls: set[str] = set()
    gone = [False] * len(msgs)
    for i, m in enumerate(msgs):
        if m.kind in ENGINE_KINDS:
            continue
        if m.message_id in wanted or (m.role == "tool" and m.tool_call_id in dropped_calls):
            gone[i] = True
            dropped_calls.update(c.id for c in m.tool_calls)
        elif m.message_id is None and m.role == "tool" and i > 0 and gone[i - 1]:
            gone[i] = True  # a synthetic result of a removed call
    out: list[PromptMessage] = []
    run: list[PromptMessage] = []
    runs = 0
    marker_lost = (
        first_hist is not None
        and gone[first_hist]
        and msgs[first_hist].text.startswith(BEGIN_MARKER)
    )

    def flush() -> None:
        nonlocal runs
        if run:
            runs += 1
            fill = filler(list(run)) if not first_run_only or runs == 1 else None
            if fill is not None:
                out.append(fill)
            run.clear()

    for i, m in enumerate(msgs):
        if gone[i]:
            run.append(m)
            continue
        flush()
        out.append(m)
    flush()
    if marker_lost:
        j = next((k for k, m in enumerate(out) if m.kind not in ENGINE_KINDS), None)
        if j is not None:
            m = out[j]
            text = _with_begin_marker(m.text)
            if text != m.text:
                native = m.native if m.tool_calls else None
                out[j] = replace(
                    m,
                    text=text,
                    native=native,
                    tokens=message_tokens(text, m.tool_calls, count_tokens),
                )
    return replace(prompt, messages=tuple(out))


def _ids_of(run: Sequence[PromptMessage]) -> list[int]:
    return [m.message_id for m in run if m.message_id is not None]


def drop_messages(
    prompt: Prompt, ids: Collection[int], count_tokens: CountTokens = rough_tokens
) -> Prompt:
    """Remove history messages by id (emergency truncation), keeping the request valid.

    Results of removed calls go with them. Each run of removed messages is
    replaced by one user-role notice naming the ids and the `query_db` query
    that reads them back.
    """

    def notice(run: list[PromptMessage]) -> PromptMessage | None:
        got = _ids_of(run)
        if not got:
            return None
        text = DROPPED_TEMPLATE.format(n=len(got), first=min(got), last=max(got))
        return PromptMessage(role="user", text=text, tokens=count_tokens(text), kind=KIND_NOTICE)

    return _remove(prompt, ids, notice, count_tokens)


def summary_message_text(summary_text: str, covered_ids: Collection[int]) -> str:
    """The text of the message that stands for a summarised span."""
    first, last = min(covered_ids), max(covered_ids)
    source = SUMMARY_SOURCE.format(first=first, last=last)
    return SUMMARY_HEADER + source + summary_text.strip() + "\n"


def apply_summary(
    prompt: Prompt,
    summary_text: str,
    covered_ids: Collection[int],
    count_tokens: CountTokens = rough_tokens,
) -> Prompt:
    """Replace the covered history messages by one summary message (role user).

    The summary goes where the first covered message was; results of covered
    calls go too, so the request stays valid. This is the in-memory form of
    a summarize step; once the summary is in the ledger, re-assembling gives
    the same content as a `summary` layer instead.
    """
    if not covered_ids:
        return prompt
    text = summary_message_text(summary_text, covered_ids)
    message = PromptMessage(role="user", text=text, tokens=count_tokens(text), kind=KIND_SUMMARY)
    out = _remove(prompt, covered_ids, lambda run: message, count_tokens, first_run_only=True)
    return replace(out, notes=(*out.notes, f"summary: {len(covered_ids)} message(s) summarised"))


# --- units of history ------------------------------------------------------------------------


def _history(prompt: Prompt) -> list[int]:
    return [i for i, m in enumerate(prompt.messages) if m.kind not in ENGINE_KINDS]


def _is_turn_start(m: PromptMessage) -> bool:
    return m.role == "user" and m.kind is None


def _keep_start(prompt: Prompt, settings: CompactionSettings) -> int | None:
    """Index where the verbatim part starts (a user message), or None when all is kept."""
    msgs = prompt.messages
    hist = _history(prompt)
    if len(hist) <= settings.keep_recent_messages:
        return None
    start = hist[-settings.keep_recent_messages] if settings.keep_recent_messages else len(msgs)
    users = [i for i in hist if _is_turn_start(msgs[i])]
    at_or_before = [i for i in users if i <= start]
    if not at_or_before:
        return None
    start = at_or_before[-1]
    need = settings.min_verbatim_exchanges
    if need and sum(1 for i in users if i >= start) < need:
        start = users[-need] if len(users) >= need else users[0]
    return start if start > hist[0] else None


def _units(prompt: Prompt) -> list[list[int]]:
    """History indices grouped into droppable units: [user], [assistant + its results]."""
    msgs = prompt.messages
    units: list[list[int]] = []
    for i in _history(prompt):
        if msgs[i].role == "tool" and units:
            units[-1].append(i)
        else:
            units.append([i])
    return units


def _emergency_ids(prompt: Prompt, goal: int, count_tokens: CountTokens) -> list[int]:
    """Ids to drop, oldest first, until the request is under `goal` tokens.

    Whole exchanges go first (a user message and everything up to the next);
    the current exchange is never dropped whole: its user message and its
    last unit stay, older call runs of it may go.
    """
    msgs = prompt.messages
    units = _units(prompt)
    turn_starts = [k for k, u in enumerate(units) if _is_turn_start(msgs[u[0]])]
    last_turn = turn_starts[-1] if turn_starts else 0
    # Exchanges before the current one, then single units inside it (not its
    # user message, not its last unit).
    batches: list[list[int]] = []
    bounds = [k for k in turn_starts if k < last_turn]
    starts = sorted({0, *bounds})
    for a, b in zip(starts, [*starts[1:], last_turn], strict=True):
        if a < b:
            batches.append([i for u in units[a:b] for i in u])
    inner_from = last_turn + 1 if turn_starts else last_turn
    for u in units[inner_from:-1]:
        batches.append(u)
    # Tokens freed are summed as we go (the exact count is taken once, by the
    # caller); a run of dropped messages costs one notice.
    notice = count_tokens(DROPPED_TEMPLATE.format(n=999, first=10**6, last=10**6))
    left = prompt.request_tokens + notice
    dropped: list[int] = []
    for batch in batches:
        if left < goal:
            break
        ids = [msgs[i].message_id for i in batch if msgs[i].message_id is not None]
        if not ids:
            continue
        dropped.extend(ids)  # type: ignore[arg-type]
        left -= sum(msgs[i].tokens for i in batch)
    return dropped


# --- files --------------------------------------------------------------------------------


def remove_files(
    prompt: Prompt, paths: Collection[str], count_tokens: CountTokens = rough_tokens
) -> Prompt:
    """The request without these files (the files layer, and its message, rebuilt)."""
    gone = set(paths)
    if not gone & {f.path for f in prompt.files}:
        return prompt
    files = tuple(f for f in prompt.files if f.path not in gone)
    layers: list[Layer] = []
    where = PLACEMENT_SYSTEM
    for layer in prompt.layers:
        if layer.name != LAYER_FILES:
            layers.append(layer)
            continue
        where = layer.placement
        if files:
            lead = "\n" if layer.text.startswith("\n") else ""
            text = lead + FILES_HEADER + "".join(f.text for f in files)
            layers.append(replace(layer, text=text, tokens=count_tokens(text)))
    messages = list(prompt.messages)
    if where != PLACEMENT_SYSTEM:
        at = next(i for i, m in enumerate(messages) if m.kind == where)
        rebuilt = engine_message(layers, where, count_tokens)
        if rebuilt is None:
            del messages[at]
        else:
            messages[at] = rebuilt
    note = f"files: removed {', '.join(sorted(gone & {f.path for f in prompt.files}))}"
    return replace(
        prompt,
        layers=tuple(layers),
        messages=tuple(messages),
        files=files,
        notes=(*prompt.notes, note),
    )


def remove_layers(prompt: Prompt, names: Collection[str], count_tokens: CountTokens) -> Prompt:
    """The request without the layers `names` (their engine messages rebuilt)."""
    gone = set(names)
    layers = tuple(la for la in prompt.layers if la.name not in gone)
    if len(layers) == len(prompt.layers):
        return prompt
    history = [m for m in prompt.messages if m.kind not in ENGINE_KINDS]
    messages = place_engine_messages(history, layers, count_tokens)
    note = "left out: " + ", ".join(SHEDDABLE_LAYERS.get(n, n) for n in names)
    return replace(prompt, layers=layers, messages=tuple(messages), notes=(*prompt.notes, note))


def _largest_first(
    prompt: Prompt,
    sized: Iterable[tuple[str, int]],
    remove: Callable[[Prompt, Collection[str], CountTokens], Prompt],
    limit: int,
    count_tokens: CountTokens,
) -> list[str]:
    """Names (of `sized`: name, tokens) to remove, largest first, until the request is at
    most `limit` tokens; `remove` takes them out."""
    shed: list[str] = []
    current = prompt
    for name, _tokens in sorted(sized, key=lambda x: (-x[1], x[0])):
        if current.request_tokens <= limit:
            break
        shed.append(name)
        current = remove(prompt, shed, count_tokens)
    return shed


def _shed_layers(prompt: Prompt, limit: int, count_tokens: CountTokens) -> list[str]:
    """Source layers to leave out, largest first, until the request is at most `limit`."""
    sized = [(la.name, la.tokens) for la in prompt.layers if la.name in SHEDDABLE_LAYERS]
    return _largest_first(prompt, sized, remove_layers, limit, count_tokens)


def _shed_paths(prompt: Prompt, limit: int, count_tokens: CountTokens) -> list[str]:
    """Files to remove, largest first, until the request is at most `limit` tokens."""
    sized = [(f.path, f.tokens) for f in prompt.files]
    return _largest_first(prompt, sized, remove_files, limit, count_tokens)


# --- the ladder ---------------------------------------------------------------------------


def _pct(tokens: int, total: int) -> float:
    return tokens * 100 / total if total else 0.0


def _worth(before: int, after: int, goal: int, max_in: int, settings: CompactionSettings) -> bool:
    """A step is worth taking when it reaches its goal, frees min_shrink_pct %, or makes it fit."""
    if after >= before:
        return False
    return (
        after < goal
        or (before - after) * 100 >= settings.min_shrink_pct * before
        or (before > max_in >= after)
    )


def plan_reduction(
    prompt: Prompt,
    info: ModelInfo,
    settings: CompactionSettings | None = None,
    count_tokens: CountTokens = rough_tokens,
    *,
    summarized: bool = False,
    before_summary: int | None = None,
) -> GuardPlan:
    """Plan the guard ladder for `prompt` (see the module docstring).

    `summarized=True` says a summary was already made for this request (so
    none is asked for again); `before_summary` (the request's tokens before
    it) lets the plan report how much it freed.
    """
    s = settings or CompactionSettings()
    max_in = info.max_input_tokens
    t0 = prompt.request_tokens
    level = usage_level(t0, max_in, s)
    steps: list[GuardStep] = []
    notes: list[str] = []
    stopped: list[str] = []
    if level != LEVEL_OK:
        steps.append(
            GuardStep(
                STEP_WARN,
                f"context at {_pct(t0, max_in):.1f} % of the input budget "
                f"({t0:,} of {max_in:,} tokens)",
                t0,
                t0,
            )
        )
    if summarized and before_summary:
        freed = before_summary - t0
        note = f"summary freed {freed:,} tokens ({_pct(freed, before_summary):.1f} %)"
        if freed * 100 < s.min_shrink_pct * before_summary:
            note += f", less than {s.min_shrink_pct} %: no further summary for this request"
        notes.append(note)

    reduce_at = s.reduce_pct * max_in  # compare with tokens * 100
    target = int(s.target_pct * max_in / 100)
    current = prompt

    def result(pending: GuardStep | None = None) -> GuardPlan:
        t = current.request_tokens
        fails, reason = False, ""
        if pending is None:
            if t > max_in:
                fails = True
                reason = (
                    f"the request needs {t:,} tokens but {info.name} accepts {max_in:,} "
                    f"(window {info.context_window:,} minus {info.max_output:,} for the answer) "
                    "even after reduction: drop messages or files, or switch to a larger model"
                )
            elif t * 100 >= reduce_at and level != LEVEL_OK:
                notes.append(f"still at {_pct(t, max_in):.1f} % after reduction; sent as is")
        return GuardPlan(
            level=level,
            tokens_before=t0,
            tokens_after=t,
            max_input_tokens=max_in,
            steps=tuple(steps),
            summarize=pending,
            fails=fails,
            reason=reason,
            notes=tuple(notes),
            stopped=tuple(stopped),
        )

    if t0 * 100 < reduce_at:
        return result()

    # (b) progressive tool-result elision, middle-out.
    before = current.request_tokens
    chosen, candidate = 0, current
    for pct in s.removal_levels:
        candidate = elide_tool_results(current, pct, count_tokens)
        chosen = pct
        if candidate.request_tokens < target:
            break
    after = candidate.request_tokens
    if chosen and after < before:
        if _worth(before, after, target, max_in, s):
            ids = _elided_ids(current, candidate)
            steps.append(
                GuardStep(
                    STEP_ELIDE,
                    f"elided {len(ids)} tool result(s) at level {chosen} %",
                    before,
                    after,
                    level=chosen,
                    message_ids=ids,
                )
            )
            current = candidate
        else:
            stopped.append(STEP_ELIDE)
            notes.append(
                f"elide: would free only {_pct(before - after, before):.1f} %: not worth a cache miss"
            )
    if current.request_tokens < target:
        return result()

    # (c) summarise everything older than the verbatim part (needs a model call).
    if s.enabled and not summarized:
        start = _keep_start(current, s)
        if start is not None:
            msgs = current.messages
            span = [i for i in _history(current) if i < start]
            covered = tuple(msgs[i].message_id for i in span if msgs[i].message_id is not None)
            keep = tuple(
                m.message_id for m in msgs[start:] if m.message_id is not None and m.kind is None
            )
            span_tokens = sum(msgs[i].tokens for i in span)
            t = current.request_tokens
            predicted = t - span_tokens + s.summary_budget_tokens
            if covered and _worth(t, predicted, target, max_in, s):
                step = GuardStep(
                    STEP_SUMMARIZE,
                    f"summarise {len(covered)} message(s) (#{min(covered)}..#{max(covered)}, "
                    f"{span_tokens:,} tokens) into at most {s.summary_budget_tokens} tokens",
                    t,
                    predicted,
                    applied=False,
                    message_ids=covered,
                    keep_ids=keep,
                )
                return result(step)
            if covered:
                stopped.append(STEP_SUMMARIZE)
                notes.append(
                    f"summarize: would free only {_pct(t - predicted, t):.1f} %: not asked for"
                )
    elif not s.enabled:
        notes.append("summarize: compaction is disabled")

    # (d) emergency truncation of the oldest messages.
    t = current.request_tokens
    if t * 100 >= reduce_at and current.history_tokens > 2 * s.compaction_trigger_tokens:
        ids = _emergency_ids(current, target, count_tokens)
        if ids:
            candidate = drop_messages(current, ids, count_tokens)
            after = candidate.request_tokens
            if _worth(t, after, target, max_in, s):
                steps.append(
                    GuardStep(
                        STEP_EMERGENCY,
                        f"left out the {len(ids)} oldest message(s) (#{min(ids)}..#{max(ids)})",
                        t,
                        after,
                        message_ids=tuple(ids),
                    )
                )
                current = candidate
            else:
                stopped.append(STEP_EMERGENCY)
                notes.append(f"emergency: would free only {_pct(t - after, t):.1f} %: not worth it")

    # (e) shed the repository's layers, then files, largest first, when the request is
    # above reduce_pct of max input, down to the same target as the other steps (room
    # for the turn's next results).
    t = current.request_tokens
    sheddable = current.files or any(la.name in SHEDDABLE_LAYERS for la in current.layers)
    if t * 100 > reduce_at and sheddable:
        names = _shed_layers(current, target, count_tokens)
        lighter = remove_layers(current, names, count_tokens) if names else current
        paths = _shed_paths(lighter, target, count_tokens)
        candidate = remove_files(lighter, paths, count_tokens)
        after = candidate.request_tokens
        if (paths or names) and _worth(t, after, target + 1, max_in, s):
            parts = []
            if names:
                parts.append("left out " + " and ".join(SHEDDABLE_LAYERS[n] for n in names))
            if paths:
                parts.append(
                    f"removed {len(paths)} file(s) from the context, largest first: "
                    + ", ".join(paths)
                )
            steps.append(
                GuardStep(
                    STEP_SHED,
                    "; ".join(parts),
                    t,
                    after,
                    files=tuple(paths),
                    layers=tuple(names),
                )
            )
            if names:
                notes.append(
                    "left out to fit the context window: "
                    + ", ".join(SHEDDABLE_LAYERS[n] for n in names)
                    + " (back with the next request that has room)"
                )
            if paths:
                notes.append(
                    "files removed to fit the context window: "
                    + ", ".join(paths)
                    + " (/file add puts them back)"
                )
            current = candidate
        elif paths or names:
            stopped.append(STEP_SHED)
            notes.append(f"shed: would free only {_pct(t - after, t):.1f} %: files kept")
    return result()


def apply_plan(prompt: Prompt, plan: GuardPlan, count_tokens: CountTokens = rough_tokens) -> Prompt:
    """Replay the taken steps of `plan` on `prompt` (same counter as the plan)."""
    out = prompt
    for step in plan.steps:
        if not step.applied:
            continue
        if step.kind == STEP_ELIDE:
            out = elide_messages(out, step.message_ids, count_tokens)
        elif step.kind == STEP_EMERGENCY:
            out = drop_messages(out, step.message_ids, count_tokens)
        elif step.kind == STEP_SHED:
            out = remove_layers(out, step.layers, count_tokens)
            out = remove_files(out, step.files, count_tokens)
    extra = [s.detail for s in plan.steps if s.applied] + list(plan.notes)
    if plan.fails:
        extra.append(plan.reason)
    return replace(out, notes=(*out.notes, *(f"guard: {n}" for n in extra)))
