"""What you see is what is sent, under random edits (hypothesis).

Random sequences of turns and edits (drop, restore, remove, undo, window
changes, the background upkeep that makes and remakes lane summaries) run
against a real workspace, the real orchestrator and the real OpenAI SDK on the
loopback fake server. The model echoes, in every summary it writes, the
prompts it was asked to summarise, as a real model would. After every step:

- the marks the group list draws are the plan's places, group by group;
- the marks say what the server receives: a group marked sent (● in the
  window) is in the request word for word; a group marked Σ is not, but its
  summary is; one marked ◌ (left the window, not summarized yet) is not either;
  a dropped or removed group is in no layer at all (not in a summary either);
- the request the server receives at a turn is, byte for byte, the preview's
  JSON body taken when the turn's prompt was written.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slop_tui.commands import dispatch
from slop_tui.config import load_config
from slop_tui.context.plan import (
    MARKS,
    PLACE_DROPPED,
    PLACE_SUMMARY,
    PLACE_WAITING,
    PLACE_WINDOW,
)
from slop_tui.orchestrator import Orchestrator, TurnStarted
from slop_tui.providers.retry import RetryPolicy
from slop_tui.ui.widgets.groups import GroupList
from slop_tui.workspace import NEXT_PROMPT, Workspace
from tests.fakeserver import Reply
from tests.workspace_fixtures import rough

TOKEN = re.compile(r"TOKEN\d{3}X")
ROOMY = {"fake-model": {"context_window": 200_000, "max_output": 2_000}}

# Turns weigh more: summaries need groups that left the window.
KINDS = ["turn", "turn", "turn", "drop", "restore", "remove", "undo", "window", "upkeep"]
STEPS = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 30)), min_size=3, max_size=14)


def model(request) -> Reply:
    """The scripted model: an answer, or a summary that names every prompt it was shown."""
    body = json.dumps(request.body, ensure_ascii=False)
    last = json.dumps(request.body["messages"][-1], ensure_ascii=False)
    if "**Conversation History:**" in last or "context compaction request" in last:
        return Reply(
            text="<summary>covered " + " ".join(sorted(set(TOKEN.findall(body)))) + "</summary>"
        )
    return Reply(text="ok")


def split(body: dict) -> tuple[str, str]:
    """(system text, the conversation messages' text) of an OpenAI request body."""
    system = [m for m in body["messages"] if m["role"] in ("system", "developer")]
    rest = [m for m in body["messages"] if m["role"] not in ("system", "developer")]
    return json.dumps(system, ensure_ascii=False), json.dumps(rest, ensure_ascii=False)


async def preview_body(ws: Workspace) -> dict:
    """The preview's JSON view: the provider body of the plan it shows."""
    result = await dispatch(ws, "/context show --json")
    assert result.ok, result.text
    return result.data


def shown_marks(rows, plan) -> dict[int, str]:
    """The marks the workspace's group list draws for this plan."""
    groups = GroupList()
    groups.load_rows(rows, plan)
    return {row[0]: groups.row_text(row[0])[0] for row in rows}


class Run:
    def __init__(self, ws: Workspace, orch: Orchestrator, fake) -> None:
        self.ws, self.orch, self.fake = ws, orch, fake
        self.turns = 0
        self.tokens: dict[int, str] = {}  # group id -> its prompt's token
        self.removed: set[str] = set()  # tokens of removed or undone groups

    async def step(self, kind: str, n: int) -> None:
        ws = self.ws
        rows = await ws.ledger.group_rows(ws.session)
        gid = rows[n % len(rows)][0] if rows else None
        if kind == "turn":
            await self.turn()
        elif kind == "window":
            assert (await dispatch(ws, f"/context window {n % 5}")).ok
        elif kind == "upkeep":
            await self.orch.upkeep()
            await self.orch.wait_background()
        elif kind == "undo":
            last = await ws.ledger.last_group_id(ws.session)
            if (await dispatch(ws, "/undo")).ok and last is not None:
                self.removed.add(self.tokens[last])
        elif gid is not None:
            verb = {"drop": "/context drop", "restore": "/context restore"}.get(kind)
            if verb is None:
                assert (await dispatch(ws, f"/message remove {gid}")).ok
                self.removed.add(self.tokens[gid])
            else:
                assert (await dispatch(ws, f"{verb} {gid}")).ok

    async def turn(self) -> None:
        token = f"TOKEN{self.turns:03d}X"
        self.turns += 1
        previews: list[dict] = []

        async def on_event(event) -> None:
            if isinstance(event, TurnStarted):
                self.tokens[event.group_id] = token
                previews.append(await preview_body(self.ws))

        before = len(self.fake.chat_requests)
        outcome = await self.orch.run_turn(f"task {self.turns}: {token}", on_event)
        assert outcome.error is None, outcome.error
        await self.orch.wait_background()
        sent = [r for r in self.fake.chat_requests[before:] if "task " in json.dumps(r.body)]
        # The preview taken when the prompt was written is what the server received.
        assert sent and previews and sent[0].body == previews[0]

    async def check(self) -> None:
        """The marks drawn are the plan's, and they say what the server would get."""
        ws = self.ws
        rows = await ws.ledger.group_rows(ws.session)
        plan, _ = await ws.display_plan()
        exact = await ws.plan(next_prompt=NEXT_PROMPT)  # what the panes show between turns
        marks = shown_marks(rows, plan)
        body = await preview_body(ws)
        system, conversation = split(body)
        for gid, lane, _p, _n, _t, status, _c in rows:
            place = exact.group_place(gid, lane, status)
            assert plan.group_place(gid, lane, status) == place
            assert marks[gid] == MARKS[place.place], (gid, place)
            token = self.tokens[gid]
            if place.place == PLACE_WINDOW:
                assert token in conversation, (gid, place)
            elif place.place == PLACE_WAITING:
                assert token not in conversation, (gid, place)
            elif place.place == PLACE_SUMMARY:
                assert token not in conversation and token in system, (gid, place)
            elif place.place == PLACE_DROPPED:
                assert token not in conversation + system, (gid, place)
        for token in self.removed:  # undone and removed text is in no layer
            assert token not in conversation + system


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
# Derandomized: the suite runs the same 40 sequences every time (300 random ones passed
# when this was written; raise max_examples and drop derandomize to search further).
@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS)
def test_marks_and_preview_are_what_is_sent(fake_llm, steps) -> None:
    asyncio.run(_run(fake_llm, steps))


async def _run(fake, steps) -> None:
    fake.default_reply = model
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "OPENAI_API_KEY": "x",
            "OPENAI_BASE_URL": fake.openai_base_url,
            "OPENAI_MODEL": "fake-model",
        }
        config = load_config(db=str(Path(tmp) / ".slop" / "slop.db"), env=env, cwd=Path(tmp))
        config = dataclasses.replace(
            config, models=ROOMY, compaction={"lane_max_messages": 3, "checkpoint_interval": 0}
        )
        ws = await Workspace.open(config, count_tokens=rough, env=env)

        async def no_sleep(_seconds: float) -> None:
            return None

        orch = Orchestrator(ws, retry_policy=RetryPolicy(max_retries=0), sleep=no_sleep)
        run = Run(ws, orch, fake)
        try:
            await ws.ledger.set_window(ws.session, 2)
            for kind, n in [("turn", 0)] * 4 + steps:
                await run.step(kind, n)
                await run.check()
        finally:
            await orch.aclose()
            await ws.close()
            fake.default_reply = None
