"""The guard ladder with synthetic token counts: order, levels, middle-out, no loop."""

from __future__ import annotations

import pytest

from slop_tui.context.assemble import (
    BEGIN_MARKER,
    FILES_HEADER,
    AssemblyInputs,
    ContextSettings,
    assemble,
    file_block,
)
from slop_tui.context.budget import CompactionSettings, ModelInfo
from slop_tui.context.guards import (
    STEP_ELIDE,
    STEP_EMERGENCY,
    STEP_SHED,
    STEP_SUMMARIZE,
    STEP_WARN,
    apply_plan,
    apply_summary,
    drop_messages,
    elide_messages,
    elide_tool_results,
    elided_pointer,
    middle_out,
    plan_reduction,
    remove_files,
)
from slop_tui.context.prompt import FileEntry, Layer, Prompt, PromptMessage
from slop_tui.records import Session, ToolCall
from tests.test_context_factories import assert_structurally_valid


def count(text: str) -> int:
    """The synthetic counter: four characters a token."""
    return len(text) // 4


INFO = ModelInfo("m", 11_000, 1_000)  # max input 10,000: warn 8,000, reduce 9,000, target 7,200
POINTER = count(elided_pointer(11))


def text_of(tokens: int, ch: str = "x") -> str:
    return ch * (4 * tokens)


class Builder:
    """Synthetic prompts whose token counts match `count` exactly."""

    def __init__(self) -> None:
        self.messages: list[PromptMessage] = []
        self.next_id = 1

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def user(self, tokens: int) -> Builder:
        self.messages.append(PromptMessage("user", text_of(tokens, "u"), tokens, self._id()))
        return self

    def answer(self, tokens: int) -> Builder:
        self.messages.append(PromptMessage("assistant", text_of(tokens, "a"), tokens, self._id()))
        return self

    def tool(self, result_tokens: int, call_tokens: int = 20) -> Builder:
        cid = f"c{self.next_id}"
        call = ToolCall(cid, "read_file", {})
        self.messages.append(
            PromptMessage(
                "assistant", text_of(call_tokens, "a"), call_tokens, self._id(), tool_calls=(call,)
            )
        )
        self.messages.append(
            PromptMessage(
                "tool",
                text_of(result_tokens, "t"),
                result_tokens,
                self._id(),
                tool_call_id=cid,
                tool_name="read_file",
            )
        )
        return self

    def prompt(self, system: int = 1_000, files: tuple[tuple[str, int], ...] = ()) -> Prompt:
        layers = [Layer("system", text_of(system, "s"), system)]
        entries = tuple(
            FileEntry(p, file_block(p, text_of(t, "f")), count(file_block(p, text_of(t, "f"))))
            for p, t in files
        )
        if entries:
            text = "\n" + FILES_HEADER + "".join(e.text for e in entries)
            layers.append(Layer("files", text, count(text)))
        return Prompt(layers=tuple(layers), messages=tuple(self.messages), files=entries)


def _tool_loop(pairs: int = 8, result: int = 1_000) -> Prompt:
    b = Builder().user(100)
    for _ in range(pairs):
        b.tool(result, call_tokens=50)
    return b.answer(100).prompt()


# --- middle-out (seed 004 filterToolResponses) ------------------------------------------------


@pytest.mark.parametrize(
    ("n", "pct", "expected"),
    [
        (8, 0, []),
        (8, 10, [3]),  # 8 * 10 // 100 == 0: at least one
        (8, 20, [3]),
        (8, 50, [3, 4, 2, 5]),
        (8, 100, [3, 4, 2, 5, 1, 6, 0, 7]),
        (10, 10, [4]),
        (10, 20, [4, 5]),
        (10, 50, [4, 5, 3, 6, 2]),
        (5, 100, [1, 2, 0, 3]),  # odd n: the newest response survives even at 100 %
        (3, 100, [0, 1]),
        (1, 100, []),  # the seed's index arithmetic never removes a lone response
        (2, 50, [0]),
        (0, 100, []),
    ],
)
def test_middle_out_is_the_seed_algorithm(n: int, pct: int, expected: list[int]) -> None:
    assert middle_out(n, pct) == expected


def test_elision_keeps_pairs_and_points_to_query_db() -> None:
    p = _tool_loop()
    out = elide_tool_results(p, 50, count)
    elided = [m for m in out.messages if m.tier == "elided"]
    # Tool results are ids 3, 5, ..., 17; the newest (17) is never a candidate, so
    # middle-out runs over the other seven: positions 2, 3, 1 of them.
    assert [m.message_id for m in elided] == [5, 7, 9]
    assert elided[0].text == (
        '[tool result elided to save context: use query_db(sql="SELECT content FROM messages '
        'WHERE id=5") to read it]'
    )
    assert all(m.truncated and m.tokens == POINTER for m in elided)
    assert len(out.messages) == len(p.messages)
    assert_structurally_valid(out.messages)
    # Idempotent, and a result shorter than the pointer is left alone.
    assert elide_messages(out, [7, 9], count) == out
    tiny = Builder().user(10).tool(5).prompt()
    assert elide_messages(tiny, [3], count) == tiny


# --- the ladder ------------------------------------------------------------------------------


def test_below_warning_nothing_happens() -> None:
    p = Builder().user(3_000).answer(3_000).prompt()
    plan = plan_reduction(p, INFO, count_tokens=count)
    assert (plan.level, plan.steps, plan.fails, plan.summarize) == ("ok", (), False, None)
    assert plan.tokens_before == plan.tokens_after == 7_000
    assert apply_plan(p, plan, count) == p


def test_warning_only_between_80_and_90_percent() -> None:
    p = Builder().user(3_000).answer(4_500).prompt()
    plan = plan_reduction(p, INFO, count_tokens=count)
    assert plan.level == "warning"
    assert plan.kinds() == [STEP_WARN]
    assert plan.warning == "context at 85.0 % of the input budget (8,500 of 10,000 tokens)"
    assert not plan.changed
    assert apply_plan(p, plan, count).messages == p.messages


def test_elision_stops_at_the_first_level_under_the_target() -> None:
    p = _tool_loop()  # 1,000 + 100 + 8 * 1,050 + 100 = 9,600 tokens (96 %)
    assert p.request_tokens == 9_600
    plan = plan_reduction(p, INFO, count_tokens=count)
    assert plan.level == "critical"
    assert plan.kinds() == [STEP_WARN, STEP_ELIDE]
    elide = plan.steps[1]
    # 10 % and 20 % remove one result each (9,600 - 973 = 8,627 >= 7,200); 50 % of the
    # seven candidates (the newest result is never one) removes three.
    assert (elide.level, elide.message_ids) == (50, (5, 7, 9))
    assert elide.tokens_after == 9_600 - 3 * (1_000 - POINTER) == plan.tokens_after
    assert plan.tokens_after < 7_200
    out = apply_plan(p, plan, count)
    assert out.request_tokens == plan.tokens_after
    assert_structurally_valid(out.messages)
    assert "guard: elided 3 tool result(s) at level 50 %" in out.notes


def test_summary_is_requested_when_elision_cannot_reach_the_target() -> None:
    b = Builder()
    for _ in range(20):
        b.user(200).answer(250)
    p = b.prompt(system=500)  # 500 + 20 * 450 = 9,500
    plan = plan_reduction(p, INFO, count_tokens=count)
    assert plan.kinds() == [STEP_WARN, STEP_SUMMARIZE]
    step = plan.summarize
    assert step is not None and not step.applied
    # Keep the last 10 messages (users 16..20): ids 31..40 stay, 1..30 are summarised.
    assert step.message_ids == tuple(range(1, 31))
    assert step.keep_ids == tuple(range(31, 41))
    assert step.tokens_after == 9_500 - 15 * 450 + 500
    assert plan.tokens_after == 9_500 and not plan.fails

    summarised = apply_summary(p, "What happened before.", step.message_ids, count)
    assert summarised.messages[0].kind == "summary"
    assert summarised.messages[0].text.startswith(
        "## Summary of earlier conversation\n[messages #1..#30; originals: query_db("
    )
    assert [m.message_id for m in summarised.messages[1:]] == list(range(31, 41))
    assert_structurally_valid(summarised.messages)

    again = plan_reduction(
        summarised, INFO, count_tokens=count, summarized=True, before_summary=9_500
    )
    assert again.kinds() == []  # 2,7xx tokens: nothing to do, and never a second summary
    assert again.notes[0].startswith("summary freed ")


def test_summary_keeps_at_least_two_exchanges_and_starts_at_a_user_message() -> None:
    b = Builder().user(1_000).answer(1_000).user(1_000).answer(1_000).user(100)
    for _ in range(12):
        b.answer(400)
    p = b.prompt(system=500)  # 500 + 4,000 + 100 + 4,800 = 9,400
    plan = plan_reduction(p, INFO, count_tokens=count)
    assert plan.summarize is not None
    # The last 10 messages are inside the current turn; the kept part starts at the
    # user message before it (2 exchanges), so only the first exchange is summarised.
    assert plan.summarize.message_ids == (1, 2)
    assert plan.summarize.keep_ids[0] == 3


def test_summary_not_worth_it_is_not_asked_for_and_emergency_runs() -> None:
    b = Builder()
    for _ in range(3):
        b.user(10).answer(10)
    b.user(100)
    for _ in range(12):
        b.answer(800)
    p = b.prompt(system=500)  # 500 + 60 + 100 + 9,600 = 10,260
    s = CompactionSettings(compaction_trigger_tokens=2_000)
    plan = plan_reduction(p, INFO, s, count)
    assert STEP_SUMMARIZE in plan.stopped
    assert any(n.startswith("summarize: would free only") for n in plan.notes)
    assert plan.kinds() == [STEP_WARN, STEP_EMERGENCY]
    emergency = plan.steps[1]
    # Whole earlier exchanges first (ids 1..6), then the oldest answers of the current turn.
    assert emergency.message_ids[:6] == (1, 2, 3, 4, 5, 6)
    assert 7 not in emergency.message_ids  # the current request stays
    assert 19 not in emergency.message_ids  # and its last unit
    out = apply_plan(p, plan, count)
    assert out.request_tokens == plan.tokens_after < 7_200
    notices = [m for m in out.messages if m.kind == "notice"]
    assert notices[0].text.startswith("[6 earlier message(s) (#1..#6) left out to fit")
    assert 'WHERE id BETWEEN 1 AND 6 ORDER BY id")]' in notices[0].text
    assert [m.message_id for m in out.messages if m.kind is None][0] == 7
    assert_structurally_valid(out.messages)
    assert not plan.fails


def test_emergency_needs_history_above_twice_the_trigger() -> None:
    b = Builder()
    for _ in range(3):
        b.user(10).answer(10)
    b.user(100)
    for _ in range(12):
        b.answer(800)
    p = b.prompt(system=500)
    plan = plan_reduction(p, INFO, CompactionSettings(compaction_trigger_tokens=5_000), count)
    assert STEP_EMERGENCY not in plan.kinds()
    assert plan.fails  # 10,260 > 10,000 and nothing else helps
    assert plan.reason.startswith(
        "the request needs 10,260 tokens but m accepts 10,000 (window 11,000 minus 1,000 for the answer)"
    )


def test_full_ladder_order_elide_emergency_shed() -> None:
    b = Builder()
    for _ in range(6):
        b.user(600).tool(300).answer(600)
    p = b.prompt(system=500, files=(("big.txt", 8_000), ("small.txt", 100)))
    s = CompactionSettings(compaction_trigger_tokens=1_000)
    plan = plan_reduction(p, INFO, s, count, summarized=True)
    assert plan.kinds() == [STEP_WARN, STEP_ELIDE, STEP_EMERGENCY, STEP_SHED]
    elide, emergency, shed = plan.steps[1:]
    assert elide.level == 100 and len(elide.message_ids) == 4  # never the newest two
    assert elide.tokens_after == emergency.tokens_before
    assert emergency.tokens_after == shed.tokens_before
    assert shed.files == ("big.txt",)
    assert not plan.fails
    out = apply_plan(p, plan, count)
    assert out.request_tokens == plan.tokens_after
    assert [f.path for f in out.files] == ["small.txt"]
    files_layer = next(la for la in out.layers if la.name == "files")
    assert "### big.txt" not in files_layer.text and "### small.txt" in files_layer.text
    assert any("files removed to fit the context window: big.txt" in n for n in out.notes)
    assert_structurally_valid(out.messages)
    # Never loop: planning the reduced request changes nothing more.
    replan = plan_reduction(out, INFO, s, count, summarized=True)
    assert not replan.changed and not replan.fails


def test_elision_that_frees_less_than_five_percent_is_not_taken() -> None:
    b = Builder().user(100)
    for _ in range(4):
        b.tool(60)
    for _ in range(9):
        b.user(500).answer(500)
    p = b.prompt(system=500)
    plan = plan_reduction(p, INFO, CompactionSettings(enabled=False), count)
    assert STEP_ELIDE in plan.stopped
    assert STEP_ELIDE not in plan.kinds()
    assert any(n.startswith("elide: would free only") for n in plan.notes)
    assert "summarize: compaction is disabled" in plan.notes


def test_shedding_aims_at_the_target_not_just_under_the_threshold() -> None:
    # About 9,800 tokens: above reduce_pct (9,000). Shedding the largest file alone would
    # leave about 7,600: under the threshold, above the 7,200 target the other steps aim
    # at. The next file goes too, so the turn's next results do not hit the guard again.
    files = (("a.md", 2_000), ("b.md", 1_900), ("c.md", 2_200))
    p = Builder().user(100).prompt(system=3_500, files=files)
    assert 9_000 < p.request_tokens < 10_000
    plan = plan_reduction(p, INFO, count_tokens=count)
    [shed] = [step for step in plan.steps if step.kind == STEP_SHED]
    assert shed.files == ("c.md", "a.md")
    assert shed.tokens_after < 7_200 < shed.tokens_after + 2_000
    assert [f.path for f in apply_plan(p, plan, count).files] == ["b.md"]


def test_shedding_in_the_cache_layout_rebuilds_the_pinned_message() -> None:
    inputs = AssemblyInputs(
        session=Session("s"),
        messages=(),
        strategy="openai",
        files=(("a.py", "a" * 8_000), ("b.py", "b" * 24_000), ("c.py", "c" * 4_000)),
    )
    p = assemble(inputs, ContextSettings(layout="cache"), count)
    info = ModelInfo("m", p.request_tokens * 100 // 95 + 1_000, 1_000)
    plan = plan_reduction(p, info, count_tokens=count)
    assert plan.kinds() == [STEP_WARN, STEP_SHED]
    assert plan.steps[1].files == ("b.py",)
    out = apply_plan(p, plan, count)
    pinned = out.messages[0]
    assert pinned.kind == "pinned" and "### b.py" not in pinned.text and "### a.py" in pinned.text
    assert pinned.tokens == count(pinned.text)
    assert out.request_tokens == plan.tokens_after
    # Removing every file removes the pinned message.
    bare = remove_files(p, ["a.py", "b.py", "c.py"], count)
    assert all(m.kind != "pinned" for m in bare.messages) and bare.files == ()


def test_nothing_reducible_fails_with_one_line() -> None:
    p = Builder().user(100).prompt(system=12_000)
    plan = plan_reduction(p, INFO, count_tokens=count)
    assert plan.fails and "\n" not in plan.reason
    assert plan.kinds() == [STEP_WARN]
    assert "guard: " + plan.reason in apply_plan(p, plan, count).notes


def test_request_between_reduce_and_max_is_sent_with_a_note() -> None:
    p = Builder().user(100).answer(100).prompt(system=9_300)
    plan = plan_reduction(p, INFO, count_tokens=count)
    assert not plan.fails
    assert plan.notes[-1] == "still at 95.0 % after reduction; sent as is"


def test_drop_messages_takes_results_of_dropped_calls_and_keeps_the_marker() -> None:
    b = Builder().user(10).tool(10).answer(10).user(10).answer(10)
    msgs = list(b.messages)
    msgs[0] = PromptMessage("user", BEGIN_MARKER + msgs[0].text, 10, 1)
    p = Prompt(layers=(), messages=tuple(msgs))
    out = drop_messages(p, [1, 2], count)  # user 1 and the call 2; its result 3 goes too
    assert [m.message_id for m in out.messages] == [None, 4, 5, 6]
    assert out.messages[0].text.startswith(BEGIN_MARKER + "[3 earlier message(s) (#1..#3)")
    assert_structurally_valid(out.messages)


def test_apply_summary_absorbs_orphan_results() -> None:
    p = Builder().user(10).tool(10).answer(10).user(10).answer(10).prompt()
    out = apply_summary(p, "sum", [1, 2], count)  # result 3 would be an orphan: it goes too
    assert [m.message_id for m in out.messages] == [None, 4, 5, 6]
    assert out.messages[0].text.endswith("sum\n")
    assert "summary: 2 message(s) summarised" in out.notes
    assert apply_summary(p, "sum", [], count) == p
    assert_structurally_valid(out.messages)


def test_guards_are_deterministic() -> None:
    p = _tool_loop()
    assert plan_reduction(p, INFO, count_tokens=count) == plan_reduction(
        p, INFO, count_tokens=count
    )


def test_summary_that_freed_too_little_is_reported() -> None:
    p = Builder().user(3_000).answer(3_000).prompt()
    plan = plan_reduction(p, INFO, count_tokens=count, summarized=True, before_summary=7_100)
    assert plan.notes == (
        "summary freed 100 tokens (1.4 %), less than 5 %: no further summary for this request",
    )
    assert plan.summarize is None


def test_guards_on_an_assembled_cache_layout_prompt() -> None:
    from tests.test_context_factories import answer, openai_calls, result, user

    rows = [user(1, 1, "start")]
    for k in range(8):
        rows += [
            openai_calls(2 + 2 * k, 1, [(f"c{k}", "read_file", {})]),
            result(3 + 2 * k, 1, f"c{k}", "read_file", "r" * 4_000),
        ]
    rows += [answer(18, 1, "done"), user(19, 2, "next")]
    from slop_tui.context.prompt import ToolSpec
    from slop_tui.context.tiers import TruncationSettings

    inputs = AssemblyInputs(
        Session("s", window_size=0),
        rows,
        "openai",
        state="### STATE\nGoal: x",
        tools=(ToolSpec("read_file", "Read.", {}),),
    )
    wide = ContextSettings(layout="cache", truncation=TruncationSettings(inactive_limit=10_000))
    p = assemble(inputs, wide, count)
    info = ModelInfo("m", p.request_tokens * 100 // 92 + 1_000, 1_000)
    plan = plan_reduction(p, info, count_tokens=count)
    assert plan.kinds() == [STEP_WARN, STEP_ELIDE]
    out = apply_plan(p, plan, count)
    assert_structurally_valid(out.messages)
    ctx = [m for m in out.messages if m.kind == "context"]
    assert len(ctx) == 1 and "Goal: x" in ctx[0].text
    assert out.messages[-1].text.endswith("next") and out.system_text == p.system_text


@pytest.mark.parametrize("pairs", [2, 4, 6, 8])
def test_the_newest_result_is_never_elided_even_at_100_percent(pairs: int) -> None:
    p = _tool_loop(pairs=pairs)
    out = elide_tool_results(p, 100, count)
    results = [m for m in out.messages if m.role == "tool"]
    assert results[-1].tier != "elided" and results[-1].text == p.messages[-2].text
    assert len([m for m in results if m.tier == "elided"]) >= (pairs - 1) // 2
