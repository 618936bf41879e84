"""Untrusted text (model output, tool output, tool arguments, stored names) made safe
for a terminal. Headless: the TUI (`ui/text.py`) and the command line (`cli.py`)
both use this one neutraliser.

The ledger stores every byte intact; only what is drawn or printed is changed, so
a model's reply or a tool's output cannot move the cursor, clear the screen, set
the window title, write the clipboard (OSC 52) or reorder text.
"""

from __future__ import annotations

import re
from typing import IO

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

    With `crlf_as_newline` (the transcript, printed output), CRLF line ends read
    as plain line ends; dialogs that show exact tool arguments keep the ␍.
    """
    if crlf_as_newline:
        text = text.replace("\r\n", "\n")
    if _UNSAFE_RE.search(text) is None:
        return text  # the usual case: finding nothing is 15x faster than translating
    return text.translate(_NEUTRAL)


# For editors (TextArea), where every character must stay one cell wide so the
# cursor lines up with the text: the multi-cell "<U+" hex ">" forms become one U+FFFD each.
_ONE_CELL: dict[int, str] = {c: (v if len(v) == 1 else "\ufffd") for c, v in _NEUTRAL.items()}


def _char_class(codepoints: frozenset[int]) -> str:
    """A regex character class of `codepoints`, runs written as ranges: the class of
    every code point one by one (2,000 surrogates) cost 15 ms to compile at start-up."""
    runs: list[list[int]] = []
    for c in sorted(codepoints):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return (
        "["
        + "".join(
            re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
            for a, b in runs
        )
        + "]"
    )


_UNSAFE_RE = re.compile(_char_class(UNSAFE_CODEPOINTS))


def has_unsafe(text: str) -> bool:
    """True when `text` holds a code point `neutralise` would replace."""
    return _UNSAFE_RE.search(text) is not None


def neutralise_cells(text: str) -> str:
    """Like `neutralise`, but one cell per replaced code point (for editors)."""
    return text.translate(_ONE_CELL)


def escape_json(document: str) -> str:
    """A JSON document with every unsafe code point written as a `\\uXXXX` escape.

    For `json.dumps(..., ensure_ascii=False)` output: it escapes C0 controls but
    passes DEL, C1 controls (U+009B, a one-byte CSI), bidi overrides and lone
    surrogates raw. Those can only occur inside JSON strings, where the escape
    means the same character, so the document parses to exactly the same value.
    """
    return _UNSAFE_RE.sub(lambda m: _json_escape(m.group()), document)


def _json_escape(char: str) -> str:
    """JSON's escape of one code point: `\\u` and four hex digits, or two of them (a
    surrogate pair) for a code point above U+FFFF, the only form JSON has for it."""
    point = ord(char)
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


class TerminalWriter:
    """A text stream whose every write is neutralised: the command line's output
    boundary (stdout and stderr of `exec` and `ask`).

    Text arrives in pieces (a streamed answer), so a CR at the end of one piece is
    held until the next shows whether it starts a CRLF line end; `finish` writes a
    CR still held at the very end (as ␍: shown, never executed).
    """

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._cr = False

    def write(self, text: str) -> int:
        if self._cr:
            text = "\r" + text
            self._cr = False
        if text.endswith("\r"):
            text = text[:-1]
            self._cr = True
        self.stream.write(neutralise(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def finish(self) -> None:
        if self._cr:
            self._cr = False
            self.stream.write(neutralise("\r"))
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:
        return getattr(self.stream, "errors", None)
