"""The typed Textual messages that carry the turn controller's news to the workspace
screen and its panes.

The turn controller (ui/turns.py) never calls a widget or a private of the app:
it posts these. An orchestrator event travels as one `TurnMessage`, of the
subclass made for its type (`turn_message`), posted to the conversation view;
it bubbles from there to the screen and the app, so each handles the kinds it
cares for with an `on_turn_<kind>` handler (`on_turn_text_chunk`,
`on_turn_tool_result`, ...), without a ladder of isinstance checks. Streamed
text and thinking stop at the conversation (they come hundreds of times a
second, and nothing above it draws them).
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from slop_tui.commands.base import CommandResult
    from slop_tui.records import ToolCall

__all__ = [
    "ApprovalRequested",
    "BannerRequested",
    "CommandFinished",
    "PanesStale",
    "PhaseChanged",
    "TurnBegins",
    "TurnEnded",
    "TurnMessage",
    "turn_message",
]


class PhaseChanged(Message):
    """What the app is doing now ("" idle, "streaming", "running tools", "retrying in
    N s", "summarizing", "compacting"): the header says it at once."""

    def __init__(self, phase: str) -> None:
        super().__init__()
        self.phase = phase


class BannerRequested(Message):
    """Show `text` in the banner above the conversation ("" hides it); `cause` says
    what it is about ("turn", "config", "startup"), so it can be cleared with it.
    `clear_only` hides the banner only if it is about `cause`."""

    def __init__(self, text: str, cause: str = "", *, clear_only: bool = False) -> None:
        super().__init__()
        self.text = text
        self.cause = cause
        self.clear_only = clear_only


class CommandFinished(Message):
    """A slash command ran (`line`, its `result`): the screen reports it (a notice, the
    output panel, a dialog) and refreshes what it changed. `done` is set once the
    screen has."""

    def __init__(self, line: str, result: CommandResult) -> None:
        super().__init__()
        self.line = line
        self.result = result
        self.done = asyncio.Event()


class ApprovalRequested(Message):
    """A tool call asks before it runs: the screen shows the approval dialog (`title`:
    the tool, `details`: its arguments and, for an MCP tool, its description) and sets
    `answer` to "allow", "allow_session" or "deny"."""

    def __init__(self, call: ToolCall, session_option: bool, *, title: str, details: str) -> None:
        super().__init__()
        self.call = call
        self.session_option = session_option
        self.title = title
        self.details = details
        self.answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()


class PanesStale(Message):
    """What the panes show may have changed (background work stored a summary)."""


class TurnBegins(Message):
    """A turn starts with `prompt`: the conversation shows it at once (its group id
    follows with the `TurnStarted` event)."""

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt


class TurnEnded(Message):
    """The running turn is over (finished, failed or cancelled); posted after its
    last `TurnMessage`, so it reaches each pane after every event of the turn.
    `done` is set once the screen has settled it."""

    def __init__(self, group_id: int | None) -> None:
        super().__init__()
        self.group_id = group_id
        self.done = asyncio.Event()


class TurnMessage(Message):
    """One orchestrator event (`event`), for the panes that draw the running turn."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event


@cache
def _messages() -> dict[type, type[TurnMessage]]:
    """The `TurnMessage` subclass of each orchestrator event type, each named like its
    type so its handler is `on_turn_<snake name>` (`TextChunk` -> `on_turn_text_chunk`).
    Made at the first turn's first event: the event types' module is not imported
    before the first frame."""
    from slop_tui import events as turn_events

    # Streamed text comes a few hundred times a second and only the conversation draws
    # it: its messages stop there. A bubbling message is posted again to every
    # container above it, each of which then runs its idle handlers: most of a streamed
    # chunk's cost on the event loop.
    conversation_only = (turn_events.TextChunk, turn_events.ThinkingChunk)
    return {
        event_type: type(
            event_type.__name__,
            (TurnMessage,),
            {},
            namespace="turn",
            bubble=event_type not in conversation_only,
        )
        for event_type in (
            turn_events.TurnStarted,
            turn_events.TextChunk,
            turn_events.ThinkingChunk,
            turn_events.ToolCallEvent,
            turn_events.ToolResultEvent,
            turn_events.UsageEvent,
            turn_events.Notice,
            turn_events.ErrorEvent,
            turn_events.BudgetWarning,
            turn_events.Compaction,
            turn_events.TurnFinished,
            turn_events.PlanSent,
        )
    }


def turn_message(event: Any) -> TurnMessage:
    """The message that carries `event` (a plain `TurnMessage` for a type it does not
    know, which no pane handles)."""
    return _messages().get(type(event), TurnMessage)(event)
