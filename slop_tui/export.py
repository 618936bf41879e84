"""A session as a Markdown document or a JSON object (headless: no Textual).

Markdown is for people: one section per group, tool calls and tool results
in fenced blocks, every status other than `completed` marked. JSON is for
tools: every message with every field (the provider-native `payload` kept
as the exact stored string), every STATE version and the scratchpad, so an
export can be read back without loss, secrets aside.

An export leaves the ledger for files people share, so secrets are redacted
(`redact_secrets`: API keys, tokens, passwords, private keys) in both forms:
the Markdown document as a whole, the JSON object string by string (so it
stays valid JSON). The ledger itself keeps every byte; `/message show` and
copying a message give the exact text.

An export is a file people `cat`, so neither form carries a terminal control
sequence: the Markdown goes through `neutralise` (ESC, C1 controls, bidi
overrides made visible: `␛]52;…` cannot write the clipboard), the JSON through
`escape_json` (those code points as JSON `\\u` escapes, so it parses to the
same text).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Sequence
from dataclasses import asdict

from slop_tui.context.redact import redact_secrets
from slop_tui.message_parser import assistant_text, tool_calls
from slop_tui.records import (
    DEFAULT_LANE,
    PURPOSE_TURN,
    STATUS_COMPLETED,
    STATUS_DROPPED,
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    STATUS_SUMMARIZED,
    STATUS_TOOL_CALL,
    ImageRef,
    Message,
    Session,
    Spend,
    StateVersion,
    Usage,
)
from slop_tui.safe_text import escape_json, neutralise

JSON_FORMAT = "slop-tui.session"
JSON_VERSION = 1

# The group's mark is its most notable row status (the same order /message list uses).
_GROUP_MARKS = (STATUS_DROPPED, STATUS_SUMMARIZED, STATUS_INTERRUPTED, STATUS_ERROR)
_STATUS_NOTES = {
    STATUS_DROPPED: "dropped: not sent to the model",
    STATUS_SUMMARIZED: "summarized: replaced by a summary",
    STATUS_INTERRUPTED: "interrupted",
    STATUS_ERROR: "error",
}
_BACKTICKS = re.compile(r"`{3,}")

StateArg = StateVersion | Sequence[StateVersion] | str | None


def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(ts: float | None) -> str | None:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat() if ts else None


def fenced(text: str, lang: str = "") -> str:
    """A fenced block that survives backtick fences inside `text`."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=2)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{lang}\n{body}{fence}"


def _versions(session_name: str, state: StateArg) -> list[StateVersion]:
    if state is None:
        return []
    if isinstance(state, str):
        return [StateVersion(0, session_name, None, state, 0.0)] if state else []
    if isinstance(state, StateVersion):
        return [state]
    return list(state)


def current_state(
    versions: Sequence[StateVersion], messages: Sequence[Message]
) -> StateVersion | None:
    """The newest version whose group is still present and not dropped (the ledger's rule)."""
    live = {m.id for m in messages if m.status != STATUS_DROPPED}
    for v in reversed(versions):
        if v.group_id is None or v.group_id in live:
            return v
    return None


def group_mark(messages: Sequence[Message]) -> str:
    """`completed`, or the most notable status among a group's rows."""
    statuses = {m.status for m in messages}
    return next((s for s in _GROUP_MARKS if s in statuses), STATUS_COMPLETED)


def _grouped(messages: Sequence[Message]) -> list[tuple[int | None, list[Message]]]:
    groups: dict[int | None, list[Message]] = {}
    for m in sorted(messages, key=lambda m: m.id):
        groups.setdefault(m.group_id, []).append(m)
    # Groups in id order; rows that belong to no group come last.
    return sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))


def _status_note(m: Message) -> str:
    note = _STATUS_NOTES.get(m.status)
    return f" · *{note}*" if note else ""


def message_markdown(m: Message) -> str:
    """One row as Markdown: a bold role line, then its text or fenced blocks."""
    ident = f"#{m.id}"
    if m.status == STATUS_TOOL_CALL:
        parts = [f"**Tool call** · {ident}{_status_note(m)}"]
        text = assistant_text(m)
        if text.strip():
            parts.append(text)
        calls = tool_calls(m)
        for call in calls:
            args = json.dumps(call.arguments, indent=2, ensure_ascii=False)
            parts.append(f"`{call.name}` ({call.id})\n\n{fenced(args, 'json')}")
        if not calls and m.payload:
            parts.append(fenced(m.payload, "json"))
        return "\n\n".join(parts)
    if m.role == "tool":
        name = f" · `{m.tool_name}`" if m.tool_name else ""
        call = f" ({m.tool_call_id})" if m.tool_call_id else ""
        return (
            f"**Tool result**{name}{call} · {ident}{_status_note(m)}\n\n{fenced(m.content, 'text')}"
        )
    role = {"user": "User", "assistant": "Assistant", "system": "System"}.get(m.role, m.role)
    text = assistant_text(m) if m.role == "assistant" else m.content
    return f"**{role}** · {ident}{_status_note(m)}\n\n{text}".rstrip()


def messages_markdown(messages: Sequence[Message]) -> str:
    """Rows as Markdown without headings (what "copy a group" or "copy a message" puts out)."""
    return "\n\n".join(message_markdown(m) for m in sorted(messages, key=lambda m: m.id)) + "\n"


def session_markdown(
    messages: Sequence[Message],
    session_name: str,
    state: StateArg,
    scratchpad: str,
    *,
    session: Session | None = None,
    exported_at: float | None = None,
    usage: Sequence[Usage] = (),
    images: Sequence[ImageRef] = (),
) -> str:
    """The whole session as one Markdown document.

    `state` is the session's STATE versions (or one version, or the STATE
    text); the document shows the current one. `messages` are all the rows,
    dropped ones included, as `Ledger.session_messages` returns them.
    """
    versions = _versions(session_name, state)
    groups = _grouped(messages)
    lines = [f"# Session: {session_name}", ""]
    if exported_at:
        lines.append(f"- Exported: {_when(exported_at)}")
    if session is not None:
        model = f"{session.provider or 'default'} / {session.model or 'default'}"
        window = session.window_size or "full history"
        lines += [f"- Provider / model: {model}", f"- Window: {window}", f"- Lane: {session.lane}"]
    n_groups = sum(1 for gid, _ in groups if gid is not None)
    tokens = sum(m.tokens for m in messages)
    if usage:
        lines.append(f"- Cost: {usage_cost_line(usage)}")
    lines += [
        f"- Groups: {n_groups} · messages: {len(messages)} · tokens: {tokens}",
        f"- STATE versions: {len(versions)}",
        "",
        "## STATE",
        "",
    ]
    current = current_state(versions, messages)
    if current is None:
        lines.append("*(no STATE)*")
    else:
        origin = f"group {current.group_id}" if current.group_id is not None else "set by hand"
        lines += [f"*Current version ({origin}, {_when(current.created_at)}):*", ""]
        lines.append(fenced(current.content, "markdown"))
    lines += ["", "## Scratchpad", ""]
    lines.append(fenced(scratchpad, "markdown") if scratchpad else "*(empty)*")
    # Groups are level-2 sections, so the `### STATE` a reply carries nests under its group.
    lines += ["", "---", ""]
    if not groups:
        lines += ["*(no messages)*", ""]
    by_message: dict[int | None, list[ImageRef]] = {}
    for image in images:
        by_message.setdefault(image.message_id, []).append(image)
    for gid, rows in groups:
        lines.append(_group_heading(gid, rows))
        lines.append("")
        for m in rows:
            lines += [message_markdown(m), ""]
            lines += [f"{image_line(i)}" for i in by_message.get(m.id, ())]
            if m.id in by_message:
                lines.append("")
    return neutralise(redact_secrets("\n".join(lines).rstrip("\n") + "\n"))


def usage_cost_line(usage: Sequence[Usage]) -> str:
    """The calls' cost in one line: total, background part, cache saving, what is unknown."""
    from slop_tui.pricing import format_usd, spend_text

    def spend(rows: Sequence[Usage]) -> Spend:
        known = [u.cost for u in rows if u.cost is not None]
        return Spend(
            calls=len(rows),
            cost=sum(c.total for c in known),
            saved=sum(c.saved for c in known),
            unpriced=sum(1 for u in rows if u.cost is None and u.reported),
            unreported=sum(1 for u in rows if not u.reported),
        )

    whole = spend(usage)
    back = spend([u for u in usage if u.purpose != PURPOSE_TURN])
    return (
        f"{spend_text(whole)} in {whole.calls} call(s), background {spend_text(back)}; "
        f"the cache saved {format_usd(whole.saved)}"
    )


def image_line(image: ImageRef) -> str:
    """An image reference in an export: its name, size and stored file."""
    ext = image.mime.rsplit("/", 1)[-1].replace("jpeg", "jpg")
    return (
        f"*Image:* {image.name}, {image.width}×{image.height} (`.slop/images/{image.sha256}.{ext}`)"
    )


def _group_heading(gid: int | None, rows: Sequence[Message]) -> str:
    if gid is None:
        return "## Outside any group"
    bits = [f"## Group {gid}", _when(min(m.created_at for m in rows))]
    lanes = sorted({m.lane for m in rows} - {DEFAULT_LANE})
    if lanes:
        bits.append("lane " + ", ".join(lanes))
    mark = group_mark(rows)
    if mark != STATUS_COMPLETED:
        bits.append(f"**{mark}**")
    return " · ".join(bits)


def session_json(
    messages: Sequence[Message],
    session_name: str,
    state: StateArg,
    scratchpad: str,
    *,
    session: Session | None = None,
    exported_at: float | None = None,
    usage: Sequence[Usage] = (),
    images: Sequence[ImageRef] = (),
) -> dict:
    """The whole session as a JSON-ready dict: every field of every row, nothing dropped
    (secrets redacted in every string)."""
    doc = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "session": session_name,
        "exported_at": _iso(exported_at),
        "settings": (
            {
                "window_size": session.window_size,
                "provider": session.provider,
                "model": session.model,
                "lane": session.lane,
                "created_at": session.created_at,
                "updated_at": session.updated_at,
            }
            if session is not None
            else None
        ),
        "scratchpad": scratchpad,
        "state_versions": [asdict(v) for v in _versions(session_name, state)],
        "messages": [asdict(m) for m in sorted(messages, key=lambda m: m.id)],
        # Every provider call with its tokens and cost in USD (`cost` null: price unknown).
        "usage": [asdict(u) for u in sorted(usage, key=lambda u: u.id)],
    }
    if images:  # references to `.slop/images/<sha256>.<ext>`, by message
        doc["images"] = [asdict(i) for i in images]
    return _redacted(doc)  # type: ignore[return-value]


def _redacted(value: object) -> object:
    """`value` with `redact_secrets` applied to every string inside it."""
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v) for v in value]
    return value


def dumps_json(data: dict) -> str:
    return escape_json(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"


__all__ = [
    "JSON_FORMAT",
    "JSON_VERSION",
    "current_state",
    "dumps_json",
    "fenced",
    "group_mark",
    "message_markdown",
    "messages_markdown",
    "session_json",
    "session_markdown",
]
