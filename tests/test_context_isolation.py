"""Tool-call isolation across provider switches, and structural validity."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slop_tui.context.isolation import (
    DISABLED_CALL,
    DISABLED_RESULT,
    SYNTHETIC_RESULT,
    isolate,
)
from slop_tui.context.tiers import TierResult
from slop_tui.records import Message, ToolCall
from tests.test_context_factories import (
    answer,
    assert_structurally_valid,
    gemini_calls,
    openai_calls,
    result,
    user,
)

ALL_TOOLS = {"read_file", "grep", "shell"}


def _group(strategy: str, gid: int, first: int) -> list[Message]:
    """One finished turn by `strategy`: prompt, two parallel calls, results, answer."""
    rows = [user(first, gid, f"prompt {gid}")]
    if strategy == "openai":
        rows.append(
            openai_calls(
                first + 1,
                gid,
                [(f"call_{gid}a", "read_file", {"p": gid}), (f"call_{gid}b", "grep", {"q": gid})],
                text=f"looking {gid}",
            )
        )
        ids = [f"call_{gid}a", f"call_{gid}b"]
    else:
        rows.append(
            gemini_calls(
                first + 1,
                gid,
                [("read_file", {"p": gid}), ("grep", {"q": gid})],
                text=f"looking {gid}",
                strategy=strategy,
            )
        )
        ids = ["read_file#0", "grep#1"]
    rows.append(result(first + 2, gid, ids[0], "read_file", f"file {gid}", strategy=strategy))
    rows.append(result(first + 3, gid, ids[1], "grep", f"hits {gid}", strategy=strategy))
    payload = json.dumps([{"text": f"done {gid}"}]) if strategy != "openai" else None
    rows.append(answer(first + 4, gid, f"done {gid}", strategy=strategy, payload=payload))
    return rows


def _texts(messages) -> list[str]:
    return [m.text for m in messages if m.role != "tool"]


SWITCHES = [
    ("openai", "gemini"),
    ("gemini", "openai"),
    ("gemini", "gemini_gca"),
    ("gemini_gca", "gemini"),
    ("gemini_gca", "openai"),
    ("openai", "gemini_gca"),
    ("openai", "openai"),
    ("gemini", "gemini"),
]


@pytest.mark.parametrize(("made_by", "target"), SWITCHES)
def test_every_switch_direction_is_valid(made_by: str, target: str) -> None:
    rows = _group(made_by, 1, 1) + [user(6, 2, "next")]
    out = isolate(rows, target, ALL_TOOLS)
    assert_structurally_valid(out.messages)
    same = (made_by == "openai") == (target == "openai")
    # Text always crosses, including the text that came with the calls.
    assert _texts(out.messages) == ["prompt 1", "looking 1", "done 1", "next"]
    calls = [c for m in out.messages for c in m.tool_calls]
    results = [m for m in out.messages if m.role == "tool"]
    if same:
        assert [c.name for c in calls] == ["read_file", "grep"]
        assert [r.text.splitlines()[1] for r in results] == ["file 1", "hits 1"]
        assert out.messages[1].native is not None
    else:
        assert calls == [] and results == []
        assert all(m.native is None for m in out.messages)
        assert any("hidden" in n for n in out.notes)


def test_mixed_history_for_each_target() -> None:
    rows = (
        _group("openai", 1, 1)
        + _group("gemini", 2, 6)
        + _group("gemini_gca", 3, 11)
        + [user(16, 4, "now")]
    )
    for target, groups_with_calls in (
        ("openai", {1}),
        ("gemini", {2, 3}),
        ("gemini_gca", {2, 3}),
    ):
        out = isolate(rows, target, ALL_TOOLS)
        assert_structurally_valid(out.messages)
        assert {m.group_id for m in out.messages if m.tool_calls} == groups_with_calls
        assert len(_texts(out.messages)) == 3 * 3 + 1


def test_gemini_native_parts_keep_thought_signatures_within_the_family() -> None:
    rows = _group("gemini", 1, 1)
    out = isolate(rows, "gemini_gca", ALL_TOOLS)
    call_msg = next(m for m in out.messages if m.tool_calls)
    assert call_msg.native[1]["thought_signature"] == "c2lnbmF0dXJl"
    assert call_msg.tool_calls[0] == ToolCall("read_file#0", "read_file", {"p": 1})
    final = out.messages[-1]
    assert final.native == [{"text": "done 1"}]
    # Tool results never carry native payloads.
    assert all(m.native is None for m in out.messages if m.role == "tool")


def test_disabled_tool_becomes_placeholders_and_keeps_pairs_valid() -> None:
    rows = _group("openai", 1, 1)
    out = isolate(rows, "openai", {"read_file"})
    assert_structurally_valid(out.messages)
    roles = [(m.role, m.text.splitlines()[0] if m.text else "") for m in out.messages]
    assert roles == [
        ("user", "prompt 1"),
        ("assistant", "looking 1"),
        ("tool", "### TOOL_RESULT: read_file"),
        ("user", DISABLED_RESULT.format(name="grep")),
        ("assistant", "done 1"),
    ]
    call_msg = out.messages[1]
    assert call_msg.text == "looking 1\n" + DISABLED_CALL.format(name="grep")
    assert [c.name for c in call_msg.tool_calls] == ["read_file"]
    assert call_msg.native is None  # altered: adapters rebuild it from tool_calls
    assert any("disabled tool(s) grep" in n for n in out.notes)


def test_all_calls_disabled() -> None:
    rows = _group("gemini", 1, 1)
    out = isolate(rows, "gemini", set())
    assert_structurally_valid(out.messages)
    assert [m.role for m in out.messages] == [
        "user",
        "assistant",
        "user",
        "user",
        "assistant",
    ]
    assert out.messages[1].text == (
        "looking 1\n[tool call to disabled tool read_file omitted]\n"
        "[tool call to disabled tool grep omitted]"
    )
    assert [m.text for m in out.messages[2:4]] == [
        "[result of disabled tool read_file omitted]",
        "[result of disabled tool grep omitted]",
    ]


def test_missing_result_gets_a_synthetic_one() -> None:
    rows = [
        user(1, 1),
        openai_calls(2, 1, [("a", "read_file", {}), ("b", "grep", {})]),
        result(3, 1, "a", "read_file"),
        answer(4, 1, "cancelled", status="interrupted"),
        user(5, 2, "again"),
    ]
    out = isolate(rows, "openai", ALL_TOOLS)
    assert_structurally_valid(out.messages)
    synthetic = out.messages[3]
    assert (synthetic.role, synthetic.tool_call_id, synthetic.text) == (
        "tool",
        "b",
        SYNTHETIC_RESULT,
    )
    assert synthetic.message_id is None
    # The interrupted partial reply is never replayed.
    assert "cancelled" not in _texts(out.messages)
    assert any("interrupted" in n for n in out.notes)


def test_dangling_call_at_the_end_is_closed() -> None:
    rows = [user(1, 1), gemini_calls(2, 1, [("shell", {"cmd": "ls"})])]
    out = isolate(rows, "gemini", ALL_TOOLS)
    assert_structurally_valid(out.messages)
    assert out.messages[-1].text == SYNTHETIC_RESULT


def test_orphan_and_duplicate_results_become_pointers() -> None:
    rows = [
        user(1, 1),
        result(2, 1, "ghost", "grep"),  # its call row is gone
        openai_calls(3, 1, [("a", "read_file", {})]),
        result(4, 1, "a", "read_file"),
        result(5, 1, "a", "read_file"),  # a duplicate
        answer(6, 1),
    ]
    out = isolate(rows, "openai", ALL_TOOLS)
    assert_structurally_valid(out.messages)
    pointers = [m.text for m in out.messages if "without" in m.text or "omitted" in m.text]
    assert pointers == [
        "[tool result of grep omitted: its call is not in the history; full text in message id 2]",
        "[tool result of read_file omitted: its call is not in the history; full text in message id 5]",
    ]


def test_no_tool_message_after_a_user_message_when_calls_are_hidden() -> None:
    rows = [
        user(1, 1),
        gemini_calls(2, 1, [("grep", {})]),
        result(3, 1, "grep#0", "grep", strategy="gemini"),
    ]
    out = isolate(rows, "openai", ALL_TOOLS)
    assert [m.role for m in out.messages] == ["user"]
    assert_structurally_valid(out.messages)


def test_hidden_rows_and_empty_text_are_skipped() -> None:
    rows = [
        user(1, 1),
        answer(2, 1, "dropped", status="dropped"),
        answer(3, None, "ungrouped"),
        answer(4, 1, "  "),
        answer(5, 1, "error notice", status="error"),
        Message(6, "s", 1, "main", "system", "sys row"),
        answer(7, 1, "kept"),
    ]
    out = isolate(rows, "openai")
    assert _texts(out.messages) == ["question", "kept"]


def test_tiers_replace_result_text() -> None:
    rows = _group("openai", 1, 1)
    tiers = {3: TierResult("short", "inactive", True)}
    out = isolate(rows, "openai", ALL_TOOLS, tiers)
    res = [m for m in out.messages if m.role == "tool"]
    assert (res[0].text, res[0].tier, res[0].truncated) == ("short", "inactive", True)
    assert res[1].tier is None and res[1].text == rows[3].content


def test_unknown_strategy_tool_rows_are_hidden() -> None:
    row = openai_calls(2, 1, [("a", "grep", {})], text="t")
    rows = [
        user(1, 1),
        Message(**{**_fields(row), "strategy": None}),
        result(3, 1, "a", "grep", strategy=None),
    ]
    out = isolate(rows, "openai", ALL_TOOLS)
    assert_structurally_valid(out.messages)
    assert [m.text for m in out.messages] == ["question", "t"]


def _fields(msg: Message) -> dict:
    return {f: getattr(msg, f) for f in msg.__slots__}


# --- property: any ledger, any target, any enabled set → structurally valid ---------------

_STRATS = st.sampled_from(["openai", "gemini", "gemini_gca"])
_NAMES = st.sampled_from(["read_file", "grep", "shell"])


@st.composite
def _random_ledger(draw: st.DrawFn) -> list[Message]:
    rows: list[Message] = []
    mid = 0

    def nid() -> int:
        nonlocal mid
        mid += 1
        return mid

    for gid in range(1, draw(st.integers(1, 4)) + 1):
        rows.append(user(nid(), gid, f"p{gid}"))
        for _ in range(draw(st.integers(0, 3))):
            strat = draw(_STRATS)
            names = draw(st.lists(_NAMES, min_size=1, max_size=3))
            text = draw(st.sampled_from(["", "note"]))
            if strat == "openai":
                ids = [f"c{mid + 1}_{i}" for i in range(len(names))]
                row = openai_calls(
                    nid(), gid, list(zip(ids, names, [{}] * len(names), strict=True)), text
                )
            else:
                ids = [f"{n}#{i}" for i, n in enumerate(names)]
                row = gemini_calls(nid(), gid, [(n, {}) for n in names], text, strategy=strat)
            rows.append(row)
            answered = draw(st.lists(st.sampled_from(list(range(len(names))) + [99]), max_size=4))
            for i in answered:
                cid, name = (ids[i], names[i]) if i < len(names) else ("stray", "grep")
                status = draw(st.sampled_from(["completed", "error"]))
                rows.append(result(nid(), gid, cid, name, strategy=strat, status=status))
        rows.append(
            answer(
                nid(),
                gid,
                draw(st.sampled_from(["a", ""])),
                status=draw(st.sampled_from(["completed", "interrupted"])),
            )
        )
    return rows


@settings(max_examples=80, deadline=None, database=None)
@given(
    rows=_random_ledger(),
    target=_STRATS,
    enabled=st.one_of(st.none(), st.sets(_NAMES)),
)
def test_isolation_output_is_always_structurally_valid(rows, target, enabled) -> None:
    out = isolate(rows, target, enabled)
    assert_structurally_valid(out.messages)
    for m in out.messages:
        for c in m.tool_calls:
            assert enabled is None or c.name in enabled
    # Every user prompt survives (beside the workspace's notes on results it omits).
    notes = ("[result of disabled tool ", "[tool result of ")
    assert [m.text for m in out.messages if m.role == "user" and not m.text.startswith(notes)] == [
        r.content for r in rows if r.role == "user"
    ]


def test_repeated_call_id_in_one_row_keeps_the_first_call() -> None:
    rows = [
        user(1, 1),
        openai_calls(2, 1, [("a", "read_file", {"n": 1}), ("a", "read_file", {"n": 2})]),
        result(3, 1, "a", "read_file"),
    ]
    out = isolate(rows, "openai", ALL_TOOLS)
    assert_structurally_valid(out.messages)
    assert out.messages[1].tool_calls == (ToolCall("a", "read_file", {"n": 1}),)
    assert out.messages[1].native is None  # the stored payload still holds both
