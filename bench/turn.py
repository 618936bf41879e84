"""Orchestrator overhead per turn, and streamed deltas handled per second.

    python bench/turn.py [--quick]

Both sides run in one process against the loopback wire-format server
(tests/fakeserver.py), replying at once, so the difference between a whole
turn and the provider call alone is what slop-tui adds: writing the user
message, reading the window, assembling, storing the answer and STATE.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slop_tui.config import load_config  # noqa: E402
from slop_tui.orchestrator import Orchestrator  # noqa: E402
from slop_tui.providers import stream_with_retries  # noqa: E402
from slop_tui.providers.base import Provider, ProviderReply, TextDelta  # noqa: E402
from slop_tui.records import NewMessage  # noqa: E402
from slop_tui.workspace import Workspace  # noqa: E402
from tests.fakeserver import FakeLLMServer, Reply  # noqa: E402

ANSWER = "Done.\n\n### STATE\nGoal: bench\nTechnical Anchors: port 8080"


class InstantProvider(Provider):
    """A provider that answers from memory: what remains of a turn is slop-tui's own cost."""

    name, strategy, model = "instant", "openai", "instant"

    def __init__(self, deltas: list[str]) -> None:
        self.deltas = deltas

    def request_body(self, prompt, model=None):
        return {}

    async def stream(self, prompt, model=None):
        for d in self.deltas:
            yield TextDelta(d)
        yield ProviderReply(
            text="".join(self.deltas),
            prompt_tokens=prompt.total_tokens,
            completion_tokens=len(self.deltas),
            finish_reason="stop",
        )

    async def list_models(self):
        return ["instant"]

    async def aclose(self):
        return None


async def populate(ws: Workspace, messages: int) -> None:
    """Groups of five messages (user, tool call, two results, answer) straight into the ledger."""
    body = "x" * 600
    for g in range(messages // 5):
        user = await ws.ledger.append_user(ws.session, f"prompt {g} " + body[:100])
        await ws.ledger.append(
            ws.session,
            user.group_id,
            [
                NewMessage(
                    role="assistant",
                    content="",
                    status="tool_call",
                    strategy="openai",
                    payload='{"role":"assistant","content":null,"tool_calls":[{"id":"c1",'
                    '"type":"function","function":{"name":"read_file","arguments":"{}"}}]}',
                    tool_call_id="c1",
                    tool_name="read_file",
                    tokens=20,
                ),
                NewMessage(
                    role="tool",
                    content="### TOOL_RESULT: read_file\n" + body * 3 + "\n\n---",
                    tool_call_id="c1",
                    tool_name="read_file",
                    strategy="openai",
                    tokens=450,
                ),
                NewMessage(
                    role="tool",
                    content="### TOOL_RESULT: read_file\n" + body + "\n\n---",
                    tool_call_id="c1",
                    tool_name="read_file",
                    strategy="openai",
                    tokens=150,
                ),
                NewMessage(role="assistant", content=f"answer {g}\n" + body[:200], tokens=50),
            ],
        )


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


async def main(quick: bool) -> None:
    runs = 10 if quick else 30
    ledger_size = 2_000 if quick else 10_000
    with FakeLLMServer() as srv, tempfile.TemporaryDirectory() as tmp:
        env = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": srv.openai_base_url}
        config = load_config(db=str(Path(tmp) / "bench.db"), env={}, cwd=Path(tmp))
        # The generated ledger has no summaries yet, so with compaction on every
        # turn would fold a 200-message slice of that backlog into the lane
        # summary (a one-off cost of importing history, not of a turn). The turn
        # itself is measured with compaction off; bench/context_sim.py measures
        # compaction in steady state.
        config = dataclasses.replace(config, compaction={"enabled": False})
        ws = await Workspace.open(config, "bench", env=env)
        await populate(ws, ledger_size)
        orch = Orchestrator(ws)
        provider, model = await orch.provider()
        srv.default_reply = Reply(text=ANSWER, chunk_size=16)

        # Warm up both paths (SDK import, tokenizer load, HTTP connection).
        await orch.run_turn("warm up")
        provider_ns, turn_ns = [], []
        for i in range(runs):
            prompt = await ws.prompt("openai")
            t0 = time.perf_counter_ns()
            async for _ in stream_with_retries(provider, prompt, model):
                pass
            provider_ns.append(time.perf_counter_ns() - t0)
            t0 = time.perf_counter_ns()
            await orch.run_turn(f"turn {i}")
            turn_ns.append(time.perf_counter_ns() - t0)

        deltas = 2_000 if quick else 5_000
        srv.default_reply = Reply(text=["tok "] * deltas)
        t0 = time.perf_counter_ns()
        async for _ in stream_with_retries(provider, await ws.prompt("openai"), model):
            pass
        raw_ns = time.perf_counter_ns() - t0
        seen = 0

        def count(event) -> None:
            nonlocal seen
            if event.kind == "text":
                seen += 1

        t0 = time.perf_counter_ns()
        await orch.run_turn("stream a lot", count)
        stream_ns = time.perf_counter_ns() - t0
        await orch.aclose()

        answer = [ANSWER[i : i + 16] for i in range(0, len(ANSWER), 16)]
        instant = Orchestrator(ws, provider_factory=lambda cfg: InstantProvider(answer))
        await instant.run_turn("warm up")
        instant_ns = []
        for i in range(runs):
            t0 = time.perf_counter_ns()
            await instant.run_turn(f"instant {i}")
            instant_ns.append(time.perf_counter_ns() - t0)
        flood = Orchestrator(ws, provider_factory=lambda cfg: InstantProvider(["tok "] * deltas))
        handled = 0

        def count_all(event) -> None:
            nonlocal handled
            if event.kind == "text":
                handled += 1

        t0 = time.perf_counter_ns()
        await flood.run_turn("flood", count_all)
        flood_ns = time.perf_counter_ns() - t0
        size = ws.ledger.path.stat().st_size
        await ws.close()

    p, t = statistics.median(provider_ns), statistics.median(turn_ns)
    print(
        f"# bench/turn.py ({'quick' if quick else 'full'}): ledger of {ledger_size:,} messages "
        f"({size / 1e6:.1f} MB), {runs} turns, loopback server replying at once\n"
    )
    print("| measure | value | target |")
    print("|---|---|---|")
    print(f"| provider call alone, median | {ms(p)} ms | |")
    print(f"| whole turn, median | {ms(t)} ms | |")
    print(f"| turn − provider call (loopback, noisy: server shares the GIL) | {ms(t - p)} ms | |")
    print(
        f"| **orchestrator overhead per turn** (instant in-memory provider), median | "
        f"{ms(statistics.median(instant_ns))} ms | ≤ 10 ms |"
    )
    print(
        f"| **deltas handled per second** (in-memory provider, {handled:,} deltas) | "
        f"{handled / (flood_ns / 1e9):,.0f} /s | ≥ 20,000 /s |"
    )
    print(
        f"| deltas per second through the orchestrator over loopback HTTP ({seen:,}) | "
        f"{seen / (stream_ns / 1e9):,.0f} /s | |"
    )
    print(
        f"| deltas per second, SDK stream alone over loopback HTTP | "
        f"{deltas / (raw_ns / 1e9):,.0f} /s | |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args().quick))
