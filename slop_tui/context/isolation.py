"""Tool-call isolation: ledger rows to provider-neutral messages for one strategy.

Rules (seed 000 §2):

- User and assistant text always crosses a provider switch; the text that came
  with tool calls crosses too, as plain assistant text, when the calls cannot.
- Tool calls and tool results appear only for the strategy family that made
  them (`gemini` and `gemini_gca` are one family): providers' tool schemas and
  sequencing differ too much to translate safely.
- A call to a tool that is not enabled becomes the assistant text
  `[tool call to disabled tool <name> omitted]` and its result the note
  `[result of disabled tool <name> omitted]`, so no orphan remains. The note
  (and the pointer that replaces a result whose call is gone) is the
  workspace's, not the model's: it is sent as a user message, so roles still
  alternate and a tool loop's next request ends with a user turn, as Gemini
  requires (two assistant messages in a row were sent before).
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
from slop_tui.slotted import positional_builder

# One PromptMessage per replayed row of every request: built without the
# frozen-dataclass `__init__` (see slotted.py), in PromptMessage's field order.
_prompt_message = positional_builder(PromptMessage)

DISABLED_CALL = "[tool call to disabled tool {name} omitted]"
DISABLED_RESULT = "[result of disabled tool {name} omitted]"
SYNTHETIC_RESULT = "[no result recorded: the call was interrupted]"
ORPHAN_RESULT = (
    "[tool result of {name} omitted: its call is not in the history; full text in message id {id}]"
)

# Statuses that are replayed, per role. Error rows of users or assistants are
# notices for the human (failed requests), not part of the conversation. An
# interrupted assistant row (a partial answer) is shown, never replayed; an
# interrupted tool row (a call the user cut short) is, so the model knows the
# call it made did not finish.
_REPLAYED = {
    "user": {STATUS_COMPLETED},
    "assistant": {STATUS_COMPLETED, STATUS_TOOL_CALL},
    "tool": {STATUS_COMPLETED, STATUS_ERROR, STATUS_INTERRUPTED},
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


def visible_rows(messages: Sequence[Message], strategy: str) -> list[Message]:
    """The rows whose text or tool data reaches `strategy`: every row except the
    tool calls and results of another family (what tiering counts, see `assemble`)."""
    family = strategy_family(strategy)
    return [
        m
        for m in messages
        if (m.role != "tool" and m.status != STATUS_TOOL_CALL)
        or (m.strategy is not None and strategy_family(m.strategy) == family)
    ]


def _blank(text: str) -> bool:
    # `not text.strip()` without copying a long text that ends in a newline.
    return not text or text.isspace()


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
    """The state of one pass over the window; see `isolate`.

    It runs once per history row of every request (2,000 rows for a long
    session's full history), so the common path is kept to one family check
    and one `PromptMessage` per row: no keyword dicts, no copies of the text.
    """

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
    family: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.family = strategy_family(self.strategy)

    def mine(self, msg: Message) -> bool:
        """`same_family(msg, self.strategy)`, with the target's family looked up once."""
        return msg.strategy is not None and strategy_family(msg.strategy) == self.family

    def emit(
        self,
        stored: Message | None,
        role: str,
        text: str,
        message_id: int | None = None,
        group_id: int | None = None,
        tool_calls: tuple[ToolCall, ...] = (),
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        native: object | None = None,
        truncated: bool = False,
        tier: str | None = None,
    ) -> None:
        """Append one message, counting its tokens when a counter was given.

        A message sent exactly as stored reuses the count taken when it was
        written (counted once), so assembly does not re-tokenise history.
        """
        tokens = 0
        if stored is not None and stored.tokens > 0 and text == stored.content:
            tokens = stored.tokens
        elif self.count_tokens is not None:
            tokens = message_tokens(text, tool_calls, self.count_tokens)
        self.out.append(
            _prompt_message(
                role,
                text,
                tokens,
                message_id,
                group_id,
                tool_calls,
                tool_call_id,
                tool_name,
                native,
                truncated,
                tier,
                None,  # kind: a conversation message
                (),  # images: added by assembly
            )
        )

    def settle(self) -> None:
        """Close the current call/result run before a non-tool message."""
        if not self.pending and not self.deferred:
            return
        for call, gid in self.pending.values():
            self.counts["synthetic"] += 1
            self.emit(None, "tool", SYNTHETIC_RESULT, None, gid, (), call.id, call.name)
        self.pending.clear()
        for text, gid in self.deferred:
            self.emit(None, "user", text, None, gid)
        self.deferred.clear()

    def text(
        self, msg: Message, role: str, text: str, native: object | None = None, quiet: bool = False
    ) -> None:
        self.settle()
        if _blank(text):
            # A provider rejects empty turns; a hidden row's missing text is expected.
            self.counts["empty"] += 0 if quiet else 1
            return
        self.emit(msg, role, text, msg.id, msg.group_id, (), None, None, native)

    def tool_call_row(self, msg: Message) -> None:
        text = message_parser.assistant_text(msg)
        if not self.mine(msg):
            self.counts["hidden"] += 1
            self.hidden_from.add(msg.strategy or "unknown")
            self.text(msg, "assistant", text, quiet=True)
            return
        calls = message_parser.tool_calls(msg)
        if not calls:  # unparsable payload: keep what the model said
            self.counts["unparsable"] += 1
            self.text(msg, "assistant", text)
            return
        self.settle()
        # A repeated call id could not be answered unambiguously: keep the first.
        unique = {c.id: c for c in reversed(calls)}
        stored = len(calls)
        if len(unique) < stored:
            calls = tuple(c for c in calls if unique.get(c.id) is c)
        enabled = self.enabled
        usable = calls if enabled is None else tuple(c for c in calls if c.name in enabled)
        body = text
        if enabled is not None and len(usable) < len(calls):
            parts = [text] if not _blank(text) else []
            for call in calls:
                if call.name not in enabled:
                    self.disabled[call.id] = call.name
                    self.disabled_names.add(call.name)
                    self.counts["disabled"] += 1
                    parts.append(DISABLED_CALL.format(name=call.name))
            body = "\n".join(parts)
        elif _blank(text):
            body = ""
        if not usable:
            self.text(msg, "assistant", body)
            return
        whole = len(usable) == stored
        self.emit(
            msg if whole else None,
            "assistant",
            body,
            msg.id,
            msg.group_id,
            usable,
            None,
            None,
            _native(msg, self.strategy) if whole else None,
        )
        gid = msg.group_id
        self.pending = {c.id: (c, gid) for c in usable}

    def tool_result(self, msg: Message) -> None:
        if not self.mine(msg):
            self.counts["hidden"] += 1
            self.hidden_from.add(msg.strategy or "unknown")
            return
        cid = msg.tool_call_id or ""
        pending = self.pending.pop(cid, None)
        if pending is not None:
            tiered = self.tiers.get(msg.id) or TierResult(msg.content, None, False)
            self.emit(
                msg,
                "tool",
                tiered.text,
                msg.id,
                msg.group_id,
                (),
                cid,
                pending[0].name,  # the pairing key for Gemini's function_response
                None,
                tiered.truncated,
                tiered.tier,
            )
        elif cid in self.disabled:
            self.deferred.append(
                (DISABLED_RESULT.format(name=self.disabled.pop(cid)), msg.group_id)
            )
        else:
            # Its call was dropped, or the results of a later call already
            # closed the run: keep a pointer so the model can still fetch it.
            self.counts["orphan"] += 1
            name = msg.tool_name or "unknown"
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
    counts = walker.counts
    for msg in messages:
        if not is_windowable(msg):
            continue
        role, status = msg.role, msg.status
        if status == STATUS_INTERRUPTED and role != "tool":
            counts["interrupted"] += 1
        elif status not in _REPLAYED.get(role, ()):
            counts["not_replayed"] += 1
        elif role == "tool":
            walker.tool_result(msg)
        elif status == STATUS_TOOL_CALL:
            walker.tool_call_row(msg)
        elif role == "assistant":
            walker.text(msg, "assistant", msg.content, _native(msg, strategy))
        else:
            walker.text(msg, "user", msg.content)
    walker.settle()
    return Isolated(tuple(walker.out), walker.notes())
