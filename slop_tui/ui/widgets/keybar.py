"""The footer: the keys that matter now, drawn as one line by one widget.

Textual's `Footer` is a container of one `FooterKey` widget per binding and
recomposes itself on every binding refresh: each focus change and each turn's
start and end (Esc to cancel comes and goes) unmounted and mounted a dozen
widgets and laid the screen out again, 10-30 ms inside the frame of the key
that caused it. `KeyBar` keeps the look (the same theme variables, paddings,
the palette key on the right behind a thin rule) and redraws one line; a
click runs the key, as a click on a `FooterKey` does.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import groupby

from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget


@dataclass(frozen=True)
class _Key:
    key: str  # what a click simulates
    display: str
    description: str
    enabled: bool
    tooltip: str
    grouped: bool = False  # one of several keys sharing a group description


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    key: _Key | None  # None: a group's description (not clickable)


class KeyBar(Widget, can_focus=False):
    """One line of keys, docked at the bottom; redrawn, never recomposed."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {
        "keybar--key",
        "keybar--description",
        "keybar--hover",
        "keybar--rule",
    }
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        width: 1fr;
        color: $footer-foreground;
        background: $footer-background;
        .keybar--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .keybar--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        .keybar--hover {
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        .keybar--rule {
            color: $foreground 20%;
        }
    }
    """

    def __init__(self, *, show_command_palette: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.show_command_palette = show_command_palette
        self._keys: tuple[tuple[_Key, ...], tuple[tuple[str, tuple[_Key, ...]], ...], _Key | None]
        self._keys = ((), (), None)
        self._spans: list[_Span] = []
        self._hover: _Key | None = None
        self.redraws = 0  # how often the keys changed (tests)

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)
        self.bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    # -- what is shown ---------------------------------------------------------

    @property
    def shown_keys(self) -> list[_Key]:
        """Every key on the bar, left to right, the palette key last."""
        single, groups, palette = self._keys
        keys = list(single) + [k for _, members in groups for k in members]
        return keys + ([palette] if palette is not None else [])

    def bindings_changed(self, screen) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        if not self.app.app_focus:
            return  # the terminal lost focus: nothing is focused, keep what was shown
        keys = self._collect()
        if keys != self._keys:
            self._keys = keys
            self.redraws += 1
            self.refresh()

    def _collect(self):
        app = self.app
        active = self.screen.active_bindings
        by_action: defaultdict[str, list] = defaultdict(list)
        shown = [entry for entry in active.values() if entry[1].show]
        # The focused widget's keys first (what can be done here), then the app's and the
        # screen's in the order `app.footer_rank(binding)` gives; keys that do not fit
        # fall off the end.
        rank = getattr(app, "footer_rank", None)
        if rank is not None:
            screen = self.screen
            shown.sort(
                key=lambda e: (
                    (general := e[0] is app or e[0] is screen),
                    rank(e[1]) if general else 0,
                )
            )
        for _node, binding, enabled, tooltip in shown:
            by_action[binding.action].append((binding, enabled, tooltip))
        single: list[_Key] = []
        groups: list[tuple[str, tuple[_Key, ...]]] = []
        for group, members in groupby(by_action.values(), lambda m: m[0][0].group):
            members = list(members)
            if group is not None and len(members) > 1:
                keys = tuple(
                    _Key(b.key, app.get_key_display(b), "", on, tip or b.description, True)
                    for b, on, tip in (m[0] for m in members)
                )
                groups.append((group.description, keys))
            else:
                single.extend(
                    _Key(b.key, app.get_key_display(b), b.description, on, tip)
                    for b, on, tip in (m[0] for m in members)
                )
        palette = None
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            found = active.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _node, b, on, tip = found
                palette = _Key(b.key, app.get_key_display(b), b.description, on, tip)
        return tuple(single), tuple(groups), palette

    # -- drawing ---------------------------------------------------------------

    def _styles(self) -> tuple[Style, Style, Style, Style]:
        return (
            self.get_component_rich_style("keybar--key"),
            self.get_component_rich_style("keybar--description"),
            self.get_component_rich_style("keybar--hover"),
            self.get_component_rich_style("keybar--rule"),
        )

    def _piece(self, key: _Key, styles, *, grouped: bool = False, compact: bool = False) -> Text:
        key_style, description_style, hover_style, _ = styles
        if grouped:
            text = Text.assemble((key.display, key_style))
        elif compact:  # as Textual draws the palette key: no padding around the key
            text = Text.assemble(
                (key.display, key_style), (f" {key.description}", description_style)
            )
        else:
            text = Text.assemble(
                (f" {key.display} ", key_style), (f"{key.description} ", description_style)
            )
        if key is self._hover:
            text.stylize(hover_style)
        if not key.enabled:
            text.stylize(Style(dim=True))
        return text

    def render(self) -> Text:
        styles = self._styles()
        description_style = styles[1]
        width = self.size.width
        single, groups, palette = self._keys
        right = Text()
        if palette is not None:
            right = Text.assemble(("▏", styles[3]), self._piece(palette, styles, compact=True), " ")
        room = max(0, width - right.cell_len)
        line = Text(no_wrap=True, overflow="crop", end="")
        spans: list[_Span] = []

        def add(piece: Text, key: _Key | None) -> bool:
            if line.cell_len + piece.cell_len > room:
                return False
            spans.append(_Span(line.cell_len, line.cell_len + piece.cell_len, key))
            line.append_text(piece)
            return True

        fits = all(add(self._piece(k, styles), k) for k in single)
        for description, members in groups if fits else ():
            if not add(Text(" "), None):
                break
            if not all(add(self._piece(k, styles, grouped=True), k) for k in members):
                break
            if not add(Text(f" {description} ", description_style), None):
                break
        if palette is not None:
            line.append(" " * (room - line.cell_len))
            start = line.cell_len + 1  # after the rule, to the end
            spans.append(_Span(start, start + right.cell_len - 1, palette))
            line.append_text(right)
        line.stylize_before(self.rich_style)
        self._spans = spans
        return line

    # -- mouse -----------------------------------------------------------------

    def key_at(self, x: int) -> _Key | None:
        for span in self._spans:
            if span.start <= x < span.end:
                return span.key
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        key = self.key_at(event.x)
        if key is not self._hover:
            self._hover = key
            self.tooltip = key.tooltip if key is not None and key.tooltip else None
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.tooltip = None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        key = self.key_at(event.x)
        if key is None:
            return
        if key.enabled:
            self.app.simulate_key(key.key)
        else:
            self.app.bell()
