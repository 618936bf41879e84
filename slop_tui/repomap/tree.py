"""The file tree layer: the project's files as a `Repository Files` pair.

The listing is `files.list_files` (git's tracked and unignored files, else an
ignore-respecting walk; never `.slop/`). Cut to a token budget, the shallowest
paths stay (a project's top level says most about it) and one line says how
many were left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

TREE_HEADER = "## Repository Files\n"
TREE_INTRO = "(The project's files, supplied by slop-tui, not written by the user.)\n\n"
TREE_ACK = (
    "Noted: I have the list of the repository's files and will read a file before relying on it."
)

CountTokens = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class TreeText:
    """The user text of the pair (empty: nothing to list), the files listed, the total."""

    text: str
    listed: int
    total: int


def tree_text(paths: Sequence[str], budget: int, count_tokens: CountTokens) -> TreeText:
    """The listing within `budget` tokens (see the module docstring)."""
    if budget <= 0 or not paths:
        return TreeText("", 0, len(paths))
    by_depth = sorted(paths, key=lambda p: (p.count("/"), p))

    def text_for(n: int) -> str:
        body = "".join(p + "\n" for p in sorted(by_depth[:n]))
        more = len(paths) - n
        tail = f"({more} more file(s) not listed)\n" if more else ""
        return TREE_HEADER + TREE_INTRO + body + tail

    lo, hi = 0, len(by_depth)
    if count_tokens(text_for(hi)) <= budget:
        lo = hi
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count_tokens(text_for(mid)) <= budget:
                lo = mid
            else:
                hi = mid
    if lo == 0:
        return TreeText("", 0, len(paths))
    return TreeText(text_for(lo), lo, len(paths))


def default_tree_budget(max_input_tokens: int | None) -> int:
    """A thirty-second of the input budget, between 512 and 2,048 tokens."""
    if not max_input_tokens:
        return 1024
    return max(512, min(2048, max_input_tokens // 32))
