"""Memo selection: keywords from the latest user message, tag matching, ranking.

The ledger finds candidate memos (tag matches plus an FTS5 search over the
content); this module decides which of them reach the prompt and in what
order, so the rule is testable without SQLite.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from slop_tui.records import Memo, Message

MAX_KEYWORDS = 32
DEFAULT_MEMO_LIMIT = 5

# Common English words that would match everything (after the reference
# tool's list of about 85 words, std_slop.md §3.6), plus the conversational
# fillers ("continue", "next", "please") that polluted its FTS mode. Words of
# 3 characters or fewer are dropped by length anyway.
STOP_WORDS = frozenset(
    """
    about above after again against also because been before being below between both
    cannot continue could does doing down during each from further have having here hers
    herself himself into itself just like more most myself need next okay once only
    other ought ours ourselves over please same should some such than thanks that their
    theirs them themselves then there these they this those through under until very
    want were what when where which while whom will with would you your yours yourself
    yourselves
    """.split()
)

# What makes a memo the model saved look like an instruction to a later model rather
# than a note: a prompt-injection payload that would otherwise be injected into every
# matching request of every session. Such a memo is quarantined until the user
# confirms it (`/memo confirm ID`).
_INSTRUCTION = re.compile(
    r"(?i:\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|"
    r"above|earlier|all|any|other|your|the)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|"
    r"messages|guidelines|directions|context|memos?)\b)"
    r"|\bSYSTEM\b"  # an upper-case SYSTEM: "SYSTEM OVERRIDE", "SYSTEM:"
    r"|(?i:\boverrid(?:e|es|ing|den)\b)"
    r"|(?i:\bsystem\s*(?:prompt|message|instruction|override|note)s?\b)"
    r"|(?i:<\s*/?\s*(?:system|instructions?)\s*>|\[/?INST\]|<\|im_start\|>)"
    r"|(?i:\b(?:you are now|from now on,? you|new instructions|act as (?:an? )?(?:unrestricted|"
    r"jailbroken)|developer mode|do not (?:tell|inform|reveal (?:this )?to) the user)\b)"
)


def instruction_shaped(text: str) -> str | None:
    """The phrase that makes `text` read like an instruction to the model, or None."""
    m = _INSTRUCTION.search(text)
    return " ".join(m.group(0).split()) if m else None


# Everything that is not a word character or a slash separates words:
# whitespace, punctuation and hyphens split, `snake_case` and `src/app.py`
# paths stay whole (dots still split them, as in the reference tool).
_SEPARATORS = re.compile(r"[^\w/]+")


def extract_keywords(text: str) -> list[str]:
    """Keywords for memo lookup: lower-cased, >3 characters, no stop words.

    De-duplicated in first-seen order and capped at 32, so a pasted log does
    not turn into thousands of lookups.
    """
    out: list[str] = []
    seen: set[str] = set()
    for token in _SEPARATORS.split(text.lower()):
        if len(token) <= 3 or token in STOP_WORDS or token in seen:
            continue
        seen.add(token)
        out.append(token)
        if len(out) == MAX_KEYWORDS:
            break
    return out


def tag_matches(keyword: str, tag: str) -> bool:
    """Exact match, or the keyword is a hyphen part of the tag.

    `arch` matches `arch`, `arch-decision`, `decision-arch` and `x-arch-y`,
    not `archive`. A hyphenated keyword must match consecutive parts.
    Case-insensitive.
    """
    kparts = keyword.lower().split("-")
    tparts = tag.lower().split("-")
    n = len(kparts)
    return any(tparts[i : i + n] == kparts for i in range(len(tparts) - n + 1))


def tag_hits(keywords: Iterable[str], memo: Memo) -> int:
    """How many keywords match at least one tag of the memo."""
    return sum(1 for k in keywords if any(tag_matches(k, t) for t in memo.tags))


def rank_memos(
    keywords: Sequence[str],
    candidates: Sequence[Memo],
    bm25: Mapping[int, float] | None = None,
    limit: int = DEFAULT_MEMO_LIMIT,
) -> list[Memo]:
    """The memos to inject, best first.

    Tag hits first (more matched keywords first), then the FTS5 BM25 score
    (SQLite's `bm25()` is lower-is-better), then newest. A candidate with no
    tag hit and no BM25 score is not relevant and is left out.
    """
    scores = bm25 or {}
    ranked: list[tuple[tuple[int, float, float, int], Memo]] = []
    for memo in candidates:
        hits = tag_hits(keywords, memo)
        score = scores.get(memo.id)
        if hits == 0 and score is None:
            continue
        key = (-hits, math.inf if score is None else score, -memo.created_at, -memo.id)
        ranked.append((key, memo))
    ranked.sort(key=lambda pair: pair[0])
    return [memo for _, memo in ranked[: max(0, limit)]]


def fts_query(keywords: Sequence[str]) -> str:
    """An FTS5 MATCH expression OR-ing the keywords as quoted phrases.

    Quoting makes keywords with FTS syntax characters (`/`, `_`, `NOT`) plain
    terms; an empty keyword list gives an empty string (the caller skips FTS).
    """
    return " OR ".join('"' + k.replace('"', '""') + '"' for k in keywords)


def latest_user_text(messages: Sequence[Message]) -> str:
    """The content of the last user message, the source of memo keywords."""
    for m in reversed(messages):
        if m.role == "user":
            return m.content
    return ""
