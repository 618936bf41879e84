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
"""

from __future__ import annotations

import json
from collections.abc import Callable

from slop_tui.context.prompt import (
    LAYER_FILE_TREE,
    LAYER_FILES,
    LAYER_FOCUS,
    LAYER_GUIDELINES,
    LAYER_MEMOS,
    LAYER_QUOTED,
    LAYER_REPO_MAP,
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
        LAYER_GUIDELINES: PLACEMENT_SYSTEM,
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
        LAYER_REPO_MAP: PLACEMENT_PINNED,
        LAYER_FILE_TREE: PLACEMENT_PAIR,
        LAYER_URLS: PLACEMENT_PAIR,
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


def placement(layer: str, layout: str) -> str:
    """Where `layer` goes in `layout`."""
    return _PLACEMENTS[check_layout(layout)][layer]


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
