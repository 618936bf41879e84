"""Two fixes to Textual's frame work that the workspace depends on for its key latency.

Both were found profiling bench/tui.py (Textual 8.2.8); each is a pure saving --
the screen is drawn exactly as before:

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
"""

from __future__ import annotations

from textual._compositor import Compositor
from textual.geometry import Size
from textual.scroll_view import ScrollView

_reflow = Compositor.reflow
_size_updated = ScrollView._size_updated


def _reflow_and_validate(self: Compositor, parent, size):  # type: ignore[no-untyped-def]
    # Lookups made while the new map is built (a scrollbar's reactive refreshing it,
    # a widget asking for its size) read the previous map, which is what they read
    # between two layouts anyway, instead of arranging the whole screen once more.
    self._full_map_invalidated = False
    result = _reflow(self, parent, size)
    self._full_map_invalidated = False  # the map reflow just built covers every widget
    return result


def _size_updated_if_changed(
    self: ScrollView, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
) -> bool:
    seen = (size, virtual_size, container_size, self.virtual_size, self.styles._cache_key)
    if self.__dict__.get("_slop_size_seen") == seen:
        return False  # what _scroll_update would compute is what it computed last time
    self.__dict__["_slop_size_seen"] = seen
    return _size_updated(self, size, virtual_size, container_size, layout)


def install() -> None:
    """Patch both (once; each only if Textual still has what it relies on)."""
    if Compositor.reflow is not _reflow_and_validate and hasattr(
        Compositor(), "_full_map_invalidated"
    ):
        Compositor.reflow = _reflow_and_validate  # type: ignore[method-assign]
    if ScrollView._size_updated is not _size_updated_if_changed:
        ScrollView._size_updated = _size_updated_if_changed  # type: ignore[method-assign]
