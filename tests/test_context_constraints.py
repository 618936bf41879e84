"""The rule and value detector (context/constraints.py) on its labelled corpora, and the
anchors it gives a summary: a kept fact keeps its subject."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slop_tui.context.constraints import RULE, VALUE, classify
from slop_tui.context.summaries import extract_anchor_items
from tests.test_context_factories import user

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import constraints as bench  # noqa: E402


def test_the_corpus_is_large_and_varied_and_the_detector_is_measured_on_it():
    corpus = bench.load(bench.CORPUS)
    assert sum(1 for positive, _ in corpus if positive) >= 150
    assert sum(1 for positive, _ in corpus if not positive) >= 150
    r = bench.measure(corpus)
    assert r["precision"] >= 0.97 and r["recall"] >= 0.97, r
    held = bench.measure(bench.load(bench.HELDOUT))
    assert held["positives"] >= 25 and held["negatives"] >= 25
    assert held["precision"] >= 0.9 and held["recall"] >= 0.85, held


def test_a_bad_corpus_line_is_refused(tmp_path):
    bad = tmp_path / "c.txt"
    bad.write_text("X\tnot a label\n")
    with pytest.raises(ValueError, match="bad line"):
        bench.load(bad)


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("The staging port is 8443.", VALUE),
        ("Keep the API backwards compatible.", RULE),
        ("Only use the stdlib for HTTP.", RULE),
        ("No new dependencies please.", RULE),
        ("Leave the tests folder alone.", RULE),
        ("I would rather you did not touch the CI config.", RULE),
        ("Tests have to pass before merging.", RULE),
        ("You may not use threads here.", RULE),
        ("Run the tests.", None),
        ("Can we use threads here?", None),
        ("I think the tests should pass now.", None),
        ("No, I meant the other file.", None),
        ("Only two tests failed.", None),
        ("It checks that nothing crashes rather than that the sums add up.", None),
    ],
)
def test_the_issue_sentences_and_their_look_alikes(sentence, kind):
    assert classify(sentence) == kind


def test_a_kept_value_keeps_its_subject():
    long = (
        "A handover note from the platform team, since they moved the staging cluster last "
        "week and the wiki has not caught up, and the certificates were renewed on the way, "
        "and the old hostnames keep answering for a while: the staging port is 8443 now."
    )
    for text in ("The staging port is 8443.", long):
        anchors = [a.text for a in extract_anchor_items([user(1, 1, text)]) if "8443" in a.text]
        assert anchors and all("staging port" in a for a in anchors), anchors
