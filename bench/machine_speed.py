"""How fast the machine runs a process: the same fixed work in many fresh processes.

    python bench/machine_speed.py [--runs 20] [--chunks 30]

Each run starts a new interpreter that times `--chunks` equal pieces of pure-Python
work (a loop of multiplications, ~10 ms each on a fast core) with its own CPU clock.
Prints, per process, the median of its chunks, and over the processes the median,
the range, the fastest and slowest quarter's medians and their ratio. On a machine
that runs every process at one speed the ratio is near 1.0; on the project's machine
the host at times runs a process at one of two speeds (~1.35-1.45× apart), which is
why a start-up figure there needs many interleaved starts (docs/performance.md, "At
times the host runs each process at one of two speeds"). The last column shows the
speed switching inside one process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import _common as c

# Run in each fresh process: the CPU milliseconds of each of N equal pieces of work.
CHILD = """
import json, sys, time
def piece():
    s = 0
    for i in range(150_000):
        s += i * i
    return s
times = []
for _ in range(int(sys.argv[1])):
    t = time.process_time()
    piece()
    times.append((time.process_time() - t) * 1000)
print(json.dumps(times))
"""


def one_process(chunks: int) -> list[float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(chunks)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="fresh processes (default 20)")
    ap.add_argument("--chunks", type=int, default=30, help="pieces of work in each (30)")
    args = ap.parse_args()
    load = os.getloadavg()
    per_process = [one_process(args.chunks) for _ in range(args.runs)]
    medians = [statistics.median(t) for t in per_process]
    ordered = sorted(medians)
    quarter = max(1, len(ordered) // 4)
    fast = statistics.median(ordered[:quarter])
    slow = statistics.median(ordered[-quarter:])
    # Inside one process: its slowest chunk against its fastest, the median over runs.
    inside = [max(t) / min(t) for t in per_process if min(t) > 0]
    print(f"# bench/machine_speed.py: {c.machine()}")
    print(
        f"load average {' '.join(f'{x:.2f}' for x in load)}; {args.runs} processes of "
        f"{args.chunks} equal pieces of work; CPU ms a piece\n"
    )
    print("each process's median, in order:", " ".join(f"{m:.1f}" for m in medians), "\n")
    rows = [
        [
            f"{statistics.median(medians):.1f} ms ({ordered[0]:.1f}–{ordered[-1]:.1f})",
            f"{fast:.1f} ms",
            f"{slow:.1f} ms",
            f"{slow / fast:.2f}×",
            f"{statistics.median(inside):.2f}× ({min(inside):.2f}–{max(inside):.2f})",
        ]
    ]
    headers = [
        "a piece, median of the processes",
        "fastest quarter",
        "slowest quarter",
        "slowest ÷ fastest",
        "inside one process: slowest ÷ fastest piece",
    ]
    print(c.table(headers, rows))


if __name__ == "__main__":
    main()
