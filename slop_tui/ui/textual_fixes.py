"""Every private part of Textual that slop-tui uses: its patches and its helpers.

Written for Textual 8.2.8 (pinned exactly in pyproject.toml). No other module
touches a Textual name that starts with an underscore: they call the helpers
here. `install()` puts the patches in place and is called where the app starts
(`SlopApp()`, `run_app`, the tests' conftest); importing this module puts in
place only `class-setup-kept`, which must precede the widget classes it makes
cheaper (the workspace command imports this module before any other part of
Textual but `textual.dom`). Each patch first checks that what it replaces has
the shape it was written for (the names the original reads and its parameters,
`shape_of`); if not, it leaves Textual alone and warns. docs/textual-patches.md
says, per patch, what it fixes, why, how its gain was measured, and for
Textual's bugs a minimal reproduction and the change proposed upstream.
tests/test_textual_canary.py pins the source of every name in `RELIED_ON`:
an upgrade of Textual fails it, naming what to re-check.

Patched by `install()` (name: what it replaces):

- `class-setup-kept`: `DOMNode.__init_subclass__`, `DOMNode._merge_bindings` (at
  this module's import, and by `install()`)
- `undo-past-the-end`: `TextArea.scroll_cursor_visible` (a crash)
- `placeholder-without-room`: `TextArea.render_line` (a crash)
- `rewrap-on-width`: `TextArea._on_resize`
- `reflow-maps`: `Compositor.reflow`, `Compositor.reflow_visible`
- `visible-map-kept`: `Compositor.full_map`
- `map-kept-through-repaints`: `Compositor.update_widgets`
- `opaque-top-alone`: `App._background_screens`
- `scrollview-size-once`: `ScrollView._size_updated`
- `every-layout-counted`: `Widget.refresh` (wrapped)
- `held-frames`: `Screen._compositor_refresh`
- `first-resume-unstyled`: `Screen._on_screen_resume`
- `ascii-wrap`: `compute_wrap_offsets`, `get_tab_widths` in
  `textual.document._wrapped_document`
- `timer-grid`: `Timer._run`
- `one-pass-reflow`: `Screen._refresh_layout`, `Widget._size_updated`
- `lazy-strip-caches`: `Strip.__init__` (and a `Strip.__getattr__`)
- `lazy-component-styles`: `Stylesheet._process_component_classes`
- `colours-cache-by-colour`: `StylesCache.get_inner_outer`
- `removed-lets-go`: `Widget._message_loop_exit`
- `strips-without-self-cycles`: `Strip.divide`, `Strip.crop_extend`
- `chops-of-what-shows`: `Compositor._render_chops`
- `frames-written-at-once`: `WriterThread.write`, `WriterThread.run`
- `paste-kept-whole`: `XTermParser.parse` (a paste that holds an ESC)

Patched by `keep_parsed_css()` (the workspace command only), not by `install()`:

- `kept-css`: `Stylesheet._parse_rules` (its rules from the user cache)

Read, set or called by the helpers: `App._begin_batch`, `App._end_batch`,
`App._batch_count`, `App._display`, `App._background_screens`, `App._clipboard`,
`Screen._compositor` (`Compositor._visible_map`, `_visible_widgets`),
`Screen._scroll_required`, `Screen._repaint_required`, `Screen._dirty_widgets`,
`Screen._layout_required` and `Screen._layout_widgets` (`scroll_frame_now`: a scroll
drawn before a pending layout),
`Widget._scroll_required` and `Widget._repaint_required` (`scroll_frame_now`; with
`Widget._repaint_regions`, `held-frames` after a whole-screen repaint),
`Widget._vertical_scrollbar` and `App._start_widget` (`vertical_scrollbar_of`),
`Message._stop_propagation` (`was_stopped`),
`Screen._layout_required` (`mount_ahead`),
`Screen._on_timer_update`, `ScrollView._scroll_update`,
`Widget._anchor_released`, `Widget._styles_cache` (`StylesCache._cache`,
`StylesCache._dirty_lines`, `StylesCache._width`),
`CommandPalette._refresh_command_list` (overridden by `ListedCommandsPalette`),
`HeaderTitle` from `textual.widgets._header`, and for `KeptCommandPalette` (a palette
shown again instead of made anew) `CommandPalette`'s `_on_mount`, `_on_unmount`,
`_provider_classes`, `_gather_commands`, `_cancel_gather_commands`,
`_stop_busy_countdown`, `_stop_no_matches_countdown`, `_select_command`,
`_providers`, `_selected_command`, `_calling_screen`, `Provider._post_init`,
`_search` (`_init_success`) and `_shutdown`, `Screen._on_mount`,
`Widget._on_mount`, `Screen._on_timer_update`, `Screen._css_update_count` (kept by
`App.refresh_css`), `App._css_update_count` and `App._get_screen` (`mount_ahead`).
The patches also read `Compositor._full_map`, `_visible_map` and
`_full_map_invalidated`, `Widget._size`, `_container_size`, `_anchored`,
`WrappedDocument._width`, `_tab_width`, `DOMNode._component_styles` and
`_get_component_classes`, `Timer`'s `_active`, `_repeat`, `_interval`, `_skip`,
`_reset`, `_tick`, and `textual._time`.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from functools import lru_cache
from threading import Lock as _Lock
from types import CodeType, ModuleType
from typing import Any
from weakref import WeakKeyDictionary

from textual.binding import BindingsMap
from textual.dom import DOMNode
from textual.reactive import Reactive

# -- the patches' machinery -------------------------------------------------------------


def _names(code: CodeType) -> set[str]:
    """The global and attribute names `code` reads or sets, nested code included (where
    Python versions inline comprehensions or not, the union is the same)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names(const)
    return names


def shape_of(obj: Any) -> str:
    """A short fingerprint of a function's parameters and the names it uses (or a
    class's `__slots__`): what a patch assumes of what it replaces or reads."""
    if isinstance(obj, property):
        obj = obj.fget
    if isinstance(obj, type):
        text = repr(sorted(getattr(obj, "__slots__", ())))
    else:
        # A function behind a decorator (functools.lru_cache) has the shape of its own.
        code: CodeType = getattr(obj, "__code__", None) or obj.__wrapped__.__code__
        params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        text = repr((params, sorted(_names(code))))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Patch:
    """Attributes of Textual replaced together. `shape` fingerprints (`shape_of`)
    Textual's originals, then each object of `reads` (an attribute of a class or a
    class), joined with ":"."""

    name: str
    owner: type | ModuleType
    replacements: dict[str, Any]
    reads: tuple[Any, ...]
    shape: str

    def originals(self) -> dict[str, Any]:
        return {attr: _ORIGINALS[(self.owner, attr)] for attr in self.replacements}

    def current_shape(self) -> str:
        found = [
            shape_of(original) for original in self.originals().values() if original is not _ABSENT
        ]
        return ":".join([*found, *(shape_of(read) for read in self.reads)])

    def installed(self) -> bool:
        return all(vars(self.owner).get(attr) is value for attr, value in self.replacements.items())

    def fits(self) -> bool:
        """Whether Textual's originals are those the patch was written for."""
        return self.current_shape() == self.shape

    def apply(self) -> None:
        for attr, value in self.replacements.items():
            setattr(self.owner, attr, value)

    def uninstall(self) -> None:
        for attr, original in self.originals().items():
            if original is _ABSENT:
                if attr in vars(self.owner):
                    delattr(self.owner, attr)
            else:
                setattr(self.owner, attr, original)


_ABSENT = object()
_ORIGINALS: dict[tuple[Any, str], Any] = {}


def original(owner: type | ModuleType, attr: str) -> Any:
    """Textual's own `owner.attr`, patched or not."""
    found = _ORIGINALS.get((owner, attr), _ABSENT)
    return vars(owner)[attr] if found is _ABSENT else found


def _patch(
    name: str,
    owner: type | ModuleType,
    replacements: dict[str, Any],
    shape: str,
    reads: Iterable[Any] = (),
) -> Patch:
    for attr in replacements:
        _ORIGINALS[(owner, attr)] = vars(owner).get(attr, _ABSENT)
    return Patch(name, owner, replacements, tuple(reads), shape)


# Names of patches to leave out, comma-separated ("all": every one): for measuring a
# patch's gain against Textual's own code (docs/textual-patches.md).
PATCHES_OFF_VARIABLE = "SLOP_TUI_TEXTUAL_PATCHES_OFF"


def _left_out() -> set[str]:
    off = os.environ.get(PATCHES_OFF_VARIABLE, "")
    return {name.strip() for name in off.split(",") if name.strip()}


def _fit(name: str, parts: Iterable[Patch]) -> bool:
    """Whether every part of patch `name` fits Textual; if not, a warning naming them."""
    misfits = [p for p in parts if not p.fits()]
    if misfits:
        targets = ", ".join(
            f"{p.owner.__name__}.{attr}" for p in misfits for attr in p.replacements
        )
        warnings.warn(
            f"slop-tui: Textual's {targets} is not what the {name!r} patch was written "
            "for (Textual 8.2.8): the patch is left out (docs/textual-patches.md)",
            RuntimeWarning,
            stacklevel=3,
        )
    return not misfits


def _install_at_import(patch: Patch) -> None:
    """`patch` in place now, as `install()` would put it (left out the same ways)."""
    skip = _left_out()
    if "all" not in skip and patch.name not in skip and _fit(patch.name, [patch]):
        patch.apply()


# -- class-setup-kept: installed at this module's import ---------------------------------
#
# Textual's `DOMNode.__init_subclass__` reads every class of a new widget class's MRO
# for its reactives and its bindings (each base's BINDINGS parsed anew), and its compute
# methods with `dir()`: ~250 us a class, ~18 ms of CPU for the 71 classes made before
# the workspace's first frame. A class's own part is the same each time it is read, so
# it is kept, by class, and a new class joins its bases' kept parts: the same
# reactives, computes, CSS names and bindings (each key's list a copy of its own, as
# Textual's are). A class whose dict or BINDINGS list has grown since is read again.
# Installed here, before the rest of Textual is imported, so that Textual's own widget
# classes are made with it too.

_COMPUTE_PREFIXES = ("_compute_", "compute_")
_OWN_PARTS: WeakKeyDictionary[type, tuple[int, dict[str, Reactive], list[str]]] = (
    WeakKeyDictionary()
)
_OWN_BINDINGS: WeakKeyDictionary[type, tuple[tuple[int, int], BindingsMap]] = WeakKeyDictionary()


def _own_parts(base: type) -> tuple[int, dict[str, Reactive], list[str]]:
    """`base`'s own reactives and the names of its compute methods."""
    found = vars(base)
    kept = _OWN_PARTS.get(base)
    if kept is not None and kept[0] == len(found):
        return kept
    kept = (
        len(found),
        {name: value for name, value in found.items() if isinstance(value, Reactive)},
        [name for name in found if name.startswith(_COMPUTE_PREFIXES)],
    )
    _OWN_PARTS[base] = kept
    return kept


def _own_bindings(base: type) -> BindingsMap:
    """`base`'s own BINDINGS, parsed."""
    listed = vars(base).get("BINDINGS", [])
    key = (id(listed), len(listed))
    kept = _OWN_BINDINGS.get(base)
    if kept is not None and kept[0] == key:
        return kept[1]
    parsed = BindingsMap(listed)
    _OWN_BINDINGS[base] = (key, parsed)
    return parsed


def _merge_bindings_kept(cls: type[DOMNode]) -> BindingsMap:
    bindings: list[BindingsMap] = []
    for base in reversed(cls.__mro__):
        if issubclass(base, DOMNode):
            if not base._inherit_bindings:
                bindings.clear()
            bindings.append(_own_bindings(base))
    keys: dict[str, list] = {}
    for each in bindings:
        for key, key_bindings in each.key_to_bindings.items():
            keys[key] = list(key_bindings)
    return BindingsMap.from_keys(keys)


def _init_subclass_kept(
    cls: type[DOMNode],
    inherit_css: bool = True,
    inherit_bindings: bool = True,
    inherit_component_classes: bool = True,
) -> None:
    super(DOMNode, cls).__init_subclass__()
    reactives: dict[str, Reactive] = {}
    computes: set[str] = set()
    for base in reversed(cls.__mro__):
        _, own_reactives, own_computes = _own_parts(base)
        reactives.update(own_reactives)
        computes.update(own_computes)
    cls._reactives = reactives
    cls._inherit_css = inherit_css
    cls._inherit_bindings = inherit_bindings
    cls._inherit_component_classes = inherit_component_classes
    bases = cls._css_bases(cls)
    cls._css_type_name = bases[0].__name__
    cls._merged_bindings = cls._merge_bindings()
    cls._css_type_names = frozenset(base.__name__ for base in bases)
    cls._computes = frozenset(name.lstrip("_")[8:] for name in computes)


CLASS_SETUP_KEPT = _patch(
    "class-setup-kept",
    DOMNode,
    {
        "__init_subclass__": classmethod(_init_subclass_kept),
        "_merge_bindings": classmethod(_merge_bindings_kept),
    },
    "82046d9cdcf5:effc249a76c6:4e78c3b0cfe8:490bd3735197:7d8fada5be9f",
    reads=[DOMNode._css_bases, BindingsMap.__init__, BindingsMap.from_keys],
)
_install_at_import(CLASS_SETUP_KEPT)

import textual.document._wrapped_document as _wrapped_document
from textual import _time, events
from textual._compositor import Compositor
from textual._parser import ParseEOF, ParseError, Read1
from textual._styles_cache import StylesCache
from textual._xterm_parser import BRACKETED_PASTE_END, BRACKETED_PASTE_START, XTermParser
from textual.app import App
from textual.cache import FIFOCache, LRUCache
from textual.command import CommandPalette
from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet
from textual.drivers._writer_thread import WriterThread
from textual.geometry import Offset, Region, Size
from textual.message import Message
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.style import Style
from textual.timer import EventTargetGone, Timer
from textual.widget import Widget
from textual.widgets import TextArea
from textual.widgets._header import HeaderTitle

# Every Textual object this module relies on, by its defining module's path, and what
# depends on it. tests/test_textual_canary.py pins the source of each.
RELIED_ON: dict[str, str] = {
    "textual.dom.DOMNode.__init_subclass__": "patch class-setup-kept",
    "textual.dom.DOMNode._merge_bindings": "patch class-setup-kept",
    "textual.dom.DOMNode._css_bases": "class-setup-kept calls it",
    "textual.binding.BindingsMap.__init__": "class-setup-kept parses each base's BINDINGS",
    "textual.binding.BindingsMap.from_keys": "class-setup-kept builds the merged map",
    "textual.widgets._text_area.TextArea.scroll_cursor_visible": "patch undo-past-the-end",
    "textual.widgets._text_area.TextArea._undo_batch": "undo-past-the-end: the order "
    "(size refreshed, then cursor put back) that makes the crash",
    "textual.widgets._text_area.TextArea.render_line": "patch placeholder-without-room",
    "textual.widgets._text_area.TextArea._on_resize": "patch rewrap-on-width",
    "textual.widgets._text_area.TextArea._refresh_size": "rewrap-on-width calls it",
    "textual.document._wrapped_document.WrappedDocument.wrap": "rewrap-on-width reads "
    "_width and _tab_width; ascii-wrap replaces what it calls",
    "textual._wrap.compute_wrap_offsets": "patch ascii-wrap (gives what it gives)",
    "textual.expand_tabs.get_tab_widths": "patch ascii-wrap (gives what it gives)",
    "textual._compositor.Compositor.__init__": "reflow-maps reads _full_map, _visible_map, "
    "_full_map_invalidated, size",
    "textual._compositor.Compositor.reflow": "patch reflow-maps",
    "textual._compositor.Compositor.reflow_visible": "patch reflow-maps",
    "textual._compositor.Compositor.full_map": "patch visible-map-kept",
    "textual._compositor.Compositor.update_widgets": "patch map-kept-through-repaints",
    "textual.scroll_view.ScrollView._size_updated": "patch scrollview-size-once",
    "textual.widget.Widget._scroll_update": "scroll_update() calls it (ScrollView's)",
    "textual.screen.Screen._compositor_refresh": "patch held-frames",
    "textual.screen.Screen._on_screen_resume": "patch first-resume-unstyled",
    "textual.screen.Screen._on_timer_update": "next_frame_now() and release_frames() "
    "call it; "
    "held-frames relies on its _repaint_required (a layout's render skipped when the "
    "whole-screen repaint follows) and on its screen in _dirty_widgets for that repaint, "
    "hold_paint() on its update_widgets before _compositor_refresh",
    "textual.widget.Widget.refresh": "held-frames (_drawn_as_they_are) clears the "
    "_repaint_required and _repaint_regions it sets once a whole-screen repaint drew them; "
    "patch every-layout-counted (wrapped: _layout_updates raised where it does not)",
    "textual.widget.Widget._exchange_repaint_regions": "_drawn_as_they_are empties the "
    "_repaint_regions it hands out",
    "textual.widget.Widget._check_refresh": "scroll_frame_now() clears the "
    "_scroll_required and _repaint_required it reads",
    "textual.screen.Screen._on_idle": "hold_paint() relies on it running the "
    "call_after_refresh callbacks once no widget is dirty; scroll_frame_now() on it "
    "resuming the frame timer for a layout left pending",
    "textual.screen.Screen._on_layout": "scroll_frame_now() puts back the "
    "_layout_widgets and _layout_required it sets, for the next frame",
    "textual._compositor.Compositor._render_chops": "patch chops-of-what-shows",
    "textual._compositor.Compositor.cuts": "chops-of-what-shows reads the cuts it makes",
    "textual._compositor.Compositor.visible_widgets": "chops-of-what-shows renders them "
    "in its order, the front first",
    "textual._compositor.Compositor.render_update": "release_paint() draws the "
    "_dirty_regions it keeps until a render",
    "textual.screen.Screen._refresh_layout": "patch one-pass-reflow; mount_ahead() lays "
    "out a screen not shown with it",
    "textual.widget.Widget._size_updated": "patch one-pass-reflow",
    "textual.widget.Widget._check_anchor": "one-pass-reflow and follows_bottom() read "
    "_anchored and _anchor_released",
    "textual.timer.Timer._run": "patch timer-grid (a copy of it, one line changed)",
    "textual.timer.Timer.__init__": "timer-grid reads the attributes it sets",
    "textual.strip.Strip.__init__": "patch lazy-strip-caches (the caches and sizes it makes)",
    "textual.css.stylesheet.Stylesheet._process_component_classes": "patch "
    "lazy-component-styles (a virtual node per class, as it makes them)",
    "textual.dom.DOMNode.get_component_styles": "lazy-component-styles answers its reads",
    "textual.app.App._begin_batch": "hold_frames() enters the batch",
    "textual.app.App._end_batch": "release_frames() leaves it; "
    "drawing_allowed() reads _batch_count",
    "textual.app.App._background_screens": "patch opaque-top-alone; draw_widgets() "
    "passes it to render_update",
    "textual.app.App._display": "draw_widgets() writes the update with it",
    "textual.app.App.copy_to_clipboard": "remember_copied() sets _clipboard as it does",
    "textual._styles_cache.StylesCache": "scroll_keeping_lines() moves _cache and _dirty_lines; "
    "lines_to_style() reads them and _width",
    "textual._styles_cache.StylesCache.get_inner_outer": "patch colours-cache-by-colour",
    "textual.widget.Widget._message_loop_exit": "patch removed-lets-go (runs it, then "
    "clears _styles_cache and _box_model_cache)",
    "textual.cache.LRUCache": "removed-lets-go empties the links of its _cache before clear()",
    "textual.drivers._writer_thread.WriterThread.write": "patch frames-written-at-once",
    "textual.drivers._writer_thread.WriterThread.run": "patch frames-written-at-once (its "
    "loop, with bytes written and what was flushed counted)",
    "textual.drivers._writer_thread.WriterThread.stop": "frames-written-at-once: the "
    "thread ends at a None on the queue, put there directly, not through write()",
    "textual._xterm_parser.XTermParser.parse": "patch paste-kept-whole (wrapped: it reads "
    "the paste markers as they are, and gives an empty Paste for a paste it saw no text of)",
    "textual._parser.Parser.__init__": "paste-kept-whole: the parser is made with "
    "self.parse(callback), then sent one character at a time",
    "textual._parser.Parser.feed": "paste-kept-whole: each character sent to the parse "
    "generator, a timeout or the end of the input thrown into it",
    "textual.widget.Widget.vertical_scrollbar": "vertical_scrollbar_of() makes a bar as it does",
    "textual.widget.Widget._get_box_model": "every-layout-counted: its cache is keyed by "
    "_layout_updates, which refresh(layout=True) raises only when no layout is pending",
    "textual.message.Message.stop": "was_stopped() reads the flag it sets",
    "textual.message_pump.MessagePump._on_message": "was_stopped(): a message whose flag "
    "is set bubbles no further (a key stopped by a widget never reaches the app's bindings)",
    "textual.scrollbar.ScrollBar.render": "LineScrollBar (ui/widgets/scrollbar.py) takes "
    "the renderer's values and style from it",
    "textual.scrollbar.ScrollBarRender.__rich_console__": "LineScrollBar calls render_bar "
    "with the arguments it passes",
    "textual.strip.Strip.divide": "patch strips-without-self-cycles (answers [self] "
    "uncached for one cut at its length, then calls it)",
    "textual.strip.Strip.crop_extend": "patch strips-without-self-cycles (answers self "
    "uncached for the whole strip, then calls it)",
    "textual.widgets._header.HeaderTitle": "the app redraws the header's title alone",
    "textual.command.CommandPalette._refresh_command_list": "ListedCommandsPalette "
    "overrides it: the commands pass through `listed` on their way into the list",
    "textual.command.CommandPalette.compose": "SlopPalette's CSS shows the "
    "`Vertical#--container` it composes from the first frame (Textual: once -ready)",
    "textual.command.CommandPalette.__init__": "KeptCommandPalette sets _selected_command "
    "and _providers as it does",
    "textual.command.CommandPalette._on_mount": "KeptCommandPalette does what it does "
    "(_calling_screen, the providers made and started, the first search) at each showing",
    "textual.command.CommandPalette._on_unmount": "KeptCommandPalette shuts the providers "
    "down as it does, at each hiding",
    "textual.command.CommandPalette._provider_classes": "KeptCommandPalette makes its "
    "providers from it",
    "textual.command.CommandPalette._gather_commands": "KeptCommandPalette starts it after "
    "its first frame; it calls _refresh_command_list with what it gathered",
    "textual.command.CommandPalette._cancel_gather_commands": "KeptCommandPalette calls it",
    "textual.command.CommandPalette._stop_busy_countdown": "KeptCommandPalette calls it",
    "textual.command.CommandPalette._stop_no_matches_countdown": "KeptCommandPalette calls it",
    "textual.command.CommandPalette._select_command": "KeptCommandPalette: a chosen "
    "command empties the list (not kept for the next showing)",
    "textual.command.Provider._post_init": "KeptCommandPalette starts a provider again with it",
    "textual.command.Provider._search": "KeptCommandPalette clears _init_success, which "
    "it reads, before a provider starts again",
    "textual.command.Provider._shutdown": "KeptCommandPalette calls it at each hiding",
    "textual.screen.Screen._on_mount": "KeptCommandPalette calls it (its own _on_mount "
    "prevents CommandPalette's)",
    "textual.widget.Widget._on_mount": "KeptCommandPalette calls it (as above)",
    "textual.app.App._get_screen": "mount_ahead() mounts an installed screen with it",
    "textual.command.CommandPalette._watch__show_busy": "KeptCommandPalette extends it and "
    "sets _show_busy; the indicator redraws only while the palette is shown busy",
    "textual.widgets._loading_indicator.LoadingIndicator._on_mount": "KeptCommandPalette "
    "turns off the auto_refresh it starts (the palette's mount runs after its children's)",
    "textual.app.App.refresh_css": "KeptCommandPalette: it keeps _css_update_count of the "
    "screens in the stack, and a screen out of it is restyled at its showing",
    "textual.css.stylesheet.Stylesheet._parse_rules": "patch kept-css (what it parses "
    "from, and its own cache, `_parse_cache`)",
    "textual.css.stylesheet.Stylesheet.__init__": "kept-css reads `_variables` and `_parse_cache`",
}

_reflow = Compositor.reflow
_full_map = Compositor.full_map
_update_widgets = Compositor.update_widgets
_background_screens = App._background_screens
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
_widget_refresh = Widget.refresh
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


def _full_map_keeping_what_is_shown(self: Compositor):  # type: ignore[no-untyped-def]
    # The full map is rebuilt when first read after a scroll, or after a widget off
    # screen asked to be redrawn; Textual's rebuild forgets the map of what is on
    # screen, and the next scroll, finding none to compare with, repaints the whole
    # screen. A read of an off-screen widget's place between two scrolls did that (a
    # block re-rendered off screen, `style_ahead`). When the rebuilt map shows the same
    # widgets in the same places, the map of what is shown is kept (or, right after a
    # full layout, the rebuilt map stands for the one the last frame drew).
    if not self._full_map_invalidated or self.root is None:
        return self._full_map
    shown, shown_widgets = self._visible_map, self._visible_widgets
    drawn = self._full_map if self._full_map is self.__dict__.get("_slop_drawn_map") else None
    full = _full_map.fget(self)
    if shown is not None:
        if self._visible_map is None and _shows_the_same(full, shown, self.size):
            self._visible_map, self._visible_widgets = shown, shown_widgets
    elif drawn is not None and _shows_the_same(full, _on_screen(drawn, self.size), self.size):
        self.__dict__["_slop_drawn_map"] = full
    return full


def _update_widgets_keeping_the_map(self: Compositor, widgets: set[Widget]) -> None:  # type: ignore[no-untyped-def]
    # Textual lets the map of every widget go when one it updates is not on screen,
    # taking it for a widget new since the map was made; the next read of a place
    # rebuilds it (a frame's scrollbar reads its own: 5-12 ms at 2,000 messages on a
    # 2-core machine). A widget the map already places keeps its place when it is
    # only repainted (a layout makes a new map): a reply streaming below the pane
    # while the user reads above it repaints its answer five times a second.
    kept = not self._full_map_invalidated and all(w in self._full_map for w in widgets)
    _update_widgets(self, widgets)
    if kept:
        self._full_map_invalidated = False


def _on_screen(full, size: Size) -> dict:  # type: ignore[no-untyped-def]
    """The part of a compositor map that is on a screen of `size`."""
    screen = size.region
    return {
        widget: geometry
        for widget, geometry in full.items()
        if screen.overlaps(geometry.region) and geometry.clip.overlaps(geometry.region)
    }


def _shows_the_same(full, shown, size: Size) -> bool:  # type: ignore[no-untyped-def]
    """Whether `shown` (a map of the widgets on screen) is what `full` (every widget's
    place) puts on a screen of `size`: the same places, and no other widget on it.
    A geometry's `order` is left out: it numbers the widgets of its own map in turn
    (`shown` skipped those off screen), and only orders them among themselves."""
    screen = size.region
    for widget, geometry in full.items():
        if widget in shown:
            kept = shown[widget]
            if kept.region != geometry.region or kept[2:] != geometry[2:]:
                return False
        elif screen.overlaps(geometry.region) and geometry.clip.overlaps(geometry.region):
            return False
    return all(widget in full for widget in shown)


def _none_under_an_opaque_top(self: App) -> list[Screen]:
    # Textual's list of the screens that show under the top one stops at the first
    # opaque screen *below* it; an opaque top screen hides them all. Under the command
    # palette, the workspace stayed "current": a streamed reply's updates were laid out
    # and drawn into the palette's frames (five a second), behind cells that hide them.
    stack = self._screen_stack
    if stack and stack[-1].styles.background.a == 1:
        return []
    return _background_screens.fget(self)


def _size_updated_if_changed(
    self: ScrollView, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
) -> bool:
    seen = (size, virtual_size, container_size, self.virtual_size, self.styles._cache_key)
    if self.__dict__.get("_slop_size_seen") == seen:
        return False  # what _scroll_update would compute is what it computed last time
    self.__dict__["_slop_size_seen"] = seen
    return _size_updated(self, size, virtual_size, container_size, layout)


def _refresh_counting_every_layout(
    self: Widget,
    *regions: Region,
    repaint: bool = True,
    layout: bool = False,
    recompose: bool = False,
) -> Widget:
    # Textual counts a layout request in `_layout_updates` (part of the key of the
    # widget's cached box model) only when none is pending. A widget that a reflow
    # measured while its request was still pending (one made before its mount: a
    # group's header, a tool's title, built with their text) and whose content changed
    # then kept the box model of the old content, its old height, through every later
    # reflow. Every request counts here.
    if layout and self._layout_required:
        self._layout_updates += 1
    return _widget_refresh(self, *regions, repaint=repaint, layout=layout, recompose=recompose)


def hold_frames(app) -> None:  # type: ignore[no-untyped-def]
    """No layout and no frame until `release_frames`: the batch of `App.batch_update()`
    entered here and left there (the context manager cannot span the workspace's
    opening, a worker that awaits the ledger). With the `held-frames` patch a layout
    made meanwhile renders nothing either."""
    app.__dict__["_slop_frames_held"] = True
    app._begin_batch()


def release_frames(app) -> None:  # type: ignore[no-untyped-def]
    """Leave a `hold_frames`; the screen is laid out and drawn once, as it is now.

    The frame is drawn at the screen's next turn (after the messages it has waiting),
    not at its frame timer's next tick: a timer first resumed waits a whole period
    (`Timer._run` counts from the resume), and the screen the hold began with, held
    since it mounted, has never run its timer (1/60 s of an idle loop before the
    command's first frame)."""
    if app.__dict__.pop("_slop_frames_held", False):
        app._end_batch()
        if app.screen_stack:
            screen = app.screen_stack[-1]
            screen.call_later(_frame_after_the_hold, screen)


def _frame_after_the_hold(screen: Screen) -> None:
    if drawing_allowed(screen.app, screen):
        # Draws what the hold kept back; a frame already drawn since leaves it nothing.
        screen._on_timer_update()


def hold_paint(app) -> None:  # type: ignore[no-untyped-def]
    """Layouts go on, nothing is painted until `release_paint`: widgets mounted and
    filled meanwhile get their sizes (and their Resize events) but are first drawn
    as they are at the release, in one frame, with the regions the held layouts and
    updates marked. Unlike `hold_frames`, a `call_after_refresh` runs once the
    layout is done, so code can await a layout while nothing is painted."""
    app.__dict__["_slop_paint_held"] = True


def release_paint(app) -> None:  # type: ignore[no-untyped-def]
    """Leave a `hold_paint`: what was marked meanwhile is drawn at the next refresh
    (and at once after it if nothing else asks for one)."""
    if not app.__dict__.pop("_slop_paint_held", False) or not app.screen_stack:
        return  # not held, or the app is closing
    screen = app.screen_stack[-1]

    def draw_what_was_held() -> None:
        if screen._compositor._dirty_regions and not app.__dict__.get("_slop_paint_held"):
            _refresh_unless_held(screen)

    screen.call_after_refresh(draw_what_was_held)


def _refresh_unless_held(self: Screen) -> None:
    if self.app.__dict__.get("_slop_frames_held"):
        self._repaint_required = True  # drawn by the idle handler after the hold
        return
    if self.app.__dict__.get("_slop_paint_held"):
        # The compositor keeps the regions marked; the widgets are not dirty any more,
        # so the idle handler runs the callbacks waiting for this layout.
        self._dirty_widgets.clear()
        return
    if self._repaint_required and _reflowing[0]:
        # A layout's frame while the whole screen is due to be drawn (after a hold, a
        # screen's refresh): `_on_timer_update` draws it right after this layout, the
        # same cells once; a layout from elsewhere leaves it to the next tick.
        return
    whole = self in self._dirty_widgets  # `_on_timer_update`'s full repaint
    _compositor_refresh(self)
    if whole:
        _drawn_as_they_are(self)


def _drawn_as_they_are(screen: Screen) -> None:
    """`screen` was just drawn whole: every widget on it as it is now. A repaint a
    widget asked for before (`Widget.refresh` sets `_repaint_required`; the `Update`
    goes out at the widget's next idle, after this frame) would draw the same cells
    again: after the first frame of a start, the conversation's and its column's
    whole regions at the side panes' frame. Those requests are done."""
    for widget in screen._compositor.visible_widgets:
        if widget._repaint_required:
            widget._repaint_required = False
            widget._repaint_regions.clear()


_xterm_parse = XTermParser.parse


def _parse_keeping_pastes_whole(self: XTermParser, token_callback):  # type: ignore[no-untyped-def]
    """`XTermParser.parse`, with a bracketed paste kept whole: every character from the
    terminal's paste start to its paste end is the pasted text, an ESC too.

    Textual's parser takes an ESC inside a paste for the start of a key sequence and
    gives what follows it as key presses: a pasted coloured log (`ESC[31m`) ended the
    paste there, its escape codes were typed as `^[` and each line break came as
    Enter, which sent the prompt. Here every character goes to Textual's parser as
    before; once it has read a paste start, the characters up to the paste end are
    read here and given as one `Paste` (NULs taken out, as Textual does), then the
    paste end goes to Textual's parser, whose own paste is then empty and dropped."""
    ending = False

    def on_token(token) -> None:  # type: ignore[no-untyped-def]
        if ending and isinstance(token, events.Paste) and not token.text:
            return  # Textual's paste of the end marker alone: the text went out whole
        token_callback(token)

    textual_parse = _xterm_parse(self, on_token)
    awaiting = next(textual_parse)
    recent = ""  # the last characters handed to Textual's parser
    marker = len(BRACKETED_PASTE_START)
    while True:
        try:
            try:
                character = yield awaiting
            except ParseError as error:  # a timeout, or the end of the input
                awaiting = textual_parse.throw(error)
                continue
            awaiting = textual_parse.send(character)
        except StopIteration:
            return  # Textual's parser has ended (the end of the input)
        recent = (recent + character)[-marker:]
        if recent != BRACKETED_PASTE_START:
            continue
        recent = ""
        pasted: list[str] = []
        ended = True
        last = BRACKETED_PASTE_END[-1]
        while True:
            try:
                character = yield Read1()
            except ParseEOF:
                ended = False
                break
            pasted.append(character)
            if character == last and "".join(pasted[-marker:]) == BRACKETED_PASTE_END:
                break
        text = "".join(pasted[: -len(BRACKETED_PASTE_END)] if ended else pasted)
        token_callback(events.Paste(text.replace("\x00", "")))
        if not ended:
            try:
                textual_parse.throw(ParseEOF())
            except StopIteration:
                pass
            return
        ending = True
        try:
            for character in BRACKETED_PASTE_END:
                awaiting = textual_parse.send(character)
        except StopIteration:
            return
        finally:
            ending = False


def _resumed_without_restyle_at_first(self: Screen, event) -> None:  # type: ignore[no-untyped-def]
    if not self.__dict__.get("_slop_resumed"):
        self.__dict__["_slop_resumed"] = True
        event.refresh_styles = False  # styled at mount, moments before
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


def _chops_of_what_shows(self: Compositor, crop: Region, is_rendered_line):  # type: ignore[no-untyped-def]
    # `Compositor._render_chops` (its result is the same where a frame writes): each
    # line's cells cut where widgets start and end, the front widget's cells winning.
    # Textual renders every widget that overlaps `crop` over its whole region and cuts
    # each line of it at every cut: a conversation's scroll (its region dirty) rendered
    # and cut the screen, the panes' containers and the conversation's own background
    # over their whole width and height, for cells their children cover or the frame
    # does not write. Here only the rows of `crop` are rendered, only the cuts of
    # `crop`'s columns (widened to the cuts around them) are filled, and a widget whose
    # cells there are all taken by widgets in front of it is not rendered at all.
    cuts = self.cuts
    chops = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
    crop_x1, crop_x2 = crop.column_span
    crop_y1, crop_y2 = crop.line_span
    intersection = Region.intersection
    for widget, (region, clip) in self.visible_widgets.items():
        x, y, width, height = intersection(region, clip)
        if not width or not height:
            continue
        right = x + width
        if right <= crop_x1 or x >= crop_x2:
            continue
        rows = []  # (y, the cuts of the widget's cells on it that are still free)
        for line_y in range(max(y, crop_y1), min(y + height, crop_y2)):
            if not is_rendered_line(line_y):
                continue
            line_cuts = cuts[line_y]
            lo = bisect_right(line_cuts, max(x, crop_x1)) - 1
            hi = bisect_left(line_cuts, min(right, crop_x2))
            window = line_cuts[lo : hi + 1]
            chops_line = chops[line_y]
            if any(chops_line[cut] is None for cut in window[:-1]):
                rows.append((line_y, window))
        if not rows:
            continue
        first_y = rows[0][0]
        strips = widget.render_lines(
            Region(x - region.x, first_y - region.y, width, rows[-1][0] - first_y + 1)
        )
        for line_y, window in rows:
            strip = strips[line_y - first_y]
            start, end = window[0], window[-1]
            if start != x or end != right:
                strip = strip.crop(start - x, end - x)
            chops_line = chops[line_y]
            pieces = strip.divide([cut - start for cut in window[1:]])
            for cut, piece in zip(window, pieces, strict=False):
                if chops_line[cut] is None:
                    chops_line[cut] = piece
    return chops


def _size_updated_in_the_reflow(  # type: ignore[no-untyped-def]
    self: Widget, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
):
    if not _reflowing[0]:
        return _widget_size_updated(self, size, virtual_size, container_size, layout)
    # The reflow that calls this has just placed the widget at these sizes: no second
    # layout when only heights changed or the widget is placed for the first time;
    # a new width of a placed widget, and an anchored view whose container changed,
    # ask as Textual does (docs/textual-patches.md, one-pass-reflow).
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


@lru_cache(1024)
def _inner_outer(base_background, background) -> tuple[Style, Style]:  # type: ignore[no-untyped-def]
    return Style(background=base_background + background), Style(background=base_background)


def _inner_outer_by_colour(self: StylesCache, base_background, background):  # type: ignore[no-untyped-def]
    # Textual's own is an lru_cache on a method: its key holds the StylesCache, so up to
    # 1,024 of them stay alive, each with the last lines its widget drew.
    return _inner_outer(base_background, background)


_widget_message_loop_exit = Widget._message_loop_exit


async def _exit_letting_go(self: Widget) -> None:
    # Textual's own clean-up of a removed widget (its arrangement, render and
    # component-styles caches), then what it keeps: the styled lines of its last
    # draw and its box models. The app's collector freezes what survives a
    # collection (ui/collector.py), so a removed widget, garbage in reference
    # cycles, stays in memory until the next deep collection; what it held goes now.
    await _widget_message_loop_exit(self)
    self._styles_cache.clear()
    boxes = self._box_model_cache
    for link in boxes._cache.values():
        # Its entries are links of a circular list ([previous, next, key, value]):
        # `clear()` alone leaves them a cycle, with their box models, for the collector.
        link.clear()
    boxes.clear()


# A frame goes to the terminal from the thread that drew it when nothing is queued
# ahead of it. Textual hands every frame to its writer thread; that thread must then
# be woken and take the interpreter lock, which the event loop holds until it waits or
# for the switch interval (5 ms), and on a busy machine the frame sat drawn and unsent
# for 5-50 ms. The write here is non-blocking, on a descriptor of its own for the same
# terminal: what the terminal does not take at once (a full buffer, a stopped
# terminal) goes to the writer thread, as does every write while one is queued, so the
# output keeps its order and the event loop never waits on the terminal.


def _direct_fd(self: WriterThread) -> int | None:
    """A non-blocking descriptor of the writer's terminal (opened once), or None when
    its file is not a terminal."""
    fd = self.__dict__.get("_direct_fd", -2)
    if fd == -2:
        fd = None
        try:
            if os.isatty(self._file.fileno()):
                name = os.ttyname(self._file.fileno())
                fd = os.open(name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except (OSError, AttributeError, ValueError):
            fd = None
        self.__dict__["_direct_fd"] = fd
    return fd


def _writer_state(self: WriterThread) -> dict:
    state = self.__dict__.get("_direct")
    if state is None:
        # queued: items put on the queue (by the writers' side, under the lock);
        # written: items the writer thread has written and flushed.
        state = self.__dict__["_direct"] = {"queued": 0, "written": 0, "lock": _Lock()}
    return state


def _write_at_once(self: WriterThread, text: str) -> None:
    state = _writer_state(self)
    with state["lock"]:
        if text and state["queued"] == state["written"] and self.is_alive():
            fd = _direct_fd(self)
            if fd is not None:
                file = self._file
                data = text.encode(file.encoding or "utf-8", file.errors or "strict")
                try:
                    sent = os.write(fd, data)
                except BlockingIOError:
                    sent = 0
                except OSError:
                    sent = -1
                if sent == len(data):
                    return
                if sent >= 0:
                    state["queued"] += 1
                    self._queue.put(data[sent:])
                    return
        state["queued"] += 1
    self._queue.put(text)


def _run_counting_written(self: WriterThread) -> None:
    # Textual's loop (write each text, flush when nothing more is queued) that also
    # writes bytes (the rest of a frame the terminal did not take at once) and counts
    # what it has written and flushed.
    file = self._file
    write = file.write
    flush = file.flush
    get = self._queue.get
    qsize = self._queue.qsize
    state = _writer_state(self)
    unflushed = 0
    while True:
        text = get()
        if text is None:
            break
        if isinstance(text, bytes):
            flush()
            file.buffer.write(text)
        else:
            write(text)
        unflushed += 1
        if qsize() == 0:
            flush()
            state["written"] += unflushed
            unflushed = 0
    flush()
    fd = self.__dict__.get("_direct_fd")
    if isinstance(fd, int):
        self.__dict__["_direct_fd"] = None
        os.close(fd)


_strip_divide = Strip.divide
_strip_crop_extend = Strip.crop_extend


# A strip divided at its own length, or cropped and extended to itself, is its own
# answer, and Textual caches that answer in the strip's own cache: a reference cycle,
# so a drawn line dropped later is freed only by a collection (and, frozen by the
# app's collector, only by a deep one). The same answers, given without the cache.


def _divide_without_self_cycle(self: Strip, cuts: Iterable[int]) -> list[Strip]:
    cell_length = self.cell_length
    cuts = [cut for cut in cuts if cut <= cell_length]
    if cuts == [cell_length]:
        return [self]
    return _strip_divide(self, cuts)


def _crop_extend_without_self_cycle(self: Strip, start: int, end: int, style) -> Strip:  # type: ignore[no-untyped-def]
    if start <= 0 and end == self.cell_length:
        return self
    return _strip_crop_extend(self, start, end, style)


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


def lines_to_style(widget: Widget) -> list[int]:
    """The lines of `widget` (border and padding included) that its next draw must
    style: not in its styles cache (`Widget._styles_cache`: `StylesCache._cache`, one
    strip per line, and `_dirty_lines`) or marked dirty there."""
    width, height = widget.outer_size
    cache = widget._styles_cache
    if cache._width != width:  # a new width clears the cache at the next draw
        return list(range(height))
    lines, dirty = cache._cache, cache._dirty_lines
    return [y for y in range(height) if y not in lines or y in dirty]


def style_ahead(screen: Screen, widgets: Iterable[Widget]) -> int:
    """Style the lines of `widgets` that are not in their styles caches yet
    (`lines_to_style`) and keep them there, as a frame that shows them would
    (`Widget.render_lines`). For widgets off screen that a scroll may bring on: that
    scroll's frame finds their lines styled. Returns how many lines were styled.

    `render_lines` reads a widget's region from Textual's full map of the screen, which
    a scroll lets go and which is rebuilt here if so; its rebuild forgets the map of
    what is on screen (`Compositor._visible_map`, `_visible_widgets`), against which the
    next scroll finds what it must repaint (without it: the whole screen). Nothing
    moved meanwhile, so that map is kept."""
    compositor = screen._compositor
    visible_map, visible_widgets = compositor._visible_map, compositor._visible_widgets
    styled = 0
    try:
        for widget in widgets:
            missing = lines_to_style(widget)
            if not missing or widget.region.size != widget.outer_size:
                continue  # nothing to style, or not where a draw would put it
            width = widget.outer_size.width
            widget.render_lines(Region(0, missing[0], width, missing[-1] + 1 - missing[0]))
            styled += len(missing)
    finally:
        if visible_map is not None and compositor._visible_map is None:
            compositor._visible_map, compositor._visible_widgets = visible_map, visible_widgets
    return styled


def follows_bottom(widget: Widget) -> bool:
    """Whether `widget` is anchored and the user has not scrolled it away since
    (`Widget._anchored`, `Widget._anchor_released`: Textual 8 has no public form of the
    second; `is_anchored` stays true after the user scrolls)."""
    return bool(widget._anchored and not widget._anchor_released)


# -- helpers for the rest of the UI ---------------------------------------------------


def drawing_allowed(app: App, screen: Screen) -> bool:
    """Whether a draw out of the frame timer's turn may happen now: the app runs, no
    batch is open (`App._batch_count`), and `screen` is the one on top."""
    return bool(
        not app._batch_count and app.is_running and screen is app.screen and screen.is_current
    )


def draw_widgets(screen: Screen, widgets: Collection[Widget]) -> bool:
    """Draw the pending changes of `widgets` in their current place at once, through
    the screen's compositor (`Screen._compositor`); False when one of them is not
    where the last layout put it (not laid out yet, hidden)."""
    compositor = screen._compositor
    if not set(widgets) <= compositor.visible_widgets.keys():
        return False
    compositor.update_widgets(set(widgets))
    app = screen.app
    app._display(screen, compositor.render_update(screen_stack=app._background_screens))
    return True


def next_frame_now(screen: Screen) -> None:
    """Run the screen's next frame now, a scroll's layout included, instead of at the
    next tick of its frame timer (`Screen._on_timer_update`)."""
    screen._scroll_required = True
    screen._on_timer_update()


def scroll_frame_now(widget: Widget) -> bool:
    """Draw `widget`'s scroll now: the screen's next frame (`next_frame_now`), its
    scrollbars in it. False, and nothing done, when no draw may happen now
    (`drawing_allowed`): the frame timer draws it.

    A scroll reaches the screen once the widget is idle (`Widget._check_refresh` posts
    `UpdateScroll`, and the scrollbar its own `Update`): after a frame drawn at once,
    that laid the scroll out a second time, to no change, and drew the scrollbar in a
    frame of its own (6-8 ms of a 2-core machine's main thread after each page key).
    Drawn here, both are taken as done.
    """
    screen = widget.screen
    if not drawing_allowed(widget.app, screen):
        return False
    bars = []  # (asked for only when shown: the property makes a bar that is not there)
    if widget.show_vertical_scrollbar:
        bars.append(widget.vertical_scrollbar)
    if widget.show_horizontal_scrollbar:
        bars.append(widget.horizontal_scrollbar)
    widget._scroll_required = False
    for bar in bars:
        bar._repaint_required = False
    screen._dirty_widgets.update(bars)
    if screen._layout_required:
        _scroll_frame_before_the_layout(screen)
    else:
        next_frame_now(screen)
    return True


def _scroll_frame_before_the_layout(screen: Screen) -> None:
    """The scroll's frame now, the layout pending (`Screen._layout_required`, the
    widgets that asked for it in `Screen._layout_widgets`) in the next one.

    A layout asked for since the last frame (a group mounted into the conversation, a
    block removed, the markers' counts) lays the whole screen out (~155 widgets: 15 ms
    median, 40-200 ms under load on a 2-core machine); done in the scroll's frame, the
    key's change waited for it. The scroll's own layout (`Compositor.reflow_visible`)
    places the widgets on screen from the arrangements (a container whose children
    changed is arranged anew, as the conversation after a mount), and the pending
    layout follows in the next frame, which the screen's idle handler asks for."""
    pending = {node: set(widgets) for node, widgets in screen._layout_widgets.items()}
    screen._layout_widgets.clear()
    screen._layout_required = False
    try:
        next_frame_now(screen)
    finally:
        for node, widgets in pending.items():
            screen._layout_widgets.setdefault(node, set()).update(widgets)
        screen._layout_required = True
        screen.check_idle()


def was_stopped(message: Message) -> bool:
    """A message a handler stopped (`Message.stop`): it bubbles no further; Textual keeps
    this in a private flag and has no public way to read it."""
    return bool(message._stop_propagation)


def vertical_scrollbar_of(widget: Widget, make: Callable[[], ScrollBar]) -> ScrollBar:
    """`widget`'s vertical scrollbar, made by `make()` the first time it is asked for,
    as Textual's `Widget.vertical_scrollbar` makes its own (hidden until the widget
    shows it, started as the widget's child): for a widget whose bar is a subclass."""
    bar = widget._vertical_scrollbar
    if bar is None:
        bar = widget._vertical_scrollbar = make()
        bar.display = False
        widget.app._start_widget(widget, bar)
    return bar


class ListedCommandsPalette(CommandPalette):
    """A `CommandPalette` whose commands pass through `listed` on their way into its
    list (`CommandPalette._refresh_command_list`, called with every batch a search
    gathers); a subclass overrides `listed`."""

    def listed(self, commands: list) -> list:  # type: ignore[type-arg]
        return commands

    def _refresh_command_list(self, command_list, commands, clear_current) -> None:  # type: ignore[no-untyped-def]
        super()._refresh_command_list(command_list, self.listed(commands), clear_current)


class KeptCommandPalette(ListedCommandsPalette):
    """A `ListedCommandsPalette` made once and shown again at every opening: install it
    (`App.install_screen`) and push it each time; popped, it stays mounted and styled.

    Textual's palette starts its providers and its first search when it mounts
    (`CommandPalette._on_mount`) and shuts them down when it is removed
    (`_on_unmount`). This one does that at each showing (`ScreenResume`) and hiding
    (`ScreenSuspend`): at a hiding its field is emptied (unseen), at a showing its
    providers are started again (`Provider._post_init`; made anew when the screen it
    opens over or the style of a match changed), and its first frame is drawn at once
    (`Screen._on_timer_update`), not at the next tick of its frame timer. The list it
    shows in that frame is the one it had if that is what a search of the empty field
    lists now (`listed_now`); otherwise the list is hidden in that frame and the
    search runs once it is drawn.
    It is restyled at a showing only when the app's CSS changed since it was last
    styled (`Screen._css_update_count`, which `App.refresh_css` keeps for the screens
    in the stack). A search whose hits are the ones listed (the same text and styles,
    in the same order) keeps the list as it is, each option given its new hit."""

    def listed_now(self) -> list[str] | None:
        """The plain text of each option a search of the empty field would list now, if
        a subclass can tell without searching; None (the default): search."""
        return None

    def _on_mount(self, event) -> None:  # type: ignore[no-untyped-def,override]
        # Not CommandPalette's (the providers and the search start at each showing):
        # the screen's and the widget's own.
        event.prevent_default()
        Screen._on_mount(self, event)
        Widget._on_mount(self, event)
        self._css_update_count = self.app._css_update_count  # styled as it mounted
        self.__dict__["_slop_listed_for"] = None  # what the list was filled for
        self._animate_busy()

    # Textual's LoadingIndicator redraws itself at a rate it sets at its mount
    # (`auto_refresh`, 1/16 s), shown or not: the palette's runs only while it is shown
    # busy, at that rate.
    async def _watch__show_busy(self) -> None:
        await super()._watch__show_busy()
        self._animate_busy()

    def _animate_busy(self) -> None:
        from textual.widgets import LoadingIndicator

        for indicator in self.query(LoadingIndicator):
            if indicator.auto_refresh is not None:  # its own rate, as its mount set it
                indicator.__dict__["_slop_busy_refresh"] = indicator.auto_refresh
            rate = indicator.__dict__.get("_slop_busy_refresh", 1 / 16)
            wanted = rate if self._show_busy and self.is_current else None
            if indicator.auto_refresh != wanted:
                indicator.auto_refresh = wanted

    def _on_screen_resume(self, event) -> None:  # type: ignore[no-untyped-def]
        # Runs before Screen's own handler, which marks the whole screen for drawing.
        app = self.app
        if self._css_update_count != app._css_update_count:
            self.update_node_styles(animate=False)  # the theme changed since
            self._css_update_count = app._css_update_count
        event.refresh_styles = False
        self._show_again()

    def _show_again(self) -> None:
        from textual.command import CommandInput, CommandList

        app = self.app
        app.post_message(CommandPalette.Opened())
        self._selected_command = None
        # The field was emptied when the palette was hidden: what it holds now was typed
        # since it was pushed, and is searched for below.
        field = self.query_one(CommandInput)
        calling = app.screen_stack[-2] if len(app.screen_stack) > 1 else None
        match_style = self.get_visual_style("command-palette--highlight", partial=True)
        kept = (
            bool(self._providers)
            and self._calling_screen is calling
            and all(provider.match_style == match_style for provider in self._providers)
        )
        if not kept:
            self._calling_screen = calling
            self._providers = [
                provider_class(calling, match_style) for provider_class in self._provider_classes
            ]
        for provider in self._providers:
            provider._init_success = False
            provider._post_init()
        command_list = self.query_one(CommandList)
        fresh = (
            kept
            and not field.value
            and self.__dict__.get("_slop_listed_for") == ("", self._css_update_count)
            and command_list.option_count > 0
            and self.listed_now() == [option.prompt.plain for option in command_list.options]
        )
        if fresh:
            command_list.highlighted = 0  # as a search would leave it
        else:
            self.__dict__["_slop_listed_for"] = None
            if command_list.visible:  # hidden until the search has listed
                # (A list not shown yet, as at the first opening, is hidden by its CSS:
                # hiding it again laid the whole screen out in the opening's frame.)
                command_list.styles.visibility = "hidden"
            self.call_after_refresh(self._search_shown)
        self.call_next(self._draw_now)

    def _draw_now(self) -> None:
        # The first frame now, not at the next tick of the screen's frame timer (up to
        # a frame later): the field and the box, already laid out and styled.
        if drawing_allowed(self.app, self):
            self._on_timer_update()

    def _search_shown(self) -> None:
        from textual.command import CommandInput

        if self.is_current and self.__dict__.get("_slop_listed_for") is None:
            self._gather_commands(self.query_one(CommandInput).value.strip())

    async def _on_screen_suspend(self) -> None:
        from asyncio import create_task, wait

        from textual.command import CommandInput
        from textual.widgets import Input

        self._cancel_gather_commands()
        self._stop_no_matches_countdown()
        self._stop_busy_countdown()
        self._show_busy = False  # nothing is searched while hidden
        self._animate_busy()
        field = self.query_one(CommandInput)
        if field.value:  # emptied now, unseen, so that a key typed at the next showing
            with self.prevent(Input.Changed):  # is never cleared with it
                field.value = ""
        if self._providers:
            await wait([create_task(provider._shutdown()) for provider in self._providers])

    def _refresh_command_list(self, command_list, commands, clear_current) -> None:  # type: ignore[no-untyped-def]
        from textual.command import CommandInput

        commands = sorted(
            self.listed(commands), key=lambda command: command.hit.score, reverse=True
        )
        shown = command_list.options
        if len(shown) == len(commands) and all(
            _same_prompt(old, new) for old, new in zip(shown, commands, strict=True)
        ):
            for old, new in zip(shown, commands, strict=True):
                old.hit = new.hit
            if commands:
                command_list.highlighted = 0
            self._list_visible = bool(commands)
            self._hit_count = len(commands)
        else:
            _refresh_command_list(self, command_list, commands, clear_current)
        query = self.query_one(CommandInput).value.strip()
        self.__dict__["_slop_listed_for"] = (query, self._css_update_count)
        if command_list.styles.clear_rule("visibility"):
            command_list.refresh(layout=True)  # shown: back in the screen's map


def _same_prompt(old, new) -> bool:  # type: ignore[no-untyped-def]
    """Two options of a command list show the same text in the same styles."""
    a, b = old.prompt, new.prompt
    return a.plain == b.plain and list(a.spans) == list(b.spans) and old.disabled == new.disabled


_refresh_command_list = CommandPalette._refresh_command_list


async def mount_ahead(app: App, screen: Screen) -> None:
    """Mount (compose and style) an installed screen that is not shown, as pushing it
    would (`App._get_screen`), then lay it out at the app's size
    (`Screen._refresh_layout`, as a resize does for the screens under the top one), so
    that its first showing finds it built and placed."""
    if not screen.is_running:
        _, mounted = app._get_screen(screen)
        await mounted
        if not screen.is_running:  # closed meanwhile: the app is shutting down
            return
        # Children that mount at their next turn (after the screen's own mount) ask for
        # its layout then: once they have, the layout below is the one its first
        # showing would make.
        await screen.wait_for_refresh()
    if (
        screen.is_attached
        and screen is not app.screen
        and (screen._size != app.size or screen._layout_required)
    ):
        screen._refresh_layout(app.size)
        screen._layout_required = False  # laid out: as the screen's frame timer does


def remember_copied(app: App, text: str) -> None:
    """Put `text` in Textual's in-app clipboard (what Input and TextArea paste), as
    `App.copy_to_clipboard` does, without the OSC 52 escape it also writes."""
    if hasattr(app, "_clipboard"):
        app._clipboard = text


def scroll_update(view: ScrollView, virtual_size: Size) -> None:
    """A `ScrollView` whose content size it set itself: its scrollbars updated now
    (`ScrollView._scroll_update`), not at the next layout."""
    view._scroll_update(virtual_size)


__all__ = [
    "PATCHES",
    "RELIED_ON",
    "HeaderTitle",
    "KeptCommandPalette",
    "ListedCommandsPalette",
    "Patch",
    "draw_widgets",
    "drawing_allowed",
    "fast_tab_widths",
    "fast_wrap_offsets",
    "follows_bottom",
    "lines_to_style",
    "hold_frames",
    "hold_paint",
    "install",
    "installed",
    "mount_ahead",
    "next_frame_now",
    "original",
    "release_frames",
    "release_paint",
    "remember_copied",
    "scroll_keeping_lines",
    "scroll_frame_now",
    "scroll_update",
    "shape_of",
    "style_ahead",
    "uninstall",
    "vertical_scrollbar_of",
    "was_stopped",
]


# -- Textual's parsed CSS kept between starts (the workspace command only) -------------

# The table (slop_tui.codecache.CacheFile) the rules come from: set by `keep_parsed_css`.
_css_table: Any = None
_variables_text: tuple[Any, str] | None = None  # the last variables seen, as text


def _css_variables_text(variables: dict[str, str]) -> str:
    """The stylesheet's variables as one text (parsing substitutes them)."""
    global _variables_text
    seen = _variables_text
    if seen is None or seen[0] is not variables:
        text = "\n".join(f"{k}={v}" for k, v in sorted(variables.items()))
        seen = _variables_text = (variables, text)
    return seen[1]


def _parse_rules_kept(  # type: ignore[no-untyped-def]
    self: Stylesheet, css, read_from, is_default_rules=False, tie_breaker=0, scope=""
):
    """`Stylesheet._parse_rules`, its rules taken from the user cache when this text was
    parsed before with the same variables (by this Textual and Python)."""
    parse = _ORIGINALS[(Stylesheet, "_parse_rules")]
    table = _css_table
    cache_key = (css, read_from, is_default_rules, tie_breaker, scope)
    rules = self._parse_cache.get(cache_key)
    if rules is not None or table is None or not _storable(cache_key):
        return rules if rules is not None else parse(self, *cache_key)
    import pickle

    key = (*cache_key, _css_variables_text(self._variables))
    data = table.get(key)
    if data is not None:
        try:
            rules = pickle.loads(data)
        except Exception:  # a damaged entry: parsed again (and replaced)
            rules = None
        if type(rules) is list and all(type(rule) is RuleSet for rule in rules):
            self._parse_cache[cache_key] = rules
            return rules
    rules = parse(self, *cache_key)
    if not any(rule.errors for rule in rules):  # Textual raises for those: never kept
        try:
            table.put(key, pickle.dumps(rules, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:  # noqa: S110 - a rule that cannot be pickled is parsed each start
            pass
    return rules


def _storable(key: tuple) -> bool:
    css, read_from, is_default, tie_breaker, scope = key
    return (
        type(css) is str
        and type(read_from) is tuple
        and len(read_from) == 2
        and all(type(part) is str for part in read_from)
        and type(is_default) is bool
        and type(tie_breaker) is int
        and type(scope) is str
    )


def _css_key(key: object) -> bool:
    """A key of the kept-CSS table read back: what `_parse_rules_kept` writes."""
    return type(key) is tuple and len(key) == 6 and _storable(key[:5]) and type(key[5]) is str


def keep_parsed_css(folder: str | os.PathLike[str]) -> bool:
    """Parse Textual's CSS (the app's, its themes' variables, the widgets' DEFAULT_CSS)
    once and keep the rules in `folder` (the user cache): a later start with the same
    texts, variables, Textual and Python unpickles them instead of parsing (~25-45 ms of
    CPU before the first frame). The file is written with the dataclass code cache
    (slop_tui/codecache.py, `save_code_cache`), is trusted like it (the user's own),
    and one that cannot be read is ignored and replaced. False when Textual's
    `_parse_rules` is not the one this was written for (then nothing changes)."""
    global _css_table
    from pathlib import Path

    import rich
    import textual

    from slop_tui.codecache import CacheFile, installed_stamp, keep_with_code_cache

    if not KEPT_CSS.fits():
        return False
    if _css_table is None:
        import sys

        # Rules pickle Textual's and Rich's classes: the file is per installed copy of
        # each (a package's folder changes when an upgrade replaces its files).
        textual_folder = os.path.dirname(textual.__file__ or "")
        rich_folder = os.path.dirname(rich.__file__ or "")
        stamp = installed_stamp([textual_folder, os.path.join(textual_folder, "css"), rich_folder])
        if stamp is None:
            return False
        name = (
            f"textual-css-8.2.8-{sys.implementation.cache_tag}-{sys.hexversion:x}-{stamp}.marshal"
        )
        _css_table = CacheFile(Path(folder) / name, _css_key)
        keep_with_code_cache(_css_table)
    KEPT_CSS.apply()
    return True


def forget_parsed_css() -> None:
    """Textual's own `_parse_rules` again, and no table (the tests)."""
    global _css_table, _variables_text
    from slop_tui.codecache import stop_keeping

    KEPT_CSS.uninstall()
    if _css_table is not None:
        stop_keeping(_css_table)
    _css_table = _variables_text = None


# -- the patches ----------------------------------------------------------------------


PATCHES: tuple[Patch, ...] = (
    CLASS_SETUP_KEPT,
    _patch(
        "undo-past-the-end",
        TextArea,
        {"scroll_cursor_visible": _scroll_to_a_cursor_inside},
        "25771da19698",
    ),
    _patch(
        "placeholder-without-room",
        TextArea,
        {"render_line": _placeholder_only_with_room},
        "6831041bcf6d",
    ),
    _patch(
        "rewrap-on-width",
        TextArea,
        {"_on_resize": _rewrap_on_a_new_width},
        "6dd30c9cc0c1:132f867413b9",
        reads=[_wrapped_document.WrappedDocument.wrap],
    ),
    _patch(
        "reflow-maps",
        Compositor,
        {"reflow": _reflow_and_validate, "reflow_visible": _reflow_visible_from_the_drawn_map},
        "5cfaeeb4e728:456a73572248:5714aebc8fe1",
        reads=[Compositor.__init__],
    ),
    _patch(
        "visible-map-kept",
        Compositor,
        {"full_map": property(_full_map_keeping_what_is_shown)},
        "cb8a573d0c67:5714aebc8fe1",
        reads=[Compositor.__init__],
    ),
    _patch(
        "map-kept-through-repaints",
        Compositor,
        {"update_widgets": _update_widgets_keeping_the_map},
        "b37f80084370:5714aebc8fe1",
        reads=[Compositor.__init__],
    ),
    _patch(
        "opaque-top-alone",
        App,
        {"_background_screens": property(_none_under_an_opaque_top)},
        "de55fd91ca80",
    ),
    _patch(
        "scrollview-size-once",
        ScrollView,
        {"_size_updated": _size_updated_if_changed},
        "a81c0683f8d3",
    ),
    _patch(
        "held-frames",
        Screen,
        {"_compositor_refresh": _refresh_unless_held},
        "145f00e1646d:e6a17a4244fb",
        reads=[Screen._on_timer_update],
    ),
    _patch(
        "first-resume-unstyled",
        Screen,
        {"_on_screen_resume": _resumed_without_restyle_at_first},
        "73f745874a97",
    ),
    _patch(
        "ascii-wrap",
        _wrapped_document,
        {"compute_wrap_offsets": fast_wrap_offsets, "get_tab_widths": fast_tab_widths},
        "83605a243684:57089cb9db2a:132f867413b9",
        reads=[_wrapped_document.WrappedDocument.wrap],
    ),
    _patch(
        "timer-grid",
        Timer,
        {"_run": _run_on_the_next_tick},
        "6809b445b8c5:f05e357d6f39:ac550025821f",
        reads=[Timer.__init__, Timer._tick],
    ),
    _patch(
        "one-pass-reflow",
        Screen,
        {"_refresh_layout": _refresh_layout_once},
        "3e7c16fe653b",
    ),
    _patch(
        "one-pass-reflow",
        Widget,
        {"_size_updated": _size_updated_in_the_reflow},
        "0842561acf72:66a591359605",
        reads=[Widget._check_anchor],
    ),
    _patch(
        "every-layout-counted",
        Widget,
        {"refresh": _refresh_counting_every_layout},
        "8b0fb8e1679c:7d759487b695",
        reads=[Widget._get_box_model],
    ),
    _patch(
        "lazy-strip-caches",
        Strip,
        {"__init__": _strip_without_caches, "__getattr__": _strip_cache_when_used},
        "1d1023c96631:2b458a1cdd9c",
        reads=[Strip],
    ),
    _patch(
        "lazy-component-styles",
        Stylesheet,
        {"_process_component_classes": _component_styles_when_read},
        "e22be4699223:bb0e9e058ac1",
        reads=[DOMNode.get_component_styles],
    ),
    _patch(
        "colours-cache-by-colour",
        StylesCache,
        {"get_inner_outer": _inner_outer_by_colour},
        "db7d6bd4ce6b",
    ),
    _patch(
        "strips-without-self-cycles",
        Strip,
        {"divide": _divide_without_self_cycle, "crop_extend": _crop_extend_without_self_cycle},
        "e4665b19a5f5:1fdefc81e4fe",
    ),
    _patch(
        "chops-of-what-shows",
        Compositor,
        {"_render_chops": _chops_of_what_shows},
        "0e5596e1d16e:d1ecb92a70db:ba66df0a0946",
        reads=[Compositor.cuts, Compositor.visible_widgets],
    ),
    _patch(
        "frames-written-at-once",
        WriterThread,
        {"write": _write_at_once, "run": _run_counting_written},
        "326102081a92:bce37a62f99c",
    ),
    _patch(
        "paste-kept-whole",
        XTermParser,
        {"parse": _parse_keeping_pastes_whole},
        "5d0117122cd8",
    ),
    _patch(
        "removed-lets-go",
        Widget,
        {"_message_loop_exit": _exit_letting_go},
        "c198a0aaf52f:1d21e4858b4c",
        reads=[LRUCache],
    ),
)

# Installed by `keep_parsed_css` (the workspace command), not by `install()`.
KEPT_CSS = _patch(
    "kept-css",
    Stylesheet,
    {"_parse_rules": _parse_rules_kept},
    "5667dc571814:39bb0b962c6a",
    reads=[Stylesheet.__init__],
)


def install(skip: Collection[str] | None = None) -> list[str]:
    """Put every patch in place (installing twice changes nothing), except those named
    in `skip` (by default the environment's SLOP_TUI_TEXTUAL_PATCHES_OFF) and those
    whose target is not what they were written for (each warns and leaves Textual
    alone). The names of the patches in place."""
    if skip is None:
        skip = _left_out()
    done: list[str] = []
    for name in dict.fromkeys(p.name for p in PATCHES):
        parts = [p for p in PATCHES if p.name == name and not p.installed()]
        if "all" in skip or name in skip or not _fit(name, parts):
            continue
        for patch in parts:
            patch.apply()
        done.append(name)
    return done


def uninstall(names: Collection[str] | None = None) -> None:
    """Give Textual back its own code (for the patches named, or all of them)."""
    for patch in PATCHES:
        if names is None or patch.name in names:
            patch.uninstall()


def installed() -> list[str]:
    """The names of the patches in place."""
    return list(dict.fromkeys(p.name for p in PATCHES if p.installed()))
