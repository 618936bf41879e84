"""Summaries that keep what matters (seed 004's seven sections, anchor checks, redaction).

- `standalone_summary_request(messages, …)`: a self-contained request
  (`[role]: content` blocks, each cut to 2,000 characters, tool results cut
  as an older group's), holding only what is summarised and the summary it
  rolls over: every summary the engine makes (`continuity/compactor.py`).
- `summary_request(prompt, …)`: the session's own request plus one last user
  message asking for the summary (the prefix the provider just cached), the
  way goose and Codex compact; bench/context_sim.py's peer policy uses it.
  The engine does not: under pressure that request is nearly the whole
  window again.
- `clean_summary(reply)`: the summary text out of the model's reply
  (`<analysis>` dropped, `<summary>` unwrapped).
- `extractive_summary(messages)`: the fallback without a model, in the same
  seven sections: the user's requests and constraints, tools used, files,
  errors, decisions, open checklist items, where work stood.
- `extract_anchors(messages)`: what must survive verbatim, in a form a model
  can use: the user's constraints (softly worded ones too) and decisions, the
  values the user states with what they are about (the sentence, or the
  clauses around the values), values in tool outputs with their line, file
  paths, identifiers, error lines; a later correction by the user supersedes
  the earlier value (`supersede`).
- `complete_summary(summary, anchors, …)`: appends an `## Anchors kept
  verbatim` section with every anchor (even those STATE, the scratchpad or
  the prose hold today: they change), then redacts secrets. Every summary the
  engine stores goes through it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from slop_tui import message_parser
from slop_tui.context.assemble import ANCHORS_HEADER, rough_tokens, summary_as_sent
from slop_tui.context.constraints import REQUEST as _REQUEST
from slop_tui.context.constraints import rule_span, rule_spans, value_span
from slop_tui.context.memos import STOP_WORDS
from slop_tui.context.prompt import KIND_SUMMARY, LAYER_SUMMARY, Layer, Prompt, PromptMessage
from slop_tui.context.redact import redact_secrets
from slop_tui.context.regex import lazy
from slop_tui.context.tiers import truncate
from slop_tui.records import STATUS_TOOL_CALL, Message, Summary, ToolCall

CountTokens = Callable[[str], int]
AnyMessage = Message | PromptMessage

SECTIONS = (
    "User Intent",
    "Technical Context",
    "Files & Code",
    "Errors & Fixes",
    "Key Decisions",
    "Pending Tasks",
    "Current State",
)
# The system text of a standalone summary request.
STANDALONE_SYSTEM = "You write faithful, structured summaries of coding sessions."
MAX_SUMMARY_INPUT_CHARS = 2000

SUMMARY_INSTRUCTION = """\
[slop-tui: context compaction request, not a message from the user]
Summarise the conversation so far for session continuation. {scope}\
The summary will replace those messages in your context, so it must be enough to continue \
the work without them.{previous}

Wrap your reasoning in <analysis> tags, then write the summary with exactly these sections:

1. **User Intent** - every goal and request of the user, and their explicit constraints \
("always ...", "never ...", "don't ...") quoted verbatim
2. **Technical Context** - tools, methods, patterns, versions and settings discovered
3. **Files & Code** - files viewed or edited (exact paths) and significant code changes
4. **Errors & Fixes** - problems met (exact error lines) and how they were resolved
5. **Key Decisions** - important choices made and why
6. **Pending Tasks** - unfinished work items
7. **Current State** - where work left off and what comes next

Keep file paths, identifiers, URLs, ports, numbers with units and error messages exactly as \
written. Never copy API keys, tokens or passwords. Stay under about {budget} tokens. \
Do not call tools. Do not mention that a summary was made or read.
"""


# --- reading messages of either kind -----------------------------------------------------------


# What the extractive passes (anchors, summaries) read of one message: the head
# and the tail of a longer one. A command's output is stored whole (up to 8,000,000
# characters); the regex scans over megabytes held the GIL -- the workspace's event
# loop too, though they run in a thread -- for seconds.
ANALYSED_CHARS = 200_000


def _analysed(text: str) -> str:
    """`text`, or its first fifth and last four fifths of `ANALYSED_CHARS`, cut at line
    ends: a line cut in two would look like an odd one out (an outlier anchor)."""
    if len(text) <= ANALYSED_CHARS:
        return text
    head = ANALYSED_CHARS // 5
    end = text.rfind("\n", 0, head)
    start = text.find("\n", len(text) - (ANALYSED_CHARS - head))
    head_part = text[: end if end > 0 else head]
    tail_part = text[start + 1 :] if start >= 0 else text[-(ANALYSED_CHARS - head) :]
    return head_part + "\n" + tail_part


def _text(m: AnyMessage) -> str:
    """What the extractive passes read of a message: its head and tail, with secrets
    redacted first (a cut or an anchor pattern can split a key into pieces that no
    longer look like one)."""
    if isinstance(m, Message):
        if m.status == STATUS_TOOL_CALL:
            return redact_secrets(
                _analysed(message_parser.assistant_text(m, keep=False) or m.content)
            )
        return redact_secrets(_analysed(m.content))
    return redact_secrets(_analysed(m.text))


def _calls(m: AnyMessage) -> list[ToolCall]:
    if isinstance(m, Message):
        # Each row is summarised once: not kept in the parser's cache.
        return (
            list(message_parser.tool_calls(m, keep=False)) if m.status == STATUS_TOOL_CALL else []
        )
    return list(m.tool_calls)


def _id(m: AnyMessage) -> int | None:
    return m.id if isinstance(m, Message) else m.message_id


def _engine(m: AnyMessage) -> bool:
    return isinstance(m, PromptMessage) and m.kind is not None


# --- requests -------------------------------------------------------------------------------


def _first_line(text: str, limit: int = 100) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def summary_instruction(
    budget_tokens: int = 500,
    previous_summary: str = "",
    keep_from: str = "",
    integrate_existing: bool = False,
) -> str:
    """The last user message of a summary request.

    `keep_from` is the start of the first message that stays verbatim; the
    model is asked to summarise everything before it. `previous_summary`
    (when the earlier summary is not already in the request) is to be
    integrated, so nothing it kept is lost; `integrate_existing` asks the
    same of the summary already in the request.
    """
    scope = (
        f'Cover every message before the one that begins "{_first_line(keep_from)}"; '
        "that message and the later ones stay in your context verbatim. "
        if keep_from.strip()
        else ""
    )
    previous = ""
    if previous_summary.strip():
        previous = (
            "\n\nIntegrate this earlier summary; do not drop anything it established:\n"
            + previous_summary.strip()
        )
    elif integrate_existing:
        previous = (
            " Integrate the existing `## Summary of earlier conversation`; do not drop "
            "anything it established (its `## Anchors kept verbatim` items included)."
        )
    return SUMMARY_INSTRUCTION.format(scope=scope, previous=previous, budget=budget_tokens)


def summary_request(
    prompt: Prompt,
    keep_ids: Iterable[int] = (),
    budget_tokens: int = 500,
    previous_summary: str = "",
    extra: Sequence[PromptMessage] = (),
    count_tokens: CountTokens = rough_tokens,
) -> Prompt:
    """The session's own request with the summary instruction as its last user message.

    Pass the request last sent (plus the reply as `extra` when summarising
    after a reply) so the provider's prefix cache covers all of it; tools stay
    declared for the same reason (the instruction says not to call them; a
    reply with tool calls or no text means: use `extractive_summary`).
    `keep_ids` are the messages that stay verbatim (a guard plan's
    `keep_ids`, a decision's `verbatim_ids`); the instruction names the first.
    """
    messages = [*prompt.messages, *extra]
    keep = set(keep_ids)
    first_kept = next(
        (m for m in messages if m.message_id in keep and m.kind is None and m.role != "tool"),
        None,
    )
    keep_from = _strip_markers(first_kept.text) if first_kept is not None else ""
    existing = any(la.name == LAYER_SUMMARY for la in prompt.layers) or any(
        m.kind == KIND_SUMMARY for m in messages
    )
    text = summary_instruction(budget_tokens, previous_summary, keep_from, existing)
    ask = PromptMessage(role="user", text=text, tokens=count_tokens(text))
    return replace(
        prompt, messages=(*messages, ask), notes=(*prompt.notes, "summary request (own prefix)")
    )


def _strip_markers(text: str) -> str:
    for marker in ("## Begin Conversation History\n", "## End of History\n\n### CURRENT REQUEST\n"):
        text = text.replace(marker, "")
    return text


def _summary_block(m: AnyMessage, tool_limit: int | None = None) -> str:
    text = _strip_markers(_text(m)).strip()
    mid = _id(m)
    if m.role == "tool" and tool_limit is not None and mid is not None:
        text = truncate(text, tool_limit, mid)
    calls = _calls(m)
    if calls:
        text = (text + "\n" if text else "") + "[calls: " + ", ".join(c.name for c in calls) + "]"
    if len(text) > MAX_SUMMARY_INPUT_CHARS:
        text = text[:MAX_SUMMARY_INPUT_CHARS] + "... [truncated]"
    role = "assistant" if m.role == "assistant" else ("tool" if m.role == "tool" else "user")
    return f"[{role}]: {text}\n\n"


def standalone_summary_request(
    messages: Sequence[AnyMessage],
    strategy: str,
    budget_tokens: int = 500,
    previous_summary: str = "",
    count_tokens: CountTokens = rough_tokens,
    tool_limit: int | None = None,
) -> Prompt:
    """A self-contained summary request over `messages` (seed 004's compaction prompt):
    only what is summarised, never the rest of the session's request.

    Every message is sent cut to `MAX_SUMMARY_INPUT_CHARS`; with `tool_limit`, a tool
    result is first cut like a result of an older group (`tiers.truncate`: head, the
    `query_db` hint, tail), as the session's requests sent it once its turn was over.
    The engine extracts the anchors (values, constraints, error lines) from the whole
    rows itself, so the model's prose does not have to carry them.
    `previous_summary` is the summary the new one rolls over (the model integrates it).

    Each message's block is redacted on its own: a secret never spans two
    messages, and one regex pass over a few hundred kilobytes holds the GIL
    (so the event loop, even when this runs in a thread) for a tenth of a
    second; per block it is a fraction of a millisecond. A truncated PEM block
    is then redacted to the end of its own message, not of the whole history.
    """
    history = "".join(
        redact_secrets(_summary_block(m, tool_limit)) for m in messages if not _engine(m)
    )
    previous_summary = redact_secrets(summary_as_sent(previous_summary.strip()))
    instruction = summary_instruction(budget_tokens, previous_summary)
    text = "**Conversation History:**\n" + history + "\n" + instruction
    return _standalone(text, strategy, count_tokens, "summary request (standalone)")


def _standalone(text: str, strategy: str, count_tokens: CountTokens, note: str) -> Prompt:
    """A request of `STANDALONE_SYSTEM` and one user message, `text`."""
    system = STANDALONE_SYSTEM
    return Prompt(
        layers=(Layer("system", system, count_tokens(system)),),
        messages=(PromptMessage(role="user", text=text, tokens=count_tokens(text)),),
        strategy=strategy,
        notes=(note,),
    )


SESSION_SUMMARY_INSTRUCTION = """\
[slop-tui: context compaction request, not a message from the user]
Above are the summaries of the lanes (threads) of one session. Write the session summary: \
one overview of the whole session for whoever works in any of its lanes. For each lane, one \
or two lines: its goal and where it stands; then what connects the lanes (shared decisions, \
constraints, values that apply to all). Keep file paths, identifiers, numbers and the user's \
constraints exactly as written; where a later value replaced an earlier one, give the later. \
Never copy API keys, tokens or passwords. Stay under about {budget} tokens. Do not call tools.
"""


def lane_heads_text(heads: Sequence[Summary]) -> str:
    """The lanes' summaries as a session summary reads them: each lane's prose under its
    name (`### Lane <lane> (messages #A..#B)`); the anchors stay in the lane summaries."""
    return "".join(
        f"### Lane {h.lane} (messages #{h.first_message_id}..#{h.last_message_id})\n"
        + redact_secrets(_strip_anchor_section(h.content.strip()))
        + "\n\n"
        for h in heads
    )


def session_summary_request(
    heads: Sequence[Summary],
    strategy: str,
    budget_tokens: int = 500,
    count_tokens: CountTokens = rough_tokens,
) -> Prompt:
    """The request of a session summary (`[compaction] session_summary`): the
    newest summary of each lane (`lane_heads_text`) and the instruction; nothing else
    of the session."""
    text = (
        "**Lane summaries:**\n"
        + lane_heads_text(heads)
        + SESSION_SUMMARY_INSTRUCTION.format(budget=budget_tokens)
    )
    return _standalone(text, strategy, count_tokens, "session summary request (standalone)")


def extractive_session_summary(
    heads: Sequence[Summary], budget_tokens: int, count_tokens: CountTokens = rough_tokens
) -> str:
    """A session summary without a model: each lane's prose, cut to an equal share of
    the budget."""
    share = max(1, budget_tokens // max(1, len(heads)))
    parts = [
        f"### Lane {h.lane}\n"
        + bound_prose(redact_secrets(_strip_anchor_section(h.content.strip())), share, count_tokens)
        for h in heads
    ]
    return "(Session summary made without a model: the lanes' summaries, cut.)\n\n" + (
        "\n\n".join(parts)
    )


_ANALYSIS = lazy(r"<analysis>.*?(?:</analysis>|\Z)", re.DOTALL | re.IGNORECASE)
_SUMMARY_TAG = lazy(r"<summary>(.*?)(?:</summary>|\Z)", re.DOTALL | re.IGNORECASE)


def clean_summary(reply: str) -> str:
    """The summary out of a model reply: no `<analysis>`, `<summary>` unwrapped, stripped."""
    text = _ANALYSIS.sub("", reply or "")
    tagged = _SUMMARY_TAG.search(text)
    if tagged:
        text = tagged.group(1)
    return text.strip()


# --- anchors --------------------------------------------------------------------------------

KIND_CONSTRAINT = "constraint"
KIND_DECISION = "decision"
KIND_PATH = "path"
KIND_URL = "url"
KIND_NUMBER = "number"
KIND_VALUE = "value"
KIND_IDENTIFIER = "identifier"
KIND_ERROR = "error"
ANCHOR_KINDS = (
    KIND_CONSTRAINT,
    KIND_DECISION,
    KIND_PATH,
    KIND_URL,
    KIND_NUMBER,
    KIND_VALUE,
    KIND_IDENTIFIER,
    KIND_ERROR,
)
# Priorities: what a capped anchor list gives up last. The user's constraints and
# decisions are never given up; then values the user stated; then values read in tool
# outputs; then everything else (paths and names the tools can find again, error lines).
PRIORITY_KEEP = 0
PRIORITY_USER = 1
PRIORITY_TOOL = 2
PRIORITY_OTHER = 3
# Per span, the noisy kinds are capped (the first ones for identifiers, the last for errors).
MAX_IDENTIFIERS = 30
MAX_ERRORS = 10
MAX_ANCHOR_CHARS = 240  # a constraint or a decision
# A stated value with what it is about (the clauses around it), a tool output line.
MAX_STATEMENT_CHARS = 160
# A statement up to this long is kept whole; a longer one is cut to the clauses that hold
# its values (grown to about half this much with the clauses before them).
STATEMENT_WHOLE_CHARS = 80
# Per tool result: values (URLs, host:port, constants, lines that break the output's
# pattern) and error lines.
MAX_TOOL_VALUES = 10
MAX_TOOL_OUTLIERS = 3
MAX_TOOL_ERRORS = 3
MAX_TOOL_RULES = 3  # rules a tool output states in prose
# A rolled summary keeps at most this many anchors (constraints and decisions beyond it).
MAX_SUMMARY_ANCHORS = 80


@dataclass(frozen=True, slots=True)
class Anchor:
    kind: str
    text: str
    priority: int = PRIORITY_OTHER


_URL = lazy(
    r"\b(?:https?|wss?|redis|rediss|postgres(?:ql)?|mysql|mongodb|amqp|s3|grpc|ftp)"
    r"://[^\s<>()\"'`\]\[]+"
)
_EXT = (
    r"(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|go|rs|rb|java|kt|c|h|cc|cpp|hpp|cs|swift|php|sh|bash|zsh|"
    r"md|rst|txt|toml|json|jsonl|yaml|yml|ini|cfg|conf|env|sql|db|sqlite|html|css|scss|xml|csv|"
    r"lock|tcss|proto|tf|dockerfile|log|gz|tar|zip)"
)
_PATH = lazy(
    r"(?<![\w/.\-~])"
    r"(?:"
    r"(?:~|\.{1,2})?/(?:[\w.\-]+/)*[\w.\-]+"  # /abs/path, ./rel, ~/x
    r"|(?:[\w.\-]+/)+[\w.\-]+"  # rel/dir/file
    r"|[\w\-]+(?:\.[\w\-]+)*\." + _EXT + r"\b"  # bare file name with a known extension
    r")"
)
_PORT = lazy(r"(?i)\bport\s*[:=#]?\s*\d{2,5}\b")
_HOST_PORT = lazy(r"\b(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|[a-z][\w\-]*(?:\.[\w\-]+)+):\d{2,5}\b")
_VERSION = lazy(
    r"(?i)\b(?:version|python|node|go|rust|java|postgres(?:ql)?|redis|ubuntu|debian|"
    r"sqlite|textual)\s+v?\d+(?:\.\d+)+\b"
    r"|\bv\d+(?:\.\d+)+\b"
    r"|\b\d+\.\d+\.\d+(?:[\-+][0-9A-Za-z.]+)?\b"
)
_UNIT = lazy(
    r"\b\d+(?:[.,]\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|"
    r"days?|weeks?|[KMGT]i?B|[KMGT]i|[kmgt]b|bytes?|tokens?|req/s|rps|qps|[KMG]Hz|px|fps|k|M)"
    r"(?![\w/])"
    r"|\b\d+(?:\.\d+)?\s?%"
)
# A number and the noun it counts: "1750 rows", "7 retries" (user statements only).
_COUNT = lazy(
    r"(?<![:\w.])\b\d[\d,]*(?:\.\d+)?\s(?!(?:and|or|to|of|in|on|at|for|the|a|an|is|are|"
    r"was|were|be|by|with|from|per|if|so|but|not|than|then|x)\b)[a-z]{2,}\b"
)
_DATE = lazy(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?\b")
_TICKET = lazy(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b")
_HANDLE = lazy(r"(?<![\w.@/])@[A-Za-z0-9][A-Za-z0-9_\-]*[A-Za-z0-9]")
_ENV_ASSIGN = lazy(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\s?=\s?[^\s,;]+")
_CONSTANT = lazy(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_COMMIT = lazy(
    r"(?i)\b(?:commit|sha|hash|revert(?:ed)?|cherry-pick(?:ed)?)\s+"
    r"((?=[0-9a-f]*\d)[0-9a-f]{7,40})\b"
)
_HEX = lazy(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
_SNAKE = lazy(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_CAMEL = lazy(r"\b(?:[A-Z][a-z0-9]+){2,}[A-Za-z0-9]*\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b")
_DOTTED = lazy(r"\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?")
_BACKTICK = lazy(r"`([^`\n]{1,80})`")
_FENCE = lazy(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)
_ERROR_NAME = lazy(r"\b(?:[A-Z]\w*)?(?:Error|Exception)\b(?::|\s*$)|\bFAILED\b")
_EXCEPTION = lazy(r"\b[A-Z]\w*(?:Error|Exception)\b:\s*\S")
_ERROR_START = lazy(r"(?i)^\s*(?:error|fatal|panic)(?:\[\w+\])?:")
# Source code that merely names an exception (a read_file dump), not an error that happened.
_CODE_LINE = lazy(
    r"^\s*(?:\d+\s*[:|│]\s*)?(?:except|raise|class|def|catch|throw|import|from|assert|"
    r"if|elif|return|with|try)\b"
)
_DECISION = lazy(
    r"(?i)\b(?:decided|decision|chose|choosing|chosen|we(?:'ll| will) use|going with|"
    r"instead of|opted|settled on|agreed|we(?:'re| are) using)\b"
)
_SENTENCE = lazy(r"(?<=[.!?])\s+|\n+")
# Where a long sentence or line may be cut: between clauses.
_CLAUSE_BREAK = lazy(r";\s*|:\s+|,\s+|\s+[—–-]\s+|\s+(?:and|but|so|because)\s+")
# A user statement that corrects an earlier one ("Correction: ...", "... is 90 minutes now").
_CORRECTION = lazy(
    r"(?i)\b(?:correction|corrected|actually|update[ds]?|changed?|now|instead|no longer|"
    r"from now on|rather than|any ?more|scratch that|turns out|revised?|"
    # a value that moves: "the release moves from March 3 to March 17"
    r"mov(?:es?|ed)|postponed|rescheduled|slipped|shifted|delayed|bumped|pushed (?:back|out)|"
    r"(?:went|goes|dropped|rose|raised|lowered|increased|decreased|reduced) (?:from|to))\b"
)
_SUBJECT_WORD = lazy(r"[a-z]{3,}")
_LIST_MARK = lazy(r"^\s*(?:[-*+]|\d+[.)])\s+")
_LINE_NUMBER = lazy(r"^\s*\d+\s*[:|│]\s?")
_BANNER = lazy(r"^\s*([=\-*#~_+])\1{2,}.*\1{3}\s*$")
_COMMENT = lazy(r"^\s*(?:#|//|--|;|/\*|\*)")
_SHAPE_HEX = lazy(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
_SHAPE_WORD = lazy(r"[A-Za-z_]+")
_SHAPE_NUM = lazy(r"\d+")
_VALUE_TOKEN = lazy(r"\d|[A-Za-z][_.\-][A-Za-z0-9]|@\w|://")
_ENGINE_TEXT = lazy(
    r"## Begin Conversation History\n|## End of History\n\n### CURRENT REQUEST\n"
    r"|\[tool result elided[^\]]*\]|\.\.\. \[TRUNCATED\.[^\]]*\] \.\.\."
    r"|\.\.\. \[cut: [^\]]*\]"
)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_ANCHOR_CHARS else text[: MAX_ANCHOR_CHARS - 3] + "..."


def _clause_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    at = 0
    for m in _CLAUSE_BREAK.finditer(text):
        if m.start() > at:
            spans.append((at, m.start()))
        at = m.end()
    if at < len(text):
        spans.append((at, len(text)))
    return spans or [(0, len(text))]


def _focus(
    flat: str, start: int, end: int, limit: int, forward: bool = False, whole: int = 0
) -> str:
    """The part of `flat` (one sentence or line, whitespace flattened) around
    `flat[start:end]`, within `limit` characters.

    A text within `whole` (default: the limit) is kept whole. Otherwise the
    clauses that hold the span are kept and grown by whole neighbouring clauses
    (the one before first, where a value's subject usually is; the one after
    first with `forward`, where a constraint's object is) up to half of `whole`
    and never past the limit; a single clause longer than
    the limit is cut to a window that keeps the span and some words before it. A
    cut side is marked `...`. So the end of a long sentence ("..., never deploy
    on Fridays.") is kept, not its head.
    """
    whole = whole or limit
    if len(flat) <= whole:
        return flat
    spans = _clause_spans(flat)
    lo = next((k for k, (_, b) in enumerate(spans) if b > start), len(spans) - 1)
    hi = max(lo, max((k for k, (a, _) in enumerate(spans) if a < end), default=lo))
    a, b = spans[lo][0], spans[hi][1]
    if b - a > limit:
        a = max(a, min(start - limit // 4, end - limit))
        b = min(b, a + limit)
    else:
        while b - a < whole // 2:
            for k in (hi + 1, lo - 1) if forward else (lo - 1, hi + 1):
                if not 0 <= k < len(spans):
                    continue
                na, nb = (spans[k][0], b) if k < lo else (a, spans[k][1])
                if nb - na <= limit:
                    a, b = na, nb
                    lo, hi = min(lo, k), max(hi, k)
                    break
            else:
                break
    # Never start or end inside a word.
    if 0 < a < start and flat[a - 1].isalnum():
        space = flat.find(" ", a, start)
        a = space + 1 if space >= 0 else a
    if end < b < len(flat) and flat[b].isalnum():
        space = flat.rfind(" ", end, b)
        b = space if space >= 0 else b
    piece = flat[a:b].strip(" ,;:—–-")
    return ("..." if a > 0 else "") + piece + ("..." if b < len(flat) else "")


def _focus_on(sentence: str, pattern: re.Pattern, limit: int) -> list[str]:
    """The sentence, or when it is too long each match's focus (see `_focus`)."""
    flat = " ".join(sentence.split())
    if len(flat) <= limit:
        return [flat]
    out: list[str] = []
    for m in pattern.finditer(flat):
        piece = _focus(flat, m.start(), m.end(), limit, forward=True)
        if piece not in out:
            out.append(piece)
    return out


def _sentences(text: str) -> list[str]:
    out = []
    for sentence in _SENTENCE.split(text):
        sentence = _LIST_MARK.sub("", sentence).strip()
        if sentence:
            out.append(sentence)
    return out


def _around(sentence: str, span: tuple[int, int], limit: int) -> str:
    """The sentence (whitespace flattened), or when it is longer than `limit` the
    clauses around `span` (see `_focus`)."""
    flat = " ".join(sentence.split())
    return flat if len(flat) <= limit else _focus(flat, *span, limit, forward=True)


def _constraints(text: str) -> list[str]:
    """The user's rules, each as its sentence, or each cue's clauses when the sentence
    is long (`constraints.rule_spans`)."""
    out: list[str] = []
    for s in _sentences(text):
        for span in rule_spans(s):
            piece = _around(s, span, MAX_ANCHOR_CHARS)
            if piece not in out:
                out.append(piece)
    return out


def _stated_values(text: str) -> list[str]:
    """Values the user states with their subject ("The staging port is 8443."), each as
    its sentence, or the clauses around the value when it is long."""
    out = []
    for s in _sentences(text):
        if rule_span(s) is None:
            span = value_span(s)
            if span is not None:
                out.append(_around(s, span, MAX_STATEMENT_CHARS))
    return out


def _decisions(text: str) -> list[str]:
    return [
        d
        for s in _sentences(text)
        if _DECISION.search(s) and not s.endswith("?")
        for d in _focus_on(s, _DECISION, MAX_ANCHOR_CHARS)
    ]


def _paths(text: str) -> list[str]:
    out = []
    for m in _PATH.finditer(_URL.sub(" ", text)):
        p = m.group(0).rstrip(".,:;")
        if "/" not in p and "." not in p:
            continue
        if re.fullmatch(r"[\d./\-]+", p):  # dates, fractions, versions
            continue
        if p.count("/") == 1 and p.startswith("/") and len(p) < 3:
            continue
        out.append(p)
    return out


def _urls(text: str) -> list[str]:
    return [u.rstrip(".,;:") for u in _URL.findall(text)]


def _numbers(text: str) -> list[str]:
    text = _URL.sub(" ", text)
    out = [m.group(0) for m in _PORT.finditer(text)]
    out += [m.group(0) for m in _HOST_PORT.finditer(text)]
    out += [m.group(0) for m in _VERSION.finditer(text)]
    out += [m.group(0).strip() for m in _UNIT.finditer(text)]
    return out


def _values(text: str, counts: bool) -> list[str]:
    """Stated values: dates, ticket ids, @handles, KEY=VALUE, CONSTANTS, commit hashes and
    (with `counts`) numbers with their noun."""
    text = _URL.sub(" ", text)
    found: list[tuple[int, str]] = []
    for pattern in (_DATE, _TICKET, _HANDLE, _ENV_ASSIGN):
        found += [(m.start(), m.group(0).rstrip(".,;:")) for m in pattern.finditer(text)]
    assigned = {f.split("=")[0].strip() for _, f in found if "=" in f}
    found += [
        (m.start(), m.group(0)) for m in _CONSTANT.finditer(text) if m.group(0) not in assigned
    ]
    found += [(m.start(1), m.group(1)) for m in _COMMIT.finditer(text)]
    if counts:
        found += [
            (m.start(), m.group(0))
            for m in _COUNT.finditer(text)
            if m.group(0).split()[-1].lower() not in STOP_WORDS  # "1 about" counts nothing
        ]
    return [v for _, v in sorted(found, key=lambda x: x[0])]


def _backticked(text: str) -> list[str]:
    out = []
    for m in _BACKTICK.finditer(text):
        inner = m.group(1).strip()
        if inner and not inner.isdigit() and len(inner) > 1:
            out.append(inner)
    return out


def _identifiers(text: str) -> list[str]:
    text = _URL.sub(" ", text)
    found: list[tuple[int, str]] = []
    for pattern in (_SNAKE, _CAMEL, _DOTTED):
        for m in pattern.finditer(text):
            ident = m.group(0)
            if pattern is _DOTTED:
                parts = ident.rstrip("()").split(".")
                if all(len(p) <= 1 for p in parts) or re.search(r"\." + _EXT + r"$", ident):
                    continue
            found.append((m.start(), ident))
    for m in _BACKTICK.finditer(text):
        inner = m.group(1).strip()
        if re.fullmatch(r"[\w.:/\-()]+", inner) and not inner.isdigit():
            found.append((m.start(1), inner))
    return [ident for _, ident in sorted(found, key=lambda x: x[0])]


def _error_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if "Traceback (most recent call last)" in line:
            continue  # the exception line at the end of the traceback is the anchor
        if _CODE_LINE.match(line):
            continue
        if _ERROR_NAME.search(line) or _ERROR_START.match(line):
            out.append(_clip(line))
    return out


def _shape(line: str) -> str:
    line = _SHAPE_HEX.sub("H", line.strip())
    line = _SHAPE_WORD.sub("a", line)
    line = _SHAPE_NUM.sub("0", line)
    return " ".join(line.split())


def _outliers(lines: Sequence[str]) -> list[str]:
    """Lines that break the pattern of a repetitive output (a log, a config, a listing).

    Only when the output has at least 8 lines and its three most common line shapes
    (words, numbers and hashes normalised) cover at least 60 % of them; banners, comments and lines
    without a value (a number, a dotted or dashed name, a handle, a URL) do not count.
    """
    body = [ln for ln in lines if ln.strip()]
    if len(body) < 8:
        return []
    shapes: dict[str, int] = {}
    for ln in body:
        s = _shape(ln)
        shapes[s] = shapes.get(s, 0) + 1
    top = sum(sorted(shapes.values(), reverse=True)[:3])
    if top * 10 < len(body) * 6:
        return []
    out = []
    for ln in body:
        if shapes[_shape(ln)] != 1 or _BANNER.match(ln) or _COMMENT.match(ln):
            continue
        if not _VALUE_TOKEN.search(ln) or ln.startswith("### DIRECTORY:"):
            continue
        out.append(_clip(ln.strip().lstrip("-* ").strip()))
    return out


_TOOL_CONST = lazy(r"^\s*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\s*[:=]\s*[^\s#]+")


def _line_values(line: str) -> tuple[str, int, int] | None:
    """(kind, start, end) of the first value of a tool output line, or None."""
    hits: list[tuple[int, int, str]] = []
    url = _URL.search(line)
    if url:
        hits.append((url.start(), url.end(), KIND_URL))
    no_urls = _URL.sub(lambda m: " " * len(m.group(0)), line)
    for pattern, kind in (
        (_HOST_PORT, KIND_NUMBER),
        (_ENV_ASSIGN, KIND_VALUE),
        (_HANDLE, KIND_VALUE),
        (_TOOL_CONST, KIND_VALUE),
    ):
        m = pattern.search(no_urls)
        if m:
            hits.append((m.start(), m.end(), kind))
    if not hits:
        return None
    start, end, kind = min(hits)
    return kind, start, end


def _is_bare_status(line: str) -> bool:
    """A test runner's `path::test FAILED` line with no message: a status, not an error."""
    return not (_EXCEPTION.search(line) or _ERROR_START.match(line) or " - " in line)


# A line of prose in a tool output (a README, a contributing guide, a comment): words,
# not code.
_PROSE_LINE = lazy(r"^[A-Za-z][^{}()\[\];=<>`|]*[.!]$")


def _tool_rules(lines: Sequence[str]) -> list[Anchor]:
    """Rules a tool output states in prose ("Releases: never bump the major version
    without an RFC."), comment marks stripped: at most MAX_TOOL_RULES, as their line."""
    out: list[Anchor] = []
    for ln in lines:
        flat = " ".join(_COMMENT.sub("", _LIST_MARK.sub("", ln)).split())
        if len(flat.split()) < 4 or not _PROSE_LINE.match(flat) or not rule_spans(flat):
            continue
        out.append(Anchor(KIND_CONSTRAINT, _clip(flat), PRIORITY_TOOL))
        if len(out) >= MAX_TOOL_RULES:
            break
    return _dedupe(out)


def _tool_items(text: str) -> list[Anchor]:
    """Anchors of one tool output (or a pasted block): values first, a few error lines.

    A value (URL, host:port, KEY=VALUE, CONSTANT = value, @handle) is kept with
    its line, which says what it is (`redis_url = "redis://…"`, `Staging
    dashboard: https://…`): the line, cut around the value when it is long.
    """
    lines = [_LINE_NUMBER.sub("", ln) for ln in text.splitlines()]
    values: list[Anchor] = []
    for ln in lines:
        flat = " ".join(_LIST_MARK.sub("", ln).split())
        found = _line_values(flat)
        if found is not None:
            kind, start, end = found
            values.append(
                Anchor(kind, _focus(flat, start, end, MAX_STATEMENT_CHARS), PRIORITY_TOOL)
            )
    values = _dedupe(values)[:MAX_TOOL_VALUES]
    values += _tool_rules(lines)
    have = [a.text for a in values]
    outliers = [
        o for o in _outliers(lines) if not any(o in h for h in have) and not _ERROR_NAME.search(o)
    ]
    values += [Anchor(KIND_VALUE, o, PRIORITY_TOOL) for o in outliers[:MAX_TOOL_OUTLIERS]]
    errors = _dedupe(
        [
            Anchor(KIND_ERROR, e)
            for e in _error_lines(text)
            if "FAILED" not in e or not _is_bare_status(e)
        ]
    )
    # Errors with a message (an exception and what it says) first.
    errors.sort(key=lambda a: 0 if (_EXCEPTION.search(a.text) or _ERROR_START.match(a.text)) else 1)
    errors = [
        replace(a, priority=PRIORITY_TOOL) if _EXCEPTION.search(a.text) else a for a in errors
    ]
    return values + errors[:MAX_TOOL_ERRORS]


def _subject_words(text: str) -> frozenset[str]:
    """The words that say what an anchor is about: no numbers, stop words or cue words."""
    words = _SUBJECT_WORD.findall(re.sub(r"[_\-./]+", " ", text.lower()))
    return frozenset(w for w in words if w not in STOP_WORDS and not _CORRECTION.fullmatch(w))


def supersedes(new: Anchor, old: Anchor) -> bool:
    """Whether `new`, said later, corrects `old`.

    `new` is the user's own statement (a constraint, decision or stated value)
    with a correction cue ("correction", "actually", "now", "instead", "no
    longer", ...), and it is about the same thing: at least two of `old`'s
    subject words, and at least 60 % of them, are in `new`. Error lines are
    never corrected. A restatement with a cue replaces the earlier one too:
    nothing is lost, the later wording carries the value.
    """
    if new.priority > PRIORITY_USER or KIND_ERROR in (new.kind, old.kind):
        return False
    if new.text == old.text or not _CORRECTION.search(new.text):
        return False
    was, now = _subject_words(old.text), _subject_words(new.text)
    shared = len(was & now)
    return shared >= 2 and shared * 5 >= 3 * len(was)


_STATE_ITEM_BREAK = lazy(r"[;,]\s+|\n+")
_STATE_LABEL = lazy(r"^\s*(?:[-*]\s+)?[A-Za-z][A-Za-z ]{0,30}:\s*")


def state_corrections(state: str, messages: Sequence[AnyMessage]) -> list[str]:
    """The user's statements in `messages` (written after the STATE) that correct one of
    its items ("Technical Anchors: release March 3, port 8443" and then "the release
    moved to March 17"): each as its sentence, in order (`supersedes`)."""
    olds = []
    for line in state.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for piece in _STATE_ITEM_BREAK.split(_STATE_LABEL.sub("", line)):
            if piece.strip():
                olds.append(Anchor(KIND_VALUE, piece.strip(), PRIORITY_USER))
    out: list[str] = []
    users = [m for m in messages if m.role == "user" and not _engine(m)]
    for new in extract_anchor_items(users):
        if new.text not in out and any(supersedes(new, old) for old in olds):
            out.append(new.text)
    return out


def summary_corrections(summary: str, messages: Sequence[AnyMessage]) -> list[str]:
    """The user's statements in `messages` that correct an anchor `summary` keeps
    (`supersedes`), each as its sentence, in order."""
    olds = carried_anchor_items(summary)
    users = [m for m in messages if m.role == "user" and not _engine(m)]
    if not olds or not users:
        return []
    news = [a for a in extract_anchor_items(users) if _CORRECTION.search(a.text)]
    return [new.text for new in news if any(supersedes(new, old) for old in olds)]


def supersede(items: Sequence[Anchor]) -> list[Anchor]:
    """`items` (oldest first) without the ones a later item corrects (`supersedes`).

    The earlier value is dropped rather than kept as a second "current" one; its
    message is still in the ledger (query_db reads it).
    """
    gone: set[int] = set()
    for j, new in enumerate(items):
        if new.priority > PRIORITY_USER or not _CORRECTION.search(new.text):
            continue
        for i in range(j):
            if i not in gone and supersedes(new, items[i]):
                gone.add(i)
    return [a for i, a in enumerate(items) if i not in gone]


def _dedupe(items: Iterable[Anchor]) -> list[Anchor]:
    out: dict[str, Anchor] = {}
    for a in items:
        if not a.text:
            continue
        old = out.get(a.text)
        if old is None:
            out[a.text] = a
        elif a.priority < old.priority:
            out[a.text] = replace(old, priority=a.priority)
    return list(out.values())


def _statement(sentence: str, values: Sequence[Anchor], kept: Sequence[Anchor]) -> list[Anchor]:
    """A stated sentence's values kept with what they are about: the sentence, or the
    clauses around the values when it is long (see `_focus`), as one anchor each.

    Values already inside a constraint or decision of the same message need none.
    """
    flat = " ".join(sentence.split())
    held = " ".join(a.text for a in kept)
    spans = []
    bare: list[Anchor] = []  # a value not found as written (it never is, but stays kept)
    for a in values:
        at = flat.find(a.text)
        if a.text in held:
            continue
        if at >= 0:
            spans.append((at, at + len(a.text), a.kind))
        else:
            bare.append(a)
    if not spans:
        return bare
    spans.sort()
    kind = spans[0][2]
    start, end = spans[0][0], max(e for _, e, _ in spans)
    limit, whole = MAX_STATEMENT_CHARS, STATEMENT_WHOLE_CHARS
    if end - start <= limit:
        return [Anchor(kind, _focus(flat, start, end, limit, whole=whole), PRIORITY_USER), *bare]
    out: list[Anchor] = list(bare)
    for a, b, k in spans:
        piece = _focus(flat, a, b, limit, whole=whole)
        if all(piece != x.text for x in out):
            out.append(Anchor(k, piece, PRIORITY_USER))
    return out


def _user_items(text: str) -> list[Anchor]:
    """Anchors of a user message: constraints and decisions, stated values, names.

    A statement's values are kept with their sentence ("The nightly job uses a
    batch size of 1750 rows.", not "1750 rows"): a value alone answers nothing.
    Requests and questions keep their values and names bare.
    """
    pasted = [m.group(1) for m in _FENCE.finditer(text)]
    prose = _FENCE.sub(" ", text)
    kept = [Anchor(KIND_CONSTRAINT, c, PRIORITY_KEEP) for c in _constraints(prose)]
    kept += [Anchor(KIND_DECISION, d, PRIORITY_KEEP) for d in _decisions(prose)]
    kept += [Anchor(KIND_VALUE, v, PRIORITY_USER) for v in _stated_values(prose)]
    items = list(kept)
    for sentence in _sentences(prose):
        stated = not sentence.endswith("?") and not _REQUEST.match(sentence)
        names = PRIORITY_USER if stated else PRIORITY_OTHER
        found: list[Anchor] = []
        for p in _paths(sentence):
            absolute = p.startswith(("/", "~"))
            found.append(Anchor(KIND_PATH, p, PRIORITY_USER if absolute else names))
        found += [Anchor(KIND_URL, u, PRIORITY_USER) for u in _urls(sentence)]
        found += [Anchor(KIND_NUMBER, n, PRIORITY_USER) for n in _numbers(sentence)]
        found += [Anchor(KIND_VALUE, v, PRIORITY_USER) for v in _values(sentence, counts=stated)]
        found += [Anchor(KIND_VALUE, b, PRIORITY_USER) for b in _backticked(sentence)]
        found += [Anchor(KIND_IDENTIFIER, i, names) for i in _identifiers(sentence)]
        items += _statement(sentence, found, kept) if stated else found
    for block in pasted:
        items += _tool_items(block)
    return items


def extract_anchor_items(messages: Sequence[AnyMessage]) -> list[Anchor]:
    """Anchors with their kind and priority, grouped by kind in ANCHOR_KINDS order.

    Constraints and decisions come from user messages only (priority 0, never
    given up); values the user states (URLs, host:port, numbers with units or
    nouns, dates, ticket ids, @handles, backticked literals, KEY=VALUE, names in
    statements rather than requests) have priority 1; from tool outputs (and
    blocks the user pastes): URLs, host:port, KEY=VALUE and CONSTANT = value
    lines, @handles and the few lines that break a repetitive output's pattern
    (at most MAX_TOOL_VALUES + MAX_TOOL_OUTLIERS per result, priority 2), and
    at most MAX_TOOL_ERRORS deduplicated error lines, exceptions with a message
    first. Paths, URLs, numbers and identifiers of assistant text and tool-call
    arguments, and the rest, have priority 3. Engine markers and retrieval
    hints are ignored.
    """
    found: list[Anchor] = []
    for m in messages:
        if _engine(m):
            continue
        # `_text` has redacted secrets: the anchor patterns split a key at its hyphens
        # (`sk-proj-AB…-CD…`), and a piece is no longer a recognisable key.
        text = _ENGINE_TEXT.sub(" ", _text(m))
        if m.role == "user":
            found += _user_items(text)
        elif m.role == "assistant":
            args = redact_secrets(
                " ".join(
                    str(v)
                    for c in _calls(m)
                    for v in c.arguments.values()
                    if isinstance(v, str | int)
                )
            )
            prose = text + "\n" + args
            found += [Anchor(KIND_URL, u) for u in _urls(prose)]
            found += [Anchor(KIND_PATH, p) for p in _paths(prose)]
            found += [Anchor(KIND_NUMBER, n) for n in _numbers(prose)]
            found += [Anchor(KIND_IDENTIFIER, i) for i in _identifiers(text)]
            found += [Anchor(KIND_ERROR, e) for e in _error_lines(text)]
        else:
            found += _tool_items(text)
    items = supersede(_dedupe(found))
    out: list[Anchor] = []
    for kind in ANCHOR_KINDS:
        of_kind = [a for a in items if a.kind == kind]
        if kind == KIND_IDENTIFIER:
            # `old_api` inside src/legacy/old_api.py, `slop_tui` inside slop_tui.context: once.
            wider = [a.text for a in out if a.kind in (KIND_PATH, KIND_URL, KIND_VALUE)]
            wider += [a.text for a in of_kind]
            of_kind = [a for a in of_kind if not any(a.text != w and a.text in w for w in wider)]
            keep = [a for a in of_kind if a.priority < PRIORITY_OTHER]
            rest = [a for a in of_kind if a.priority >= PRIORITY_OTHER]
            of_kind = keep + rest[: max(0, MAX_IDENTIFIERS - len(keep))]
            of_kind.sort(key=items.index)
        elif kind == KIND_ERROR:
            of_kind = of_kind[-MAX_ERRORS:]
        out += of_kind
    return out


def extract_anchors(messages: Sequence[AnyMessage]) -> list[str]:
    """The anchor texts of `extract_anchor_items`, most important kinds first."""
    return [a.text for a in extract_anchor_items(messages)]


_TAGGED = lazy(r"^\[(" + "|".join(ANCHOR_KINDS) + r")(?:/(\d))?\]\s+(.*)$")


def carried_anchor_items(previous_summary: str) -> list[Anchor]:
    """The `## Anchors kept verbatim` items of an earlier summary, kind and priority
    read back from their `[kind/priority]` tag (untagged items: priority 1)."""
    out: list[Anchor] = []
    inside = False
    for line in previous_summary.splitlines():
        if line.strip() == ANCHORS_HEADER:
            inside = True
            continue
        if inside and line.startswith("#"):
            break
        anchor = _anchor_item(line) if inside else None
        if anchor is not None:
            out.append(anchor)
    return out


def _anchor_item(line: str) -> Anchor | None:
    """The anchor of one `- [kind/priority] text` line (untagged: priority 1), or None."""
    if not line.startswith("- "):
        return None
    item = line[2:].strip()
    tagged = _TAGGED.match(item)
    if tagged:
        kind, prio, text = tagged.groups()
        return Anchor(kind, text, int(prio) if prio is not None else PRIORITY_USER)
    return Anchor(KIND_VALUE, item, PRIORITY_USER) if item else None


def without_corrected(summary: str, corrections: Sequence[str]) -> str:
    """`summary` without the anchors that one of `corrections` (the user's later
    statements, `summary_corrections`) supersedes: the request that lists those
    corrections does not also present the earlier values as kept verbatim. The stored
    summary is unchanged; the next one drops them for good (`supersede`)."""
    if not corrections:
        return summary
    news = [Anchor(KIND_VALUE, c, PRIORITY_USER) for c in corrections]
    out: list[str] = []
    inside = False
    for line in summary.splitlines(keepends=True):
        if line.strip() == ANCHORS_HEADER:
            inside = True
        elif inside and line.startswith("#"):
            inside = False
        elif inside:
            old = _anchor_item(line)
            if old is not None and any(supersedes(new, old) for new in news):
                continue
        out.append(line)
    return "".join(out)


def carried_anchors(previous_summary: str) -> list[str]:
    """The `## Anchors kept verbatim` items of an earlier summary, so they stay carried."""
    return [a.text for a in carried_anchor_items(previous_summary)]


def merge_anchors(
    carried: Sequence[Anchor], new: Sequence[Anchor], limit: int = MAX_SUMMARY_ANCHORS
) -> list[Anchor]:
    """One deduplicated, bounded anchor list for a rolled summary.

    Carried anchors first (in their order), then the new ones; an anchor
    contained in another that is kept at least as long is dropped. Over
    `limit`, the lowest priority gives way first: priority 3 (paths and names
    the tools can find again) oldest first, priorities 2 and 1 (values read in
    tool outputs, values the user stated) newest first, so a carried value is
    not pushed out by a later one; priority-0 anchors (the user's constraints
    and decisions) are never dropped, so the list may exceed `limit` by them.
    """
    items: list[Anchor] = []
    index: dict[str, int] = {}
    for a in [*carried, *new]:
        key = _squash(a.text)
        if not key:
            continue
        if key in index:
            i = index[key]
            if a.priority < items[i].priority:
                items[i] = replace(items[i], priority=a.priority)
            continue
        index[key] = len(items)
        items.append(a)
    # A later correction replaces what it corrects (carried anchors are the older ones).
    items = supersede(items)
    # An anchor inside another one that is kept at least as long (a path inside a
    # constraint sentence, a number inside a decision) is already verbatim there.
    keys = [_squash(a.text) for a in items]
    items = [
        a
        for i, a in enumerate(items)
        if not any(
            j != i and keys[i] in keys[j] and keys[i] != keys[j] and b.priority <= a.priority
            for j, b in enumerate(items)
        )
    ]
    excess = len(items) - limit
    if excess <= 0:
        return items
    drop: set[int] = set()
    for priority in (PRIORITY_OTHER, PRIORITY_TOOL, PRIORITY_USER):
        # Names the tools can find again: the oldest go first (the recent ones are the
        # working set). Stated values: the newest go first (a value carried for a while
        # is not pushed out by a later one of the same rank).
        order = range(len(items)) if priority == PRIORITY_OTHER else range(len(items) - 1, -1, -1)
        for i in order:
            if excess <= 0:
                break
            if items[i].priority == priority:
                drop.add(i)
                excess -= 1
    return [a for i, a in enumerate(items) if i not in drop]


def summary_anchors(covered: Sequence[AnyMessage], previous_summary: str = "") -> list[str]:
    """Anchors a new summary must keep: the earlier summary's, then the covered span's."""
    out: list[str] = []
    for a in [*carried_anchors(previous_summary), *extract_anchors(covered)]:
        if a not in out:
            out.append(a)
    return out


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def _anchor_text(a: str | Anchor) -> str:
    return a.text if isinstance(a, Anchor) else a


def missing_anchors(anchors: Iterable[str | Anchor], *texts: str) -> list:
    """Anchors found in none of `texts` (exactly, or ignoring case and whitespace)."""
    haystack = "\n".join(texts)
    squashed = _squash(haystack)
    out: list = []
    seen: set[str] = set()
    for a in anchors:
        t = _anchor_text(a)
        if t in haystack or _squash(t) in squashed or t in seen:
            continue
        seen.add(t)
        out.append(a)
    return out


def _anchor_line(a: str | Anchor) -> str:
    text = " ".join(_anchor_text(a).split())
    if isinstance(a, Anchor):
        return f"- [{a.kind}/{a.priority}] {text}\n"
    return f"- {text}\n"


def bound_prose(text: str, budget_tokens: int, count_tokens: CountTokens = rough_tokens) -> str:
    """`text` cut at a line boundary to about `budget_tokens` (a model that ignored the
    budget, or an extractive summary, must not grow the summary layer)."""
    text = text.strip()
    if budget_tokens <= 0 or count_tokens(text) <= budget_tokens:
        return text
    out: list[str] = []
    used = 0
    for line in text.splitlines():
        n = count_tokens(line) + 1
        if used + n > budget_tokens:
            break
        out.append(line)
        used += n
    return "\n".join(out).rstrip() + "\n(summary cut to its budget; details via query_db)"


def complete_summary(
    summary: str,
    anchors: Iterable[str | Anchor],
    state: str = "",
    scratchpad: str = "",
    max_anchors: int | None = None,
) -> str:
    """`summary` plus every anchor, deduplicated, under `## Anchors kept verbatim`; redacted.

    The anchors are appended verbatim, one `- ` item each, in the given order
    (at most `max_anchors`); `Anchor` items carry a `[kind/priority]` tag so a
    rolled summary can read them back. An existing anchors section of the
    summary is replaced, not duplicated.

    An anchor is listed even when the summary's prose, STATE (`state`) or the
    scratchpad (`scratchpad`, which callers may extend with other summaries)
    hold it today: all of them are rewritten later (the model's next STATE, the
    prose cut to its budget at the next roll, a summary un-compacted), and an
    anchor left out because one of them held it would vanish with it. Only the
    anchors section is carried from one rolled summary to the next.
    """
    del state, scratchpad  # consulted no more: see above
    body = _strip_anchor_section(summary.strip())
    missing = missing_anchors(anchors)
    if max_anchors is not None:
        missing = missing[:max_anchors]
    out = body
    if missing:
        items = "".join(_anchor_line(a) for a in missing)
        out = (body + "\n\n" if body else "") + ANCHORS_HEADER + "\n" + items
    return redact_secrets(out.strip() + "\n")


def strip_anchor_section(text: str) -> str:
    """`text` without its `## Anchors kept verbatim` section."""
    return _strip_anchor_section(text)


def _strip_anchor_section(text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    skipping = False
    for line in lines:
        if line.strip() == ANCHORS_HEADER:
            skipping = True
            continue
        if skipping and line.startswith("#"):
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out).strip()


# --- the extractive fallback -------------------------------------------------------------------

_PENDING = lazy(r"^\s*(?:[-*]\s*)?\[ \]\s*(.+)$|^\s*(?:TODO|Next(?: step)?)\s*:\s*(.+)$", re.M)
_FIRST_SENTENCE = lazy(r"^(.+?[.!?])(?:\s|$)", re.S)


def _sentence(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    m = _FIRST_SENTENCE.match(flat)
    s = m.group(1) if m else flat
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _bullets(items: Sequence[str], empty: str = "- (none recorded)") -> str:
    return "\n".join(f"- {i}" for i in items) if items else empty


def extractive_summary(messages: Sequence[AnyMessage]) -> str:
    """A summary without a model, in the seven sections (seed 004's fallback, extended).

    Picks: the user's requests (first line each: the first one and the last
    seven) and constraints; the tools called, with counts; file paths;
    error lines; sentences with a decision word; open checklist items and
    `TODO:` / `Next:` lines of the last assistant message that has any; the
    last assistant text. Redacted.
    """
    msgs = [m for m in messages if not _engine(m)]
    users = [m for m in msgs if m.role == "user" and _text(m).strip()]
    requests = [_sentence(_strip_markers(_text(m))) for m in users]
    if len(requests) > 8:
        requests = requests[:1] + requests[-7:]
    constraints = [a.text for a in extract_anchor_items(users) if a.kind == KIND_CONSTRAINT]
    tool_counts: dict[str, int] = {}
    for m in msgs:
        for c in _calls(m):
            tool_counts[c.name] = tool_counts.get(c.name, 0) + 1
    items = extract_anchor_items(msgs)
    paths = [a.text for a in items if a.kind == KIND_PATH][:20]
    errors = [a.text for a in items if a.kind == KIND_ERROR]
    decisions: list[str] = []
    pending: list[str] = []
    last_answer = ""
    for m in msgs:
        if m.role != "assistant":
            continue
        text = _strip_markers(_text(m))
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
            if _DECISION.search(sentence) and len(decisions) < 8:
                decisions.append(_sentence(sentence))
        found = [(a or b).strip() for a, b in _PENDING.findall(text)]
        if found:
            pending = found[:10]
        if text.strip():
            last_answer = text
    ids = [i for i in (_id(m) for m in msgs) if i is not None]
    span = f"messages #{min(ids)}..#{max(ids)}" if ids else "earlier messages"
    intent = _bullets(requests)
    if constraints:
        intent += "\nConstraints stated by the user:\n" + _bullets(constraints)
    tools = ", ".join(f"{name} x{n}" for name, n in sorted(tool_counts.items()))
    sections = [
        ("User Intent", intent),
        ("Technical Context", f"- Tools called: {tools}" if tools else "- (no tool calls)"),
        ("Files & Code", _bullets(paths)),
        ("Errors & Fixes", _bullets(errors)),
        ("Key Decisions", _bullets(decisions)),
        ("Pending Tasks", _bullets(pending)),
        (
            "Current State",
            f"- Last answer: {_sentence(last_answer, 300)}\n" if last_answer else "",
        ),
    ]
    out = [f"(Extractive summary of {span}, made without a model; full text via query_db.)"]
    for title, body in sections:
        body = body.rstrip("\n") or "- (none recorded)"
        out.append(f"## {title}\n{body}")
    return redact_secrets("\n\n".join(out) + "\n")
