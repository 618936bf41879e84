"""The left pane: sessions and the current session's conversation groups.

`GroupList` is a virtual line list (Textual's Line API on a `ScrollView`):
it keeps one plain tuple per group (`Ledger.group_rows`) and builds and
renders only the lines on screen, so a session with 5,000 groups loads and
scrolls as fast as one with five. (It was an `OptionList`, which builds an
`Option` and a `Content` for every group and re-measures them all on each
resize: 0.6 s at 5,000 groups.) It looks and behaves like one: the same
component classes for the highlight and hover, the same keys. The
sessions stay an `OptionList`: there are few. The widgets only post
intents; the app turns them into `slop_tui.commands.dispatch` calls and
reloads the lists afterwards.

Groups are listed oldest first, newest at the bottom, like the conversation
they index: the window (the last N groups) is then one block at the bottom,
End jumps to the newest group, and a new turn appends a line instead of
shifting every index.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

from textual import events, on
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.content import Content, Span
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.visual import RenderOptions
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from slop_tui.context.plan import (
    PLACE_DROPPED,
    PLACE_OTHER_LANE,
    PLACE_OUTSIDE,
    PLACE_SUMMARY,
    PLACE_WAITING,
    PLACE_WINDOW,
    GroupPlace,
)
from slop_tui.records import (
    STATUS_DROPPED,
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    GroupSummary,
    SessionSummary,
)
from slop_tui.ui import echo, textual_fixes
from slop_tui.ui.frames import frame_drawn
from slop_tui.ui.layout import PROMPTS_FIRST, SNIPPET_SOURCE
from slop_tui.ui.numbers import compact_tokens
from slop_tui.ui.text import UNSAFE_CODEPOINTS
from slop_tui.ui.widgets.scrollbar import LineScrollBars

if TYPE_CHECKING:
    from slop_tui.context.plan import ContextPlan
    from slop_tui.workspace import HistoryReader

# One group as `Ledger.group_rows` returns it: GroupSummary's fields in order
# (group_id, lane, prompt head, messages, tokens, status, created_at).
GroupRow = tuple[int, str, str | None, int, int, str, float]  # prompt None: not read yet
_GID, _LANE, _PROMPT, _MESSAGES, _TOKENS, _STATUS, _CREATED = range(7)

# First mark column: where the group stands in the next request, as the context
# plan says (`ContextPlan.group_place`; the marks are `context.plan.MARKS`).
# Component class of the mark and of the rest of the row, per place.
_PLACE_STYLES = {
    PLACE_WINDOW: (".grouplist--in-window", ""),
    PLACE_SUMMARY: (".grouplist--summarized", ".grouplist--summarized"),
    PLACE_WAITING: (".grouplist--outside", ".grouplist--outside"),
    PLACE_OUTSIDE: (".grouplist--outside", ".grouplist--outside"),
    PLACE_OTHER_LANE: (".grouplist--outside", ".grouplist--outside"),
    PLACE_DROPPED: (".grouplist--dropped", ".grouplist--dropped"),
}
_NO_PLAN = GroupPlace(PLACE_OUTSIDE)  # before the first plan arrives
# Second mark column: how the turn ended, when it did not end well.
FLAG_INTERRUPTED = "◐"
FLAG_ERROR = "!"
# The component classes a row's spans name (resolved when a line is drawn).
MARK_CLASSES = (
    "grouplist--in-window",
    "grouplist--outside",
    "grouplist--dropped",
    "grouplist--summarized",
    "grouplist--interrupted",
    "grouplist--error",
    "grouplist--meta",
    "grouplist--struck",
)
# Every mark is a character Rich measures on its fast path (Latin-1, Greek,
# geometric shapes): one slow-path glyph per line made loading 5,000 lines
# several times slower.


# Control characters (an ESC from a pasted log, ...), bidi overrides and lone
# surrogates must never reach the terminal: in a one-line view they become spaces.
_CONTROLS = dict.fromkeys([*UNSAFE_CODEPOINTS, 0x09, 0x0A], " ")


def snippet(text: str, width: int = SNIPPET_SOURCE) -> str:
    """The head of a prompt on one line; the list's `text-overflow` adds the ellipsis."""
    # Only the head is flattened: prompts can be whole pasted files.
    return " ".join(text[:SNIPPET_SOURCE].translate(_CONTROLS).split())[:width]


class _GroupView(Sequence[GroupSummary]):
    """The list's rows as `GroupSummary`s, built on access (5,000 cost nothing to keep)."""

    def __init__(self, rows: Sequence[GroupRow]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [_summary(row) for row in self._rows[i]]
        return _summary(self._rows[i])


def _summary(row: GroupRow) -> GroupSummary:
    """A row as a GroupSummary; a prompt not read yet is empty."""
    return GroupSummary(row[0], row[1], row[2] or "", *row[3:])


class GroupLines(LineScrollBars, ScrollView):
    """The group list's lines: one plain tuple per group, loaded from a session's
    history, placed by the plan, built and styled only for the rows on screen.
    Moving through them and what a key or click asks for is `GroupList`'s."""

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self._rows: list[GroupRow] = []  # oldest first
        self._index: dict[int, int] = {}  # group id -> row index
        self.plan: ContextPlan | None = None  # where each group stands (the marks)
        self._id_width = 1
        self._loading = False  # a reload moves the highlight: no Selected for that
        # Prompt heads by group id, as read so far: a prompt never changes, so a
        # reload that leaves a group's prompt out (PROMPTS_FIRST) takes it from here.
        self._prompts: dict[int, str] = {}
        # Rendered lines by what they show (row index and values, window mark, id
        # width, line style, width); cleared on resize and on a theme change.
        self._lines: LRUCache[tuple, Strip] = LRUCache(maxsize=512)

    # -- loading -------------------------------------------------------------

    def fill_prompts(self, history: HistoryReader) -> None:
        """Read the prompts a load left out (rows older than the newest PROMPTS_FIRST
        that no earlier read gave), in the background once the list is drawn; their
        lines are drawn again."""
        missing = [row[_GID] for row in self._rows if row[_PROMPT] is None]
        if missing:
            self.run_worker(
                self._fill_prompts(history, max(missing) + 1),
                group="group-prompts",
                exclusive=True,
            )

    async def _fill_prompts(self, history: HistoryReader, below: int) -> None:
        # After the frame that draws the list: the read (a pass over the session's
        # prompts, ~14 ms of SQLite at 5,000 groups, and its text parsed) would run
        # beside that frame's layout and paint, and take the interpreter lock from it.
        await frame_drawn(self.app, timeout=1.0)
        self._prompts.update(await history.group_prompts(below, SNIPPET_SOURCE))
        prompts = self._prompts
        filled = [
            index
            for index, row in enumerate(self._rows)
            if row[_PROMPT] is None and row[_GID] in prompts
        ]
        if filled:
            self._rows = self._with_prompts(self._rows)
            # Only the lines on screen that gained their prompt are drawn again: the
            # older groups are mostly above the view (the list opens at its end), and
            # a whole-list repaint that changes no cell costs a key typed meanwhile
            # the list's paint. The others are drawn with theirs when scrolled to.
            top = self.scroll_offset.y
            bottom = top + self.scrollable_content_region.height
            shown = [index for index in filled if top <= index < bottom]
            if shown:
                self.refresh_lines(shown[0], shown[-1] - shown[0] + 1)

    def _with_prompts(self, rows: Sequence[GroupRow]) -> list[GroupRow]:
        """`rows` with the prompts read before in place of the ones left out; the
        prompts they carry are kept for later loads."""
        prompts = self._prompts
        out: list[GroupRow] = []
        for row in rows:
            prompt = row[_PROMPT]
            if prompt is None:
                known = prompts.get(row[_GID])
                if known is not None:
                    row = (row[0], row[1], known, *row[3:])
            else:
                prompts[row[_GID]] = prompt
            out.append(row)
        return out

    def set_plan(self, plan: ContextPlan | None) -> None:
        """Mark the groups as `plan` places them (only lines whose mark changed redraw)."""
        self.plan = plan
        self.refresh()

    def _nearest_index(self, group_id: int) -> int | None:
        if not self._rows:
            return None
        i = self._index.get(group_id)
        if i is not None:
            return i
        ids = [row[_GID] for row in self._rows]
        return min(bisect_left(ids, group_id), len(ids) - 1)

    # -- rendering -----------------------------------------------------------

    def _update_virtual_size(self) -> None:
        region = self.scrollable_content_region
        if not region:
            return  # not laid out yet (or hidden): on_resize comes back here
        size = Size(region.width, len(self._rows))
        if size != self.virtual_size:
            self.virtual_size = size
            textual_fixes.scroll_update(self, size)

    def on_resize(self) -> None:
        self._lines.clear()
        self._update_virtual_size()

    def render_lines(self, crop: Region) -> list[Strip]:
        self._update_virtual_size()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if not 0 <= index < len(self._rows):
            return Strip.blank(width, self.get_visual_style("option-list--option").rich_style)
        if index == self.highlighted:
            style = self.get_visual_style("option-list--option", "option-list--option-highlighted")
        elif index == self._hover:
            style = self.get_visual_style("option-list--option", "option-list--option-hover")
        else:
            style = self.get_visual_style("option-list--option")
        row = self._rows[index]
        place = self.place(row)
        key = (index, row, place, self._id_width, style, width)
        strip = self._lines.get(key)
        if strip is None:
            content = self._row(row, place, index + 1, highlighted=index == self.highlighted)
            # The content's own strips: `Content.to_strips` would also look up a text
            # selection (the list has none: ALLOW_SELECT is off) and restyle links
            # (a row has none), a third of a line's cost.
            options = RenderOptions(self._get_style, self.styles)
            strips = content.render_strips(width, None, style, options)
            strip = (
                strips[0].extend_cell_length(width, style.rich_style).apply_meta({"option": index})
            )
            self._lines[key] = strip
        return strip

    def place(self, row: GroupRow) -> GroupPlace:
        """Where the plan puts a row's group (outside, before the first plan)."""
        plan = self.plan
        return plan.group_place(row[_GID], row[_LANE], row[_STATUS]) if plan else _NO_PLAN

    def _row(
        self, row: GroupRow, place: GroupPlace, ordinal: int, *, highlighted: bool = False
    ) -> Content:
        # Spans name component classes (".grouplist--dropped"): Textual resolves them
        # when a line is drawn, so a theme switch restyles the list without a rebuild.
        # On the highlight bar the dim row styles lost their contrast: there the
        # marks keep their colour, the text takes the bar's, and a dropped row stays
        # struck through.
        status = row[_STATUS]
        mark = place.mark
        mark_style, row_style = _PLACE_STYLES[place.place]
        if status == STATUS_INTERRUPTED:
            flag, flag_style = FLAG_INTERRUPTED, ".grouplist--interrupted"
        elif status == STATUS_ERROR:
            flag, flag_style = FLAG_ERROR, ".grouplist--error"
        else:
            flag, flag_style = " ", ""
        # The group's place in the session (1, 2, 3 …), not its id (a message id, so
        # 1, 11, 21): the conversation's header shows both.
        meta = f" {ordinal:>{self._id_width}} {compact_tokens(row[_TOKENS]):>5} "
        text = f"{mark}{flag}{meta}{snippet(row[_PROMPT] or '')}"
        spans = [Span(0, 1, mark_style)]
        if flag_style:
            spans.append(Span(1, 2, flag_style))
        if highlighted:
            if status == STATUS_DROPPED:
                spans.append(Span(2, len(text), ".grouplist--struck"))
        else:
            spans.append(Span(2, 2 + len(meta), row_style or ".grouplist--meta"))
            if row_style:
                spans.append(Span(2 + len(meta), len(text), row_style))
        return Content(text, spans, strip_control_codes=False)  # snippet() removed them

    def notify_style_update(self) -> None:
        super().notify_style_update()
        # Lines are cached by their base style only; a theme that changes just a
        # mark colour must not leave stale lines behind. Every focus change in the
        # pane restyles the list too (`:focus-within`), and the marks' colours stay:
        # then the lines stay (drawing a screenful again took 10-13 ms).
        lines = getattr(self, "_lines", None)
        if lines is not None:
            try:
                marks = tuple(
                    self.get_component_rich_style(name, partial=True) for name in MARK_CLASSES
                )
            except KeyError:  # the component styles are not set up yet
                marks = None
            if marks is None or marks != self.__dict__.get("_marks_drawn"):
                self.__dict__["_marks_drawn"] = marks
                lines.clear()
        self.refresh()

    # -- queries -------------------------------------------------------------

    @property
    def groups(self) -> Sequence[GroupSummary]:
        """The groups shown, oldest first."""
        return _GroupView(self._rows)

    @property
    def option_count(self) -> int:
        """How many groups are listed (the name `OptionList` uses)."""
        return len(self._rows)

    def place_of(self, group_id: int) -> GroupPlace:
        """Where the plan shown puts a listed group."""
        return self.place(self._rows[self._index[group_id]])

    def in_window(self, group_id: int) -> bool:
        return self.place_of(group_id).place == PLACE_WINDOW

    def row_content(self, group_id: int) -> Content:
        """A group's line, styled spans included (for tests)."""
        index = self._index[group_id]
        row = self._rows[index]
        return self._row(row, self.place(row), index + 1)

    def row_text(self, group_id: int) -> str:
        """The plain text of a group's line (for tests and the help screen)."""
        return self.row_content(group_id).plain

    def _refresh_row(self, index: int | None) -> None:
        """Repaint one line: only it is rendered again (a whole-list refresh renders
        every visible line through Textual's line styling, ~1 ms each)."""
        if index is not None:
            self.refresh_line(index)


class GroupList(GroupLines, can_focus=True):
    """One line per conversation group: marks, id, tokens and a prompt snippet.

    The first mark is where the context plan puts the group in the next request
    (`ContextPlan.group_place`; the list never decides it): `●` in the window,
    `Σ` covered by a summary, `◌` left the window, waiting for a summary, `○` outside the window or in another lane, `×` dropped. A
    second column shows `◐` for an interrupted turn and `!` for one that ended
    in an error. A click on the mark drops or restores the group; a click
    elsewhere on the line shows it. Styles come from the component classes below, so a
    theme restyles them through CSS (`GroupList > .grouplist--dropped`).
    Muted parts are `dim` rather than a muted colour: a fixed colour turns
    unreadable on the highlight bar, and `auto` colours (`$text-muted` is
    `auto 60%`) turn white because a component style has no background.

    The highlight, hover and line styles are `OptionList`'s component classes
    (`option-list--option-highlighted`, ...), so the list looks like the other
    lists of the app and themes that style those style this one too.
    """

    FOCUS_ON_CLICK = False  # a click selects or acts; the keyboard stays (ui/keyroute.py)

    ALLOW_SELECT = False  # a click highlights a line, as in OptionList, not text

    # OptionList's keys and descriptions, in its order (the F1 help lists them).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "cursor_down", "Down", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Show", id="groups_show"),
        Binding("home", "first", "First", show=False),
        Binding("pagedown", "page_down", "Page Down", show=False),
        Binding("pageup", "page_up", "Page Up", show=False),
        Binding("up", "cursor_up", "Up", show=False),
        # Letters here act on the highlighted group and never lose anything: d drops or
        # restores (d again reverts it), r starts a reply in the prompt, [ and ] change
        # the window. Moving a group to the trash is Delete, a key typing never sends.
        # Any other printable key goes to the prompt (SlopApp.on_key).
        Binding("d", "drop_toggle", "Drop/restore", id="groups_drop_toggle"),
        Binding("delete", "remove", "To trash", id="groups_remove"),
        Binding("r", "screen.reply", "Reply", id="reply_to_group"),
        # The app's undo and redo (they work outside the list too), shown here.
        Binding("ctrl+z", "screen.undo", "Undo", id="undo"),
        Binding("ctrl+y", "screen.redo", "Redo", id="redo"),
        Binding("[", "screen.window(-1)", "Window −1", id="window_down", show=False),
        Binding("]", "screen.window(1)", "Window +1", id="window_up", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "option-list--option",
        "option-list--option-highlighted",
        "option-list--option-hover",
        *MARK_CLASSES,
    }

    # OptionList's look (its DEFAULT_CSS, Textual 8), then the list's own.
    DEFAULT_CSS = """
    GroupList {
        height: 1fr;
        max-height: 100%;
        color: $foreground;
        overflow-x: hidden;
        border: tall $border-blurred;
        padding: 0 1;
        background: $surface;
        scrollbar-gutter: stable;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        & > .option-list--option-highlighted {
            color: $block-cursor-blurred-foreground;
            background: $block-cursor-blurred-background;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            border: tall $border;
            background-tint: $foreground 5%;
            & > .option-list--option-highlighted {
                color: $block-cursor-foreground;
                background: $block-cursor-background;
                text-style: $block-cursor-text-style;
            }
        }
        & > .option-list--option-highlighted {
            color: $foreground;
            background: $block-cursor-blurred-background;
        }
        & > .option-list--option-hover {
            background: $block-hover-background;
        }
    }
    GroupList > .grouplist--in-window { color: $text-success; text-style: bold; }
    GroupList > .grouplist--outside { text-style: dim; }
    GroupList > .grouplist--dropped { text-style: dim strike; }
    GroupList > .grouplist--summarized { color: $text-secondary; text-style: italic; }
    GroupList > .grouplist--interrupted { color: $text-warning; text-style: bold; }
    GroupList > .grouplist--error { color: $text-error; text-style: bold; }
    GroupList > .grouplist--meta { text-style: dim; }
    GroupList > .grouplist--struck { text-style: strike; }
    """

    # Not `repaint`: a move repaints the two lines it changes (see _refresh_row).
    highlighted: reactive[int | None] = reactive(None, repaint=False)
    """Index (oldest first) of the highlighted group, or None."""

    _hover: reactive[int | None] = reactive(None, repaint=False)

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
        """Move a group to the trash (`/message remove`); the app announces the way back."""

    class ShowRequested(GroupIntent):
        """Show a group in the conversation pane (enter or click)."""

    class Selected(Message):
        """The highlighted group changed (`None`: none, or the list lost focus).

        `dropped` says what `d` would do to it: restore it (True) or drop it. The
        app shows the projection: the plan built again with that edit applied.
        """

        def __init__(
            self, group_list: GroupList, group_id: int | None, dropped: bool = False
        ) -> None:
            super().__init__()
            self.group_list = group_list
            self.group_id = group_id
            self.dropped = dropped

        @property
        def control(self) -> GroupList:
            return self.group_list

    async def refresh_from(self, history: HistoryReader) -> list[GroupRow]:
        """Reload the session's groups (the marks keep the plan shown until the next one
        arrives); returns the rows (oldest first) so the conversation can take its
        group ids from the same read."""
        rows = await history.group_rows(SNIPPET_SOURCE, PROMPTS_FIRST)
        self.load_rows(rows, self.plan)
        self.fill_prompts(history)
        return rows

    def load(self, groups: Iterable[GroupSummary], plan: ContextPlan | None) -> None:
        """Show `groups` (any order) with the marks `plan` gives them."""
        rows = [
            (g.group_id, g.lane, g.prompt, g.messages, g.tokens, g.status, g.created_at)
            for g in groups
        ]
        rows.sort(key=lambda r: r[_GID])
        self.load_rows(rows, plan)

    def load_rows(self, rows: Sequence[GroupRow], plan: ContextPlan | None) -> None:
        """Show `rows` (`Ledger.group_rows`: oldest first) with the marks `plan` gives.

        The highlight stays on its group (or the nearest one when that group is
        gone) and the list keeps its scroll position, or stays at the end when
        it was there. Only the lines on screen are rendered again.
        """
        old_highlight = self._highlighted_group()
        was_at_end = self.is_vertical_scroll_end or not self._rows
        self._rows = self._with_prompts(rows)
        self._index = {row[_GID]: i for i, row in enumerate(self._rows)}
        self.plan = plan
        self._id_width = len(str(len(self._rows)))
        # The line cache stays: its keys hold everything a line shows, so after a turn
        # only the new row and the rows whose mark changed are drawn again.
        self._update_virtual_size()
        self._loading = True
        try:
            self.highlighted = None if old_highlight is None else self._nearest_index(old_highlight)
        finally:
            self._loading = False
        self.refresh()
        if was_at_end and self.highlighted is None:
            if self.scrollable_content_region:
                # The virtual size is set: go to the end now, so the first lines drawn
                # are the newest (not a screenful from the top first).
                self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
            else:
                self.call_after_refresh(self.scroll_end, animate=False, immediate=True)
        if self.highlighted is not None and self.has_focus:
            self._post_selected()

    def _highlighted_group(self) -> int | None:
        h = self.highlighted
        if h is None or h >= len(self._rows):
            return None
        return self._rows[h][_GID]

    @property
    def highlighted_group(self) -> GroupSummary | None:
        h = self.highlighted
        if h is None or h >= len(self._rows):
            return None
        return GroupSummary(*self._rows[h])

    def select_group(self, group_id: int) -> None:
        """Highlight a group (e.g. a search hit) and scroll it into view."""
        if group_id in self._index:
            self.highlighted = self._index[group_id]

    # -- the highlight -------------------------------------------------------

    def validate_highlighted(self, highlighted: int | None) -> int | None:
        if highlighted is None or not self._rows:
            return None
        return max(0, min(highlighted, len(self._rows) - 1))

    def watch_highlighted(self, old: int | None, highlighted: int | None) -> None:
        self._refresh_row(old)
        self._refresh_row(highlighted)
        if highlighted is None:
            return
        self.scroll_to_highlight()  # immediate: a scroll has happened when it returns
        if not self._loading:
            self._post_selected()
            # The changed lines (all of them after a scroll, with the scrollbar) are
            # drawn at once, not after a frame a streaming reply or a turn's end is
            # drawing (ui/echo.py).
            also = (self.vertical_scrollbar,) if self.show_vertical_scrollbar else ()
            self.call_later(echo.draw_now, self, *also)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        # Only the rows a scroll exposes are styled again (ui/textual_fixes.py): a
        # highlight moved past the edge scrolled a screenful of lines through it.
        textual_fixes.scroll_keeping_lines(
            self,
            old_value,
            new_value,
            lambda: super(GroupList, self).watch_scroll_y(old_value, new_value),
        )

    def watch__hover(self, old: int | None, hover: int | None) -> None:
        self._refresh_row(old)
        self._refresh_row(hover)

    def scroll_to_highlight(self, top: bool = False) -> None:
        """Scroll the highlighted line into view."""
        highlighted = self.highlighted
        if highlighted is None or not self.is_mounted:
            return
        self._update_virtual_size()
        self.scroll_to_region(
            Region(0, highlighted, self.scrollable_content_region.width, 1),
            force=True,
            animate=False,
            top=top,
            immediate=True,
        )

    def on_show(self) -> None:
        self.scroll_to_highlight()

    # -- keys and mouse --------------------------------------------------------

    def action_cursor_up(self) -> None:
        self._step(-1)

    def action_cursor_down(self) -> None:
        self._step(+1)

    def _step(self, direction: int) -> None:
        """One line up or down, wrapping at the ends (as OptionList does)."""
        n = len(self._rows)
        if not n:
            return
        h = self.highlighted
        if h is None:
            self.highlighted = 0 if direction > 0 else n - 1
        else:
            self.highlighted = (h + direction) % n

    def action_first(self) -> None:
        if self._rows:
            self.highlighted = 0

    def action_last(self) -> None:
        if self._rows:
            self.highlighted = len(self._rows) - 1

    def _move_page(self, direction: int) -> None:
        if not self._rows:
            return
        height = self.scrollable_content_region.height
        self.highlighted = (self.highlighted or 0) + direction * height  # validate clamps

    def action_page_up(self) -> None:
        if self.highlighted is None:
            self.action_first()
        else:
            self._move_page(-1)

    def action_page_down(self) -> None:
        if self.highlighted is None:
            self.action_last()
        else:
            self._move_page(+1)

    def action_select(self) -> None:
        g = self._highlighted_group()
        if g is not None:
            self.post_message(self.ShowRequested(self, g))

    async def _on_click(self, event: events.Click) -> None:
        index = event.style.meta.get("option")
        if index is not None and index < len(self._rows):
            self.highlighted = index
            offset = event.get_content_offset(self)
            if offset is not None and offset.x == 0:  # the mark: drop or restore
                self.action_drop_toggle()
            else:
                self.action_select()

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        self._hover = event.style.meta.get("option")

    def _on_leave(self, _: events.Leave) -> None:
        self._hover = None

    # -- intents -------------------------------------------------------------

    def action_drop_toggle(self) -> None:
        g = self.highlighted_group
        if g is not None:
            self.post_message(self.DropToggled(self, g.group_id, g.status != STATUS_DROPPED))

    def action_remove(self) -> None:
        g = self._highlighted_group()
        if g is not None:
            self.post_message(self.RemoveRequested(self, g))

    def _post_selected(self) -> None:
        g = self.highlighted_group
        if g is None:
            self.post_message(self.Selected(self, None))
        else:
            self.post_message(self.Selected(self, g.group_id, g.status == STATUS_DROPPED))

    def on_focus(self) -> None:
        if self._highlighted_group() is not None:
            self._post_selected()

    def on_blur(self) -> None:
        # The projection is shown while a group is being considered for dropping.
        self.post_message(self.Selected(self, None))


class SessionList(OptionList):
    """The project's sessions, most recently used first, the current one marked `●`."""

    FOCUS_ON_CLICK = False  # a click selects or acts; the keyboard stays (ui/keyroute.py)

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
