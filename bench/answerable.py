"""Could a model answer from this request? Facts as data, checked against request text.

String presence (the value somewhere in the request) flatters a context
engine: `47 s` alone does not answer "which read timeout?". This module
counts a fact as **answerable** when the request holds its subject and its
value together:

- the planted sentence itself (whitespace and case aside), or
- one of the fact's subject phrases in the same *unit* as the value, where a
  unit is one line, or one bullet item with its indented continuation lines.

A fact may have been corrected. Its `superseded` values are the earlier ones,
and then it is answerable only when no earlier value is *presented as
current*: a unit with the subject and an earlier value, without the current
value and without a word marking it as old ("was", "not", "no longer",
"superseded", ...) near it, counts as presenting it as current, unless it is
part of the conversation's story and the story later says the current value:
the unit lies in a chronological section and a unit with the subject and the
current value comes after it, in a later chronological section or later in
the same one when that section is ordered (the later statement wins, as when
reading a conversation).

The request is given as `Section`s in request order (a name, the text,
whether it is chronological, and whether its units are in time order).
`prompt_sections` makes them from a slop-tui `Prompt`: the conversation and
the summary's prose are chronological and ordered; the summary's anchors list
is chronological (it is about the earlier conversation, so a later message
overrides it) but not ordered (two of its items that disagree leave the
model to guess); STATE, the scratchpad, memos, files and the other layers are
neither (they claim to be current).

Pure and deterministic; `check_fact` and `check_facts` work on any text, so
other replays with other facts measure the same way:

    facts = [Fact("timeout", "52 s", ("read timeout",), superseded=("47 s",))]
    verdicts = check_facts(facts, prompt_sections(prompt))
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# --- the data ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact to find in a request.

    `value`: what an answer needs, verbatim. `subjects`: phrases that say what the
    value is about (any one of them counts). `sentence`: the sentence that
    planted it, which counts on its own. `superseded`: earlier values of the same
    fact that must not be presented as current.
    """

    fid: str
    value: str
    subjects: tuple[str, ...]
    sentence: str = ""
    superseded: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Section:
    """A part of the request, in request order: is it part of the conversation's story
    (`chronological`), and do its units follow one another in time (`ordered`)?"""

    name: str
    text: str
    chronological: bool = False
    ordered: bool = True


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the request gives a model about one fact."""

    fid: str
    present: bool  # the value occurs somewhere (the old string-presence figure)
    answerable: bool  # subject and value together, and no earlier value presented as current
    stale: bool  # an earlier value is presented as current
    where: tuple[str, ...] = ()  # sections holding an answerable unit (or the sentence)


# --- units --------------------------------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_CONTINUATION = re.compile(r"^\s+\S")


def units(text: str) -> list[str]:
    """Lines, with a bullet item and its indented continuation lines as one unit."""
    out: list[str] = []
    in_bullet = False
    for line in text.splitlines():
        if not line.strip():
            in_bullet = False
            continue
        if _BULLET.match(line):
            out.append(line)
            in_bullet = True
        elif in_bullet and _CONTINUATION.match(line):
            out[-1] += "\n" + line
        else:
            out.append(line)
            in_bullet = False
    return out


# --- matching -----------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_JOINERS = re.compile(r"[\s_\-]+")
# A word near an earlier value that marks it as no longer current.
_OLD_MARK = re.compile(
    r"(?i)\b(?:was|were|formerly|previously|earlier|before|old|outdated|superseded|replaced|"
    r"corrected|correction|no longer|not|instead of|rather than|used to|changed from)\b"
)
_MARK_BEFORE = 40
_MARK_AFTER = 25


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def _joined(text: str) -> str:
    """For subject phrases: case, whitespace, `_` and `-` do not matter."""
    return _JOINERS.sub(" ", text).strip().casefold()


def _has_subject(unit: str, subjects: Iterable[str]) -> bool:
    hay = " " + _joined(unit) + " "
    for s in subjects:
        phrase = _joined(s)
        if not phrase:
            continue
        # Whole words at the phrase's alphanumeric edges: "API" is not in "rapid".
        left = r"(?<![0-9a-z])" if phrase[0].isalnum() else ""
        right = r"(?![0-9a-z])" if phrase[-1].isalnum() else ""
        if re.search(left + re.escape(phrase) + right, hay):
            return True
    return False


def _has_value(unit: str, value: str) -> bool:
    return bool(value.strip()) and _flat(value) in _flat(unit)


def _marked_old(unit: str, value: str) -> bool:
    """Whether every occurrence of `value` in `unit` has an old-value word near it."""
    flat, v = _flat(unit), _flat(value)
    at = flat.find(v)
    if at < 0:
        return False
    while at >= 0:
        near = (
            flat[max(0, at - _MARK_BEFORE) : at]
            + " "
            + flat[at + len(v) : at + len(v) + _MARK_AFTER]
        )
        if not _OLD_MARK.search(near):
            return False
        at = flat.find(v, at + 1)
    return True


def check_fact(fact: Fact, sections: Sequence[Section]) -> Verdict:
    """The verdict for one fact over the request's sections (see the module docstring)."""
    present = any(_has_value(s.text, fact.value) for s in sections)
    sentence = _flat(fact.sentence) if fact.sentence.strip() else ""
    where: list[str] = []
    # (section index, unit position) of the units with the subject and the current value
    # (in chronological sections), and of those with an earlier value presented bare
    current: list[tuple[int, int]] = []
    earlier: list[tuple[int, int]] = []
    pos = 0
    for k, sec in enumerate(sections):
        found = bool(sentence) and sentence in _flat(sec.text)
        for unit in units(sec.text):
            pos += 1
            if not _has_subject(unit, fact.subjects):
                continue
            if _has_value(unit, fact.value):
                found = True
                if sec.chronological:
                    current.append((k, pos))
                continue
            for old in fact.superseded:
                if _has_value(unit, old) and not _marked_old(unit, old):
                    earlier.append((k, pos))
        if found and sec.name not in where:
            where.append(sec.name)

    def overridden(k: int, p: int) -> bool:
        sec = sections[k]
        if not sec.chronological:
            return False
        return any(ck > k or (ck == k and sec.ordered and cp > p) for ck, cp in current)

    stale = any(not overridden(k, p) for k, p in earlier)
    answerable = bool(where) and not stale
    return Verdict(fact.fid, present, answerable, stale, tuple(where))


def check_facts(facts: Iterable[Fact], sections: Sequence[Section]) -> dict[str, Verdict]:
    """`check_fact` for each fact, by fact id."""
    return {f.fid: check_fact(f, sections) for f in facts}


# --- slop-tui requests --------------------------------------------------------------------

ANCHORS_HEADER = "## Anchors kept verbatim"


def _split_anchors(name: str, text: str) -> list[Section]:
    """A summary's prose (chronological, ordered) and its anchors list (chronological,
    not ordered)."""
    out: list[Section] = []
    rest = text
    while ANCHORS_HEADER in rest:
        prose, _, tail = rest.partition(ANCHORS_HEADER)
        lines = tail.splitlines(keepends=True)
        cut = next(
            (i for i, ln in enumerate(lines[1:], 1) if ln.startswith("#")),
            len(lines),
        )
        out.append(Section(name, prose, True))
        out.append(Section(name + ":anchors", "".join(lines[:cut]), True, ordered=False))
        rest = "".join(lines[cut:])
    out.append(Section(name, rest, True))
    return out


def prompt_sections(prompt) -> list[Section]:
    """The sections of a slop-tui `Prompt`, in the order a provider receives them.

    Layers first (the system text; a layer placed in a pinned or context message
    is read from that message), then the messages. Summary text (the summary
    layer, a summary message) and the conversation are chronological (a
    summary's anchors list is not ordered); every other layer and engine message
    is not chronological.
    """
    from slop_tui.context.prompt import KIND_SUMMARY, LAYER_SUMMARY, PLACEMENT_SYSTEM

    out: list[Section] = []
    for layer in prompt.layers:
        if layer.placement != PLACEMENT_SYSTEM:
            continue
        if layer.name == LAYER_SUMMARY:
            out += _split_anchors("layer:summary", layer.text)
        else:
            out.append(Section("layer:" + layer.name, layer.text))
    for m in prompt.messages:
        if m.kind is None:
            out.append(Section("history:" + m.role, m.text, True))
        elif m.kind == KIND_SUMMARY or any(
            la.name == LAYER_SUMMARY and la.placement == m.kind and la.text in m.text
            for la in prompt.layers
        ):
            out += _split_anchors("message:" + m.kind, m.text)
        else:
            out.append(Section("message:" + m.kind, m.text))
    return out


__all__ = [
    "Fact",
    "Section",
    "Verdict",
    "check_fact",
    "check_facts",
    "prompt_sections",
    "units",
]
