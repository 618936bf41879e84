"""What every dialog shares: inert text, a one-line pick list and the dialog box.

Anything a model or a user typed is shown through `plain`, which turns
control characters into visible symbols and never parses markup, so a tool
argument cannot restyle, hide or reorder part of the dialog showing it.
"""

from __future__ import annotations

import time
from typing import TypeVar

from rich.text import Text
from textual import events
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList

from slop_tui.ui import text as _text

T = TypeVar("T")

SHORT_DIALOG = 32  # below this many rows a dialog drops its blank rows (ui/layout.py SHORT)


def neutralise(text: str) -> str:
    """Exact text for a dialog: controls visible, CRLF shown as ␍ plus a line end."""
    return _text.neutralise(text, crlf_as_newline=False)


def plain(text: str, style: str = "") -> Text:
    """Untrusted text as a renderable that is never parsed as markup."""
    return Text(neutralise(text), style=style)


def option_row(current: bool) -> Text:
    """A one-line option row (long rows end in an ellipsis) starting with the current mark."""
    line = Text(no_wrap=True, overflow="ellipsis", end="")
    line.append("✓ " if current else "  ", style="bold")
    return line


class PickList(OptionList):
    """An OptionList where a click highlights and a double click (or Enter) chooses.

    In a dialog a single click should not act at once: the user may still want
    to edit the model or name field before confirming.
    """

    def on_click(self, event: events.Click) -> None:
        event.prevent_default()  # skip OptionList's click-selects handler
        index = event.style.meta.get("option")
        if index is None or self.get_option_at_index(index).disabled:
            return
        self.highlighted = index
        if event.chain >= 2:
            self.action_select()


class DialogBox(VerticalScroll, can_focus=False):
    """A dialog's box: as tall as its content up to the screen's limit, then it
    scrolls (at 80x24 no dialog is cut off); not a focus stop of its own."""


class Dialog(ModalScreen[T]):
    """A centred box (`DialogBox`, id "dialog") with a title line and a row of buttons."""

    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > #dialog {
        width: 84; max-width: 95%; height: auto; max-height: 95%;
        border: thick $primary; background: $surface; padding: 1 2;
    }
    Dialog .dialog-title { text-style: bold; margin-bottom: 1; }
    Dialog .dialog-notice { color: $warning; margin-top: 1; height: auto; }
    Dialog .dialog-error { color: $error; height: auto; }
    Dialog .dialog-buttons { height: auto; margin-top: 1; align-horizontal: right; }
    Dialog .dialog-buttons Button { margin-left: 1; min-width: 10; }
    Dialog .dialog-field { height: auto; margin-top: 1; }
    Dialog .dialog-field > .dialog-label { width: auto; padding: 1 1 0 0; }
    Dialog .dialog-field > Input { width: 1fr; }
    Dialog PickList { height: auto; max-height: 14; text-wrap: nowrap; text-overflow: ellipsis; }
    Dialog.-short > #dialog { padding: 0 2; }
    Dialog.-short .dialog-title { margin-bottom: 0; }
    Dialog.-short .dialog-field, Dialog.-short .dialog-buttons { margin-top: 0; }
    """

    def on_resize(self, event: events.Resize) -> None:
        # A short terminal (80x24): the box drops its blank rows, so a dialog with a
        # notice still shows its buttons without scrolling.
        self.set_class(event.size.height < SHORT_DIALOG, "-short")


class Arming:
    """When a dialog that opens while the user may be typing (an approval, a yes/no
    question) reads its answer keys: `delay` seconds after it appears, both by the
    clock when the key is handled and by the key's own time. A key typed ahead and
    kept while the app was busy is handled later but keeps the time it was typed
    (ui/keyroute.py), so it cannot answer a question that was not yet readable."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.at = float("inf")  # time.monotonic() from which keys answer (set when shown)
        self._at_event_clock = float("inf")  # the same, on the clock events are stamped by
        self._key_time: float | None = None

    def shown(self, mount: events.Mount) -> None:
        self.at = time.monotonic() + self.delay
        self._at_event_clock = mount.time + self.delay

    def key(self, event: events.Key) -> None:
        """A key reached the dialog (before its bindings act on it)."""
        self._key_time = event.time

    def ready(self) -> bool:
        """An answer key acts now: the dialog was readable, and so it was when the key was
        typed."""
        typed, self._key_time = self._key_time, None
        if time.monotonic() < self.at:
            return False
        return typed is None or typed >= self._at_event_clock


class ArmedDialog(Dialog[T]):
    """A dialog whose answer keys wait for its `arming` (made in the subclass's
    `__init__`): shown as it mounts, told of each key that reaches it."""

    arming: Arming

    def on_mount(self, event: events.Mount) -> None:
        self.arming.shown(event)

    def on_key(self, event: events.Key) -> None:
        self.arming.key(event)


__all__ = [
    "ArmedDialog",
    "Arming",
    "Dialog",
    "DialogBox",
    "PickList",
    "neutralise",
    "option_row",
    "plain",
]
