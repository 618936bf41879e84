"""The engine against the seeds' contracts, through whole turns of the real OpenAI SDK
against the loopback fake server: each test asserts what the model receives.

- the strict rolling window (seed 000): only the last N groups, the new prompt's
  among them; older rows through a summary, query_db, or one line of index;
- elision keeps every result of the newest tool-call message, and stays across turns;
- the user's rules and stated values survive a summary word for word, with their
  subject; a later value wins in summaries and next to STATE;
- edits of values are journalled: /undo and /redo take each back and make it again.
"""

from __future__ import annotations

import json

import pytest

from slop_tui.commands import dispatch
from slop_tui.orchestrator import Orchestrator
from slop_tui.providers.retry import RetryPolicy
from slop_tui.records import NewMessage
from tests.fakeserver import FakeToolCall, Reply
from tests.test_continuity_turns import open_ws


@pytest.fixture(autouse=True)
def _no_git(tmp_path, monkeypatch):
    # Handoffs look for a repository; keep them from finding one above tmp_path.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))


@pytest.fixture
async def make(tmp_path, fake_llm):
    """make(**config) -> (ws, orch) on a workspace of the fake model; closed at the end."""
    opened: list = []

    async def _make(**kwargs):
        ws = await open_ws(tmp_path, fake_llm, **kwargs)

        async def no_sleep(_seconds: float) -> None:
            return None

        orch = Orchestrator(ws, retry_policy=RetryPolicy(max_retries=0), sleep=no_sleep)
        opened.append((ws, orch))
        return ws, orch

    yield _make
    for ws, orch in opened:
        await orch.aclose()
        await ws.close()


def body_of(request) -> str:
    return json.dumps(request.body, ensure_ascii=False)


def system_of(request) -> str:
    return request.messages[0]["content"]


ENGINE_HEADS = ("## Context for the Current Request", "## Pinned Context")


def history_of(request) -> list[dict]:
    """The conversation messages: no system text, no engine context message."""
    return [
        m
        for m in request.messages[1:]
        if not (m["role"] == "user" and str(m["content"]).startswith(ENGINE_HEADS))
    ]


def groups_sent(request) -> list[str]:
    return [m["content"] for m in history_of(request) if m["role"] == "user"]


# -- 1. the strict window ----------------------------------------------------------------


async def test_the_next_request_holds_the_last_n_groups_and_one_line_for_the_rest(make, fake_llm):
    ws, orch = await make()
    for i in range(6):
        fake_llm.enqueue(Reply(text=f"answer {i}"))
        await orch.run_turn(f"question {i}")
        await orch.wait_background()
    assert (await dispatch(ws, "/context window 3")).ok
    fake_llm.enqueue(Reply(text="answer 6"))
    await orch.run_turn("question 6")
    sent = fake_llm.last
    users = groups_sent(sent)
    # The new prompt's group is one of the three: groups 5, 6 and the new one.
    assert len(users) == 3 and "question 4" in users[0] and "question 6" in users[-1]
    assert len(history_of(sent)) == 5  # 3 prompts, 2 answers
    text = body_of(sent)
    for i in range(4):
        assert f"question {i}" not in text and f"answer {i}" not in text
    # One line says what is not summarized yet and how to read it.
    system = system_of(sent)
    assert "## Summary of earlier conversation" in system
    assert "groups 1–7 (8 message(s)): not summarized yet; query_db reads them" in system
    assert "WHERE id BETWEEN 1 AND 8 AND status != 'dropped'" in system


async def test_rows_that_left_the_window_reach_the_model_through_the_summary_when_due(
    make, fake_llm
):
    ws, orch = await make(compaction={"lane_max_messages": 3})
    await ws.ledger.set_window(ws.session, 1)
    for i in range(3):
        fake_llm.enqueue(Reply(text=f"answer {i}"))
        if i == 2:  # two groups (4 messages) left the window: a lane summary is due
            fake_llm.enqueue(Reply(text="<summary>## User Intent\n- LANE-SUMMARY</summary>"))
        await orch.run_turn(f"The value number {i} is {1000 + i}.")
        await orch.wait_background()
    fake_llm.enqueue(Reply(text="fine"))
    await orch.run_turn("and now?")
    system = system_of(fake_llm.last)
    assert "LANE-SUMMARY" in system
    # The values of the summarized groups are anchors with their subject.
    assert "The value number 0 is 1000." in system and "The value number 1 is 1001." in system
    assert "not summarized yet" in system  # group 3 left the window after the summary
    assert [u for u in groups_sent(fake_llm.last)] == ["## Begin Conversation History\nand now?"]


# -- 2. elision ----------------------------------------------------------------------------


async def test_elision_keeps_a_parallel_batch_whole_and_stays_across_turns(
    make, fake_llm, tmp_path
):
    ws, orch = await make(
        models={"fake-model": {"context_window": 12000, "max_output": 2000}},
        compaction={"keep_recent_messages": 50, "checkpoint_interval": 0},
        truncation={"full_fidelity_count": 20, "inactive_limit": 5000},
    )
    body = "".join(
        f"line {n:03d} of a file that is read whole, padded to sixty\n" for n in range(64)
    )
    names = [f"f{i}.txt" for i in range(7)]
    for name in names:
        (tmp_path / name).write_text(body)
    fake_llm.enqueue(
        *[Reply(tool_calls=[FakeToolCall("read_file", {"path": n})]) for n in names[:3]],
        Reply(tool_calls=[FakeToolCall("read_file", {"path": n}) for n in names[3:]]),
        Reply(text="read them all"),
    )
    out = await orch.run_turn("read the seven files")
    assert out.error is None
    last = fake_llm.last.messages
    results = [m for m in last if m["role"] == "tool"]
    assert len(results) == 7
    # The four results of the newest assistant message are whole; older ones elided.
    assert all("line 063" in r["content"] for r in results[3:])
    elided = [r["tool_call_id"] for r in results if "tool result elided" in r["content"]]
    assert elided and set(elided) <= {r["tool_call_id"] for r in results[:3]}
    kept = await ws.elided_results()
    assert len(kept) == len(elided)
    # The next turn starts with them still elided (monotonic across turns).
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("and next?")
    tools = {m["tool_call_id"]: m["content"] for m in fake_llm.last.messages if m["role"] == "tool"}
    assert all("tool result elided" in tools[c] for c in elided)
    # Until the user restores them.
    result = await dispatch(ws, "/context unelide")
    assert result.ok and f"{len(elided)} elided tool result(s)" in result.text
    assert not (await dispatch(ws, "/context unelide 999999")).ok
    assert await ws.elided_results() == frozenset()
    # The request is planned with them whole again (the guard ladder may elide anew).
    plan = await ws.plan("openai")
    assert not any(m.tier == "elided" for m in plan.assembled.messages)


# -- 3 and 4. rules, values, corrections -------------------------------------------------

RULES = [
    "The staging port is 8443.",
    "Keep the API backwards compatible.",
    "Only use the stdlib for HTTP.",
    "No new dependencies please.",
    "Leave the tests folder alone.",
    "I would rather you did not touch the CI config.",
    "Tests have to pass before merging.",
    "You may not use threads here.",
]


async def test_rules_and_values_survive_the_summary_with_their_subject(make, fake_llm):
    ws, orch = await make(compaction={"lane_max_messages": 1})
    await ws.ledger.set_window(ws.session, 1)
    fake_llm.enqueue(Reply(text="noted"))
    await orch.run_turn(" ".join(RULES) + " Also the release is on March 3.")
    await orch.wait_background()
    fake_llm.enqueue(Reply(text="ok"), Reply(text="<summary>## User Intent\n- rules</summary>"))
    await orch.run_turn("Heads up: the release moved to March 17.")
    await orch.wait_background()
    fake_llm.enqueue(Reply(text="ok"), Reply(text="<summary>## User Intent\n- more</summary>"))
    await orch.run_turn("Now look at the parser.")
    await orch.wait_background()
    fake_llm.enqueue(Reply(text="fine"))
    await orch.run_turn("what did I say?")
    system = system_of(fake_llm.last)
    assert "## Anchors kept verbatim" in system
    for sentence in RULES:
        assert sentence in system, sentence
    # The later value wins: the correction is kept, the earlier value is not.
    assert "the release moved to March 17." in system and "March 3" not in system


async def test_a_waiting_correction_replaces_the_summary_anchor_it_corrects(make, fake_llm):
    ws, orch = await make()
    await ws.ledger.set_window(ws.session, 1)
    fake_llm.enqueue(Reply(text="noted"))
    await orch.run_turn("The webhook retry window is 45 minutes.")
    rows = [m.id for m in await ws.ledger.session_messages(ws.session)]
    anchors = "## Anchors kept verbatim\n- [value/1] The webhook retry window is 45 minutes.\n"
    await ws.ledger.add_summary(ws.session, "main", "lane", rows, "OLD-SUMMARY\n\n" + anchors)
    fake_llm.enqueue(Reply(text="noted"))
    await orch.run_turn("Correction on the webhook retry window: it is 90 minutes now.")
    await orch.wait_background()
    # The correction left the window and waits for a summary (due at once): the request
    # lists it and no longer presents the earlier value beside it.
    fake_llm.enqueue(Reply(text="ok"), Reply(text="<summary>NEW-SUMMARY</summary>"))
    await orch.run_turn("How long is the retry window?")
    asked = [r for r in fake_llm.chat_requests if "How long is the retry" in body_of(r)]
    system = system_of(asked[0])
    assert "OLD-SUMMARY" in system and "45 minutes" not in system
    assert (
        "- corrected there (the later value wins): Correction on the webhook retry window: "
        "it is 90 minutes now." in system
    )
    await orch.wait_background()
    # The summary made then keeps the later value alone.
    new = (await ws.ledger.summaries(ws.session))[-1]
    assert "NEW-SUMMARY" in new.content and "90 minutes" in new.content
    assert "45 minutes" not in new.content


async def test_a_correction_after_the_state_is_flagged_next_to_it(make, fake_llm):
    ws, orch = await make()
    fake_llm.enqueue(
        Reply(text="Planned.\n\n### STATE\nGoal: ship\nTechnical Anchors: release on March 3\n")
    )
    await orch.run_turn("Plan the release.")
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("Actually the release moved to March 17.")
    system = system_of(fake_llm.last)
    assert "release on March 3" in system  # the model's STATE, verbatim
    assert (
        "Corrected by the user since this STATE was written (the later value wins):\n"
        "- Actually the release moved to March 17." in system
    )
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("Run the tests.")
    assert "Corrected by the user" in system_of(fake_llm.last)  # until a new STATE


# -- 7. personality, and another lane's summary when named ---------------------------


async def test_personality_by_precedence_and_named_lanes_only(make, fake_llm):
    ws, orch = await make()
    assert (await dispatch(ws, "/personality set --global Be KIND-GLOBAL.")).ok
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("one")
    system = system_of(fake_llm.last)
    assert "## Personality (from the global setting)\nBe KIND-GLOBAL." in system
    # The session's personality wins over the global one; the lane's over both.
    assert (await dispatch(ws, "/personality set Be TERSE-SESSION.")).ok
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("two")
    system = system_of(fake_llm.last)
    assert "(from the session)\nBe TERSE-SESSION." in system and "KIND-GLOBAL" not in system
    # It comes after the policy layers, before STATE and the history (seed 002's order).
    assert system.index("## Conversation History Guidelines") < system.index("## Personality")
    assert (await dispatch(ws, "/lane new deploy")).ok
    assert (await dispatch(ws, "/personality set --lane Be BRIEF-LANE.")).ok
    # A summary of the deploy lane, then back to main.
    await ws.ledger.set_window(ws.session, 1)
    for text in ("deploy step one", "deploy step two"):
        fake_llm.enqueue(Reply(text="done"))
        await orch.run_turn(text)
    rows = [m.id for m in await ws.ledger.session_messages(ws.session) if m.lane == "topic:deploy"]
    await ws.ledger.add_summary(ws.session, "topic:deploy", "lane", rows[:2], "DEPLOY-SUMMARY")
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("and?")
    assert "(from the lane topic:deploy)\nBe BRIEF-LANE." in system_of(fake_llm.last)
    assert (await dispatch(ws, "/lane switch main")).ok
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("what about the parser?")
    system = system_of(fake_llm.last)
    assert "TERSE-SESSION" in system and "BRIEF-LANE" not in system
    assert "DEPLOY-SUMMARY" not in system  # another lane: not retrieved by default
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("What did we settle in the deploy lane?")
    system = system_of(fake_llm.last)
    assert "### Lane topic:deploy (named in the current request)" in system
    assert "DEPLOY-SUMMARY" in system


# -- 5. edits of values are journalled -----------------------------------------------------


async def test_undo_and_redo_take_back_and_make_again_each_edit_of_a_value(make, fake_llm):
    ws, orch = await make()
    fake_llm.enqueue(Reply(text="Done.\n\n### STATE\nGoal: MODEL-GOAL\n"))
    await orch.run_turn("start")
    # /state set, then /undo: the model's STATE is back, not the turn undone.
    assert (await dispatch(ws, "/state set Goal: HAND-GOAL")).ok
    undo = await dispatch(ws, "/undo")
    assert undo.ok and "the STATE set by hand" in undo.text
    # The way back is named once, by the announcement (the key, or the command).
    assert undo.announcement().count("/redo") == 1, undo.announcement()
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("next")
    system = system_of(fake_llm.last)
    assert "MODEL-GOAL" in system and "HAND-GOAL" not in system
    assert len(await ws.ledger.session_messages(ws.session)) == 4  # no turn was undone
    # A scratchpad write by command, and one by the model's signal.
    assert (await dispatch(ws, "/session scratchpad set - [ ] PAD-ONE")).ok
    fake_llm.enqueue(Reply(text="Sure.\nSCRATCHPAD:\n- [ ] PAD-TWO"))
    await orch.run_turn("plan it")
    assert (await ws.current()).scratchpad.strip() == "- [ ] PAD-TWO"
    assert "the scratchpad write" in (await dispatch(ws, "/undo")).text
    assert (await ws.current()).scratchpad.strip() == "- [ ] PAD-ONE"
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("go")
    assert "PAD-ONE" in system_of(fake_llm.last) and "PAD-TWO" not in system_of(fake_llm.last)
    # /redo makes the undone write again (a new turn cleared the stack: undo once more).
    await dispatch(ws, "/session scratchpad set - [ ] PAD-THREE")
    await dispatch(ws, "/undo")
    assert (await ws.current()).scratchpad.strip() == "- [ ] PAD-ONE"
    redo = await dispatch(ws, "/redo")
    assert redo.ok and "Made again" in redo.text
    assert (await ws.current()).scratchpad.strip() == "- [ ] PAD-THREE"


async def test_uncompact_and_automatic_drops_are_journalled(make, fake_llm):
    ws, orch = await make(models={"fake-model": {"context_window": 6000, "max_output": 1000}})
    # /context uncompact, then /undo: the summary is in the request again.
    await ws.ledger.set_window(ws.session, 1)
    old = await ws.ledger.append_user(ws.session, "old question", strategy="openai")
    await ws.ledger.append(ws.session, old.group_id, [NewMessage("assistant", "old answer")])
    ids = [m.id for m in await ws.ledger.group_messages(ws.session, old.group_id)]
    summary = await ws.ledger.add_summary(ws.session, "main", "lane", ids, "SUMMARY-OLD")
    assert (await dispatch(ws, f"/context uncompact {summary.id}")).ok
    assert "SUMMARY-OLD" not in (await ws.prompt("openai")).system_text
    assert "the un-compaction" in (await dispatch(ws, "/undo")).text
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("two")
    assert "SUMMARY-OLD" in system_of(fake_llm.last)
    # A prompt too large to ever fit is set aside by the engine: /undo brings it back.
    before = len(fake_llm.chat_requests)
    out = await orch.run_turn("huge " * 30_000)
    assert out.error and "set aside" in out.error and len(fake_llm.chat_requests) == before
    group = (await ws.ledger.session_messages(ws.session))[-1].group_id
    rows = await ws.ledger.group_messages(ws.session, group)
    assert {r.status for r in rows} == {"dropped"}
    assert "the drop of group" in (await dispatch(ws, "/undo")).text
    rows = await ws.ledger.group_messages(ws.session, group)
    assert "dropped" not in {r.status for r in rows}
    assert (await dispatch(ws, "/redo")).ok
    rows = await ws.ledger.group_messages(ws.session, group)
    assert {r.status for r in rows} == {"dropped"}


# -- 6. the optional session summary ----------------------------------------------------------

SESSION_HEAD = "### Session summary (every lane of the session)"


async def two_lanes_summarized(ws, orch, fake_llm, session_reply: Reply | None) -> None:
    """Three turns in main and three in topic:deploy with a window of 1 group: after
    each lane's third, 4 messages left its window (> lane_max_messages 3) and it gets
    a lane summary; `session_reply` answers the session summary's call when one is
    made."""
    await ws.ledger.set_window(ws.session, 1)
    lanes = (
        (None, ("The staging port is 8443.", "main two", "main three"), "MAIN-LANE-PROSE"),
        ("/lane new deploy", ("deploy one", "deploy two", "deploy three"), "DEPLOY-LANE-PROSE"),
    )
    for switch, prompts, prose in lanes:
        if switch is not None:
            assert (await dispatch(ws, switch)).ok
        for i, text in enumerate(prompts):
            fake_llm.enqueue(Reply(text="noted"))
            if i == 2:
                fake_llm.enqueue(Reply(text=f"<summary>## User Intent\n- {prose}</summary>"))
                if switch is not None and session_reply is not None:
                    fake_llm.enqueue(session_reply)
            await orch.run_turn(text)
            await orch.wait_background()
    assert (await dispatch(ws, "/lane switch main")).ok


def session_calls(fake_llm) -> list:
    return [r for r in fake_llm.chat_requests if "**Lane summaries:**" in body_of(r)]


async def test_the_session_summary_is_off_by_default(make, fake_llm):
    ws, orch = await make(compaction={"lane_max_messages": 3})
    await two_lanes_summarized(ws, orch, fake_llm, None)
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("and now?")
    assert session_calls(fake_llm) == []
    assert SESSION_HEAD not in system_of(fake_llm.last)
    assert "MAIN-LANE-PROSE" in system_of(fake_llm.last)
    assert "DEPLOY-LANE-PROSE" not in system_of(fake_llm.last)


async def test_the_session_summary_is_made_from_the_lanes_and_sent_in_every_lane(make, fake_llm):
    ws, orch = await make(compaction={"lane_max_messages": 3, "session_summary": True})
    overview = Reply(text="<analysis>x</analysis><summary>SESSION-OVERVIEW: two lanes</summary>")
    await two_lanes_summarized(ws, orch, fake_llm, overview)
    # One call, made once both lanes had a summary: their prose under their names, and
    # nothing else of the session.
    [call] = session_calls(fake_llm)
    text = body_of(call)
    assert "### Lane main (messages #" in text and "MAIN-LANE-PROSE" in text
    assert "### Lane topic:deploy (messages #" in text and "DEPLOY-LANE-PROSE" in text
    assert "deploy three" not in text and "main three" not in text
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("and now?")
    system = system_of(fake_llm.last)
    assert SESSION_HEAD in system and "SESSION-OVERVIEW: two lanes" in system
    assert "<analysis>" not in system
    log = (await dispatch(ws, "/context log")).text
    assert "· the whole session ·" in log and "lane *" not in log
    # In the summary layer, before the lane's own summary; the deploy lane's summary
    # itself stays out (it was not named).
    assert system.index(SESSION_HEAD) < system.index("MAIN-LANE-PROSE")
    assert "DEPLOY-LANE-PROSE" not in system
    assert (await dispatch(ws, "/lane switch topic:deploy")).ok
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("and here?")
    system = system_of(fake_llm.last)
    assert "SESSION-OVERVIEW: two lanes" in system and "DEPLOY-LANE-PROSE" in system
    # No new lane summary since: no second session summary call.
    assert len(session_calls(fake_llm)) == 1
    # Un-compacting a lane summary discards the session summary made from it; /undo
    # brings both back.
    [deploy] = await ws.ledger.summaries(ws.session, "topic:deploy")
    assert (await dispatch(ws, f"/context uncompact {deploy.id}")).ok
    assert "SESSION-OVERVIEW" not in (await ws.prompt("openai")).system_text
    assert (await dispatch(ws, "/undo")).ok
    assert "SESSION-OVERVIEW" in (await ws.prompt("openai")).system_text
    # An edit under its span takes it out of date: the next request goes without it.
    assert (await dispatch(ws, "/message remove 1")).ok
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("after the edit?")
    assert "SESSION-OVERVIEW" not in system_of(fake_llm.last)


async def test_a_failed_session_summary_call_stores_the_lanes_prose(make, fake_llm):
    ws, orch = await make(compaction={"lane_max_messages": 3, "session_summary": True})
    await two_lanes_summarized(
        ws, orch, fake_llm, Reply(status=500, error_message="the summary model is down")
    )
    assert len(session_calls(fake_llm)) == 1
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("and now?")
    system = system_of(fake_llm.last)
    assert SESSION_HEAD in system and "made without a model" in system
    overview = system[system.index(SESSION_HEAD) :]
    assert "### Lane main\n## User Intent\n- MAIN-LANE-PROSE" in overview
    assert "### Lane topic:deploy\n## User Intent\n- DEPLOY-LANE-PROSE" in overview
