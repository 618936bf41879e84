"""Tool-result tiers and the sandwich cut."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slop_tui.context.tiers import (
    TIER_DEGRADED,
    TIER_FULL,
    TIER_INACTIVE,
    TIER_PASTE,
    TruncationSettings,
    apply_tiers,
    tool_result_tiers,
    truncate,
    truncation_hint,
)
from tests.test_context_factories import answer, openai_calls, result, user

HINT_42 = (
    '\n\n... [TRUNCATED. Use query_db(sql="SELECT content FROM messages WHERE id=42") '
    "to see full output] ...\n\n"
)


def test_hint_text_is_exact() -> None:
    assert truncation_hint(42) == HINT_42


def test_short_content_is_untouched() -> None:
    assert truncate("abc", 300, 1) == "abc"
    text = "x" * 300
    assert truncate(text, 300, 1) is text


def test_sandwich_split_is_20_80_of_the_room_left_by_the_hint() -> None:
    content = "".join(chr(ord("a") + i % 26) for i in range(10_000))
    out = truncate(content, 1000, 42)
    avail = 1000 - len(HINT_42)
    head, tail = int(avail * 0.2), avail - int(avail * 0.2)
    assert out == content[:head] + HINT_42 + content[-tail:]
    assert len(out) == 1000


def test_first_and_last_lines_survive() -> None:
    content = "FIRST LINE\n" + "middle\n" * 2000 + "LAST LINE"
    out = truncate(content, 1000, 7)
    assert out.startswith("FIRST LINE") and out.endswith("LAST LINE")
    assert 'WHERE id=7")' in out


@pytest.mark.parametrize("limit", [0, 1, 10, len(HINT_42) - 1, len(HINT_42)])
def test_limit_below_the_hint_keeps_the_hint(limit: int) -> None:
    out = truncate("z" * 5000, limit, 42)
    assert out == HINT_42


def test_a_cut_never_makes_the_text_longer() -> None:
    # Shorter than the hint: the whole text is cheaper than a pointer to it.
    content = "y" * 80
    assert truncate(content, 10, 42) == content


@pytest.mark.parametrize(
    "content",
    [
        "日本語のテキスト" * 500,  # CJK: one code point per character
        "😀🎉🚀🐍" * 700,  # astral-plane emoji (surrogate pairs in UTF-16)
        "ascii " * 200 + "é" * 3000 + " end",
    ],
)
def test_unicode_cuts_on_character_boundaries(content: str) -> None:
    out = truncate(content, 300, 9)
    head, sep, tail = out.partition(truncation_hint(9))
    assert sep and content.startswith(head) and content.endswith(tail)
    assert len(head) + len(tail) == 300 - len(sep)
    out.encode("utf-8")  # no lone surrogate or split sequence
    assert head + tail != ""


def _turn(group: int, first_id: int, n_results: int, size: int = 8000) -> list:
    rows = [user(first_id, group)]
    mid = first_id + 1
    for i in range(n_results):
        rows.append(openai_calls(mid, group, [(f"c{mid}", "read_file", {"i": i})]))
        rows.append(result(mid + 1, group, f"c{mid}", "read_file", "r" * size))
        mid += 2
    return rows


def test_seven_results_in_the_active_group_give_five_full_and_two_degraded() -> None:
    rows = _turn(1, 1, 7)
    out = apply_tiers(rows, TruncationSettings())
    tiers = [t.tier for m, t in zip(rows, out, strict=True) if m.role == "tool"]
    assert tiers == [TIER_DEGRADED] * 2 + [TIER_FULL] * 5
    for m, t in zip(rows, out, strict=True):
        if m.role != "tool":
            assert t == (m.content, None, False)
            continue
        limit = 1000 if t.tier == TIER_DEGRADED else 5000
        assert len(t.text) == limit and t.truncated
        assert truncation_hint(m.id) in t.text


def test_results_of_inactive_groups_get_300() -> None:
    rows = _turn(1, 1, 3) + [answer(8, 1)] + _turn(2, 9, 1, size=100)
    out = apply_tiers(rows, TruncationSettings())
    by_id = {m.id: t for m, t in zip(rows, out, strict=True)}
    for mid in (3, 5, 7):
        assert by_id[mid].tier == TIER_INACTIVE
        assert len(by_id[mid].text) == 300
    # The active group's small result is full-tier and untouched.
    assert by_id[11] == (rows[-1].content, TIER_FULL, False)


def test_a_new_user_prompt_makes_every_result_inactive() -> None:
    rows = _turn(1, 1, 2) + [user(6, 2)]
    out = apply_tiers(rows, TruncationSettings())
    assert [t.tier for t in out if t.tier] == [TIER_INACTIVE, TIER_INACTIVE]


def test_a_result_longer_than_every_tier_stays_recoverable() -> None:
    rows = _turn(1, 1, 1, size=200_000)
    (text, tier, cut) = apply_tiers(rows, TruncationSettings())[-1]
    assert tier == TIER_FULL and cut and truncation_hint(3) in text


def test_custom_settings() -> None:
    s = TruncationSettings(active_full_limit=200, full_fidelity_count=1, head_ratio=0.5)
    rows = _turn(1, 1, 2, size=5000)
    out = apply_tiers(rows, s)
    assert [t.tier for t in out if t.tier] == [TIER_DEGRADED, TIER_FULL]
    # 200 - 103 (hint) = 97 characters left: 48 head, 49 tail.
    head, _, tail = out[-1].text.partition(truncation_hint(5))
    assert (len(head), len(tail)) == (48, 49)


def test_settings_from_mapping() -> None:
    s = TruncationSettings.from_mapping({"inactive_limit": 500, "head_ratio": 0})
    assert s == TruncationSettings(inactive_limit=500, head_ratio=0)
    assert TruncationSettings.from_mapping({}) == TruncationSettings()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"inactive_limit": -1}, "must not be negative"),
        ({"inactive_limit": "300"}, "must be an integer"),
        ({"active_full_limit": 50.5}, "must be an integer"),
        ({"full_fidelity_count": True}, "must be an integer"),
        ({"head_ratio": 1.5}, "between 0 and 1"),
        ({"head_ratio": "0.2"}, "must be a number"),
        ({"inactive": 300}, "unknown truncation setting"),
    ],
)
def test_settings_validation(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TruncationSettings.from_mapping(data)


# --- properties -------------------------------------------------------------------------


# A fixed alphabet (ASCII, newline, CJK, astral emoji, a combining accent, an
# RTL letter) avoids building Hypothesis's Unicode tables on a fresh checkout.
_ALPHABET = st.sampled_from(list("ab \n#-日本語😀🎉\u0301\u05d0\x00"))


@settings(max_examples=250, deadline=None, database=None)
@given(
    content=st.text(alphabet=_ALPHABET, max_size=3000),
    limit=st.integers(0, 2500),
    mid=st.integers(1, 10**9),
    ratio=st.floats(0, 1),
)
def test_truncate_invariants(content: str, limit: int, mid: int, ratio: float) -> None:
    hint = truncation_hint(mid)
    out = truncate(content, limit, mid, ratio)
    assert len(out) <= limit + len(hint)
    assert len(out) <= len(content)
    if out == content:
        return
    head, sep, tail = out.partition(hint)
    assert sep == hint  # the id is always carried
    assert content.startswith(head) and content.endswith(tail)
    assert len(head) + len(tail) < len(content)


def test_tool_result_tiers_are_apply_tiers_of_the_tool_rows_by_id() -> None:
    rows = _turn(1, 1, 3) + [answer(8, 1)] + _turn(2, 9, 7, size=3000)
    s = TruncationSettings(full_fidelity_count=2, active_full_limit=2000)
    by_id = tool_result_tiers(rows, s)
    expected = {
        m.id: t for m, t in zip(rows, apply_tiers(rows, s), strict=True) if m.role == "tool"
    }
    assert by_id == expected
    assert {t.tier for t in by_id.values()} == {TIER_FULL, TIER_DEGRADED, TIER_INACTIVE}
    assert tool_result_tiers([], s) == {}


@pytest.mark.parametrize("size", [0, 1, 99, 100, 101, 102, 103, 104, 250])
def test_truncate_at_the_limit_and_hint_boundaries(size: int) -> None:
    """A text no longer than the limit, or than the hint, is returned as it is."""
    text = "x" * size
    hint = truncation_hint(7)
    for limit in (0, 50, 100, len(hint), 200):
        out = truncate(text, limit, 7)
        if size <= max(limit, len(hint)):
            assert out is text
        else:
            assert hint in out and len(out) == max(limit, len(hint))


def test_a_paste_keeps_the_full_limit() -> None:
    s = TruncationSettings(active_full_limit=4_000)
    assert s.limit_for(TIER_PASTE) == 4_000
