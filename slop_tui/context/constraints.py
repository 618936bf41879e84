"""Which sentences of the user must survive a summary word for word.

`classify(sentence)` says whether a sentence of the user is a **rule** (a
constraint or a preference about how to work: "Keep the API backwards
compatible.", "No new dependencies please.", "I would rather you did not touch
the CI config.", "Tests have to pass before merging."), a **value** stated with
its subject ("The staging port is 8443.", "The release moves from March 3 to
March 17."), or neither (a request for this turn, a question, narration).
Rules and values become anchors of the summary that covers their message
(`summaries.extract_anchor_items`), kept as the sentence, so a value keeps what
it is about.

The rules are cue patterns over one sentence, written against a labelled corpus
of sentences in many styles (tests/data/constraint_corpus.txt; precision and
recall: `python bench/constraints.py`). A question is never a rule; a request
(`REQUEST`, "Run the tests.", "Can you check ...") states no value.

Pure: no I/O.
"""

from __future__ import annotations

import re

from slop_tui.context.regex import lazy

RULE = "constraint"
VALUE = "value"

# A request or a question rather than a statement: its names are the task, not a fact.
REQUEST = lazy(
    r"(?i)^(?:(?:please|now|ok(?:ay)?|so|then|next|also|and|first)\b[\s,]+)*"
    r"(?:open|read|look|check|run|show|grep|list|find|search|explain|write|"
    r"summari[sz]e|tell|describe|review|fix|add|remove|delete|rename|refactor|test|try|"
    r"go|continue|proceed|start|help|have a look|take a look|"
    r"can|could|would|will|what(?:'s)?|where|which|how|why|who|when|should|is|are|do|does|"
    r"did|have|has|let'?s|let’s|i\s+(?:need|want|would like|'d like))\b(?!-)"
)

# Words that open a sentence without changing what it says.
_LEAD = lazy(r"(?i)^(?:(?:please|ok(?:ay)?|also|and|so|just|oh|btw|again)\b[\s,:]*)+")

# Phrases that look like cues and are not: "I don't understand", "it never returned".
_NEUTRAL = lazy(
    r"(?i)\bI (?:do not|don'?t|don’t|can'?t|can’t|cannot) "
    r"(?:know|understand|think|see|get|remember|recall|care|mind|tell|find|reproduce)\b"
    r"|\b(?:always|never) \w+ed\b"
    r"|\bI (?:have|need|had|will have) to\b"
    r"|\bthan (?:\w+ ){0,2}(?:should|must|ha(?:ve|s) to)\b"
)

_CUE = (
    # Always and never, prohibitions and musts.
    r"\b(?:always|never|don'?t|don’t|dont|do not|must(?:n'?t| not)?|mustn’t)\b",
    # The same said softly.
    r"\b(?:avoid(?:ing)?|prefer(?:ably|red)?|refrain|make sure|be careful|ideally|ensure"
    r"|stick (?:to|with)|stay away from|under no circumstances|if possible|try not to"
    r"|(?:it'?s |it is |it would be )?(?:best|better) (?:not )?to|ought to|rather(?! than)"
    r"|let'?s (?:not|keep|stick|stay|avoid|always|never)|hands off)\b",
    # Modals and obligations ("I have to leave" is neutralised above).
    r"\b(?:ha(?:ve|s) to|needs? to|shall|should(?:n'?t| not)?|may (?:not|only|never)"
    r"|can(?:'?t|’t|not) (?!find|see|tell|reproduce)|can only|must only)\b",
    r"\b(?:is|are|be)(?: not)? (?:allowed|permitted|required|mandatory|forbidden|prohibited"
    r"|expected to|off[- ]limits|protected)\b|\bnot (?:allowed|permitted)\b|\brequired\b",
    # Limits.
    r"\b(?:at most|at least|no more than|no fewer than|no less than|cannot exceed"
    r"|must not exceed|never exceed)\b",
    # Standing orders and conventions.
    r"\b(?:from now on|going forward|at all times|no exceptions|remember (?:that|to)"
    r"|(?:it'?s|it is) (?:important|essential|crucial|critical|vital)|I insist|whatever you do"
    r"|(?:we|I) (?:want|need|expect) (?:no|zero|every|all|each|only)\b|not to \w+"
    r"|(?:nowhere|nothing|no ?one|nobody) else|append-only|do (?:keep|use|leave)"
    r"|(?:our|the) (?:rule|convention|policy|standard)|I'?d like (?:the|all|every"
    r"|each|our|this|these|those|it|them) \w+ to|(?:I|we) (?:do not|don'?t|don’t) want)\b",
    # "X only", "nothing but X", "X, not Y".
    r"\b(?:use|touch|change|edit|modify|run|deploy|call|import|merge|commit|push) only\b"
    r"|\bonly (?:use|touch|change|edit|modify|run|deploy|call|import|merge|commit|push|ever)\b"
    r"|\bnothing (?:but|else)\b",
)
_RULE_CUE = lazy("|".join(_CUE), re.I)
# "X, not Y" ("Use tabs, not spaces."): a rule in a short sentence; in a long one it is
# as often a turn of phrase ("careful is a feeling, not a process").
_NOT_Y = lazy(
    r"(?i)\b\w+, not (?!sure\b|really\b|yet\b|quite\b|bad\b|exactly\b|now\b)(?:a |the )?\w+"
)
_NOT_Y_CHARS = 100

# Sentence openings that set a rule: "Keep ...", "Leave X alone", "No X", "Only X", ...
_OPENING = lazy(
    r"(?i)^(?:"
    r"keep (?!going|me\b|at it|up\b|trying|looking|in mind)"
    r"|leave\b.*\b(?:alone|as is|as-is|as they are|as it is|untouched|unchanged|intact|in place"
    r"|where (?:it is|they are))\b"
    r"|(?:preserve|retain|maintain|respect|honou?r|stay|stick|pin|target|limit|restrict"
    r"|format|name|prefix)\b"
    r"|no (?!worries|problem|idea|way|thanks|need|rush|luck|clue|matter|doubt)\w+"
    r"|only (?!(?:one|two|three|four|five|a few|some|a couple|\d)\b)\w+"
    r"|(?:nobody|no one)\b|nothing\b.*\b(?:may|can|should|must|allowed)\b|skip nothing\b"
    r"|(?:careful|caution|important|warning|heads up)\b[:,!]"
    r"|(?:use|run|write|add|call|return|log|test|document|tag|sign|review|validate|check)\b"
    r".*\b(?:every|each|all|any|whenever)\b"
    r")"
)

# An opinion or a guess, not a rule: "I think the tests should pass now."
_HEDGE = lazy(
    r"(?i)^(?:I (?:think|guess|hope|suppose|believe|bet|feel|assume)|maybe|probably|perhaps"
    r"|hopefully|I'm (?:not )?sure)\b"
)

# A value with its subject: "<subject> is|uses|lives at|moves to ... <value>".
_LINK = lazy(
    r"(?i)(?:\b(?:is|are|was|were|has|lives (?:at|in)|runs(?: on| at)?|run on|listens on"
    r"|uses|goes to|go to|moves?|moved|changes? to|changed to|starts(?: on| at)?"
    r"|ends(?: on| at)?|reads\b.*\bfrom|capped at|called|named|set to|points to"
    r"|defaults to|sits at)\b|\s[:=]\s|^[A-Za-z][A-Za-z '/-]{2,60}[:=]\s)"
)
_VALUE_TOKEN = lazy(r"\d|https?://|(?<!\w)/\w|@\w|\b\w+[_\-.:]\w|\b[A-Z]{2,}[A-Z0-9_]*\b")

_THING = lazy(r"(?i)^(?:the|our|their|its|this|that|these|those|each|every|all)\s+\w")
_NUMBER = lazy(r"\b\d[\d.,:]*\b")


def _normal(sentence: str) -> str:
    text = " ".join(sentence.split()).strip()
    return _LEAD.sub("", text)


def rule_spans(sentence: str) -> list[tuple[int, int]]:
    """Where the rule cues of `sentence` (whitespace flattened) are; empty for a
    question, a hedged opinion ("I think ...") or a sentence without a cue."""
    flat = " ".join(sentence.split())
    if not flat or flat.endswith("?"):
        return []
    lead = len(flat) - len(_LEAD.sub("", flat))
    body = flat[lead:]
    if _OPENING.match(body):
        end = body.find(" ")
        return [(lead, lead + (end if end > 0 else len(body)))]
    if _HEDGE.match(body):
        return []
    masked = _NEUTRAL.sub(lambda m: "#" * len(m.group(0)), flat)
    spans = [(m.start(), m.end()) for m in _RULE_CUE.finditer(masked)]
    if len(flat) <= _NOT_Y_CHARS:
        spans += [(m.start(), m.end()) for m in _NOT_Y.finditer(masked)]
    return sorted(spans)


def rule_span(sentence: str) -> tuple[int, int] | None:
    """The first of `rule_spans`, or None: the sentence is no rule."""
    spans = rule_spans(sentence)
    return spans[0] if spans else None


def value_span(sentence: str) -> tuple[int, int] | None:
    """Where the stated value of `sentence` (whitespace flattened) is, with the link
    before it ("is", "uses", "moves to", ":", ...), or None: a request or a question
    states no value."""
    flat = " ".join(sentence.split())
    body = _normal(flat)
    if not body or body.endswith("?") or REQUEST.match(body):
        return None
    for link in _LINK.finditer(flat):
        token = _VALUE_TOKEN.search(flat, link.end())
        if token is not None:
            return link.start(), token.end()
    # "<the thing> <any verb> ... <a number>": a statement about a thing, with a value.
    if _THING.match(body):
        number = _NUMBER.search(flat)
        if number is not None:
            return 0, number.end()
    return None


def classify(sentence: str) -> str | None:
    """RULE, VALUE or None (see the module docstring)."""
    if rule_span(sentence) is not None:
        return RULE
    if value_span(sentence) is not None:
        return VALUE
    return None


__all__ = ["REQUEST", "RULE", "VALUE", "classify", "rule_span", "rule_spans", "value_span"]
