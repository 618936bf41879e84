"""The monkey, long: random keys, clicks, sentences and commands against the workspace.

    python bench/monkey.py --steps 20000 [--seed 1] [--provider openai|gemini]
    python bench/monkey.py --steps 1000 --runs 5      # steps/s: median and range

Drives the real `SlopApp` (Textual's Pilot, headless, 120x40) over a real
ledger in a temporary project, with the wire-format fake server
(tests/fakeserver.py) answering as the model; tests/monkey.py has the actions
and the invariants checked after every step (nothing lost, no orphan, every
request valid for its provider, the UI answers). Prints progress every 500
steps and a table: steps, violations, steps/s, requests, turns, messages seen,
live, in the trash, restarts. Target: 20,000 steps, 0 violations (recorded in
docs/reliability.md). Exit code 1 when a run broke an invariant.

Not part of `make bench` (bench/run_all.py): a 20,000-step run takes about an
hour on the 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakeserver import FakeLLMServer  # noqa: E402
from tests.monkey import Monkey, MonkeyResult  # noqa: E402

TARGET_STEPS = 20_000


async def one_run(steps: int, seed: int, provider: str, every: int) -> MonkeyResult:
    with FakeLLMServer() as server, tempfile.TemporaryDirectory(prefix="monkey-") as folder:
        monkey = Monkey(Path(folder), server, seed, provider=provider)
        shown = [0]

        def progress(r: MonkeyResult) -> None:
            if r.steps - shown[0] >= every:
                shown[0] = r.steps
                print(
                    f"  seed {seed}: {r.steps:>6} steps  {r.steps_per_second:5.1f} steps/s  "
                    f"{len(r.violations)} violations  {r.messages_live} live "
                    f"{r.messages_trashed} in the trash",
                    flush=True,
                )

        return await monkey.run(steps, progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=TARGET_STEPS)
    parser.add_argument("--seed", type=int, default=1, help="first seed (runs use seed, seed+1…)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--provider", choices=("openai", "gemini"), default="openai")
    parser.add_argument("--every", type=int, default=500, help="progress line every N steps")
    args = parser.parse_args(argv)
    results: list[tuple[int, MonkeyResult]] = []
    started = time.time()
    for n in range(args.runs):
        seed = args.seed + n
        result = asyncio.run(one_run(args.steps, seed, args.provider, args.every))
        results.append((seed, result))
        for v in result.violations[:20]:
            print(f"  seed {seed}: VIOLATION {v}", flush=True)
    print()
    print(f"## Monkey: {args.provider}, {args.steps:,} steps per run, {args.runs} run(s)")
    print()
    print(
        "| seed | steps | violations | steps/s | requests | prompts | messages seen | live "
        "| in the trash | emptied | restarts |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for seed, r in results:
        print(
            f"| {seed} | {r.steps:,} | {len(r.violations)} | {r.steps_per_second:.2f} | "
            f"{r.requests:,} | {r.turns:,} | {r.messages_seen:,} | {r.messages_live:,} | "
            f"{r.messages_trashed:,} | {r.emptied:,} | {r.restarts} |"
        )
    rates = [r.steps_per_second for _, r in results]
    violations = sum(len(r.violations) for _, r in results)
    steps = sum(r.steps for _, r in results)
    print()
    if len(rates) > 1:
        print(
            f"steps/s: median {statistics.median(rates):.2f}, range {min(rates):.2f}-"
            f"{max(rates):.2f} over {len(rates)} runs"
        )
    verdict = (
        "PASS" if violations == 0 and all(r.steps == args.steps for _, r in results) else "FAIL"
    )
    print(f"targets:\n  {steps:,} steps, {violations} violations (0 wanted): {verdict}")
    print(f"(wall time {time.time() - started:.0f} s)")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
