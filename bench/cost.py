"""What a long session costs in money, and how much of its input the prompt cache serves.

    python bench/cost.py [--turns N] [--runs N] [--policy NAME ...] [--detail]

Replays the scripted session of `bench/context_sim.py` (the real `Ledger`,
`Workspace` and `Orchestrator`, the simulated model of `SimProvider`) and sends
every request the engine makes, as the real OpenAI adapter writes it
(`OpenAIProvider.request_body`), through the real `openai` SDK to the
wire-format server of `tests/fakeserver.py`. The server simulates prompt
caching the way OpenAI documents it (`PrefixCache`): a prefix of at least
1,024 tokens (o200k_base) equal to one of a request seen before is served
from the cache, matched in 128-token steps. The usage it reports
(`prompt_tokens_details.cached_tokens`) is what the engine records, and each
call is priced with `slop_tui.pricing` as if it had gone to a real model
(`--model`, default gpt-4.1: $2 input, $0.50 cached input, $8 output per
million tokens).

Policies (context_sim's): `window` (the reference tool's last 5 groups with
the tiers, nothing else), `default` (slop-tui as shipped) and `default-cache`
(the same with `[context] layout = "cache"`: the cache-aware layout and its
stability tracker).

Measured per policy: the share of input tokens served from the cache on
steady turns (the ordinary phases, plant/work/ask, after the first turn) and
over all calls; the money cost per 100 turns (every call, background ones
included); the facts answerable in the turns that ask for them (context_sim's
check). `--runs` repeats each policy; the figures are the median and range.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import context_sim  # noqa: E402
import sim_script  # noqa: E402

from slop_tui.context.tokens import get_encoding  # noqa: E402
from slop_tui.pricing import price_call  # noqa: E402
from slop_tui.providers.base import ProviderReply  # noqa: E402
from slop_tui.providers.config import ProviderConfig  # noqa: E402
from slop_tui.providers.openai_provider import OpenAIProvider  # noqa: E402
from tests.fakeserver import FakeLLMServer, PrefixCache  # noqa: E402

STEADY = ("plant", "work", "ask")
TARGET_CACHED_PCT = 70


@dataclass
class Call:
    turn: int
    phase: str
    kind: str
    prompt: int
    cached: int
    completion: int


@dataclass
class Wire:
    """The fake server, its prefix cache and an SDK client, for one policy run."""

    server: FakeLLMServer
    model: str
    cache: PrefixCache = field(init=False)
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        enc = get_encoding()
        self.cache = PrefixCache(lambda text: enc.encode(text, disallowed_special=()))
        self.server.reset()
        self.server.default_reply = self.cache
        cfg = ProviderConfig(
            name="wire",
            kind="openai",
            model=self.model,
            base_url=self.server.openai_base_url,
            api_key="x",
        )
        self.adapter = OpenAIProvider(cfg, trust_env=False)

    async def send(self, prompt) -> tuple[int, int]:
        """(prompt tokens, cached tokens) the server reports for the request."""
        body = self.adapter.request_body(prompt, self.model)
        for key in ("stream", "stream_options"):
            body.pop(key, None)
        client = self.adapter._get_client()
        done = await client.chat.completions.create(**body)
        return done.usage.prompt_tokens, done.usage.prompt_tokens_details.cached_tokens


WIRE: Wire | None = None


class CostSimProvider(context_sim.SimProvider):
    """The simulated model, whose every request also goes over the wire for its usage."""

    async def stream(self, prompt, model=None):
        turn = self.turn
        async for item in super().stream(prompt, model):
            if isinstance(item, ProviderReply):
                kind = self.rec.requests[-1].kind  # the request this reply answers
                tokens, cached = await WIRE.send(prompt)
                WIRE.calls.append(
                    Call(turn.n, turn.phase, kind, tokens, cached, item.completion_tokens)
                )
                item = replace(item, prompt_tokens=tokens, cached_tokens=cached)
            yield item


@dataclass
class Run:
    policy: str
    label: str
    calls: list[Call]
    turns: int
    answerable: tuple[int, int]
    seconds: float

    def cached_pct(self, steady: bool) -> float:
        rows = [
            c
            for c in self.calls
            if not steady or (c.phase in STEADY and c.kind == "main" and c.turn > 1)
        ]
        total = sum(c.prompt for c in rows)
        return 100.0 * sum(c.cached for c in rows) / total if total else 0.0

    def cost(self, model: str, *, cached: bool = True) -> float:
        """USD of every call (without the cache discount when `cached` is False)."""
        total = 0.0
        for c in self.calls:
            priced = price_call(
                model=model,
                kind="openai",
                base_url=None,
                prompt_tokens=c.prompt,
                cached_tokens=c.cached if cached else 0,
                completion_tokens=c.completion,
            )
            if priced is None:
                raise SystemExit(f"{model}: no price in the table")
            total += priced.total
        return total

    def per_100(self, model: str) -> float:
        return self.cost(model) * 100 / self.turns


async def run_once(names: list[str], turns: int, model: str, server: FakeLLMServer) -> list[Run]:
    global WIRE
    context_sim.SimProvider = CostSimProvider  # run_policy builds the model it is given
    ask_from = max(10, turns - 10)
    plan = sim_script.build_plan(turns, ask_from=ask_from)
    out = []
    with tempfile.TemporaryDirectory(prefix="slop-cost-") as d:
        tmp = Path(d)
        project = tmp / "project"
        context_sim.write_project(plan, project)
        (tmp / "xdg").mkdir()
        for name in names:
            WIRE = Wire(server, model)
            policy = context_sim.POLICIES[name]
            t0 = time.perf_counter()
            res = await context_sim.run_policy(policy, plan, project, tmp, 1, False)
            out.append(
                Run(
                    name,
                    policy.label,
                    WIRE.calls,
                    turns,
                    res.answerable(),
                    time.perf_counter() - t0,
                )
            )
            await WIRE.adapter.aclose()
    return out


def _median(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    if max(values) - min(values) < 1e-9:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def report(runs: list[list[Run]], model: str, turns: int) -> str:
    by: dict[str, list[Run]] = {}
    for batch in runs:
        for r in batch:
            by.setdefault(r.policy, []).append(r)
    lines = [
        f"{turns} turns of bench/context_sim.py's script, {len(runs)} run(s) per policy; "
        f"prices: {model} (slop_tui.pricing, genai-prices); median (range).",
        "",
        "| policy | cached, steady turns | cached, all calls | calls | USD per 100 turns "
        "| without the cache | answerable | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    window_cost = None
    if "window" in by:
        window_cost = statistics.median(r.per_100(model) for r in by["window"])
    for rs in by.values():
        first = rs[0]
        ok, n = first.answerable
        lines.append(
            f"| {first.label} | {_median([r.cached_pct(True) for r in rs], '{:.1f} %')} | "
            f"{_median([r.cached_pct(False) for r in rs], '{:.1f} %')} | "
            f"{len(first.calls)} | {_median([r.per_100(model) for r in rs], '${:.2f}')} | "
            f"{_median([r.cost(model, cached=False) * 100 / turns for r in rs], '${:.2f}')} | "
            f"{ok}/{n} | {_median([r.seconds for r in rs], '{:.0f}')} |"
        )
    lines.append("")
    cache = by.get("default-cache")
    if cache:
        pct = statistics.median(r.cached_pct(True) for r in cache)
        verdict = "PASS" if pct >= TARGET_CACHED_PCT else "FAIL"
        lines.append(
            f"- cache-aware layout, cached share of input on steady turns ≥ "
            f"{TARGET_CACHED_PCT} %: {pct:.1f} % {verdict}"
        )
        if window_cost is not None:
            cost = statistics.median(r.per_100(model) for r in cache)
            ok, n = cache[0].answerable
            wok, _ = by["window"][0].answerable
            verdict = "PASS" if cost < window_cost and ok >= wok else "FAIL"
            lines.append(
                f"- cache-aware layout costs less than window-only, facts still answerable: "
                f"${cost:.2f} vs ${window_cost:.2f} per 100 turns, {ok}/{n} vs {wok}/{n} "
                f"answerable {verdict}"
            )
    return "\n".join(lines)


def detail(run: Run) -> str:
    rows = [f"## {run.label}: every call (turn, phase, kind, prompt, cached, %)"]
    for c in run.calls:
        pct = 100 * c.cached / c.prompt if c.prompt else 0
        rows.append(f"{c.turn:4} {c.phase:10} {c.kind:20} {c.prompt:8} {c.cached:8} {pct:5.1f}")
    return "\n".join(rows)


async def main_async(args) -> int:
    names = args.policy or ["window", "default", "default-cache"]
    runs = []
    with FakeLLMServer() as server:
        for i in range(args.runs):
            batch = await run_once(names, args.turns, args.model, server)
            runs.append(batch)
            # The table so far after every run: a long run cut short still reports.
            print(f"after run {i + 1}/{args.runs}:", flush=True)
            print(report(runs, args.model, args.turns), flush=True)
    if args.detail:
        for r in runs[0]:
            print()
            print(detail(r))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=60, help="turns of the script (default 60)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--model", default="gpt-4.1", help="the model whose prices apply")
    ap.add_argument("--policy", action="append", choices=["window", "default", "default-cache"])
    ap.add_argument("--detail", action="store_true", help="print every call of the first run")
    args = ap.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(main_async(args))
    return 130


if __name__ == "__main__":
    sys.exit(main())
