"""Anchors parsed from a final assistant reply: `### STATE` and `SCRATCHPAD:`.

Both parsers read the text line by line and skip fenced code blocks
(``` or ~~~), so a STATE or scratchpad shown as an example inside code is
never taken for the real thing, and a `#` comment inside a fenced snippet in
the block does not end it.

When a reply holds several blocks, the LAST non-empty one wins: the model is
told to end every reply with its STATE, so an earlier block is usually a
quotation (e.g. of the previous state) and the last one is its latest word.
An empty block (a header with nothing under it) never replaces a stored
anchor, because that would silently erase the model's memory.
"""

from __future__ import annotations

import re

from slop_tui.context.redact import redact_secrets

STATE_HEADER = "### STATE"
SCRATCHPAD_PREFIX = "SCRATCHPAD:"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_STATE_LINE = re.compile(r"^ {0,3}### STATE\b")
# A markdown ATX heading: 1-6 '#' then a space or the end of the line. "#123"
# (an issue number at line start) is text, not a heading.
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t\r\n]|$)")
_RULE = re.compile(r"^ {0,3}-{3,}[ \t]*\r?$")
_SIGNAL = re.compile(r"^SIGNAL:")


def _lines_with_fence_flag(text: str) -> list[tuple[str, bool]]:
    """Each line (with its newline) and whether it lies inside a fenced code block.

    Fence lines themselves count as inside, so they are never taken for a
    header or terminator.
    """
    out: list[tuple[str, bool]] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            out.append((line, True))
        elif fence is not None:
            # A fence closes with the same character, at least as long, nothing after it.
            stripped = line.strip()
            if match and stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            out.append((line, True))
        else:
            out.append((line, False))
    return out


def _state_blocks(text: str) -> list[str]:
    lines = _lines_with_fence_flag(text)
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        line, fenced = lines[i]
        if fenced or not _STATE_LINE.match(line):
            i += 1
            continue
        body = [line]
        i += 1
        while i < len(lines):
            nxt, nxt_fenced = lines[i]
            if not nxt_fenced and (_HEADING.match(nxt) or _RULE.match(nxt)):
                break
            body.append(nxt)
            i += 1
        blocks.append("".join(body).strip())
    return blocks


def without_state(text: str) -> str:
    """`text` without its `### STATE` blocks (each from its header to the next heading
    or `---` line, as `extract_state` reads them), trailing blank lines dropped."""
    lines = _lines_with_fence_flag(text)
    out: list[str] = []
    inside = False
    for line, fenced in lines:
        if not fenced and _STATE_LINE.match(line):
            inside = True
            continue
        if inside and not fenced and (_HEADING.match(line) or _RULE.match(line)):
            inside = False
        if not inside:
            out.append(line)
    return "".join(out).rstrip()


def extract_state(text: str) -> str | None:
    """The model's `### STATE` block, header included, or None.

    A block runs from a `### STATE` line to the next markdown heading line or
    `---` line, whichever comes first (stricter than the reference tool, which
    ignores a `---` when a heading follows later). Blocks with no body are
    skipped; of the rest the last one is returned.

    The block is stored as a STATE version and sent with every later request,
    so secrets in it are redacted (`redact_secrets`).
    """
    for block in reversed(_state_blocks(text)):
        header, _, body = block.partition("\n")
        # "### STATE: Goal: x" on one line still carries content.
        header_rest = header.strip()[len(STATE_HEADER) :].strip(" \t:")
        if body.strip() or header_rest:
            return redact_secrets(block)
    return None


def extract_scratchpad_signal(text: str) -> str | None:
    """The new scratchpad from a `SCRATCHPAD:` signal (seed 004), or None.

    The signal starts at a line beginning with `SCRATCHPAD:` (outside code
    fences); the content may start on the same line. It runs to the end of
    the text, or to a following `### STATE`, `SIGNAL:` or `SCRATCHPAD:` line. The
    prefix is not part of the result, which is stripped. With several
    signals the last non-empty one wins; an empty signal returns None (use
    `/session scratchpad set` to clear the scratchpad on purpose).
    """
    lines = _lines_with_fence_flag(text)
    found: str | None = None
    i = 0
    while i < len(lines):
        line, fenced = lines[i]
        if fenced or not line.startswith(SCRATCHPAD_PREFIX):
            i += 1
            continue
        body = [line[len(SCRATCHPAD_PREFIX) :]]
        i += 1
        while i < len(lines):
            nxt, nxt_fenced = lines[i]
            if not nxt_fenced and (
                _STATE_LINE.match(nxt) or _SIGNAL.match(nxt) or nxt.startswith(SCRATCHPAD_PREFIX)
            ):
                break
            body.append(nxt)
            i += 1
        content = "".join(body).strip()
        if content:
            found = content
    return found
