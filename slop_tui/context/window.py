"""The rolling window: the last N groups of a session (seed 000 §1).

A group is one user prompt with every tool call, tool result and answer it
caused. The history is assembled group by group: groups in the order their
prompts were written (the group id is the prompt's id), and a group's rows
together, in id order. Ids of two groups interleave when a turn's rows were
written while another group had been opened (a second process, or an old
ledger from before turns were serialised per session); ordering rows by id
alone then put one turn's tool call and result after the other's prompt in
every later request. (The reference tool ordered by `created_at`,
std_slop.md §3.7.)
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from slop_tui.records import STATUS_DROPPED, STATUS_SUMMARIZED, Message

# Rows in these states were removed from the model's view: `/context drop`
# (reversible) or replaced by a summary. They neither appear nor count as a group.
HIDDEN_STATUSES = frozenset({STATUS_DROPPED, STATUS_SUMMARIZED})

_by_group = attrgetter("group_id", "id")


def is_windowable(msg: Message) -> bool:
    """True when a row may appear in a prompt at all.

    Rows without a group are excluded: the reference tool put them in every
    window forever (std_slop.md §3.7), which we treat as a bug.
    """
    return msg.group_id is not None and msg.status not in HIDDEN_STATUSES


def _eligible(messages: Iterable[Message], lane: str | None) -> list[Message]:
    return [m for m in messages if is_windowable(m) and (lane is None or m.lane == lane)]


def _group_order(rows: list[Message]) -> list[int]:
    """Distinct group ids of rows sorted by group, oldest group first."""
    return list(dict.fromkeys(m.group_id for m in rows))


def groups_in(messages: Iterable[Message], lane: str | None = None) -> list[int]:
    """Distinct group ids of the windowable rows, oldest group first."""
    return _group_order(sorted(_eligible(messages, lane), key=_by_group))


def window_and_groups(
    messages: Iterable[Message], window_size: int, lane: str | None = None
) -> tuple[list[Message], list[int]]:
    """`select_window` and the window's groups (`groups_in` of it), in one pass.

    `window_size == 0` means full history. Dropped, summarized and ungrouped
    rows are excluded and do not count towards N. With `lane` given, only rows
    of that lane are considered.
    """
    if isinstance(window_size, bool) or not isinstance(window_size, int):
        raise ValueError(f"window size must be an integer, got {window_size!r}")
    if window_size < 0:
        raise ValueError(f"window size must be 0 (full history) or more, got {window_size}")
    rows = sorted(_eligible(messages, lane), key=_by_group)
    groups = _group_order(rows)
    if window_size > 0 and len(groups) > window_size:
        groups = groups[-window_size:]
        keep = set(groups)
        rows = [m for m in rows if m.group_id in keep]
    return rows, groups


def select_window(
    messages: Iterable[Message], window_size: int, lane: str | None = None
) -> list[Message]:
    """The rows of the last `window_size` groups, group by group (see the module
    docstring).

    `window_size == 0` means full history. Dropped, summarized and ungrouped
    rows are excluded and do not count towards N. With `lane` given, only rows
    of that lane are considered.
    """
    return window_and_groups(messages, window_size, lane)[0]
