"""The rolling window: last N groups, dropped and ungrouped rows excluded."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slop_tui.context.window import groups_in, select_window, window_and_groups
from slop_tui.records import STATUS_DROPPED, STATUS_SUMMARIZED, Message
from tests.test_context_factories import answer, user


def _ids(rows: list[Message]) -> list[int]:
    return [m.id for m in rows]


LEDGER = [
    user(1, 1),
    answer(2, 1),
    user(3, 2),
    answer(4, 2),
    answer(5, None, "auto-fix notice"),  # ungrouped: never in a window
    user(6, 3),
    answer(7, 3),
    user(8, 4),
    answer(9, 4),
]


def test_last_n_groups_in_order() -> None:
    assert _ids(select_window(LEDGER, 2)) == [6, 7, 8, 9]
    assert _ids(select_window(LEDGER, 1)) == [8, 9]


def test_zero_is_full_history_without_ungrouped_rows() -> None:
    assert _ids(select_window(LEDGER, 0)) == [1, 2, 3, 4, 6, 7, 8, 9]


def test_window_larger_than_history() -> None:
    assert _ids(select_window(LEDGER, 50)) == [1, 2, 3, 4, 6, 7, 8, 9]
    assert select_window([], 5) == []


def test_dropped_group_does_not_count() -> None:
    rows = [replace(m, status=STATUS_DROPPED) if m.group_id == 4 else m for m in LEDGER]
    assert _ids(select_window(rows, 2)) == [3, 4, 6, 7]


def test_partly_dropped_or_summarized_group_keeps_its_other_rows() -> None:
    rows = [replace(m, status=STATUS_DROPPED) if m.id == 9 else m for m in LEDGER] + [
        answer(10, 3, status=STATUS_SUMMARIZED)
    ]
    assert _ids(select_window(rows, 2)) == [6, 7, 8]


def test_groups_keep_their_rows_together_in_group_order() -> None:
    # Group 7's turn wrote its call, result and answer after group 8's prompt was
    # stored (two turns at once): the history still reads group by group, so group 8's
    # prompt never sits between group 7's call and its result.
    rows = [user(1, 7), user(2, 8), answer(3, 7), answer(4, 7), answer(5, 8)]
    assert groups_in(rows) == [7, 8]
    assert _ids(select_window(rows, 1)) == [2, 5]
    # Input order does not matter.
    assert _ids(select_window(list(reversed(rows)), 2)) == [1, 3, 4, 2, 5]


def test_lane_filter() -> None:
    rows = [user(1, 1), replace(user(2, 2), lane="side"), answer(3, 1)]
    assert _ids(select_window(rows, 1, lane="main")) == [1, 3]
    assert _ids(select_window(rows, 1, lane="side")) == [2]
    assert _ids(select_window(rows, 0)) == [1, 3, 2]  # group by group


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_window_size(bad: object) -> None:
    with pytest.raises(ValueError, match="window size"):
        select_window(LEDGER, bad)  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------

_ROWS = st.lists(
    st.tuples(
        st.integers(1, 10_000),  # id
        st.one_of(st.none(), st.integers(1, 8)),  # group
        st.sampled_from(["completed", "completed", "tool_call", "dropped", "summarized"]),
    ),
    max_size=40,
    unique_by=lambda row: row[0],
).map(lambda rows: [answer(mid, gid, status=status) for mid, gid, status in rows])


@settings(max_examples=120, deadline=None, database=None)
@given(rows=_ROWS, n=st.integers(0, 10))
def test_window_invariants(rows: list[Message], n: int) -> None:
    out = select_window(rows, n)
    # Group by group, each in id order; nothing hidden, nothing ungrouped.
    keys = [(m.group_id, m.id) for m in out]
    assert keys == sorted(set(keys))
    assert all(m.status not in ("dropped", "summarized") and m.group_id is not None for m in out)
    visible = [m for m in rows if m.status not in ("dropped", "summarized") and m.group_id]
    ranked = sorted({m.group_id for m in visible})
    expected = set(ranked if n == 0 else ranked[-n:])
    # Exactly the last N groups, with every visible row of them.
    assert {m.group_id for m in out} == expected
    assert sorted(_ids(out)) == sorted(m.id for m in visible if m.group_id in expected)


@settings(max_examples=120, deadline=None, database=None)
@given(rows=_ROWS, n=st.integers(0, 10))
def test_window_and_groups_is_one_pass_of_both(rows: list[Message], n: int) -> None:
    """What `assemble` uses: the window and its groups, as the two separate calls give."""
    window, groups = window_and_groups(rows, n)
    assert window == select_window(rows, n)
    assert groups == groups_in(window)
