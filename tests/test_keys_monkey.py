"""Sentences typed after random clicks land in the prompt whole and change nothing
(tests/keys_monkey.py; bench/keys_monkey.py runs it for thousands of steps)."""

from __future__ import annotations

from tests import test_app
from tests.keys_monkey import KeysMonkey

project = test_app.project


async def test_sentences_after_random_clicks_make_no_edit(project):
    result = await KeysMonkey(project, seed_=7).run(20)
    assert result.steps == 20
    assert result.violations == []
