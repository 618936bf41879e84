"""Tool-call isolation: ledger rows to provider-neutral messages for one strategy.

Rules (seed 000 §2, issue 3):

- User and assistant text always crosses a provider switch; the text that came
  with tool calls crosses too, as plain assistant text, when the calls cannot.
- Tool calls and tool results appear only for the strategy family that made
  them (`gemini` and `gemini_gca` are one family): providers' tool schemas and
  sequencing differ too much to translate safely.
- A call to a tool that is not enabled becomes the assistant text
  `[tool call to disabled tool <name> omitted]` and its result
  `[result of disabled tool <name> omitted]`, so no orphan remains.
- Whatever was filtered, the output is structurally valid: every tool message
  answers a call of the assistant message right before its run of tool
  messages; every call gets a result (a missing one, e.g. after a cancel, gets
  a synthetic result); a tool message never follows a user message.
- `native` (the stored payload) is passed only for same-family messages whose
  calls were not altered; adapters rebuild altered ones from `tool_calls`.
  Tool results never carry `native`, so tier truncation is authoritative.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slop_tui import message_parser
from slop_tui.context.prompt import PromptMessage
from slop_tui.context.tiers import TierResult
from slop_tui.context.window import is_windowable
from slop_tui.records import (
    STATUS_COMPLETED,
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    STATUS_TOOL_CALL,
    STRATEGY_GEMINI,
    Message,
    ToolCall,
    strategy_family,
)

DISABLED_CALL = "[tool call to disabled tool {name} omitted]"
DISABLED_RESULT = "[result of disabled tool {name} omitted]"
SYNTHETIC_RESULT = "[no result recorded: the call was interrupted]"
ORPHAN_RESULT = (
    "[tool result of {name} omitted: its call is not in the history; full text in message id {id}]"
)

# Statuses that are replayed, per role. Error rows of users or assistants are
# notices for the human (failed requests), not part of the conversation.
_REPLAYED = {
    "user": {STATUS_COMPLETED},
    "assistant": {STATUS_COMPLETED, STATUS_TOOL_CALL},
    "tool": {STATUS_COMPLETED, STATUS_ERROR},
}


def message_tokens(
    text: str, tool_calls: Sequence[ToolCall], count_tokens: Callable[[str], int]
) -> int:
    """Tokens of a message: its text plus each call as `name({json args})`."""
    tokens = count_tokens(text) if text else 0
    for call in tool_calls:
        args = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        tokens += count_tokens(f"{call.name}({args})")
    return tokens


def same_family(msg: Message, strategy: str) -> bool:
    """True when a row's tool data can be replayed to `strategy`."""
    return msg.strategy is not None and strategy_family(msg.strategy) == strategy_family(strategy)


@dataclass(frozen=True, slots=True)
class Isolated:
    """Messages ready for assembly and notes on what isolation changed."""

    messages: tuple[PromptMessage, ...]
    notes: tuple[str, ...] = ()


def _native(msg: Message, strategy: str) -> object | None:
    if not msg.payload or not same_family(msg, strategy):
        return None
    if strategy_family(strategy) == STRATEGY_GEMINI:
        return message_parser.gemini_parts_for_replay(msg)
    return message_parser.native_payload(msg)


@dataclass
class _Walker:
    """The state of one pass over the window; see `isolate`."""

    strategy: str
    enabled: Collection[str] | None
    tiers: Mapping[int, TierResult]
    out: list[PromptMessage] = field(default_factory=list)
    # Calls of the last assistant message still waiting for their results.
    pending: dict[str, tuple[ToolCall, int | None]] = field(default_factory=dict)
    # Calls to disabled tools whose results must become placeholders.
    disabled: dict[str, str] = field(default_factory=dict)
    # Placeholders waiting for the current run of tool messages to end.
    deferred: list[tuple[str, int | None]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    hidden_from: set[str] = field(default_factory=set)
    disabled_names: set[str] = field(default_factory=set)
    count_tokens: Callable[[str], int] | None = None

    def emit(self, stored: Message | None = None, **fields: Any) -> None:
        """Append one message, counting its tokens when a counter was given.

        A message sent exactly as stored reuses the count taken when it was
        written (counted once), so assembly does not re-tokenise history.
        """
        tokens = 0
        if stored is not None and stored.tokens > 0 and fields["text"] == stored.content:
            tokens = stored.tokens
        elif self.count_tokens is not None:
            tokens = message_tokens(fields["text"], fields.get("tool_calls", ()), self.count_tokens)
        self.out.append(PromptMessage(tokens=tokens, **fields))

    def settle(self) -> None:
        """Close the current call/result run before a non-tool message."""
        for call, gid in self.pending.values():
            self.counts["synthetic"] += 1
            self.emit(
                role="tool",
                text=SYNTHETIC_RESULT,
                group_id=gid,
                tool_call_id=call.id,
                tool_name=call.name,
            )
        self.pending.clear()
        for text, gid in self.deferred:
            self.emit(role="assistant", text=text, group_id=gid)
        self.deferred.clear()

    def text(
        self, msg: Message, role: str, text: str, native: object | None = None, quiet: bool = False
    ) -> None:
        self.settle()
        if not text.strip():
            # A provider rejects empty turns; a hidden row's missing text is expected.
            self.counts["empty"] += 0 if quiet else 1
            return
        self.emit(
            msg, role=role, text=text, message_id=msg.id, group_id=msg.group_id, native=native
        )

    def tool_call_row(self, msg: Message) -> None:
        text = message_parser.assistant_text(msg)
        calls = message_parser.tool_calls(msg)
        if not same_family(msg, self.strategy):
            self.counts["hidden"] += 1
            self.hidden_from.add(msg.strategy or "unknown")
            self.text(msg, "assistant", text, quiet=True)
            return
        if not calls:  # unparsable payload: keep what the model said
            self.counts["unparsable"] += 1
            self.text(msg, "assistant", text)
            return
        self.settle()
        # A repeated call id could not be answered unambiguously: keep the first.
        unique = {c.id: c for c in reversed(calls)}
        stored = len(calls)
        calls = tuple(c for c in calls if unique.get(c.id) is c)
        usable = [c for c in calls if self.enabled is None or c.name in self.enabled]
        parts = [text] if text.strip() else []
        for call in calls:
            if self.enabled is not None and call.name not in self.enabled:
                self.disabled[call.id] = call.name
                self.disabled_names.add(call.name)
                self.counts["disabled"] += 1
                parts.append(DISABLED_CALL.format(name=call.name))
        body = "\n".join(parts)
        if not usable:
            self.text(msg, "assistant", body)
            return
        native = _native(msg, self.strategy) if len(usable) == stored else None
        self.emit(
            msg if len(usable) == stored else None,
            role="assistant",
            text=body,
            message_id=msg.id,
            group_id=msg.group_id,
            tool_calls=tuple(usable),
            native=native,
        )
        self.pending = {c.id: (c, msg.group_id) for c in usable}

    def tool_result(self, msg: Message) -> None:
        if not same_family(msg, self.strategy):
            self.counts["hidden"] += 1
            self.hidden_from.add(msg.strategy or "unknown")
            return
        cid = msg.tool_call_id or ""
        name = msg.tool_name or "unknown"
        if cid in self.pending:
            call, _ = self.pending.pop(cid)
            tiered = self.tiers.get(msg.id)
            self.emit(
                msg,
                role="tool",
                text=tiered.text if tiered else msg.content,
                message_id=msg.id,
                group_id=msg.group_id,
                tool_call_id=cid,
                tool_name=call.name,  # the pairing key for Gemini's function_response
                truncated=tiered.truncated if tiered else False,
                tier=tiered.tier if tiered else None,
            )
        elif cid in self.disabled:
            self.deferred.append(
                (DISABLED_RESULT.format(name=self.disabled.pop(cid)), msg.group_id)
            )
        else:
            # Its call was dropped, or the results of a later call already
            # closed the run: keep a pointer so the model can still fetch it.
            self.counts["orphan"] += 1
            self.deferred.append((ORPHAN_RESULT.format(name=name, id=msg.id), msg.group_id))

    def notes(self) -> tuple[str, ...]:
        c = self.counts
        out: list[str] = []
        if c["hidden"]:
            out.append(
                f"isolation: {c['hidden']} tool message(s) from "
                f"{', '.join(sorted(self.hidden_from))} hidden (another provider family)"
            )
        if c["disabled"]:
            out.append(
                f"isolation: {c['disabled']} call(s) to disabled tool(s) "
                f"{', '.join(sorted(self.disabled_names))} replaced by placeholders"
            )
        if c["synthetic"]:
            out.append(f"isolation: {c['synthetic']} call(s) without a result got a synthetic one")
        if c["orphan"]:
            out.append(
                f"isolation: {c['orphan']} tool result(s) without their call shown as pointers"
            )
        if c["unparsable"]:
            out.append(f"isolation: {c['unparsable']} tool-call row(s) unparsable, kept as text")
        if c["interrupted"]:
            out.append(f"skipped {c['interrupted']} interrupted message(s) (shown, never replayed)")
        if c["not_replayed"]:
            out.append(
                f"skipped {c['not_replayed']} message(s) that are not replayed (status/role)"
            )
        if c["empty"]:
            out.append(f"skipped {c['empty']} empty message(s)")
        return tuple(out)


def isolate(
    messages: Sequence[Message],
    strategy: str,
    enabled_tools: Collection[str] | None = None,
    tiers: Mapping[int, TierResult] | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> Isolated:
    """Turn windowed rows (chronological) into valid messages for `strategy`.

    `enabled_tools` None means every tool is enabled. `tiers` maps a tool
    result's message id to its tiered text (see `tiers.apply_tiers`); results
    without an entry are replayed whole. With `count_tokens` each message
    carries its token count; otherwise `tokens` is 0.
    """
    walker = _Walker(
        strategy=strategy, enabled=enabled_tools, tiers=tiers or {}, count_tokens=count_tokens
    )
    for msg in messages:
        if not is_windowable(msg):
            continue
        if msg.status == STATUS_INTERRUPTED:
            walker.counts["interrupted"] += 1
            continue
        if msg.status not in _REPLAYED.get(msg.role, ()):
            walker.counts["not_replayed"] += 1
            continue
        if msg.role == "tool":
            walker.tool_result(msg)
        elif msg.status == STATUS_TOOL_CALL:
            walker.tool_call_row(msg)
        elif msg.role == "assistant":
            walker.text(msg, "assistant", msg.content, _native(msg, strategy))
        else:
            walker.text(msg, "user", msg.content)
    walker.settle()
    return Isolated(tuple(walker.out), walker.notes())
