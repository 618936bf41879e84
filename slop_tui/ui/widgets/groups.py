"""The left pane: sessions and the current session's conversation groups.

Both lists are `OptionList`s, which render only the visible lines, so a
session with 5,000 groups scrolls as fast as one with five (see
providers_testing.md §5). The widgets only post intents; the app turns them
into `slop_tui.commands.dispatch` calls and reloads the lists afterwards.

Groups are listed oldest first, newest at the bottom, like the conversation
they index: the window (the last N groups) is then one block at the bottom,
End jumps to the newest group, and a new turn appends a line instead of
shifting every index.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.content import Content, Span
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from slop_tui.records import (
    STATUS_DROPPED,
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    STATUS_SUMMARIZED,
    GroupSummary,
    SessionSummary,
)

if TYPE_CHECKING:
    from slop_tui.workspace import Workspace

# Rows in these states are not sent and do not count towards the window.
HIDDEN = frozenset({STATUS_DROPPED, STATUS_SUMMARIZED})

# First mark column: where the group stands relative to the next request.
MARK_IN_WINDOW = "●"
MARK_OUTSIDE = "○"
MARK_DROPPED = "×"
MARK_SUMMARIZED = "Σ"
# Second mark column: how the turn ended, when it did not end well.
FLAG_INTERRUPTED = "◐"
FLAG_ERROR = "!"
# Every mark is a character Rich measures on its fast path (Latin-1, Greek,
# geometric shapes): one slow-path glyph per line made loading 5,000 lines
# several times slower.

SNIPPET_SOURCE = 240  # characters of a prompt looked at for its one-line snippet


def compact_tokens(n: int) -> str:
    """1234 -> '1.2k': token counts in five cells or fewer."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"


# Control characters (an ESC from a pasted log, ...) must never reach the terminal.
_CONTROLS = dict.fromkeys([*range(32), *range(0x7F, 0xA0)], " ")


def snippet(text: str, width: int = 60) -> str:
    """The head of a prompt on one line; the list's `text-overflow` adds the ellipsis."""
    # Only the head is flattened: prompts can be whole pasted files.
    return " ".join(text[:SNIPPET_SOURCE].translate(_CONTROLS).split())[:width]


def window_membership(
    groups: Iterable[GroupSummary], window_size: int, lane: str | None = None
) -> set[int]:
    """Ids of the groups the next request includes.

    A group is in the window when it is among the last `window_size` groups of
    its lane that are neither dropped nor summarized (0: every such group).
    With `lane` given, only that lane is sent (Workspace.prompt filters by the
    session's lane), so groups of other lanes are never in the window.
    """
    by_lane: dict[str, list[int]] = {}
    for g in groups:
        if g.status not in HIDDEN and (lane is None or g.lane == lane):
            by_lane.setdefault(g.lane, []).append(g.group_id)
    inside: set[int] = set()
    for ids in by_lane.values():
        ids.sort()
        inside.update(ids if window_size <= 0 else ids[-window_size:])
    return inside


class GroupList(OptionList):
    """One line per conversation group: marks, id, tokens and a prompt snippet.

    Marks: `●` in the window, `○` outside it, `×` dropped, `Σ` summarized;
    a second column shows `◐` for an interrupted turn and `!` for one that
    ended in an error. Styles come from the component classes below, so a
    theme restyles them through CSS (`GroupList > .grouplist--dropped`).
    Muted parts are `dim` rather than a muted colour: a fixed colour turns
    unreadable on the highlight bar, and `auto` colours (`$text-muted` is
    `auto 60%`) turn white because a component style has no background.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Show", id="groups_show"),
        Binding("d", "drop_toggle", "Drop/restore", id="groups_drop_toggle"),
        Binding("x", "remove", "Remove", id="groups_remove"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "grouplist--in-window",
        "grouplist--outside",
        "grouplist--dropped",
        "grouplist--summarized",
        "grouplist--interrupted",
        "grouplist--error",
        "grouplist--meta",
    }

    DEFAULT_CSS = """
    GroupList {
        height: 1fr;
        scrollbar-gutter: stable;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    GroupList > .grouplist--in-window { color: $text-success; text-style: bold; }
    GroupList > .grouplist--outside { text-style: dim; }
    GroupList > .grouplist--dropped { text-style: dim strike; }
    GroupList > .grouplist--summarized { color: $text-secondary; text-style: italic; }
    GroupList > .grouplist--interrupted { color: $text-warning; text-style: bold; }
    GroupList > .grouplist--error { color: $text-error; text-style: bold; }
    GroupList > .grouplist--meta { text-style: dim; }
    """

    class GroupIntent(Message):
        """An intent about one group; the app turns it into a slash command."""

        def __init__(self, group_list: GroupList, group_id: int) -> None:
            super().__init__()
            self.group_list = group_list
            self.group_id = group_id

        @property
        def control(self) -> GroupList:
            return self.group_list

    class DropToggled(GroupIntent):
        """Drop (`dropped=True`) or restore (`dropped=False`) a group: `/context drop|restore`."""

        def __init__(self, group_list: GroupList, group_id: int, dropped: bool) -> None:
            super().__init__(group_list, group_id)
            self.dropped = dropped

    class RemoveRequested(GroupIntent):
        """Hard-delete a group (`/message remove`); the app asks for confirmation first."""

    class ShowRequested(GroupIntent):
        """Show a group in the conversation pane (enter or click)."""

    class Selected(Message):
        """The highlighted group changed (`None`: none, or the list lost focus).

        `saving` is what dropping the group would take off the next request,
        estimated from the ledger's token counts: positive for a group in the
        window (less whatever slides into the window in its place), negative
        for a dropped group that restoring would bring back, 0 when the
        request would not change. Feed it to `TokenGauge.set_projection`.
        """

        def __init__(self, group_list: GroupList, group_id: int | None, saving: int | None) -> None:
            super().__init__()
            self.group_list = group_list
            self.group_id = group_id
            self.saving = saving

        @property
        def control(self) -> GroupList:
            return self.group_list

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled, markup=False)
        self._groups: list[GroupSummary] = []  # oldest first, parallel to the options
        self._index: dict[int, int] = {}  # group id -> option index
        self._inside: set[int] = set()
        self._window_size = 0
        self._lane: str | None = None
        self._visible: dict[str, list[int]] = {}  # lane -> sorted visible group ids
        self._id_width = 1

    # -- loading -------------------------------------------------------------

    async def refresh_from(self, ws: Workspace) -> None:
        """Reload the session's groups and window size from the ledger."""
        sess = await ws.current()
        groups = await ws.ledger.list_groups(ws.session)
        self.load(groups, sess.window_size, sess.lane)

    def load(
        self, groups: Sequence[GroupSummary], window_size: int, lane: str | None = None
    ) -> None:
        """Show `groups` (any order) with marks for a window of `window_size` groups of `lane`.

        When the ids are unchanged or only new groups were added, only the lines
        whose marks, tokens or prompt changed are re-rendered, and the highlight
        and scroll position stay where they were.
        """
        ordered = sorted(groups, key=lambda g: g.group_id)
        old, old_inside = self._groups, self._inside
        old_highlight = self._highlighted_group()
        scroll_y = self.scroll_y
        was_at_end = self.is_vertical_scroll_end or not old
        self._window_size, self._lane = window_size, lane
        self._inside = window_membership(ordered, window_size, lane)
        self._visible = {}
        for g in ordered:
            if g.status not in HIDDEN and (lane is None or g.lane == lane):
                self._visible.setdefault(g.lane, []).append(g.group_id)
        self._groups = ordered
        self._index = {g.group_id: i for i, g in enumerate(ordered)}
        id_width = len(str(ordered[-1].group_id)) if ordered else 1
        same_ids = len(old) <= len(ordered) and all(
            a.group_id == b.group_id for a, b in zip(old, ordered, strict=False)
        )
        if old and same_ids and id_width == self._id_width:
            self._update_rows(old, old_inside)
            self.add_options(self._option(g) for g in ordered[len(old) :])
        else:
            self._id_width = id_width
            with self.prevent(OptionList.OptionHighlighted):
                self.set_options(self._option(g) for g in ordered)
                if old_highlight is not None:
                    self.highlighted = self._nearest_index(old_highlight)
            if self.highlighted is None and not was_at_end:
                self.call_after_refresh(self.scroll_to, y=scroll_y, animate=False, immediate=True)
        if was_at_end and self.highlighted is None:
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)
        if self.highlighted is not None and self.has_focus:
            self._post_selected()

    def _update_rows(self, old: Sequence[GroupSummary], old_inside: set[int]) -> None:
        """Re-render the lines whose group or window membership changed, in place."""
        changed = False
        for i, (before, after) in enumerate(zip(old, self._groups, strict=False)):
            gid = after.group_id
            if before != after or (gid in old_inside) != (gid in self._inside):
                option = self.options[i]
                # Every line is one row high, so the line cache stays valid; the public
                # replace_option_prompt_at_index would re-measure all 5,000 lines.
                set_prompt = getattr(option, "_set_prompt", None)
                if set_prompt is None:  # a future Textual: the public, slower path
                    self.replace_option_prompt_at_index(i, self._row(after))
                else:
                    set_prompt(self._row(after))
                changed = True
        if changed:
            self._option_render_cache.clear()
            self.refresh()

    def _nearest_index(self, group_id: int) -> int | None:
        if not self._groups:
            return None
        ids = [g.group_id for g in self._groups]
        return min(bisect_left(ids, group_id), len(ids) - 1)

    # -- rendering -----------------------------------------------------------

    def _option(self, g: GroupSummary) -> Option:
        return Option(self._row(g), id=str(g.group_id))

    def _row(self, g: GroupSummary) -> Content:
        # Spans name component classes (".grouplist--dropped"): Textual resolves them
        # when a line is drawn, so a theme switch restyles the list without a rebuild.
        if g.status == STATUS_DROPPED:
            mark, row_style = MARK_DROPPED, ".grouplist--dropped"
        elif g.status == STATUS_SUMMARIZED:
            mark, row_style = MARK_SUMMARIZED, ".grouplist--summarized"
        elif g.group_id in self._inside:
            mark, row_style = MARK_IN_WINDOW, ""
        else:
            mark, row_style = MARK_OUTSIDE, ".grouplist--outside"
        if g.status == STATUS_INTERRUPTED:
            flag, flag_style = FLAG_INTERRUPTED, ".grouplist--interrupted"
        elif g.status == STATUS_ERROR:
            flag, flag_style = FLAG_ERROR, ".grouplist--error"
        else:
            flag, flag_style = " ", ""
        meta = f" {g.group_id:>{self._id_width}} {compact_tokens(g.tokens):>5} "
        text = f"{mark}{flag}{meta}{snippet(g.prompt)}"
        spans = [Span(0, 1, row_style or ".grouplist--in-window")]
        if flag_style:
            spans.append(Span(1, 2, flag_style))
        spans.append(Span(2, 2 + len(meta), row_style or ".grouplist--meta"))
        if row_style:
            spans.append(Span(2 + len(meta), len(text), row_style))
        return Content(text, spans, strip_control_codes=False)  # snippet() removed them

    def notify_style_update(self) -> None:
        super().notify_style_update()
        # Rendered lines are cached by their base style only; a theme that changes
        # just a mark colour must not leave stale lines behind. Only the visible
        # lines are rendered again, so this is cheap.
        cache = getattr(self, "_option_render_cache", None)
        if cache is not None:
            cache.clear()

    # -- queries -------------------------------------------------------------

    @property
    def groups(self) -> Sequence[GroupSummary]:
        """The groups shown, oldest first."""
        return self._groups

    def in_window(self, group_id: int) -> bool:
        return group_id in self._inside

    def row_text(self, group_id: int) -> str:
        """The plain text of a group's line (for tests and the help screen)."""
        return self._row(self._groups[self._index[group_id]]).plain

    def _highlighted_group(self) -> int | None:
        if self.highlighted is None or not self._groups:
            return None
        return self._groups[self.highlighted].group_id

    @property
    def highlighted_group(self) -> GroupSummary | None:
        if self.highlighted is None or self.highlighted >= len(self._groups):
            return None
        return self._groups[self.highlighted]

    def select_group(self, group_id: int) -> None:
        """Highlight a group (e.g. a search hit) and scroll it into view."""
        if group_id in self._index:
            self.highlighted = self._index[group_id]

    def projected_saving(self, group_id: int) -> int:
        """Tokens the next request loses if this group is dropped (negative: restoring adds)."""
        g = self._groups[self._index[group_id]]
        if self._lane is not None and g.lane != self._lane:
            return 0  # another lane: never sent
        lane_ids = self._visible.get(g.lane, [])
        size = self._window_size
        if g.status == STATUS_DROPPED:
            newer = len(lane_ids) - bisect_left(lane_ids, group_id)
            if size > 0 and newer >= size:
                return 0  # even restored, it would sit outside the window
            pushed_out = lane_ids[-size] if size > 0 and len(lane_ids) >= size else None
            return -(g.tokens - self._tokens(pushed_out))
        if group_id not in self._inside:
            return 0
        slides_in = lane_ids[-size - 1] if size > 0 and len(lane_ids) > size else None
        return g.tokens - self._tokens(slides_in)

    def _tokens(self, group_id: int | None) -> int:
        return 0 if group_id is None else self._groups[self._index[group_id]].tokens

    # -- intents -------------------------------------------------------------

    def action_drop_toggle(self) -> None:
        g = self.highlighted_group
        if g is not None:
            self.post_message(self.DropToggled(self, g.group_id, g.status != STATUS_DROPPED))

    def action_remove(self) -> None:
        g = self.highlighted_group
        if g is not None:
            self.post_message(self.RemoveRequested(self, g.group_id))

    @on(OptionList.OptionSelected)
    def _show(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_index < len(self._groups):
            self.post_message(self.ShowRequested(self, self._groups[event.option_index].group_id))

    @on(OptionList.OptionHighlighted)
    def _highlight(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._post_selected()

    def _post_selected(self) -> None:
        g = self.highlighted_group
        if g is None:
            self.post_message(self.Selected(self, None, None))
        else:
            self.post_message(self.Selected(self, g.group_id, self.projected_saving(g.group_id)))

    def on_focus(self) -> None:
        if self.highlighted_group is not None:
            self._post_selected()

    def on_blur(self) -> None:
        # The projection is shown while a group is being considered for dropping.
        self.post_message(self.Selected(self, None, None))


class SessionList(OptionList):
    """The project's sessions, most recently used first, the current one marked `●`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Switch", id="sessions_choose"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"sessionlist--current", "sessionlist--meta"}

    DEFAULT_CSS = """
    SessionList {
        height: auto;
        max-height: 10;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    SessionList > .sessionlist--current { color: $text-accent; text-style: bold; }
    SessionList > .sessionlist--meta { text-style: dim; }
    """

    class SessionChosen(Message):
        """Switch to a session (`/session activate NAME`)."""

        def __init__(self, session_list: SessionList, name: str) -> None:
            super().__init__()
            self.session_list = session_list
            self.name = name

        @property
        def control(self) -> SessionList:
            return self.session_list

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled, markup=False)
        self._names: list[str] = []
        self.current: str | None = None

    async def refresh_from(self, ws: Workspace) -> None:
        self.load(await ws.ledger.list_sessions(), ws.session)

    def load(self, sessions: Sequence[SessionSummary], current: str) -> None:
        """Show `sessions`; `current` is listed (and marked) even before its first message."""
        rows = list(sessions)
        if current not in {s.name for s in rows}:
            rows.insert(0, SessionSummary(current, 0, 0, 0, 0.0, ""))
        self.current = current
        self._names = [s.name for s in rows]
        options = []
        for s in rows:
            shown = s.name.translate(_CONTROLS)
            head = f"● {shown}" if s.name == current else f"  {shown}"
            text = f"{head}  {s.groups}g {compact_tokens(s.tokens)}"
            spans = [Span(len(head), len(text), ".sessionlist--meta")]
            if s.name == current:
                spans.insert(0, Span(0, len(head), ".sessionlist--current"))
            options.append(Option(Content(text, spans, strip_control_codes=False), id=s.name))
        with self.prevent(OptionList.OptionHighlighted):
            self.set_options(options)
            self.highlighted = self._names.index(current)

    @property
    def names(self) -> Sequence[str]:
        return self._names

    @on(OptionList.OptionSelected)
    def _choose(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.SessionChosen(self, self._names[event.option_index]))

    @on(OptionList.OptionHighlighted)
    def _highlight(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
