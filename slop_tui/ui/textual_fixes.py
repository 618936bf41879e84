"""Fixes to Textual (8.2.8) that the workspace depends on.

Two crashes, the first found by the monkey (tests/monkey.py), the second by a
review (resizing the terminal down and up again with the first-run screen open):

- `TextArea._undo_batch` (and `_redo_batch`) refresh the widget's size
  before they put the cursor back. When the undone edit removed the lines
  that needed the vertical scrollbar, hiding the scrollbar scrolls to the
  cursor, which still points past the shortened document: `ValueError: The
  document line index 1 is out of bounds` ended the app (ctrl+z after a
  multi-line paste in the prompt). Scrolling to a cursor outside the document
  is skipped; the undo puts the cursor back right after and scrolls then.
- `TextArea.render_line` wraps an empty area's placeholder to the area's
  content width, and Rich's `chop_cells` divides by it: a width of 0 (the
  prompt squeezed out in a layout on the way to a new terminal size) raised
  `ValueError: range() arg 3 must not be zero` and ended the app. With no
  room the placeholder's line is drawn blank.

Two fixes to Textual's frame work that the workspace depends on for its key
latency, found profiling bench/tui.py; each is a pure saving -- the screen is
drawn exactly as before:

- `Compositor.reflow` rebuilds the map of every widget on the screen but left
  the "full map invalidated" flag as it found it. `Screen._refresh_layout`
  sets that flag just before (any repainted widget off screen does), so the
  first `Widget.region` lookup during or after the reflow -- every scrollable
  widget whose size the layout updates asks for one, and so does a scrollbar
  refreshed while the layout arranges it -- arranged the whole screen a second
  time (10-20 ms in the frame after a turn). During the reflow such lookups
  read the previous map; after it the map is current. The flag is cleared
  for both.
- `ScrollView._size_updated` compares the compositor's virtual size (the
  viewport) with the view's own (its content): they always differ, so every
  full layout re-ran `_scroll_update` for every ScrollView on the screen (the
  group list, the prompt, the preview) and repainted their scrollbars. While a
  reply streams that is every update. The call is skipped when nothing it
  reads has changed since the last one.

One fix to Textual's start-up work, found profiling bench/screen.py:

- `TextArea._on_resize` re-wraps the whole document on every resize, a
  height change included, though wrapping depends only on the width. The
  context preview holds the whole next request (tens of thousands of
  characters, soft-wrapped: about 1.8 ms per 1,000) and its height changes
  while the first screen is filled (the STATE pane above it gets its
  text): a third of the preview's start-up cost. The wrap is kept when the
  wrap width and tab width are those it was made for (`WrappedDocument`'s
  `_width` and `_tab_width`); the virtual size is refreshed as before.

One use of Textual's repaint batching, for the command's first screen:

- `hold_frames(app)` / `release_frames(app)` enter and leave the batch that
  `App.batch_update()` wraps (`App._begin_batch`, `App._end_batch`: while
  `App._batch_count` is above zero the screen neither lays out nor writes a
  frame). The context manager cannot span the workspace's opening, which is a
  worker that awaits the ledger; the two halves are called directly.
  A layout made meanwhile (the screen's resume and resize events lay out
  regardless of the batch) still queued `Screen._compositor_refresh`, which
  renders every widget for a frame `App._display` then drops: while held,
  that render is skipped and `Screen._repaint_required` set instead, so the
  screen's idle handler draws once the hold ends.

One saving in a screen's start:

- `Screen._on_screen_resume` restyles every node of the screen
  (`update_node_styles`) when the `ScreenResume` event says `refresh_styles`,
  which the first resume of every screen does. The nodes of a screen resumed
  for the first time were styled when they were mounted, moments before,
  and a CSS change since then restyles them through `App.refresh_css` anyway:
  the pass is 40 % of the CSS work of the workspace's start (116 of 280
  `Stylesheet.apply` calls, about 20 ms). A screen's first resume skips it;
  every later one (after a dialog closes) is Textual's.

One saving in `TextArea`'s soft wrap (the context preview loads the whole next
request, about 70,000 characters in 1,000 lines, at every start and turn):

- `WrappedDocument.wrap` calls `get_tab_widths` and `compute_wrap_offsets`
  (names it imports into `textual.document._wrapped_document`) for every
  line. For a line of printable ASCII only -- no tab, no control character,
  every character one cell -- both have a shorter form: one section with no
  tab, and breaks found by walking the same word chunks with widths that are
  lengths. `fast_tab_widths` and `fast_wrap_offsets` give exactly what the
  originals give (tests/test_textual_fixes.py compares them on random text)
  in a third of the time; any other line goes to the originals.

One saving in a scroll of a Line API list (the group list, one line per group):

- `ScrollView.watch_scroll_y` repaints the whole widget, and the repaint marks
  every line dirty in the widget's `StylesCache`: a move of the highlight past
  the visible rows sent all ~36 of the list's lines through Textual's line
  styling again (border, padding, background: 5-7 ms, most of it creating
  `Strip`s), though all but one of them were styled a moment before, one row
  away. `scroll_keeping_lines` moves the styled lines to their new rows
  (`StylesCache._cache`, `StylesCache._dirty_lines`, `Widget.content_offset`);
  the rows the scroll exposed are styled as before, and the widget is repainted
  whole as before.

Three fixes to Textual's frame pacing, found tracing bench/screen.py's keys
while a reply streams (bench/results/2026-11-26-startup-and-keys.md); the
screen is drawn as before, only sooner or with less work:

- `Timer._run` (every interval timer; the screen's frame timer is one) skips
  the ticks it missed while it was late or paused, and skipped one too many:
  after a skip the next tick was 1-2 intervals away instead of at the next
  point of its grid. The frame timer is paused between frames and its first
  tick after a pause comes at once, so the frame after that one -- where a key
  typed just after a streamed update is drawn -- came 17-33 ms later, not
  at most 17 ms. The skip now lands on the next grid point.
- `Screen._refresh_layout` (a full reflow) hands every widget its new size
  through `Widget._size_updated`, which sets the widget's `virtual_size`
  reactive, and that reactive asks for a layout: every widget whose size the
  reflow changed (a growing live answer, its group, the conversation, and at
  start every widget on the screen) made the screen lay itself out a second
  time: 5-10 ms in the frame after each streamed update, 20-30 ms in the
  first screen, with nothing left to change -- the reflow placed each widget
  from the height it gives for the width it is given. So a widget placed for
  the first time, or at the width it already had (only heights changed: a
  streamed answer grew, the panes were filled), stores the size the reflow gave
  it without asking for another layout, as Textual already does for the
  widgets a scroll exposes (`reflow_visible`). A placed widget given a new
  width (a resize, a side pane toggled) asks as before, so a widget that
  renders from its previous size is right after it. A widget whose content
  changes with its size does so on the `Resize` event, which is sent as
  before, and asks for its own layout then; a scrollbar shown or hidden is a
  layout reactive of its own. One exception: Textual keeps an
  anchored view (`Widget.anchor`: the conversation, following the newest
  lines) at its bottom by reading the view's *previous* container size while
  it arranges it, so a view that the reflow made shorter or taller (the error
  banner shown, the terminal resized) is laid out once more, where its
  scroll comes out right. A widget that renders from its width must take the
  width from `get_content_height`, not from its previous `size` or Textual's
  cached visual (the token gauge's bar does).
- `Compositor.reflow_visible` (the layout of a scroll) finds what to repaint
  by comparing the new map of the visible widgets with the previous one; right
  after a full reflow there is none, and every widget on the screen counted
  as moved: the first scroll after each streamed update, or a page key after
  any layout, repainted the whole screen (a full update, 3-5 ms more than the
  pane that moved). The map the full reflow built, which is what the screen
  shows, is compared with instead, as long as nothing has rebuilt it since.

One saving in every line drawn:

- `Strip.__init__` makes seven `FIFOCache`s for every strip (crop, divide,
  style, filter, ...), though most strips are drawn once and never cropped or
  restyled: 5,500 strips and 38,000 caches in the workspace's first screen,
  six times the cost of the strip itself. The caches are made when first used
  (`Strip.__getattr__` for an unset slot, as Python calls it): the same cache,
  sizes and results, only later. Relies on `Strip.__slots__` naming exactly
  the attributes `__init__` sets.

One saving in every widget's mount:

- `Stylesheet._process_component_classes` styles each of a widget's component
  classes (`TextArea`'s cursor, gutter, selection...; the group list's marks)
  as it is mounted: a virtual node per class, each a full `Stylesheet.apply`.
  The workspace's first screen has 72 of them, 40 % of its CSS work, and draws
  only 42 (a hidden completion list, a scratchpad editor not open, the marks no
  row shows yet). At a widget's first styling each is made when first read
  (`DOMNode.get_component_styles`, through a mapping that styles the class on
  a miss), by the same stylesheet, as Textual would at that moment; a later
  restyle (a CSS, class or focus change) is Textual's, which makes them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import textual.document._wrapped_document as _wrapped_document
from textual import _time
from textual._compositor import Compositor
from textual.cache import FIFOCache
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from textual.geometry import Offset, Size
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import EventTargetGone, Timer
from textual.widget import Widget
from textual.widgets import TextArea

_reflow = Compositor.reflow
_reflow_visible = Compositor.reflow_visible
_size_updated = ScrollView._size_updated
_scroll_cursor_visible = TextArea.scroll_cursor_visible
_text_area_line = TextArea.render_line
_text_area_resized = TextArea._on_resize
_compositor_refresh = Screen._compositor_refresh
_screen_resumed = Screen._on_screen_resume
_get_tab_widths = _wrapped_document.get_tab_widths
_compute_wrap_offsets = _wrapped_document.compute_wrap_offsets
_WORD_CHUNK = re.compile(r"\S+\s*|\s+")  # textual._wrap's chunks: a word and its spaces
_refresh_layout = Screen._refresh_layout
_widget_size_updated = Widget._size_updated
_reflowing = [0]  # > 0 while Screen._refresh_layout runs


def _scroll_to_a_cursor_inside(self: TextArea, center: bool = False, animate: bool = False):  # type: ignore[no-untyped-def]
    row, column = self.selection.end
    document = self.document
    if row >= document.line_count or column > len(document[row]):
        return Offset()  # mid-undo: the cursor is put back (and scrolled to) right after
    return _scroll_cursor_visible(self, center, animate)


def _placeholder_only_with_room(self: TextArea, y: int) -> Strip:
    if not self.text and self.placeholder and self.content_size.width < 1:
        return Strip.blank(0)  # the placeholder has no room: its padding draws the line
    return _text_area_line(self, y)


def _rewrap_on_a_new_width(self: TextArea) -> None:
    wrapped = self.wrapped_document
    made_for = (getattr(wrapped, "_width", None), getattr(wrapped, "_tab_width", None))
    if made_for == (self.wrap_width, self.indent_width):
        self._refresh_size()  # the wrap is still right: only the viewport changed
        return
    _text_area_resized(self)


def _reflow_and_validate(self: Compositor, parent, size):  # type: ignore[no-untyped-def]
    # Lookups made while the new map is built (a scrollbar's reactive refreshing it,
    # a widget asking for its size) read the previous map, which is what they read
    # between two layouts anyway, instead of arranging the whole screen once more.
    self._full_map_invalidated = False
    result = _reflow(self, parent, size)
    self._full_map_invalidated = False  # the map reflow just built covers every widget
    self._slop_drawn_map = self._full_map  # what the frame that follows draws
    return result


def _reflow_visible_from_the_drawn_map(self: Compositor, parent, size):  # type: ignore[no-untyped-def]
    # Right after a full reflow the screen shows the full map; compared with it, a
    # scroll repaints what moved, not the whole screen (which it did against no map).
    if (
        self._visible_map is None
        and self._full_map
        and self._full_map is self.__dict__.get("_slop_drawn_map")
        and self.size == size
    ):
        self._visible_map = self._full_map
    self._slop_drawn_map = None
    return _reflow_visible(self, parent, size)


def _size_updated_if_changed(
    self: ScrollView, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
) -> bool:
    seen = (size, virtual_size, container_size, self.virtual_size, self.styles._cache_key)
    if self.__dict__.get("_slop_size_seen") == seen:
        return False  # what _scroll_update would compute is what it computed last time
    self.__dict__["_slop_size_seen"] = seen
    return _size_updated(self, size, virtual_size, container_size, layout)


def hold_frames(app) -> None:  # type: ignore[no-untyped-def]
    """No layout and no frame until `release_frames` (see the module docstring)."""
    if Screen._compositor_refresh is not _refresh_unless_held:
        Screen._compositor_refresh = _refresh_unless_held  # type: ignore[method-assign]
    app.__dict__["_slop_frames_held"] = True
    app._begin_batch()


def release_frames(app) -> None:  # type: ignore[no-untyped-def]
    """Leave a `hold_frames`; the screen is laid out and drawn once, as it is now."""
    if app.__dict__.pop("_slop_frames_held", False):
        app._end_batch()


def _refresh_unless_held(self: Screen) -> None:
    if self.app.__dict__.get("_slop_frames_held"):
        self._repaint_required = True  # drawn by the idle handler after the hold
        return
    _compositor_refresh(self)


def _resumed_without_restyle_at_first(self: Screen, event) -> None:  # type: ignore[no-untyped-def]
    if not self.__dict__.get("_slop_resumed"):
        self.__dict__["_slop_resumed"] = True
        event.refresh_styles = False  # styled at mount (see the module docstring)
    _screen_resumed(self, event)


def _one_cell_each(line: str) -> bool:
    return line.isascii() and line.isprintable()  # no tab, no control character


def fast_tab_widths(line: str, tab_size: int = 4) -> list[tuple[str, int]]:
    """`get_tab_widths` (one section per tab) for a line with no tab in it."""
    if line and _one_cell_each(line):
        return [(line, 0)]
    return _get_tab_widths(line, tab_size)


def fast_wrap_offsets(
    text: str,
    width: int,
    tab_size: int,
    fold: bool = True,
    precomputed_tab_sections: list[tuple[str, int]] | None = None,
) -> list[int]:
    """`compute_wrap_offsets`: where `text` breaks to fit `width` cells."""
    if width <= 0 or not _one_cell_each(text):
        return _compute_wrap_offsets(text, width, tab_size, fold, precomputed_tab_sections)
    if len(text) <= width:
        return []
    breaks: list[int] = []
    offset = 0  # cells used on the current line
    for match in _WORD_CHUNK.finditer(text):
        start, end = match.span()
        size = end - start
        if width - offset >= size:
            offset += size
        elif size > width:  # longer than a line: folded into pieces of `width`
            if fold:
                last = start + ((size - 1) // width) * width
                breaks.extend(piece for piece in range(start, last + 1, width) if piece)
                offset = end - last
            else:
                if start:
                    breaks.append(start)
                offset = size
        elif offset and start:  # fits on the next line
            breaks.append(start)
            offset = size
    return breaks


async def _run_on_the_next_tick(self: Timer) -> None:
    """`Timer._run` as in Textual 8.2.8, but a late timer skips to the next point of
    its grid (`count = int(late_by / interval)`, Textual's adds 1)."""
    count = 0
    _repeat = self._repeat
    _interval = self._interval
    self._active  # noqa: B018 -- instantiated here, in the timer's own thread, as Textual does
    await self._active.wait()
    start = _time.get_time()

    while _repeat is None or count <= _repeat:
        next_timer = start + ((count + 1) * _interval)
        now = _time.get_time()
        if self._skip and next_timer < now:
            count = int((now - start) / _interval)
            continue
        now = _time.get_time()
        wait_time = max(0, next_timer - now)
        await _time.sleep(wait_time)
        count += 1
        await self._active.wait()
        if self._reset:
            start = _time.get_time()
            count = 0
            self._reset = False
            continue
        try:
            await self._tick(next_timer=next_timer, count=count)
        except EventTargetGone:
            break


def _refresh_layout_once(self: Screen, size: Size | None = None, scroll: bool = False) -> None:
    _reflowing[0] += 1
    try:
        _refresh_layout(self, size, scroll)
    finally:
        _reflowing[0] -= 1


def _size_updated_in_the_reflow(  # type: ignore[no-untyped-def]
    self: Widget, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
):
    if not _reflowing[0]:
        return _widget_size_updated(self, size, virtual_size, container_size, layout)
    # The reflow that calls this has just placed the widget at these sizes: no second
    # layout when only heights changed or the widget is placed for the first time;
    # a new width of a placed widget, and an anchored view whose container changed,
    # ask as Textual does (see the docstring).
    width = self._size.width
    reanchor = (
        self._anchored and not self._anchor_released and container_size != self._container_size
    )
    layout = bool(width) and size.width != width
    updated = _widget_size_updated(self, size, virtual_size, container_size, layout)
    if reanchor:
        self.refresh(layout=True)
    return updated


# Strip's caches and their sizes (Textual 8.2.8's `Strip.__init__`).
_STRIP_CACHES = {
    "_divide_cache": 4,
    "_crop_cache": 16,
    "_style_cache": 16,
    "_filter_cache": 4,
    "_line_length_cache": 4,
    "_crop_extend_cache": 4,
    "_offsets_cache": 4,
}
_STRIP_FIELDS = {"_segments", "_cell_length", "_render_cache", "_link_ids", "_cell_count"}
# What Textual's `Strip.__init__` refers to: the fields, the caches and the builtins
# it calls; any other version is left alone.
_STRIP_INIT_NAMES = {"list", "FIFOCache", *_STRIP_FIELDS, *_STRIP_CACHES}


def _strip_without_caches(self: Strip, segments, cell_length: int | None = None) -> None:  # type: ignore[no-untyped-def]
    self._segments = list(segments)
    self._cell_length = cell_length
    self._render_cache = None
    self._link_ids = None
    self._cell_count = None


def _strip_cache_when_used(self: Strip, name: str) -> FIFOCache:
    # Called only for an attribute not set: a cache slot the first time it is read.
    size = _STRIP_CACHES.get(name)
    if size is None:
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
    cache: FIFOCache = FIFOCache(size)
    setattr(self, name, cache)
    return cache


_process_component_classes = Stylesheet._process_component_classes


class _ComponentStylesWhenRead(dict):
    """A widget's component styles, each made by the stylesheet when first read."""

    __slots__ = ("_stylesheet", "_node", "_pending")

    def __init__(self, stylesheet: Stylesheet, node: DOMNode, names: set[str]) -> None:
        super().__init__()
        self._stylesheet = stylesheet
        self._node = node
        self._pending = set(names)

    def __missing__(self, name: str):  # type: ignore[no-untyped-def]
        if name not in self._pending:
            raise KeyError(name)
        self._pending.discard(name)
        virtual_node = DOMNode(classes=name)  # as Stylesheet._process_component_classes
        virtual_node._attach(self._node)
        self._stylesheet.apply(virtual_node, animate=False)
        self[name] = virtual_node.styles
        return virtual_node.styles

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self._pending

    def get(self, name, default=None):  # type: ignore[no-untyped-def,override]
        return self[name] if name in self else default

    def copy(self) -> dict:  # type: ignore[override]
        return dict(self)  # the styles made so far

    def clear(self) -> None:
        self._pending.clear()
        dict.clear(self)


def _component_styles_when_read(self: Stylesheet, node: DOMNode) -> None:
    styles = node._component_styles
    if type(styles) is dict and not styles:  # the node's first styling
        names = node._get_component_classes()
        if names:
            node._component_styles = _ComponentStylesWhenRead(self, node, names)
        return
    _process_component_classes(self, node)


def scroll_keeping_lines(
    widget: Widget, old: float, new: float, scroll: Callable[[], None]
) -> None:
    """`scroll()` (a Line API `ScrollView`'s `watch_scroll_y`, which marks every line
    dirty), then the styled lines still on screen are moved in the widget's
    `StylesCache` (its `_cache`, one strip per widget line, and `_dirty_lines`) to
    their new rows: only the rows the scroll exposed, and those dirty before it, go
    through Textual's line styling again. The widget is still repainted whole. For a
    widget whose styled content lines depend on their content alone (not their row)."""
    cache = widget._styles_cache
    lines, dirty = dict(cache._cache), set(cache._dirty_lines)
    scroll()
    shift = round(new) - round(old)
    if not shift:
        return
    top = widget.content_offset.y
    bottom = top + widget.size.height
    for y in range(max(top, top - shift), min(bottom, bottom - shift)):
        strip = lines.get(y + shift)
        if strip is not None and y + shift not in dirty:
            cache._cache[y] = strip
            cache._dirty_lines.discard(y)


def follows_bottom(widget: Widget) -> bool:
    """Whether `widget` is anchored and the user has not scrolled it away since
    (`Widget._anchored`, `Widget._anchor_released`: Textual 8 has no public form of the
    second; `is_anchored` stays true after the user scrolls)."""
    return bool(widget._anchored and not widget._anchor_released)


def install() -> None:
    """Patch every fix above (once; each only if Textual still has what it relies on)."""
    if TextArea.scroll_cursor_visible is not _scroll_to_a_cursor_inside:
        TextArea.scroll_cursor_visible = _scroll_to_a_cursor_inside  # type: ignore[method-assign]
    if TextArea.render_line is not _placeholder_only_with_room:
        TextArea.render_line = _placeholder_only_with_room  # type: ignore[method-assign]
    if TextArea._on_resize is not _rewrap_on_a_new_width:
        TextArea._on_resize = _rewrap_on_a_new_width  # type: ignore[method-assign]
    if Compositor.reflow is not _reflow_and_validate and hasattr(
        Compositor(), "_full_map_invalidated"
    ):
        Compositor.reflow = _reflow_and_validate  # type: ignore[method-assign]
    if Screen._on_screen_resume is not _resumed_without_restyle_at_first:
        Screen._on_screen_resume = _resumed_without_restyle_at_first  # type: ignore[method-assign]
    if _wrapped_document.compute_wrap_offsets is not fast_wrap_offsets:
        _wrapped_document.compute_wrap_offsets = fast_wrap_offsets
        _wrapped_document.get_tab_widths = fast_tab_widths
    if Compositor.reflow_visible is not _reflow_visible_from_the_drawn_map and all(
        hasattr(Compositor(), name) for name in ("_visible_map", "_full_map", "size")
    ):
        Compositor.reflow_visible = _reflow_visible_from_the_drawn_map  # type: ignore[method-assign]
    if ScrollView._size_updated is not _size_updated_if_changed:
        ScrollView._size_updated = _size_updated_if_changed  # type: ignore[method-assign]
    if (
        Timer._run is not _run_on_the_next_tick
        and hasattr(Timer, "_active")
        and hasattr(Timer, "_tick")
        and {"_repeat", "_interval", "_skip", "_reset"} <= set(Timer.__init__.__code__.co_names)
    ):
        Timer._run = _run_on_the_next_tick  # type: ignore[method-assign]
    if Screen._refresh_layout is not _refresh_layout_once:
        Screen._refresh_layout = _refresh_layout_once  # type: ignore[method-assign]
    if Widget._size_updated is not _size_updated_in_the_reflow:
        Widget._size_updated = _size_updated_in_the_reflow  # type: ignore[method-assign]
    if (
        Strip.__init__ is not _strip_without_caches
        and set(Strip.__slots__) == set(_STRIP_CACHES) | _STRIP_FIELDS
        and set(Strip.__init__.__code__.co_names) == _STRIP_INIT_NAMES
        and "__getattr__" not in Strip.__dict__
    ):
        Strip.__init__ = _strip_without_caches  # type: ignore[method-assign]
        Strip.__getattr__ = _strip_cache_when_used  # type: ignore[attr-defined]
    if Stylesheet._process_component_classes is not _component_styles_when_read and isinstance(
        DOMNode()._component_styles, dict
    ):
        Stylesheet._process_component_classes = _component_styles_when_read  # type: ignore[method-assign]
