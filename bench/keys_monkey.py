"""Where keys land, long: a random click, then a sentence, thousands of times.

    python bench/keys_monkey.py --steps 5000 [--seed 1] [--seconds S]

tests/keys_monkey.py has the steps and the checks (the prompt holds the whole
sentence, the ledger is unchanged). Prints a table: steps, violations, steps/s,
and the first violations. Target: 5,000 steps, 0 unintended edits. Exit code 1
when a step broke a check. Not part of `make bench`: at about 3 steps a second
alone on the 2-core machine (fewer under load), 5,000 steps take half an hour or
more.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.keys_monkey import KeysMonkey  # noqa: E402


def report(result) -> None:
    rate = result.steps / result.seconds if result.seconds else 0.0
    print(
        f"  {result.steps} steps, {len(result.violations)} violations, {rate:.2f} steps/s",
        file=sys.stderr,
        flush=True,
    )


async def one_run(steps: int, seed: int, seconds: float | None):
    with tempfile.TemporaryDirectory(prefix="keys-monkey-") as folder:
        project = Path(folder)
        os.environ["SLOP_CONFIG"] = str(project / "no-config.toml")  # no provider keys
        for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_BASE_URL"):
            os.environ.pop(var, None)
        os.chdir(project)
        return await KeysMonkey(project, seed).run(steps, seconds=seconds, progress=report)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long")
    args = ap.parse_args()
    result = asyncio.run(one_run(args.steps, args.seed, args.seconds))
    rate = result.steps / result.seconds if result.seconds else 0.0
    limit = f" --seconds {args.seconds:g}" if args.seconds else ""
    print(f"# bench/keys_monkey.py --steps {args.steps} --seed {args.seed}{limit}\n")
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print("| steps | violations | steps/s | seconds | seed | commit |")
    print("|---:|---:|---:|---:|---:|---|")
    print(
        f"| {result.steps} | {len(result.violations)} | {rate:.2f} | {result.seconds:.0f}"
        f" | {args.seed} | {commit} |"
    )
    for line in result.violations[:20]:
        print(f"- {line}")
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
