"""The centre pane: the conversation, one `GroupBlock` per group, a bounded number mounted.

At most `max_blocks` groups are mounted, a contiguous slice of the session;
the rest are one "▲ N older groups" / "▼ N newer groups" line each. Reaching
the top (or ctrl+u) mounts a page of older groups and unmounts as many at the
bottom, and the other way round. The blocks themselves live in `blocks.py`.

Frame time (bench/tui.py): every layout pass walks every mounted
widget, so the bound is small (15 groups, a few screens) and a reply streams
with only a page of history above it; a page is mounted one group per frame
from blocks built ahead of time (`_prepare_older`); the live answer is paced
and keeps room below it (blocks.py). `textual_fixes` removes two redundant
layout passes of Textual's own.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.actions import SkipAction
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.layout import DockArrangeResult
from textual.scrollbar import ScrollBar
from textual.widget import Widget
from textual.widgets import Static

from slop_tui.records import STATUS_INTERRUPTED, GroupSummary, Message
from slop_tui.ui import echo, textual_fixes
from slop_tui.ui.frames import frame_drawn
from slop_tui.ui.text import neutralise
from slop_tui.ui.widgets.blocks import (
    LIVE_ROOM,
    AnswerBlock,
    CopyRequested,
    GroupBlock,
    LiveAnswer,
    ToolBlock,
    group_to_markdown,
    snapshot_label,
)
from slop_tui.ui.widgets.scrollbar import LineScrollBars

if TYPE_CHECKING:
    from textual.timer import Timer

    from slop_tui.context.plan import ContextPlan
    from slop_tui.workspace import HistoryReader

# Seconds after a slice is mounted before the next page is built ahead (`_prepare_older`).
PREPARE_DELAY = 1.0
FILL_TRIES = 20  # frames _fill_viewport waits or pages before it gives up
# A load mounts the newest groups until their text is about this many screens tall (a page
# above the first one for PageUp; paging mounts the rest).
FILL_SCREENS = 2
PAGE_WAITS = 200  # frames or pages a queue of page keys is served for, at most
# Seconds without a scroll or a layout of the view before the lines a page key would
# show are styled ahead (`PageStyler`).
STYLE_AHEAD_DELAY = 0.15
# Answers whose rendered lines the view keeps after their group is unmounted
# (`UnmountedAnswerLines`); not the answers' lines kept between starts (blocks.py).
UNMOUNTED_ANSWERS_KEPT = 64
# The styling ahead runs in slices this long at most, this far apart.
STYLE_AHEAD_SLICE_S = 0.004
STYLE_AHEAD_SLICE_GAP = 0.001


def live_step(height: int) -> int:
    """How far the view moves at once to follow a streamed answer in a pane `height`
    lines high: a third of it (LIVE_ROOM at least). Each move repaints the whole pane
    (7-10 ms on a 2-core machine); a stream of a few lines per update moves it every
    other update or less, not at each."""
    return max(LIVE_ROOM, height // 3)


# -- the view ---------------------------------------------------------------------


def _let_go(blocks: Iterable[GroupBlock]) -> None:
    """Blocks built ahead and never mounted, dropped: their rendered lines go now, by
    reference count. The app's collector freezes what survives a collection
    (ui/collector.py); a dropped block, garbage in reference cycles, would keep them
    until the next deep collection."""
    for block in blocks:
        for answer in block.answers():
            answer.forget_rendered()


def _snapshot(block: GroupBlock, snapshot: tuple[int, int] | None) -> None:
    """The group's token snapshot beside its size in its header (none: no call made)."""
    if snapshot is not None:
        block.usage = snapshot_label(*snapshot)


class PageMarker(Static):
    """The "▲ N older groups" / "▼ N newer groups" line; a click loads them."""

    DEFAULT_CSS = """
    PageMarker { color: $text-muted; text-style: italic; padding: 0 1; height: 1; }
    PageMarker:hover { color: $text; }
    """

    def __init__(self, direction: str) -> None:
        super().__init__("", markup=False, classes=f"-{direction}")
        self.direction = direction
        self.count = -1  # nothing shown yet

    def set_count(self, count: int) -> None:
        # Only on a change: refreshing a widget off screen right after blocks were
        # mounted makes Textual re-arrange the whole screen to find it.
        if count == self.count:
            return
        self.count = count
        if self.display != (count > 0):
            self.display = count > 0
        noun = "group" if count == 1 else "groups"
        if self.direction == "older":
            self.update(f"▲ {count} older {noun} — scroll up or press ctrl+u to load more")
        else:
            self.update(f"▼ {count} newer {noun} — scroll down or press ctrl+d to load")

    async def _on_click(self, event: events.Click) -> None:
        event.stop()
        view = self.parent
        if isinstance(view, ConversationView):
            await (view.load_older() if self.direction == "older" else view.load_newer())


class PageStyler:
    """The lines a page key shows next, styled ahead of the key, for a `GroupBlocks`.

    A scroll's frame is mostly Textual styling the lines the scroll exposes (each
    widget keeps its styled lines, by line, until it changes or its width does).
    Once the view has been still for STYLE_AHEAD_DELAY (no scroll, no layout: each
    calls `later`), the groups of the page above it (PageUp) and of the pane ctrl+u
    goes to first (the oldest mounted group at the top, `_oldest_to_the_top`) have
    their lines styled: the key's frame then styles the scrollbar and finds the rest
    done.
    """

    def __init__(self, view: GroupBlocks) -> None:
        self.view = view
        self.timer: Timer | None = None  # the next styling (or slice of it)
        self.queue: list[Widget] = []  # widgets still to style, the next last
        self._still_from = 0.0  # (time.monotonic) when the view will have been still enough
        self._waiting = False  # `timer` waits for the view to be still (not a slice)

    def later(self) -> None:
        """Style the pages a key may show once the view has been still a while.

        Called at every scroll and layout of the view (each frame while a reply
        streams): one timer waits, and is put off, for as long as they come; a timer
        made anew each time cost each frame a task and the view's repr."""
        self.queue.clear()
        self._still_from = time.monotonic() + STYLE_AHEAD_DELAY
        if self.timer is not None and self._waiting:
            return
        if self.timer is not None:
            self.timer.stop()  # a slice: what it would style is dropped
        self._wait(STYLE_AHEAD_DELAY)

    def _wait(self, delay: float) -> None:
        self._waiting = True
        self.timer = self.view.set_timer(delay, self._when_still)

    def _when_still(self) -> None:
        self._waiting = False
        left = self._still_from - time.monotonic()
        if left > 0.001:
            self._wait(left)  # moved meanwhile
        elif not self._side_panes_shown():
            self._wait(STYLE_AHEAD_DELAY)  # the start's side panes go first
        else:
            self.style_ahead()

    def _side_panes_shown(self) -> bool:
        """False while the workspace's side panes are still being filled after the first
        frame: styling ahead then (20-35 ms) put off the screen the user waits for."""
        view = self.view
        return not view.is_mounted or getattr(view.screen, "side_panes_filled", True)

    def style_ahead(self) -> int:
        """Style the lines of the groups a page key shows next; returns how many."""
        view = self.view
        self.timer, self._waiting = None, False
        height = view.scrollable_content_region.height
        if not view.is_mounted or height <= 0:
            return 0
        top = round(view.scroll_y)
        bands = [(top - height, top)]  # PageUp's page
        oldest = view._oldest_block()
        oldest_top = view._tops.get(oldest) if oldest is not None else None
        if oldest_top is not None and oldest_top < top:
            bands.append((oldest_top, oldest_top + height))  # ctrl+u's first pane
        widgets: list[Widget] = []
        for block, block_top in list(view._tops.items()):
            if not isinstance(block, GroupBlock) or block.live or not block.is_mounted:
                continue
            block_height = block.outer_size.height
            if block_height > 4 * height:
                continue  # a long group: styled by the frames that show it
            if any(block_top < hi and block_top + block_height > lo for lo, hi in bands):
                widgets.extend(
                    w
                    for w in (block, *block.walk_children(Widget))
                    if w.display and w.outer_size.area
                )
        self.queue = widgets[::-1]  # the blocks in order, from the end of the list
        return self._slice()

    def _slice(self) -> int:
        """Style the queued widgets for `STYLE_AHEAD_SLICE_S` at most, and the rest in
        the next slices: a whole page styled at once held the loop 20-70 ms, and a key
        or a streamed update that came meanwhile waited for it. A scroll or a layout
        of the view (`later`) drops what is left; the styling starts again once the
        view is still."""
        view = self.view
        self.timer = None
        queue, styled = self.queue, 0
        if not view.is_mounted:
            queue.clear()
            return 0
        end = time.perf_counter() + STYLE_AHEAD_SLICE_S
        while queue:  # one widget at least
            widget = queue.pop()
            if widget.is_mounted:
                styled += textual_fixes.style_ahead(view.screen, [widget])
            if time.perf_counter() >= end:
                break
        if queue:
            # The next slice at once: a key (or a streamed update) that came meanwhile
            # gets in between. Further apart, the styling was not done by the next page
            # key, whose frame then styled the lines itself.
            self.timer = view.set_timer(STYLE_AHEAD_SLICE_GAP, self._slice)
        return styled


class UnmountedAnswerLines:
    """The rendered lines of the answers of groups the view unmounted lately (the newest
    groups a ctrl+u page trims, the slice End or a jump replaces), by message id, the
    most recent last: the next build of those groups (End, ctrl+d, paging back) takes
    them instead of rendering again. Rendering is Rich in a thread, 5-80 ms an answer,
    and a key handled meanwhile waits for the interpreter lock; End builds a page of
    groups and the next two pages ahead, ~15 groups, just before the next ctrl+u comes.
    The `UNMOUNTED_ANSWERS_KEPT` most recent are kept."""

    def __init__(self) -> None:
        self.by_message: dict[int, tuple[str, int, str, list]] = {}

    def keep(self, blocks: Iterable[GroupBlock]) -> None:
        """Keep the rendered lines of the answers of `blocks`, being unmounted."""
        kept = self.by_message
        for block in blocks:
            for answer in block.answers():
                rendered = answer.rendered_lines()
                if rendered is not None and answer.message_id:
                    kept.pop(answer.message_id, None)
                    kept[answer.message_id] = rendered
        for message_id in list(kept)[: max(0, len(kept) - UNMOUNTED_ANSWERS_KEPT)]:
            del kept[message_id]

    async def render_ahead(self, block: GroupBlock, width: int) -> None:
        """Render the answers of a block just built, in a thread, unless their lines
        were kept when an earlier block of the same group was unmounted."""
        for answer in block.answers():
            kept = self.by_message.pop(answer.message_id, None)
            if kept is not None:
                answer.reuse_lines(kept)
            await answer.render_ahead(width)


class GroupBlocks(LineScrollBars, VerticalScroll):
    """The conversation's group blocks: at most `max_blocks` of a session's groups
    mounted (a slice of them, oldest first, between two page markers), built from the
    session's `HistoryReader`, labelled from the plan, and the view's anchoring to a
    block or a streamed answer's last line. Paging is `GroupPager`'s, the running
    turn `ConversationView`'s."""

    # A click anywhere in the conversation (a message included) gives it the keys that
    # scroll (PageUp, ctrl+u, Home, End); it binds no letter, so typing still goes to
    # the prompt, whole (ui/keyroute.py). The messages themselves are not focused by
    # a click: their `c` would take the first letter of a sentence.
    FOCUS_ON_CLICK = True

    def on_click(self, event: events.Click) -> None:
        if self.app.focused is not self and self.can_focus:
            self.screen.set_focus(self, scroll_visible=False)

    def __init__(
        self,
        *,
        max_blocks: int = 15,
        page_size: int = 5,
        initial_blocks: int = 4,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.max_blocks = max(2, max_blocks)
        self.page_size = max(1, min(page_size, self.max_blocks))
        # A first screen needs a few groups, not the whole bound: each mounted
        # block costs layout time, and older ones come a page at a time. At most this
        # many: long groups fill the screen with fewer (`_newest_to_fill`).
        self.initial_blocks = max(1, min(initial_blocks, self.max_blocks))
        # The columns the view will have, before its first layout (the workspace screen
        # sets it as it sizes the side panes); 0: unknown, `initial_blocks` are mounted.
        self.expected_width = 0
        self.history: HistoryReader | None = None
        self.session: str | None = None
        self.plan: ContextPlan | None = None  # the next request: marks and tier labels
        self._gids: list[int] = []  # settled groups, oldest first
        self._index: dict[int, int] = {}
        self._lo = 0
        self._hi = 0  # the mounted slice is _gids[_lo:_hi]
        self._blocks: dict[int, GroupBlock] = {}
        self._live: GroupBlock | None = None
        self._paging = False
        self._shedding = False  # the groups above a new turn are being unmounted
        self._queued = {True: 0, False: 0}  # page keys not yet served: older, newer
        self._check_pending = False
        self._scroll_up = False
        self._older = PageMarker("older")
        self._newer = PageMarker("newer")
        # The page ctrl+u mounts next, built ahead (see _prepare_older).
        self._prepared: dict[int, GroupBlock] = {}
        self._generation = 0  # bumped when the mounted slice is replaced or cut (paging stops)
        self._tops: dict[Widget, int] = {}  # each child's top, as last arranged
        # While paging: a block that must not move on screen, and its offset from the top.
        self._keep: tuple[Widget, int] | None = None
        self._laid_out = asyncio.Event()  # set by each arrangement (see _next_frame)
        self._prepared_session: str | None = None
        # Following a streamed answer's last line, in place of Textual's anchor (which
        # follows the bottom of the blank room kept below it); see `follow_live`.
        self._following = False
        self._placing = False  # the view is scrolling itself to follow
        self.styler = PageStyler(self)  # the lines a page key shows, styled ahead
        self.unmounted_lines = UnmountedAnswerLines()
        self._key_frame_owed = False  # a page key's scroll is not drawn yet

    def compose(self):
        yield self._older
        yield self._newer

    def on_mount(self) -> None:
        self._update_markers()

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        """Textual's arrangement; while paging, scrolled so the kept block stays put.

        Set here, inside the layout pass (as Textual anchors a view to its bottom),
        the scroll is right in the frame that shows the new blocks; scrolling
        after the refresh drew the content shifted first.
        """
        arrangement = super().arrange(size, optimal)
        self._tops = {p.widget: p.region.y for p in arrangement.placements}
        self._laid_out.set()
        bottom = arrangement.total_region.bottom
        if self._keep is not None and self._keep[0] in self._tops:
            widget, offset = self._keep
            self._scroll_in_layout(max(0, min(self._tops[widget] - offset, bottom - size.height)))
        elif self._following and (answer := self._streaming_answer()) is not None:
            y = self._follow_y(answer, size.height)
            if y is not None:
                self._scroll_in_layout(max(0, min(y, bottom - size.height)))
        self.styler.later()
        return arrangement

    def _oldest_block(self) -> GroupBlock | None:
        """The oldest mounted group (None when none is)."""
        if self._lo >= self._hi:
            return None
        return self._blocks.get(self._gids[self._lo])

    def _scroll_in_layout(self, y: int) -> None:
        # Silently, as Textual's anchor does inside the layout pass.
        if y != self.scroll_y:
            self.set_reactive(Widget.scroll_y, y)
            self.set_reactive(Widget.scroll_target_y, y)
            self.vertical_scrollbar.set_reactive(ScrollBar.position, y)

    # -- following a streamed answer ------------------------------------------
    #
    # The live answer keeps a screen of blank room below its text (blocks.py), so
    # that most updates change no size. Textual's anchor would show the bottom of
    # that room; while an answer streams into it the view follows the text's last
    # line instead: when it goes below the pane, the view moves so that a third of
    # the pane (`live_step`) shows blank under it. An update that moves nothing repaints the answer's
    # lines alone. Scrolling up lets go (as Textual's anchor does); back down to
    # the text's end, End or a new turn follows again; when the stream stops, the
    # room goes and Textual's anchor takes over.

    def _streaming_answer(self) -> LiveAnswer | None:
        live = self._live
        answer = live.live_answer if live is not None else None
        return answer if answer is not None and answer.room else None

    def _live_end(self, answer: LiveAnswer) -> int | None:
        """The line below the streamed text, in the view's content (None while the
        answer has not been laid out)."""
        group = answer.parent
        if not isinstance(group, GroupBlock) or group not in self._tops:
            return None
        inner = group.tops.get(answer)
        return None if inner is None else self._tops[group] + inner + answer.text_height

    def _follow_y(self, answer: LiveAnswer, height: int) -> int | None:
        """Where the view goes to keep the text's end on screen, `live_step` blank lines
        below it at most (None: it stays). A text that shrank by a line or two (a
        closed fence) does not move the view."""
        end = self._live_end(answer)
        if end is None:
            return None
        bottom = round(self.scroll_y) + height
        step = live_step(height)
        if bottom - step - 2 <= end <= bottom:
            return None
        return max(0, end - height + step)

    def follow_live(self, answer: LiveAnswer, layout: bool) -> None:
        """The live answer's text or room changed (`LiveAnswer.grown`); `layout`: a layout
        is on its way (it places the view, `arrange`)."""
        if not answer.room:  # the stream stopped: the bottom is the text's end again
            if self._following:
                self._following = False
                super().anchor()
            return
        if not self._following:
            if not textual_fixes.follows_bottom(self) or self._live_end(answer) is None:
                return  # scrolled away by the user, or not laid out: Textual's anchor holds
            self._following = True
            super().anchor(False)
        if not layout:
            self._follow_now(answer)

    def _follow_now(self, answer: LiveAnswer) -> None:
        y = self._follow_y(answer, self.scrollable_content_region.height)
        if y is None:
            return
        self._placing = True
        try:
            self.scroll_to(y=y, animate=False, immediate=True, release_anchor=False)
        finally:
            self._placing = False

    def anchor(self, anchor: bool = True) -> None:
        """Textual's anchor (follow the bottom); while an answer streams into its room,
        follow the text's last line instead."""
        answer = self._streaming_answer()
        if answer is None or not anchor or self._live_end(answer) is None:
            self._following = False
            super().anchor(anchor)
            return
        self._following = True
        super().anchor(False)
        self._follow_now(answer)

    def release_anchor(self) -> None:
        if not self._placing:  # Textual's scroll releases it too, whatever it is told
            self._following = False
        super().release_anchor()

    def _let_go(self, keep: tuple[Widget, int] | None) -> None:
        if self._keep is keep:  # not a hold a later page has taken since
            self._keep = None

    def _let_go_later(self, keep: tuple[Widget, int] | None) -> None:
        # Two refreshes on: the markers are updated after the first, and one that
        # appears or goes moves everything by a line.
        self.call_after_refresh(self.call_after_refresh, self._let_go, keep)

    def _hold(self, block: GroupBlock | None, *, at_top: bool = False) -> None:
        """Keep `block` where it is on screen (`at_top`: at the top of the pane) through
        the coming layouts; None lets go."""
        if block is None or (block not in self._tops and not at_top):
            self._keep = None
            return
        self._keep = (block, 0 if at_top else self._tops[block] - round(self.scroll_y))
        if at_top:
            self.release_anchor()  # as a scroll by the user: back at the bottom, it follows again

    @property
    def BLANK(self) -> bool:  # noqa: N802 -- Textual's name
        # Its own lines are blank (padding; the blocks are children). While it follows a
        # live reply it scrolls on every update, and the styles cache re-rendered them each
        # time; drawn as blanks they cost nothing. (Settled, the styles cache is used: the
        # same cells, split into the segments the snapshot baselines hold.)
        return self._live is not None

    # -- introspection (tests, the app) -------------------------------------

    @property
    def mounted_blocks(self) -> int:
        return len(self._blocks) + (1 if self._live is not None else 0)

    @property
    def mounted_group_ids(self) -> list[int]:
        return list(self._gids[self._lo : self._hi])

    @property
    def group_ids(self) -> list[int]:
        return list(self._gids)

    def block(self, group_id: int) -> GroupBlock | None:
        if self._live is not None and self._live.group_id == group_id:
            return self._live
        return self._blocks.get(group_id)

    # -- loading ------------------------------------------------------------

    def _set_gids(self, gids: list[int]) -> None:
        self._gids = gids
        self._index = {g: i for i, g in enumerate(gids)}

    async def _fetch_text(self, message_id: int) -> str | None:
        if self.history is None:
            return None
        return await self.history.message_text(message_id)

    async def _build(
        self, gids: Sequence[int], read: Mapping[int, list[Message]] | None = None
    ) -> list[GroupBlock]:
        """The groups' blocks, from those built ahead, the rows already `read`, or the ledger."""
        assert self.history is not None and self.session is not None
        read = read or {}
        prepared = self._prepared if self._prepared_session == self.session else {}
        width = self._answer_width()
        blocks = []
        snapshots = await self.history.group_snapshots([g for g in gids if g not in prepared])
        for gid in gids:
            block = prepared.pop(gid, None)
            if block is None:
                rows = read[gid] if gid in read else await self.history.group_messages(gid)
                block = GroupBlock.build(rows, self._fetch_text)
                block.group_id = gid
                _snapshot(block, snapshots.get(gid))
                await self._show_images(block, rows)
                await self.unmounted_lines.render_ahead(block, width)
            self._label(block)
            blocks.append(block)
        return blocks

    def _prepare_older(self) -> None:
        """Build the pages ctrl+u mounts next while nothing else runs (nearest first).

        Reading its rows and rendering its answers took most of a page's time;
        built ahead, paging only mounts. A later page, a reload or a changed
        group (`refresh_group`) makes the blocks be built again.
        """
        if self._lo == 0 or self.history is None or not self.is_mounted:
            return
        # Two pages: the next one is usually asked for before this one is built.
        gids = self._gids[max(0, self._lo - 2 * self.page_size) : self._lo][::-1]
        self.run_worker(partial(self._prepare, gids), group="conversation-prepare", exclusive=True)

    async def _prepare(self, gids: Sequence[int]) -> None:
        if self.history is None or self.session is None:
            return
        if self._prepared_session != self.session:
            _let_go(self._prepared.values())
            self._prepared, self._prepared_session = {}, self.session
        _let_go(b for g, b in self._prepared.items() if g not in gids)
        self._prepared = {g: b for g, b in self._prepared.items() if g in gids}
        width = self._answer_width()
        snapshots = await self.history.group_snapshots([g for g in gids if g not in self._prepared])
        for gid in gids:
            if gid in self._prepared:
                for answer in self._prepared[gid].answers():
                    await answer.render_ahead(width)  # nothing to do unless the look changed
                continue
            rows = await self.history.group_messages(gid)
            if not rows or self.session != self._prepared_session:
                return
            block = GroupBlock.build(rows, self._fetch_text)
            block.group_id = gid
            _snapshot(block, snapshots.get(gid))
            await self._show_images(block, rows)
            await self.unmounted_lines.render_ahead(block, width)
            self._prepared[gid] = block

    async def render_again(self) -> None:
        """Render the answers again in the current look (the theme, code highlighting),
        off the event loop: the mounted ones, then those built ahead for paging (the
        preparation starts again, so a page being built in the old look is not kept)."""
        for block in list(self._blocks.values()):
            for answer in block.answers():
                if answer.is_mounted:
                    await answer.render_again()
        self._prepare_older()

    def _answer_width(self) -> int:
        """The content width of a settled answer block here (0 if none is laid out).

        From the size its last layout gave it, not from the screen's map of widgets
        (`content_size`): after a layout that map is rebuilt whole at its next read,
        which a page's preparation must not cause between two frames."""
        for block in self._blocks.values():
            for answer in block.answers():
                width = answer.outer_size.width - answer.styles.gutter.width
                if width > 0 and not answer.has_class(f"-{STATUS_INTERRUPTED}"):
                    return width
        return 0

    def _label(self, block: GroupBlock) -> None:
        """The block's mark and its tool results' tier labels, as the plan has them."""
        if block.group_id in self._index:
            block.ordinal = self._index[block.group_id] + 1
            block.render_header()
        plan = self.plan
        if plan is None:
            return
        if block.group_id is not None:
            lane = block.messages[0].lane if block.messages else plan.lane
            place = plan.group_place(block.group_id, lane, block.status)
            block.set_mark(f"{place.mark} {place.label}")
        for tool, msg in block.tool_results():
            tool.set_tier(plan.message_label(msg), msg.id in plan.sent)
        for chip in block.image_chips:
            chip.set_strategy(plan.request.strategy)

    async def _mount_slice(
        self, lo: int, hi: int, read: Mapping[int, list[Message]] | None = None
    ) -> None:
        self._generation += 1
        plan = self.plan
        blocks = await self._build(self._gids[lo:hi], read)
        with self.app.batch_update():
            old = list(self._blocks.values())
            self._blocks = {b.group_id: b for b in blocks if b.group_id is not None}
            self._label_if_plan_moved(blocks, plan)
            self._lo, self._hi = lo, hi
            if old:
                self.unmounted_lines.keep(old)
                await self.remove_children(old)
            if blocks:
                await self.mount_all(blocks, before=self._newer)
            self._update_markers()
        # Not at once: right after a load the first screen is still being drawn.
        self.set_timer(PREPARE_DELAY, self._prepare_older)

    def _update_markers(self) -> None:
        self._older.set_count(self._lo)
        self._newer.set_count(len(self._gids) - self._hi)

    async def _trim(self, *, from_bottom: bool, limit: int | None = None) -> None:
        """Unmount blocks at one end until at most `limit` (default `max_blocks`) remain."""
        limit = self.max_blocks if limit is None else limit
        gone: list[GroupBlock] = []
        while self._hi - self._lo > limit:
            if from_bottom:
                self._hi -= 1
                gid = self._gids[self._hi]
            else:
                gid = self._gids[self._lo]
                self._lo += 1
            block = self._blocks.pop(gid, None)
            if block is not None:
                gone.append(block)
        if gone:
            if from_bottom:  # a page of older groups: End or ctrl+d brings them back
                self.unmounted_lines.keep(gone)
            await self.remove_children(gone)

    async def refresh_group(self, group_id: int) -> None:
        """Re-read one group from the ledger (after drop, restore or remove)."""
        if self.history is None or self.session is None:
            return
        if self._live is not None and self._live.group_id == group_id:
            return
        self._prepared.pop(group_id, None)
        rows = await self.history.group_messages(group_id)
        old = self._blocks.get(group_id)
        if rows and group_id not in self._index:
            await self._add_group(group_id)
        elif not rows:  # removed
            if group_id in self._index:
                i = self._index[group_id]
                del self._gids[i]
                self._set_gids(self._gids)
                if i < self._lo:
                    self._lo -= 1
                if i < self._hi:
                    self._hi -= 1
            if old is not None:
                del self._blocks[group_id]
                await old.remove()
            self._update_markers()
        elif old is not None:
            new = GroupBlock.build(rows, self._fetch_text)
            _snapshot(new, (await self.history.group_snapshots([group_id])).get(group_id))
            await self._show_images(new, rows)
            self._label(new)
            self._blocks[group_id] = new
            with self.app.batch_update():
                await self.mount(new, after=old)
                await old.remove()

    async def _add_group(self, group_id: int) -> None:
        """A group the view has not seen (written by another surface): insert it in order."""
        i = bisect_left(self._gids, group_id)
        tail = self._hi == len(self._gids)
        self._gids.insert(i, group_id)
        self._set_gids(self._gids)
        if i < self._lo:
            self._lo += 1
            self._hi += 1
        elif i <= self._hi and (i < self._hi or tail):
            plan = self.plan
            (block,) = await self._build([group_id])
            before = self._blocks.get(self._gids[i + 1]) if i + 1 < self._hi + 1 else None
            await self.mount(block, before=before or self._newer)
            self._blocks[group_id] = block
            self._label_if_plan_moved([block], plan)
            self._hi += 1
            await self._trim(from_bottom=not tail)
        self._update_markers()

    async def _show_images(self, block: GroupBlock, rows: Sequence[Message]) -> None:
        """The chips of the images attached to the group's prompts."""
        history = self.history
        if history is None:
            return
        images = await history.message_images([m.id for m in rows if m.role == "user"])
        if images:
            await block.show_images(images, history.image_file, self._strategy())

    def _strategy(self) -> str:
        """Whose image tokens the chips show: the provider of the plan drawn."""
        return self.plan.request.strategy if self.plan is not None else "openai"

    def _label_if_plan_moved(self, blocks: Sequence[GroupBlock], built_with) -> None:
        """Blocks labelled while they were built: `set_plan` relabels only the blocks
        already in the view, so a plan that arrived while these were being read and
        mounted is applied to them here."""
        if self.plan is not built_with:
            for block in blocks:
                self._label(block)

    def set_plan(self, plan: ContextPlan, *, relabel: bool = True) -> None:
        """Show `plan`'s marks and tier labels (the app passes the plan it drew)."""
        self.plan = plan
        if relabel:
            for block in self._blocks.values():
                self._label(block)
            if self._live is not None:
                self._label(self._live)

    # -- the live turn ------------------------------------------------------


class GroupPager(GroupBlocks):
    """Loading a session into the view and paging through it: ctrl+u / ctrl+d, page
    keys, the mouse wheel at an edge, a group shown on request."""

    async def load(
        self,
        history: HistoryReader,
        *,
        groups: Sequence[GroupSummary] | None = None,
        group_ids: Sequence[int] | None = None,
        plan: ContextPlan | None = None,
    ) -> None:
        """Show the session `history` reads, its newest groups mounted.

        Pass `group_ids` (oldest first, e.g. from the group list's `Ledger.group_rows`)
        or `groups` (from `Ledger.list_groups`, newest first) when the caller
        already has them, so a 5,000-group session is listed once; and `plan`, the
        plan of the next request the caller read for the other panes, so the blocks
        are labelled from the same one.
        """
        self.history = history
        self.session = history.session
        if self._live is not None:
            await self._live.end_segment()
            await self._live.remove()
            self._live = None
        if group_ids is None:
            if groups is None:
                group_ids = await history.group_ids()
            else:
                group_ids = [g.group_id for g in reversed(groups)]
        self._set_gids(list(group_ids))
        if plan is not None:
            self.set_plan(plan, relabel=False)
        n = len(self._gids)
        lo, read = await self._newest_to_fill(n)
        await self._mount_slice(lo, n, read)
        if self._lo > 0:
            # Older groups than those mounted: the pane will scroll. Shown now, its
            # scrollbar is placed by the first layout instead of asking for a second
            # one; `_fill_viewport` hides it if every group fits after all.
            self.set_reactive(Widget.show_vertical_scrollbar, True)
        self.anchor()
        self.run_worker(self._fill_viewport, group="conversation-fill", exclusive=True)

    async def _newest_to_fill(self, n: int) -> tuple[int, dict[int, list[Message]]]:
        """Where the slice a load mounts starts, and the groups' rows read to decide it:
        the newest groups until their text fills `FILL_SCREENS` screens at the view's
        width (`GroupBlock.rows_about`), at most `initial_blocks`. A long group is more
        than a screen: the groups before it would be composed, styled and laid out for
        the first frame for rows nobody sees before paging, which mounts them then."""
        lo = max(0, n - self.initial_blocks)
        width, height = self.size.width or self.expected_width, self.app.size.height
        read: dict[int, list[Message]] = {}
        if self.history is None or width <= 0 or height <= 0:
            return lo, read
        rows = 0
        for i in range(n - 1, lo, -1):
            gid = self._gids[i]
            read[gid] = await self.history.group_messages(gid)
            rows += GroupBlock.rows_about(read[gid], width)
            if rows >= FILL_SCREENS * height:
                return i, read
        return lo, read

    async def _fill_viewport(self) -> None:
        """Short groups may not fill the screen; then nobody could scroll up to page.

        A worker (started by `load`, so whoever waits for the app's workers waits
        for it too): once the mounted blocks are laid out, older groups are mounted
        above, a page at a time, until the pane can scroll. The view does not move:
        it stays at the bottom, following (a user's ctrl+u holds the old top instead).
        """
        await self._mount_until_it_scrolls()
        # `load` showed the scrollbar before the first layout, older groups being left
        # unmounted; if they all fit after all, there is nothing to scroll.
        if self.is_mounted and self.show_vertical_scrollbar and self.max_scroll_y <= 0:
            self.show_vertical_scrollbar = False

    async def _mount_until_it_scrolls(self) -> None:
        for _ in range(FILL_TRIES):
            if self._lo == 0 or not self.is_mounted:
                return
            laid_out = self.size.height and all(b in self._tops for b in self._blocks.values())
            if self._paging or not laid_out:
                await self._next_frame()  # its height is unknown until then
                continue
            if self.max_scroll_y > 0:
                return
            if not await self._page(self._older, max(0, self._lo - self.page_size), hold=False):
                return
            self.anchor()
            await self._next_frame()

    async def load_older(self, count: int | None = None) -> int:
        """Mount up to `count` (default `page_size`) older groups; returns how many.

        One group per frame, the nearest first: a page mounted at once (its widgets
        styled, the screen laid out around them) held the event loop ~100-250 ms.
        """
        if self._paging or self._lo == 0 or self.history is None:
            return 0
        return await self._page(self._older, max(0, self._lo - (count or self.page_size)))

    async def load_newer(self, count: int | None = None) -> int:
        """Mount up to `count` newer groups (after `load_older` unmounted them), as load_older."""
        if self._paging or self._hi >= len(self._gids) or self.history is None:
            return 0
        return await self._page(
            self._newer, min(len(self._gids), self._hi + (count or self.page_size))
        )

    async def _page(self, marker: PageMarker, target: int, *, hold: bool = True) -> int:
        """Move the `marker` end of the mounted slice to `target`, one group per frame,
        trimming the other end to `max_blocks`; with `hold`, what was on screen stays."""
        older = marker is self._older
        self._paging = True
        generation = self._generation
        try:
            if older:
                keep = self._blocks.get(self._gids[self._lo]) if self._lo < self._hi else None
            else:
                keep = self._blocks.get(self._gids[self._hi - 1]) if self._hi > self._lo else None
            # Older: the boundary comes to the top, the new groups just above it. Newer: what
            # the user was looking at stays in place, the new groups below it.
            if hold:
                self._hold(keep, at_top=older)
            mounted = 0
            while (self._lo > target) if older else (self._hi < target):
                if mounted:
                    await self._next_frame()
                    if generation != self._generation:
                        break  # reloaded or jumped meanwhile: that slice stands
                gid = self._gids[self._lo - 1] if older else self._gids[self._hi]
                plan = self.plan
                (block,) = await self._build([gid])
                await self._key_frame_first()
                if generation != self._generation:
                    break
                with self.app.batch_update():
                    if older:
                        await self.mount(block, after=self._older)
                    else:
                        await self.mount(block, before=self._newer)
                    if generation != self._generation:
                        # The slice was replaced while the group was being mounted (End
                        # or a new turn mounted the newest groups): it is not part of it.
                        await block.remove()
                        break
                    if older:
                        self._lo -= 1
                    else:
                        self._hi += 1
                    self._blocks[gid] = block
                    self._label_if_plan_moved([block], plan)
                    trimmed = self._hi - self._lo > self.max_blocks
                    await self._trim(from_bottom=older)
                mounted += 1
                if trimmed and older:
                    self.anchor(False)  # the newest groups are no longer mounted
                if self._key_frame_owed and textual_fixes.scroll_frame_now(self):
                    # A page key came while the batch was open and could not draw: its
                    # scroll now, before the layout the mount asks for (next frame).
                    self._key_frame_owed = False
            # After the frame: refreshing a marker off screen before it makes Textual
            # arrange the whole screen once more just to find it.
            self.call_after_refresh(self._update_markers)
            self.call_after_refresh(self._prepare_older)
            return mounted
        finally:
            self._paging = False
            if hold:
                self._let_go_later(self._keep)

    async def _key_frame_first(self) -> None:
        """Wait until a page key's scroll (`_oldest_to_the_top`) is drawn: mounting a
        group lays the whole screen out again (tens of ms while a reply streams), and
        in the key's frame that layout would hold what the key shows."""
        while self._key_frame_owed and self.is_mounted:
            self._key_frame_owed = False
            await frame_drawn(self)

    async def _next_frame(self) -> None:
        """Wait until the view has been laid out and the screen refreshed (at most a
        quarter second). `call_after_refresh` alone can run before a layout that
        the last mount still owes."""
        self._laid_out.clear()
        with suppress(TimeoutError):
            await asyncio.wait_for(self._laid_out.wait(), 0.25)
        await frame_drawn(self)

    def action_load_older(self) -> None:
        self._oldest_to_the_top()
        self._queue_page(older=True)

    def _oldest_to_the_top(self) -> None:
        """ctrl+u's first step, at once: the oldest mounted group comes to the top of the
        pane, where the page loaded next keeps it (the older groups go above it). Drawn
        in the key's frame, as PageUp is (`_page_scroll`); the page is mounted after,
        in frames of its own, and moves nothing on screen. Left to the layout that
        mounts the page's first group, the first change would show a frame later.

        While pages are still being mounted (keys faster than a page, as while a reply
        streams), the same: the oldest group mounted so far comes to the top at once and
        is held there through the page's remaining mounts; the queued pages follow."""
        if self._shedding or self._lo == 0 or self._lo >= self._hi:
            return  # the history above a new turn is being cut, or nothing is older
        block = self._oldest_block()
        if block is None:
            return
        top = self._tops.get(block)
        if top is None:
            # Just mounted (a page under way, or the groups End mounted), not laid out
            # yet: the layout its mount owes puts it at the top, so the key moves the
            # view now rather than after the page under way is all mounted (a frame
            # per group). That layout is drawn at once, not at the frame timer's next
            # tick: while a reply streams, the chunks and the page's next mount queued
            # ahead of that tick would hold the key's change back.
            self._hold(block, at_top=True)
            echo.frame_at_once(self)
            return
        if top >= round(self.scroll_y):
            return  # on screen below the top: the page's layout moves it
        self.scroll_to(y=top, animate=False, immediate=True)
        if self._paging:
            self._hold(block, at_top=True)  # the page under way mounts above it
        # Drawn now, alone: the next group is mounted once this frame is out
        # (`_key_frame_first`), so its layout is not part of the key's frame.
        if not textual_fixes.scroll_frame_now(self):
            self._key_frame_owed = True
            echo.frame_now(self)

    def action_load_newer(self) -> None:
        self._queue_page(older=False)

    def _queue_page(self, *, older: bool) -> None:
        """A page key: counted, and its page loaded once the one under way is mounted.

        A worker: the page takes a few frames and the app's key queue must not wait.
        A key pressed while a page is still loading is not dropped (`load_older`
        alone returns at once while paging): each press is one more page."""
        self._queued[older] += 1
        if self._queued[older] == 1:  # no worker is draining this direction's queue
            self.run_worker(partial(self._load_queued, older), group="conversation-page")

    async def _load_queued(self, older: bool) -> None:
        load = self.load_older if older else self.load_newer
        try:
            for _ in range(PAGE_WAITS):
                if not self._queued[older] or not self.is_mounted:
                    return
                if self._paging:
                    await self._next_frame()  # a page (or the shedding) is under way
                    continue
                self._queued[older] -= 1
                await load()
        finally:
            self._queued[older] = 0

    async def action_newest(self) -> None:
        await self.show_newest()

    # PageUp and PageDown move a page at once. Textual animates them (50 lines a
    # second, its first frames a line or two), so the page showed 20-35 ms after
    # the key at best and most of a second later in full; a jump is drawn in the
    # next frame. The mouse wheel scrolls as Textual has it.

    def action_page_up(self) -> None:
        self._page_scroll(-1)

    def action_page_down(self) -> None:
        self._page_scroll(+1)

    def _page_scroll(self, direction: int) -> None:
        if not self.allow_vertical_scroll:
            raise SkipAction()
        height = self.scrollable_content_region.height
        # Scrolled now, not after the next frame (Textual's default), and drawn at once,
        # its scrollbar in the same frame.
        self.scroll_to(y=self.scroll_y + direction * height, animate=False, immediate=True)
        if not textual_fixes.scroll_frame_now(self):
            echo.frame_now(self)

    def _drop_pages(self) -> None:
        """Forget the page keys not yet served and stop the page under way: End or a
        new turn takes the view to the bottom, and pages the keys asked for before it
        would hold the top there (the view then stops following the reply)."""
        self._queued = {True: 0, False: 0}
        if self._paging:
            self._generation += 1  # the page's loop stops at its next group
            self._keep = None

    async def show_newest(self) -> None:
        """Mount the newest groups (if needed) and follow the bottom again."""
        self._drop_pages()
        n = len(self._gids)
        if self._hi < n:
            await self._mount_slice(n - 1, n)
            self._grow(older=self.page_size - 1)
        self.anchor()

    def _grow(self, *, older: int = 0, newer: int = 0, hold: GroupBlock | None = None) -> None:
        """Mount neighbours of a slice just mounted, a group per frame (a worker): a
        screenful mounted at once (its blocks built, styled, laid out) held the loop
        a few hundred ms. `hold` stays at the top of the pane meanwhile (it is
        scrolled there in the first layout); without, the view follows the bottom."""
        if hold is not None:
            self._hold(hold, at_top=True)
        keep = self._keep

        async def grow() -> None:
            try:
                # A page stopped by the jump (`_drop_pages`) ends at its next group.
                for _ in range(PAGE_WAITS):
                    if not self._paging or not self.is_mounted:
                        break
                    await self._next_frame()
                if newer and not self._paging and self._hi < len(self._gids):
                    await self._page(
                        self._newer, min(len(self._gids), self._hi + newer), hold=False
                    )
                if older and not self._paging and self._lo > 0:
                    await self._page(self._older, max(0, self._lo - older), hold=False)
            finally:
                self._let_go_later(keep)

        self.run_worker(grow, group="conversation-page")

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value != old_value:
            self.styler.later()
        if self._keep is not None and new_value != old_value:
            self._keep = None  # a scroll by someone else (arrange sets it silently): let go
        if not self._placing and new_value != old_value:
            self._follow_or_let_go(new_value < old_value)
        if new_value != old_value and self.history is not None:
            # Only a move towards an edge pages: loading scrolls from 0 to the
            # bottom, and that must not count as reaching the top.
            self._scroll_up = new_value < old_value
            if not self._check_pending:
                self._check_pending = True
                self.call_after_refresh(self._page_at_edge)

    def _follow_or_let_go(self, up: bool) -> None:
        """A scroll by the user while an answer streams: up lets go; down to where
        following would put the view follows again."""
        if up:
            self._following = False
            return
        answer = self._streaming_answer()
        if answer is not None and not self._following:
            end = self._live_end(answer)
            height = self.scrollable_content_region.height
            if end is not None and end <= round(self.scroll_y) + height:
                self.anchor()

    async def _page_at_edge(self) -> None:
        # Checked after the refresh, not in the watcher: a rebuild or a jump
        # (show_group) moves the scroll through 0 on its way, and must not page.
        self._check_pending = False
        if self._paging or self.max_scroll_y <= 0:
            return
        if self._scroll_up and self.scroll_y <= 0 and self._lo > 0:
            self.action_load_older()
        elif (
            not self._scroll_up
            and self.scroll_y >= self.max_scroll_y
            and self._hi < len(self._gids)
        ):
            self.action_load_newer()

    async def show_group(self, group_id: int) -> bool:
        """Scroll to a group, mounting it (and its neighbours) first when needed."""
        block = self.block(group_id)
        if block is None:
            if group_id not in self._index and self.history is not None and self.session:
                self._set_gids(await self.history.group_ids())
            i = self._index.get(group_id)
            if i is None:
                return False
            # The target first, then a page after it and one before it (paging brings
            # the rest); the target stays at the top meanwhile.
            await self._mount_slice(i, i + 1)
            if i + 1 < len(self._gids):
                self.anchor(False)
            block = self._blocks.get(group_id)
            if block is None:
                return False
            # The groups after it first, so that it can be scrolled to the top at once;
            # then those before it, in the background.
            self._hold(block, at_top=True)
            await self._page(self._newer, min(len(self._gids), i + 1 + self.page_size), hold=False)
            self._grow(older=self.page_size, hold=block)
            return True
        self.call_after_refresh(self.scroll_to_widget, block, animate=False, top=True)
        return True


class ConversationView(GroupPager):
    """The session's groups, a bounded slice mounted, and the live turn.

    `load(ws)` shows the newest groups; `show_group(gid)` jumps anywhere;
    `begin_turn` / `on_event` / `end_turn` render a running turn from the
    orchestrator's events. `mounted_blocks` counts mounted `GroupBlock`s.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+u", "load_older", "Older groups", id="conversation_older"),
        Binding("ctrl+d", "load_newer", "Newer groups", id="conversation_newer"),
        Binding("end", "newest", "Newest", show=False, id="conversation_newest"),
    ]
    DEFAULT_CSS = """
    ConversationView { height: 1fr; padding: 0 1; scrollbar-gutter: stable; }
    """

    @property
    def live_block(self) -> GroupBlock | None:
        return self._live

    async def begin_turn(self, group_id: int | None, prompt_text: str) -> GroupBlock:
        """Show a new turn at the bottom and follow it.

        `group_id` may be None when the prompt is shown before the ledger has
        given it an id; the `TurnStarted` event fills it in.
        """
        if self._live is not None:
            await self.end_turn()
        self._drop_pages()
        n = len(self._gids)
        if self._hi < n:
            await self._mount_slice(n - 1, n)  # the latest group above the turn; paging brings more
        elif self._hi - self._lo > self.page_size:
            self.run_worker(self._shed_history, group="conversation-shed", exclusive=True)
        await self._settle_previous_live()
        block = GroupBlock(group_id, prompt_text, live=True)
        block.ordinal = len(self._gids) + 1  # the newest group of the session
        self._live = block
        await self.mount(block, after=self._newer)
        self.anchor()
        return block

    async def _shed_history(self) -> None:
        """Unmount all but a page of the groups above the live turn, a page per frame.

        Every layout pass while the reply streams walks every mounted widget;
        scrolling up pages the rest back in. A page at a time: unmounting 25
        groups at once held the loop ~120 ms.
        """
        if self._paging:
            return
        self._paging = True  # no paging meanwhile: both move _lo
        self._shedding = True
        self._generation += 1
        generation = self._generation
        try:
            while self._hi - self._lo > self.page_size and generation == self._generation:
                await self._trim(
                    from_bottom=False,
                    limit=max(self.page_size, self._hi - self._lo - self.page_size),
                )
                self._update_markers()
                await self._next_frame()
        finally:
            self._paging = False
            self._shedding = False

    async def _settle_previous_live(self) -> None:
        # The last turn's answer is still a Markdown widget: swap it for the light form.
        for gid, block in list(self._blocks.items()):
            if block.live_answer is not None or block.query(LiveAnswer):
                await self.refresh_group(gid)

    # The running turn's events arrive as `ui.messages.TurnMessage`s (posted here by
    # the turn controller; they bubble on to the screen).

    async def show_event(self, event) -> None:
        """Draw one orchestrator event at once, as its message's handler does."""
        from slop_tui.ui.messages import turn_message

        message = turn_message(event)
        handler = getattr(self, message.handler_name, None)
        if handler is not None:
            result = handler(message)
            if result is not None:
                await result

    async def on_turn_begins(self, message) -> None:
        await self.begin_turn(None, message.prompt)

    async def on_turn_turn_started(self, message) -> None:
        event = message.event
        if self._live is None:  # a turn shown from its first event (another surface's)
            await self.begin_turn(event.group_id, await self._fetch_text(event.group_id) or "")
        elif self._live.group_id is None:
            self._live.group_id = event.group_id
            self._live.render_header()

    async def on_turn_text_chunk(self, message) -> None:
        live = self._live
        if live is None:
            return
        live.thinking = None
        await live.live_text(message.event.text)
        answer = live.live_answer
        if answer is not None and answer.grown is None:
            answer.grown = partial(self.follow_live, answer)

    async def on_turn_thinking_chunk(self, message) -> None:
        if self._live is not None:
            await self._live.live_thinking(message.event.text)

    async def on_turn_tool_call_event(self, message) -> None:
        if self._live is not None:
            await self._live.live_tool_call(message.event, self._fetch_text)

    async def on_turn_tool_result_event(self, message) -> None:
        if self._live is not None:
            event = message.event
            await self._live.live_tool_result(event, event.message, self._fetch_text)

    def on_turn_usage_event(self, message) -> None:
        live = self._live
        if live is not None:
            event = message.event
            live.usage = snapshot_label(event.prompt_tokens, event.completion_tokens)
            live.render_header()

    async def on_turn_notice(self, message) -> None:
        # A turn cancelled as the app closes says so after its group is taken down.
        if self._live is not None and self._live.is_attached:
            await self._live.line(f"⚠ {message.event.text}", "notice")

    async def on_turn_error_event(self, message) -> None:
        if self._live is not None:
            event = message.event
            kind = f"{event.error_kind}: " if event.error_kind else ""
            await self._live.line(f"✖ {kind}{event.message}", "error")

    def on_turn_plan_sent(self, message) -> None:
        """The request just sent: the blocks' marks and tier labels show it."""
        if message.event.plan is not None:
            self.set_plan(message.event.plan)

    async def on_turn_turn_finished(self, _message) -> None:
        if self._live is not None:
            await self._live.end_segment()

    async def on_turn_ended(self, _message) -> None:
        if self.app.is_running:
            await self.end_turn()

    async def end_turn(self) -> None:
        """The turn is over (finished, failed or cancelled): settle it from the ledger."""
        live = self._live
        if live is None:
            return
        self._live = None
        await live.end_segment()
        gid = live.group_id
        if gid is None or self.history is None or self.session is None:
            live.live = False
            live.render_header()
            return
        rows = await self.history.group_messages(gid)
        await live.settle(rows)
        await self._show_images(live, rows)
        if gid not in self._index:
            self._gids.append(gid)
            self._index[gid] = len(self._gids) - 1
        if self._hi == self._index[gid]:
            # Contiguous with the mounted slice: it joins it (above the marker).
            self.move_child(live, before=self._newer)
            self._blocks[gid] = live
            self._hi += 1
            await self._trim(from_bottom=False)
        else:
            await live.remove()
        self._update_markers()  # the screen relabels with the next request's plan

    # -- copy ---------------------------------------------------------------

    async def group_markdown(self, block: GroupBlock) -> str:
        """A group as Markdown, for the clipboard (full texts from the ledger)."""
        if self.history is None or self.session is None or block.group_id is None:
            return block.prompt
        rows = await self.history.group_messages(block.group_id)
        return group_to_markdown(rows)


__all__ = [
    "AnswerBlock",
    "ConversationView",
    "CopyRequested",
    "GroupBlock",
    "LiveAnswer",
    "ToolBlock",
    "group_to_markdown",
    "neutralise",
]
