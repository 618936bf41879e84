"""The workspace's one snapshot read for a set of changes: what the panes draw."""

from __future__ import annotations

from slop_tui.records import Changed, NewMessage
from tests.workspace_fixtures import open_workspace


async def _with_history(tmp_path):
    ws = await open_workspace(tmp_path)
    user = await ws.ledger.append_user(ws.session, "a question", strategy="openai")
    await ws.ledger.append(
        ws.session,
        user.group_id,
        [NewMessage(role="assistant", content="### STATE\n- goal: ship", strategy="openai")],
    )
    await ws.ledger.add_state(ws.session, user.group_id, "### STATE\n- goal: ship")
    return ws, user.group_id


async def test_a_snapshot_reads_what_the_change_touches(tmp_path):
    ws, gid = await _with_history(tmp_path)
    try:
        everything = await ws.snapshot(Changed.ALL)
        assert [row[0] for row in everything.rows] == [gid]
        assert [s.name for s in everything.sessions] == [ws.session]
        assert "goal: ship" in everything.state.content
        assert everything.failed_prompts == []
        # The plan is the one the panes show between turns.
        shown, _ = await ws.display_plan()
        assert everything.plan.request == shown.request

        state_only = await ws.snapshot(Changed.STATE)
        assert state_only.rows is None and state_only.sessions is None
        assert "goal: ship" in state_only.state.content

        plan_only = await ws.snapshot(Changed.PROVIDER)
        assert plan_only.rows is None and plan_only.state is None
        assert plan_only.plan.request == shown.request
        assert plan_only.choice.name == (await ws.provider_choice()).name
    finally:
        await ws.close()


async def test_a_snapshot_gives_the_group_list_its_rows_as_the_list_reads_them(tmp_path):
    ws, gid = await _with_history(tmp_path)
    try:
        snap = await ws.snapshot(Changed.HISTORY, rows_prompt_chars=80, prompts_for_newest=1)
        direct = await ws.ledger.group_rows(ws.session, 80, prompts_for_newest=1)
        assert snap.rows == direct
    finally:
        await ws.close()
