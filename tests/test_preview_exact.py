"""Between turns the preview is the request the next prompt produces: the same window
(the prompt's group is one of the N), tiers, focus placement, files and waiting
images, with the prompt's text where the panes show `NEXT_PROMPT`. Proven against
what the wire-format server then receives."""

from __future__ import annotations

import json

from PIL import Image

from slop_tui.commands import dispatch
from slop_tui.context.render import render_prompt
from slop_tui.providers import create_provider
from slop_tui.workspace import NEXT_PROMPT
from tests import test_engine_seeds
from tests.fakeserver import FakeToolCall, Reply

BIG = "\n".join(f"line {i:05d} of the big log: " + "x" * 40 for i in range(250))  # ~14 KB
VISION = {"fake-model": {"vision": True}}
make = test_engine_seeds.make  # the fixture: (ws, orch) on the fake model


async def _body(ws, text: str) -> dict:
    """The provider body of the preview's plan for a next prompt of `text`."""
    plan, _estimated = await ws.display_plan(next_prompt=text)
    cfg = ws.provider_configs()[(await ws.provider_choice()).name]
    provider = create_provider(cfg)
    try:
        return provider.request_body(plan.request)
    finally:
        await provider.aclose()


async def _history(orch, fake_llm) -> None:
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("read_file", {"path": "big.log"})]),
        Reply(text="read it"),
    )
    await orch.run_turn("read big.log")
    for i in range(2):
        fake_llm.enqueue(Reply(text=f"answer {i}"))
        await orch.run_turn(f"question {i}")


async def test_the_preview_between_turns_is_what_the_next_prompt_sends(make, fake_llm, tmp_path):
    (tmp_path / "big.log").write_text(BIG)
    (tmp_path / "notes.md").write_text("the notes file\n")
    Image.new("RGB", (64, 32), "red").save(tmp_path / "shot.png")
    ws, orch = await make(models=VISION)
    await _history(orch, fake_llm)
    await ws.ledger.set_window(ws.session, 3)
    assert (await dispatch(ws, "/file add notes.md")).ok
    assert (await dispatch(ws, "/image add shot.png")).ok

    shown, _ = await ws.display_plan()
    text = render_prompt(shown.request)
    assert shown.request.history[-1].text.endswith(NEXT_PROMPT)
    assert "[image: shot.png, 64×32" in text  # the waiting image goes with the next prompt
    # The window of 3 is the next prompt's group and the 2 before it: the tool
    # result's group has left it already (planned without the prompt, it would be in).
    assert "question 0" in text and "read big.log" not in text.split("--- history")[1]
    before, _ = await ws.display_plan(next_prompt=None)
    assert "read big.log" in render_prompt(before.request).split("--- history")[1]

    expected = await _body(ws, "the next question")
    fake_llm.enqueue(Reply(text="fine"))
    await orch.run_turn("the next question")
    sent = fake_llm.last.body
    assert json.dumps(sent["messages"], indent=1) == json.dumps(expected["messages"], indent=1)
    assert sent == expected


async def test_a_tool_result_in_the_window_is_previewed_at_the_tier_it_is_sent(
    make, fake_llm, tmp_path
):
    (tmp_path / "big.log").write_text(BIG)
    ws, orch = await make()
    await _history(orch, fake_llm)
    await ws.ledger.set_window(ws.session, 4)
    expected = await _body(ws, "and now?")
    fake_llm.enqueue(Reply(text="fine"))
    await orch.run_turn("and now?")
    sent = fake_llm.last.body
    assert sent == expected

    def tool_text(body: dict) -> str:
        (tool,) = [m for m in body["messages"] if m["role"] == "tool"]
        return tool["content"]

    assert "[TRUNCATED" in tool_text(sent) and len(tool_text(sent)) < len(BIG) / 10


async def test_while_a_turn_runs_the_panes_plan_has_no_next_prompt(make, fake_llm):
    ws, orch = await make()
    fake_llm.enqueue(Reply(text="first"))
    await orch.run_turn("first question")
    turn = await ws.ledger.open_turn(ws.session, "running now", strategy="openai")
    plan, _ = await ws.display_plan()
    assert plan.request.history[-1].text.endswith("running now")
    assert NEXT_PROMPT not in render_prompt(plan.request)
    await ws.ledger.clear_inflight(turn.id)
    plan, _ = await ws.display_plan()
    assert plan.request.history[-1].text.endswith(NEXT_PROMPT)
