"""The workspace's start path: no tokenizer, counts that say when they are
estimates, one group read, and the groups pane's keys kept cheap.

The tokenizer is process-wide state: each test here starts from "not built" with
an empty count cache (the `cold` fixture), as a fresh process would.
"""

from __future__ import annotations

import json

import pytest

from slop_tui.config import load_config
from slop_tui.context import tokens
from slop_tui.records import Changed, NewMessage
from slop_tui.ui.app import SlopApp
from slop_tui.ui.widgets.blocks import AnswerBlock
from slop_tui.ui.widgets.gauge import ESTIMATE_MARK, TokenGauge
from slop_tui.ui.widgets.groups import GroupList
from slop_tui.ui.widgets.preview import ContextPreview
from slop_tui.ui.widgets.prompt import PromptInput
from slop_tui.workspace import KEY_TOKEN_COUNTS, NEXT_PROMPT, Edit, Workspace
from tests import test_app
from tests.fakeserver import wait_for
from tests.probes import first_frame_probe
from tests.test_app import started
from tests.workspace_fixtures import open_workspace

project = test_app.project  # a temporary project folder, no provider keys


async def seed(root, n: int = 3, window: int = 2) -> list[int]:
    """Groups written with rough counts (so seeding builds no tokenizer)."""
    ws = await open_workspace(root)
    try:
        gids = []
        for i in range(n):
            user = await ws.ledger.append_user(ws.session, f"question {i}", strategy="openai")
            await ws.ledger.append(
                ws.session,
                user.group_id,
                [NewMessage("assistant", f"answer {i}", strategy="openai")],
            )
            gids.append(user.group_id)
        await ws.ledger.set_window(ws.session, window)
        return gids
    finally:
        await ws.close()


async def seed_long(root, n: int = 6) -> list[int]:
    """`n` groups whose answers are 30 paragraphs (about 60 rows): longer than a screen."""
    ws = await open_workspace(root)
    try:
        gids = []
        for i in range(n):
            user = await ws.ledger.append_user(ws.session, f"question {i}", strategy="openai")
            answer = "\n\n".join(f"paragraph {k} of answer {i}" for k in range(30))
            await ws.ledger.append(
                ws.session, user.group_id, [NewMessage("assistant", answer, strategy="openai")]
            )
            gids.append(user.group_id)
        return gids
    finally:
        await ws.close()


@pytest.fixture
def cold(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The tokenizer not built and no counts cached; returns the list of builds."""
    builds: list[int] = []
    real = tokens._load_encoding

    def counted():
        builds.append(1)
        return real()

    monkeypatch.setattr(tokens, "_state", tokens._EncodingState())
    monkeypatch.setattr(tokens, "_count_cache", tokens.CountCache())
    monkeypatch.setattr(tokens, "_load_encoding", counted)
    return builds


async def default_workspace(root) -> Workspace:
    """A workspace as the app opens it: its own counter, not the tests' rough one."""
    config = load_config(db=str(root / ".slop" / "slop.db"), env={}, cwd=root)
    return await Workspace.open(config, env={})


async def test_display_prompt_estimates_until_counted_then_the_next_start_is_exact(
    tmp_path, cold, monkeypatch
):
    await seed(tmp_path)
    ws = await default_workspace(tmp_path)
    try:
        plan, estimated = await ws.display_plan()
        assert estimated and cold == []  # shown without building the tokenizer
        assert await ws.ledger.get_setting(KEY_TOKEN_COUNTS) is None  # estimates are not kept

        tokens.get_encoding()  # the first submit builds it
        assert cold == [1]
        plan, estimated = await ws.display_plan()
        prompt = plan.request
        exact = await ws.next_request()
        assert not estimated
        assert prompt.total_tokens == exact.total_tokens
        assert prompt.layer_tokens() == exact.layer_tokens()
        stored = json.loads(await ws.ledger.get_setting(KEY_TOKEN_COUNTS))
        assert stored and all(isinstance(n, int) for n in stored.values())
    finally:
        await ws.close()

    # A new process: no tokenizer, no cache in memory; the ledger's counts make it exact.
    monkeypatch.setattr(tokens, "_state", tokens._EncodingState())
    monkeypatch.setattr(tokens, "_count_cache", tokens.CountCache())
    ws = await default_workspace(tmp_path)
    try:
        again, estimated = await ws.display_plan()
        assert not estimated and cold == [1]
        assert again.request.total_tokens == exact.total_tokens
        # Something new (a scratchpad edit) is estimated again, and says so.
        await ws.ledger.set_scratchpad(ws.session, "a note the tokenizer never saw " * 20)
        _, estimated = await ws.display_plan()
        assert estimated and cold == [1]
    finally:
        await ws.close()


async def test_a_bad_stored_count_table_is_ignored(tmp_path, cold):
    await seed(tmp_path, n=1)
    ws = await open_workspace(tmp_path)
    await ws.ledger.set_setting(KEY_TOKEN_COUNTS, "{not json")
    await ws.close()
    ws = await default_workspace(tmp_path)
    try:
        _, estimated = await ws.display_plan()
        assert estimated and cold == []
    finally:
        await ws.close()


def record_calls(monkeypatch, calls: list[str], owner, name: str, label: str) -> None:
    """`owner.name` (a coroutine method) appends `label` to `calls` as it starts."""
    real = getattr(owner, name)

    async def recorded(self, *args, **kw):
        calls.append(label)
        return await real(self, *args, **kw)

    monkeypatch.setattr(owner, name, recorded)


def app_for(root) -> SlopApp:
    return SlopApp(db=str(root / ".slop" / "slop.db"), user_themes=False, blink=False)


async def test_the_app_starts_without_the_tokenizer_and_counts_exactly_at_the_first_submit(
    project, cold
):
    await seed(project)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        gauge = app.query_one(TokenGauge)
        preview = app.query_one(ContextPreview)
        total = app.query_one("#gauge-total")
        assert cold == [] and not tokens.encoding_loaded()
        assert gauge.estimated and str(total.render()).startswith(ESTIMATE_MARK)
        assert f"· {ESTIMATE_MARK}" in str(app.query_one("#preview-header").render())
        assert preview.estimated

        await pilot.press(*"/help", "enter")  # any submit builds it, off the event loop
        # Building it is ~0.4 s of CPU in a thread: seconds on a loaded machine.
        await wait_for(pilot, lambda: tokens.encoding_loaded() and not gauge.estimated, 20)
        assert cold == [1]
        assert not str(total.render()).startswith(ESTIMATE_MARK)
        exact = await app.workspace.plan(next_prompt=NEXT_PROMPT)
        assert gauge.reading.total == sum(n for _, n in gauge.reading.layers)
        assert gauge.reading.total == exact.request_tokens
        assert dict(gauge.reading.layers) == exact.layer_tokens()


async def test_the_group_list_and_the_conversation_share_one_read(project, cold, monkeypatch):
    """One group read and one plan for every pane that shows them at start."""
    gids = await seed(project, n=4)
    from slop_tui.ledger import Ledger

    reads: list[str] = []
    record_calls(monkeypatch, reads, Workspace, "display_plan", "plan")
    record_calls(monkeypatch, reads, Ledger, "list_groups", "list_groups")
    record_calls(monkeypatch, reads, Ledger, "group_rows", "group_rows")
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        assert reads == ["group_rows", "plan"]
        assert [g.group_id for g in app.query_one(GroupList).groups] == gids
        assert app.query_one("#conversation").group_ids == gids


async def test_the_projection_is_drawn_once_the_highlight_rests(project):
    # Every stored group is in the window (its 4 groups are the 3 and the next
    # prompt's): a drop lets no older group slide in, so it saves its tokens.
    gids = await seed(project, n=3, window=4)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        groups = app.query_one(GroupList)
        gauge = app.query_one(TokenGauge)
        ws = app.workspace

        async def saving(gid: int) -> int:
            # The plan built again with the drop applied, against the plan shown.
            now, _ = await ws.display_plan()
            after, _ = await ws.display_plan(edit=Edit.drop(gid))
            return now.request_tokens - after.request_tokens

        await pilot.press("f3", "end")  # not in the frame of the key: after the rest
        assert gauge.projection is None
        newest = await saving(gids[-1])
        await wait_for(pilot, lambda: gauge.projection == newest)
        shown: list[int | None] = []
        real = gauge.set_projection
        gauge.set_projection = lambda s, verb="drop": shown.append(s) or real(s, verb)
        await pilot.press("up", "up")  # quick succession: drawn once, at rest
        assert shown == []
        await wait_for(pilot, lambda: shown != [])
        # gids[-3] is the oldest stored group of the window: dropping it saves its tokens.
        expected = await saving(gids[-3])
        assert expected > 0
        assert shown == [expected] == [gauge.projection]
        assert groups.highlighted_group.group_id == gids[-3]
        # What the projection said is what dropping does to the next request (counted
        # exactly on both sides: the first command builds the tokenizer).
        await pilot.press("escape", "f2", *"/help", "enter")
        await wait_for(pilot, lambda: not gauge.estimated)
        await pilot.press("escape", "f3")
        groups.select_group(gids[-3])
        expected = await saving(gids[-3])
        await wait_for(pilot, lambda: gauge.projection == expected)
        before = gauge.reading.total
        await pilot.press("d")
        await wait_for(pilot, lambda: gauge.reading.total == before - expected)


CODE_ANSWER = "Here:\n\n```python\ndef add(a, b):\n    return a + b  # the sum\n```\n\nDone."


def _colours(lines) -> set:
    return {seg.style.color for line in lines for seg in line if seg.style and seg.style.color}


async def test_code_is_drawn_plain_on_the_first_screen_then_highlighted(project, monkeypatch):
    from slop_tui.ui import startup
    from slop_tui.ui.widgets import blocks
    from slop_tui.ui.widgets.conversation import ConversationView

    ws = await open_workspace(project)
    try:
        for _ in range(12):  # more than the first screen: pages are built ahead too
            user = await ws.ledger.append_user(ws.session, "code please", strategy="openai")
            await ws.ledger.append(
                ws.session,
                user.group_id,
                [NewMessage("assistant", CODE_ANSWER, strategy="openai")],
            )
    finally:
        await ws.close()
    monkeypatch.setattr(startup, "HIGHLIGHT_AFTER", 600.0)  # the test says when (below)
    monkeypatch.setattr(startup, "_hold_first_frame", False)  # put back after the test
    startup.defer_for_first_screen()  # as the slop-tui command does
    try:
        app = app_for(project)
        delays: list[float] = []
        set_timer = app.set_timer

        def recording(delay, *args, **kw):
            delays.append(delay)
            return set_timer(delay, *args, **kw)

        app.set_timer = recording  # type: ignore[method-assign]
        async with app.run_test(size=(140, 44)) as pilot:
            await started(pilot)
            view = app.query_one(ConversationView)
            answer = view.block(view.mounted_group_ids[-1]).answers()[0]
            await wait_for(pilot, lambda: answer._lines is not None)

            def prepared_looks() -> set[str]:
                return {
                    a._lines[1] if a._lines else ""
                    for block in view._prepared.values()
                    for a in block.answers()
                }

            # The next pages are built ahead in the plain look too.
            await wait_for(pilot, lambda: len(view._prepared) >= 5, timeout=10)
            assert all(look.endswith("(code plain)") for look in prepared_looks())
            plain = answer._lines[2]
            text = [line.text for line in plain]
            assert any("def add(a, b):" in t for t in text)  # the code is on screen
            assert blocks.code_highlighting_held() and answer._lines[1].endswith("(code plain)")
            assert delays.count(600.0) == 1  # scheduled once the first screen was shown
            startup._start_highlighting(app)  # what that timer runs
            await wait_for(pilot, lambda: not blocks.code_highlighting_held(), timeout=10)
            await wait_for(pilot, lambda: "(code plain)" not in answer._lines[1], timeout=10)
            coloured = answer._lines[2]
            # The same lines, in more colours: the lexer's tokens.
            assert [line.text for line in coloured] == text
            assert len(_colours(coloured)) > len(_colours(plain))
            # The pages built ahead are rendered again, so paging does not render them.
            await wait_for(
                pilot,
                lambda: all("(code plain)" not in look for look in prepared_looks()),
                timeout=10,
            )
    finally:
        blocks.release_code_highlighting()


async def test_an_app_made_outside_the_command_highlights_at_once(project):
    from slop_tui.ui.widgets import blocks

    assert not blocks.code_highlighting_held()  # tests and embedders: nothing deferred
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        look = blocks.markdown_look(app)
        assert look.highlight and "(code plain)" not in look.key


class _Frames:
    """Records each frame the app hands to its driver (`App._display`; a headless
    app drops it there): how many groups the group list held when it was drawn (0
    before the list is mounted), how many the conversation showed, and whether the
    side panes were still unseen (`-filling`)."""

    def __init__(self, app: SlopApp) -> None:
        self.rows: list[int] = []
        self.conversation: list[int] = []
        self.unseen: list[bool] = []
        display = app._display

        self.list_scroll: list[float] = []  # the group list's scroll position
        self.list_height: list[int] = []

        def recording(screen, renderable):
            lists = app.query(GroupList)  # mounted after the conversation's first frame
            self.rows.append(len(lists.first()._rows) if lists else 0)
            self.list_scroll.append(lists.first().scroll_y if lists else -1)
            self.list_height.append(lists.first().size.height if lists else -1)
            self.conversation.append(len(app.query(AnswerBlock)))
            self.unseen.append(app.query_one("#left").has_class("-filling"))
            return display(screen, renderable)

        app._display = recording  # type: ignore[method-assign]


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch):
    """The command's start: the first frame waits for the workspace."""
    from slop_tui.ui import startup

    monkeypatch.setattr(startup, "_hold_first_frame", True)
    monkeypatch.setattr(startup, "FIRST_FRAME_WAIT", 60.0)  # only the tests' own waits
    return startup


def gated_open(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """`Workspace.open` waits until the returned event is set."""
    import asyncio

    gate = asyncio.Event()
    real_open = Workspace.open.__func__

    async def waiting_open(cls, *args, **kw):
        await gate.wait()
        return await real_open(cls, *args, **kw)

    monkeypatch.setattr(Workspace, "open", classmethod(waiting_open))
    return gate


async def test_the_first_frame_shows_the_conversation_and_the_panes_follow_complete(
    project, held, monkeypatch
):
    """The conversation first: its frame has the newest groups and the prompt, typed
    into already; the side panes are laid out but unseen until one frame shows
    them filled (a pane is never drawn empty, then full)."""
    await seed(project, n=3)
    gate = gated_open(monkeypatch)
    app = app_for(project)
    frames = _Frames(app)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause(0.3)  # the workspace is still opening: no frame yet
        assert frames.rows == [] and app.workspace is None
        await pilot.press(*"early")  # typed before anything is drawn: kept
        gate.set()
        await started(pilot)
        await wait_for(pilot, lambda: frames.rows and frames.rows[-1] == 3)
        assert frames.conversation[0] == 3  # the first frame drawn shows the conversation
        assert frames.rows[0] == 0 and frames.unseen[0]  # ... and the panes unseen
        # From the first frame with the panes seen, they are filled.
        seen = [rows for rows, unseen in zip(frames.rows, frames.unseen, strict=True) if not unseen]
        assert seen and all(rows == 3 for rows in seen)
        assert app._batch_count == 0
        assert app.query_one(PromptInput).text == "early"


async def test_the_first_screen_mounts_only_the_newest_groups_that_fill_it(project, held):
    """Long groups: the first load mounts the newest groups whose text fills two screens
    at the width the conversation will have (known from the side panes' sizes before
    any layout), not four; nothing is mounted after the first frame to fill the pane."""
    from slop_tui.ui.widgets.conversation import ConversationView

    gids = await seed_long(project)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        view = app.query_one(ConversationView)
        assert view.expected_width == 140 - 35 - 39  # the side panes' shares (ui/layout.py)
        assert view.mounted_group_ids == gids[-2:]  # 60 rows each at most 66 columns
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        assert view.mounted_group_ids == gids[-2:]
        assert view.max_scroll_y > 44


async def test_the_side_panes_are_filled_at_their_size_before_they_are_seen(project, held):
    """Mounted after the first frame, the side panes are laid out before they are
    filled and shown: the group list of a session longer than the pane is drawn at
    its end from the first frame it is seen in, not at its top and then scrolled; and
    nothing is painted between their mount and that frame."""
    await seed(project, n=60)
    app = app_for(project)
    frames = _Frames(app)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        await wait_for(pilot, lambda: frames.rows and frames.rows[-1] == 60)
        await pilot.pause()
        group_list = app.query_one(GroupList)
        assert group_list.max_scroll_y > 0 and group_list.scroll_y == group_list.max_scroll_y
        seen = [
            (scroll, height)
            for scroll, height, unseen in zip(
                frames.list_scroll, frames.list_height, frames.unseen, strict=True
            )
            if not unseen
        ]
        assert seen and all(s == (group_list.scroll_y, group_list.size.height) for s in seen)
        # Painted once: no frame is drawn while they are mounted and not yet shown.
        mounted = [
            unseen for h, unseen in zip(frames.list_height, frames.unseen, strict=True) if h >= 0
        ]
        assert mounted and not any(mounted)


async def test_the_side_panes_read_the_ledger_while_their_widgets_are_mounted(project, monkeypatch):
    """The side panes' reads (the tools' declarations, then the group list's rows and the
    plan) start before their widgets are mounted: the ledger's thread works while this
    one composes and lays the widgets out, not after."""
    from slop_tui.ui.screens.workspace_sides import SidePanes

    groups = await seed(project, n=6)
    events: list[str] = []
    real_register, real_mount = Workspace.register_tools, SidePanes.mount

    async def register_tools(self):
        events.append("reads started")
        return await real_register(self)

    async def mount(self):
        first = not self.screen.side_panes_mounted
        await real_mount(self)
        if first:
            events.append("widgets mounted")

    monkeypatch.setattr(Workspace, "register_tools", register_tools)
    monkeypatch.setattr(SidePanes, "mount", mount)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        await wait_for(pilot, lambda: app.screen.side_panes_filled)
        assert events[:2] == ["reads started", "widgets mounted"]
        assert [g.group_id for g in app.query_one(GroupList).groups] == groups


async def test_the_group_list_s_rows_are_read_before_the_side_panes_widgets_are_made(
    project, monkeypatch
):
    """The group list's rows (the panes' longest read: a pass over every message of the
    session) are queued on the ledger's thread before the side panes' widgets are
    imported and made, and before the other reads: the mount's own work (60-150 ms
    on the main thread) hides them, and the panes do not wait for them after it."""
    from slop_tui.ledger import Ledger
    from slop_tui.ui.screens import workspace_sides

    groups = await seed(project, n=6)
    events: list[str] = []
    record_calls(monkeypatch, events, Ledger, "group_rows", "rows read")
    record_calls(monkeypatch, events, Workspace, "register_tools", "tools read")
    real_left = workspace_sides.left_pane

    def left_pane():
        events.append("widgets made")
        return real_left()

    monkeypatch.setattr(workspace_sides, "left_pane", left_pane)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        await wait_for(pilot, lambda: app.screen.side_panes_filled)
        assert events[:3] == ["rows read", "tools read", "widgets made"]
        assert [g.group_id for g in app.query_one(GroupList).groups] == groups


async def test_side_panes_whose_first_read_fails_show_its_error_and_paint_again(
    project, monkeypatch
):
    """A ledger that fails the side panes' read (read while their widgets mount) gives
    the one banner a failed open gives; the panes are shown, nothing stays held."""
    from textual.widgets import Static

    from slop_tui.ledger import Ledger, LedgerError

    await seed(project, n=3)

    async def group_rows(self, *args, **kw):
        raise LedgerError("database disk image is malformed")

    monkeypatch.setattr(Ledger, "group_rows", group_rows)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: app.startup_error is not None)
        await pilot.pause()
        assert "malformed" in str(app.query_one("#banner", Static).render())
        assert app.screen.side_panes_filled and app.workspace is None
        assert "_slop_paint_held" not in app.__dict__


async def test_a_slow_workspace_shows_the_screen_after_the_wait(project, held, monkeypatch):
    monkeypatch.setattr(held, "FIRST_FRAME_WAIT", 0.2)
    gate = gated_open(monkeypatch)
    app = app_for(project)
    frames = _Frames(app)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: frames.rows, timeout=5)
        assert app.workspace is None and app._batch_count == 0  # drawn while still opening
        gate.set()
        await started(pilot)


async def test_a_workspace_that_fails_to_open_shows_its_error(project, held, monkeypatch):
    from textual.widgets import Static

    from slop_tui.ledger import LedgerError

    async def broken_open(cls, *args, **kw):
        raise LedgerError("database disk image is malformed")

    monkeypatch.setattr(Workspace, "open", classmethod(broken_open))
    app = app_for(project)
    frames = _Frames(app)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: app.startup_error is not None)
        await wait_for(pilot, lambda: frames.rows)  # not held by the failure
        banner = app.query_one("#banner", Static)
        assert "malformed" in str(banner.render()) and app._batch_count == 0


async def every_prompt_read(pilot) -> GroupList:
    """The started app's group list, once every line carries its prompt."""
    await started(pilot)
    group_list = pilot.app.query_one(GroupList)
    await wait_for(pilot, lambda: all(g.prompt for g in group_list.groups))
    return group_list


async def test_the_group_list_reads_the_newest_prompts_first_then_the_rest(project, monkeypatch):
    """At start only the newest groups' prompts are read with the list; the older ones
    follow in a second read, and every line ends up with its snippet."""
    from slop_tui.ledger import Ledger
    from slop_tui.ui.screens import workspace as app_module
    from slop_tui.ui.screens import workspace_sides

    await seed(project, n=5)
    monkeypatch.setattr(app_module, "PROMPTS_FIRST", 2)  # a reload
    monkeypatch.setattr(workspace_sides, "PROMPTS_FIRST", 2)  # the first fill
    calls: list[tuple[str, object]] = []
    real_rows, real_prompts = Ledger.group_rows, Ledger.group_prompts

    async def group_rows(self, *a, **k):
        calls.append(("rows", k.get("prompts_for_newest")))
        return await real_rows(self, *a, **k)

    async def group_prompts(self, session, below, *a, **k):
        calls.append(("prompts", below))
        return await real_prompts(self, session, below, *a, **k)

    monkeypatch.setattr(Ledger, "group_rows", group_rows)
    monkeypatch.setattr(Ledger, "group_prompts", group_prompts)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        group_list = await every_prompt_read(pilot)
        assert [g.prompt for g in group_list.groups] == [f"question {i}" for i in range(5)]
        gids = [g.group_id for g in group_list.groups]
        assert calls == [("rows", 2), ("prompts", gids[2] + 1)]  # below the newest 2
        await group_list.refresh_from(app.workspace.history())  # a reload keeps the prompts read
        assert [g.prompt for g in group_list.groups] == [f"question {i}" for i in range(5)]


async def test_the_older_prompts_are_read_after_the_group_list_is_drawn(project, monkeypatch):
    """The older groups' prompts (a pass over the session's prompts) are read once the
    frame that shows the group list is drawn, not beside its layout and paint."""
    from slop_tui.ledger import Ledger
    from slop_tui.ui.screens import workspace_sides

    await seed(project, n=5)
    monkeypatch.setattr(workspace_sides, "PROMPTS_FIRST", 2)
    events: list[str] = []
    real_prompts, real_line = Ledger.group_prompts, GroupList.render_line

    async def group_prompts(self, *a, **k):
        events.append("prompts read")
        return await real_prompts(self, *a, **k)

    def render_line(self, y):
        if not events or events[-1] != "list drawn":
            events.append("list drawn")
        return real_line(self, y)

    monkeypatch.setattr(Ledger, "group_prompts", group_prompts)
    monkeypatch.setattr(GroupList, "render_line", render_line)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await every_prompt_read(pilot)
        assert events[:2] == ["list drawn", "prompts read"]


# Run in a child process: the app started as the command starts it (its first frame
# held for the conversation), the modules loaded when that frame is drawn.
FIRST_FRAME_MODULES = first_frame_probe(
    size=(140, 44),
    while_running="await pilot.pause(0.2)",
    result='{"first": seen[0], "after": sorted(sys.modules)}',
)

# What the first frame (the header, the conversation, the prompt) does not need, and
# each is loaded after it: the context engine (the side panes' plan), the side panes'
# widgets, the tools and the shell's sandbox (the header needs only whether it can
# run), the providers' adapters.
NOT_BEFORE_THE_FIRST_FRAME = (
    "slop_tui.tools.sandbox",
    "slop_tui.tools.gitdirs",
    "slop_tui.context.assemble",
    "slop_tui.context.budget",
    "slop_tui.context.guards",
    "slop_tui.context.layout",
    "slop_tui.context.plan",
    "slop_tui.ui.widgets.groups",
    "slop_tui.ui.widgets.gauge",
    "slop_tui.ui.widgets.preview",
    "slop_tui.tools.registry",
    "slop_tui.context.tiers",
    "slop_tui.ui.palette",
)
# Not loaded in the start's first moments at all: the orchestrator's event types (with
# the first turn) and the handoffs' module (a resume to send, the exit's handoff).
LATER_STILL = ("slop_tui.events", "slop_tui.continuity.handoff")


async def test_the_first_frame_loads_no_module_only_later_panes_need(project) -> None:
    import subprocess
    import sys

    await seed(project, n=3)
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME_MODULES, str(project / ".slop" / "slop.db")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    first, after = set(loaded["first"]), set(loaded["after"])
    assert "slop_tui.workspace" in first and "slop_tui.ui.widgets.conversation" in first
    for module in NOT_BEFORE_THE_FIRST_FRAME:
        assert module not in first, f"{module} is imported before the first frame"
        assert module in after, f"{module} is never imported: the check proves nothing"
    for module in LATER_STILL:
        assert module not in after, f"{module} is imported at start"


async def test_the_app_saves_the_dataclass_code_cache_once_its_first_screen_is_up(
    project, monkeypatch
) -> None:
    from slop_tui import codecache
    from slop_tui.ui import startup

    saves: list[bool] = []
    monkeypatch.setattr(codecache, "save_code_cache", lambda: saves.append(True))
    monkeypatch.setattr(startup, "CODE_CACHE_SAVE_AFTER", 0.05)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        await wait_for(pilot, lambda: saves, timeout=10)
        await pilot.pause(0.2)
        assert saves == [True]  # once: later compiles are written at exit


@pytest.mark.parametrize("can_run", [True, False])
async def test_the_sandbox_is_probed_while_the_ledger_opens_and_built_after_the_first_screen(
    project, monkeypatch, can_run
) -> None:
    """Probing bwrap waits on a process: it runs beside `Workspace.open`, once, and the
    header says from the first screen whether the tools are sandboxed. The sandbox
    itself (its modules, the paths it hides) is built after the first screen, in a
    thread, on the same verdict."""
    import asyncio
    import threading

    from slop_tui import workspace as workspace_module
    from slop_tui.tools.sandbox import Sandbox
    from slop_tui.ui import startup

    probing = threading.Event()
    probes: list[bool] = []
    built: list[Sandbox] = []

    def can_run_here(config, env):
        probing.set()
        probes.append(can_run)
        return can_run

    def detect(config, env):
        built.append(Sandbox("/usr/bin/bwrap" if can_run else None, "test", False))
        return built[-1]

    real_open = Workspace.open.__func__
    overlapped: list[bool] = []

    async def open_once_probing(cls, *args, **kw):
        overlapped.append(await asyncio.to_thread(probing.wait, 10))
        return await real_open(cls, *args, **kw)

    monkeypatch.setattr(workspace_module, "sandbox_can_run", can_run_here)
    monkeypatch.setattr(workspace_module, "detect_sandbox", detect)
    monkeypatch.setattr(Workspace, "open", classmethod(open_once_probing))
    monkeypatch.setattr(startup, "SANDBOX_AFTER", 0.05)
    monkeypatch.setattr(startup, "USER_PAUSE_S", 0.05)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        assert overlapped == [True]  # the probe had started before the ledger opened
        mark = "shell: NO SANDBOX"
        assert probes == [can_run] and (mark in app.sub_title) == (not can_run)
        await wait_for(pilot, lambda: built, timeout=10)
        await pilot.pause(0.1)
        assert len(built) == 1 and app.workspace.sandbox is built[0]
        assert app.workspace.sandboxed is can_run and (mark in app.sub_title) == (not can_run)


async def test_the_ledger_opens_while_the_first_screen_is_composed(project, monkeypatch) -> None:
    """The app starts opening the workspace as it runs (`on_load`), before its first
    screen is mounted: the open's reads on the ledger's thread overlap the screen's
    composition, and the screen takes the workspace once it is mounted."""
    await seed(project, n=2)
    real_open = Workspace.open.__func__
    app = app_for(project)
    screen_up_at_open: list[bool] = []

    async def recording_open(cls, *args, **kw):
        screen_up_at_open.append(app.workspace_screen.is_mounted)
        return await real_open(cls, *args, **kw)

    monkeypatch.setattr(Workspace, "open", classmethod(recording_open))
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        assert screen_up_at_open == [False]  # one open, begun before the screen was up
        assert app._opening is None and app.workspace is not None


async def test_an_open_the_screen_never_took_is_closed_when_the_app_ends(
    project, monkeypatch
) -> None:
    """The app ends before its screen takes the workspace opened at load: the ledger is
    closed as the app unmounts (its thread ends; none is left running the process)."""
    monkeypatch.setattr(SlopApp, "open_workspace", lambda self: None)  # never taken
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        opening = app._opening.task
        await wait_for(pilot, opening.done)
    workspace, _probe = opening.result()
    thread = workspace.ledger._db._thread
    thread.join(5)
    assert not thread.is_alive() and app._opening is None and app.workspace is None


async def test_an_open_still_waiting_when_the_app_ends_is_cancelled(project, monkeypatch):
    """The app ends while the open begun at load still waits (a locked or slow ledger):
    the open is cancelled with the screen's worker waiting on it, not left pending
    behind a closed app."""
    import asyncio

    waiting: list[asyncio.Task] = []

    async def never_open(cls, *args, **kw):
        waiting.append(asyncio.current_task())
        await asyncio.Event().wait()

    monkeypatch.setattr(Workspace, "open", classmethod(never_open))
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: waiting)
        assert app._opening is None and not waiting[0].done()  # taken by the screen
    assert waiting[0].cancelled() and app.workspace is None


def one_static_app():  # type: ignore[no-untyped-def]
    """A Textual app of one Static (`#first`): the held frames' and paint's tests."""
    from textual.app import App
    from textual.widgets import Static

    class Small(App):
        def compose(self):
            yield Static("first", id="first")

    return Small()


async def test_held_paint_lays_out_and_draws_nothing_until_released() -> None:
    """`hold_paint`: a widget mounted meanwhile gets its size (and a layout can be
    awaited), nothing is written to the terminal; the release draws it, once."""
    from textual.widgets import Static

    from slop_tui.ui.frames import frame_drawn
    from slop_tui.ui.textual_fixes import hold_paint, release_paint

    app = one_static_app()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        shown: list[str] = []
        display = app._display

        def recording(screen, renderable):
            if renderable is not None:
                shown.append(str(app.query("#later").first().size) if app.query("#later") else "")
            return display(screen, renderable)

        app._display = recording  # type: ignore[method-assign]
        hold_paint(app)
        later = Static("later", id="later")
        await app.screen.mount(later)
        await frame_drawn(app, timeout=5)  # the layout is awaited while nothing is painted
        assert later.size.width == 40 and shown == []
        later.update("later, filled")
        await pilot.pause(0.1)
        assert shown == []
        release_paint(app)
        await pilot.pause(0.1)
        assert shown == ["Size(width=40, height=1)"]  # drawn once, at its size
        release_paint(app)  # not held: nothing
        await pilot.pause(0.1)
        assert len(shown) == 1


def test_the_start_s_background_work_waits_for_the_user_to_pause() -> None:
    """The highlighting and the SDKs' imports take the interpreter from the event loop:
    they start once no key or click has come for USER_PAUSE_S, never while the user
    types, and not at all once the app has stopped."""
    from slop_tui.ui import startup

    class Collector:
        typing = True

        def input_within(self, seconds: float) -> bool:
            assert seconds == startup.USER_PAUSE_S
            return self.typing

    class App:
        is_running = True

        def __init__(self) -> None:
            self.collector = Collector()
            self.timers: list = []

        def set_timer(self, delay, callback) -> None:
            assert 0 < delay <= startup.USER_PAUSE_S
            self.timers.append(callback)

        def fire(self) -> None:
            due, self.timers = self.timers, []
            for callback in due:
                callback()

    app, ran = App(), []
    startup.when_user_pauses(app, lambda: ran.append("work"))
    for _ in range(10):  # typing on: the work waits, checked again a while later
        assert ran == [] and len(app.timers) == 1
        app.fire()
    app.collector.typing = False
    app.fire()
    assert ran == ["work"] and app.timers == []
    startup.when_user_pauses(app, lambda: ran.append("at once"))  # a pause already
    assert ran == ["work", "at once"]
    app.collector.typing, stopped = True, App()
    stopped.is_running = False
    startup.when_user_pauses(stopped, lambda: ran.append("after the app stopped"))
    assert stopped.timers == [] and ran == ["work", "at once"]


async def call_from_another_process(project, gid: int) -> None:
    """A provider call with no price, recorded by a second workspace on the ledger."""
    other = await open_workspace(project)
    try:
        await other.ledger.record_usage(other.session, gid, "openai", "house-model-7", 950, 45)
    finally:
        await other.close()


async def test_the_start_reads_the_session_s_spend_once_per_screen(project, monkeypatch):
    """The spend is a sum over every call of the session (milliseconds at 10,000
    calls): the first frame reads it once for the header's cost, and the side panes'
    read, the provider choice and the plan read only the settings. The header still
    shows the cost the ledger holds, also after another process's call."""
    gids = await seed(project, n=2)
    ws = await open_workspace(project)
    try:
        await ws.ledger.record_usage(ws.session, gids[-1], "openai", "house-model-7", 900, 40)
    finally:
        await ws.close()
    from slop_tui.ledger import Ledger
    from slop_tui.ui.screens.workspace import WorkspacePanes

    reads: list[str] = []
    phase = ["before"]
    real_spend, real_show = Ledger.spend, WorkspacePanes.show_conversation

    async def spend(self, *a, **k):
        reads.append(phase[0])
        return await real_spend(self, *a, **k)

    async def show_conversation(self, *a, **k):
        phase[0] = "first frame"
        await real_show(self, *a, **k)
        phase[0] = "side panes"

    monkeypatch.setattr(Ledger, "spend", spend)
    monkeypatch.setattr(WorkspacePanes, "show_conversation", show_conversation)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        assert reads == ["first frame"]
        assert "1 call price unknown" in app.sub_title
        # Another process's call: the ledger poll reloads the panes, the header with them.
        await call_from_another_process(project, gids[-1])
        await wait_for(pilot, lambda: "2 calls price unknown" in app.sub_title, timeout=10)


async def test_a_call_recorded_while_the_side_panes_fill_reaches_the_header(project, monkeypatch):
    """The side panes' read does not read the spend again: a call another process
    records after the first frame's read still reaches the header's cost, through the
    ledger poll (its data version is read before the first frame's reads)."""
    gids = await seed(project, n=2)
    from slop_tui.ui.screens.workspace import WorkspacePanes

    real_show = WorkspacePanes.show_conversation

    async def show_conversation(self, *a, **k):
        await real_show(self, *a, **k)
        await call_from_another_process(project, gids[-1])

    monkeypatch.setattr(WorkspacePanes, "show_conversation", show_conversation)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        await wait_for(pilot, lambda: "1 call price unknown" in app.sub_title, timeout=10)


async def test_the_plan_and_the_provider_choice_read_no_spend(tmp_path, monkeypatch):
    from slop_tui.ledger import Ledger

    await seed(tmp_path, n=2)
    ws = await open_workspace(tmp_path)
    try:
        calls: list[int] = []
        real_spend = Ledger.spend

        async def spend(self, *a, **k):
            calls.append(1)
            return await real_spend(self, *a, **k)

        monkeypatch.setattr(Ledger, "spend", spend)
        await ws.provider_choice()
        await ws.display_plan()
        assert calls == []
        await ws.snapshot(Changed.ALL)
        assert calls == [1]  # the header's cost, once per read of the panes
    finally:
        await ws.close()


async def test_the_first_frame_is_drawn_once_and_the_conversation_not_again_with_the_panes(
    project, held, monkeypatch
):
    """The command's first frame comes after a hold: its layout and the whole-screen
    repaint due after the hold are one render, not two. The repaints the conversation's
    widgets asked for in that layout (their first sizes) are drawn by it: the frame
    that shows the side panes paints the panes, not the conversation's column again."""
    from textual._compositor import Compositor

    # Groups longer than the screen: the first frame's groups fill the conversation
    # (no older group is mounted to fill it while the panes are filled).
    await seed_long(project)
    renders: list[tuple[set, bool]] = []  # (the regions painted, the panes still unseen)
    real = Compositor.render_update
    app = app_for(project)

    def render_update(self, *a, **k):
        if app.screen is app.workspace_screen:
            unseen = app.query_one("#left").has_class("-filling")
            renders.append(({tuple(r) for r in self._dirty_regions}, unseen))
        return real(self, *a, **k)

    monkeypatch.setattr(Compositor, "render_update", render_update)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        await pilot.pause(0.3)
        whole = tuple(app.screen.region)
        conversation = tuple(app.query_one("#conversation").region)
        assert renders and whole in renders[0][0]  # the first frame: the whole screen
        assert [whole in painted for painted, _ in renders].count(True) == 1
        shown = [painted for painted, unseen in renders if not unseen]
        assert shown and conversation not in shown[0], (conversation, shown[0])


async def test_after_a_hold_the_layout_and_the_whole_repaint_are_one_render() -> None:
    """After a hold, one tick lays the screen out and repaints it whole: one render
    and one write, not the layout's frame followed by the same cells again."""
    from textual._compositor import Compositor
    from textual.widgets import Static

    from slop_tui.ui.textual_fixes import hold_frames, release_frames

    app = one_static_app()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        painted: list[set] = []
        real = Compositor.render_update

        def render_update(self, *a, **k):
            painted.append({tuple(r) for r in self._dirty_regions})
            return real(self, *a, **k)

        Compositor.render_update = render_update  # type: ignore[method-assign]
        try:
            hold_frames(app)
            await app.screen.mount(Static("later", id="later"))
            await pilot.pause(0.1)
            assert painted == []
            release_frames(app)
            await pilot.pause(0.3)
        finally:
            Compositor.render_update = real  # type: ignore[method-assign]
        assert [p for p in painted if p] == [painted[0]]
        assert tuple(app.screen.region) in painted[0]
        assert app.query_one("#later").region.height == 1  # laid out, and drawn in it


async def test_the_frame_of_a_release_is_drawn_without_waiting_for_the_frame_timer(
    monkeypatch,
) -> None:
    """Frames held from the app's mount (as the command's first frame is): the frame
    of the release is drawn at the loop's next turn, not a period of the screen's frame
    timer later (a timer first resumed at the release waited a whole period)."""
    import asyncio
    import time

    import textual.screen
    from textual._compositor import Compositor
    from textual.app import App
    from textual.widgets import Static

    from slop_tui.ui.textual_fixes import hold_frames, release_frames

    period = 0.5  # the frame timer's period, long enough to tell from the loop's turn
    monkeypatch.setattr(textual.screen, "UPDATE_PERIOD", period)
    drawn: list[float] = []
    real = Compositor.render_update

    def render_update(self, *a, **k):
        drawn.append(time.monotonic())
        return real(self, *a, **k)

    monkeypatch.setattr(Compositor, "render_update", render_update)

    class Held(App):
        def compose(self):
            yield Static("first", id="first")

        def on_mount(self) -> None:
            hold_frames(self)

    app = Held()
    # Plain sleeps: the pilot's pauses run the screen's frame at once themselves.
    async with app.run_test(size=(40, 10)):
        await asyncio.sleep(period + 0.2)  # the workspace's opening, longer than a period
        await app.screen.mount(Static("later", id="later"))  # the conversation, filled
        await asyncio.sleep(0.05)
        assert drawn == []
        released = time.monotonic()
        release_frames(app)
        for _ in range(40):
            if drawn:
                break
            await asyncio.sleep(0.01)
        assert drawn, "nothing drawn"
        assert drawn[0] - released < period / 2, drawn[0] - released
        assert app.query_one("#later").region.height == 1  # laid out in that frame


@pytest.mark.parametrize("newest_first", [30, 2])
async def test_the_older_prompts_redraw_only_the_lines_on_screen_that_gained_one(
    project, monkeypatch, newest_first
):
    """The older groups' prompts arrive after the panes' frame. The list opens at its
    end: with every line on screen already carrying its prompt (30 read first) nothing
    is drawn again; with some of them waiting (2 read first) only those lines are. Every
    line shows its prompt when scrolled to."""
    from textual.geometry import Region

    from slop_tui.ui.screens import workspace_sides
    from slop_tui.ui.widgets.groups import GroupLines

    await seed(project, n=40)
    monkeypatch.setattr(workspace_sides, "PROMPTS_FIRST", newest_first)
    repaints: list[Region | None] = []
    real_fill = GroupLines._fill_prompts

    async def fill_prompts(self, *a, **k):
        real_refresh = self.refresh

        def refresh(*regions, **kw):
            repaints.append(regions[0] if regions else None)
            return real_refresh(*regions, **kw)

        self.refresh = refresh
        try:
            return await real_fill(self, *a, **k)
        finally:
            del self.refresh

    monkeypatch.setattr(GroupLines, "_fill_prompts", fill_prompts)
    app = app_for(project)
    async with app.run_test(size=(140, 44)) as pilot:
        group_list = await every_prompt_read(pilot)
        height = group_list.scrollable_content_region.height
        top = group_list.scroll_offset.y
        assert 0 < height < 40 and top + height == 40  # the list opens at its end
        waiting = [i for i in range(top, 40) if i < 40 - newest_first]
        if not waiting:
            assert repaints == []
        else:
            assert len(repaints) == 1 and repaints[0] is not None
            assert repaints[0].y == waiting[0] - top and repaints[0].height == len(waiting)
        group_list.scroll_to(y=0, animate=False)
        await pilot.pause()
        assert "question 0" in group_list.render_line(0).text
        assert "question 39" not in group_list.render_line(0).text
