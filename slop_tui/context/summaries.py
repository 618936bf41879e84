"""Summaries that keep what matters (seed 004's seven sections, anchor checks, redaction).

- `summary_request(prompt, …)`: the session's own request plus one last user
  message asking for the summary. The prefix is the one the provider just
  cached, so a compaction request is billed mostly as cache reads (the
  opencode and Codex complaints were about compaction requests with their
  own prefix, hence no cache hit).
- `standalone_summary_request(messages, …)`: a self-contained request
  (`[role]: content` blocks, each cut to 2,000 characters), for a span that
  is not in the current request or for a separate summary model.
- `clean_summary(reply)`: the summary text out of the model's reply
  (`<analysis>` dropped, `<summary>` unwrapped).
- `extractive_summary(messages)`: the fallback without a model, in the same
  seven sections: the user's requests and constraints, tools used, files,
  errors, decisions, open checklist items, where work stood.
- `extract_anchors(messages)`: what must survive verbatim: the user's explicit
  constraints, file paths, URLs, numbers with units (ports, durations,
  sizes, versions), identifiers, error lines.
- `complete_summary(summary, anchors, state, scratchpad)`: appends an
  `## Anchors kept verbatim` section with every anchor that the summary,
  STATE and scratchpad all miss, then redacts secrets. Every summary the
  engine stores goes through it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from slop_tui import message_parser
from slop_tui.context.assemble import rough_tokens
from slop_tui.context.prompt import KIND_SUMMARY, LAYER_SUMMARY, Layer, Prompt, PromptMessage
from slop_tui.context.redact import redact_secrets
from slop_tui.records import STATUS_TOOL_CALL, Message, ToolCall

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
ANCHORS_HEADER = "## Anchors kept verbatim"
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


def _text(m: AnyMessage) -> str:
    if isinstance(m, Message):
        if m.status == STATUS_TOOL_CALL:
            return message_parser.assistant_text(m) or m.content
        return m.content
    return m.text


def _calls(m: AnyMessage) -> list[ToolCall]:
    if isinstance(m, Message):
        return list(message_parser.tool_calls(m)) if m.status == STATUS_TOOL_CALL else []
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


def _summary_block(m: AnyMessage) -> str:
    text = _strip_markers(_text(m)).strip()
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
) -> Prompt:
    """A self-contained summary request over `messages` (seed 004's compaction prompt)."""
    history = "".join(_summary_block(m) for m in messages if not _engine(m))
    instruction = summary_instruction(budget_tokens, previous_summary)
    text = redact_secrets("**Conversation History:**\n" + history) + "\n" + instruction
    system = "You write faithful, structured summaries of coding sessions."
    return Prompt(
        layers=(Layer("system", system, count_tokens(system)),),
        messages=(PromptMessage(role="user", text=text, tokens=count_tokens(text)),),
        strategy=strategy,
        notes=("summary request (standalone)",),
    )


_ANALYSIS = re.compile(r"<analysis>.*?(?:</analysis>|\Z)", re.DOTALL | re.IGNORECASE)
_SUMMARY_TAG = re.compile(r"<summary>(.*?)(?:</summary>|\Z)", re.DOTALL | re.IGNORECASE)


def clean_summary(reply: str) -> str:
    """The summary out of a model reply: no `<analysis>`, `<summary>` unwrapped, stripped."""
    text = _ANALYSIS.sub("", reply or "")
    tagged = _SUMMARY_TAG.search(text)
    if tagged:
        text = tagged.group(1)
    return text.strip()


# --- anchors --------------------------------------------------------------------------------

KIND_CONSTRAINT = "constraint"
KIND_PATH = "path"
KIND_URL = "url"
KIND_NUMBER = "number"
KIND_IDENTIFIER = "identifier"
KIND_ERROR = "error"
ANCHOR_KINDS = (KIND_CONSTRAINT, KIND_PATH, KIND_URL, KIND_NUMBER, KIND_IDENTIFIER, KIND_ERROR)
# Per span, the noisy kinds are capped (the first ones for identifiers, the last for errors).
MAX_IDENTIFIERS = 30
MAX_ERRORS = 10
MAX_ANCHOR_CHARS = 240


@dataclass(frozen=True, slots=True)
class Anchor:
    kind: str
    text: str


_URL = re.compile(r"\bhttps?://[^\s<>()\"'`\]\[]+")
_EXT = (
    r"(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|go|rs|rb|java|kt|c|h|cc|cpp|hpp|cs|swift|php|sh|bash|zsh|"
    r"md|rst|txt|toml|json|jsonl|yaml|yml|ini|cfg|conf|env|sql|db|sqlite|html|css|scss|xml|csv|"
    r"lock|tcss|proto|tf|dockerfile|log|gz|tar|zip)"
)
_PATH = re.compile(
    r"(?<![\w/.\-~])"
    r"(?:"
    r"(?:~|\.{1,2})?/(?:[\w.\-]+/)*[\w.\-]+"  # /abs/path, ./rel, ~/x
    r"|(?:[\w.\-]+/)+[\w.\-]+"  # rel/dir/file
    r"|[\w\-]+(?:\.[\w\-]+)*\." + _EXT + r"\b"  # bare file name with a known extension
    r")"
)
_PORT = re.compile(r"(?i)\bport\s*[:=#]?\s*\d{2,5}\b")
_HOST_PORT = re.compile(
    r"\b(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|[a-z][\w\-]*(?:\.[\w\-]+)+):\d{2,5}\b"
)
_VERSION = re.compile(
    r"(?i)\b(?:version|python|node|go|rust|java|postgres(?:ql)?|redis|ubuntu|debian|"
    r"sqlite|textual)\s+v?\d+(?:\.\d+)+\b"
    r"|\bv\d+(?:\.\d+)+\b"
    r"|\b\d+\.\d+\.\d+(?:[\-+][0-9A-Za-z.]+)?\b"
)
_UNIT = re.compile(
    r"\b\d+(?:[.,]\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|"
    r"days?|weeks?|[KMGT]i?B|[kmgt]b|bytes?|tokens?|req/s|rps|qps|[KMG]Hz|px|fps|k|M)"
    r"(?![\w/])"
    r"|\b\d+(?:\.\d+)?\s?%"
)
_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_CAMEL = re.compile(r"\b(?:[A-Z][a-z0-9]+){2,}[A-Za-z0-9]*\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b")
_DOTTED = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?")
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_ERROR_NAME = re.compile(r"\b(?:[A-Z]\w*)?(?:Error|Exception)\b(?::|\s*$)|\bFAILED\b")
_ERROR_START = re.compile(r"(?i)^\s*(?:error|fatal|panic)(?:\[\w+\])?:")
# Source code that merely names an exception (a read_file dump), not an error that happened.
_CODE_LINE = re.compile(
    r"^\s*(?:\d+\s*[:|│]\s*)?(?:except|raise|class|def|catch|throw|import|from|assert|"
    r"if|elif|return|with|try)\b"
)
_CONSTRAINT = re.compile(r"(?i)\b(?:always|never|don'?t|don’t|do not|must(?:n'?t| not)?|mustn’t)\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_ENGINE_TEXT = re.compile(
    r"## Begin Conversation History\n|## End of History\n\n### CURRENT REQUEST\n"
    r"|\[tool result elided[^\]]*\]|\.\.\. \[TRUNCATED\.[^\]]*\] \.\.\."
)


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_ANCHOR_CHARS else text[: MAX_ANCHOR_CHARS - 3] + "..."


def _constraints(text: str) -> list[str]:
    out = []
    for sentence in _SENTENCE.split(text):
        sentence = _LIST_MARK.sub("", sentence).strip()
        if sentence and _CONSTRAINT.search(sentence):
            out.append(_clip(sentence))
    return out


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


def _numbers(text: str) -> list[str]:
    text = _URL.sub(" ", text)
    out = [m.group(0) for m in _PORT.finditer(text)]
    out += [m.group(0) for m in _HOST_PORT.finditer(text)]
    out += [m.group(0) for m in _VERSION.finditer(text)]
    out += [m.group(0).strip() for m in _UNIT.finditer(text)]
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


def _errors(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if "Traceback (most recent call last)" in line:
            continue  # the exception line at the end of the traceback is the anchor
        if _CODE_LINE.match(line):
            continue
        if _ERROR_NAME.search(line) or _ERROR_START.match(line):
            out.append(_clip(line))
    return out


def extract_anchor_items(messages: Sequence[AnyMessage]) -> list[Anchor]:
    """Anchors with their kind, grouped by kind in ANCHOR_KINDS order, first occurrence first.

    Constraints come from user messages only; paths, URLs, numbers and
    identifiers from user and assistant text and from tool-call arguments;
    error lines from every message, tool results included (the last
    MAX_ERRORS). Engine markers and retrieval hints are ignored.
    """
    found: dict[str, list[str]] = {k: [] for k in ANCHOR_KINDS}
    for m in messages:
        if _engine(m):
            continue
        text = _ENGINE_TEXT.sub(" ", _text(m))
        args = " ".join(
            str(v) for c in _calls(m) for v in c.arguments.values() if isinstance(v, str | int)
        )
        if m.role == "user":
            found[KIND_CONSTRAINT] += _constraints(text)
        if m.role in ("user", "assistant"):
            prose = text + "\n" + args
            found[KIND_URL] += [u.rstrip(".,;:") for u in _URL.findall(prose)]
            found[KIND_PATH] += _paths(prose)
            found[KIND_NUMBER] += _numbers(prose)
            found[KIND_IDENTIFIER] += _identifiers(text)
        found[KIND_ERROR] += _errors(text)
    seen: set[str] = set()
    out: list[Anchor] = []
    limits = {KIND_IDENTIFIER: MAX_IDENTIFIERS}
    for kind in ANCHOR_KINDS:
        items = []
        for text in found[kind]:
            if text and text not in seen:
                seen.add(text)
                items.append(text)
        if kind == KIND_IDENTIFIER:
            # `old_api` inside src/legacy/old_api.py, `slop_tui` inside slop_tui.context: once.
            wider = [a.text for a in out if a.kind in (KIND_PATH, KIND_URL)] + items
            items = [t for t in items if not any(t != w and t in w for w in wider)]
        if kind == KIND_ERROR:
            items = items[-MAX_ERRORS:]
        elif kind in limits:
            items = items[: limits[kind]]
        out += [Anchor(kind, t) for t in items]
    return out


def extract_anchors(messages: Sequence[AnyMessage]) -> list[str]:
    """The anchor texts of `extract_anchor_items`, most important kinds first."""
    return [a.text for a in extract_anchor_items(messages)]


def carried_anchors(previous_summary: str) -> list[str]:
    """The `## Anchors kept verbatim` items of an earlier summary, so they stay carried."""
    out: list[str] = []
    inside = False
    for line in previous_summary.splitlines():
        if line.strip() == ANCHORS_HEADER:
            inside = True
            continue
        if inside and line.startswith("#"):
            break
        if inside and line.startswith("- "):
            out.append(line[2:].strip())
    return out


def summary_anchors(covered: Sequence[AnyMessage], previous_summary: str = "") -> list[str]:
    """Anchors a new summary must keep: the earlier summary's, then the covered span's."""
    out: list[str] = []
    for a in [*carried_anchors(previous_summary), *extract_anchors(covered)]:
        if a not in out:
            out.append(a)
    return out


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def missing_anchors(anchors: Iterable[str], *texts: str) -> list[str]:
    """Anchors found in none of `texts` (exactly, or ignoring case and whitespace)."""
    haystack = "\n".join(texts)
    squashed = _squash(haystack)
    out = []
    for a in anchors:
        if a in haystack or _squash(a) in squashed or a in out:
            continue
        out.append(a)
    return out


def complete_summary(
    summary: str,
    anchors: Iterable[str],
    state: str = "",
    scratchpad: str = "",
    max_anchors: int | None = None,
) -> str:
    """`summary` plus the anchors that it, STATE and the scratchpad miss; redacted.

    The missing ones are appended verbatim under `## Anchors kept verbatim`,
    one `- ` item each, in the given order (at most `max_anchors`). An
    existing anchors section of the summary is replaced, not duplicated.
    """
    body = _strip_anchor_section(summary.strip())
    missing = missing_anchors(anchors, body, state, scratchpad)
    if max_anchors is not None:
        missing = missing[:max_anchors]
    out = body
    if missing:
        items = "".join(f"- {' '.join(a.split())}\n" for a in missing)
        out = (body + "\n\n" if body else "") + ANCHORS_HEADER + "\n" + items
    return redact_secrets(out.strip() + "\n")


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

_DECISION = re.compile(
    r"(?i)\b(?:decided|decision|chose|choosing|chosen|we(?:'ll| will) use|going with|"
    r"instead of|opted|settled on)\b"
)
_PENDING = re.compile(
    r"^\s*(?:[-*]\s*)?\[ \]\s*(.+)$|^\s*(?:TODO|Next(?: step)?)\s*:\s*(.+)$", re.M
)
_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.S)


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
