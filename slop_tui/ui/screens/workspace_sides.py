"""The workspace's side panes: mounted after the conversation's first frame, filled,
shown, and the short terminal's one part at a time; and the output panel's text.

`WorkspacePanes.compose` lays out the left and right panes empty, at their widths,
and the output panel empty. `SidePanes.mount` mounts the panes' widgets into them
once the conversation is on screen, so neither these widgets' modules nor their
composition, styling and first layout are on the first frame's path. The panes'
sizes do not depend on their content: mounting them moves nothing. The widgets'
modules are imported here only when they are mounted (this module is on the first
frame's path). The output panel's text (Textual's Markdown widget, markdown-it) is
mounted with the first command that shows something there, not with the panes:
a settled screen does not show it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from textual.widget import Widget
from textual.widgets import Static

from slop_tui.records import Changed
from slop_tui.ui.frames import frame_drawn
from slop_tui.ui.layout import PROMPTS_FIRST, SIDE_PARTS, SNIPPET_SOURCE
from slop_tui.ui.textual_fixes import hold_paint, release_paint

if TYPE_CHECKING:
    from slop_tui.ui.screens.workspace import WorkspacePanes
    from slop_tui.ui.widgets.output import OutputMarkdown
    from slop_tui.workspace import Snapshot, Workspace

GROUPS_TITLE = "Groups  ● window ◌ unsummarized Σ summary ○ out × dropped"


def widgets() -> tuple[type[Widget], ...]:
    """Every widget class mounted here (their bindings, for `[keymap]`)."""
    from slop_tui.ui.widgets.anchors import ScratchpadEditor, StatePane
    from slop_tui.ui.widgets.gauge import TokenGauge
    from slop_tui.ui.widgets.groups import GroupList, SessionList
    from slop_tui.ui.widgets.output import OutputMarkdown
    from slop_tui.ui.widgets.preview import ContextPreview
    from slop_tui.ui.widgets.sideswitch import SideSwitch

    return (
        SessionList,
        GroupList,
        TokenGauge,
        SideSwitch,
        StatePane,
        ScratchpadEditor,
        ContextPreview,
        OutputMarkdown,
    )


def left_pane() -> list[Widget]:
    """The sessions and the groups."""
    from slop_tui.ui.widgets.groups import GroupList, SessionList

    return [
        Static("Sessions", classes="pane-title"),
        SessionList(id="session-list"),
        Static(GROUPS_TITLE, classes="pane-title"),
        GroupList(id="group-list"),
    ]


def right_pane() -> list[Widget]:
    """The token gauge, the switch of a short terminal, STATE, the scratchpad and the
    context preview."""
    from slop_tui.ui.widgets.anchors import ScratchpadEditor, StatePane
    from slop_tui.ui.widgets.gauge import TokenGauge
    from slop_tui.ui.widgets.preview import ContextPreview
    from slop_tui.ui.widgets.sideswitch import SideSwitch

    return [
        TokenGauge(id="gauge"),
        SideSwitch(id="side-switch"),
        Static("STATE", classes="pane-title"),
        StatePane(id="state"),
        Static("Scratchpad", classes="pane-title"),
        ScratchpadEditor(id="scratchpad"),
        Static("Context preview", classes="pane-title"),
        ContextPreview(id="preview"),
    ]


class SidePanes:
    """The side panes of one workspace screen: their widgets mounted unseen, filled
    from the workspace, then shown in one frame; what they show after each read
    (`show`); the part of a short terminal's right pane that is shown."""

    def __init__(self, screen: WorkspacePanes) -> None:
        self.screen = screen
        self._mounting = asyncio.Lock()
        self._output: OutputMarkdown | None = None
        self._output_mounted: asyncio.Future[None] | None = None

    async def mount(self) -> None:
        """The side panes' widgets, mounted into the panes laid out for them and laid
        out, with nothing painted from here until `reveal` (`hold_paint`): the first
        frame that shows them shows them filled, and they are drawn once."""
        screen = self.screen
        async with self._mounting:  # once, even if two callers ask at once
            if screen.side_panes_mounted:
                return
            hold_paint(screen.app)
            # Mounted in one batch: one layout when they are all in, not one for each
            # step of their mounting.
            with screen.app.batch_update():
                mounts = (
                    screen.query_one("#left").mount_all(left_pane()),
                    screen.query_one("#right").mount_all(right_pane()),
                )
                for mounted in mounts:
                    await mounted
            # Laid out before they are filled: a list scrolled to its end and a gauge
            # worded for its width need their size (filled at size 0, they were drawn
            # once wrong, then right).
            await frame_drawn(screen.app, timeout=1.0)
            screen.side_panes_mounted = True
            self.show_part(screen.layout_state.side_part)

    async def fill(self) -> None:
        """After the conversation's frame: every side pane filled and shown in one
        frame (the conversation's marks and tier labels with them)."""
        screen = self.screen
        await frame_drawn(screen.app, timeout=1.0)  # the conversation's frame is out first
        ws = screen.workspace
        reading: asyncio.Task[Snapshot] | None = None
        rows: asyncio.Task[list[tuple]] | None = None
        try:
            if ws is not None and screen.app.is_running:
                # The panes' reads start before their widgets are mounted: SQLite's part
                # of them runs on the ledger's thread while this one imports, composes,
                # styles and lays out the widgets. The group list's rows (a pass over
                # every message of the session, ~17 ms at 20,000 messages) go first
                # and reach the ledger's thread now: a read queued behind others goes
                # out only at this thread's next turn, which the mount's imports and
                # composition hold off for 60-150 ms. They come as one row
                # (`Ledger.group_rows`), so reading them beside the mount takes the
                # interpreter lock from it once, not once a group.
                rows = asyncio.ensure_future(
                    ws.ledger.group_rows(
                        ws.session, SNIPPET_SOURCE, prompts_for_newest=PROMPTS_FIRST
                    )
                )
                reading = asyncio.ensure_future(self._read(ws, rows))
                await asyncio.sleep(0)  # both queue their first read now
            await self.mount()
            if reading is not None:
                with screen.unless_closing():
                    snap = await reading
                    for warning in ws.pop_warnings():
                        screen.app.notify(warning, severity="warning", timeout=15)
                    self.show(snap)
            await self.reveal()
        finally:
            for read in (reading, rows):  # the mount failed: the reads are not awaited
                if read is None:
                    continue
                if not read.done():
                    read.cancel()
                elif not read.cancelled():
                    read.exception()  # their failure is the mount's, not a lost one
            release_paint(screen.app)  # painted again even if the fill failed

    @staticmethod
    async def _read(ws: Workspace, rows: asyncio.Future[list[tuple]]) -> Snapshot:
        """What the side panes show first (`rows`: the group list's, being read), with
        the writes `Workspace.open(defer_writes=True)` left for now. Not the session's
        spend: the conversation's first frame has just read it, and a call another
        process records after that moves the ledger's data version, which reloads
        every pane, the header's cost with them (`WorkspacePanes._check_ledger`)."""
        await ws.register_tools()
        ws.check_settings()  # as well (the context engine's modules load here)
        return await ws.snapshot(Changed.ALL, rows_read=rows, spend=False)

    async def reveal(self) -> None:
        """The side panes are drawn from now on, in one frame: filled, or empty when the
        workspace could not be opened."""
        screen = self.screen
        await self.mount()
        screen.side_panes_filled = True
        for pane in screen.query("#left, #right"):
            pane.remove_class("-filling", update=False)  # a marker: no rule reads it
        release_paint(screen.app)

    def show(self, snap: Snapshot) -> None:
        """Every pane that shows what `snap` read; the parts it did not read stay."""
        screen = self.screen
        ws = screen.workspace
        screen.show_status(snap.choice, snap.session)
        if snap.sessions is not None:
            screen.session_list.load(snap.sessions, ws.session)
        group_list = screen.group_list
        if snap.rows is not None:
            group_list.load_rows(snap.rows, snap.plan)
            group_list.fill_prompts(ws.history())  # the older groups' prompts, after this frame
        if snap.changed & (Changed.STATE | Changed.HISTORY | Changed.SESSION):
            screen.state_pane.set_state(snap.state.content if snap.state else None)
        pad = screen.scratchpad
        if pad.session != ws.session:
            pad.flush()  # unsaved edits belong to the session left (F6 jump, commands)
            pad.load(snap.session.scratchpad, session=ws.session)
        else:
            pad.external_update(snap.session.scratchpad)
        self.show_context(snap)
        turns = screen.app.turns
        if snap.failed_prompts is not None:
            newest_failed = snap.failed_prompts[0] if snap.failed_prompts else None
            if newest_failed != turns.failed_prompt:
                turns.failed_prompt = newest_failed
                screen.app.refresh_bindings()  # the footer shows ctrl+r only while there is one

    def show_context(self, snap: Snapshot) -> None:
        """Every pane that shows the next request draws the same plan."""
        screen = self.screen
        plan = snap.plan
        screen.gauge.update_from(
            plan,
            snap.context_window,
            snap.prompt_series,
            snap.cached_tokens,
            estimated=snap.estimated,
            background=snap.background,
        )
        screen.preview.set_prompt(plan.request, estimated=snap.estimated)
        screen.group_list.set_plan(plan)
        screen.conversation.set_plan(plan)
        if snap.estimated and screen.app.ready:
            # Something changed after start-up that no stored count covers: count
            # it exactly, off the event loop (never on the start path).
            screen.count_exactly()  # a worker of the screen

    # -- a short terminal's right pane: one part at a time ---------------------------

    def show_part(self, part: str) -> None:
        screen = self.screen
        right = screen.query_one("#right")
        for name in SIDE_PARTS:
            right.set_class(name == part, f"-part-{name}")
        if screen.side_panes_mounted:
            switch = screen.query_one("#side-switch")
            switch.show_part(part, screen.app.key_for("focus_side", "f9").upper())

    def part_focus(self, part: str) -> Widget:
        """What takes the keyboard in a side part."""
        screen = self.screen
        if part == "scratchpad":
            return screen.scratchpad.area
        if part == "preview":
            return screen.query_one("#preview-text")
        return screen.state_pane

    def part_has_focus(self, part: str) -> bool:
        focused = self.screen.focused
        holder = self.screen.query_one(f"#{part}")
        return focused is not None and (focused is holder or holder in focused.ancestors)

    # -- the output panel ------------------------------------------------------------

    async def output_text(self) -> OutputMarkdown:
        """The output panel's text, mounted the first time a command shows something."""
        if self._output is None:
            from slop_tui.ui.widgets.output import OutputMarkdown

            text = self._output = OutputMarkdown("", id="output-text")
            panel = self.screen.query_one("#output")

            async def mounted() -> None:
                await panel.mount(text)

            self._output_mounted = asyncio.ensure_future(mounted())  # awaited by each caller
        assert self._output_mounted is not None
        await self._output_mounted
        return self._output
