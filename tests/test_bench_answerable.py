"""bench/answerable.py: a fact counts when subject and value are together, and the later
value of a corrected fact wins."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

from slop_tui.context.prompt import (
    KIND_SUMMARY,
    LAYER_STATE,
    LAYER_SUMMARY,
    PLACEMENT_PINNED,
    Layer,
    Prompt,
    PromptMessage,
)

_SPEC = importlib.util.spec_from_file_location(
    "answerable", Path(__file__).resolve().parent.parent / "bench" / "answerable.py"
)
assert _SPEC is not None and _SPEC.loader is not None
answerable = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("answerable", answerable)  # dataclasses look their module up by name
_SPEC.loader.exec_module(answerable)

Fact, Section = answerable.Fact, answerable.Section
check_fact, prompt_sections, units = (
    answerable.check_fact,
    answerable.prompt_sections,
    answerable.units,
)

TIMEOUT = Fact(
    "timeout",
    "47 s",
    ("read timeout",),
    sentence="The gateway client should use a read timeout of 47 s.",
)
RETRY = Fact(
    "retry-window",
    "90 minutes",
    ("retry window",),
    sentence="Correction on the webhook retry window: it is 90 minutes now.",
    superseded=("45 minutes",),
)


def _verdict(fact, *texts, chronological=False):
    return check_fact(fact, [Section(f"s{i}", t, chronological) for i, t in enumerate(texts)])


def test_a_bare_value_is_present_but_not_answerable() -> None:
    v = _verdict(TIMEOUT, "## Anchors kept verbatim\n- [number/1] 47 s\n- BILL-4412\n")
    assert v.present and not v.answerable and v.where == ()


def test_subject_and_value_on_one_line_or_bullet_are_answerable() -> None:
    assert _verdict(TIMEOUT, "- gateway read timeout: 47 s").answerable
    # A bullet's indented continuation line belongs to it.
    assert _verdict(TIMEOUT, "- the gateway read timeout\n  is 47 s\n- other").answerable
    # A separate line is not the same unit.
    assert not _verdict(TIMEOUT, "the gateway read timeout\nis 47 s").answerable
    # A blank line ends the bullet.
    assert not _verdict(TIMEOUT, "- the read timeout\n\n  47 s").answerable


def test_the_planted_sentence_counts_whatever_its_wrapping() -> None:
    text = "Earlier: THE GATEWAY CLIENT should use a\nread timeout of 47 s. Thanks."
    v = _verdict(TIMEOUT, text)
    assert v.answerable and v.where == ("s0",)


def test_subject_phrases_match_whole_words_and_ignore_separators() -> None:
    api = Fact("port", "48213", ("API",))
    assert not _verdict(api, "rapid reload on 48213").answerable
    assert _verdict(api, "the API listens on 48213").answerable
    assert _verdict(TIMEOUT, "READ_TIMEOUT = 47 s").answerable
    assert _verdict(TIMEOUT, "read-timeout: 47 s").answerable
    units_ = units("- a\n  b\nc\n\n  d\n1. e")
    assert units_ == ["- a\n  b", "c", "  d", "1. e"]


def test_an_earlier_value_in_a_list_is_presented_as_current() -> None:
    anchors = "- The webhook retry window is 45 minutes.\n- webhook retry window: 90 minutes\n"
    # A list that is not the conversation (STATE, memos), or is not in time order (a
    # summary's anchors): the two items leave the model to guess.
    assert _verdict(RETRY, anchors).stale and not _verdict(RETRY, anchors).answerable
    listed = [Section("anchors", anchors, chronological=True, ordered=False)]
    assert check_fact(RETRY, listed).stale
    # In the conversation, one after the other, the later one wins.
    assert check_fact(RETRY, [Section("history", anchors, chronological=True)]).answerable


def test_a_later_correction_in_the_conversation_wins() -> None:
    history = [
        Section("history:user", "The webhook retry window is 45 minutes.", True),
        Section("history:assistant", "Noted.", True),
        Section("history:user", RETRY.sentence, True),
    ]
    v = check_fact(RETRY, history)
    assert v.answerable and not v.stale
    # The other way round the earlier value is the last word.
    v = check_fact(RETRY, list(reversed(history)))
    assert v.stale and not v.answerable


def test_an_earlier_value_marked_as_old_is_not_presented_as_current() -> None:
    assert _verdict(RETRY, "- retry window: 90 minutes (was 45 minutes)").answerable
    assert _verdict(RETRY, "- retry window 90 minutes, not 45 minutes").answerable
    assert _verdict(
        RETRY, "- retry window 45 minutes was replaced\n- retry window 90 minutes"
    ).answerable
    # Without a marker the earlier value in a separate bullet is stale.
    assert not _verdict(RETRY, "- retry window 45 minutes\n- retry window 90 minutes").answerable


def test_prompt_sections_follow_the_request() -> None:
    summary = (
        "## Summary of earlier conversation\nWork went on.\n\n"
        "## Anchors kept verbatim\n- [number/1] The webhook retry window is 45 minutes.\n"
    )
    prompt = Prompt(
        layers=(
            Layer(LAYER_STATE, "### STATE\nGoal: x\n", 5),
            Layer(LAYER_SUMMARY, summary, 30, PLACEMENT_PINNED),
        ),
        messages=(
            PromptMessage("user", summary, 30, kind=PLACEMENT_PINNED),
            PromptMessage("user", RETRY.sentence, 10, message_id=9),
            PromptMessage("user", "[summary of #1..#3] old talk", 5, kind=KIND_SUMMARY),
        ),
    )
    secs = prompt_sections(prompt)
    assert [(s.name, s.chronological, s.ordered) for s in secs] == [
        ("layer:state", False, True),
        ("message:pinned", True, True),
        ("message:pinned:anchors", True, False),
        ("message:pinned", True, True),
        ("history:user", True, True),
        ("message:summary", True, True),
    ]
    # The summary of the earlier conversation keeps the earlier value; the correction
    # comes later in the conversation, so it wins.
    v = check_fact(RETRY, secs)
    assert v.answerable and not v.stale and v.where == ("history:user",)
    # The same earlier value in STATE, which claims to be current, is stale.
    stale_state = replace(prompt, layers=(Layer(LAYER_STATE, "retry window: 45 minutes", 5),))
    assert check_fact(RETRY, prompt_sections(stale_state)).stale
