"""The context plan: one decision of what the next request holds, and every place.

Pure tests on records: the window is a view (widening brings rows back word for
word, narrowing reuses a stored summary whose span still fits), rows that left
the window are sent until a lane summary covers them (seed 002's thresholds
decide when one is due), a compaction summary reaches into the window only
under pressure, and each row's label says what the request does with it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from slop_tui.context.assemble import AssemblyInputs, ContextSettings, rough_tokens
from slop_tui.context.budget import CompactionSettings, ModelInfo
from slop_tui.context.guards import elided_pointer
from slop_tui.context.plan import (
    PLACE_DROPPED,
    PLACE_OTHER_LANE,
    PLACE_OUTSIDE,
    PLACE_SUMMARY,
    PLACE_WAITING,
    PLACE_WINDOW,
    PlanInputs,
    PlanSettings,
    build_plan,
    cut_older_pastes,
    head_summary,
    pending_form,
)
from slop_tui.context.prompt import ToolSpec
from slop_tui.context.render import render_prompt
from slop_tui.context.tiers import TruncationSettings
from slop_tui.records import Message, Session, Summary
from tests.test_context_factories import (
    answer,
    assert_structurally_valid,
    openai_calls,
    result,
    user,
)

DAY = 24 * 3600.0


def history(groups: int, lane: str = "main", start: int = 1) -> list[Message]:
    """`groups` groups of a user row and an answer; ids from `start`, group id = prompt id."""
    rows = []
    mid = start
    for g in range(groups):
        gid = mid
        rows.append(replace(user(mid, gid, f"question {g}"), lane=lane, created_at=float(mid)))
        rows.append(replace(answer(mid + 1, gid, f"answer {g}"), lane=lane, created_at=float(mid)))
        mid += 2
    return rows


def summary(sid: int, last: int, kind: str = "lane", first: int = 1, at: float = 0.0) -> Summary:
    return Summary(sid, "s", "main", kind, first, last, f"SUMMARY-{sid}", 1, at)


def plan_of(
    rows: list[Message],
    window: int,
    summaries=(),
    *,
    compaction: CompactionSettings | None = None,
    model: ModelInfo | None = None,
    backlog_complete: bool = True,
    now: float = 0.0,
    elided=frozenset(),
    tools=(),
    strategy: str = "openai",
    layout: str = "default",
):
    """The plan as `Workspace.plan` builds it: the window rows, and the visible rows of
    the lane before the window as the backlog."""
    visible = [m for m in rows if m.status != "dropped" and m.lane == "main"]
    sess = Session("s", window_size=window)
    inputs = PlanInputs(
        assembly=AssemblyInputs(session=sess, messages=visible, strategy=strategy, tools=tools),
        backlog=visible,
        backlog_complete=backlog_complete,
        summaries=summaries,
        elided=frozenset(elided),
        now=now,
    )
    settings = PlanSettings(
        context=ContextSettings(layout=layout),
        compaction=compaction or CompactionSettings(),
        model=model,
    )
    return build_plan(inputs, settings)


def text_of(plan) -> str:
    return render_prompt(plan.request)


def places(plan, rows) -> dict[int, str]:
    return {
        m.group_id: plan.group_place(m.group_id, m.lane, m.status).place
        for m in rows
        if m.role == "user"
    }


# -- the window is a view ----------------------------------------------------------------


def test_the_strict_window_sends_only_its_groups_and_indexes_the_rest() -> None:
    rows = history(6)  # groups 1, 3, 5, 7, 9, 11
    plan = plan_of(rows, 2)
    assert plan.window_groups == {9, 11}
    assert places(plan, rows) == {
        1: "waiting",
        3: "waiting",
        5: "waiting",
        7: "waiting",
        9: "window",
        11: "window",
    }
    text = text_of(plan)
    sent = [m for m in plan.request.messages if m.kind is None]
    assert {m.group_id for m in sent} == {9, 11}
    assert "question 3" not in text and "question 4" in text and "question 5" in text
    # One line stands for the eight rows that are neither sent nor summarized.
    index = "groups 1–7 (8 message(s)): not summarized yet; query_db reads them"
    assert text.count(index) == 1
    assert "WHERE id BETWEEN 1 AND 8 AND status != 'dropped'" in text
    # Seed 002's thresholds measure them as the short form would send them.
    assert plan.pending_messages == 8 and plan.pending_tokens > 0 and not plan.summary_due
    many = plan_of(rows, 2, compaction=CompactionSettings(lane_max_messages=7))
    assert many.summary_due and "8 messages await a summary" in many.due_reason
    # With a summary over groups 1-5, the index lists group 7 alone.
    covered = plan_of(rows, 2, [summary(1, last=6)])
    assert "SUMMARY-1" in text_of(covered)
    assert "group 7 (2 message(s)): not summarized yet" in text_of(covered)
    assert places(covered, rows)[7] == "waiting" and places(covered, rows)[5] == "summary"


def test_a_correction_waiting_outside_the_strict_window_makes_a_summary_due() -> None:
    rows = history(6)
    rows[6] = replace(rows[6], content="Correction: the webhook retry window is 90 minutes now.")
    old = replace(
        summary(1, last=4),
        content="## Anchors kept verbatim\n- [value/1] The webhook retry window is 45 minutes.\n",
    )
    plan = plan_of(rows, 2, [old])  # groups 5 and 7 wait; group 7 holds the correction
    assert plan.summary_due and "corrects a value of the summary" in plan.due_reason
    # Until that summary is made, the index says so: the old value is not current.
    assert (
        "- corrected there (the later value wins): Correction: the webhook retry window is "
        "90 minutes now." in plan.request.system_text
    )
    # The summary in the request does not present the earlier value as kept verbatim.
    assert "45 minutes" not in plan.request.system_text
    assert "45 minutes" in old.content  # the stored summary is unchanged
    # Without the correction the same rows are below the thresholds.
    calm = plan_of(history(6), 2, [old])
    assert not calm.summary_due


def test_a_summary_covers_what_lies_before_it_and_the_rest_is_listed() -> None:
    rows = history(6)
    s = summary(1, last=6)  # groups 1, 3, 5
    plan = plan_of(rows, 2, [s])
    assert plan.head == s
    assert places(plan, rows) == {
        1: "summary",
        3: "summary",
        5: "summary",
        7: "waiting",
        9: "window",
        11: "window",
    }
    assert plan.group_place(1, "main", "completed").summary_id == 1
    text = text_of(plan)
    assert "SUMMARY-1" in text and "question 0" not in text and "question 3" not in text
    assert "group 7 (2 message(s)): not summarized yet" in text
    assert plan.message_label(rows[0]) == "covered by summary 1"
    assert plan.message_label(rows[6]) == "not sent: waiting for a summary"


def test_widening_brings_rows_back_word_for_word_and_narrowing_reuses_a_summary() -> None:
    rows = history(8)  # groups 1, 3, ..., 15
    first, second = summary(1, last=4), summary(2, last=10)  # 1-3, then 1-9
    narrow = plan_of(rows, 2, [first, second])
    assert narrow.head == second
    # Full history: no summary, every row in the window, word for word.
    full = plan_of(rows, 0, [first, second])
    assert full.head is None and full.unsent_backlog == ()
    assert set(places(full, rows).values()) == {PLACE_WINDOW}
    assert all(f"question {g}" in text_of(full) for g in range(8))
    assert "SUMMARY" not in text_of(full)
    # A window of 5 starts at group 7: the newer summary reaches into it, so the older
    # one (whose span still fits) is reused, and group 5 waits for the next summary.
    five = plan_of(rows, 5, [first, second])
    assert five.head == first
    assert places(five, rows) == {
        1: "summary",
        3: "summary",
        5: "waiting",
        7: "window",
        9: "window",
        11: "window",
        13: "window",
        15: "window",
    }
    # Narrowing to 3 and widening to 5 again: five groups in the window.
    assert len(plan_of(rows, 3, [first, second]).window_groups) == 3
    assert plan_of(rows, 5, [first, second]).window_groups == five.window_groups


def test_head_summary_is_the_newest_valid_one_wholly_before_the_window() -> None:
    a, b, c = summary(1, last=4), summary(2, last=9), summary(3, last=20)
    other = replace(summary(4, last=8), lane="topic:x")
    assert head_summary([a, b, c, other], 10, "main") == b
    assert head_summary([a, b, c], 9, "main") == a  # b's last row is in the window
    assert head_summary([a, b, c], None, "main") == c
    assert head_summary([other], 10, "main") is None


def test_with_compaction_off_older_rows_are_simply_not_sent() -> None:
    rows = history(5)
    off = CompactionSettings(enabled=False)
    plan = plan_of(rows, 2, [summary(1, last=4)], compaction=off)
    assert plan.head is None and not plan.summary_due
    assert places(plan, rows) == {
        1: "outside",
        3: "outside",
        5: "outside",
        7: "window",
        9: "window",
    }
    assert "question 0" not in text_of(plan) and "SUMMARY" not in text_of(plan)
    assert plan.message_label(rows[0]) == "not sent: outside window"


def test_dropped_groups_and_other_lanes() -> None:
    rows = history(4)
    rows[2] = replace(rows[2], status="dropped")
    rows[3] = replace(rows[3], status="dropped")
    side = history(1, lane="topic:x", start=100)
    plan = plan_of(rows + side, 2)
    assert plan.group_place(3, "main", "dropped").place == PLACE_DROPPED
    assert plan.group_place(100, "topic:x", "completed").place == PLACE_OTHER_LANE
    assert plan.window_groups == {5, 7}  # the dropped group does not count
    assert plan.message_label(rows[2]) == "dropped"
    assert "question 1" not in text_of(plan)


def test_a_long_backlog_lists_its_newest_rows_and_the_rest_waits() -> None:
    rows = history(6)
    plan = plan_of(rows, 2, backlog_complete=False)
    assert plan.summary_due and "wait" in plan.due_reason
    assert "groups 1–7 and older ones (8 message(s)): not summarized yet" in text_of(plan)
    assert plan.group_place(1, "main", "completed").place == PLACE_WAITING


# -- seed 002's thresholds ------------------------------------------------------------------


def test_a_lane_summary_is_due_past_any_of_the_three_thresholds() -> None:
    rows = history(6)
    assert not plan_of(rows, 2).summary_due  # 8 messages
    few = CompactionSettings(lane_max_messages=7)
    due = plan_of(rows, 2, compaction=few)
    assert due.summary_due and "8 messages await a summary (> 7)" in due.due_reason
    tokens = CompactionSettings(lane_max_tokens=10)
    assert "tokens await a summary" in plan_of(rows, 2, compaction=tokens).due_reason
    # 24 h since the last summary (or since the oldest row awaiting one).
    assert not plan_of(rows, 2, now=DAY).summary_due
    aged = plan_of(rows, 2, now=DAY + 10)
    assert aged.summary_due and "older than 24 h" in aged.due_reason
    s = summary(1, last=2, at=100.0)
    assert not plan_of(rows, 2, [s], now=DAY + 10).summary_due
    assert plan_of(rows, 2, [s], now=DAY + 101).summary_due
    # Nothing awaits a summary: nothing is due, however old the last one.
    assert not plan_of(rows, 0, now=10 * DAY).summary_due


# -- compaction summaries reach into the window under pressure ---------------------------------


def test_a_compaction_summary_is_used_while_the_request_needs_it() -> None:
    rows = history(6)
    comp = summary(1, last=8, kind="compaction")  # groups 1-7, inside a full window
    tight = CompactionSettings(compaction_trigger_tokens=10)
    pressed = plan_of(rows, 0, [comp], compaction=tight)
    assert pressed.head == comp
    assert places(pressed, rows)[7] == PLACE_SUMMARY and places(pressed, rows)[9] == PLACE_WINDOW
    assert "question 3" not in text_of(pressed) and "question 4" in text_of(pressed)
    # Without pressure the window holds every row word for word.
    relaxed = plan_of(rows, 0, [comp])
    assert relaxed.head is None and "question 0" in text_of(relaxed)
    # A lane summary never reaches into the window.
    lane = summary(1, last=8)
    assert plan_of(rows, 0, [lane], compaction=tight).head is None


# -- labels, tiers, elision --------------------------------------------------------------------


TOOLS = (ToolSpec("read_file", "read", {}), ToolSpec("x", "x", {}))


def tool_rows() -> list[Message]:
    return [
        user(1, 1),
        openai_calls(2, 1, [("a", "read_file", {}), ("b", "x", {})]),
        result(3, 1, "a", "read_file", "a" * 500),
        result(4, 1, "b", "x", "b", strategy="gemini"),
        answer(5, 1),
        user(6, 6),
        openai_calls(7, 6, [("c", "read_file", {})]),
        result(8, 6, "c", "read_file", "c" * 9000),
    ]


def test_each_row_is_labelled_with_what_the_request_does_with_it() -> None:
    rows = tool_rows()
    plan = plan_of(rows, 5, tools=TOOLS)
    assert plan.message_label(rows[2]) == "inactive 300"
    assert plan.message_label(rows[3]) == "not sent: other provider"
    assert plan.message_label(rows[7]) == "full 5000"
    assert rows[7].id in plan.sent and rows[3].id not in plan.sent
    only_x = plan_of(rows, 5, tools=(ToolSpec("x", "x", {}),))
    assert only_x.message_label(rows[2]) == "not sent: tool disabled"
    interrupted = replace(rows[4], status="interrupted")
    assert (
        plan_of([*rows[:4], interrupted, *rows[5:]], 5, tools=TOOLS).message_label(interrupted)
        == "not sent: interrupted"
    )


def test_a_result_elided_earlier_in_the_turn_stays_elided() -> None:
    rows = tool_rows()
    plan = plan_of(rows, 5, tools=TOOLS, elided={3})
    assert plan.message_label(rows[2]) == "elided"
    assert "tool result elided" in text_of(plan)


@pytest.mark.parametrize("layout", ["default", "cache"])
def test_the_layer_tokens_add_up_to_the_request(layout: str) -> None:
    rows = history(6)
    plan = plan_of(rows, 2, [summary(1, last=4)], tools=TOOLS, layout=layout)
    assert sum(plan.layer_tokens().values()) == plan.request_tokens
    assert plan.layer_tokens()["tools"] == plan.request.tool_tokens > 0


def test_the_guard_ladder_is_part_of_the_plan() -> None:
    rows = tool_rows()
    small = ModelInfo("m", 3_300, 1_000)  # 2,207 tokens: above 90 % of 2,300
    plan = plan_of(rows, 5, tools=TOOLS, model=small)
    assert plan.guard is not None and plan.guard.level != "ok"
    assert plan.request.request_tokens == plan.guard.tokens_after
    assert plan.assembled.request_tokens == plan.guard.tokens_before
    # The newest result is never elided: the model just asked for it.
    assert plan.message_label(rows[7]) != "elided"


def test_places_are_one_of_the_known_ones() -> None:
    rows = history(3)
    plan = plan_of(rows, 1, [summary(1, last=2)])
    assert set(places(plan, rows).values()) <= {
        PLACE_WINDOW,
        PLACE_SUMMARY,
        PLACE_OUTSIDE,
        PLACE_WAITING,
    }


# -- under pressure: pastes of older groups; rows awaiting a summary in short form ------------


PASTE = "Here is the log:\n" + "".join(f"log line {i:05d} all quiet\n" for i in range(900))


def paste_rows() -> list[Message]:
    """Group 1 pastes a log (about 22,000 characters); groups 3 and 5 are short."""
    rows = history(3)
    rows[0] = replace(rows[0], content=PASTE + "Never restart the worker.", tokens=0)
    return rows


def test_an_older_groups_paste_is_cut_under_pressure_and_the_current_one_never() -> None:
    rows = paste_rows()
    tight = CompactionSettings(compaction_trigger_tokens=1_000)
    pressed = plan_of(rows, 0, compaction=tight)
    text = text_of(pressed)
    sent = next(m for m in pressed.request.messages if m.message_id == 1)
    assert sent.tier == "paste" and sent.truncated and len(sent.text) < 5_100
    # Head and tail (where the user's own words after a paste are), and the pointer.
    assert sent.text.startswith("## Begin Conversation History\nHere is the log:")
    assert sent.text.endswith("Never restart the worker.")
    assert 'query_db(sql="SELECT content FROM messages WHERE id=1")' in sent.text
    assert "log line 00450" not in text
    assert pressed.message_label(rows[0]) == "paste 5000"
    assert any(n.startswith("paste: 1 user message(s)") for n in pressed.notes)
    # Without pressure, or with compaction off, the paste is sent whole.
    assert "log line 00450" in text_of(plan_of(rows, 0))
    off = CompactionSettings(enabled=False, compaction_trigger_tokens=1_000)
    assert "log line 00450" in text_of(plan_of(rows, 0, compaction=off))
    # The current turn's own message is not cut by pressure (only past its share of the
    # input budget, below; no model is known here).
    own = [*history(2), replace(user(5, 5, PASTE), created_at=5.0)]
    mine = plan_of(own, 0, compaction=tight)
    assert "log line 00450" in text_of(mine)
    assert mine.message_label(own[-1]) == "sent"


def test_the_turns_own_message_is_cut_only_past_its_share_of_the_input_budget() -> None:
    own = [*history(2), replace(user(5, 5, PASTE + "Never restart the worker."), created_at=5.0)]
    whole = plan_of(own, 0)
    size = next(m for m in whole.request.messages if m.message_id == 5).tokens
    # An input budget of less than twice the message: cut to half the budget.
    model = ModelInfo("m", size + size // 2 + 1_000, 1_000)
    cap = model.max_input_tokens // 2
    plan = plan_of(own, 0, model=model)
    sent = next(m for m in plan.request.messages if m.message_id == 5)
    assert sent.tier == "oversize" and sent.truncated
    assert cap * 0.8 <= sent.tokens <= cap  # cut to its share, not to a tool result's limit
    assert sent.text.startswith("## End of History\n\n### CURRENT REQUEST\nHere is the log:")
    assert sent.text.endswith("Never restart the worker.")
    assert 'query_db(sql="SELECT content FROM messages WHERE id=5")' in sent.text
    assert plan.message_label(own[-1]) == f"oversize {len(sent.text)}"
    assert any(n.startswith("oversize: the turn's own message") for n in plan.notes)
    assert sum(plan.layer_tokens().values()) == plan.request_tokens
    # Within its share, off (0), or with compaction off: sent whole.
    roomy = ModelInfo("m", 2 * size + 1_000, 1_000)
    assert "log line 00450" in text_of(plan_of(own, 0, model=roomy))
    off = CompactionSettings(own_message_max_pct=0)
    assert "log line 00450" in text_of(plan_of(own, 0, model=model, compaction=off))
    disabled = CompactionSettings(enabled=False)
    assert "log line 00450" in text_of(plan_of(own, 0, model=model, compaction=disabled))
    # Longer than the whole input budget: never sendable, left to the guard ladder (which
    # sets the group aside with one error), not cut and sent.
    tiny = ModelInfo("m", size // 2 + 1_000, 1_000)
    too_big = plan_of(own, 0, model=tiny)
    assert "log line 00450" in text_of(too_big)
    assert too_big.message_label(own[-1]) == "sent"
    with pytest.raises(ValueError, match="own_message_max_pct"):
        CompactionSettings(own_message_max_pct=101)


def test_cut_older_pastes_can_treat_every_group_as_older() -> None:
    rows = [replace(user(1, 1, PASTE), created_at=1.0)]
    prompt = plan_of(rows, 0).request
    assert cut_older_pastes(prompt, TruncationSettings(), len) is prompt  # its own turn
    cut = cut_older_pastes(prompt, TruncationSettings(), len, every_group=True)
    assert cut.messages[0].tier == "paste" and len(cut.messages[0].text) < len(PASTE) // 4


STATE_BLOCK = "\n\n### STATE\nGoal: ship the parser\nResolved: step done\n"


def test_rows_awaiting_a_summary_are_measured_as_pointers_and_answers_without_state() -> None:
    rows = [
        user(1, 1, "read the config"),
        openai_calls(2, 1, [("a", "read_file", {})]),
        result(3, 1, "a", "read_file", "key = value\n" * 200),
        replace(answer(4, 1, "It looks fine." + STATE_BLOCK), payload='{"role": "assistant"}'),
        *[replace(m, id=m.id + 10, group_id=(m.group_id or 0) + 10) for m in tool_rows()[:1]],
        replace(answer(12, 11, "Done." + STATE_BLOCK), payload='{"role": "assistant"}'),
    ]
    plan = plan_of(rows, 1, tools=TOOLS)
    assert plan.window_groups == {11} and not {1, 2, 3, 4} & plan.sent
    assert plan.unsent_backlog == (1, 2, 3, 4)
    # Seed 002's token threshold measures them in their short form.
    whole = plan_of(rows, 0, tools=TOOLS).request
    short = pending_form(whole, frozenset({1}), rough_tokens)
    sent = {m.message_id: m for m in short.messages}
    assert sent[3].tier == "pointer" and sent[3].text == elided_pointer(3)
    assert sent[4].text == "It looks fine." and sent[4].native is None
    assert plan.pending_tokens == sum(m.tokens for m in short.messages if m.group_id == 1)
    # The window's rows are as they are: its answer keeps its STATE.
    assert sent[12].text == "Done." + STATE_BLOCK and sent[12].native is not None
    assert_structurally_valid(short.messages)
    assert sum(plan.layer_tokens().values()) == plan.request_tokens
