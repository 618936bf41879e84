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
    """What the app imports before its first frame, and the modules of the engine's
    patterns (the secret redaction, the handoffs), compile none of them at import
    (their compilation was ~50 ms of CPU at every start)."""
    code = (
        "import gc, slop_tui.workspace, slop_tui.context.redact, slop_tui.continuity.handoff\n"
        "from slop_tui.context.regex import LazyPattern\n"
        "found = [o for o in gc.get_objects() if isinstance(o, LazyPattern)]\n"
        "print(len(found), sum('search' in vars(o) for o in found))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    made, compiled = int(out[0]), int(out[1])
    assert made >= 50 and compiled == 0


class _Table(dict):
    """A table as `CacheFile` is one: bytes by key."""

    def put(self, key, data):
        self[key] = data


@pytest.fixture
def kept():
    from slop_tui.context import regex

    table = _Table()
    assert regex.keep_compiled(table)
    yield table
    regex.keep_compiled(None)


def _no_parsing(monkeypatch):
    def parse(*args, **kwargs):
        raise AssertionError("parsed: not made from the kept code")

    monkeypatch.setattr(re._parser, "parse", parse)


def test_a_kept_pattern_is_made_from_its_code_and_equals_the_compiled_one(kept, monkeypatch):
    from slop_tui.context.regex import compiled

    source = r"(?P<key>[a-z]+)=(?P<value>\d+)|(x)"
    first = compiled(source, re.IGNORECASE)
    assert first == re.compile(source, re.IGNORECASE)
    assert list(kept) == [(source, int(re.IGNORECASE), False)]
    _no_parsing(monkeypatch)
    again = compiled(source, re.IGNORECASE)  # from the table now
    assert again == re.compile(source, re.IGNORECASE)
    assert (again.flags, again.groups, again.groupindex) == (first.flags, 3, first.groupindex)
    assert again.sub(r"\g<value>", "A=1; b=22") == "1; 22"
    pattern = lazy(source, re.IGNORECASE)  # what the context engine's modules hold
    assert pattern.search("x").group(3) == "x"


@pytest.mark.parametrize(
    "damage",
    [b"not marshal", b"\xe9\x02\x00\x00\x00", "wrong shape"],
    ids=["bytes", "int", "shape"],
)
def test_an_entry_that_does_not_make_a_pattern_is_compiled_again_and_replaced(kept, damage):
    import marshal

    from slop_tui.context.regex import compiled

    source = r"^\s*(?:[-*]\s+)?[A-Za-z][A-Za-z ]{0,30}:\s*"
    key = (source, 0, False)
    kept[key] = marshal.dumps((0, [1, 2, 3])) if damage == "wrong shape" else damage
    assert compiled(source) == re.compile(source)
    assert kept[key] != damage and marshal.loads(kept[key])[1]  # the generated code again
    assert compiled(source) == re.compile(source)


def test_a_bad_pattern_fails_as_re_compile_does_and_keeps_nothing(kept):
    with pytest.raises(re.error):
        lazy(r"(unclosed").search("x")
    assert not kept


def test_the_app_keeps_the_patterns_code_in_the_user_cache_for_the_next_start(tmp_path):
    """One start compiles the patterns its first plan uses and writes their code with
    the dataclass code; the next start makes them from it, without parsing one."""
    use = (
        "import sys, re\n"
        "from pathlib import Path\n"
        "from slop_tui.cli import keep_compiled_patterns\n"
        "assert keep_compiled_patterns(Path(sys.argv[1]))\n"
        "from slop_tui.context import summaries\n"
        "if sys.argv[2] == 'again':\n"
        "    def parse(*a, **k): raise AssertionError('parsed')\n"
        "    re._parser.parse = parse\n"
        "found = summaries._STATE_LABEL.sub('', 'Technical Anchors: port 8443')\n"
        "assert summaries._STATE_ITEM_BREAK.split('a, b; c') == ['a', 'b', 'c']\n"
        "from slop_tui.codecache import save_code_cache\n"
        "save_code_cache()\n"
        "print(found)\n"
    )
    for run in ("first", "again"):
        out = subprocess.run(
            [sys.executable, "-c", use, str(tmp_path), run],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out == "port 8443\n"
        assert [p.name.startswith("regex-code-") for p in tmp_path.iterdir()] == [True]


def test_until_turned_off_every_pattern_re_compiles_is_made_from_the_kept_code(tmp_path):
    """The libraries' patterns (compiled as Textual, Rich and the standard library are
    imported) are kept too: the next start imports Textual without parsing one. Once
    turned off (the app's first screen filled), a pattern is compiled by `re` again
    and not kept; one compiled in another thread (the repository map's ignore rules,
    from the project) is never kept."""
    use = (
        "import sys, re\n"
        "from pathlib import Path\n"
        "from slop_tui.cli import keep_compiled_patterns\n"
        "from slop_tui.codecache import save_code_cache\n"
        "from slop_tui.context import regex\n"
        "assert keep_compiled_patterns(Path(sys.argv[1]))\n"
        "if sys.argv[2] == 'again':\n"
        "    real = re._parser.parse\n"
        "    def parse(*a, **k): raise AssertionError('parsed')\n"
        "    re._parser.parse = parse\n"
        "import textual.app, textual.css.tokenize\n"
        "assert re.compile(r'(?P<a>x+)y').match('xxy').group('a') == 'xx'\n"
        "assert re.compile(rb'\\d+').match(b'12')  # a bytes pattern, as platform's\n"
        "import threading\n"
        "t = threading.Thread(target=re.compile, args=('in another thread',))\n"
        "t.start(); t.join()\n"
        "if sys.argv[2] == 'again':\n"
        "    re._parser.parse = real\n"
        "    try:\n"
        "        re.compile('(unclosed')\n"
        "    except re.error:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError('a bad pattern compiled')\n"
        "    regex.stop_keeping_every_pattern()\n"
        "    assert re.compile('after the first screen').match('after the first screen')\n"
        "save_code_cache()\n"
    )
    for run in ("first", "again"):
        done = subprocess.run(
            [sys.executable, "-c", use, str(tmp_path), run], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    import marshal

    (table,) = tmp_path.iterdir()
    keys = marshal.loads(table.read_bytes())
    assert len(keys) > 30  # Textual's and the standard library's
    assert ("(?P<a>x+)y", 0, False) in keys and (rb"\d+", 0, True) in keys
    assert not any(
        k[0] in ("(unclosed", "after the first screen", "in another thread") for k in keys
    )


def test_a_text_pattern_and_its_bytes_twin_are_kept_apart(kept):
    """ "x" and b"x" hash alike: keyed by text and flags only, one was looked up with
    the other (a BytesWarning under `python -bb`, and the wrong type made)."""
    from slop_tui.context.regex import compiled, valid_key

    text, data = compiled("ab+c"), compiled(b"ab+c")  # type: ignore[arg-type]
    assert text.pattern == "ab+c" and data.pattern == b"ab+c"
    assert set(kept) == {("ab+c", 0, False), (b"ab+c", 0, True)}
    assert valid_key(("ab+c", 0, False)) and valid_key((b"ab+c", 0, True))
    assert not valid_key(("ab+c", 0, True)) and not valid_key(("ab+c", 0))
