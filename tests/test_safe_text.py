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
