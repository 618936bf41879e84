"""Request layouts and the prompt-cache measure.

Providers bill a repeated request prefix at a discount (OpenAI automatic
prefix caching, Gemini implicit caching); any change near the top of a request
throws the rest of the cache away. A layout says where each layer goes:

- `default`: every layer but the file tree, the quoted reply and the focus note
  is part of the system instruction (system, repository map, guidelines, STATE,
  scratchpad, memos, summary, files, resume); the file tree and the URL context
  are user/assistant pairs at the head of the conversation; the quoted reply and the focus note form one user-role
  context message right before the current request (seed 002's order: recent
  messages, quoted reply, user message). STATE changes with nearly every
  reply, so the cached prefix usually ends inside the system text.
- `cache`: the system instruction holds only the stable layers (base prompt,
  tools, skills, guidelines) and is byte-identical from request to request.
  The semi-stable layers (repository map, summary, files: they change with the
  conversation's topic, at a compaction or a `/file add`) form a pinned message at the head of the conversation; the
  volatile ones (STATE, scratchpad, memos, resume, quoted reply, focus) form
  one context message right before the current request. Consecutive requests
  then share the system text, the pinned message and the history up to the
  previous request.

`serialize_request` renders a prompt the same way whatever its strategy, and
`longest_common_prefix` measures what two consecutive requests share.

The stability tracker: `Stability`
records, per layer, a digest of its text and for how many consecutive
requests it has stayed unchanged. In the `cache` layout a volatile layer
(STATE, scratchpad, memos, resume) that stayed unchanged for `STABLE_AFTER`
requests is promoted into the pinned message, after the layers that change
least (summary, files); the request after it changes, it is back in the
context message. The cached tiers are then: the tool declarations and the
system text, the pinned message, the history up to the context message;
`cache_breakpoints` names the message that ends each non-empty one (Anthropic
models through OpenRouter's OpenAI-compatible API take a `cache_control`
mark there).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from slop_tui.context.prompt import (
    LAYER_FILE_TREE,
    LAYER_FILES,
    LAYER_FOCUS,
    LAYER_GUIDELINES,
    LAYER_MEMOS,
    LAYER_PERSONALITY,
    LAYER_QUOTED,
    LAYER_REPO_MAP,
    LAYER_RESOURCES,
    LAYER_RESUME,
    LAYER_SCRATCHPAD,
    LAYER_STATE,
    LAYER_SUMMARY,
    LAYER_SYSTEM,
    LAYER_URLS,
    PLACEMENT_CONTEXT,
    PLACEMENT_PAIR,
    PLACEMENT_PINNED,
    PLACEMENT_SYSTEM,
    Prompt,
    PromptMessage,
)

LAYOUT_DEFAULT = "default"
LAYOUT_CACHE = "cache"
LAYOUTS = (LAYOUT_DEFAULT, LAYOUT_CACHE)

_PLACEMENTS: dict[str, dict[str, str]] = {
    LAYOUT_DEFAULT: {
        LAYER_SYSTEM: PLACEMENT_SYSTEM,
        LAYER_REPO_MAP: PLACEMENT_SYSTEM,
        LAYER_FILE_TREE: PLACEMENT_PAIR,
        LAYER_URLS: PLACEMENT_PAIR,
        LAYER_RESOURCES: PLACEMENT_PAIR,
        LAYER_GUIDELINES: PLACEMENT_SYSTEM,
        LAYER_PERSONALITY: PLACEMENT_SYSTEM,
        LAYER_STATE: PLACEMENT_SYSTEM,
        LAYER_SCRATCHPAD: PLACEMENT_SYSTEM,
        LAYER_MEMOS: PLACEMENT_SYSTEM,
        LAYER_SUMMARY: PLACEMENT_SYSTEM,
        LAYER_FILES: PLACEMENT_SYSTEM,
        LAYER_RESUME: PLACEMENT_SYSTEM,
        LAYER_QUOTED: PLACEMENT_CONTEXT,
        LAYER_FOCUS: PLACEMENT_CONTEXT,
    },
    LAYOUT_CACHE: {
        LAYER_SYSTEM: PLACEMENT_SYSTEM,
        LAYER_GUIDELINES: PLACEMENT_SYSTEM,
        LAYER_PERSONALITY: PLACEMENT_SYSTEM,
        LAYER_REPO_MAP: PLACEMENT_PINNED,
        LAYER_FILE_TREE: PLACEMENT_PAIR,
        LAYER_URLS: PLACEMENT_PAIR,
        LAYER_RESOURCES: PLACEMENT_PAIR,
        LAYER_SUMMARY: PLACEMENT_PINNED,
        LAYER_FILES: PLACEMENT_PINNED,
        LAYER_STATE: PLACEMENT_CONTEXT,
        LAYER_SCRATCHPAD: PLACEMENT_CONTEXT,
        LAYER_MEMOS: PLACEMENT_CONTEXT,
        LAYER_RESUME: PLACEMENT_CONTEXT,
        LAYER_QUOTED: PLACEMENT_CONTEXT,
        LAYER_FOCUS: PLACEMENT_CONTEXT,
    },
}

# The first line of each engine message, so the model never takes it for the user's words.
PINNED_HEADER = (
    "## Pinned Context\n"
    "(Supplied by slop-tui, not written by the user. It changes only when the "
    "conversation is compacted or files are added or removed.)\n\n"
)
CONTEXT_HEADER = (
    "## Context for the Current Request\n"
    "(Supplied by slop-tui with every request, not written by the user.)\n\n"
)
MESSAGE_HEADERS = {PLACEMENT_PINNED: PINNED_HEADER, PLACEMENT_CONTEXT: CONTEXT_HEADER}


def check_layout(layout: str) -> str:
    """`layout` itself, or ValueError naming the valid ones."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown context layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    return layout


# Volatile layers the stability tracker may promote into the pinned message
# (`cache` layout), in the order they follow the summary and the files there:
# what changes least first. Quoted reply and focus name the current request.
PROMOTABLE = (LAYER_MEMOS, LAYER_SCRATCHPAD, LAYER_RESUME, LAYER_STATE)
# Requests a layer must stay unchanged before it is promoted.
STABLE_AFTER = 3


def placement(layer: str, layout: str, stable: Iterable[str] = ()) -> str:
    """Where `layer` goes in `layout`; `stable`: the layers the tracker promoted."""
    where = _PLACEMENTS[check_layout(layout)][layer]
    if layout == LAYOUT_CACHE and layer in PROMOTABLE and layer in stable:
        return PLACEMENT_PINNED
    return where


def layer_order(names: Sequence[str], layout: str, stable: Iterable[str] = ()) -> list[str]:
    """`names` (in LAYER_ORDER) in sending order: in the `cache` layout the layers the
    tracker promoted follow the summary and the files (what changes least comes
    first in the pinned message); everything else keeps LAYER_ORDER."""
    promoted = [
        n for n in PROMOTABLE if n in names and placement(n, layout, stable) == PLACEMENT_PINNED
    ]
    if not promoted:
        return list(names)
    rest = [n for n in names if n not in promoted]
    after = max((i for i, n in enumerate(rest) if n in (LAYER_SUMMARY, LAYER_FILES)), default=-1)
    if after < 0:  # no summary, no files: the promoted layers open the pinned message
        after = max(
            (i for i, n in enumerate(rest) if n in (LAYER_SYSTEM, LAYER_GUIDELINES)), default=-1
        )
    return rest[: after + 1] + promoted + rest[after + 1 :]


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


@dataclass(frozen=True, slots=True)
class Stability:
    """The stability tracker: per layer, the digest of its text as last sent and how
    many consecutive requests it has been sent unchanged (0: it just changed)."""

    items: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def update(self, texts: Mapping[str, str]) -> Stability:
        """After a request: `texts` are its layers (name -> text); a layer absent from
        it is forgotten, one that changed starts again at 0."""
        out = {}
        for name, text in texts.items():
            digest = _digest(text)
            old = self.items.get(name)
            out[name] = (digest, old[1] + 1 if old is not None and old[0] == digest else 0)
        return Stability(out)

    def age(self, name: str) -> int:
        """Requests `name` has been sent unchanged (0 when unknown)."""
        item = self.items.get(name)
        return item[1] if item is not None else 0

    def stable(self, threshold: int = STABLE_AFTER) -> frozenset[str]:
        """The promotable layers unchanged for at least `threshold` requests."""
        return frozenset(n for n in PROMOTABLE if self.age(n) >= threshold)

    def purge(self, names: Iterable[str]) -> Stability:
        """Forget `names` (after a compaction or an edit: they start over)."""
        drop = set(names)
        return Stability({k: v for k, v in self.items.items() if k not in drop})


def sent_layers(prompt: Prompt) -> dict[str, str]:
    """A prompt's layer texts by name, without the separator their placement adds."""
    return {layer.name: layer.text.lstrip("\n") for layer in prompt.layers}


@dataclass(frozen=True, slots=True)
class Breakpoints:
    """Where each non-empty cached tier of a request ends: after the system text
    (`system`), and after the messages at `messages` (indices into
    `Prompt.messages`: the pinned message, the last history message before the
    volatile tail)."""

    system: bool
    messages: tuple[int, ...]

    @property
    def count(self) -> int:
        return int(self.system) + len(self.messages)


def _marks_text(m: PromptMessage) -> bool:
    """A message whose content can carry a cache mark (a text part)."""
    return bool(m.text) and not (m.role == "assistant" and m.tool_calls)


def cache_breakpoints(prompt: Prompt, limit: int = 4) -> Breakpoints:
    """The end of each non-empty cached tier, at most `limit` marks.

    Tiers: the system text (with the tool declarations before it); the pinned
    message; the conversation up to the volatile tail (the context message, or
    the current request when there is none): its last message that can carry a
    mark. Nothing after the tail is marked: it changes with every request.
    """
    system = bool(prompt.system_text) and limit > 0
    marks: list[int] = []
    messages = prompt.messages
    tail = next((i for i, m in enumerate(messages) if m.kind == PLACEMENT_CONTEXT), None)
    if tail is None:
        tail = next(
            (
                i
                for i in range(len(messages) - 1, -1, -1)
                if messages[i].kind is None and messages[i].role == "user"
            ),
            len(messages),
        )
    pinned = next((i for i, m in enumerate(messages) if m.kind == PLACEMENT_PINNED), None)
    if pinned is not None and pinned < tail:
        marks.append(pinned)
    for i in range(tail - 1, (pinned if pinned is not None else -1), -1):
        if messages[i].kind is None and _marks_text(messages[i]):
            marks.append(i)
            break
    room = max(0, limit - int(system))
    return Breakpoints(system, tuple(sorted(marks)[:room]))


def serialize_request(prompt: Prompt) -> str:
    """One strategy-independent text of what a request sends, in sending order.

    Tool declarations first (providers put them in front of the messages when
    they build the cached prefix), then the system text, then each message
    with its role, call ids and calls. Two requests share a provider cache
    prefix about as far as their serializations share a prefix.
    """
    out = []
    for t in prompt.tools:
        params = json.dumps(t.parameters, ensure_ascii=False, sort_keys=True)
        out.append(f"\x1etool\x1f{t.name}\x1f{t.description}\x1f{params}")
    out.append(f"\x1esystem\x1f{prompt.system_text}")
    for m in prompt.messages:
        calls = json.dumps(
            [[c.id, c.name, c.arguments] for c in m.tool_calls], ensure_ascii=False, sort_keys=True
        )
        out.append(f"\x1e{m.role}\x1f{m.tool_call_id or ''}\x1f{m.tool_name or ''}\x1f{m.text}")
        if m.tool_calls:
            out.append(f"\x1fcalls\x1f{calls}")
    return "".join(out)


def _common_length(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def longest_common_prefix(
    a: Prompt, b: Prompt, count_tokens: Callable[[str], int] | None = None
) -> int:
    """Length of the prefix two requests share: characters, or tokens with `count_tokens`."""
    sa, sb = serialize_request(a), serialize_request(b)
    n = _common_length(sa, sb)
    return n if count_tokens is None else count_tokens(sa[:n])
