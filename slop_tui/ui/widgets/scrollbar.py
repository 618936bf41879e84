"""A vertical scrollbar drawn line by line, for the panes that scroll at every key.

Textual's `ScrollBar` renders itself through Rich (`ScrollBarRender`, a `Segments`
of one segment a row) and repaints itself whole whenever its position or the
window's sizes change: every row of the bar goes through Rich and through the
widget's line styling (`StylesCache`) again at every scroll, though a scroll
changes the thumb's few rows only. `LineScrollBar` draws the same rows
(`ScrollBarRender.render_bar`, Textual's own geometry and styles) with a
`render_line` of its own, each distinct row rendered once through Textual's
pipeline and kept, and when its position or sizes change it repaints only the
rows whose segment differs from the one drawn there.

A widget takes it for its vertical bar with `LineScrollBars` among its bases.
"""

from __future__ import annotations

from rich.color import Color
from rich.segment import Segment, Segments
from textual.geometry import Region
from textual.reactive import Reactive
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.visual import Visual, visualize

from slop_tui.ui import textual_fixes

_ROW_STRIPS_KEPT = 64  # distinct rows kept: a handful of kinds, per width and style


class LineScrollBar(ScrollBar):
    """A vertical `ScrollBar` whose rows are drawn one by one and repainted only where
    they change (see the module's docstring). Its cells are Textual's."""

    # Not `repaint`: a change repaints the rows it changes (`_repaint_changed_rows`).
    window_virtual_size: Reactive[int] = Reactive(100, repaint=False)
    window_size: Reactive[int] = Reactive(0, repaint=False)
    position: Reactive[float] = Reactive(0, repaint=False)

    def __init__(self, name: str | None = None, *, thickness: int = 1) -> None:
        super().__init__(vertical=True, name=name, thickness=thickness)
        self._rows_key: tuple | None = None
        self._rows: list[Segment] = []
        self._drawn: dict[int, Segment] = {}  # row -> the segment its cached line shows
        self._strips: dict[tuple, Strip] = {}

    def watch_window_virtual_size(self) -> None:
        self._repaint_changed_rows()

    def watch_window_size(self) -> None:
        self._repaint_changed_rows()

    def watch_position(self) -> None:
        self._repaint_changed_rows()

    def bar_rows(self) -> list[Segment]:
        """The bar's segment on each row, as Textual's renderer draws them
        (`ScrollBarRender.__rich_console__` at this widget's size)."""
        renderer = self.render()
        width, height = self.size
        key = (
            width,
            height,
            renderer.virtual_size,
            renderer.window_size,
            renderer.position,
            renderer.style,
        )
        if key != self._rows_key:
            style = renderer.style
            bar = renderer.render_bar(
                size=height,
                window_size=renderer.window_size,
                virtual_size=renderer.virtual_size,
                position=renderer.position,
                vertical=True,
                thickness=width,
                back_color=style.bgcolor or Color.parse("#555555"),
                bar_color=style.color or Color.parse("bright_magenta"),
            )
            self._rows_key = key
            self._rows = list(bar.segments)
        return self._rows

    def _repaint_changed_rows(self) -> None:
        if not self.is_mounted or not self.size:
            return
        rows = self.bar_rows()
        drawn = self._drawn
        width = self.size.width
        changed = [y for y, segment in enumerate(rows) if drawn.get(y) != segment]
        start = 0
        for i, y in enumerate(changed):  # one region for each run of rows
            if i + 1 == len(changed) or changed[i + 1] != y + 1:
                self.refresh(Region(0, changed[start], width, y - changed[start] + 1))
                start = i + 1

    def render_lines(self, crop: Region) -> list[Strip]:
        self.bar_rows()  # once a draw: the rows at this state and style (render_line's)
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        rows = self._rows
        width = self.size.width
        base = self.visual_style
        if y >= len(rows):
            return Strip.blank(width, base.rich_style)
        segment = rows[y]
        self._drawn[y] = segment
        key = (segment, width, base)
        strip = self._strips.get(key)
        if strip is None:
            if len(self._strips) >= _ROW_STRIPS_KEPT:
                self._strips.clear()
            # The row alone through Textual's pipeline (`Widget._render_content`).
            visual = visualize(self, Segments([segment], new_lines=True))
            strip = self._strips[key] = Visual.to_strips(self, visual, width, 1, base)[0]
        return strip


class LineScrollBars:
    """Mixin for a scrollable widget: its vertical scrollbar is a `LineScrollBar`
    (made as Textual's `Widget.vertical_scrollbar` makes its own)."""

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        return textual_fixes.vertical_scrollbar_of(
            self,  # type: ignore[arg-type]
            lambda: LineScrollBar(name="vertical", thickness=self.scrollbar_size_vertical),  # type: ignore[attr-defined]
        )
