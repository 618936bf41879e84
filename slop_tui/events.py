"""The events a turn emits, and the callback types that receive them.

A module of its own so the UI can import the event types without importing
the orchestrator (and with it the context engine, providers and tools) on
its start-up path. `slop_tui.orchestrator` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slop_tui.records import Message, ToolCall

__all__ = [
    "Event",
    "TurnStarted",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallEvent",
    "ToolResultEvent",
    "UsageEvent",
    "Notice",
    "ErrorEvent",
    "BudgetWarning",
    "Compaction",
    "TurnFinished",
    "PlanSent",
    "Waiting",
    "Emit",
    "Approver",
]


@dataclass(frozen=True)
class Event:
    kind: str = ""


@dataclass(frozen=True)
class TurnStarted(Event):
    group_id: int = 0
    provider: str = ""
    model: str = ""
    kind: str = "turn_started"


@dataclass(frozen=True)
class TextChunk(Event):
    text: str = ""
    kind: str = "text"


@dataclass(frozen=True)
class ThinkingChunk(Event):
    text: str = ""
    kind: str = "thinking"


@dataclass(frozen=True)
class ToolCallEvent(Event):
    call_id: str = ""
    name: str = ""
    arguments: dict = field(default_factory=dict)
    kind: str = "tool_call"


@dataclass(frozen=True)
class ToolResultEvent(Event):
    call_id: str = ""
    name: str = ""
    ok: bool = True
    text: str = ""
    message_id: int = 0
    message: Message | None = None  # the stored result, as the ledger holds it
    kind: str = "tool_result"


@dataclass(frozen=True)
class UsageEvent(Event):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    kind: str = "usage"


@dataclass(frozen=True)
class Notice(Event):
    text: str = ""
    retry_in: float | None = None  # seconds until the provider is tried again
    kind: str = "notice"


@dataclass(frozen=True)
class ErrorEvent(Event):
    error_kind: str = ""
    message: str = ""
    kind: str = "error"


@dataclass(frozen=True)
class BudgetWarning(Event):
    """The request crossed `warn_pct` of the input budget (sent once per crossing)."""

    percent: float = 0.0
    text: str = ""
    kind: str = "budget_warning"


@dataclass(frozen=True)
class Compaction(Event):
    """Model work on summaries: before a request, or in the background after a reply.

    phase: "started" | "done" | "failed"; case: "summarize" | "truncate" |
    "none" ("" while it is not decided yet); job: "summary" (a lane summary of
    rows that left the window), "compaction" (after the reply) or "guard"
    (the guard ladder's summary before a request). The workspace's header
    shows a started job until it is done or failed.
    """

    phase: str = ""
    case: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    text: str = ""
    job: str = ""
    kind: str = "compaction"


@dataclass(frozen=True)
class TurnFinished(Event):
    group_id: int = 0
    text: str = ""
    state_updated: bool = False
    scratchpad_updated: bool = False
    kind: str = "turn_finished"


@dataclass(frozen=True)
class PlanSent(Event):
    """The context plan whose request was just sent (the panes draw this one: the
    marks, tier labels, gauge and preview show what the model received)."""

    plan: Any = None
    kind: str = "plan_sent"


@dataclass(frozen=True)
class Waiting(Event):
    """The turn waits on something other than the model (an MCP server starting, or
    answering a call); the workspace's header shows `text` as the turn's phase."""

    text: str = ""
    kind: str = "waiting"


Emit = Callable[[Event], Awaitable[None] | None]
# Asked before a write or shell tool runs: returns "allow", "allow_session" or "deny".
Approver = Callable[["ToolCall"], Awaitable[str]]
