"""After-reply compaction (seed 003).

After an answer is shown, when the history of the current lane is above
`compaction_trigger_tokens`, compaction runs in the background and takes
effect on the next request:

1. `should_compact(history_tokens, settings)`.
2. Topic-boundary detection with a cheaper model: `boundary_request` (or
   `boundary_prompt` for the bare text) formats the messages as indexed
   blocks `[N] ROLE: content` (each cut to about 1,000 characters, at most
   the last 50 messages, N the index in the full list); `parse_boundary`
   reads the answer and never raises: clean JSON, a null boundary,
   markdown-fenced JSON, JSON inside prose, a partial answer read by regex,
   and anything else gives `SAFE_BOUNDARY` (no boundary, confidence 0.0).
3. `decide(messages, boundary, settings)`:

   | case      | when                                                              | action |
   |-----------|-------------------------------------------------------------------|--------|
   | truncate  | a boundary in or after the verbatim window, confidence >= 0.5      | everything before the boundary leaves the request |
   | summarize | a boundary before the verbatim window, low confidence, or none     | everything before the verbatim window is summarised |
   | none      | disabled, empty, below the trigger, or nothing before the kept part | nothing |

   The verbatim window is the newest `verbatim_window_tokens` of history;
   the kept part always starts at a user message (a call and its results are
   never split) and holds at least `min_verbatim_exchanges` user messages
   (earlier messages are prepended when needed).

The ledger keeps every message: covered rows get the status `summarized`
and a link to the summary (the truncate case stores the detector's one-line
summary, `truncate_summary`), so un-compaction can restore them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slop_tui import message_parser
from slop_tui.context.assemble import rough_tokens
from slop_tui.context.budget import CompactionSettings
from slop_tui.context.prompt import Layer, Prompt, PromptMessage
from slop_tui.context.redact import redact_secrets
from slop_tui.records import STATUS_TOOL_CALL, Message

CountTokens = Callable[[str], int]

CASE_TRUNCATE = "truncate"
CASE_SUMMARIZE = "summarize"
CASE_NONE = "none"

BOUNDARY_MAX_CHARS = 1000
BOUNDARY_MAX_MESSAGES = 50
MIN_TRUNCATE_CONFIDENCE = 0.5


def should_compact(history_tokens: int, settings: CompactionSettings | None = None) -> bool:
    """True when compaction is enabled and the history is above the trigger."""
    s = settings or CompactionSettings()
    return s.enabled and history_tokens > s.compaction_trigger_tokens


# --- topic boundary detection --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicBoundary:
    """The detector's answer; `boundary_index` is the first message of the NEW topic."""

    boundary_index: int | None
    boundary_reason: str
    confidence: float
    summary: str


SAFE_BOUNDARY = TopicBoundary(None, "", 0.0, "")

BOUNDARY_SYSTEM = (
    "You find where the topic of a conversation between a user and a coding assistant "
    "last changed. You answer with one JSON object and nothing else."
)
BOUNDARY_INSTRUCTION = """\
Below are the most recent messages of a conversation, as indexed blocks `[N] ROLE: content`
(long messages are cut).

Find the index of the FIRST message of the current topic, i.e. where the topic last changed.
A boundary is:
- an explicit task switch ("now let's work on ...", "next, ...");
- a shift to a different file, module or component;
- a change in the kind of work (debugging -> feature development, coding -> docs);
- a context reset ("forget that", "let's try something else").
If the whole conversation is one topic, the boundary is null.

Answer with exactly this JSON object:
{"boundary_index": <integer or null>, "boundary_reason": "<short reason>",
 "confidence": <number from 0.0 to 1.0>,
 "summary": "<one or two sentences on what was done BEFORE the boundary>"}

Messages:
"""


def _message_text(m: Message | PromptMessage) -> tuple[str, str, str]:
    """(ROLE label, content, calls line) of a ledger row or prompt message."""
    if isinstance(m, Message):
        text = m.content
        # Read once, for the boundary request: not kept in the parser's cache.
        calls = message_parser.tool_calls(m, keep=False) if m.status == STATUS_TOOL_CALL else []
        if m.status == STATUS_TOOL_CALL:
            text = message_parser.assistant_text(m, keep=False) or text
        name = m.tool_name
    else:
        text, calls, name = m.text, list(m.tool_calls), m.tool_name
    role = m.role.upper()
    if m.role == "tool":
        role = f"TOOL {name or '?'}"
    called = f"[calls: {', '.join(c.name for c in calls)}]" if calls else ""
    return role, text, called


def format_messages(
    messages: Sequence[Message | PromptMessage],
    max_chars: int = BOUNDARY_MAX_CHARS,
    max_messages: int = BOUNDARY_MAX_MESSAGES,
) -> str:
    """The last `max_messages` messages as `[N] ROLE: content` blocks, N the index in `messages`.

    Content longer than `max_chars` is cut and ends with ` [...]`.
    """
    return "\n\n".join(_blocks(messages, max_chars, max_messages))


def _blocks(
    messages: Sequence[Message | PromptMessage], max_chars: int, max_messages: int
) -> list[str]:
    start = max(0, len(messages) - max_messages)
    blocks = []
    for n in range(start, len(messages)):
        role, text, called = _message_text(messages[n])
        text = text.strip()
        if len(text) > max_chars:
            text = text[:max_chars] + " [...]"
        if called:
            text = f"{text}\n{called}" if text else called
        blocks.append(f"[{n}] {role}: {text}")
    return blocks


def boundary_prompt(
    messages: Sequence[Message | PromptMessage],
    max_chars: int = BOUNDARY_MAX_CHARS,
    max_messages: int = BOUNDARY_MAX_MESSAGES,
) -> str:
    """The detector's user message: the instruction, then the indexed blocks."""
    return BOUNDARY_INSTRUCTION + format_messages(messages, max_chars, max_messages) + "\n"


def boundary_request(
    messages: Sequence[Message | PromptMessage],
    strategy: str,
    count_tokens: CountTokens = rough_tokens,
) -> Prompt:
    """A self-contained request for the (cheaper) detector model: no tools, one user message.

    The text is redacted: it may go to a different provider than the session's. Each
    message's block on its own (a secret never spans two messages), so no single regex
    pass holds the GIL for long: see `standalone_summary_request`.
    """
    blocks = _blocks(messages, BOUNDARY_MAX_CHARS, BOUNDARY_MAX_MESSAGES)
    text = BOUNDARY_INSTRUCTION + "\n\n".join(redact_secrets(b) for b in blocks) + "\n"
    return Prompt(
        layers=(Layer("system", BOUNDARY_SYSTEM, count_tokens(BOUNDARY_SYSTEM)),),
        messages=(PromptMessage(role="user", text=text, tokens=count_tokens(text)),),
        strategy=strategy,
        notes=("topic boundary detection",),
    )


_FENCED = re.compile(r"```(?:json|JSON)?\s*(\{.*?\})\s*```", re.DOTALL)
_INDEX = re.compile(r'"?boundary_index"?\s*[:=]\s*(null|None|-?\d+(?:\.0+)?|"\s*-?\d+\s*")')
_CONFIDENCE = re.compile(r'"?confidence"?\s*[:=]\s*"?(-?\d+(?:\.\d+)?|\.\d+)')
_REASON = re.compile(r'"?boundary_reason"?\s*[:=]\s*"((?:[^"\\]|\\.)*)"?')
_SUMMARY = re.compile(r'"?summary"?\s*[:=]\s*"((?:[^"\\]|\\.)*)"?')


def _as_index(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer():
        return int(value) if value >= 0 else None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        n = int(value.strip())
        return n if n >= 0 else None
    return None


def _as_confidence(value: object) -> float:
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return 0.0
    if not isinstance(value, int | float) or value != value:  # NaN
        return 0.0
    return min(1.0, max(0.0, float(value)))


def _from_dict(data: dict) -> TopicBoundary | None:
    keys = {"boundary_index", "confidence", "boundary_reason", "summary"}
    if not keys & set(data):
        return None
    reason, summary = data.get("boundary_reason", ""), data.get("summary", "")
    return TopicBoundary(
        boundary_index=_as_index(data.get("boundary_index")),
        boundary_reason=reason if isinstance(reason, str) else "",
        confidence=_as_confidence(data.get("confidence", 0.0)),
        summary=summary if isinstance(summary, str) else "",
    )


def _loads(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _unescape(s: str) -> str:
    try:
        return json.loads(f'"{s}"')
    except ValueError:
        return s


def parse_boundary(text: str | None) -> TopicBoundary:
    """The detector's answer, or `SAFE_BOUNDARY` when nothing usable is in it.

    Tried in order: the whole text as JSON; a ```json fenced object; the
    outermost `{...}` of the text; then a regex for each field (a partial or
    malformed answer). A negative or non-integer index reads as null;
    confidence is clamped to 0..1. Never raises.
    """
    if not text or not text.strip():
        return SAFE_BOUNDARY
    candidates = [text.strip()]
    candidates += [m.group(1) for m in _FENCED.finditer(text)]
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        data = _loads(candidate)
        if data is not None:
            found = _from_dict(data)
            if found is not None:
                return found
    index, confidence = _INDEX.search(text), _CONFIDENCE.search(text)
    if index is None and confidence is None:
        return SAFE_BOUNDARY
    raw_index = index.group(1).strip('"').strip() if index else None
    reason, summary = _REASON.search(text), _SUMMARY.search(text)
    return TopicBoundary(
        boundary_index=None if raw_index in (None, "null", "None") else _as_index(raw_index),
        boundary_reason=_unescape(reason.group(1)) if reason else "",
        confidence=_as_confidence(confidence.group(1)) if confidence else 0.0,
        summary=_unescape(summary.group(1)) if summary else "",
    )


# --- the decision ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactionDecision:
    """What compaction does with a lane's history (ids are ledger message ids)."""

    case: str  # "truncate" | "summarize" | "none"
    covered_ids: tuple[int, ...] = ()  # leave the request (summarised or truncated)
    verbatim_ids: tuple[int, ...] = ()  # stay as they are
    reason: str = ""
    history_tokens: int = 0
    covered_tokens: int = 0
    boundary: TopicBoundary = SAFE_BOUNDARY

    @property
    def first_covered(self) -> int | None:
        return min(self.covered_ids) if self.covered_ids else None

    @property
    def last_covered(self) -> int | None:
        return max(self.covered_ids) if self.covered_ids else None


def _tokens(m: Message, count_tokens: CountTokens) -> int:
    return m.tokens if m.tokens > 0 else count_tokens(m.content)


def _turn_starts(messages: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == "user"]


def verbatim_start(
    messages: Sequence[Message],
    settings: CompactionSettings,
    count_tokens: CountTokens = rough_tokens,
) -> int:
    """Index where the verbatim window starts, snapped back to a user message.

    The window is the newest messages whose tokens sum to at most
    `verbatim_window_tokens` (at least the last message); the start moves
    back to the user message at or before it, then further back until the
    kept part has `min_verbatim_exchanges` user messages. 0 means all is kept.
    """
    if not messages:
        return 0
    total, start = 0, len(messages)
    for i in range(len(messages) - 1, -1, -1):
        total += _tokens(messages[i], count_tokens)
        if total > settings.verbatim_window_tokens and start < len(messages):
            break
        start = i
    return _snap(messages, start, settings.min_verbatim_exchanges)


def _snap(messages: Sequence[Message], start: int, min_exchanges: int) -> int:
    users = _turn_starts(messages)
    before = [i for i in users if i <= start]
    start = before[-1] if before else 0
    if min_exchanges and sum(1 for i in users if i >= start) < min_exchanges:
        start = users[-min_exchanges] if len(users) >= min_exchanges else 0
    return start


def decide(
    messages: Sequence[Message],
    boundary: TopicBoundary = SAFE_BOUNDARY,
    settings: CompactionSettings | None = None,
    count_tokens: CountTokens = rough_tokens,
) -> CompactionDecision:
    """Choose truncate, summarize or none for the lane's visible history (chronological).

    `messages` are the rows the next request would contain; `boundary`
    indexes into them (as `format_messages` numbered them).
    """
    s = settings or CompactionSettings()
    tokens = [_tokens(m, count_tokens) for m in messages]
    history = sum(tokens)
    if not s.enabled:
        return CompactionDecision(
            CASE_NONE, reason="compaction is disabled", history_tokens=history
        )
    if not messages:
        return CompactionDecision(CASE_NONE, reason="no messages")
    if not should_compact(history, s):
        return CompactionDecision(
            CASE_NONE,
            reason=f"history {history:,} tokens is not above {s.compaction_trigger_tokens:,}",
            history_tokens=history,
        )
    vstart = verbatim_start(messages, s, count_tokens)
    b = boundary.boundary_index
    case, cut = CASE_SUMMARIZE, vstart
    if b is not None and not 0 <= b < len(messages):
        reason = f"boundary {b} is outside the {len(messages)} messages: summarize"
    elif b is None:
        reason = "no topic boundary: summarize"
    elif boundary.confidence < MIN_TRUNCATE_CONFIDENCE:
        reason = f"boundary {b} has low confidence {boundary.confidence:.2f}: summarize"
    elif b < vstart:
        reason = f"boundary {b} is before the verbatim window (starts at {vstart}): summarize"
    else:
        case = CASE_TRUNCATE
        cut = _snap(messages, b, s.min_verbatim_exchanges)
        reason = (
            f"boundary {b} ({boundary.boundary_reason or 'topic change'}) is in the verbatim "
            f"window with confidence {boundary.confidence:.2f}: truncate"
        )
    if cut <= 0:
        return CompactionDecision(
            CASE_NONE,
            reason="nothing older than the kept messages",
            history_tokens=history,
            verbatim_ids=tuple(m.id for m in messages),
            boundary=boundary,
        )
    return CompactionDecision(
        case=case,
        covered_ids=tuple(m.id for m in messages[:cut]),
        verbatim_ids=tuple(m.id for m in messages[cut:]),
        reason=reason,
        history_tokens=history,
        covered_tokens=sum(tokens[:cut]),
        boundary=boundary,
    )


def apply_compaction(messages: Sequence[Message], decision: CompactionDecision) -> list[Message]:
    """The messages that stay in the request after `decision` (case none: all of them)."""
    if decision.case == CASE_NONE:
        return list(messages)
    covered = set(decision.covered_ids)
    return [m for m in messages if m.id not in covered]


def truncate_summary(decision: CompactionDecision) -> str:
    """The short summary stored for a truncate case (no model call): the detector's own."""
    if decision.case != CASE_TRUNCATE or not decision.covered_ids:
        return ""
    first, last = decision.first_covered, decision.last_covered
    about = decision.boundary.summary.strip() or "an earlier topic"
    return redact_secrets(
        f"Earlier topic (messages #{first}..#{last}, no longer shown): {about}\n"
        f"The conversation then moved on: {decision.boundary.boundary_reason.strip() or 'new topic'}."
    )
