"""Model limits, compaction settings, the budget report, the new layers and the two layouts."""

from __future__ import annotations

import pytest

from slop_tui.context.assemble import (
    BEGIN_MARKER,
    END_MARKER,
    AssemblyInputs,
    ContextSettings,
    assemble,
    file_block,
    focus_note,
)
from slop_tui.context.budget import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_OUTPUT,
    BudgetReport,
    CompactionSettings,
    ModelInfo,
    budget_report,
    model_info,
)
from slop_tui.context.layout import (
    CONTEXT_HEADER,
    PINNED_HEADER,
    longest_common_prefix,
    serialize_request,
)
from slop_tui.context.prompt import (
    LAYER_ORDER,
    Layer,
    Prompt,
    PromptMessage,
    ToolSpec,
)
from slop_tui.context.render import render_prompt
from slop_tui.records import Memo, Session, Summary
from tests.test_context_factories import (
    answer,
    assert_structurally_valid,
    openai_calls,
    result,
    user,
)

# --- model info -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "window", "output"),
    [
        ("gpt-4o", 128_000, 16_384),
        ("gpt-4o-mini-2024-07-18", 128_000, 16_384),
        ("gpt-4.1", 1_047_576, 32_768),
        ("gpt-4.1-mini-2025-04-14", 1_047_576, 32_768),
        ("o3", 200_000, 100_000),
        ("o4-mini", 200_000, 100_000),
        ("gpt-5", 400_000, 128_000),
        ("gpt-5-mini", 400_000, 128_000),
        ("gpt-5-chat-latest", 128_000, 16_384),
        ("gemini-2.5-flash", 1_048_576, 65_536),
        ("models/gemini-2.5-pro", 1_048_576, 65_536),
        ("gemini-3-pro-preview", 1_048_576, 65_536),
        ("llama3.1:8b", 131_072, 8_192),
        ("llama3", 8_192, 2_048),
        ("qwen2.5-coder:7b", 32_768, 8_192),
        ("mistral-large-latest", 131_072, 8_192),
        ("slop-demo", 32_768, 4_096),
        ("openai/GPT-4o", 128_000, 16_384),
    ],
)
def test_model_table_prefix_matching(model: str, window: int, output: int) -> None:
    info = model_info(model)
    assert (info.context_window, info.max_output, info.source) == (window, output, "table")
    assert info.name == model


def test_unknown_model_gets_the_default() -> None:
    info = model_info("my-local-thing")
    assert (info.context_window, info.max_output, info.source) == (
        DEFAULT_CONTEXT_WINDOW,
        DEFAULT_MAX_OUTPUT,
        "default",
    )
    assert (info.context_window, info.max_output) == (128_000, 16_384)
    assert info.max_input_tokens == 128_000 - 16_384
    assert info.max_history_tokens == (128_000 - 16_384) // 16


def test_config_overrides_exact_prefix_and_partial() -> None:
    overrides = {
        "my-local-thing": {"context_window": 65_536, "max_output": 4_096},
        "gpt-4o": {"context_window": 64_000},
        "llama": {"max_output": 1_000},
    }
    exact = model_info("my-local-thing", overrides)
    assert (exact.context_window, exact.max_output, exact.source) == (65_536, 4_096, "config")
    # Only the window given: the table's output, capped at half the window.
    partial = model_info("gpt-4o", overrides)
    assert (partial.context_window, partial.max_output) == (64_000, 16_384)
    small = model_info("gpt-4o", {"gpt-4o": {"context_window": 20_000}})
    assert (small.context_window, small.max_output) == (20_000, 10_000)
    # Overrides match as prefixes too; only the output is replaced.
    prefix = model_info("llama3.1:70b", overrides)
    assert (prefix.context_window, prefix.max_output) == (131_072, 1_000)
    # gpt-4o-mini: the longest override prefix ("gpt-4o") applies.
    assert model_info("gpt-4o-mini", overrides).context_window == 64_000


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"context_window": 0}, "positive integer"),
        ({"context_window": "big"}, "positive integer"),
        ({"max_output": True}, "positive integer"),
        ({"window": 10}, "unknown key(s) window"),
        ({"context_window": 1000, "max_output": 1000}, "must be smaller"),
        ("128k", "must be a table"),
    ],
)
def test_bad_overrides_raise(spec: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model_info("x", {"x": spec})


# --- settings -------------------------------------------------------------------------------


def test_compaction_settings_defaults() -> None:
    s = CompactionSettings()
    assert (
        s.enabled,
        s.compaction_trigger_tokens,
        s.verbatim_window_tokens,
        s.summary_budget_tokens,
        s.min_verbatim_exchanges,
        s.keep_recent_messages,
        s.warn_pct,
        s.reduce_pct,
        s.removal_levels,
        s.min_shrink_pct,
    ) == (True, 24_000, 4_000, 500, 2, 10, 80, 90, (0, 10, 20, 50, 100), 5)
    assert s.target_pct == pytest.approx(72.0)
    assert (
        s.lane_max_messages,
        s.lane_max_tokens,
        s.lane_max_age_hours,
        s.lane_keep_recent,
        s.lane_min_messages,
        s.lane_max_anchors,
    ) == (30, 2_500, 24.0, 0, 6, 80)


def test_compaction_settings_from_mapping() -> None:
    s = CompactionSettings.from_mapping(
        {"compaction_trigger_tokens": 10_000, "removal_levels": [0, 50, 100], "enabled": False}
    )
    assert (s.compaction_trigger_tokens, s.removal_levels, s.enabled) == (
        10_000,
        (0, 50, 100),
        False,
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"trigger": 1}, "unknown compaction setting"),
        ({"enabled": 1}, "true or false"),
        ({"compaction_trigger_tokens": -1}, "integer >= 0"),
        ({"compaction_trigger_tokens": 1.5}, "integer >= 0"),
        ({"warn_pct": 95}, "warn_pct <= reduce_pct"),
        ({"reduce_pct": 101}, "reduce_pct <= 100"),
        ({"removal_levels": [50, 10]}, "increasing percentages"),
        ({"removal_levels": [0, 150]}, "increasing percentages"),
        ({"removal_levels": []}, "increasing percentages"),
        ({"detector_model": 3}, "must be a string"),
        ({"lane_max_age_hours": -1}, "number >= 0"),
    ],
)
def test_compaction_settings_validation(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CompactionSettings.from_mapping(data)


# --- budget report -------------------------------------------------------------------------


def _prompt(system_tokens: int, history: list[int], tool_tokens: int = 0) -> Prompt:
    return Prompt(
        layers=(Layer("system", "s", system_tokens),),
        messages=tuple(
            PromptMessage("user" if i % 2 == 0 else "assistant", "x", tokens=t)
            for i, t in enumerate(history)
        ),
        tool_tokens=tool_tokens,
    )


INFO = ModelInfo("m", 11_000, 1_000)  # max input 10,000


def test_budget_report_fields() -> None:
    r = budget_report(_prompt(1_000, [2_000, 3_000], tool_tokens=500), INFO)
    assert r == BudgetReport(
        model="m",
        history_tokens=5_000,
        max_history_tokens=625,
        max_input_tokens=10_000,
        total_tokens=6_500,
        remaining=3_500,
        percent=65.0,
        needs_summary=False,
        level="ok",
        context_window=11_000,
        max_output=1_000,
    )
    assert r.line() == "6,500 / 10,000 tokens (65.0 %) · ok"


@pytest.mark.parametrize(
    ("total", "level"),
    [
        (7_999, "ok"),
        (8_000, "warning"),
        (8_999, "warning"),
        (9_000, "critical"),
        (12_000, "critical"),
    ],
)
def test_budget_levels(total: int, level: str) -> None:
    r = budget_report(_prompt(total, []), INFO)
    assert r.level == level
    assert r.remaining == 10_000 - total


def test_needs_summary_follows_trigger_and_enabled() -> None:
    s = CompactionSettings(compaction_trigger_tokens=4_000)
    assert budget_report(_prompt(0, [2_000, 2_000]), INFO, s).needs_summary is False
    assert budget_report(_prompt(0, [2_000, 2_001]), INFO, s).needs_summary is True
    off = CompactionSettings(compaction_trigger_tokens=4_000, enabled=False)
    assert budget_report(_prompt(0, [2_000, 2_001]), INFO, off).needs_summary is False
    assert budget_report(_prompt(0, [1]), INFO).line().endswith("· ok")
    assert budget_report(_prompt(0, [30_000]), INFO).line().endswith("· critical · summary due")


# --- new layers --------------------------------------------------------------------------------

TOOLS = (ToolSpec("read_file", "Read a file.", {"type": "object"}),)


def _ledger() -> list:
    return [
        user(1, 1, "old prompt"),
        openai_calls(2, 1, [("c1", "read_file", {"path": "/a"})], text="reading"),
        result(3, 1, "c1", "read_file", "A" * 200),
        answer(4, 1, "old answer"),
        user(5, 2, "current prompt"),
    ]


def _summary(sid: int = 1, lane: str = "main", first: int = 10, last: int = 20) -> Summary:
    return Summary(sid, "s", lane, "compaction", first, last, f"Summary {sid} body.", 1, 0.0)


def _inputs(**kw) -> AssemblyInputs:
    base = {
        "session": Session("work", window_size=5),
        "messages": _ledger(),
        "strategy": "openai",
        "state": "### STATE\nGoal: a",
        "scratchpad": "## Plan\n- [ ] step",
        "memos": (Memo(1, "memo one", ("t",), 0.0),),
        "tools": TOOLS,
        "summaries": (_summary(),),
        "files": (("src/app.py", "print('hi')\n"), ("README.md", "# Title")),
        "resume": "Continue with: step 2",
        "quoted": "The answer of group 1.",
        "quoted_group": 1,
        "focus": "The user replies to group 1.",
    }
    base.update(kw)
    return AssemblyInputs(**base)


def test_default_layout_layer_order_and_placement() -> None:
    p = assemble(_inputs())
    sources = {"repo_map", "file_tree", "urls", "resources"}  # source layers: test_repomap
    assert [la.name for la in p.layers] == [
        n for n in LAYER_ORDER if n not in sources and n != "personality"
    ]
    assert [la.placement for la in p.layers] == ["system"] * 8 + ["context"] * 2
    # A personality is the third layer, in the system text, with its source named.
    both = assemble(_inputs(personality="Be terse.", personality_source="lane topic:x"))
    assert [la.name for la in both.layers] == [n for n in LAYER_ORDER if n not in sources]
    assert both.layers[2].text == "\n## Personality (from the lane topic:x)\nBe terse.\n"
    assert both.layers[2].placement == "system"
    # System text: every system layer, blank-line separated, first one without.
    assert p.system_text == "".join(la.text for la in p.layers if la.placement == "system")
    summary = p.layers[5].text
    assert summary == (
        "\n## Summary of earlier conversation\n"
        '[messages #10..#20; originals: query_db(sql="SELECT id, role, content FROM messages '
        'WHERE id BETWEEN 10 AND 20")]\n'
        "Summary 1 body.\n"
    )
    assert p.layers[6].text == (
        "\n## Files in context\n### src/app.py\n```\nprint('hi')\n```\n### README.md\n```\n# Title\n```\n"
    )
    assert p.layers[7].text == "\n## Resuming\nContinue with: step 2\n"
    # Quoted and focus travel together in one context message before the current request.
    assert p.layers[8].text == "## Replying to group 1\nThe answer of group 1.\n"
    assert p.layers[9].text == "\n## Focus\nThe user replies to group 1.\n"
    ctx = p.messages[-2]
    assert (ctx.role, ctx.kind, ctx.message_id) == ("user", "context", None)
    assert ctx.text == CONTEXT_HEADER + p.layers[8].text + p.layers[9].text
    assert p.messages[-1].text == END_MARKER + "current prompt"  # the user's text is untouched
    assert p.messages[0].text.startswith(BEGIN_MARKER)
    assert_structurally_valid(p.messages)


def test_cache_layout_layer_placement() -> None:
    p = assemble(_inputs(), ContextSettings(layout="cache"))
    assert [(la.name, la.placement) for la in p.layers] == [
        ("system", "system"),
        ("guidelines", "system"),
        ("state", "context"),
        ("scratchpad", "context"),
        ("memos", "context"),
        ("summary", "pinned"),
        ("files", "pinned"),
        ("resume", "context"),
        ("quoted", "context"),
        ("focus", "context"),
    ]
    pinned, first = p.messages[0], p.messages[1]
    assert pinned.kind == "pinned" and pinned.role == "user"
    assert pinned.text.startswith(PINNED_HEADER + "## Summary of earlier conversation\n")
    assert "\n## Files in context\n### src/app.py\n" in pinned.text
    assert first.text == BEGIN_MARKER + "old prompt"
    ctx = p.messages[-2]
    assert ctx.kind == "context"
    assert ctx.text.startswith(CONTEXT_HEADER + "## Global State (Anchor)\n### STATE\nGoal: a\n")
    order = [ctx.text.index(h) for h in ("## Global State", "## Active Scratchpad",
                                         "## Relevant Memos", "## Resuming",
                                         "## Replying to group 1", "## Focus")]  # fmt: skip
    assert order == sorted(order)
    assert "Goal: a" not in p.system_text and "Summary 1 body" not in p.system_text
    assert p.notes[-1] == "layout: cache"
    assert p.layout == "cache"
    assert_structurally_valid(p.messages)
    # Every layer is counted once: the engine messages are not history.
    assert p.history_tokens == sum(m.tokens for m in p.messages if m.kind is None)
    assert p.total_tokens == sum(la.tokens for la in p.layers if la.placement == "system") + sum(
        m.tokens for m in p.messages
    )


def test_cache_layout_system_text_is_byte_identical_when_volatile_layers_change() -> None:
    cache = ContextSettings(layout="cache")
    a = assemble(_inputs(), cache)
    b = assemble(
        _inputs(state="### STATE\nGoal: b", scratchpad="## Plan\n- [x] step", memos=()), cache
    )
    assert a.system_text == b.system_text
    assert a.messages[0] == b.messages[0]  # the pinned message too
    # The default layout changes its system text for the same edit.
    d1, d2 = assemble(_inputs()), assemble(_inputs(state="### STATE\nGoal: b"))
    assert d1.system_text != d2.system_text


def test_cache_layout_shares_a_longer_prefix_across_turns() -> None:
    """Turn 2 adds one exchange and a new STATE; cache layout keeps the old history cached."""
    turn2_rows = [*_ledger(), answer(6, 2, "current answer"), user(7, 3, "next prompt")]
    for layout, expect_history in (("default", False), ("cache", True)):
        s = ContextSettings(layout=layout, window=0)
        one = assemble(_inputs(state="### STATE\nGoal: 1"), s)
        two = assemble(_inputs(messages=turn2_rows, state="### STATE\nGoal: 2"), s)
        shared = longest_common_prefix(one, two)
        text = serialize_request(one)
        assert text[:shared] == serialize_request(two)[:shared]
        assert ("old answer" in text[:shared]) is expect_history
    cache_s = ContextSettings(layout="cache", window=0)
    default_s = ContextSettings(window=0)
    c1 = assemble(_inputs(state="### STATE\nGoal: 1"), cache_s)
    c2 = assemble(_inputs(messages=turn2_rows, state="### STATE\nGoal: 2"), cache_s)
    d1 = assemble(_inputs(state="### STATE\nGoal: 1"), default_s)
    d2 = assemble(_inputs(messages=turn2_rows, state="### STATE\nGoal: 2"), default_s)
    assert longest_common_prefix(c1, c2) > longest_common_prefix(d1, d2)
    assert longest_common_prefix(c1, c2, count_tokens=len) == longest_common_prefix(c1, c2)


def test_longest_common_prefix_basics() -> None:
    p = assemble(_inputs())
    assert longest_common_prefix(p, p) == len(serialize_request(p))
    other = assemble(_inputs(tools=()))
    assert longest_common_prefix(p, other) < len(serialize_request(p))


def test_context_message_during_a_tool_loop_sits_before_the_request() -> None:
    rows = [
        *_ledger(),
        openai_calls(6, 2, [("c2", "read_file", {})]),
        result(7, 2, "c2", "read_file"),
    ]
    p = assemble(_inputs(messages=rows), ContextSettings(layout="cache"))
    kinds = [(m.kind, m.message_id) for m in p.messages]
    at = kinds.index(("context", None))
    assert kinds[at + 1] == (None, 5)  # the current request
    assert p.messages[-1].role == "tool"
    assert_structurally_valid(p.messages)


def test_empty_new_layers_change_nothing() -> None:
    plain = _inputs(summaries=(), files=(), resume="", quoted="", focus="")
    p = assemble(plain)
    assert [la.name for la in p.layers] == ["system", "guidelines", "state", "scratchpad", "memos"]
    assert all(m.kind is None for m in p.messages)
    assert p.files == ()
    # The cache layout with no volatile content adds no engine message either.
    c = assemble(_inputs(summaries=(), files=(), resume="", quoted="", focus="", state=None,
                         scratchpad="", memos=()), ContextSettings(layout="cache"))  # fmt: skip
    assert all(m.kind is None for m in c.messages)


def test_summaries_of_other_lanes_are_left_out_and_sorted() -> None:
    p = assemble(
        _inputs(
            summaries=(_summary(2, first=30, last=40), _summary(3, lane="topic:x"), _summary(1))
        )
    )
    text = next(la.text for la in p.layers if la.name == "summary")
    assert text.index("Summary 1 body") < text.index("Summary 2 body")
    assert "Summary 3" not in text
    assert "summaries: 1 of another lane ignored" in p.notes


def test_quoted_without_group_and_focus_note() -> None:
    p = assemble(_inputs(quoted_group=None))
    quoted = next(la for la in p.layers if la.name == "quoted")
    assert quoted.text.startswith("## Replying to an earlier message\n")
    assert focus_note(4, 9) == "The user replies to group 4: read the request in that light."
    assert focus_note(None, 9) == (
        "Unless the request says otherwise, it follows up on your last answer (group 9)."
    )
    assert focus_note(None, None) == ""


def test_files_layer_fences_and_token_counts() -> None:
    assert file_block("a.md", "x\n```\ny") == "### a.md\n````\nx\n```\ny\n````\n"
    assert file_block("e.txt", "") == "### e.txt\n```\n```\n"
    p = assemble(_inputs(), count_tokens=len)
    assert [(f.path, f.tokens) for f in p.files] == [
        ("src/app.py", len(file_block("src/app.py", "print('hi')\n"))),
        ("README.md", len(file_block("README.md", "# Title"))),
    ]
    total = sum(f.tokens for f in p.files)
    assert f"files: 2 file(s), {total} tokens" in p.notes


def test_tool_declarations_are_counted_apart() -> None:
    p = assemble(_inputs(), count_tokens=len)
    assert p.tool_tokens == len(
        '{"description": "Read a file.", "name": "read_file", "parameters": {"type": "object"}}'
    )
    assert p.request_tokens == p.total_tokens + p.tool_tokens


def test_unknown_layout_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown context layout 'fast'"):
        ContextSettings(layout="fast")


def test_render_shows_new_layers_once() -> None:
    p = assemble(_inputs(), ContextSettings(layout="cache"))
    text = render_prompt(p)
    assert "--- layer: state · " in text and " · in context message ---" in text
    assert "--- layer: files · " in text and " · in pinned message ---" in text
    assert "--- files in context · 2 ---\n- src/app.py · " in text
    assert "pinned message" in text and "(layers summary, files: shown above)" in text
    assert text.count("Goal: a") == 1  # not repeated under the context message
    assert "layout cache" in text.splitlines()[0]


def test_determinism_with_new_layers() -> None:
    for layout in ("default", "cache"):
        s = ContextSettings(layout=layout)
        a, b = assemble(_inputs(), s), assemble(_inputs(), s)
        assert a == b and render_prompt(a) == render_prompt(b)
        assert serialize_request(a) == serialize_request(b)


def test_new_modules_are_pure() -> None:
    import subprocess
    import sys

    modules = ["budget", "guards", "compaction", "summaries", "redact", "layout"]
    forbidden = [
        "textual",
        "sqlite3",
        "aiosqlite",
        "openai",
        "google",
        "tiktoken",
        "slop_tui.ledger",
    ]
    code = (
        "import sys\n"
        + "".join(f"import slop_tui.context.{m}\n" for m in modules)
        + "bad = sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') "
        + f"for f in {forbidden!r}))\n"
        + "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
