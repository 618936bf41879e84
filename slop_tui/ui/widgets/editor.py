"""A `TextArea` that never draws a terminal control sequence.

The scratchpad and the STATE anchor are written by the model, and the prompt
takes whatever is pasted into it (a coloured log), so each can hold ESC, C1
controls or bidi overrides. `TextArea` draws its document as it
is; this subclass swaps each unsafe code point for a one-cell visible stand-in
(␛, U+FFFD) at draw time only. The document — what is saved, copied and sent —
keeps every character. The line keeps its width (cropped to it): a control
character measures zero cells and its stand-in one, so on such a line the
cursor can sit one cell off — a fair price for a screen that cannot be hijacked.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip
from textual.widgets import TextArea

from slop_tui.ui.text import has_unsafe, neutralise_cells


class SafeTextArea(TextArea):
    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if not has_unsafe(strip.text):
            return strip
        segments = [Segment(neutralise_cells(seg.text), seg.style, seg.control) for seg in strip]
        return Strip(segments).crop_extend(0, strip.cell_length, None)
