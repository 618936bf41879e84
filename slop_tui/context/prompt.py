"""The provider-neutral request the context engine produces.

Provider adapters (`slop_tui.providers`) turn a `Prompt` into one vendor's
request body; `/context show` renders the same object, so what is shown is
what is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slop_tui.records import ToolCall

# Layer names, in the order they appear in a request.
LAYER_SYSTEM = "system"  # base prompt, available tools, active skills
LAYER_GUIDELINES = "guidelines"  # history guidelines
LAYER_STATE = "state"  # the Global Anchor (### STATE)
LAYER_SCRATCHPAD = "scratchpad"
LAYER_MEMOS = "memos"
LAYER_HISTORY = "history"  # the conversation messages (not part of the system text)


@dataclass(frozen=True, slots=True)
class Layer:
    """One named block of the system instruction."""

    name: str
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool declaration sent with the request (JSON schema for parameters)."""

    name: str
    description: str
    parameters: dict


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One provider-neutral conversation message.

    role is `user`, `assistant` or `tool`. An assistant message may carry
    tool calls; a tool message answers one call (`tool_call_id`, `tool_name`).
    `native` is the stored provider payload (parsed JSON) when the message is
    replayed to the same strategy family, e.g. Gemini parts with their
    `thoughtSignature`; adapters prefer it when present.
    """

    role: str
    text: str
    tokens: int = 0
    message_id: int | None = None
    group_id: int | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    native: object | None = None
    truncated: bool = False  # a tool result cut by a tier (full text is in the ledger)
    tier: str | None = None  # "full" | "degraded" | "inactive" for tool results


@dataclass(frozen=True, slots=True)
class Prompt:
    """An assembled request: system layers, conversation, tool declarations."""

    layers: tuple[Layer, ...]
    messages: tuple[PromptMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    strategy: str = "openai"
    notes: tuple[str, ...] = field(default=())  # what the engine did (placeholders, etc.)

    @property
    def system_text(self) -> str:
        return "".join(layer.text for layer in self.layers)

    def layer_tokens(self) -> dict[str, int]:
        out = {layer.name: layer.tokens for layer in self.layers}
        out["history"] = sum(m.tokens for m in self.messages)
        return out

    @property
    def total_tokens(self) -> int:
        return sum(layer.tokens for layer in self.layers) + sum(m.tokens for m in self.messages)
