"""The side pane's switch on a short terminal: one part at a time, named on one line.

Below `SHORT` rows the right pane cannot give STATE, the scratchpad and the
context preview usable room each, so it shows one of them under the gauge and
this line names all three, the shown one marked. A click on a name shows that
part; F9 focuses the shown part, and F9 again moves to the next one
(`WorkspaceScreen.action_focus_side`).
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from slop_tui.ui.layout import SIDE_PARTS

LABELS = {"state": "STATE", "scratchpad": "Scratchpad", "preview": "Preview"}


class SideSwitch(Widget):
    """One line: the side parts by name, the shown one marked; a click switches."""

    DEFAULT_CSS = """
    SideSwitch { height: 1; background: $panel; color: $text-muted; }
    """

    class Chosen(Message):
        """A click on a part's name."""

        def __init__(self, part: str) -> None:
            super().__init__()
            self.part = part

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.part = SIDE_PARTS[0]
        self.hint = ""  # the key that moves on ("F9"), drawn at the end
        self._spans: list[tuple[int, int, str]] = []

    def show_part(self, part: str, hint: str) -> None:
        if (part, hint) != (self.part, self.hint):
            self.part, self.hint = part, hint
            self.refresh()

    def render(self) -> Text:
        line = Text(" ")
        self._spans = []
        for i, part in enumerate(SIDE_PARTS):
            name = LABELS[part]
            if i:
                line.append(" │ ")
            start = len(line)
            if part == self.part:
                line.append(f"▸{name}", style="bold reverse")
            else:
                line.append(name)
            self._spans.append((start, len(line), part))
        if self.hint:
            line.append(f"  {self.hint} next", style="dim")
        return line

    def on_click(self, event: events.Click) -> None:
        for start, end, part in self._spans:
            if start <= event.x < end:
                self.post_message(self.Chosen(part))
                return
