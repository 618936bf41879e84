"""Assembly: layer order, markers, token counts, determinism, rendering."""

from __future__ import annotations

import json

from slop_tui.context.assemble import (
    BEGIN_MARKER,
    END_MARKER,
    AssemblyInputs,
    ContextSettings,
    assemble,
    rough_tokens,
    summary_as_sent,
)
from slop_tui.context.guidelines import BASE_PROMPT, STATE_FORMAT
from slop_tui.context.prompt import ToolSpec
from slop_tui.context.render import layer_figure, render_prompt
from slop_tui.context.tiers import TruncationSettings, truncation_hint
from slop_tui.records import Memo, Session, Skill, Summary
from tests.test_context_factories import (
    answer,
    assert_structurally_valid,
    gemini_calls,
    openai_calls,
    result,
    user,
)

TOOLS = (
    ToolSpec("read_file", "Read a file.\nWith line numbers.", {"type": "object"}),
    ToolSpec("query_db", "Run SQL on the ledger.", {"type": "object"}),
)
SKILLS = (
    Skill(2, "reviewer", "Reviews code", "Review like a hawk."),
    Skill(1, "planner", "Plans", "Plan first.\n"),
)
MEMOS = tuple(
    Memo(i, f"memo {i}\nline two", ("arch-decision", f"t{i}"), float(i)) for i in range(1, 8)
)


def _ledger() -> list:
    return [
        user(1, 1, "old prompt"),
        openai_calls(2, 1, [("c1", "read_file", {"path": "/a"})], text="reading"),
        result(3, 1, "c1", "read_file", "A" * 2000),
        answer(4, 1, "old answer\n### STATE\nGoal: a"),
        user(5, 2, "current prompt"),
    ]


def _inputs(**kw) -> AssemblyInputs:
    base = {
        "session": Session("work", window_size=5),
        "messages": _ledger(),
        "strategy": "openai",
        "state": "### STATE\nGoal: a",
        "scratchpad": "## Plan\n- [ ] step",
        "memos": MEMOS,
        "skills": SKILLS,
        "tools": TOOLS,
    }
    base.update(kw)
    return AssemblyInputs(**base)


def test_layer_order_and_contents() -> None:
    p = assemble(_inputs())
    assert [layer.name for layer in p.layers] == [
        "system",
        "guidelines",
        "state",
        "scratchpad",
        "memos",
    ]
    system = p.layers[0].text
    assert system.startswith(BASE_PROMPT)
    tools_at = system.index("## Available Tools\n")
    skills_at = system.index("## Active Skills\n")
    assert tools_at < skills_at
    assert (
        "- read_file: Read a file. With line numbers.\n- query_db: Run SQL on the ledger.\n"
        in system
    )
    # Skills in the given (activation) order, not by id.
    assert system.index("### Skill: reviewer\nReview like a hawk.\n") < system.index(
        "### Skill: planner\nPlan first.\n"
    )
    guidelines = p.layers[1].text
    assert STATE_FORMAT in guidelines
    assert "status != 'dropped'" in guidelines and "ORDER BY id DESC" in guidelines
    assert "SELECT substr(content, 1, 4000) FROM messages WHERE id=<ID>" in guidelines
    assert "substr(content, 4001, 4000)" in guidelines
    assert "query_db sees only this session (`work`)" in guidelines
    assert p.layers[2].text == "\n## Global State (Anchor)\n### STATE\nGoal: a\n"
    assert p.layers[3].text == "\n## Active Scratchpad\n## Plan\n- [ ] step\n"
    memo_lines = [line for line in p.layers[4].text.splitlines() if line.startswith("- [memo")]
    assert memo_lines == [f'- [memo {i}] ["arch-decision", "t{i}"] memo {i}' for i in range(1, 6)]
    assert "\n  line two\n" in p.layers[4].text
    assert "memos: 7 given, 5 used" in p.notes
    assert p.system_text == "".join(layer.text for layer in p.layers)


def test_empty_layers_are_omitted() -> None:
    p = assemble(_inputs(state=None, scratchpad="  \n", memos=(), skills=(), tools=()))
    assert [layer.name for layer in p.layers] == ["system", "guidelines"]
    assert "## Active Skills" not in p.system_text
    assert "No tools are enabled" in p.system_text


def test_base_prompt_override() -> None:
    p = assemble(_inputs(base_prompt="You are terse."))
    assert p.layers[0].text.startswith("You are terse.\n\n## Available Tools\n")


def test_history_markers_and_current_request() -> None:
    p = assemble(_inputs())
    assert p.messages[0].text == BEGIN_MARKER + "old prompt"
    assert p.messages[-1].text == END_MARKER + "current prompt"
    assert END_MARKER == "## End of History\n\n### CURRENT REQUEST\n"
    assert_structurally_valid(p.messages)


def test_no_current_request_marker_during_a_tool_loop() -> None:
    rows = _ledger() + [
        openai_calls(6, 2, [("c2", "read_file", {})]),
        result(7, 2, "c2", "read_file"),
    ]
    p = assemble(_inputs(messages=rows))
    assert p.messages[-1].role == "tool"
    assert not any(m.text.startswith(END_MARKER) for m in p.messages)


def test_single_user_message_gets_only_the_begin_marker() -> None:
    p = assemble(_inputs(messages=[user(1, 1, "hi")]))
    assert [m.text for m in p.messages] == [BEGIN_MARKER + "hi"]


def test_begin_marker_drops_native_of_a_text_message() -> None:
    first = answer(
        1, 1, "from gemini", strategy="gemini", payload=json.dumps([{"text": "from gemini"}])
    )
    p = assemble(_inputs(messages=[first, user(2, 1, "go on")], strategy="gemini"))
    assert p.messages[0].text == BEGIN_MARKER + "from gemini" and p.messages[0].native is None


def test_window_and_tiers_are_applied() -> None:
    p = assemble(_inputs(session=Session("work", window_size=1)))
    assert [m.message_id for m in p.messages] == [5]
    p = assemble(_inputs(), ContextSettings(window=0))
    tool = next(m for m in p.messages if m.role == "tool")
    # Group 1 is inactive once prompt 5 started: 300 characters with the hint.
    assert (tool.tier, tool.truncated, len(tool.text)) == ("inactive", True, 300)
    assert truncation_hint(3) in tool.text
    assert any(n.startswith("truncated 1 tool result(s) (1 inactive)") for n in p.notes)
    wide = ContextSettings(truncation=TruncationSettings(inactive_limit=10_000))
    assert (
        next(m for m in assemble(_inputs(), wide).messages if m.role == "tool").truncated is False
    )


def test_hidden_results_do_not_take_full_fidelity_slots() -> None:
    # Six gemini results, then one openai result, in the active group. For an
    # openai target only the openai one is visible, so it stays full-tier.
    rows = [user(1, 1)]
    for i in range(6):
        rows += [
            gemini_calls(2 + 2 * i, 1, [("grep", {})]),
            result(3 + 2 * i, 1, "grep#0", "grep", "g" * 6000, strategy="gemini"),
        ]
    rows += [openai_calls(20, 1, [("c", "grep", {})]), result(21, 1, "c", "grep", "o" * 3000)]
    p = assemble(_inputs(messages=rows, tools=(ToolSpec("grep", "g", {}),)))
    (tool,) = [m for m in p.messages if m.role == "tool"]
    assert (tool.tier, tool.truncated) == ("full", False)


def test_token_counts_per_layer_and_message() -> None:
    p = assemble(_inputs(), count_tokens=len)
    for layer in p.layers:
        assert layer.tokens == len(layer.text)
    call_msg = next(m for m in p.messages if m.tool_calls)
    assert call_msg.tokens == len("reading") + len('read_file({"path": "/a"})')
    assert p.layer_tokens()["history"] == sum(m.tokens for m in p.messages)
    assert p.total_tokens == sum(layer.tokens for layer in p.layers) + p.layer_tokens()["history"]
    assert rough_tokens("abcde") == 2


def test_determinism_byte_identical() -> None:
    inputs = _inputs()
    first, second = assemble(inputs), assemble(_inputs())
    assert first == second
    assert repr(first) == repr(second)
    assert render_prompt(first) == render_prompt(second)


def test_lane_rows_of_other_lanes_are_ignored() -> None:
    from dataclasses import replace

    rows = _ledger() + [replace(user(6, 3, "side lane"), lane="side")]
    p = assemble(_inputs(messages=rows))
    assert "side lane" not in " ".join(m.text for m in p.messages)


def test_a_layers_figure_stays_when_only_the_calibration_moves() -> None:
    """A byte-identical layer shows one figure (its o200k count) whatever factor the
    model's counter has learned; the request's total is the calibrated one."""
    from slop_tui.context.tokens import DisplayCount, TokenCounter, get_encoding

    assert get_encoding() is not None
    shown = []
    for factor in (1.0, 1.27):
        counter = TokenCounter("gemini-2.5-flash", factor=factor)
        p = assemble(_inputs(), ContextSettings(window=0), count_tokens=DisplayCount(counter))
        text = render_prompt(p)
        lines = [line for line in text.splitlines() if line.startswith("--- layer: ")]
        shown.append((lines, p.request_tokens, [la.tokens for la in p.layers]))
    (lines_a, total_a, counts_a), (lines_b, total_b, counts_b) = shown
    assert counts_a != counts_b and total_a != total_b  # the calibration did move
    assert lines_a == lines_b and len(lines_a) == 5
    assert "--- layer: system · ≈" not in lines_a[0]  # counted, not estimated


def test_render_shows_layers_tokens_and_tiers() -> None:
    p = assemble(_inputs(), ContextSettings(window=0))
    text = render_prompt(p)
    assert text.startswith(
        f"=== Context for strategy openai · {p.request_tokens:,} tokens ({p.total_tokens:,} of text"
    )
    for layer in p.layers:
        figure = layer_figure(layer.tokens, layer.text)
        assert f"--- layer: {layer.name} · {figure} tokens ---" in text
    assert "tool read_file [c1] (#3, group 1) · " in text
    assert "tier inactive, truncated" in text
    assert '  -> call read_file [c1] {"path": "/a"}' in text
    assert "--- notes ---" in text


def test_the_summary_layer_sends_anchor_items_without_their_tags() -> None:
    content = (
        "## User Intent\n- [value/1] a prose line that only looks tagged\n\n"
        "## Anchors kept verbatim\n"
        "- [constraint/0] Never deploy on Fridays.\n"
        '- [value/2] redis_url = "redis://cache:6390/4"\n'
        "- untagged item\n"
    )
    summary = Summary(1, "s", "main", "lane", 1, 2, content, 1, 0.0)
    inputs = AssemblyInputs(Session("s"), [user(3, 3)], "openai", summaries=(summary,))
    layer = next(la for la in assemble(inputs).layers if la.name == "summary")
    assert "- Never deploy on Fridays.\n" in layer.text
    assert '- redis_url = "redis://cache:6390/4"\n' in layer.text
    assert "- untagged item" in layer.text and "[constraint/0]" not in layer.text
    # Only the anchors section is rewritten; the stored summary keeps its tags.
    assert "- [value/1] a prose line that only looks tagged" in layer.text
    assert summary_as_sent(content).count("[") == 1
    assert summary_as_sent("no anchors") == "no anchors"
