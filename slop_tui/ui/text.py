"""Untrusted text (model output, tool output, tool arguments) made safe for the terminal.

The ledger stores every byte intact; only what is drawn is changed, so a tool
output cannot move the cursor, recolour the screen or reorder text.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline become Unicode control pictures (␛, ␍, ␀);
# DEL becomes ␡; C1 controls (0x9b is a one-byte CSI), bidi overrides and lone
# surrogates (a model's JSON "\ud800" escape: the terminal's UTF-8 encoder would
# fail on it) become a visible "<U+" hex code ">" form, so the user still sees that something was there.
_NEUTRAL: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
_NEUTRAL[0x7F] = "\u2421"
for _c in [
    *range(0x80, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    *range(0xD800, 0xE000),
]:
    _NEUTRAL[_c] = f"<U+{_c:04X}>"


# Every code point `neutralise` replaces: for one-line views (group snippets,
# session names) that turn them into spaces instead.
UNSAFE_CODEPOINTS = frozenset(_NEUTRAL)


def neutralise(text: str, *, crlf_as_newline: bool = True) -> str:
    """Text safe to render: every control but tab and newline made visible.

    With `crlf_as_newline` (the transcript), CRLF line ends read as plain line
    ends; dialogs that show exact tool arguments keep the ␍.
    """
    if crlf_as_newline:
        text = text.replace("\r\n", "\n")
    return text.translate(_NEUTRAL)


# For editors (TextArea), where every character must stay one cell wide so the
# cursor lines up with the text: the multi-cell "<U+" hex ">" forms become one U+FFFD each.
_ONE_CELL: dict[int, str] = {c: (v if len(v) == 1 else "\ufffd") for c, v in _NEUTRAL.items()}
_UNSAFE_RE = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_NEUTRAL)) + "]")


def has_unsafe(text: str) -> bool:
    """True when `text` holds a code point `neutralise` would replace."""
    return _UNSAFE_RE.search(text) is not None


def neutralise_cells(text: str) -> str:
    """Like `neutralise`, but one cell per replaced code point (for editors)."""
    return text.translate(_ONE_CELL)
