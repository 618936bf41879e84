"""Patterns compiled when first used (slop_tui/context/regex.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from slop_tui.context.regex import lazy


def test_a_lazy_pattern_matches_as_the_compiled_one_and_compiles_once_used():
    source = r"(?P<key>[a-z]+)=(?P<value>\d+)"
    pattern = lazy(source, re.IGNORECASE)
    compiled = re.compile(source, re.IGNORECASE)
    assert pattern.pattern == source and "search" not in vars(pattern)  # not compiled yet
    text = "A=1, bb=22; C=x"
    assert pattern.search(text).group("key") == "A"
    assert "search" in vars(pattern)  # compiled at the first use, bound from then on
    assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in compiled.finditer(text)]
    assert pattern.sub(r"\g<value>", text) == compiled.sub(r"\g<value>", text)
    assert pattern.fullmatch("k=5") and not pattern.match(";k=5")
    assert pattern.split(text) == compiled.split(text)
    assert pattern.flags == compiled.flags and pattern.groupindex == compiled.groupindex
    assert pattern.groups == 2


def test_a_bad_pattern_fails_at_its_first_use():
    pattern = lazy(r"(unclosed")
    with pytest.raises(re.error):
        pattern.search("x")


def test_the_context_engine_compiles_no_pattern_at_import():
    """What the app imports before its first frame compiles none of the engine's
    patterns (their compilation was ~50 ms of CPU at every start)."""
    code = (
        "import gc, slop_tui.workspace\n"
        "from slop_tui.context.regex import LazyPattern\n"
        "found = [o for o in gc.get_objects() if isinstance(o, LazyPattern)]\n"
        "print(len(found), sum('search' in vars(o) for o in found))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    made, compiled = int(out[0]), int(out[1])
    assert made >= 50 and compiled == 0
