"""Memo selection: keywords from the latest user message, tag matching, ranking.

The ledger finds candidate memos (tag matches plus an FTS5 search over the
content); this module decides which of them reach the prompt and in what
order, so the rule is testable without SQLite.
"""

from __future__ import annotations

import functools
import json
import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence

from slop_tui.context.regex import lazy
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
_INSTRUCTION = lazy(
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


# Paraphrases of the same orders, a forged memo header or conversation turn, and the
# usual payloads (send the keys somewhere, pipe a download into a shell).
_PARAPHRASE = lazy(
    r"(?i:\b(?:pay no (?:attention|heed)|stop following|no longer (?:follow|obey)|"
    r"(?:throw|set) (?:away|aside)|do not follow|don't follow)\b[^.\n]{0,40}?"
    r"\b(?:instructions?|rules|guidelines|prompts?|directions|guidance|orders)\b)"
    r"|(?i:\b(?:disregard|forget|ignore)\s+(?:everything|all of (?:it|that|this)|what "
    r"(?:you were|you've been|you have been) (?:told|given)))"
    r"|(?i:\byour (?:new|real|true|actual|updated) (?:instructions?|task|goal|role|orders|"
    r"purpose|objective)\b)"
    r"|(?i:\b(?:always|never) (?:reply|respond|answer|mention|reveal|tell|say|comply)\b"
    r"[^.\n]{0,60}?\b(?:user|anyone|regardless)\b)"
    r"|(?i:\b(?:the user (?:has )?(?:already )?(?:authori[sz]ed|approved|wants you to)|"
    r"without (?:asking|telling|informing|confirmation from) the user)\b)"
    r"|(?i:\b(?:send|post|upload|exfiltrate|leak|forward|email|print|reveal|dump)\b[^.\n]{0,30}?"
    r"\b(?:api[ _-]?keys?|secrets?|credentials|tokens?|passwords?|env(?:ironment)? "
    r"variables|ssh keys?)\b)"
    r"|(?i:\b(?:curl|wget)\b[^\n|]{0,200}\|\s*(?:ba|z)?sh\b)"
    r"|(?im:^\W{0,6}\[?\s*memo\s+\d+\s*,\s*saved by)"
    r"|(?im:^\W{0,6}(?:system|developer|assistant)\s*:)"
)


def normalise_for_check(text: str) -> str:
    """`text` as the instruction check reads it: NFKC (full-width and compatibility
    forms), no format characters (zero-width spaces and joiners, bidi marks: Unicode
    category Cf), and letters that look like Latin ones (Cyrillic `Ѕ`, Greek `ο`: the
    Unicode confusables table) folded to them."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    if text.isascii():
        return text
    fold = _confusable_fold()
    return "".join(fold.get(c, c) for c in text)


@functools.cache
def _confusable_fold() -> dict[str, str]:
    """Each non-ASCII character whose confusable is one ASCII letter or digit -> that one
    (loaded once, when a text first holds a non-ASCII character: 0.3 s)."""
    from confusable_homoglyphs import utils

    out: dict[str, str] = {}
    for char, glyphs in utils.load("confusables.json").items():
        if len(char) != 1 or char.isascii():
            continue
        for glyph in glyphs:
            c = glyph.get("c", "")
            if len(c) == 1 and c.isascii() and c.isalnum():
                out[char] = c
                break
    return out


def instruction_shaped(text: str) -> str | None:
    """The phrase that makes `text` read like an instruction to the model, or None.

    The text is normalised first (`normalise_for_check`), so zero-width characters and
    look-alike letters do not hide a phrase; the phrase returned is the normalised one."""
    plain = normalise_for_check(text)
    m = _INSTRUCTION.search(plain) or _PARAPHRASE.search(plain)
    return " ".join(m.group(0).split()) if m else None


# Tags that would match nearly every prompt: stop words, words of two letters or fewer,
# and the words every coding request holds. Left out of a memo's tags when it is saved,
# and never counted as a hit for one saved before.
TAG_STOP_WORDS = STOP_WORDS | frozenset(
    """
    the and you how why who what are was can for not but all any its our out use get
    set new one two add fix run see way
    code file files help info general misc note notes thing things stuff question answer
    task work project make using user model data text please thanks
    """.split()
)


def useful_tag(tag: str) -> bool:
    """Whether a tag may select a memo (see `TAG_STOP_WORDS`)."""
    t = tag.strip().lower()
    return len(t) > 2 and t not in TAG_STOP_WORDS


def memo_tags(tags: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the tags to store, those left out): lower-cased, de-duplicated, no stop words."""
    kept: list[str] = []
    dropped: list[str] = []
    for tag in tags:
        t = tag.strip().lower()
        if not t or t in kept or t in dropped:
            continue
        (kept if useful_tag(t) else dropped).append(t)
    return kept, dropped


def quoted_body(text: str) -> str:
    """A memo's body as one JSON string: its lines cannot begin a forged memo header or
    a turn of the conversation, whatever they hold."""
    return json.dumps(text.strip(), ensure_ascii=False)


# Everything that is not a word character or a slash separates words:
# whitespace, punctuation and hyphens split, `snake_case` and `src/app.py`
# paths stay whole (dots still split them, as in the reference tool).
_SEPARATORS = lazy(r"[^\w/]+")


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
    """How many keywords match at least one useful tag of the memo (`useful_tag`)."""
    tags = [t for t in memo.tags if useful_tag(t)]
    return sum(1 for k in keywords if any(tag_matches(k, t) for t in tags))


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
