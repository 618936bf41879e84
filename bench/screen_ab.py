"""Two builds of slop-tui on the user's clock, side by side in one run.

    python bench/screen_ab.py [--runs N] [--sizes 2k,20k] [--keys N] [--cases WORD,...]
                              [--log FILE] [--busy N]
                              NAME=BIN_DIR NAME=BIN_DIR
    python bench/screen_ab.py --report LOG [LOG ...]

Each NAME=BIN_DIR is the `bin` folder of a virtualenv inside a checkout (the
ledger is written by that checkout's bench/tui.py and code, so each build
opens one of its own schema): this checkout's (`.venv/bin`) and, say, the
commit before a change, installed in a worktree of its own:

    git worktree add --detach ../base COMMIT
    (cd ../base && python3 -m venv .venv && .venv/bin/pip install -e .)
    python bench/screen_ab.py base=../base/.venv/bin new=.venv/bin

bench/screen.py's measure (a 120x40 pty read by pyte, the same ledger and
fake provider), started for every build and size in turn, in every run, with
the hello-world app once per run: the machine's noise falls on every build
alike. Prints, per build and size, the median (min-max) of the first useful frame
and of settled (bench/screen.py's two measures), each with its ratio to the
hello-world app's: the medians' ratio and the geometric means' ratio, each with
its standard deviation over bootstrap resamples of the starts (the machine runs a
process at one of two speeds, so a median of a few starts can land in either:
docs/performance.md), and the range of the per-run ratios; the CPU time until
settled, and with `--keys N`
each key case's p99 and median over the runs (N keys per case and run) and
the median (min-max) of each run's p99. `--busy N` measures with N other
processes spinning the CPU throughout (the hello-world app under the same load):
the ratios on a loaded machine. `--report LOG...` measures nothing and prints the
tables of `--log` files, their starts pooled.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c
import screen

RESAMPLES = 1000  # bootstrap resamples for a ratio's standard deviation

# Run by each build's own interpreter with its own bench/tui.py: the same ledger,
# written by that build's code.
BUILD = """
import asyncio, pathlib, sys
sys.path.insert(0, sys.argv[1])
import tui
asyncio.run(tui.build(pathlib.Path(sys.argv[2]), False))
"""


def _spread(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    values = [v * scale for v in values]
    return f"{statistics.median(values):.3f} {unit} ({min(values):.3f}–{max(values):.3f})"


def _resampled_sd(values: list[float], hello: list[float], estimate) -> float:
    """The standard deviation of `estimate(values) / estimate(hello)` over bootstrap
    resamples of both (seeded): how far the ratio would move with other starts of the
    same builds. The machine runs each process at one of two speeds, so a median of
    15 starts can land in either mode (docs/performance.md)."""
    rnd = random.Random(0)
    ratios = [
        estimate(rnd.choices(values, k=len(values))) / estimate(rnd.choices(hello, k=len(hello)))
        for _ in range(RESAMPLES)
    ]
    return statistics.stdev(ratios)


def _ratios(runs, hello, key: str) -> str:
    """The median's ratio to the hello-world app's median with its resampled standard
    deviation, the geometric means' ratio (steadier against the two speeds) with its
    own, and the range of the per-run ratios (each start against the hello-world start
    of the same run)."""
    values = [getattr(r, key) for r in runs if getattr(r, key)]
    base = [getattr(h, key) for h in hello if getattr(h, key)]
    if not values or not base:
        return ""
    pairs = [
        getattr(a, key) / getattr(b, key)
        for a, b in zip(runs, hello, strict=False)
        if getattr(a, key) and getattr(b, key)
    ]
    spread = f" ({min(pairs):.2f}–{max(pairs):.2f})" if len(pairs) > 1 else ""
    median = statistics.median(values) / statistics.median(base)
    geo = statistics.geometric_mean(values) / statistics.geometric_mean(base)
    if len(values) < 3 or len(base) < 3:
        return f"{median:.2f}×{spread}"
    sd_median = _resampled_sd(values, base, statistics.median)
    sd_geo = _resampled_sd(values, base, statistics.geometric_mean)
    return f"{median:.2f}× ±{sd_median:.2f}; geo {geo:.2f}× ±{sd_geo:.2f}{spread}"


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _log(path: str, i: int, name: str, size: str, run: screen.Run) -> None:
    """One start's figures as a JSON line: a long run can be read before it ends."""
    line = {
        "run": i,
        "build": name,
        "session": size,
        "first": run.first,
        "shown": run.shown,
        "cpu_shown": run.cpu_shown,
        "rss_shown_mb": run.rss_shown_mb,
        "keys": run.keys,
        "missed": run.missed,
        "note": run.note,
        "time": time.strftime("%H:%M:%S"),
        "load": os.getloadavg(),
    }
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="*", metavar="NAME=BIN_DIR")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="2k,20k", help="of empty, 2k, 20k")
    ap.add_argument("--keys", type=int, default=0, help="keys per case and run (0: none)")
    ap.add_argument(
        "--cases",
        default="",
        help="only the key cases whose name has one of these comma-separated words",
    )
    ap.add_argument(
        "--log",
        default="",
        help="append each start's figures to this file as a JSON line, as it ends",
    )
    ap.add_argument(
        "--busy",
        type=int,
        default=0,
        help="this many other processes spin the CPU throughout the measured starts",
    )
    ap.add_argument(
        "--report",
        nargs="+",
        metavar="LOG",
        help="measure nothing: print the tables of these `--log` files, their starts pooled",
    )
    args = ap.parse_args()
    if args.report:
        results, hello = _read_logs(args.report)
        print(f"# bench/screen_ab.py --report {' '.join(args.report)}")
        print(f"{len(hello)} run(s) read from the logs; median (min–max)\n")
        _tables(results, hello, keys=any(r.keys for rs in results.values() for r in rs))
        return
    if len(args.builds) < 1:
        ap.error("name at least one build: NAME=BIN_DIR")
    builds = [(n, str(Path(d).resolve())) for n, d in (b.split("=", 1) for b in args.builds)]
    for name, bindir in builds:
        if not (Path(bindir) / "slop-tui").exists():
            sys.exit(f"{name}: no slop-tui in {bindir}")
    sizes = args.sizes.split(",")
    load = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="slop-tui-screen-ab-"))
    fake, config = screen.streaming_provider(work)
    # Each build writes its own ledger with its own code (the same messages): a
    # build with a newer schema would migrate another build's ledger at every start.
    starters = {}
    for name, bindir in builds:
        template = work / f"template-{name}.db"
        bench = Path(bindir).parent.parent / "bench"  # the build's checkout: BIN_DIR/../..
        if not (bench / "tui.py").exists():
            sys.exit(
                f"{name}: no bench/tui.py in {bench.parent} (the venv must be in its checkout)"
            )
        subprocess.run(
            [str(Path(bindir) / "python"), "-c", BUILD, str(bench), str(template)], check=True
        )
        screen.mark_ledger(template)
        starters[name] = screen.Starter(work, template, config)
    starter = starters[builds[0][0]]  # the hello-world app needs no ledger
    results: dict[tuple[str, str], list[screen.Run]] = {}
    hello: list[screen.Run] = []
    try:
        for name, bindir in builds:  # bytecode and page cache; not counted
            screen.SLOP = Path(bindir) / "slop-tui"
            screen.measure_start(starters[name], sizes[0], f"warmup-{name}", keys=0, timeout=60)
        with c.busy(args.busy):
            for i in range(args.runs):
                for size in sizes:
                    order = builds[i % len(builds) :] + builds[: i % len(builds)]
                    for name, bindir in order:
                        screen.SLOP = Path(bindir) / "slop-tui"
                        run = screen.measure_start(
                            starters[name],
                            size,
                            f"{name}-{size}-{i}",
                            keys=args.keys,
                            timeout=60,
                            only=tuple(w for w in args.cases.split(",") if w),
                        )
                        results.setdefault((name, size), []).append(run)
                        if args.log:
                            _log(args.log, i, name, size, run)
                hello.append(
                    screen.measure_start(starter, "hello", f"hello-{i}", keys=0, timeout=60)
                )
                if args.log:
                    _log(args.log, i, "hello-world", "", hello[-1])
            end_load = os.getloadavg()
    finally:
        fake.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(f"# bench/screen_ab.py: {c.machine()}")
    busy = f", {args.busy} other processes spinning the CPU throughout" if args.busy else ""
    print(
        f"load average at start {' '.join(f'{x:.2f}' for x in load)}, at end "
        f"{' '.join(f'{x:.2f}' for x in end_load)}{busy}; {args.runs} run(s), "
        "builds interleaved; median (min–max)\n"
    )
    _tables(results, hello, keys=bool(args.keys))


def _read_logs(
    paths: list[str],
) -> tuple[dict[tuple[str, str], list[screen.Run]], list[screen.Run]]:
    """The starts of `--log` files as runs, per build and size, and the hello-world
    app's; a start's run number is made unique across the files (its pairing with the
    hello-world start of the same run is kept)."""
    results: dict[tuple[str, str], list[screen.Run]] = {}
    hello: list[screen.Run] = []
    for n, path in enumerate(paths):
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                run = screen.Run(
                    "hello" if d["build"] == "hello-world" else d["session"],
                    shown=d.get("shown"),
                    first=d.get("first"),
                    cpu_shown=d.get("cpu_shown"),
                    rss_shown_mb=d.get("rss_shown_mb"),
                    keys=d.get("keys") or {},
                    missed=d.get("missed") or {},
                    note=d.get("note", ""),
                    start=f"{n}-{d['run']}",
                )
                if d["build"] == "hello-world":
                    hello.append(run)
                else:
                    results.setdefault((d["build"], d["session"]), []).append(run)
    return results, hello


def _tables(
    results: dict[tuple[str, str], list[screen.Run]], hello: list[screen.Run], *, keys: bool
) -> None:
    hello_mb = [r.rss_shown_mb for r in hello if r.rss_shown_mb]
    rows = [
        [
            "hello-world app",
            "",
            _spread([r.first for r in hello if r.first]),
            "1.00×",
            _spread([r.shown for r in hello if r.shown]),
            "1.00×",
            "",
            f"{statistics.median(hello_mb):.0f} MB" if hello_mb else "",
        ]
    ]
    for (name, size), runs in results.items():
        first = [r.first for r in runs if r.first is not None]
        shown = [r.shown for r in runs if r.shown is not None]
        cpu = [r.cpu_shown for r in runs if r.cpu_shown is not None]
        mb = [r.rss_shown_mb for r in runs if r.rss_shown_mb is not None]
        rows.append(
            [
                name,
                size,
                _spread(first) if first else "not shown",
                _ratios(runs, hello, "first"),
                _spread(shown) if shown else "not shown",
                _ratios(runs, hello, "shown"),
                _spread(cpu) if cpu else "",
                f"{statistics.median(mb):.0f} MB ({min(mb):.0f}–{max(mb):.0f})" if mb else "",
            ]
        )
    headers = [
        "build",
        "session",
        "first useful frame",
        "÷ hello-world",
        "settled",
        "÷ hello-world",
        "CPU until settled",
        "VmHWM settled",
    ]
    print(c.table(headers, rows))
    if keys:
        cases = sorted({k for runs in results.values() for r in runs for k in r.keys})
        rows = []
        for case in cases:
            for (name, size), runs in results.items():
                keys = [ms for r in runs for ms in r.keys.get(case, [])]
                per_run = [_p99(r.keys[case]) for r in runs if r.keys.get(case)]
                if keys:
                    rows.append(
                        [
                            case,
                            name,
                            size,
                            f"{_p99(keys):.1f} ms",
                            f"{statistics.median(per_run):.1f} ms "
                            f"({min(per_run):.1f}–{max(per_run):.1f})",
                            f"{statistics.median(keys):.1f} ms",
                            f"{max(keys):.1f} ms",
                            str(len(keys)),
                        ]
                    )
        print()
        headers = ["key case", "build", "session", "p99", "p99 of each run", "median", "max", "n"]
        print(c.table(headers, rows))


if __name__ == "__main__":
    main()
