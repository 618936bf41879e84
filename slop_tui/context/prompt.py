"""The provider-neutral request the context engine produces.

Provider adapters (`slop_tui.providers`) turn a `Prompt` into one vendor's
request body; `/context show` renders the same object, so what is shown is
what is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slop_tui.records import ToolCall

# Layer names, in the order they appear in a request (default layout).
LAYER_SYSTEM = "system"  # base prompt, available tools, active skills
LAYER_REPO_MAP = "repo_map"  # `## Repository Structure`: the ranked symbol map
LAYER_FILE_TREE = "file_tree"  # `## Repository Files`: a user/assistant pair of its own
LAYER_URLS = "urls"  # `## URL Context`: `/url add` pages, a user/assistant pair of its own
# `## MCP Resources`: `/mcp resource add` texts, a user/assistant pair of its own
LAYER_RESOURCES = "resources"
LAYER_GUIDELINES = "guidelines"  # history guidelines
LAYER_PERSONALITY = "personality"  # how to speak: lane > session > global
LAYER_STATE = "state"  # the Global Anchor (### STATE)
LAYER_SCRATCHPAD = "scratchpad"
LAYER_MEMOS = "memos"
LAYER_SUMMARY = "summary"  # rolling summaries of the current lane
LAYER_FILES = "files"  # `/file add` files, fenced
LAYER_RESUME = "resume"  # a handoff, injected once after a resume
LAYER_QUOTED = "quoted"  # the replied-to group, labelled, never mixed into the user's text
LAYER_FOCUS = "focus"  # what the user most likely refers to
LAYER_HISTORY = "history"  # the conversation messages (not part of the system text)

LAYER_ORDER = (
    LAYER_SYSTEM,
    LAYER_REPO_MAP,
    LAYER_FILE_TREE,
    LAYER_URLS,
    LAYER_RESOURCES,
    LAYER_GUIDELINES,
    LAYER_PERSONALITY,
    LAYER_STATE,
    LAYER_SCRATCHPAD,
    LAYER_MEMOS,
    LAYER_SUMMARY,
    LAYER_FILES,
    LAYER_RESUME,
    LAYER_QUOTED,
    LAYER_FOCUS,
)

# Where a layer's text goes (`Layer.placement`): the system instruction, the
# pinned message at the head of the conversation, or the context message right
# before the current request. Pinned and context messages carry the same name
# in `PromptMessage.kind`; ordinary conversation messages have kind None.
PLACEMENT_SYSTEM = "system"
PLACEMENT_PINNED = "pinned"
PLACEMENT_CONTEXT = "context"
# A layer sent as its own user/assistant pair at the head of the conversation (the
# layer's text is the user message; the assistant acknowledges it).
PLACEMENT_PAIR = "pair"
PLACEMENTS = (PLACEMENT_SYSTEM, PLACEMENT_PINNED, PLACEMENT_CONTEXT, PLACEMENT_PAIR)

KIND_PINNED = PLACEMENT_PINNED
KIND_CONTEXT = PLACEMENT_CONTEXT
KIND_SUMMARY = "summary"  # a summary message put in by `guards.apply_summary`
KIND_NOTICE = "notice"  # an engine pointer, e.g. after emergency truncation
KIND_PAIR = PLACEMENT_PAIR  # the two messages of a pair layer
ENGINE_KINDS = frozenset({KIND_PINNED, KIND_CONTEXT, KIND_PAIR})  # not conversation history


@dataclass(frozen=True, slots=True)
class Layer:
    """One named block of the request.

    `placement` says where its text is sent (see PLACEMENTS): most layers are
    part of the system instruction; layouts move volatile ones into a message.
    """

    name: str
    text: str
    tokens: int
    placement: str = PLACEMENT_SYSTEM


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool declaration sent with the request (JSON schema for parameters)."""

    name: str
    description: str
    parameters: dict


@dataclass(frozen=True, slots=True)
class PromptImage:
    """An image sent with a user message: its bytes as the provider gets them (already
    downscaled to its limit), and the tokens that provider bills for it."""

    name: str
    mime: str
    width: int
    height: int
    tokens: int
    sha256: str
    data: bytes = field(default=b"", repr=False)


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
    tier: str | None = None  # "full" | "degraded" | "inactive" | "elided" for tool results
    kind: str | None = None  # None: conversation; else an engine message (KIND_*)
    images: tuple[PromptImage, ...] = ()  # sent with the text (user messages)

    @property
    def image_tokens(self) -> int:
        return sum(i.tokens for i in self.images)


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One `/file add` file as it appears in the files layer (`text` is its fenced block)."""

    path: str
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Prompt:
    """An assembled request: layers, conversation, tool declarations.

    Layers placed in the system instruction make `system_text`; the others
    are already part of `messages` (the pinned and context messages) and are
    kept in `layers` so `/context show` and the budget can name them.
    """

    layers: tuple[Layer, ...]
    messages: tuple[PromptMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    strategy: str = "openai"
    notes: tuple[str, ...] = field(default=())  # what the engine did (placeholders, etc.)
    files: tuple[FileEntry, ...] = ()  # the files layer, per file, with tokens
    tool_tokens: int = 0  # the tool declarations (JSON schemas), sent beside the text
    layout: str = "default"

    @property
    def system_text(self) -> str:
        return "".join(layer.text for layer in self.layers if layer.placement == PLACEMENT_SYSTEM)

    @property
    def history(self) -> tuple[PromptMessage, ...]:
        """The conversation messages (without the pinned and context messages)."""
        return tuple(m for m in self.messages if m.kind not in ENGINE_KINDS)

    @property
    def history_tokens(self) -> int:
        return sum(m.tokens + m.image_tokens for m in self.messages if m.kind not in ENGINE_KINDS)

    def layer_tokens(self) -> dict[str, int]:
        out = {layer.name: layer.tokens for layer in self.layers}
        out["history"] = self.history_tokens
        return out

    @property
    def total_tokens(self) -> int:
        """Tokens of the text sent: the system instruction plus every message."""
        system = sum(layer.tokens for layer in self.layers if layer.placement == PLACEMENT_SYSTEM)
        return system + sum(m.tokens + m.image_tokens for m in self.messages)

    @property
    def request_tokens(self) -> int:
        """`total_tokens` plus the tool declarations: what the budget guards measure."""
        return self.total_tokens + self.tool_tokens
