"""Continuity wired into real turns: guards, summaries, compaction, lanes, handoffs.

Whole turns through the real OpenAI SDK against the loopback fake server, with
small budgets from config (`[models.fake-model]`, `[compaction]`) so the
guard ladder and compaction run after a few messages. Tokens are counted
as characters / 4 (`rough`), so the sizes below are exact.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from slop_tui.commands import dispatch
from slop_tui.config import load_config
from slop_tui.context import render_prompt
from slop_tui.context.summaries import STANDALONE_SYSTEM
from slop_tui.orchestrator import (
    BudgetWarning,
    Compaction,
    ErrorEvent,
    Notice,
    Orchestrator,
    TurnFinished,
)
from slop_tui.providers.retry import RetryPolicy
from slop_tui.records import NewMessage
from slop_tui.workspace import Workspace
from tests.fakeserver import FakeToolCall, Reply
from tests.workspace_fixtures import rough

SECRET = "sk-proj-Abc123def456GHI789jkl012MNO345pqr"

# The system text and tool declarations alone are about 2,900 tokens; these
# limits leave room for a little history: warn at 4,000, reduce at 4,500.
SMALL = {"fake-model": {"context_window": 6000, "max_output": 1000}}
# No guard pressure, for the after-reply compaction tests.
ROOMY = {"fake-model": {"context_window": 40000, "max_output": 2000}}


def env_for(fake_llm) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "x",
        "OPENAI_BASE_URL": fake_llm.openai_base_url,
        "OPENAI_MODEL": "fake-model",
    }


async def open_ws(
    tmp_path, fake_llm, *, models=None, compaction=None, context=None, truncation=None
) -> Workspace:
    env = env_for(fake_llm)
    config = load_config(db=str(tmp_path / ".slop" / "slop.db"), env=env, cwd=tmp_path)
    config = dataclasses.replace(
        config,
        models=models or {},
        compaction=compaction or {},
        context=context or {},
        truncation=truncation or {},
    )
    return await Workspace.open(config, count_tokens=rough, env=env)


@pytest.fixture(autouse=True)
def _no_git(tmp_path, monkeypatch):
    # Handoffs look for a repository; keep them from finding one above tmp_path.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))


@pytest.fixture
async def make(tmp_path, fake_llm):
    """make(**config) -> (ws, orch); everything is closed at the end."""
    opened: list[tuple[Workspace, Orchestrator]] = []

    async def _make(retries: int = 0, **kwargs):
        ws = await open_ws(tmp_path, fake_llm, **kwargs)

        async def no_sleep(_seconds: float) -> None:
            return None

        orch = Orchestrator(ws, retry_policy=RetryPolicy(max_retries=retries), sleep=no_sleep)
        opened.append((ws, orch))
        return ws, orch

    yield _make
    for ws, orch in opened:
        await orch.aclose()
        await ws.close()


async def history(ws, turns: int, words: int, answer: str = "noted") -> list[int]:
    """`turns` earlier exchanges written straight to the ledger; returns their group ids."""
    gids = []
    for i in range(turns):
        text = f"request {i}: " + " ".join(f"word{i}x{j}" for j in range(words))
        user = await ws.ledger.append_user(ws.session, text, strategy="openai")
        await ws.ledger.append(
            ws.session,
            user.group_id,
            [NewMessage("assistant", f"{answer} {i}", strategy="openai")],
        )
        gids.append(user.group_id)
    return gids


def pairs_are_valid(messages: list[dict]) -> bool:
    """Every tool call has exactly one result right after its assistant message."""
    for i, m in enumerate(messages):
        calls = [c["id"] for c in m.get("tool_calls") or []]
        if calls:
            results = [r["tool_call_id"] for r in messages[i + 1 : i + 1 + len(calls)]]
            if sorted(results) != sorted(calls):
                return False
    answered = {c["id"] for m in messages for c in m.get("tool_calls") or []}
    return all(m["tool_call_id"] in answered for m in messages if m["role"] == "tool")


def text_of(request) -> str:
    return json.dumps(request.body, ensure_ascii=False)


# -- the guard ladder, before every request -------------------------------------------


async def test_guard_ladder_elides_middle_tool_results_inside_a_tool_loop(make, fake_llm, tmp_path):
    # Input budget 10,000: warn at 8,000, reduce at 9,000 down to under 7,200.
    ws, orch = await make(
        models={"fake-model": {"context_window": 12000, "max_output": 2000}},
        compaction={"keep_recent_messages": 50, "checkpoint_interval": 2},
        truncation={"full_fidelity_count": 20},  # every result whole until the guard acts
    )
    body = "".join(
        f"line {n:03d} of a file that is read whole, padded to sixty chars\n" for n in range(64)
    )
    names = [f"f{i}.txt" for i in range(6)]
    for name in names:
        (tmp_path / name).write_text(body)
    fake_llm.enqueue(
        *[Reply(tool_calls=[FakeToolCall("read_file", {"path": n})]) for n in names],
        Reply(text="read them all"),
    )
    events = []
    out = await orch.run_turn("read the six files", events.append)
    assert out.error is None and out.text == "read them all"
    last = fake_llm.chat_requests[-1].messages
    results = [m["content"] for m in last if m["role"] == "tool"]
    assert len(results) == 6
    elided = [i for i, r in enumerate(results) if "tool result elided" in r]
    assert elided == [0, 1, 2, 3]  # middle-out, grown over the loop; never the newest two
    assert 'query_db(sql="SELECT content FROM messages WHERE id=' in results[1]
    assert "line 063" in results[-1]
    assert pairs_are_valid(last)
    # Within the turn elision only grows: a result elided once stays elided, and the
    # newest result of every request (the one the model just asked for) never is.
    seen: set[str] = set()
    for req in fake_llm.chat_requests:
        tools = [m for m in req.messages if m["role"] == "tool"]
        now = {m["tool_call_id"] for m in tools if "tool result elided" in m["content"]}
        assert seen <= now
        assert not tools or tools[-1]["tool_call_id"] not in now
        seen = now
    logs = await ws.ledger.compaction_log(ws.session, 0)
    assert logs and all(x.case_kind == "elide" for x in logs)
    assert all(x.tokens_after < x.tokens_before for x in logs)
    assert [h.reason for h in await ws.ledger.handoffs(ws.session)].count("checkpoint") == 3
    warnings = [e for e in events if isinstance(e, BudgetWarning)]
    assert len(warnings) == 1


async def test_summarize_step_stores_a_summary_that_reaches_the_request(make, fake_llm):
    ws, orch = await make(
        models=SMALL,
        compaction={"keep_recent_messages": 2, "min_verbatim_exchanges": 1},
    )
    gids = await history(ws, 4, 170)
    fake_llm.enqueue(
        Reply(
            text="<analysis>thinking</analysis><summary>## User Intent\n- MARKER-7 the user listed words</summary>"
        ),
        Reply(text="done"),
    )
    events = []
    out = await orch.run_turn("and now?", events.append)
    assert out.error is None
    summary_req, answer_req = fake_llm.chat_requests
    assert "context compaction request" in summary_req.messages[-1]["content"]
    # The guard's summary request holds only the rows it summarises (groups 1-3), not
    # the request under pressure: no layers, no tools, not the kept exchanges.
    system_msg, ask = summary_req.messages
    assert system_msg["content"] == STANDALONE_SYSTEM and "tools" not in summary_req.body
    assert "request 2:" in ask["content"] and "request 3:" not in ask["content"]
    assert "and now?" not in ask["content"]
    system = answer_req.messages[0]["content"]
    assert "## Summary of earlier conversation" in system and "MARKER-7" in system
    assert "thinking" not in system
    rows = {m.group_id: m for m in await ws.ledger.session_messages(ws.session) if m.role == "user"}
    [summary] = await ws.ledger.summaries(ws.session, "main")
    assert [rows[g].status for g in gids] == ["completed"] * 4  # a summary changes no row
    covered = [m.id for m in await ws.ledger.session_messages(ws.session) if m.group_id in gids[:3]]
    assert (summary.kind, summary.first_message_id, summary.last_message_id) == (
        "guard",
        covered[0],
        covered[-1],
    )
    assert "word0x1" not in text_of(answer_req)  # the covered rows left the request
    phases = [(e.phase, e.case) for e in events if isinstance(e, Compaction)]
    assert phases == [("started", "summarize"), ("done", "summarize")]
    [log] = await ws.ledger.compaction_log(ws.session)
    assert log.case_kind == "summarize" and log.summary_id == summary.id
    assert log.tokens_after < log.tokens_before


async def test_failed_summary_call_stores_the_extractive_fallback(make, fake_llm):
    ws, orch = await make(
        models=SMALL,
        compaction={"keep_recent_messages": 2, "min_verbatim_exchanges": 1},
    )
    await history(ws, 4, 170)
    fake_llm.enqueue(Reply(status=500, error_message="summary model down"), Reply(text="done"))
    out = await orch.run_turn("and now?")
    assert out.error is None and out.text == "done"
    [summary] = await ws.ledger.summaries(ws.session, "main")
    assert summary.content.startswith("(Extractive summary of messages #")
    assert "## User Intent" in summary.content
    assert "Extractive summary" in fake_llm.last.messages[0]["content"]
    [log] = await ws.ledger.compaction_log(ws.session)
    assert "extractive fallback" in log.detail


async def test_80_percent_warning_fires_once(make, fake_llm):
    ws, orch = await make(models=SMALL)
    await history(ws, 3, 160)
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("list_directory", {})]),
        Reply(text="one"),
        Reply(text="two"),
    )
    events = []
    await orch.run_turn("first", events.append)
    await orch.run_turn("second", events.append)
    warnings = [e for e in events if isinstance(e, BudgetWarning)]
    assert len(fake_llm.chat_requests) == 3
    assert len(warnings) == 1 and 80 <= warnings[0].percent < 90
    assert "of the input budget" in warnings[0].text


async def test_a_request_that_cannot_fit_fails_clearly_and_keeps_the_ledger_consistent(
    make, fake_llm
):
    ws, orch = await make(models=SMALL)
    events = []
    huge = "x " * 20_000
    out = await orch.run_turn(huge, events.append)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].error_kind == "context_overflow"
    assert "cannot be sent" in out.error and "/context restore" in out.error
    assert not fake_llm.chat_requests
    rows = await ws.ledger.session_messages(ws.session)
    assert [(r.role, r.status) for r in rows] == [("user", "dropped")]
    fake_llm.enqueue(Reply(text="fine"))
    assert (await orch.run_turn("small one")).text == "fine"
    assert "x x x" not in text_of(fake_llm.last)


# -- compaction after the reply -------------------------------------------------------


async def compacted(
    make, fake_llm, summary_text: str = "<summary>## User Intent\n- COMPACTED</summary>"
):
    """A turn over ~1,500 tokens of history, then its background compaction."""
    ws, orch = await make(
        models=ROOMY,
        compaction={"compaction_trigger_tokens": 800, "verbatim_window_tokens": 300},
    )
    await history(ws, 5, 100)
    fake_llm.enqueue(Reply(text="final answer"), Reply(text=summary_text))
    before = {}

    async def on_event(event):
        if isinstance(event, TurnFinished):
            before["prompt"] = await ws.prompt("openai")

    out = await orch.run_turn("go on", on_event)
    await orch.compaction_task
    return ws, orch, out, before["prompt"]


async def test_background_compaction_logs_summarizes_and_hands_off(make, fake_llm):
    ws, orch, out, _ = await compacted(make, fake_llm)
    sent, summary_req = fake_llm.chat_requests
    # The summary request holds only what is summarised (the rows before the verbatim
    # part, as blocks, and the instruction), not the rest of the session's request: no
    # tool declarations, no layers, not the kept exchanges.
    system, ask = summary_req.messages
    assert system == {"role": "system", "content": STANDALONE_SYSTEM}
    assert "tools" not in summary_req.body
    text = ask["content"]
    assert "[user]: request 0:" in text and "[user]: request 2:" in text
    assert "request 3:" not in text and "go on" not in text
    assert len(json.dumps(summary_req.body)) < len(json.dumps(sent.body))
    [log] = await ws.ledger.compaction_log(ws.session)
    assert log.case_kind == "summarize" and log.tokens_after < log.tokens_before
    assert "compaction_trigger_tokens" in log.trigger
    [summary] = await ws.ledger.summaries(ws.session, "main")
    assert "COMPACTED" in summary.content and log.summary_id == summary.id
    assert [h.reason for h in await ws.ledger.handoffs(ws.session)] == ["compaction"]
    # The oldest group was already outside the 5-group window, sent until a summary
    # covered it: the compaction covers it too. No row changed status.
    rows = await ws.ledger.session_messages(ws.session)
    assert {r.status for r in rows} == {"completed"}
    assert summary.first_message_id == rows[0].id
    plan = await ws.plan("openai")
    assert plan.head == summary
    assert plan.group_place(rows[0].group_id, "main", "completed").summary_id == summary.id
    phases = [(e.phase, e.case) for e in out.events if isinstance(e, Compaction)]
    assert phases == [("started", ""), ("done", "summarize")]
    # The next request carries the summary, not the covered messages.
    fake_llm.enqueue(Reply(text="next"))
    await orch.run_turn("next")
    assert "COMPACTED" in fake_llm.last.messages[0]["content"]
    assert "word0x1" not in text_of(fake_llm.last)
    assert (await dispatch(ws, "/context log")).text.count("**summarize**") == 1


async def test_a_pasted_log_is_cut_in_later_requests_instead_of_compacted(make, fake_llm):
    """A paste takes the history past the trigger. After its turn the paste belongs to
    an older group, which the next request cuts while the history is under pressure
    (head, query_db pointer, tail): no after-reply summary is made for it."""
    ws, orch = await make(models=ROOMY, compaction={"compaction_trigger_tokens": 2_000})
    await history(ws, 2, 20)
    log = "".join(f"worker log line {i:04d} all quiet\n" for i in range(600))
    fake_llm.enqueue(Reply(text="read it"), Reply(text="ok"))
    out = await orch.run_turn("Here is the worker log:\n" + log + "What broke?")
    await orch.wait_background()
    assert out.error is None and "line 0300" in text_of(fake_llm.chat_requests[0])
    assert await ws.ledger.summaries(ws.session, "main") == []
    assert len(fake_llm.chat_requests) == 1  # no summary call
    await orch.run_turn("and the next step?")
    nxt = text_of(fake_llm.last)
    assert "line 0300" not in nxt and "What broke?" in nxt
    assert f"SELECT content FROM messages WHERE id={out.group_id}" in nxt
    # A long history of ordinary turns is still compacted (`compacted` above).


async def test_a_paste_over_half_the_input_budget_is_cut_in_its_own_turn(make, fake_llm):
    """Input budget 38,000 tokens: a 26,000-token paste is sent as its head, the query_db
    pointer and its tail, about 19,000 tokens; the ledger keeps it whole, and the plan
    the screen shows labels it as it was sent."""
    ws, orch = await make(models=ROOMY)
    log = "".join(f"worker log line {i:04d} all quiet\n" for i in range(3_000))
    fake_llm.enqueue(Reply(text="read it"))
    out = await orch.run_turn("Here is the worker log:\n" + log + "What broke?")
    assert out.error is None
    sent = text_of(fake_llm.chat_requests[0])
    assert "Here is the worker log:" in sent and "What broke?" in sent
    assert "line 0800" not in sent  # the middle (the tail is 80 % of the cut)
    assert f"SELECT content FROM messages WHERE id={out.group_id}" in sent
    assert 17_000 * 4 < len(sent) < 21_000 * 4 + 20_000  # half the budget, plus the rest
    stored = await ws.ledger.get_message(out.group_id)
    assert stored is not None and "line 0800" in stored.content
    plan = await ws.plan("openai")
    cut = next(m for m in plan.request.messages if m.message_id == out.group_id)
    assert plan.message_label(stored) == f"oversize {len(cut.text)}"


async def test_uncompact_restores_the_exact_prior_request(make, fake_llm):
    ws, orch, _out, before = await compacted(make, fake_llm)
    [summary] = await ws.ledger.summaries(ws.session, "main")
    assert await ws.prompt("openai") != before
    result = await dispatch(ws, f"/context uncompact {summary.id}")
    assert result.ok and "Un-compacted" in result.text
    assert await ws.prompt("openai") == before


async def test_secrets_never_reach_a_summary_or_a_handoff(make, fake_llm, tmp_path):
    ws, orch = await make(
        models=ROOMY,
        compaction={"compaction_trigger_tokens": 800, "verbatim_window_tokens": 300},
    )
    (tmp_path / "creds.env").write_text(f"OPENAI_API_KEY={SECRET}\npassword=hunter22x\n")
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("read_file", {"path": "creds.env"})]),
        Reply(text=f"The key is {SECRET}.\n### STATE\nGoal: rotate {SECRET}"),
    )
    await orch.run_turn("show me the credentials file")
    await orch.wait_background()
    await history(ws, 5, 100)
    fake_llm.enqueue(
        Reply(text="ok"),
        Reply(text=f"<summary>## User Intent\n- read creds: {SECRET}</summary>"),
    )
    await orch.run_turn("continue")
    await orch.wait_background()
    summaries = await ws.ledger.summaries(ws.session, "main")
    handoffs = await ws.ledger.handoffs(ws.session)
    assert summaries and handoffs
    for text in [s.content for s in summaries] + [
        json.dumps(dataclasses.asdict(h)) for h in handoffs
    ]:
        assert SECRET not in text and "hunter22x" not in text
    assert "[REDACTED]" in summaries[0].content


async def test_an_overflow_caused_by_the_summary_layer_says_so(make, fake_llm):
    ws, orch = await make(models=SMALL)
    await ws.ledger.set_window(ws.session, 1)
    [gid] = await history(ws, 1, 3)
    ids = [m.id for m in await ws.ledger.group_messages(ws.session, gid)]
    await ws.ledger.add_summary(ws.session, "main", "lane", ids, "summary " * 6000)
    out = await orch.run_turn("a small question")
    assert "cannot be sent" in out.error and "Largest parts (tokens): summary" in out.error
    assert "The summary layer is the cause" in out.error
    assert "alone is too large" not in out.error


# -- lanes and resume ------------------------------------------------------------------


async def test_rows_that_leave_the_window_fold_into_the_lane_summary(make, fake_llm):
    ws, orch = await make(compaction={"lane_max_messages": 4})
    await ws.ledger.set_window(ws.session, 2)
    gids = await history(ws, 5, 10)
    fake_llm.enqueue(Reply(text="answer"), Reply(text="<summary>LANE-SUMMARY</summary>"))
    await orch.run_turn("latest")
    await orch.compaction_task
    lane_req = fake_llm.last
    assert "**Conversation History:**" in text_of(lane_req) and not lane_req.body.get("tools")
    [summary] = await ws.ledger.summaries(ws.session, "main")
    assert summary.kind == "lane" and "LANE-SUMMARY" in summary.content
    # Groups 0-3 left the 2-group window: 8 messages, more than lane_max_messages.
    rows = await ws.ledger.session_messages(ws.session)
    assert summary.last_message_id == max(m.id for m in rows if m.group_id == gids[3])
    assert {m.status for m in rows} == {"completed"}  # no row changes status
    [log] = await ws.ledger.compaction_log(ws.session)
    assert log.trigger.startswith("lane main:") and log.summary_id == summary.id
    assert "await a summary (> 4)" in log.trigger
    assert await ws.ledger.handoffs(ws.session) == []
    fake_llm.enqueue(Reply(text="next"))
    await orch.run_turn("next")
    assert "LANE-SUMMARY" in fake_llm.last.messages[0]["content"]
    assert "request 0:" not in text_of(fake_llm.last)


async def test_below_the_thresholds_rows_are_listed_until_a_summary_is_due(make, fake_llm):
    """Seed 002's thresholds: no summary call per turn; what left the window and is not
    summarized yet is not sent, but listed in one line with the query that reads it."""
    ws, orch = await make()
    await ws.ledger.set_window(ws.session, 2)
    await history(ws, 3, 5)
    for i in range(4):
        fake_llm.enqueue(Reply(text=f"answer {i}"))
        await orch.run_turn(f"turn {i}")
        await orch.wait_background()
    assert len(fake_llm.chat_requests) == 4  # four answers, no summary call
    assert await ws.ledger.summaries(ws.session) == []
    body = text_of(fake_llm.last)
    for i in range(3):  # the groups that left the window are not sent
        assert f"request {i}:" not in body
    assert "(10 message(s)): not summarized yet; query_db reads them" in body
    plan = await ws.plan("openai")
    assert not plan.summary_due and plan.pending_messages == 10
    places = {
        g.group_id: plan.group_place(g.group_id, g.lane, g.status).place
        for g in await ws.ledger.list_groups(ws.session)
    }
    assert (
        sorted(places.values()).count("waiting") == 5 and list(places.values()).count("window") == 2
    )


async def test_lane_summaries_roll_and_report_their_job(make, fake_llm):
    ws, orch = await make(compaction={"lane_max_messages": 1})
    await ws.ledger.set_window(ws.session, 1)
    await history(ws, 1, 3)
    await ws.ledger.append_user(ws.session, "placeholder", strategy="openai")
    first = await ws.ledger.append_user(
        ws.session, "We agreed on ticket BILL-4412 and a batch of 1750 rows.", strategy="openai"
    )
    fake_llm.enqueue(Reply(text="ok"), Reply(text="<summary>ROLL-ONE</summary>"))
    events = []
    await orch.run_turn("next one", events.append)
    await orch.compaction_task
    jobs = [(e.phase, e.case, e.job) for e in events if isinstance(e, Compaction)]
    assert jobs == [("started", "", "summary"), ("done", "summarize", "summary")]
    [one] = await ws.ledger.summaries(ws.session, "main")
    assert one.kind == "lane" and "ROLL-ONE" in one.content and "BILL-4412" in one.content
    # The next roll rolls over it: anchors carried, prose integrated and replaced.
    fake_llm.enqueue(Reply(text="ok"), Reply(text="<summary>ROLL-TWO</summary>"))
    await orch.run_turn("and another", events.append)
    await orch.compaction_task
    one_kept, two = await ws.ledger.summaries(ws.session, "main")
    assert one_kept == one and two.first_message_id == one.first_message_id
    assert "ROLL-TWO" in two.content and "ROLL-ONE" not in two.content
    assert "BILL-4412" in two.content and "1750 rows" in two.content
    assert "ROLL-ONE" in text_of(fake_llm.last)  # the previous summary was integrated
    # Every group is sent (window, pending) or covered by the summary: no limbo.
    plan = await ws.plan("openai")
    assert plan.head == two
    for g in await ws.ledger.list_groups(ws.session):
        assert plan.group_place(g.group_id, g.lane, g.status).place in ("window", "summary")
    # /context uncompact of the newer summary puts the older one back in the request.
    assert (await dispatch(ws, f"/context uncompact {two.id}")).ok
    assert [x.id for x in await ws.ledger.summaries(ws.session, "main")] == [one.id]
    plan = await ws.plan("openai")
    assert plan.head == one
    assert plan.group_place(first.group_id, "main", "completed").summary_id == one.id
    # The background calls are counted apart (/stats, the gauge).
    purposes = dict((p, c) for p, c, *_ in await ws.ledger.usage_by_purpose(ws.session))
    assert purposes == {"turn": 2, "summary": 2}
    assert "Background model calls" in (await dispatch(ws, "/stats")).text


async def test_lanes_never_leak(make, fake_llm):
    ws, orch = await make()
    fake_llm.enqueue(Reply(text="ALPHA-ANSWER"), Reply(text="BETA-ANSWER"))
    first = await orch.run_turn("alpha question")
    await orch.run_turn("beta question")
    reply = await dispatch(ws, f"/reply {first.group_id} tell me more")
    assert reply.ok and reply.send == "tell me more"
    fake_llm.enqueue(Reply(text="REPLY-LANE-ANSWER"))
    assert reply.reply_to is None  # its own lane: the replied-to group is in its history
    await orch.run_turn(reply.send, reply_to=reply.reply_to)
    body = text_of(fake_llm.last)
    assert f"## Replying to group {first.group_id}" in body and "ALPHA-ANSWER" in body
    assert "tell me more" in body
    for other in ("alpha question", "beta question", "BETA-ANSWER"):
        assert other not in body
    # The quoted reply is its own message, not mixed into the user's words.
    assert fake_llm.last.messages[-1]["content"].endswith("tell me more")
    assert "ALPHA-ANSWER" not in fake_llm.last.messages[-1]["content"]
    assert (await dispatch(ws, "/lane switch main")).ok
    fake_llm.enqueue(Reply(text="main again"))
    await orch.run_turn("back in main")
    body = text_of(fake_llm.last)
    assert "beta question" in body and "BETA-ANSWER" in body
    assert "tell me more" not in body and "REPLY-LANE-ANSWER" not in body


async def test_resume_layer_is_injected_once_after_reopening(tmp_path, fake_llm):
    ws = await open_ws(tmp_path, fake_llm)
    orch = Orchestrator(ws)
    fake_llm.enqueue(Reply(text="started\n### STATE\nGoal: ship the parser"))
    await orch.run_turn("start the parser work")
    await orch.aclose()  # a turn ran: an exit handoff
    await ws.close()
    ws = await open_ws(tmp_path, fake_llm)
    orch = Orchestrator(ws)
    try:
        assert ws.pending_handoff is not None and ws.pending_handoff.reason == "exit"
        shown = await dispatch(ws, "/context show")
        assert "## Resuming" in shown.text
        fake_llm.enqueue(
            Reply(tool_calls=[FakeToolCall("list_directory", {})]),
            Reply(text="resumed"),
            Reply(text="later"),
        )
        await orch.run_turn("where were we?")
        first, second = fake_llm.chat_requests[-2:]
        for request in (first, second):  # every request of the first turn
            system = request.messages[0]["content"]
            assert "## Resuming" in system and "ship the parser" in system
        await orch.run_turn("and then?")
        assert "## Resuming" not in fake_llm.last.messages[0]["content"]
        assert ws.pending_handoff is None
        assert await ws.ledger.latest_handoff(ws.session, unconsumed_only=True) is None
        # A session switch hands off the session left; coming back resumes it once.
        assert (await dispatch(ws, "/session activate other")).ok
        assert (await ws.ledger.latest_handoff("default_session")).reason == "session_switch"
        assert (await dispatch(ws, "/session activate default_session")).ok
        assert ws.pending_handoff is not None and ws.pending_handoff.reason == "session_switch"
    finally:
        await orch.aclose()
        await ws.close()


# -- settings and the budget command -------------------------------------------------------


async def test_context_budget_and_bad_config(make, fake_llm):
    ws, orch = await make(
        models=SMALL,
        compaction={"warn_pct": 95, "reduce_pct": 90},
        context={"layout": "cache"},
    )
    result = await dispatch(ws, "/context budget")
    assert result.ok
    assert "| max input | 5,000 |" in result.text
    assert "| context window (config) | 6,000 |" in result.text
    assert "| summary due | no (trigger 24,000) |" in result.text
    assert "| system | system |" in result.text and "| tool declarations | tools |" in result.text
    assert "[compaction]" in result.text  # the warning, and the defaults are used
    assert result.data.max_input_tokens == 5000 and result.data.level == "ok"
    fake_llm.enqueue(Reply(text="hi"))
    events = []
    await orch.run_turn("hello", events.append)
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and "warn_pct" in notices[0]
    fake_llm.enqueue(Reply(text="again"))
    events.clear()
    await orch.run_turn("hello again", events.append)
    assert not [e for e in events if isinstance(e, Notice)]


async def test_a_reply_from_a_topic_lane_stays_in_the_topic(make, fake_llm):
    """Seed 002: topic > reply > root. /reply from inside a topic keeps the topic's
    history and quotes the replied-to group for that turn only."""
    ws, orch = await make()
    fake_llm.enqueue(Reply(text="ALPHA-ANSWER"))
    first = await orch.run_turn("alpha question")
    assert (await dispatch(ws, "/lane new db")).ok
    fake_llm.enqueue(Reply(text="TOPIC-ANSWER"))
    await orch.run_turn("topic question")
    reply = await dispatch(ws, f"/reply {first.group_id} tell me more")
    assert reply.ok and "in lane topic:db" in reply.text
    assert (await ws.current()).lane == "topic:db"
    fake_llm.enqueue(Reply(text="REPLY-ANSWER"))
    assert reply.reply_to == first.group_id
    await orch.run_turn(reply.send, reply_to=reply.reply_to)
    body = text_of(fake_llm.last)
    assert f"## Replying to group {first.group_id}" in body and "ALPHA-ANSWER" in body
    assert "topic question" in body and "TOPIC-ANSWER" in body  # still in the topic
    assert "alpha question" not in body
    assert fake_llm.last.messages[-1]["content"].endswith("tell me more")
    # The quote was for that turn: neither the next request nor its preview has it.
    assert "## Replying to group" not in render_prompt(await ws.prompt("openai"))
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("and then?")
    assert "## Replying to group" not in text_of(fake_llm.last)


# -- derived layers follow every edit ------------------------------------------------------


async def test_after_undo_the_resume_layer_never_brings_the_undone_goal_back(
    tmp_path, fake_llm, monkeypatch
):
    ws = await open_ws(tmp_path, fake_llm)
    orch = Orchestrator(ws)
    fake_llm.enqueue(Reply(text="noted\n### STATE\nGoal: KEEP-GOAL"))
    await orch.run_turn("the real task")
    fake_llm.enqueue(Reply(text="on it\n### STATE\nGoal: UNDONE-GOAL"))
    await orch.run_turn("a wrong turn")
    await orch.aclose()
    await ws.close()  # the exit handoff names UNDONE-GOAL
    ws = await open_ws(tmp_path, fake_llm)
    orch = Orchestrator(ws)
    try:
        assert ws.pending_handoff is not None and ws.pending_handoff.task == "UNDONE-GOAL"
        for edit in ("/undo",):
            assert (await dispatch(ws, edit)).ok
        shown = (await dispatch(ws, "/context show")).text
        assert "## Resuming" in shown and "KEEP-GOAL" in shown and "UNDONE-GOAL" not in shown
        fake_llm.enqueue(Reply(text="resumed"))
        await orch.run_turn("where were we?")
        body = text_of(fake_llm.last)
        assert "## Resuming" in body and "UNDONE-GOAL" not in body and "a wrong turn" not in body
    finally:
        await orch.aclose()
        await ws.close()


@pytest.mark.parametrize("edit", ["/context drop {gid}", "/message remove {gid}"])
async def test_an_edit_under_a_summary_leaves_no_trace_in_any_layer(make, fake_llm, edit):
    ws, orch = await make(compaction={"lane_max_messages": 3})
    await ws.ledger.set_window(ws.session, 1)
    fake_llm.enqueue(Reply(text="first answer"))
    await orch.run_turn("keep this")
    await orch.wait_background()
    fake_llm.enqueue(Reply(text="plan noted"))
    secret = await orch.run_turn("the PLAN-X we will abandon")
    await orch.wait_background()
    # The lane summary of the two groups that left the window mentions PLAN-X.
    fake_llm.enqueue(Reply(text="ok"), Reply(text="<summary>talked about PLAN-X</summary>"))
    await orch.run_turn("third")
    await orch.wait_background()
    [rolled] = await ws.ledger.summaries(ws.session)
    assert "PLAN-X" in rolled.content and "PLAN-X" in render_prompt(await ws.prompt("openai"))
    assert (await dispatch(ws, edit.format(gid=secret.group_id))).ok
    # At once: the summary holding it is out of date, nothing of it is sent.
    assert await ws.ledger.summaries(ws.session) == []
    text = render_prompt(await ws.prompt("openai"))
    # The rest left the strict window: one line says where it is, until a summary.
    assert "PLAN-X" not in text and "keep this" not in text
    assert "not summarized yet; query_db reads them" in text
    # The upkeep after the edit makes a new summary from today's rows only.
    fake_llm.enqueue(Reply(text="<summary>CLEAN-SUMMARY</summary>"))
    await orch.upkeep()
    await orch.wait_background()
    [fresh] = await ws.ledger.summaries(ws.session)
    assert "CLEAN-SUMMARY" in fresh.content and "PLAN-X" not in fresh.content
    assert "PLAN-X" not in text_of(fake_llm.last)  # the summary request did not see it
    fake_llm.enqueue(Reply(text="fine"))
    await orch.run_turn("go on")
    assert "PLAN-X" not in text_of(fake_llm.last)


async def test_a_headless_ask_returns_within_seconds_whatever_the_background_calls_do(
    tmp_path, fake_llm
):
    """The answer is printed, then the lane summary's call hangs: `ask` does not wait
    through a retry ladder; the summary falls back to the extractive one."""
    import threading
    import time

    from slop_tui.orchestrator import run_headless_turn

    ws = await open_ws(tmp_path, fake_llm, compaction={"lane_max_messages": 1})
    gate = threading.Event()
    try:
        await ws.ledger.set_window(ws.session, 1)
        await history(ws, 2, 5)
        fake_llm.enqueue(Reply(text="the answer"), Reply(text="never", gate=gate))
        start = time.monotonic()
        outcome = await run_headless_turn(ws, "a question")
        took = time.monotonic() - start
        assert outcome.text == "the answer"
        assert took < 10  # BACKGROUND_GRACE (3 s) and a margin, not a retry ladder
        [summary] = await ws.ledger.summaries(ws.session)
        assert summary.content.startswith("(Extractive summary")
    finally:
        gate.set()
        await ws.close()


async def test_a_shed_file_leaves_the_file_list_and_file_add_puts_it_back(make, fake_llm, tmp_path):
    ws, orch = await make(models=SMALL, compaction={"enabled": False})
    (tmp_path / "big.txt").write_text("a line of a large file\n" * 700)  # ~4,000 tokens
    assert (await dispatch(ws, "/file add big.txt")).ok
    fake_llm.enqueue(Reply(text="answered"), Reply(text="again"))
    events = []
    out = await orch.run_turn("a question", events.append)
    assert out.error is None and "a line of a large file" not in text_of(fake_llm.last)
    [notice] = [e for e in events if isinstance(e, Notice) and "big.txt" in e.text]
    assert "left the /file list (/file add big.txt puts them back)" in notice.text
    listed = await dispatch(ws, "/file list")
    assert "big.txt" not in listed.text  # not shed again every turn: it is gone
    await orch.run_turn("another")  # no file, no shedding, no notice
    assert [f.path for f in await ws.ledger.context_files(ws.session)] == []
    back = await dispatch(ws, "/file add big.txt")
    assert back.ok and "Added big.txt" in back.text
