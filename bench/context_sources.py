"""The repository map and the file tree: build times, token fit, request build time.

    python bench/context_sources.py [--runs N] [--files N] [--dir DIR] [--against SRC]

Cases (each timed `--runs` times, default 5; median and range):

- `10k cold`: a generated repository of `--files` (10,000) Python files in
  nested folders (each a class with two methods and two functions, using
  names of five other files), mapped with no cache: list, parse, store in
  `.slop/repomap.db`, rank, render at the default budget (4,096 tokens);
- `10k warm`: a new `RepoMap` (as in a new process) over the store, watching
  as the app's is: read the snapshot, start the watcher on the listed
  folders, check the folders' times, stat every file (a file may have
  changed while the app was closed), rank, render (target <= 100 ms);
  `of which: look at the files` is the part spent reading the snapshot,
  starting the watcher, checking the folders and the stats; `then the first
  request's map`: in the app that look is the panes' first plan, made after
  the first frame, and the first request then takes the notifications and
  renders the map with its own token count (target <= 100 ms);
- `10k one-file change`: the watching map after one file's text changed (a
  new function): take the notifications (a sync file's own notification
  first), stat and parse that file, update the graph, render (target <= 50
  ms); `without notifications` the same change seen by a map that cannot
  watch (every file stat'ed);
- `project cold / warm`: the same on this repository;
- `fit`: the map's tokens (exact, o200k) against budgets of 1,024 to 8,192;
- `request, 2,000 messages`: `Workspace.plan()` over a ledger of 2,000
  messages (window: all of them) with every layer of the repository on (map,
  file tree, one `/file add` file), the map warm.

`--against SRC` (a folder holding another build's `slop_tui/`, e.g. `git
archive main slop_tui | tar -x -C SRC`, or a checkout such as /work/main)
times three maps side by side instead: this build with the project's
watcher process running (started once, before the rounds: a new process's
map asks it what changed since its stamps' token and stats only those
files), this build without it (every file stat'ed), and that build; each on
a generated repository and store of its own, each warm start a new process
(`repomap_process.py`), the three taking turns round by round, so all see
the same load (the load average is printed before and after).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c

from slop_tui.config import load_config
from slop_tui.context.tokens import default_counter
from slop_tui.repomap import RepoMap, default_budget
from slop_tui.workspace import Workspace

TARGET_WARM_MS = 100.0
TARGET_CHANGE_MS = 50.0


def generate(root: Path, files: int, seed: int = 3) -> list[str]:
    """A repository of `files` Python files, 50 per folder, each using five others' names."""
    rnd = random.Random(seed)
    paths = []
    for i in range(files):
        rel = f"pkg{i // 2500}/sub{(i // 50) % 50}/module_{i}.py"
        uses = [rnd.randrange(files) for _ in range(5)]
        body = [f"from pkg import helper_{u}, Service{u}\n" for u in uses]
        body.append(f"\n\nclass Service{i}:\n    def start_{i}(self, config):\n")
        body.append(f"        return helper_{uses[0]}(config)\n\n")
        body.append(f"    def stop_{i}(self):\n        return Service{uses[1]}()\n\n\n")
        body.append(f"def helper_{i}(value, *, retries=3):\n    return value\n\n\n")
        body.append(f"def _private_{i}():\n    return helper_{uses[2]}(1)\n")
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(body))
        paths.append(rel)
    (root / ".slop").mkdir(exist_ok=True)
    return paths


def build(root: Path, count, budget: int, watch: bool = True) -> tuple[float, RepoMap, int]:
    """One start: a new map over the store, refreshed and rendered."""
    t = time.perf_counter_ns()
    rm = RepoMap(root, root / ".slop", watch=watch)
    rm.refresh()
    out = rm.render(budget, count)
    return time.perf_counter_ns() - t, rm, out.tokens


def cold(root: Path, count, budget: int, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        for f in (root / ".slop").glob("repomap.db*"):
            f.unlink()
        ns, rm, _tokens = build(root, count, budget)
        rm.close()
        times.append(ns)
    return times


def warm(root: Path, count, budget: int, runs: int) -> tuple[list[float], list[float], list[float]]:
    """(total, look at the files, the next request's map) of `runs` warm starts."""
    build(root, count, budget)[1].close()
    times, scans, nexts = [], [], []
    for _ in range(runs):
        ns, rm, _tokens = build(root, count, budget)
        assert rm.parsed == 0, rm.parsed
        scans.append(rm.scan_ms * 1e6)
        # The app's order: the panes' plan makes the first look after the first frame;
        # the first request then takes the notifications and renders with its own count.
        t = time.perf_counter_ns()
        rm.refresh()
        rm.render(budget, lambda text: count(text))
        nexts.append(time.perf_counter_ns() - t)
        assert rm.watching and rm.looked == 0, rm.looked
        rm.close()
        times.append(ns)
    return times, scans, nexts


def one_change(
    root: Path, paths: list[str], count, budget: int, runs: int, watch: bool = True
) -> tuple[list[float], list[float]]:
    """(total, look at the files) of `runs` one-file changes seen by a running map."""
    ns, rm, _ = build(root, count, budget, watch)
    assert rm.watching == watch, rm.watch_error
    times, scans = [], []
    for i in range(runs):
        p = root / paths[(i * 37 + (0 if watch else 11)) % len(paths)]
        p.write_text(p.read_text() + f"\n\ndef added_{i}(x):\n    return x\n")
        t = time.perf_counter_ns()
        rm.refresh()
        rm.render(budget, count)
        times.append(time.perf_counter_ns() - t)
        scans.append(rm.scan_ms * 1e6)
        assert rm.parsed == 1, rm.parsed
        assert rm.looked == (1 if watch else len(rm.tags)), rm.looked
    rm.close()
    return times, scans


def row(name: str, times: list[float], target: float | None = None) -> list[str]:
    med = c.median(times) / 1e6
    lo, hi = min(times) / 1e6, max(times) / 1e6
    verdict = "" if target is None else f"{c.verdict(med, target)} (<= {target:g} ms)"
    print(f"  {name}: {med:.1f} ms [{lo:.1f}-{hi:.1f}]", file=sys.stderr, flush=True)
    return [name, f"{med:.1f}", f"{lo:.1f}-{hi:.1f}", verdict]


async def request_build(root: Path, runs: int) -> list[float]:
    """`Workspace.plan()` at 2,000 messages with the map, the tree and a file."""
    db = root / ".slop" / "slop.db"
    config = load_config(db=str(db), env={}, cwd=root)
    ws = await Workspace.open(config, "bench", env={})
    try:
        await c.fill(ws.ledger, 2000, ["bench"])
        await ws.ledger.set_window(ws.session, 0)
        await ws.ledger.add_context_file(ws.session, "README.md")
        await ws.plan()  # tokenizer, map and caches warm
        times = []
        for _ in range(runs):
            t = time.perf_counter_ns()
            plan = await ws.plan()
            times.append(time.perf_counter_ns() - t)
        names = [la.name for la in plan.request.layers]
        assert "repo_map" in names and "file_tree" in names and plan.request.files, names
        return times
    finally:
        await ws.close()


PROCESS_CASES = (
    ("warm", "files warm (a new process)", TARGET_WARM_MS),
    ("look", "of which: look at the files", None),
    ("stats", "files stat'ed by the warm start", None),
    ("next", "then the first request's map", TARGET_WARM_MS),
    ("change", "files one-file change", TARGET_CHANGE_MS),
    ("change_stat", "one-file change without notifications", None),
)


def against(other: Path, work: Path, files: int, budget: int, runs: int) -> None:
    """This build with and without the watcher process, and `other`, side by side,
    each warm start a new process."""
    from slop_tui.repomap import watcher_client

    builds = [
        ("this build, watcher process", c.ROOT, True),
        ("this build, no watcher", c.ROOT, False),
        (str(other), other.resolve(), False),
    ]
    script = Path(__file__).resolve().parent / "repomap_process.py"
    runtime = work / "rt"  # the watcher's socket: a folder of the bench's own
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "SLOP_REPO_WATCHER"}
    env["SLOP_RUNTIME_DIR"] = str(runtime)

    def run(src: Path, repo: Path, round_: int, keeper: bool) -> dict[str, float]:
        done = subprocess.run(
            [sys.executable, str(script), str(repo), str(budget), str(round_)]
            + (["keeper"] if keeper else []),
            env={**env, "PYTHONPATH": str(src)},
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout) if round_ >= 0 else {}

    repos = []
    keepers = []
    try:
        for i, (_name, src, keeper) in enumerate(builds):
            repo = work / f"gen{i}"
            generate(repo, files)
            run(src, repo, -1, keeper)  # the store, built cold by that build
            if keeper:
                os.environ["SLOP_RUNTIME_DIR"] = str(runtime)
                watcher_client.start(repo.resolve(), 3600)
                keepers.append(repo.resolve())
                while watcher_client.ask(repo.resolve(), None) is None:
                    time.sleep(0.05)
                run(src, repo, -1, keeper)  # a first look that takes the watcher's token
            repos.append(repo)
        load = os.getloadavg()[0]
        got: list[dict[str, list[float]]] = [{} for _ in builds]
        for r in range(runs):
            order = list(range(len(builds)))
            for i in order if r % 2 == 0 else order[::-1]:
                for key, ms in run(builds[i][1], repos[i], r, builds[i][2]).items():
                    got[i].setdefault(key, []).append(ms * 1e6)
    finally:
        for repo in keepers:
            watcher_client.stop(repo)
    n = f"{files // 1000}k" if files >= 1000 else str(files)
    rows = []
    for key, name, target in PROCESS_CASES:
        label = name if name.startswith(("of which", "then", "one-file")) else f"{n} {name}"
        cells = [label]
        for i in range(len(builds)):
            times = got[i].get(key)
            if not times:  # an older build does not count its stats
                cells.append("")
                continue
            med, lo, hi = c.median(times) / 1e6, min(times) / 1e6, max(times) / 1e6
            if key == "stats":
                cells.append(f"{med:,.0f}")
                continue
            verdict = f" {c.verdict(med, target)}" if target is not None else ""
            cells.append(f"{med:.1f} ({lo:.1f}-{hi:.1f}){verdict}")
        cells.append("" if target is None else f"<= {target:g} ms")
        rows.append(cells)
    print(
        f"Repository map, three maps in turns ({c.machine()}; {runs} runs; budget {budget:,}; "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end)\n"
    )
    print(c.table(["case", *(f"{name} ms" for name, _, _ in builds), "target"], rows))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--against", type=Path, default=None)
    args = ap.parse_args()
    count = default_counter().count
    count("warm the tokenizer")
    budget = default_budget(200_000)
    work = Path(tempfile.mkdtemp(prefix="slop-bench-map-", dir=args.dir))
    if args.against is not None:
        try:
            against(args.against, work, args.files, budget, args.runs)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    rows = []
    try:
        repo = work / "gen"
        paths = generate(repo, args.files)
        n = f"{args.files // 1000}k" if args.files >= 1000 else str(args.files)
        rows.append(row(f"{n} files cold", cold(repo, count, budget, args.runs)))
        times, scans, nexts = warm(repo, count, budget, args.runs)
        rows.append(row(f"{n} files warm", times, TARGET_WARM_MS))
        rows.append(row("of which: look at the files", scans))
        rows.append(row("then the first request's map", nexts, TARGET_WARM_MS))
        times, scans = one_change(repo, paths, count, budget, args.runs)
        rows.append(row(f"{n} files one-file change", times, TARGET_CHANGE_MS))
        rows.append(row("of which: take the notifications", scans))
        times, scans = one_change(repo, paths, count, budget, args.runs, watch=False)
        rows.append(row("one-file change without notifications", times))
        rows.append(row("of which: stat every file", scans))
        project = work / "project"
        shutil.copytree(
            c.ROOT,
            project,
            ignore=shutil.ignore_patterns(".git", ".venv", ".slop", "__pycache__", "snapshots"),
        )
        (project / ".slop").mkdir(exist_ok=True)
        rows.append(row("this project cold", cold(project, count, budget, args.runs)))
        rows.append(row("this project warm", warm(project, count, budget, args.runs)[0]))
        rows.append(
            row(
                "request, 2,000 messages, all layers",
                asyncio.run(request_build(project, args.runs)),
            )
        )
        fit = []
        rm = RepoMap(project, project / ".slop")
        rm.refresh()
        for b in (1024, 2048, 4096, 8192):
            out = rm.render(b, count)
            fit.append(
                [f"{b:,}", f"{out.tokens:,}", f"{out.tokens * 100 / b:.0f} %", out.files_shown]
            )
        files_mapped = len(rm.tags)
        rm.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"Repository map and file tree ({c.machine()}; {args.runs} runs; map budget {budget:,})\n"
    )
    print(c.table(["case", "median ms", "range ms", "target"], rows))
    print(f"\nThe map's fit on this project ({files_mapped} files mapped):\n")
    print(c.table(["budget", "map tokens", "of budget", "files shown"], fit))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    main()
