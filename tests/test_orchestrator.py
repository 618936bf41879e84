"""Whole turns through the real SDKs against the loopback wire-format server."""

from __future__ import annotations

import asyncio
import json

import pytest

from slop_tui.commands import dispatch
from slop_tui.orchestrator import (
    ErrorEvent,
    Notice,
    Orchestrator,
    TextChunk,
    ToolResultEvent,
    TurnFinished,
)
from slop_tui.providers.retry import RetryPolicy
from tests.fakeserver import FakeToolCall, Reply
from tests.workspace_fixtures import open_workspace


def env_for(fake_llm) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "x",
        "OPENAI_BASE_URL": fake_llm.openai_base_url,
        "GEMINI_API_KEY": "x",
        "GEMINI_BASE_URL": fake_llm.gemini_base_url,
    }


@pytest.fixture
async def ws(tmp_path, fake_llm):
    (tmp_path / "README.md").write_text("# Demo project\nline two\n")
    w = await open_workspace(tmp_path, env=env_for(fake_llm))
    yield w
    await w.close()


@pytest.fixture
async def orch(ws):
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)

    o = Orchestrator(ws, approve="reads", retry_policy=RetryPolicy(), sleep=fake_sleep)
    o.delays = delays
    yield o
    await o.aclose()


async def test_text_turn_persists_state_and_usage(ws, orch, fake_llm):
    fake_llm.enqueue(
        Reply(
            text="Hello!\n\n### STATE\nGoal: greet\nTechnical Anchors: port 8080",
            prompt_tokens=42,
            completion_tokens=7,
            cached_tokens=30,
        )
    )
    events = []
    out = await orch.run_turn("hi there", events.append)
    assert out.error is None and out.text.startswith("Hello!")
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == out.text
    msgs = await ws.ledger.session_messages(ws.session)
    assert [(m.role, m.status) for m in msgs] == [("user", "completed"), ("assistant", "completed")]
    state = await ws.ledger.current_state(ws.session)
    assert state.group_id == out.group_id and "port 8080" in state.content
    [usage] = await ws.ledger.usage_totals(ws.session)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (42, 7, 30)
    sent = fake_llm.last.messages
    assert sent[0]["role"] == "system" and "### STATE" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "## Begin Conversation History\nhi there"}


async def test_parallel_tool_calls_then_answer(ws, orch, fake_llm):
    fake_llm.enqueue(
        Reply(
            text="Looking.",
            tool_calls=[
                FakeToolCall("list_directory", {"path": "."}),
                FakeToolCall("read_file", {"path": "README.md"}),
            ],
        ),
        Reply(text="Done.\n### STATE\nGoal: read"),
    )
    events = []
    out = await orch.run_turn("what is here?", events.append)
    assert out.error is None
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.name for r in results] == ["list_directory", "read_file"] and all(
        r.ok for r in results
    )
    second = fake_llm.chat_requests[-1].messages
    tool_msgs = [m for m in second if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_0", "call_1"]
    assert "1: # Demo project" in tool_msgs[1]["content"]
    assistant = [m for m in second if m["role"] == "assistant" and "tool_calls" in m][0]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == [
        "list_directory",
        "read_file",
    ]
    rows = await ws.ledger.session_messages(ws.session)
    assert [r.role for r in rows] == ["user", "assistant", "tool", "tool", "assistant"]


async def test_three_iteration_loop_and_scratchpad_signal(ws, orch, fake_llm):
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("query_db", {"sql": "SELECT COUNT(*) AS n FROM messages"})]),
        Reply(
            tool_calls=[FakeToolCall("manage_scratchpad", {"action": "append", "content": "- a\n"})]
        ),
        Reply(tool_calls=[FakeToolCall("manage_scratchpad", {"action": "read"})]),
        Reply(text="ok\nSCRATCHPAD:## Plan\n- [x] a\n### STATE\nGoal: loop"),
    )
    out = await orch.run_turn("loop please")
    assert out.error is None
    assert len(fake_llm.chat_requests) == 4
    assert (await ws.current()).scratchpad == "## Plan\n- [x] a"
    reads = [m for m in fake_llm.chat_requests[3].messages if m["role"] == "tool"]
    assert '{"n": 2}' in reads[0]["content"]  # the prompt and the call row
    assert "- a" in reads[2]["content"]


async def test_max_iterations_stops_clearly(ws, orch, fake_llm, tmp_path):
    object.__setattr__(ws.config, "tools", {"max_iterations": 2})
    fake_llm.enqueue(*[Reply(tool_calls=[FakeToolCall("list_directory", {})]) for _ in range(2)])
    events = []
    out = await orch.run_turn("spin", events.append)
    assert out.error and "2 tool-loop iterations" in out.error
    assert isinstance(events[-1], ErrorEvent) and events[-1].error_kind == "max_iterations"


async def test_provider_switch_isolates_tool_history(ws, orch, fake_llm):
    fake_llm.enqueue(
        Reply(text="calling", tool_calls=[FakeToolCall("list_directory", {})]),
        Reply(text="openai answer"),
    )
    await orch.run_turn("first on openai")
    assert (await dispatch(ws, "/provider gemini")).ok
    fake_llm.enqueue(Reply(text="gemini answer"))
    await orch.run_turn("now gemini")
    body = fake_llm.last.body
    text = json.dumps(body)
    assert "functionCall" not in text and "function_call" not in text
    assert "functionResponse" not in text and "function_response" not in text
    tree, ack, *rest = body["contents"]  # the file tree pair, then the conversation
    assert tree["parts"][0]["text"].startswith("## Repository Files") and ack["role"] == "model"
    assert [c["role"] for c in rest] == ["user", "model", "user"]
    assert "openai answer" in text and "first on openai" in text
    switch = await dispatch(ws, "/provider openai")
    assert switch.ok
    fake_llm.enqueue(Reply(text="back"))
    await orch.run_turn("back to openai")
    msgs = fake_llm.last.messages
    assert any(m.get("tool_calls") for m in msgs) and any(m["role"] == "tool" for m in msgs)
    assert any("gemini answer" in (m.get("content") or "") for m in msgs)


async def test_retries_with_retry_after_then_succeeds(ws, orch, fake_llm):
    fake_llm.enqueue(
        Reply(status=429, error_message="slow down", headers={"retry-after": "3"}),
        Reply(text="fine"),
    )
    events = []
    out = await orch.run_turn("hello", events.append)
    assert out.error is None and out.text == "fine"
    assert orch.delays and orch.delays[0] >= 3
    assert any(isinstance(e, Notice) and "Retrying" in e.text for e in events)


async def test_exhausted_retries_leave_a_consistent_ledger(ws, orch, fake_llm):
    fake_llm.enqueue(*[Reply(status=500, error_message="boom") for _ in range(7)])
    events = []
    out = await orch.run_turn("hello", events.append)
    assert out.error and isinstance(events[-1], ErrorEvent)
    assert orch.delays == [2, 4, 8, 16, 32, 64]
    rows = await ws.ledger.session_messages(ws.session)
    assert [(r.role, r.content) for r in rows] == [("user", "hello")]
    fake_llm.enqueue(Reply(text="recovered"))
    assert (await orch.run_turn("again")).text == "recovered"


async def test_mid_stream_disconnect_keeps_partial_as_interrupted(ws, orch, fake_llm):
    fake_llm.enqueue(Reply(text="partial answer that is cut", chunk_size=4, disconnect_after=4))
    out = await orch.run_turn("tell me")
    assert out.error
    rows = await ws.ledger.session_messages(ws.session)
    assert rows[-1].status == "interrupted" and rows[-1].content
    fake_llm.enqueue(Reply(text="whole"))
    await orch.run_turn("again")
    sent = json.dumps(fake_llm.last.messages)
    assert rows[-1].content not in sent  # shown, never replayed


async def test_bad_request_drops_last_tool_exchange_and_retries_once(ws, orch, fake_llm):
    fake_llm.enqueue(Reply(tool_calls=[FakeToolCall("list_directory", {})]), Reply(text="one"))
    await orch.run_turn("first")
    fake_llm.enqueue(Reply(status=400, error_message="tool history broken"), Reply(text="fixed"))
    events = []
    out = await orch.run_turn("second", events.append)
    assert out.text == "fixed"
    assert any(
        isinstance(e, Notice) and "dropped the most recent tool exchange" in e.text for e in events
    )
    statuses = [(r.role, r.status) for r in await ws.ledger.session_messages(ws.session)]
    assert ("assistant", "dropped") in statuses and ("tool", "dropped") in statuses
    assert not any(m["role"] == "tool" for m in fake_llm.last.messages)


async def test_cancel_mid_stream(ws, orch, fake_llm):
    fake_llm.enqueue(Reply(text="a slow streaming answer", chunk_size=2, delay=0.05))
    task = asyncio.create_task(orch.run_turn("slow"))
    for _ in range(200):
        await asyncio.sleep(0.01)
        rows = await ws.ledger.session_messages(ws.session)
        if rows and fake_llm.requests:
            break
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rows = await ws.ledger.session_messages(ws.session)
    assert rows[0].content == "slow"
    assert rows[-1].status == "interrupted" and rows[-1].content
    fake_llm.enqueue(Reply(text="next works"))
    assert (await orch.run_turn("next")).text == "next works"


async def test_write_tool_needs_approval(ws, orch, fake_llm, tmp_path):
    asked = []

    async def deny(call):
        asked.append(call.name)
        return "deny"

    orch.approver = deny
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("write_file", {"path": "x.txt", "content": "hi"})]),
        Reply(text="ok"),
    )
    events = []
    await orch.run_turn("write it", events.append)
    assert asked == ["write_file"] and not (tmp_path / "x.txt").exists()
    [res] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert not res.ok and "did not approve" in res.text

    async def allow_session(call):
        asked.append(call.name)
        return "allow_session"

    orch.approver = allow_session
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("write_file", {"path": "x.txt", "content": "hi"})]),
        Reply(tool_calls=[FakeToolCall("write_file", {"path": "y.txt", "content": "yo"})]),
        Reply(text="ok"),
    )
    await orch.run_turn("write both")
    assert (tmp_path / "x.txt").read_text() == "hi" and (tmp_path / "y.txt").read_text() == "yo"
    assert asked == ["write_file", "write_file"]  # asked once, then allowed for the session


async def test_rebuild_state_asks_the_model(ws, orch, fake_llm):
    fake_llm.enqueue(Reply(text="answer without state"))
    await orch.run_turn("do a thing")
    fake_llm.enqueue(Reply(text="### STATE\nGoal: rebuilt by model"))
    result = await dispatch(ws, "/context rebuild")
    assert result.ok and "rebuilt by the model" in result.text
    assert "rebuilt by model" in (await ws.ledger.current_state(ws.session)).content
    assert fake_llm.last.body.get("tools") in (None, [])


async def test_context_show_json_is_the_request_body(ws, orch, fake_llm):
    fake_llm.enqueue(Reply(text="first"))
    await orch.run_turn("first")
    shown = await dispatch(ws, "/context show --json")
    prompt = await ws.prompt("openai")
    provider, model = await orch.provider()
    assert shown.data == provider.request_body(prompt, model)
    assert shown.data["messages"][-1]["content"].endswith("first")


async def test_turn_finished_event(ws, orch, fake_llm):
    fake_llm.enqueue(Reply(text="x\n### STATE\nGoal: y"))
    events = []
    await orch.run_turn("z", events.append)
    assert isinstance(events[-1], TurnFinished) and events[-1].state_updated


async def test_token_learner_gets_the_whole_request_with_tool_declarations(ws, orch, fake_llm):
    sent, learned = [], []
    plan_of = ws.plan

    async def recording_plan(strategy=None, **options):
        p = await plan_of(strategy, **options)
        sent.append(p.request)
        return p

    async def learn(estimated, reported):
        learned.append((estimated, reported))

    ws.plan, ws.learn_tokens = recording_plan, learn
    fake_llm.enqueue(Reply(text="ok", prompt_tokens=4321))
    await orch.run_turn("count me")
    [(estimated, reported)] = learned
    assert reported == 4321
    assert estimated == sent[0].request_tokens == sent[0].total_tokens + sent[0].tool_tokens
    assert sent[0].tool_tokens > 0


async def test_headless_turn_waits_for_background_compaction(ws, fake_llm):
    from slop_tui.orchestrator import run_headless_turn
    from slop_tui.records import NewMessage

    object.__setattr__(
        ws.config, "compaction", {"compaction_trigger_tokens": 200, "verbatim_window_tokens": 50}
    )
    for i in range(4):
        user = await ws.ledger.append_user(ws.session, f"question {i} " + "words " * 60)
        await ws.ledger.append(ws.session, user.group_id, [NewMessage("assistant", f"answer {i}")])
    fake_llm.enqueue(Reply(text="the answer"), Reply(text="<summary>short summary</summary>"))
    outcome = await run_headless_turn(ws, "one more")
    assert outcome.error is None and outcome.text == "the answer"
    [log] = await ws.ledger.compaction_log(ws.session)
    assert log.case_kind == "summarize"
    done = [e for e in outcome.events_json() if e["kind"] == "compaction" and e["phase"] == "done"]
    assert len(done) == 1 and done[0]["tokens_after"] < done[0]["tokens_before"]
    # The compaction's handoff (the exit handoff comes after it when the turn's
    # orchestrator closes).
    assert "compaction" in [h.reason for h in await ws.ledger.handoffs(ws.session)]


async def test_the_configured_query_time_limit_reaches_query_db(tmp_path, fake_llm):
    """`[tools] query_time_limit` in config.toml is the limit the model's query runs under."""
    (tmp_path / "limit.toml").write_text("[tools]\nquery_time_limit = 0.3\n")
    env = {**env_for(fake_llm), "SLOP_CONFIG": str(tmp_path / "limit.toml")}
    ws = await open_workspace(tmp_path, env=env)
    orch = Orchestrator(ws, approve="reads", retry_policy=RetryPolicy())
    bomb = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    try:
        assert ws.config.query_time_limit == 0.3
        fake_llm.enqueue(
            Reply(tool_calls=[FakeToolCall("query_db", {"sql": bomb})]),
            Reply(text="done"),
        )
        await orch.run_turn("count forever")
        rows = await ws.ledger.session_messages(ws.session)
        result = next(m for m in rows if m.role == "tool")
        assert "stopped at the 0.3 s time limit" in result.content
    finally:
        await orch.aclose()
        await ws.close()
