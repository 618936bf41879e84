"""Tool-result truncation tiers (seed 000, "Dynamic Tool Truncation").

In the active group (the group of the last message) the most recent
`full_fidelity_count` tool results keep up to `active_full_limit` characters,
older ones `active_degraded_limit`; every tool result of another group keeps
`inactive_limit`. Limits follow the issue text (5000 / 1000 / 300), not the
reference tool's code (5000 / 400 / 120).

A cut result is a sandwich: head + hint + tail. The hint names the message id
so the model can always fetch the full text with `query_db`.

User messages are not tiered here. While the history is under pressure the
context plan cuts a user message of an older group longer than
`active_full_limit` the same way (`TIER_PASTE`: a pasted log or document that
would otherwise ride in every request of the window). The current turn's own
message is cut only when it alone is longer than `own_message_max_pct` of the
input budget (`TIER_OVERSIZE`), and then to that share.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import NamedTuple

from slop_tui.records import Message

TIER_FULL = "full"
TIER_DEGRADED = "degraded"
TIER_INACTIVE = "inactive"
# A user message of an older group, cut while the history is under pressure (the
# context plan decides when): a pasted log or document, kept to the full limit.
TIER_PASTE = "paste"
# The current turn's own user message, longer than its share of the input budget
# (`[compaction] own_message_max_pct`): cut to that share, never further.
TIER_OVERSIZE = "oversize"

HINT_TEMPLATE = (
    '\n\n... [TRUNCATED. Use query_db(sql="SELECT content FROM messages WHERE id={id}")'
    " to see full output] ...\n\n"
)


_HINT_HEAD, _HINT_TAIL = HINT_TEMPLATE.split("{id}")


def truncation_hint(message_id: int) -> str:
    """The exact retrieval hint inserted into a cut tool result."""
    # HINT_TEMPLATE, without parsing the template for each of a long history's results.
    return f"{_HINT_HEAD}{message_id}{_HINT_TAIL}"


@dataclass(frozen=True, slots=True)
class TruncationSettings:
    """Character limits of the three tiers (config table `[context.truncation]`)."""

    active_full_limit: int = 5000
    active_degraded_limit: int = 1000
    inactive_limit: int = 300
    full_fidelity_count: int = 5
    head_ratio: float = 0.2

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "head_ratio":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ValueError(f"head_ratio must be a number, got {value!r}")
                if not 0.0 <= value <= 1.0:
                    raise ValueError(f"head_ratio must be between 0 and 1, got {value!r}")
            else:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{f.name} must be an integer, got {value!r}")
                if value < 0:
                    raise ValueError(f"{f.name} must not be negative, got {value}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> TruncationSettings:
        """Build from a config mapping; unknown keys and bad values raise ValueError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown truncation setting(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(sorted(known))}"
            )
        return cls(**data)  # type: ignore[arg-type]  # __post_init__ validates types

    def limit_for(self, tier: str) -> int:
        return {
            TIER_FULL: self.active_full_limit,
            TIER_DEGRADED: self.active_degraded_limit,
            TIER_INACTIVE: self.inactive_limit,
            TIER_PASTE: self.active_full_limit,
        }[tier]


def cut_middle(text: str, limit: int, note: str, head_ratio: float = 0.2) -> str:
    """`text` cut to about `limit` characters: head + `note` + tail.

    The head gets `head_ratio` of the characters left after the note, the tail
    the rest (the end of a tool output, where errors and summaries live, matters
    most). Cuts fall on code points (Python str indices), never inside a UTF-8
    sequence. The note is kept even when `limit` is smaller than the note
    itself; the output then is the note alone. A cut that would not make the
    text shorter is not made.
    """
    if len(text) <= limit or len(text) <= len(note):
        return text
    avail = max(0, limit - len(note))
    head = int(avail * head_ratio)
    tail = avail - head
    return text[:head] + note + (text[len(text) - tail :] if tail else "")


def truncate(content: str, limit: int, message_id: int, head_ratio: float = 0.2) -> str:
    """Cut `content` to about `limit` characters: head + retrieval hint + tail
    (`cut_middle`), so every cut stays recoverable through query_db."""
    if len(content) <= limit:  # most results: no hint to build
        return content
    return cut_middle(content, limit, truncation_hint(message_id), head_ratio)


class TierResult(NamedTuple):
    """What a message looks like after tiering; tier is None for non-tool rows."""

    text: str
    tier: str | None
    truncated: bool


def assign_tiers(messages: Sequence[Message], settings: TruncationSettings) -> list[str | None]:
    """The tier of each message (None for rows that are not tool results)."""
    active = messages[-1].group_id if messages else None
    tiers: list[str | None] = [None] * len(messages)
    recent_active = 0
    # Walk backwards so "the N most recent in the active group" is a counter.
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role != "tool":
            continue
        if active is not None and m.group_id == active:
            recent_active += 1
            full = recent_active <= settings.full_fidelity_count
            tiers[i] = TIER_FULL if full else TIER_DEGRADED
        else:
            tiers[i] = TIER_INACTIVE
    return tiers


def _tiered(
    messages: Sequence[Message], settings: TruncationSettings
) -> Iterator[tuple[int, TierResult]]:
    """(index, result) of each tool result, in order; other rows are skipped."""
    limits = {tier: settings.limit_for(tier) for tier in (TIER_FULL, TIER_DEGRADED, TIER_INACTIVE)}
    for i, tier in enumerate(assign_tiers(messages, settings)):
        if tier is None:
            continue
        m = messages[i]
        text = truncate(m.content, limits[tier], m.id, settings.head_ratio)
        yield i, TierResult(text, tier, text != m.content)


def apply_tiers(messages: Sequence[Message], settings: TruncationSettings) -> list[TierResult]:
    """Per message (same order): its text after tiering, its tier, whether it was cut."""
    out = [TierResult(m.content, None, False) for m in messages]
    for i, result in _tiered(messages, settings):
        out[i] = result
    return out


def tool_result_tiers(
    messages: Sequence[Message], settings: TruncationSettings
) -> dict[int, TierResult]:
    """`apply_tiers` for the tool results only, by message id (what `isolate` takes)."""
    return {messages[i].id: result for i, result in _tiered(messages, settings)}
