"""The group and session lists: marks drawn from the context plan, intents and 5,000 groups."""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.message import Message

from slop_tui.context.assemble import AssemblyInputs
from slop_tui.context.budget import CompactionSettings
from slop_tui.context.plan import MARKS, PlanInputs, PlanSettings, build_plan
from slop_tui.records import GroupSummary, NewMessage, Session, SessionSummary, Summary
from slop_tui.records import Message as Row
from slop_tui.ui.numbers import compact_tokens
from slop_tui.ui.widgets.groups import (
    FLAG_ERROR,
    FLAG_INTERRUPTED,
    GroupList,
    SessionList,
    snippet,
)
from tests.workspace_fixtures import open_workspace

MARK_IN_WINDOW, MARK_WAITING, MARK_SUMMARY = MARKS["window"], MARKS["waiting"], MARKS["summary"]
MARK_OUTSIDE, MARK_DROPPED = MARKS["outside"], MARKS["dropped"]


def group(gid: int, status: str = "completed", tokens: int = 100, lane: str = "main", prompt=None):
    return GroupSummary(gid, lane, prompt or f"prompt {gid}", 2, tokens, status, float(gid))


def plan_for(groups, window: int, lane: str = "main", *, summaries=(), compaction=False):
    """The real context plan over one user row per group (its id is the group's)."""
    rows = [
        Row(g.group_id, "s", g.group_id, g.lane, "user", g.prompt, status=g.status)
        for g in sorted(groups, key=lambda g: g.group_id)
    ]
    visible = [m for m in rows if m.status != "dropped" and m.lane == lane]
    inputs = PlanInputs(
        assembly=AssemblyInputs(
            session=Session("s", window_size=window, lane=lane), messages=visible, strategy="openai"
        ),
        backlog=visible,
        summaries=summaries,
    )
    return build_plan(inputs, PlanSettings(compaction=CompactionSettings(enabled=compaction)))


class ListsApp(App):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Message] = []

    def compose(self) -> ComposeResult:
        yield SessionList(id="sessions")
        yield GroupList(id="groups")

    def on_group_list_drop_toggled(self, m: GroupList.DropToggled) -> None:
        self.seen.append(m)

    def on_group_list_remove_requested(self, m: GroupList.RemoveRequested) -> None:
        self.seen.append(m)

    def on_group_list_show_requested(self, m: GroupList.ShowRequested) -> None:
        self.seen.append(m)

    def on_group_list_selected(self, m: GroupList.Selected) -> None:
        self.seen.append(m)

    def on_session_list_session_chosen(self, m: SessionList.SessionChosen) -> None:
        self.seen.append(m)

    def of(self, kind: type[Message]) -> list:
        return [m for m in self.seen if isinstance(m, kind)]


MIXED = [
    group(1),
    group(2),
    group(3, "dropped"),
    group(4, "completed"),
    group(5, "interrupted"),
    group(6),
    group(7, "error"),
    group(8, "completed", lane="side"),
    group(9),
]


def test_snippet_is_one_line_without_control_characters():
    text = "fix\x1b[31m the\tbug\n\nnow\x07 " + "x" * 500
    line = snippet(text, 30)
    assert line == "fix [31m the bug now " + "x" * 9
    assert all(ch >= " " for ch in line)


def test_compact_tokens():
    assert [compact_tokens(n) for n in (0, 999, 1234, 45_678, 2_500_000)] == [
        "0",
        "999",
        "1.2k",
        "45k",
        "2.5M",
    ]


async def test_marks_for_each_status_and_window_membership():
    app = ListsApp()
    async with app.run_test(size=(80, 20)):
        groups = app.query_one(GroupList)
        # the ledger lists newest first
        groups.load(list(reversed(MIXED)), plan_for(MIXED, 3))
        assert [g.group_id for g in groups.groups] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
        marks = {g.group_id: groups.row_text(g.group_id)[:2] for g in groups.groups}
        assert marks == {
            1: MARK_OUTSIDE + " ",
            2: MARK_OUTSIDE + " ",
            3: MARK_DROPPED + " ",
            4: MARK_OUTSIDE + " ",
            5: MARK_OUTSIDE + FLAG_INTERRUPTED,
            6: MARK_IN_WINDOW + " ",
            7: MARK_IN_WINDOW + FLAG_ERROR,
            8: MARK_OUTSIDE + " ",  # another lane is never sent
            9: MARK_IN_WINDOW + " ",
        }
        row = groups.row_text(9)
        assert " 9 " in row and "100" in row and "prompt 9" in row
        # Styles come from component classes, resolved at render time.
        spans = {s.style for s in groups.row_content(3).spans}
        assert ".grouplist--dropped" in spans
        assert ".grouplist--interrupted" in {s.style for s in groups.row_content(5).spans}
        # Every mark is the plan's place for the group: the list decides nothing.
        plan = groups.plan
        for g in groups.groups:
            assert groups.place_of(g.group_id) == plan.group_place(g.group_id, g.lane, g.status)


async def test_summary_and_waiting_marks_come_from_the_plan():
    """With compaction on, what left the window is covered by a summary or waits for
    one, listed and not sent."""
    app = ListsApp()
    summary = Summary(7, "s", "main", "lane", 1, 2, "earlier", 1, 0.0)
    async with app.run_test(size=(80, 20)):
        groups = app.query_one(GroupList)
        groups.load(MIXED, plan_for(MIXED, 3, summaries=[summary], compaction=True))
        marks = {g.group_id: groups.row_text(g.group_id)[0] for g in groups.groups}
        assert marks == {
            1: MARK_SUMMARY,
            2: MARK_SUMMARY,
            3: MARK_DROPPED,
            4: MARK_WAITING,
            5: MARK_WAITING,
            6: MARK_IN_WINDOW,
            7: MARK_IN_WINDOW,
            8: MARK_OUTSIDE,
            9: MARK_IN_WINDOW,
        }
        assert groups.place_of(1).summary_id == 7
        assert ".grouplist--summarized" in {s.style for s in groups.row_content(1).spans}
        # Widening the window to the full history: the summary is not used, every
        # visible group of the lane is in the window (the window is a view).
        groups.set_plan(plan_for(MIXED, 0, summaries=[summary], compaction=True))
        assert {g.group_id for g in groups.groups if groups.in_window(g.group_id)} == {
            1,
            2,
            4,
            5,
            6,
            7,
            9,
        }


async def test_reload_updates_marks_and_keeps_the_highlight():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        groups.load(MIXED, plan_for(MIXED, 3))
        groups.focus()
        groups.select_group(6)
        await pilot.pause()
        # Group 9 dropped: 5 slides into the window.
        changed = [group(9, "dropped") if g.group_id == 9 else g for g in MIXED]
        groups.load(changed, plan_for(changed, 3))
        assert groups.row_text(9).startswith(MARK_DROPPED)
        assert groups.row_text(5).startswith(MARK_IN_WINDOW)
        assert groups.highlighted_group.group_id == 6
        # A new group appends a line; a removed one rebuilds and keeps the highlight near.
        more = [*changed, group(10)]
        groups.load(more, plan_for(more, 3))
        assert groups.option_count == 10 and groups.highlighted_group.group_id == 6
        fewer = [g for g in changed if g.group_id != 6]
        groups.load(fewer, plan_for(fewer, 3))
        assert groups.highlighted_group.group_id == 7


async def test_keys_post_intents():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        groups.load(MIXED, plan_for(MIXED, 3))
        groups.focus()
        await pilot.press("home")  # group 1
        await pilot.press("d")
        await pilot.press("down", "down", "d")  # group 3 is dropped: restore it
        await pilot.press("x")  # not bound: nothing (in the app it goes to the prompt)
        await pilot.press("delete")
        await pilot.press("enter")
        await pilot.pause()
        drops = app.of(GroupList.DropToggled)
        assert [(m.group_id, m.dropped) for m in drops] == [(1, True), (3, False)]
        assert [m.group_id for m in app.of(GroupList.RemoveRequested)] == [3]
        assert [m.group_id for m in app.of(GroupList.ShowRequested)] == [3]
        selected = [m.group_id for m in app.of(GroupList.Selected)]
        assert selected[-3:] == [1, 2, 3]


async def test_click_shows_a_group():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        groups.load(MIXED[:3], plan_for(MIXED[:3], 3))
        await pilot.pause()
        region = groups.content_region
        await pilot.click(
            GroupList, offset=(region.x - groups.region.x + 4, region.y - groups.region.y + 1)
        )
        await pilot.pause()
        assert [m.group_id for m in app.of(GroupList.ShowRequested)] == [2]


async def test_a_click_on_the_mark_drops_or_restores_the_group():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        rows = [group(1), group(2, "dropped"), group(3)]
        groups.load(rows, plan_for(rows, 3))
        await pilot.pause()
        region = groups.content_region
        for row in (0, 1):  # the first cell of the line is the mark
            await pilot.click(
                GroupList, offset=(region.x - groups.region.x, region.y - groups.region.y + row)
            )
        await pilot.pause()
        drops = [(m.group_id, m.dropped) for m in app.of(GroupList.DropToggled)]
        assert drops == [(1, True), (2, False)]
        assert app.of(GroupList.ShowRequested) == []  # the mark does not show the group


async def test_selected_says_what_d_would_do():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        groups.load(MIXED, plan_for(MIXED, 3))
        groups.focus()
        groups.select_group(6)
        await pilot.pause()
        groups.select_group(3)
        await pilot.pause()
        last_two = [(m.group_id, m.dropped) for m in app.of(GroupList.Selected)][-2:]
        assert last_two == [(6, False), (3, True)]
        app.query_one(SessionList).focus()  # leaving the list hides the projection
        await pilot.pause()
        assert app.of(GroupList.Selected)[-1].group_id is None


async def test_five_thousand_groups_load_fast_and_end_reaches_the_last(capsys):
    many = [
        group(i, ("completed", "dropped", "interrupted")[i % 3], tokens=i) for i in range(1, 5001)
    ]
    app = ListsApp()
    async with app.run_test(size=(100, 40)) as pilot:
        groups = app.query_one(GroupList)
        start = time.perf_counter()
        groups.load(many, plan_for(many, 5))
        await pilot.pause()
        loaded = time.perf_counter() - start
        groups.focus()
        start = time.perf_counter()
        await pilot.press("end")
        end_key = time.perf_counter() - start
        assert groups.highlighted == 4999
        assert groups.highlighted_group.group_id == 5000
        assert groups.is_vertical_scroll_end
        start = time.perf_counter()
        groups.load([*many, group(5001)], plan_for([*many, group(5001)], 5))
        await pilot.pause()
        appended = time.perf_counter() - start
        with capsys.disabled():
            print(
                f"\n[groups] 5,000 groups: load+settle {loaded * 1000:.0f} ms, "
                f"End key {end_key * 1000:.0f} ms, append one {appended * 1000:.0f} ms"
            )
        assert loaded < 5 and end_key < 5


async def test_session_list_marks_the_current_one_and_posts_the_choice():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        sessions = app.query_one(SessionList)
        sessions.load(
            [
                SessionSummary("alpha", 3, 9, 1200, 2.0, "x"),
                SessionSummary("beta", 1, 2, 50, 1.0, ""),
            ],
            "gamma",  # not written yet: still listed and marked
        )
        assert list(sessions.names) == ["gamma", "alpha", "beta"]
        assert str(sessions.options[0].prompt).startswith("● gamma")
        assert str(sessions.options[1].prompt).startswith("  alpha")
        sessions.focus()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert [m.name for m in app.of(SessionList.SessionChosen)] == ["alpha"]


async def test_refresh_from_a_real_workspace(tmp_path):
    ws = await open_workspace(tmp_path)
    try:
        ledger = ws.ledger
        for i in range(4):
            user = await ledger.append_user(ws.session, f"question {i}")
            await ledger.append(ws.session, user.group_id, [NewMessage("assistant", f"answer {i}")])
        await ledger.set_window(ws.session, 2)
        first = (await ledger.list_groups(ws.session))[-1].group_id
        await ledger.set_group_dropped(ws.session, first, True)
        app = ListsApp()
        async with app.run_test(size=(80, 20)):
            groups = app.query_one(GroupList)
            groups.set_plan((await ws.display_plan())[0])
            await groups.refresh_from(ws.history())
            app.query_one(SessionList).load(await ws.ledger.list_sessions(), ws.session)
            marks = [groups.row_text(g.group_id)[0] for g in groups.groups]
            # The 2-group window is the next prompt's group and the newest: the two
            # before it left, and are listed in one line until a summary covers them.
            assert marks == [MARK_DROPPED, MARKS["waiting"], MARKS["waiting"], MARK_IN_WINDOW]
            assert "question 3" in groups.row_text(groups.groups[-1].group_id)
            assert app.query_one(SessionList).current == ws.session
    finally:
        await ws.close()


async def test_a_theme_switch_restyles_the_marks_without_a_reload():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        groups.load([group(1, "interrupted")], plan_for([group(1, "interrupted")], 3))
        await pilot.pause()

        def flag_colour():
            segments = list(groups.render_line(0))
            return next(s.style.color for s in segments if s.text.startswith("◐"))

        before = flag_colour()
        app.theme = "textual-light"
        await pilot.pause()
        assert flag_colour() != before
        assert flag_colour().triplet.hex == app.theme_variables["text-warning"].lower()


async def test_group_rows_is_list_groups_in_one_compact_read(tmp_path):
    ws = await open_workspace(tmp_path)
    try:
        ledger = ws.ledger
        for i in range(5):
            user = await ledger.append_user(ws.session, f"question {i} " + "x" * 400)
            await ledger.append(ws.session, user.group_id, [NewMessage("assistant", f"answer {i}")])
        groups = await ledger.list_groups(ws.session)
        await ledger.set_group_dropped(ws.session, groups[1].group_id, True)
        groups = await ledger.list_groups(ws.session)
        rows = await ledger.group_rows(ws.session)
        assert [GroupSummary(*row) for row in rows] == [
            GroupSummary(
                g.group_id, g.lane, g.prompt[:240], g.messages, g.tokens, g.status, g.created_at
            )
            for g in reversed(groups)
        ]
        assert {row[5] for row in rows} == {"completed", "dropped"}
        assert all(isinstance(row, tuple) and len(row[2]) == 240 for row in rows)
        assert await ledger.group_rows("no-such-session") == []
    finally:
        await ws.close()


async def test_only_the_lines_on_screen_are_built():
    many = [group(i, tokens=i) for i in range(1, 5001)]
    app = ListsApp()
    async with app.run_test(size=(100, 40)) as pilot:
        groups = app.query_one(GroupList)
        built: list[int] = []
        real_row = groups._row

        def counting_row(row, *a, **kw):
            built.append(row[0])
            return real_row(row, *a, **kw)

        groups._row = counting_row
        groups.load(many, plan_for(many, 5))
        await pilot.pause()
        height = groups.scrollable_content_region.height
        assert groups.option_count == 5000 and groups.is_vertical_scroll_end
        assert 0 < len(built) <= height and min(built) > 5000 - height  # the newest screenful
        groups.focus()  # the focus style repaints the screenful
        await pilot.pause()
        built.clear()
        await pilot.press("home")
        await pilot.pause()
        assert groups.highlighted == 0 and groups.scroll_y == 0
        assert 0 < len(built) <= height and max(built) <= height


async def test_moving_wraps_pages_and_repaints_only_what_changed():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        forty = [group(i) for i in range(1, 41)]
        groups.load(forty, plan_for(forty, 3))
        groups.focus()
        await pilot.press("up")  # nothing highlighted: up starts at the newest, like OptionList
        assert groups.highlighted_group.group_id == 40
        await pilot.press("down")  # and wraps
        assert groups.highlighted_group.group_id == 1
        await pilot.press("up")
        assert groups.highlighted_group.group_id == 40
        page = groups.scrollable_content_region.height
        await pilot.press("pageup")
        assert groups.highlighted == 39 - page
        await pilot.press("pagedown", "pagedown")
        assert groups.highlighted == 39  # clamped, no wrap
        await pilot.pause()
        built: list[int] = []
        real_row = groups._row
        groups._row = lambda row, *a, **kw: built.append(row[0]) or real_row(row, *a, **kw)
        groups._lines.clear()  # so that every repainted line is built again
        await pilot.press("up")
        await pilot.pause()
        # One step inside the screen repaints the two lines whose highlight changed.
        assert sorted(built) == [39, 40]
        assert [m.group_id for m in app.of(GroupList.Selected)][-1] == 39


async def test_a_reload_after_a_turn_draws_only_the_rows_that_changed():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        rows = [group(i) for i in range(1, 31)]
        groups.load(rows, plan_for(rows, 3))
        await pilot.pause()
        built: list[int] = []
        real_row = groups._row
        groups._row = lambda row, *a, **kw: built.append(row[0]) or real_row(row, *a, **kw)
        # A turn adds group 31: it enters the window and group 28 leaves it; group 5
        # was dropped meanwhile (a second workspace). Every other line is as drawn.
        rows = rows[:4] + [group(5, status="dropped")] + rows[5:] + [group(31)]
        groups.load(rows, plan_for(rows, 3))
        await pilot.pause()
        height = groups.scrollable_content_region.height
        assert groups.is_vertical_scroll_end and height < 31
        assert sorted(built) == [28, 31]  # group 5 is off screen: drawn when scrolled to
        built.clear()
        groups.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        assert 5 in built
        line = groups.render_line(4 - round(groups.scroll_y))
        assert MARK_DROPPED in line.text


class FocusWithinApp(ListsApp):
    # As in the workspace, a pane styled by :focus-within: every focus change in it
    # restyles everything inside, the group list too.
    CSS = "Screen:focus-within { background: $surface; }"


async def test_a_focus_change_elsewhere_draws_no_group_line_again():
    app = FocusWithinApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        thirty = [group(i) for i in range(1, 31)]
        groups.load(thirty, plan_for(thirty, 3))
        await pilot.pause()
        built: list[int] = []
        real_row = groups._row
        groups._row = lambda row, *a, **kw: built.append(row[0]) or real_row(row, *a, **kw)
        sessions = app.query_one(SessionList)
        for _ in range(2):  # the list is restyled on each move, its lines are not drawn again
            sessions.focus()
            await pilot.pause()
            app.set_focus(None)
            await pilot.pause()
        assert built == [] and app.focused is None
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        assert len(built) >= groups.scrollable_content_region.height  # a new theme redraws


async def test_the_highlighted_row_keeps_its_marks_but_not_the_dim_text():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = app.query_one(GroupList)
        three = [group(1), group(2, status="dropped"), group(3)]
        groups.load(three, plan_for(three, 1))
        groups.focus()
        await pilot.pause()

        def text_styles(index: int) -> set[str]:
            line = groups.render_line(index - round(groups.scroll_y))
            return {str(seg.style) for seg in line if "prompt" in seg.text}

        assert any("dim" in s for s in text_styles(1))  # dropped, not highlighted: dim
        assert any("strike" in s for s in text_styles(1))
        groups.highlighted = 1
        await pilot.pause()
        styles = text_styles(1)
        assert styles and not any("dim" in s for s in styles)  # readable on the bar
        assert all("strike" in s for s in styles)  # still visibly dropped
        assert groups.render_line(1 - round(groups.scroll_y)).text.startswith(MARK_DROPPED)
