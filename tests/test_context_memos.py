"""Memo keywords, compound-tag matching and ranking."""

from __future__ import annotations

import pytest

from slop_tui.context.memos import (
    MAX_KEYWORDS,
    STOP_WORDS,
    extract_keywords,
    fts_query,
    latest_user_text,
    rank_memos,
    tag_matches,
)
from slop_tui.records import Memo
from tests.test_context_factories import answer, user


def test_keywords_basic() -> None:
    text = "Please refactor the Database-layer; keep snake_case and src/app.py (about THAT)."
    assert extract_keywords(text) == [
        "refactor",
        "database",
        "layer",
        "keep",
        "snake_case",
        "src/app",
    ]


def test_keywords_split_on_punctuation_and_hyphens_not_underscore_or_slash() -> None:
    assert extract_keywords("arch-decision,api_design/v2:gotcha") == [
        "arch",
        "decision",
        "api_design/v2",
        "gotcha",
    ]


def test_keywords_drop_short_and_stop_words_and_dedupe() -> None:
    assert extract_keywords("the cat would have been there with your memo memo MEMO") == ["memo"]
    assert extract_keywords("") == []
    assert 80 <= len(STOP_WORDS) <= 90
    assert {"about", "after", "because", "been", "before", "would", "your"} <= STOP_WORDS


def test_keywords_are_capped() -> None:
    words = " ".join(f"word{i:03d}" for i in range(100))
    out = extract_keywords(words)
    assert len(out) == MAX_KEYWORDS and out[0] == "word000" and out[-1] == "word031"


def test_unicode_keywords() -> None:
    assert extract_keywords("Überprüfung — naïve “quotes”") == ["überprüfung", "naïve", "quotes"]


@pytest.mark.parametrize(
    ("keyword", "tag", "expected"),
    [
        ("arch", "arch", True),
        ("arch", "arch-decision", True),
        ("arch", "decision-arch", True),
        ("arch", "x-arch-y", True),
        ("arch", "archive", False),
        ("arch", "search-x", False),
        ("arch", "ARCH-Decision", True),
        ("arch-decision", "arch-decision", True),
        ("arch-decision", "big-arch-decision-log", True),
        ("arch-decision", "decision-arch", False),
    ],
)
def test_tag_matches(keyword: str, tag: str, expected: bool) -> None:
    assert tag_matches(keyword, tag) is expected


def _memo(mid: int, tags: tuple[str, ...], created: float = 0.0) -> Memo:
    return Memo(mid, f"memo {mid}", tags, created)


def test_rank_tag_hits_first_then_bm25_then_newest() -> None:
    two_hits = _memo(1, ("database", "arch-decision"))
    one_hit_old = _memo(2, ("database",), created=1)
    one_hit_new = _memo(3, ("db-database",), created=2)
    fts_good = _memo(4, ("other",))
    fts_bad = _memo(5, ())
    irrelevant = _memo(6, ("nothing",))
    candidates = [irrelevant, fts_bad, fts_good, one_hit_old, one_hit_new, two_hits]
    ranked = rank_memos(["database", "arch"], candidates, {4: -3.0, 5: -1.0, 2: -9.0})
    # one_hit_old has a better BM25 score than one_hit_new, which has none.
    assert [m.id for m in ranked] == [1, 2, 3, 4, 5]


def test_rank_limit_and_newest_tiebreak() -> None:
    memos = [_memo(i, ("arch",), created=float(i)) for i in range(1, 9)]
    assert [m.id for m in rank_memos(["arch"], memos)] == [8, 7, 6, 5, 4]
    assert rank_memos(["arch"], memos, limit=0) == []
    assert rank_memos([], memos) == []


def test_fts_query_quotes_terms() -> None:
    assert fts_query(["db", 'say"x', "src/app"]) == '"db" OR "say""x" OR "src/app"'
    assert fts_query([]) == ""


def test_latest_user_text() -> None:
    assert (
        latest_user_text([user(1, 1, "first"), answer(2, 1), user(3, 2, "second"), answer(4, 2)])
        == "second"
    )
    assert latest_user_text([]) == ""
