"""The command line's JSON escape: every escape parses back to the same code point."""

from __future__ import annotations

import json

from slop_tui import safe_text


def test_the_json_escape_of_any_code_point_parses_back_to_it():
    for point in (0x1B, 0x9B, 0x202E, 0xFFFF, 0x10000, 0xE0041, 0x10FFFF):
        escaped = safe_text._json_escape(chr(point))
        assert escaped.isascii()
        assert json.loads(f'"{escaped}"') == chr(point)


def test_escape_json_keeps_the_value_and_leaves_no_unsafe_character():
    value = {"answer": "a\x9b2Jb\u202ec\x7f", "ok": "plain ✓"}
    document = safe_text.escape_json(json.dumps(value, ensure_ascii=False))
    assert json.loads(document) == value
    assert "\x9b" not in document and "\u202e" not in document and "✓" in document


def test_neutralise_gives_what_translating_every_code_point_gives():
    """Text with nothing to replace is returned as it is; any other is translated."""
    import random

    from slop_tui.safe_text import _NEUTRAL, neutralise

    rnd = random.Random(7)
    unsafe = sorted(_NEUTRAL)
    for _ in range(500):
        chars = [chr(rnd.randrange(0x20, 0x7F)) for _ in range(rnd.randrange(0, 40))]
        for _ in range(rnd.choice((0, 0, 1, 3))):
            chars.insert(rnd.randrange(len(chars) + 1), chr(rnd.choice(unsafe)))
        text = "".join(chars) + rnd.choice(("", "\r\n", "\n", "\t"))
        assert neutralise(text, crlf_as_newline=False) == text.translate(_NEUTRAL)
        assert neutralise(text) == text.replace("\r\n", "\n").translate(_NEUTRAL)
