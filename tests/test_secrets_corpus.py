"""The secret detector against its shipped corpus: every credential shape goes (recall
100 %), at most 1 % of the look-alikes change, and no fragment of a key survives the
anchor extraction of a summary."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from slop_tui.context.redact import REDACTED, contains_secret, redact_secrets
from slop_tui.context.summaries import complete_summary, extract_anchors, extractive_summary
from slop_tui.records import Message

CORPUS_PATH = Path(__file__).parent / "data" / "secrets_corpus.toml"
CORPUS = tomllib.loads(CORPUS_PATH.read_text(encoding="utf-8"))
POSITIVE = CORPUS["positive"]
NEGATIVE = CORPUS["negative"]
FRAGMENT = 10  # no piece of a secret this long may survive


def leaks(secret: str, text: str) -> list[str]:
    """The pieces of `secret` (whole, or FRAGMENT-long windows) found in `text`."""
    if len(secret) <= FRAGMENT:
        return [secret] if secret in text else []
    return [
        secret[i : i + FRAGMENT]
        for i in range(len(secret) - FRAGMENT + 1)
        if secret[i : i + FRAGMENT] in text
    ][:1]


def test_the_corpus_is_big_enough() -> None:
    assert len(POSITIVE) >= 150 and len(NEGATIVE) >= 95
    assert len({p["name"] for p in POSITIVE}) == len(POSITIVE)


@pytest.mark.parametrize("case", POSITIVE, ids=[p["name"] for p in POSITIVE])
def test_every_credential_shape_is_redacted(case: dict) -> None:
    out = redact_secrets(case["text"])
    assert not leaks(case["secret"], out), out
    assert REDACTED in out and contains_secret(case["text"])
    assert redact_secrets(out) == out  # idempotent


@pytest.mark.parametrize("case", NEGATIVE, ids=[n["name"] for n in NEGATIVE])
def test_look_alikes_survive(case: dict) -> None:
    assert redact_secrets(case["text"]) == case["text"]


def project_lines() -> list[str]:
    """The negative corpus of ordinary code and prose: every non-empty line of this
    project's source and docs (bench/security.py reports the same figure)."""
    root = Path(__file__).resolve().parent.parent
    files = [*sorted((root / "slop_tui").rglob("*.py")), *sorted((root / "docs").glob("*.md"))]
    return [
        line for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def test_at_most_one_percent_of_the_projects_own_lines_change() -> None:
    lines = project_lines()
    changed = [line for line in lines if contains_secret(line)]
    assert len(lines) > 20_000
    assert len(changed) <= 0.01 * len(lines), changed[:20]


def test_recall_and_false_positive_rate() -> None:
    missed = [p["name"] for p in POSITIVE if leaks(p["secret"], redact_secrets(p["text"]))]
    changed = [n["name"] for n in NEGATIVE if redact_secrets(n["text"]) != n["text"]]
    assert missed == []  # recall 100 %
    assert len(changed) <= 0.01 * len(NEGATIVE), changed


def _message(i: int, role: str, text: str) -> Message:
    return Message(id=i, session="s", group_id=i, lane="main", role=role, content=text)


@pytest.mark.parametrize("role", ["user", "assistant", "tool"])
def test_no_fragment_survives_anchors_and_summaries(role: str) -> None:
    """A key split by its hyphens used to live on as an anchor (`sk-proj-AB…-CD…`: the
    body after a hyphen is an identifier) that redaction no longer recognised."""
    messages = [_message(i, role, p["text"]) for i, p in enumerate(POSITIVE, 1)]
    anchors = extract_anchors(messages)
    stored = complete_summary(extractive_summary(messages), anchors)
    for p in POSITIVE:
        assert not leaks(p["secret"], stored), p["name"]
        assert not any(leaks(p["secret"], a) for a in anchors), p["name"]
