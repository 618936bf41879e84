"""The conversation pane: bounded mounting, paging, tiers, the live turn, safe text.

Every test runs a small App with only the `ConversationView`, over a real
workspace and ledger in a temporary folder.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Markdown, TextArea

from slop_tui.orchestrator import (
    ErrorEvent,
    Notice,
    Orchestrator,
    PlanSent,
    TextChunk,
    ThinkingChunk,
    ToolCallEvent,
    ToolResultEvent,
    TurnFinished,
    TurnStarted,
    UsageEvent,
)
from slop_tui.records import (
    STATUS_COMPLETED,
    STATUS_INTERRUPTED,
    STATUS_TOOL_CALL,
    Message,
    NewMessage,
)
from slop_tui.ui.widgets.blocks import TOOL_VIEW_CHARS
from slop_tui.ui.widgets.conversation import (
    AnswerBlock,
    ConversationView,
    CopyRequested,
    GroupBlock,
    LiveAnswer,
    neutralise,
)
from tests.fakeserver import wait_for
from tests.workspace_fixtures import open_workspace

SIZE = (100, 40)
# How long a page may take to be mounted (a group per frame): generous, for a loaded
# machine; the assertions after each wait are what the tests check.
LOADED = 60.0


class ConvApp(App):
    def __init__(self, **view_kw) -> None:
        super().__init__()
        self.view_kw = view_kw
        self.copied: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        yield ConversationView(id="conv", **self.view_kw)

    def on_copy_requested(self, event: CopyRequested) -> None:
        self.copied.append((event.text, event.what))


@pytest.fixture
async def ws(tmp_path: Path):
    workspace = await open_workspace(tmp_path)
    yield workspace
    await workspace.close()


def _call_payload(calls: list[tuple[str, str, dict]]) -> str:
    return json.dumps(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for cid, n, a in calls
            ],
        }
    )


async def add_group(ws, prompt: str, answer: str = "done", tools: int = 0, output: str = "x\ny"):
    """One group through the public ledger API: prompt, optional tool step, answer."""
    led, s = ws.ledger, ws.session
    gid = (await led.append_user(s, prompt, strategy="openai")).group_id
    rows: list[NewMessage] = []
    if tools:
        calls = [(f"c{gid}_{i}", "read_file", {"path": f"f{i}.py"}) for i in range(tools)]
        rows.append(
            NewMessage(
                role="assistant",
                content="",
                status=STATUS_TOOL_CALL,
                payload=_call_payload(calls),
                strategy="openai",
            )
        )
        rows += [
            NewMessage(
                role="tool",
                content=f"{output}\n#{i}",
                tool_call_id=cid,
                tool_name=name,
                strategy="openai",
            )
            for i, (cid, name, _) in enumerate(calls)
        ]
    rows.append(NewMessage(role="assistant", content=answer, strategy="openai"))
    await led.append(s, gid, rows)
    return gid


async def bulk_groups(ws, n: int) -> list[int]:
    """`n` groups of four rows (prompt, call, result, answer) in one transaction.

    Uses the ledger's connection like bench/_common.py: thousands of groups
    through the public API would take the test minutes.
    """
    db = ws.ledger._db
    row = await (await db.execute("SELECT COALESCE(MAX(id), 0) FROM messages")).fetchone()
    next_id = row[0] + 1
    rows, gids = [], []
    answer = "Here is **the answer** with a list:\n\n- one\n- two\n\n```python\nx = 1\n```\n"
    for g in range(n):
        gid = next_id
        gids.append(gid)
        cid = f"call_{gid}"
        payload = _call_payload([(cid, "read_file", {"path": f"mod_{g}.py"})])
        for role, content, pay, call, tool, status in (
            ("user", f"prompt {g}: what does mod_{g}.py do?", None, None, None, STATUS_COMPLETED),
            ("assistant", "", payload, None, None, STATUS_TOOL_CALL),
            ("tool", f"def f{g}():\n    return {g}\n", None, cid, "read_file", STATUS_COMPLETED),
            ("assistant", f"{answer}\nGroup {g}.", None, None, None, STATUS_COMPLETED),
        ):
            rows.append(
                (next_id, ws.session, gid, "main", role, content, pay, call, tool, status,
                 "openai", 10, 1_750_000_000.0 + next_id)
            )  # fmt: skip
            next_id += 1
    await db.execute("BEGIN IMMEDIATE")
    await db.execute(
        "INSERT OR IGNORE INTO sessions(name, created_at, updated_at) VALUES (?,?,?)",
        (ws.session, 1.0, 1.0),
    )
    await db.executemany(
        """INSERT INTO messages(id, session_id, group_id, lane, role, content, payload,
               tool_call_id, tool_name, status, parsing_strategy, tokens, created_at)
           VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)""",
        rows,
    )
    await db.execute("COMMIT")
    return gids


def visible(view: ConversationView, widget) -> bool:
    return view.region.overlaps(widget.region)


# -- bounded mounting and paging -------------------------------------------------------


async def test_a_long_session_mounts_a_bounded_slice(ws) -> None:
    gids = await bulk_groups(ws, 200)
    app = ConvApp(max_blocks=30)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        await pilot.pause()
        assert 0 < view.mounted_blocks <= 30
        assert len(app.query(GroupBlock)) == view.mounted_blocks
        assert view.mounted_group_ids == gids[-view.mounted_blocks :]
        assert view.group_ids == gids
        older = view.query_one(".-older")
        assert f"{200 - view.mounted_blocks} older groups" in str(older.render())
        # The newest group is on screen, followed at the bottom.
        assert visible(view, view.block(gids[-1]))
        assert view.scroll_y == view.max_scroll_y > 0


async def test_short_groups_on_a_tall_screen_are_filled_from_above_at_the_bottom(ws) -> None:
    """A first slice that does not fill the pane gets older groups mounted above it
    (else nobody could scroll up to page), and the view stays at the bottom."""
    gids = []
    for i in range(40):  # four lines each: a dozen fill the pane
        u = await ws.ledger.append_user(ws.session, f"q{i}")
        await ws.ledger.append(ws.session, u.group_id, [NewMessage("assistant", f"a{i}")])
        gids.append(u.group_id)
    app = ConvApp(max_blocks=15, page_size=3, initial_blocks=2)
    async with app.run_test(size=(100, 50)) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        assert view.mounted_group_ids == gids[-2:]  # what load mounts at once
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view.max_scroll_y > 0  # it can scroll now: paging works again
        assert 2 < len(view.mounted_group_ids) < 40  # filled, not the whole session
        assert view.mounted_group_ids == gids[-len(view.mounted_group_ids) :]
        assert view.scroll_y == view.max_scroll_y  # still at the bottom, following
        assert visible(view, view.block(gids[-1]))


async def test_a_load_mounts_only_the_newest_groups_that_fill_two_screens(ws) -> None:
    """Long groups: the load mounts the newest ones until their text is two screens
    tall, not the whole `initial_blocks`; the pane still shows the newest group's end,
    can scroll up a screen, and ctrl+u pages the older groups in."""
    answer = "\n\n".join(f"paragraph {i} of a long answer" for i in range(30))  # 59 rows
    gids = []
    for i in range(10):
        u = await ws.ledger.append_user(ws.session, f"q{i}")
        await ws.ledger.append(ws.session, u.group_id, [NewMessage("assistant", answer)])
        gids.append(u.group_id)
    app = ConvApp(max_blocks=15, page_size=3, initial_blocks=6)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        assert view.mounted_group_ids == gids[-2:]  # 2 x 60 rows >= 2 x 40
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view.mounted_group_ids == gids[-2:]  # it scrolls: nothing more is mounted
        assert view.scroll_y == view.max_scroll_y > SIZE[1]
        assert visible(view, view.block(gids[-1]))
        view.focus()
        await pilot.press("ctrl+u")
        await wait_for(pilot, lambda: view.mounted_group_ids[0] == gids[-5], timeout=LOADED)


async def test_a_load_reads_each_group_once_to_decide_what_to_mount(ws, monkeypatch) -> None:
    """The rows read to measure the newest groups build their blocks: none is read twice."""
    answer = "\n\n".join(f"line {i}" for i in range(20))  # 39 rows
    for i in range(8):
        u = await ws.ledger.append_user(ws.session, f"q{i}")
        await ws.ledger.append(ws.session, u.group_id, [NewMessage("assistant", answer)])
    history = ws.history()
    reads: list[int] = []
    read = history.group_messages

    async def counted(gid):  # type: ignore[no-untyped-def]
        reads.append(gid)
        return await read(gid)

    monkeypatch.setattr(history, "group_messages", counted)
    app = ConvApp(max_blocks=15, page_size=3, initial_blocks=6)
    async with app.run_test(size=SIZE):
        view = app.query_one(ConversationView)
        await view.load(history)
        mounted = view.mounted_group_ids
        assert len(mounted) == 2  # 40 rows a group with its prompt: two fill two screens
        assert reads == mounted[::-1]  # newest first, once each


def test_a_group_s_rows_about_count_wrapped_lines_and_one_a_tool_block() -> None:
    def row(i: int, role: str, content: str, **kw) -> Message:  # type: ignore[no-untyped-def]
        return Message(id=i, session="s", group_id=1, lane="main", role=role, content=content, **kw)

    rows = [
        row(1, "user", "x" * 25),
        row(2, "assistant", "short\n\n" + "y" * 30),
        row(3, "tool", "z" * 500, tool_call_id="c1", tool_name="read_file"),
    ]
    # 25 characters at 10 columns: 3 rows; two paragraphs, "short" and 30 characters,
    # with a blank row between: 1 + 1 + 3; a tool: 1
    assert GroupBlock.rows_about(rows, 10) == 3 + 5 + 1
    assert GroupBlock.rows_about(rows, 0) == 0


async def test_a_session_that_fits_the_pane_shows_no_scrollbar(ws) -> None:
    """More groups than `load` mounts at once, all of them short: the scrollbar shown
    before the first layout goes once they all turn out to fit."""
    for i in range(8):
        u = await ws.ledger.append_user(ws.session, f"q{i}")
        await ws.ledger.append(ws.session, u.group_id, [NewMessage("assistant", f"a{i}")])
    app = ConvApp(max_blocks=15, page_size=3, initial_blocks=2)
    async with app.run_test(size=(100, 60)) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert len(view.mounted_group_ids) == 8 and view.max_scroll_y == 0
        assert not view.show_vertical_scrollbar


async def test_ctrl_u_and_scrolling_to_the_top_page_older_groups_within_the_bound(ws) -> None:
    gids = await bulk_groups(ws, 200)
    app = ConvApp(max_blocks=30, page_size=10, initial_blocks=10)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        view.focus()
        await pilot.pause()
        first = view.mounted_group_ids[0]
        await pilot.press("ctrl+u")
        # The page is mounted a group per frame: wait for all of it.
        await wait_for(
            pilot, lambda: view.mounted_group_ids[0] == gids[gids.index(first) - 10], timeout=LOADED
        )
        # The group the user was reading stays in view; the new ones are above it.
        await pilot.pause()
        assert visible(view, view.block(first))
        # Scrolling to the top loads the next page, and the bound holds.
        for _ in range(5):
            top = view.mounted_group_ids[0]
            view.scroll_home(animate=False)
            # A page is mounted a group per frame; the group that was on top stays there.
            await wait_for(pilot, lambda top=top: view.mounted_group_ids[0] < top, timeout=LOADED)
            await wait_for(pilot, lambda: not view._paging, timeout=LOADED)
            await pilot.pause()
            assert view.scroll_y > 0 and visible(view, view.block(top))
            assert view.mounted_blocks <= 30
            assert len(app.query(GroupBlock)) == view.mounted_blocks
        ids = view.mounted_group_ids
        assert ids == gids[gids.index(ids[0]) : gids.index(ids[0]) + len(ids)]  # contiguous
        assert gids[-1] not in ids  # the newest were unmounted again
        assert "newer groups" in str(view.query_one(".-newer").render())
        # ctrl+d brings newer groups back, End the newest.
        last = ids[-1]
        await pilot.press("ctrl+d")
        await wait_for(pilot, lambda: view.mounted_group_ids[-1] > last, timeout=LOADED)
        assert view.mounted_blocks <= 30
        await pilot.press("end")
        await wait_for(pilot, lambda: view.mounted_group_ids[-1] == gids[-1], timeout=LOADED)
        await pilot.pause()
        assert visible(view, view.block(gids[-1]))


@asynccontextmanager
async def paging(ws):  # type: ignore[no-untyped-def]
    """An app with small pages (5 groups, 30 mounted at most), loaded and focused."""
    app = ConvApp(max_blocks=30, page_size=5, initial_blocks=5)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        view.focus()
        await app.workers.wait_for_complete()
        await pilot.pause()
        yield app, pilot, view


async def test_ctrl_u_pressed_while_a_page_loads_is_queued_not_dropped(ws) -> None:
    gids = await bulk_groups(ws, 200)
    async with paging(ws) as (app, pilot, view):
        first = view.mounted_group_ids[0]
        # Three presses before the first page is mounted (a page takes a frame per group).
        await pilot.press("ctrl+u", "ctrl+u", "ctrl+u")
        want = gids[gids.index(first) - 15]
        await wait_for(pilot, lambda: view.mounted_group_ids[0] == want, timeout=20)
        await wait_for(pilot, lambda: not view._paging)
        assert view.mounted_group_ids[0] == want  # three pages, no more
        ids = view.mounted_group_ids
        assert ids == gids[gids.index(ids[0]) : gids.index(ids[0]) + len(ids)]


async def pages_queued(pilot, view: ConversationView, presses: int) -> None:
    """`presses` ctrl+u keys faster than a page mounts (as while a reply streams), back
    once the first page is mounting."""
    for _ in range(presses):
        view.action_load_older()
    await wait_for(pilot, lambda: view._paging, interval=0)
    assert view._queued[True] >= 1  # pages still waiting behind the one under way


async def test_end_pressed_while_ctrl_u_pages_are_queued_drops_them_and_stays_at_the_bottom(
    ws,
) -> None:
    gids = await bulk_groups(ws, 200)
    async with paging(ws) as (app, pilot, view):
        await pages_queued(pilot, view, 6)
        await view.action_newest()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not view._paging and view._queued == {True: 0, False: 0}
        assert view.mounted_group_ids[-1] == gids[-1]
        assert view.mounted_blocks <= 5  # the newest page, not the pages the keys asked for
        assert view.scroll_y == view.max_scroll_y


async def test_a_turn_begun_while_ctrl_u_pages_are_queued_drops_them_and_follows_the_reply(
    ws,
) -> None:
    await bulk_groups(ws, 200)
    async with paging(ws) as (app, pilot, view):
        await pages_queued(pilot, view, 6)
        lo = view._lo
        gid = (await ws.ledger.append_user(ws.session, "a new question")).group_id
        await view.begin_turn(gid, "a new question")
        for i in range(80):
            await view.show_event(TextChunk(text=f"line {i}\n\n"))
        answer = view.live_block.live_answer
        await wait_for(pilot, lambda: "line 79" in answer.source)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert view._queued == {True: 0, False: 0}
        assert view._lo >= lo - 5  # at most the page under way, not the five queued
        end = view._live_end(answer)
        height = view.scrollable_content_region.height
        assert end is not None and view.scroll_y < end <= view.scroll_y + height  # following
        await view.end_turn()


async def test_show_group_mounts_an_old_group_and_scrolls_to_it(ws) -> None:
    gids = await bulk_groups(ws, 200)
    app = ConvApp(max_blocks=30)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        target = gids[7]
        assert view.block(target) is None
        assert await view.show_group(target)
        await pilot.pause()
        block = view.block(target)
        assert block is not None and visible(view, block)
        assert block.region.y == view.region.y  # scrolled to the top of the pane
        assert view.mounted_blocks <= 30
        ids = view.mounted_group_ids
        assert ids == gids[gids.index(ids[0]) : gids.index(ids[0]) + len(ids)]
        assert gids[-1] not in ids and "newer groups" in str(view.query_one(".-newer").render())
        assert not await view.show_group(10**9)


async def test_loading_5000_groups_is_fast(ws) -> None:
    gids = await bulk_groups(ws, 5000)
    app = ConvApp()
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(ConversationView)
        await pilot.pause()
        start = time.perf_counter()
        await view.load(ws.history())
        loaded = time.perf_counter()
        # Laid out: the newest block has its place on screen (no Pilot pause, whose
        # own cost grows with the widget count and would hide the real number).
        newest = view.block(gids[-1])
        while not (newest.region and visible(view, newest)):
            await asyncio.sleep(0.001)
        shown = time.perf_counter()
        print(
            f"\n5,000 groups: load() {1000 * (loaded - start):.0f} ms, "
            f"newest group laid out and visible {1000 * (shown - start):.0f} ms, "
            f"{view.mounted_blocks} blocks, {len(app.query('*'))} widgets"
        )
        assert view.mounted_blocks <= view.max_blocks
        assert shown - start < 2.0  # generous for a loaded CI machine; the target is < 1 s


async def test_refresh_group_picks_up_new_and_removed_groups(ws) -> None:
    first = await add_group(ws, "one")
    second = await add_group(ws, "two")
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        third = await add_group(ws, "three (written by /exec)")
        await view.refresh_group(third)
        assert view.mounted_group_ids == [first, second, third]
        assert [b.group_id for b in view.query(GroupBlock)] == [first, second, third]
        await ws.ledger.remove_group(ws.session, second)
        await view.refresh_group(second)
        await pilot.pause()
        assert view.group_ids == [first, third] == view.mounted_group_ids
        assert [b.group_id for b in view.query(GroupBlock)] == [first, third]


# -- tiers -----------------------------------------------------------------------------


async def test_tool_blocks_show_the_tier_the_model_will_see(ws) -> None:
    old = await add_group(ws, "older question", tools=2)
    active = await add_group(ws, "newest question", tools=7)
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        # The plan of the running turn's next request (the screen passes the plan its
        # panes draw): the newest group's results are the turn's active ones.
        plan, _ = await ws.display_plan(next_prompt=None)
        await view.load(ws.history(), plan=plan)
        await pilot.pause()
        labels = [t.tier_label for t in view.block(active).tool_blocks]
        assert labels == ["degraded 1000"] * 2 + ["full 5000"] * 5
        assert [t.tier_label for t in view.block(old).tool_blocks] == ["inactive 300"] * 2
        title = view.block(active).tool_blocks[-1].title
        assert "read_file" in title and "· ok ·" in title and "3 lines" in title
        assert title.endswith("full 5000")
        # Dropping the older group changes its label after a refresh.
        await ws.ledger.set_group_dropped(ws.session, old, True)
        await view.refresh_group(old)
        assert [t.tier_label for t in view.block(old).tool_blocks] == ["dropped"] * 2
        assert "dropped" in view.block(old).mark
        # A window of one group: the older group left the strict window, and is not
        # sent until a summary covers it (the plan says so; the view only draws it).
        await ws.ledger.set_group_dropped(ws.session, old, False)
        await ws.ledger.set_window(ws.session, 1)
        await view.refresh_group(old)
        view.set_plan((await ws.display_plan(next_prompt=None))[0])
        assert view.block(old).tool_blocks[0].tier_label == "not sent: waiting for a summary"
        assert "not sent: waiting for a summary" in view.block(old).mark
        assert view.block(active).tool_blocks[-1].tier_label == "full 5000"
        # A summary covering it: its results are not sent, and say by which summary.
        ids = [m.id for m in await ws.ledger.group_messages(ws.session, old)]
        summary = await ws.ledger.add_summary(ws.session, "main", "lane", ids, "older")
        await view.refresh_group(old)
        view.set_plan((await ws.display_plan(next_prompt=None))[0])
        assert view.block(old).tool_blocks[0].tier_label == f"covered by summary {summary.id}"
        assert view.block(old).tool_blocks[0].has_class("-unsent")


async def test_between_turns_tool_blocks_show_the_tier_the_next_prompt_sends(ws) -> None:
    """Between turns the panes draw the next request: a new prompt makes the last
    turn's results inactive, so they are labelled at the tier they will be sent at."""
    active = await add_group(ws, "newest question", tools=3)
    app = ConvApp()
    async with app.run_test(size=SIZE):
        view = app.query_one(ConversationView)
        plan, _ = await ws.display_plan()
        await view.load(ws.history(), plan=plan)
        assert [t.tier_label for t in view.block(active).tool_blocks] == ["inactive 300"] * 3


async def test_a_group_header_shows_its_token_snapshot_beside_its_size(ws) -> None:
    """Seed 000's snapshot (the prompt and completion of the turn's last call) stands
    beside the group's own size; a group no call answered shows its size alone."""
    answered = await add_group(ws, "answered question")
    await ws.ledger.record_usage(ws.session, answered, "openai", "m", 900, 40)
    await ws.ledger.record_usage(ws.session, answered, "openai", "m", 12_345, 67)  # the last
    quiet = await add_group(ws, "imported question")
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history(), plan=(await ws.display_plan())[0])
        await pilot.pause()
        header = str(view.block(answered)._header.render())
        assert "prompt 12k · reply 67" in header and "tokens" in header, header
        assert "prompt" not in str(view.block(quiet)._header.render())


# -- safe text -------------------------------------------------------------------------

NASTY = "before\x1b[31mRED\x1b[0m\x07bell\x9b2J\r\nafter\x00end"


def test_neutralise_replaces_every_control_character_but_newline_and_tab() -> None:
    shown = neutralise(NASTY + "\ttab\rcr\x7f")
    assert shown == "before␛[31mRED␛[0m␇bell<U+009B>2J\nafter␀end\ttab␍cr\u2421"
    assert not any(ord(c) < 0x20 and c not in "\n\t" for c in shown)


async def open_first_tool(pilot, ws, gid: int):
    """Load the view, focus the group's first tool block and open it: (block, its TextArea)."""
    view = pilot.app.query_one(ConversationView)
    await view.load(ws.history())
    await pilot.pause()
    tool = view.block(gid).tool_blocks[0]
    tool.focus()
    await pilot.press("enter")
    await wait_for(pilot, lambda: bool(tool.query(TextArea)), timeout=10)
    return tool, tool.query_one(TextArea)


async def test_control_characters_are_neutralised_on_screen_not_in_the_ledger(ws) -> None:
    gid = await add_group(
        ws, "run it \x1b[2J", answer="answer \x1b]0;title\x07", tools=1, output=NASTY
    )
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        tool, area = await open_first_tool(pilot, ws, gid)
        assert "␛[31mRED" in area.text and "\x1b" not in area.text
        screen_text = "".join(
            seg.text for strip in app.screen._compositor.render_strips() for seg in strip
        )
        for bad in ("\x1b", "\x07", "\x9b", "\x00"):
            assert bad not in screen_text
        assert "␛[31mRED" in screen_text and "␛]0;title␇" in screen_text
        # The ledger keeps the exact bytes; copying gives them back unchanged.
        rows = await ws.ledger.group_messages(ws.session, gid)
        assert rows[2].content == NASTY + "\n#0"
        await pilot.press("c")
        await wait_for(pilot, lambda: bool(app.copied))
        assert app.copied[-1] == (NASTY + "\n#0", "tool result")
        # Enter closes the block again and unmounts the output.
        await pilot.press("enter")
        await wait_for(pilot, lambda: not tool.query(TextArea))


async def test_a_huge_tool_output_opens_as_head_and_tail_and_copies_whole(ws) -> None:
    output = "".join(f"line {i:07d}\n" for i in range(400_000))  # 5.2 MB
    gid = await add_group(ws, "run the build", tools=1, output=output)
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        _tool, area = await open_first_tool(pilot, ws, gid)
        shown = area.text
        assert len(shown) < TOOL_VIEW_CHARS + 200
        assert shown.startswith("line 0000000\n") and shown.endswith("line 0399999\n\n#0")
        assert "characters not shown here (c copies the whole output" in shown
        await pilot.press("c")
        await wait_for(pilot, lambda: bool(app.copied))
        assert app.copied[-1] == (output + "\n#0", "tool result")  # every byte


async def test_copy_a_message_and_a_group(ws) -> None:
    gid = await add_group(ws, "question", answer="the **answer**", tools=1)
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        await pilot.pause()
        answer = view.block(gid).query_one(AnswerBlock)
        answer.focus()
        await pilot.press("c")
        await wait_for(pilot, lambda: bool(app.copied))
        assert app.copied[-1] == ("the **answer**", "message")
        view.block(gid).focus()
        await pilot.press("c")
        await wait_for(pilot, lambda: len(app.copied) == 2)
        text, what = app.copied[-1]
        assert what == "group" and "question" in text and "the **answer**" in text
        assert "read_file" in text


# -- the live turn ---------------------------------------------------------------------


async def test_a_streamed_turn_renders_through_one_markdown(ws) -> None:
    await bulk_groups(ws, 40)
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        await pilot.pause()
        before = view.mounted_blocks
        gid = (await ws.ledger.append_user(ws.session, "stream please")).group_id
        await view.show_event(TurnStarted(group_id=gid, provider="demo", model="m"))
        live = view.live_block
        assert live is not None and live.group_id == gid
        chunks = [f"word{i} " + ("\n\n" if i % 50 == 49 else "") for i in range(500)]
        for chunk in chunks:
            await view.show_event(TextChunk(text=chunk))
        full = "".join(chunks)
        await ws.ledger.append(ws.session, gid, [NewMessage(role="assistant", content=full)])
        await view.show_event(TurnFinished(group_id=gid, text=full))
        await view.end_turn()
        await pilot.pause()
        answers = live.query(LiveAnswer)
        assert len(answers) == 1 and answers.first().source == full
        answer = answers.first()
        assert "word499" in answer.rendered(answer.content_size.width)[-1].text
        assert len(app.query(Markdown)) == 0  # no answer is a Markdown widget
        assert view.live_block is None and view.block(gid) is live
        assert view.mounted_group_ids[-1] == gid
        assert view.mounted_blocks <= max(before + 1, view.max_blocks)
        assert visible(view, live) and view.scroll_y == view.max_scroll_y
        # The next turn turns the finished answer into the light form.
        gid2 = (await ws.ledger.append_user(ws.session, "again")).group_id
        await view.begin_turn(gid2, "again")
        assert len(app.query(LiveAnswer)) == 0
        assert view.block(gid).query_one(AnswerBlock).source == full
        await view.end_turn()


async def test_streaming_follows_the_bottom_unless_the_user_scrolled_away(ws) -> None:
    await bulk_groups(ws, 20)
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        gid = (await ws.ledger.append_user(ws.session, "long answer")).group_id
        await view.begin_turn(gid, "long answer")
        for i in range(60):
            await view.show_event(TextChunk(text=f"line {i}\n\n"))
        answer = view.live_block.live_answer
        await wait_for(pilot, lambda: "line 59" in answer.source)
        await pilot.pause()
        # The text's last line is on screen (the blank room kept below it is not).
        end = view._live_end(answer)
        height = view.scrollable_content_region.height
        assert end is not None and view.scroll_y < end <= view.scroll_y + height
        assert "line 59" in answer.rendered(answer.content_size.width)[-1].text
        view.scroll_to(y=view.scroll_y // 2, animate=False)  # the user scrolls up to read
        await pilot.pause()
        away = view.scroll_y
        for i in range(60, 120):
            await view.show_event(TextChunk(text=f"line {i}\n\n"))
        await wait_for(pilot, lambda: "line 119" in answer.source)
        await pilot.pause()
        assert view.scroll_y <= away + 1 < view.max_scroll_y
        # Back down to the text's end: it follows again.
        view.scroll_to(y=view._live_end(answer) - height + 1, animate=False)
        await pilot.pause()
        for i in range(120, 180):
            await view.show_event(TextChunk(text=f"line {i}\n\n"))
        await wait_for(pilot, lambda: "line 179" in answer.source)
        await pilot.pause()
        end = view._live_end(answer)
        assert end is not None and view.scroll_y < end <= view.scroll_y + height
        await view.end_turn()
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y  # settled: Textual's anchor again


async def test_tool_events_mark_tiers_live_and_an_interrupted_answer_is_marked(ws) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        led, s = ws.ledger, ws.session
        gid = (await led.append_user(s, "use tools", strategy="openai")).group_id
        await view.begin_turn(gid, "use tools")
        await view.show_event(TextChunk(text="Let me look."))
        calls = [(f"k{i}", "read_file", {"path": f"{i}.py"}) for i in range(6)]
        await led.append(s, gid, [NewMessage(role="assistant", content="Let me look.",
                                             status=STATUS_TOOL_CALL, payload=_call_payload(calls),
                                             strategy="openai")])  # fmt: skip
        for cid, name, args in calls:
            await view.show_event(ToolCallEvent(call_id=cid, name=name, arguments=args))
        live = view.live_block
        assert all(t.pending for t in live.tool_blocks)
        assert "running…" in live.tool_blocks[0].title
        for i, (cid, name, _) in enumerate(calls):
            ok = i != 3
            stored = await led.append(s, gid, [NewMessage(role="tool", content=f"out {i}\nmore",
                                               tool_call_id=cid, tool_name=name,
                                               status="completed" if ok else "error",
                                               strategy="openai")])  # fmt: skip
            await view.show_event(ToolResultEvent(call_id=cid, name=name, ok=ok,
                                                text=f"out {i}\nmore", message_id=stored[0].id,
                                                message=stored[0]))  # fmt: skip
        # The orchestrator sends the next request; its plan labels the results.
        await view.show_event(PlanSent(plan=await ws.plan(upto=gid)))
        labels = [t.tier_label for t in live.tool_blocks]
        assert labels == ["degraded 1000"] + ["full 5000"] * 5
        assert live.tool_blocks[3].has_class("-error") and "· error ·" in live.tool_blocks[3].title
        await view.show_event(TextChunk(text="Partial ans"))
        await view.show_event(ErrorEvent(error_kind="cancelled", message="stopped"))
        await led.append(s, gid, [NewMessage(role="assistant", content="Partial ans",
                                             status=STATUS_INTERRUPTED, strategy="openai")])  # fmt: skip
        await view.end_turn()
        await pilot.pause()
        answers = list(live.query(LiveAnswer))
        assert len(answers) == 2  # one before the tools, one after
        assert answers[-1].has_class("-interrupted")
        header = str(live.query_one(".group-header").render())
        assert "interrupted" in header
        assert any("never sent" in str(n.render()) for n in live.query(".notice"))


async def test_thinking_usage_and_notices_are_shown_in_the_live_group(ws) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        await view.begin_turn(None, "think first")  # shown before the ledger gave an id
        gid = (await ws.ledger.append_user(ws.session, "think first")).group_id
        await view.show_event(TurnStarted(group_id=gid))
        assert view.live_block.group_id == gid
        for part in ("Let me ", "think \x1b[1m", "hard."):
            await view.show_event(ThinkingChunk(text=part))
        thinking = view.live_block.tool_blocks[0]
        assert thinking.kind == "thinking" and "22 characters" in thinking.title
        await view.show_event(UsageEvent(prompt_tokens=12_300, completion_tokens=45))
        await view.show_event(Notice(text="Retrying in 2 s"))
        await pilot.pause()
        header = str(view.live_block.query_one(".group-header").render())
        assert f"#{gid}" in header and "prompt 12k" in header and "reply 45" in header
        assert "⚠ Retrying in 2 s" in str(view.live_block.query_one(".notice").render())
        thinking.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(thinking.query(TextArea)))
        assert thinking.query_one(TextArea).text == "Let me think ␛[1mhard."
        await pilot.press("c")
        await wait_for(pilot, lambda: bool(app.copied))
        assert app.copied[-1] == ("Let me think \x1b[1mhard.", "thinking")
        await view.end_turn()


async def test_a_real_demo_turn_through_the_orchestrator(ws) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        orch = Orchestrator(ws)
        try:
            outcome = await orch.run_turn("hello there", view.show_event)
        finally:
            await orch.aclose()
        await view.end_turn()
        await pilot.pause()
        assert outcome.error is None
        block = view.block(outcome.group_id)
        assert block is not None and block.prompt == "hello there"
        assert block.tool_blocks and all(t.ok is not None for t in block.tool_blocks)
        assert all(t.tier_label.startswith(("full", "degraded")) for t in block.tool_blocks)
        shown = "".join(a.source for a in block.query(LiveAnswer))
        assert outcome.text.strip()[:40] in shown


async def test_a_plan_that_arrives_while_the_blocks_are_read_labels_them(ws) -> None:  # noqa: F811
    """The panes' plan can land while the conversation still reads its groups (the
    conversation's frame comes first): the blocks mounted after it carry its marks."""
    await bulk_groups(ws, 6)
    plan = await ws.plan()
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        history = ws.history()
        reading, go = asyncio.Event(), asyncio.Event()
        real = history.group_messages

        calls: list[int] = []

        async def held(gid):  # type: ignore[no-untyped-def]
            calls.append(gid)
            if len(calls) == 2:  # the first block is built and labelled by now
                reading.set()
                await go.wait()
            return await real(gid)

        history.group_messages = held  # type: ignore[method-assign]
        load = asyncio.ensure_future(view.load(history))
        await wait_for(pilot, reading.is_set)
        view.set_plan(plan)  # while the second group is being read
        go.set()
        await load
        await pilot.pause()
        assert view._blocks
        assert all(block.mark for block in view._blocks.values())
