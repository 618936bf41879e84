"""Assembly: plain records and settings in, one `Prompt` out.

Layers, in order (empty ones omitted): system (base prompt, available tools,
active skills), guidelines, state (`## Global State (Anchor)`), scratchpad
(`## Active Scratchpad`), memos (`## Relevant Memos`); then the history: the
rolling window, isolated for the target strategy, tool results tiered, with
`## Begin Conversation History` on the first message and
`## End of History\\n\\n### CURRENT REQUEST` on the last one when it is a user
message (and not also the first).

Pure and deterministic: the same inputs give a byte-identical `Prompt`, so
`/context show` shows exactly what the provider adapter sends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from slop_tui.context import guidelines
from slop_tui.context.isolation import isolate, message_tokens, same_family
from slop_tui.context.prompt import (
    LAYER_GUIDELINES,
    LAYER_MEMOS,
    LAYER_SCRATCHPAD,
    LAYER_STATE,
    LAYER_SYSTEM,
    Layer,
    Prompt,
    PromptMessage,
    ToolSpec,
)
from slop_tui.context.tiers import (
    TIER_DEGRADED,
    TIER_FULL,
    TIER_INACTIVE,
    TruncationSettings,
    apply_tiers,
)
from slop_tui.context.window import groups_in, select_window
from slop_tui.records import Memo, Message, Session, Skill

BEGIN_MARKER = "## Begin Conversation History\n"
END_MARKER = "## End of History\n\n### CURRENT REQUEST\n"
STATE_HEADER = "## Global State (Anchor)\n"
SCRATCHPAD_HEADER = "## Active Scratchpad\n"
MEMOS_HEADER = (
    "## Relevant Memos\n"
    "The following memos were automatically retrieved as they might be relevant "
    "to the current context:\n"
)

# Any `str -> int`, e.g. `tokens.TokenCounter(model).count`; injected so the engine stays pure.
CountTokens = Callable[[str], int]


def rough_tokens(text: str) -> int:
    """The fallback token estimate: about four characters per token."""
    return (len(text) + 3) // 4


@dataclass(frozen=True, slots=True)
class ContextSettings:
    """Engine settings (config `[context]`); `window` overrides the session's size."""

    truncation: TruncationSettings = field(default_factory=TruncationSettings)
    window: int | None = None
    max_memos: int = 5


@dataclass(frozen=True, slots=True)
class AssemblyInputs:
    """Everything one request is made of, as read from the ledger."""

    session: Session
    messages: Sequence[Message]  # the window rows; select_window is applied again
    strategy: str  # the target parsing strategy
    state: str | None = None
    scratchpad: str = ""
    memos: Sequence[Memo] = ()  # already ranked; at most max_memos are used
    skills: Sequence[Skill] = ()  # active skills, applied in this order
    tools: Sequence[ToolSpec] = ()  # enabled tools
    base_prompt: str | None = None  # None: guidelines.BASE_PROMPT


def _memo_line(memo: Memo) -> str:
    # Continuation lines are indented so a multi-line memo stays one list item.
    body = memo.content.strip().replace("\n", "\n  ")
    tags = json.dumps(list(memo.tags), ensure_ascii=False)
    return f"- [memo {memo.id}] {tags} {body}\n"


def _layers(inputs: AssemblyInputs, settings: ContextSettings) -> list[tuple[str, str]]:
    base = guidelines.BASE_PROMPT if inputs.base_prompt is None else inputs.base_prompt
    layers = [
        (LAYER_SYSTEM, guidelines.system_text(base, inputs.tools, inputs.skills)),
        (LAYER_GUIDELINES, guidelines.history_guidelines(inputs.session.name)),
    ]
    state = (inputs.state or "").strip()
    if state:
        layers.append((LAYER_STATE, STATE_HEADER + state + "\n"))
    scratchpad = inputs.scratchpad.strip()
    if scratchpad:
        layers.append((LAYER_SCRATCHPAD, SCRATCHPAD_HEADER + scratchpad + "\n"))
    memos = list(inputs.memos)[: max(0, settings.max_memos)]
    if memos:
        layers.append((LAYER_MEMOS, MEMOS_HEADER + "".join(_memo_line(m) for m in memos)))
    # One blank line between layers, so system_text reads as one document.
    return [(name, text if i == 0 else "\n" + text) for i, (name, text) in enumerate(layers)]


def prompt_message_tokens(msg: PromptMessage, count_tokens: CountTokens) -> int:
    """Tokens of a prompt message: its text plus the JSON of its tool calls."""
    return message_tokens(msg.text, msg.tool_calls, count_tokens)


def _mark(messages: list[PromptMessage], count_tokens: CountTokens) -> None:
    """Add the history delimiters in place (and recount the marked messages)."""
    if not messages:
        return
    first = messages[0]
    # A text message that gains a marker loses its native payload, so adapters
    # (which prefer `native`) cannot silently drop the marker.
    native = first.native if first.tool_calls else None
    text = BEGIN_MARKER + first.text
    tokens = message_tokens(text, first.tool_calls, count_tokens)
    messages[0] = replace(first, text=text, native=native, tokens=tokens)
    last = messages[-1]
    if len(messages) > 1 and last.role == "user":
        text = END_MARKER + last.text
        messages[-1] = replace(last, text=text, tokens=count_tokens(text))


def _window_note(window: Sequence[Message], size: int) -> str:
    groups = groups_in(window)
    span = f"groups {groups[0]}..{groups[-1]}" if groups else "no groups"
    label = "full history" if size == 0 else f"last {size} group(s)"
    return f"window: {label}: {len(groups)} group(s), {len(window)} message(s), {span}"


def assemble(
    inputs: AssemblyInputs,
    settings: ContextSettings | None = None,
    count_tokens: CountTokens = rough_tokens,
) -> Prompt:
    """Build the request for `inputs.strategy` (see the module docstring)."""
    settings = settings or ContextSettings()
    size = settings.window if settings.window is not None else inputs.session.window_size
    window = select_window(inputs.messages, size, lane=inputs.session.lane)
    notes = [_window_note(window, size)]

    # Tiers count only tool results the target will see, so results hidden by
    # isolation do not push visible ones out of full fidelity.
    visible = [m for m in window if not m.is_tool_related or same_family(m, inputs.strategy)]
    tiered = {
        m.id: t
        for m, t in zip(visible, apply_tiers(visible, settings.truncation), strict=True)
        if t.tier is not None
    }
    enabled = {t.name for t in inputs.tools}
    isolated = isolate(window, inputs.strategy, enabled, tiered, count_tokens)
    notes.extend(isolated.notes)

    messages = list(isolated.messages)
    _mark(messages, count_tokens)

    cut = [m for m in messages if m.truncated]
    if cut:
        tiers = (TIER_FULL, TIER_DEGRADED, TIER_INACTIVE)
        by_tier = {t: sum(1 for m in cut if m.tier == t) for t in tiers}
        detail = ", ".join(f"{n} {t}" for t, n in by_tier.items() if n)
        notes.append(f"truncated {len(cut)} tool result(s) ({detail}); full text via query_db")
    if len(inputs.memos) > settings.max_memos:
        notes.append(f"memos: {len(inputs.memos)} given, {settings.max_memos} used")

    layers = tuple(
        Layer(name, text, count_tokens(text)) for name, text in _layers(inputs, settings)
    )
    return Prompt(
        layers=layers,
        messages=tuple(messages),
        tools=tuple(inputs.tools),
        strategy=inputs.strategy,
        notes=tuple(notes),
    )
