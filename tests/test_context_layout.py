"""The cache-aware layout: the stability tracker, promotion into the pinned message,
the cached tiers' breakpoints, and `cache_control` on the wire (real SDK, fake server)."""

from __future__ import annotations

import contextlib

from slop_tui.context.assemble import AssemblyInputs, ContextSettings, assemble
from slop_tui.context.layout import (
    LAYOUT_CACHE,
    STABLE_AFTER,
    Stability,
    cache_breakpoints,
    sent_layers,
)
from slop_tui.context.prompt import (
    KIND_CONTEXT,
    KIND_PINNED,
    LAYER_SCRATCHPAD,
    LAYER_STATE,
    PLACEMENT_CONTEXT,
    PLACEMENT_PINNED,
)
from slop_tui.orchestrator import Orchestrator
from slop_tui.records import Message, Session, Summary
from tests.fakeserver import Reply
from tests.workspace_fixtures import open_workspace


def _msg(mid: int, gid: int, role: str, text: str) -> Message:
    return Message(
        id=mid,
        session="s",
        group_id=gid,
        lane="main",
        role=role,
        content=text,
        tokens=len(text) // 4,
        created_at=float(mid),
    )


def _inputs(*, summary: bool = True, turns: int = 3) -> AssemblyInputs:
    rows = []
    for g in range(1, turns + 1):
        rows += [_msg(2 * g - 1, g, "user", f"question {g}"), _msg(2 * g, g, "assistant", "ok")]
    rows.append(_msg(2 * turns + 1, turns + 1, "user", "the current request"))
    summaries = [Summary(1, "s", "main", "rolling", 1, 1, "earlier work", 1, 0.0)]
    return AssemblyInputs(
        session=Session(name="s", scratchpad="plan", window_size=0),
        messages=rows,
        strategy="openai",
        state="### STATE\nGoal: g",
        scratchpad="plan",
        summaries=summaries if summary else [],
    )


def test_tracker_counts_unchanged_requests_and_starts_over_on_a_change():
    t = Stability()
    for _ in range(STABLE_AFTER + 1):
        t = t.update({"state": "A", "scratchpad": "P"})
    assert t.age("scratchpad") == STABLE_AFTER and t.stable() == {"state", "scratchpad"}
    t = t.update({"state": "B", "scratchpad": "P"})
    assert t.age("state") == 0 and t.stable() == {"scratchpad"}
    t = t.update({"state": "B"})  # a layer no longer sent is forgotten
    assert t.age("scratchpad") == 0 and "scratchpad" not in t.items
    assert t.purge(["state"]).items == {}


def test_cache_layout_pins_stable_layers_after_the_least_changing_ones():
    plain = assemble(_inputs(), ContextSettings(layout=LAYOUT_CACHE))
    where = {layer.name: layer.placement for layer in plain.layers}
    assert where[LAYER_SCRATCHPAD] == where[LAYER_STATE] == PLACEMENT_CONTEXT
    promoted = assemble(
        _inputs(), ContextSettings(layout=LAYOUT_CACHE, stable=frozenset({LAYER_SCRATCHPAD}))
    )
    where = {layer.name: layer.placement for layer in promoted.layers}
    assert where[LAYER_SCRATCHPAD] == PLACEMENT_PINNED and where[LAYER_STATE] == PLACEMENT_CONTEXT
    pinned = next(m for m in promoted.messages if m.kind == KIND_PINNED)
    # The summary (changes at a compaction) comes before the scratchpad (promoted).
    assert pinned.text.index("earlier work") < pinned.text.index("## Active Scratchpad")
    assert (
        "## Active Scratchpad"
        not in next(m for m in promoted.messages if m.kind == KIND_CONTEXT).text
    )
    assert "layout: cache (pinned as stable: scratchpad)" in promoted.notes
    # The layer texts are the same wherever they are placed.
    assert sent_layers(plain) == sent_layers(promoted)


def test_breakpoints_end_each_non_empty_cached_tier():
    prompt = assemble(_inputs(), ContextSettings(layout=LAYOUT_CACHE))
    marks = cache_breakpoints(prompt)
    kinds = [prompt.messages[i].kind for i in marks.messages]
    context = next(i for i, m in enumerate(prompt.messages) if m.kind == KIND_CONTEXT)
    assert marks.system and kinds == [KIND_PINNED, None]
    assert marks.messages[-1] == context - 1  # the history up to the volatile tail
    assert marks.count <= 4
    # No summary and nothing promoted: no pinned message, so no mark for it.
    lean = assemble(_inputs(summary=False), ContextSettings(layout=LAYOUT_CACHE))
    assert [lean.messages[i].kind for i in cache_breakpoints(lean).messages] == [None]
    assert cache_breakpoints(lean, limit=1).messages == ()


@contextlib.asynccontextmanager
async def cache_layout(tmp_path, fake_llm, **env):
    """A workspace with `[context] layout = "cache"` and its orchestrator."""
    env = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": fake_llm.openai_base_url, **env}
    (tmp_path / "user.toml").write_text('[context]\nlayout = "cache"\n')
    env["SLOP_CONFIG"] = str(tmp_path / "user.toml")
    ws = await open_workspace(tmp_path, env=env)
    orch = Orchestrator(ws)
    try:
        yield ws, orch
    finally:
        await orch.aclose()
        await ws.close()


async def test_stable_scratchpad_moves_into_the_pinned_message(tmp_path, fake_llm):
    async with cache_layout(tmp_path, fake_llm) as (ws, orch):
        await ws.ledger.set_scratchpad(ws.session, "1. read the code\n2. fix the bug")
        for n in range(STABLE_AFTER + 2):
            fake_llm.enqueue(Reply(text=f"answer {n}\n\n### STATE\nGoal: step {n}"))
            assert (await orch.run_turn(f"question {n}")).error is None
        first, last = fake_llm.chat_requests[0], fake_llm.chat_requests[-1]

        def holder(req):
            return next(m for m in req.messages if "2. fix the bug" in str(m["content"]))

        assert holder(first)["content"].startswith("## Context for the Current Request")
        assert holder(last)["content"].startswith("## Pinned Context")
        # At the head of the conversation: after the system text and the repository's
        # pairs, before the first question.
        where = [m is holder(last) for m in last.messages].index(True)
        first_question = next(
            i for i, m in enumerate(last.messages) if "question 0" in str(m["content"])
        )
        assert 0 < where < first_question
        assert all(m["role"] != "assistant" or "Repository" in str(last.messages[i - 1]["content"])
                   for i, m in enumerate(last.messages[:where]) if i)  # fmt: skip
        # STATE changed every turn: it stays in the context message.
        context = next(
            m["content"]
            for m in last.messages
            if str(m["content"]).startswith("## Context for the Current Request")
        )
        assert f"Goal: step {STABLE_AFTER}" in context
        assert "Goal: step" not in holder(last)["content"]


async def test_cache_control_parts_for_an_openrouter_anthropic_model(tmp_path, fake_llm):
    model = {"OPENAI_MODEL": "anthropic/claude-sonnet-4.5"}
    async with cache_layout(tmp_path, fake_llm, **model) as (ws, orch):
        await ws.ledger.set_scratchpad(ws.session, "keep going")
        for n in range(2):
            fake_llm.enqueue(Reply(text=f"answer {n}\n\n### STATE\nGoal: g{n}"))
            assert (await orch.run_turn(f"question {n}")).error is None
        sent = fake_llm.last_chat.messages
        marked = [
            i
            for i, m in enumerate(sent)
            if isinstance(m["content"], list)
            and any(p.get("cache_control") == {"type": "ephemeral"} for p in m["content"])
        ]
        assert 1 <= len(marked) <= 4
        assert sent[0]["role"] == "system" and 0 in marked
        # The last mark ends the history before the volatile context message.
        context = next(
            i
            for i, m in enumerate(sent)
            if "## Context for the Current Request" in str(m["content"])
        )
        assert marked[-1] == context - 1
        assert sent[marked[-1]]["content"][0]["text"].endswith("answer 0\n\n### STATE\nGoal: g0")
        assert all(not isinstance(m["content"], list) for m in sent[context:])


async def test_openai_models_get_no_cache_control(tmp_path, fake_llm):
    env = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": fake_llm.openai_base_url}
    ws = await open_workspace(tmp_path, env=env)
    orch = Orchestrator(ws)
    try:
        fake_llm.enqueue(Reply(text="ok"))
        assert (await orch.run_turn("hi")).error is None
        assert all(isinstance(m["content"], str) for m in fake_llm.last_chat.messages)
    finally:
        await orch.aclose()
        await ws.close()
