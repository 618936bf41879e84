"""The workspace's layout at any size (docs/usage.md, "The screen at every size"): the
side panes take a share of the terminal (never less than their minimum), the
conversation keeps MIN_CONVERSATION columns, and a pane that would squeeze it below
gives way. Plain state and arithmetic; the workspace screen applies it."""

from __future__ import annotations

from dataclasses import dataclass, field

NARROW = 110  # below this many columns both side panes start hidden
MIN_CONVERSATION = 44
SHORT = 32  # below this many rows: no gauge chart, one side part at a time (app.tcss)
SIDE_PARTS = ("state", "scratchpad", "preview")  # the right pane's parts, top to bottom
# The group list's rows (read with the conversation's first screen, before the list's
# module is imported): the characters of a prompt looked at for its one-line snippet,
# and how many of the newest groups' prompts a load reads; the older ones come in a
# second read, after the list is drawn (`GroupList.fill_prompts`).
SNIPPET_SOURCE = 240
PROMPTS_FIRST = 100
LEFT_SHARE, LEFT_MIN = 0.25, 30
RIGHT_SHARES, RIGHT_MIN = (0.22, 0.28, 0.36, 0.44), 32  # alt+→ / alt+← step through them
# The app's keys in the footer, in this order (after the focused widget's own); a
# hidden pane's key comes right after help, a shown one's at the end.
FOOTER_ORDER = (
    "help",
    "focus_prompt",
    "focus_groups",
    "provider_dialog",
    "session_dialog",
    "search_history",
    "retry",
    "quit",
)


@dataclass
class PaneLayout:
    """Which side panes the user wants and how wide the right one is."""

    shown: dict[str, bool] = field(default_factory=lambda: {"left": True, "right": True})
    side_width: int = 1  # the index in RIGHT_SHARES
    narrow: bool | None = None
    # On a short terminal the right pane shows one part at a time: this one.
    side_part: str = "state"
    short: bool = False

    def next_part(self) -> str:
        """The side part after the shown one (STATE, scratchpad, preview, again)."""
        i = SIDE_PARTS.index(self.side_part)
        self.side_part = SIDE_PARTS[(i + 1) % len(SIDE_PARTS)]
        return self.side_part

    def resized(self, width: int) -> None:
        """Below NARROW columns both side panes start hidden (f7/f8, named in the footer,
        open them); crossing back shows them again."""
        narrow = width < NARROW
        if narrow != self.narrow:
            self.narrow = narrow
            self.shown = {"left": not narrow, "right": not narrow}

    def fit(self, width: int, opened: str | None = None) -> tuple[dict[str, int], str | None]:
        """Each pane's width for a terminal `width`, and the pane that gave way (None).
        When both do not fit, the one not just `opened` gives way (the right one on a
        resize); a lone pane narrows."""
        widths = {
            "left": max(LEFT_MIN, round(width * LEFT_SHARE)),
            "right": max(RIGHT_MIN, round(width * RIGHT_SHARES[self.side_width])),
        }
        room = width - MIN_CONVERSATION
        gave_way = None
        if self.shown["left"] and self.shown["right"] and sum(widths.values()) > room:
            gave_way = "left" if opened == "right" else "right"
            self.shown[gave_way] = False
        return {name: max(16, min(w, room)) for name, w in widths.items()}, gave_way

    def toggle(self, name: str) -> str | None:
        """Show or hide a pane; the name when it was opened."""
        self.shown[name] = not self.shown[name]
        return name if self.shown[name] else None

    def step_side(self, step: int) -> str | None:
        """The right pane one share wider (+1) or narrower (-1)."""
        self.side_width = max(0, min(len(RIGHT_SHARES) - 1, self.side_width + step))
        return "right" if self.shown["right"] else None

    def footer_rank(self, binding_id: str | None) -> float:
        """Where an app key stands in the footer (ui/widgets/keybar.py)."""
        pane = {"toggle_left": "left", "toggle_right": "right"}.get(binding_id or "")
        if pane is not None:  # a hidden pane's key right after help, a shown one's last
            return len(FOOTER_ORDER) + 1 if self.shown[pane] else 0.5
        if binding_id in FOOTER_ORDER:
            return FOOTER_ORDER.index(binding_id)
        return len(FOOTER_ORDER)
