"""Event-loop stalls of one turn and its background job, and memory after the turn.

    python bench/background.py [--quick] [--runs N] [--trace] [--keep DIR]

The ledger is bench/tui.py's (`build`: an empty session, 2,000 and 20,000
messages in four-message groups), plus a copy of the 20,000-message session
with a 40-group window, whose history is above `compaction_trigger_tokens`,
so the after-reply compaction summarises too (with the default 5-group window
only the lane summary has work: the ~20,000 rows that left the window), and
the same with a 32k-token model (`slop-demo`), whose request is above the guard
ladder's `reduce_pct`, so the turn summarises before its request (the guard's
summarize step, inside "request assembly"), and one where the summary calls
answer nothing, so the extractive fallback runs.

Every run is a fresh child process on a private copy of the ledger, headless
(no Textual): the workspace is opened, one request assembled and counted (the
o200k tokenizer loaded) and every row of the session read once by an aggregate
(`Ledger.lanes`; the app's group list makes the same pass), so the process
holds what the app holds once a session is shown, SQLite's page cache included;
then one turn runs through the real `Orchestrator` with an in-memory provider
that streams the reply at `--rate` deltas/s and answers the compaction's
summary requests at once, and its background job (after-reply compaction,
lane summary) is awaited. A 10 ms heartbeat task records every gap between
its ticks; the longest gap overlapping each phase is that phase's stall:

- request assembly: `Orchestrator._planned_request` (ledger read, the context plan, guards)
- streaming: `Orchestrator._stream`
- persisting: `Orchestrator._finish` (answer, STATE, scratchpad, TurnFinished)
- after-reply compaction: `Compactor.after_reply`
- lane summary: `Compactor.lane_summary`
- rest of the turn: everything else (user message, provider choice, usage rows)

RSS is VmRSS from /proc/self/status before the turn and after the background
job, and VmHWM (the process's peak). CPU is the child's process time for the
turn plus its background job. `--trace` adds a tracemalloc run of the largest
session: the traced peak during the turn and the allocation sites alive at
that peak (tracemalloc slows everything, so stalls of that run are not shown).

Target: no stall above 50 ms; RSS after one turn at 20,000 messages
<= 200 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c

STALL_TARGET_MS = 50.0
RSS_TARGET_MB = 200.0
PHASES = [
    ("assembly", "request assembly"),
    ("streaming", "streaming"),
    ("persisting", "persisting"),
    ("after_reply", "after-reply compaction"),
    ("lane_summary", "lane summary"),
    ("other", "rest of the turn"),
]
# (label, session, window in groups or None for the default, summary calls answer
# nothing, the session's model: its limits decide the guard ladder)
CASES = [
    ("empty", "empty", None, False, "gpt-4o"),
    ("2,000 msgs", "2k", None, False, "gpt-4o"),
    ("20,000 msgs", "20k", None, False, "gpt-4o"),
    ("20,000 msgs, window 40", "20k", 40, False, "gpt-4o"),
    ("20,000 msgs, window 40, 32k model", "20k", 40, False, "slop-demo"),
    ("20,000 msgs, no model summary", "20k", None, True, "gpt-4o"),
]
SUMMARY_REPLY = (
    "<summary>\n1. **User Intent** - bench the background job\n"
    "2. **Technical Context** - sqlite ledger, port 8080\n"
    "7. **Current State** - measuring\n</summary>"
)


# -- the child: one measured turn ------------------------------------------------------


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


class _Clock:
    """Phase marks and heartbeat gaps, matched after the run."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, str]] = []
        self.rss: dict[str, float] = {}  # phase -> VmRSS when it last ended, MB
        self.gaps: list[tuple[float, float]] = []  # (start, end) between heartbeat ticks
        self.trace_peak: tuple[int, object] | None = None

    def mark(self, phase: str) -> None:
        if self.marks:
            self.rss[self.marks[-1][1]] = _status_mb("VmRSS")
        self.marks.append((time.perf_counter(), phase))

    async def heartbeat(self, trace: bool) -> None:
        import tracemalloc

        last = self.last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = self.last = time.perf_counter()
            self.gaps.append((last, now))
            last = now
            if trace:
                current = tracemalloc.get_traced_memory()[0]
                best = self.trace_peak[0] if self.trace_peak else 0
                if current > best + 2_000_000:  # a new high: keep what is alive now
                    self.trace_peak = (current, tracemalloc.take_snapshot())

    def watch(self, stop) -> None:
        """A thread: while the loop is stalled (no tick for 30 ms), sample every thread's
        stack every 5 ms; `where` counts samples per stack: the loop thread's (what holds
        the loop) and the worker threads' (`[worker]`: what holds the GIL meanwhile)."""
        import threading
        import traceback

        main = threading.main_thread().ident
        me = threading.get_ident()
        self.where: dict[str, int] = {}
        while not stop.is_set():
            time.sleep(0.005)
            if time.perf_counter() - getattr(self, "last", time.perf_counter()) < 0.03:
                continue
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                frames = traceback.extract_stack(frame)
                inner = frames[-1]
                if ident != main and inner.name in ("wait", "_worker", "run", "get"):
                    continue  # an idle worker
                own = [
                    f"{Path(f.filename).name}:{f.lineno} {f.name}"
                    for f in frames
                    if "slop_tui" in f.filename
                ][-4:]
                key = (
                    ("" if ident == main else "[worker] ")
                    + " < ".join(reversed(own))
                    + f"  [in {Path(inner.filename).name}:{inner.name}]"
                )
                self.where[key] = self.where.get(key, 0) + 1

    def stalls(self, end: float) -> dict[str, float]:
        """Longest gap (minus the 10 ms sleep) overlapping each phase, ms."""
        spans = [
            (t, self.marks[i + 1][0] if i + 1 < len(self.marks) else end, p)
            for i, (t, p) in enumerate(self.marks)
        ]
        out: dict[str, float] = {}
        for a, b in self.gaps:
            gap = max(0.0, (b - a - 0.01) * 1e3)
            for s, e, p in spans:
                if a < e and b > s:
                    out[p] = max(out.get(p, 0.0), gap)
        return out


def _wrap(owner: object, name: str, clock: _Clock, phase: str) -> None:
    fn = getattr(owner, name)

    async def timed(*args, **kwargs):
        clock.mark(phase)
        try:
            return await fn(*args, **kwargs)
        finally:
            clock.mark("other")

    setattr(owner, name, timed)


async def child(args: argparse.Namespace) -> dict:
    from slop_tui.config import load_config
    from slop_tui.context.tokens import get_encoding
    from slop_tui.orchestrator import Orchestrator
    from slop_tui.providers.base import Provider, ProviderReply, TextDelta
    from slop_tui.workspace import Workspace

    class BenchProvider(Provider):
        """Streams the turn's reply at `rate` deltas/s; summary requests get a reply at once."""

        name, strategy, model = "bench", "openai", "bench"
        streaming = False  # set while Orchestrator._stream runs

        def request_body(self, prompt, model=None):
            return {}

        async def stream(self, prompt, model=None):
            if not BenchProvider.streaming:
                answer = "" if args.extractive else SUMMARY_REPLY
                yield TextDelta(answer)
                yield ProviderReply(
                    text=answer,
                    prompt_tokens=prompt.total_tokens,
                    completion_tokens=40,
                    finish_reason="stop",
                )
                return
            parts = []
            t0 = time.perf_counter()
            for i in range(args.deltas):
                delay = t0 + i / args.rate - time.perf_counter()
                await asyncio.sleep(max(delay, 0))
                d = "word " if i % 40 else ".\n\n"
                parts.append(d)
                yield TextDelta(d)
            tail = "\n\n### STATE\nGoal: bench\nTechnical Anchors: port 8080\n"
            parts.append(tail)
            yield TextDelta(tail)
            yield ProviderReply(
                text="".join(parts),
                prompt_tokens=prompt.total_tokens,
                completion_tokens=args.deltas,
                finish_reason="stop",
            )

        async def list_models(self):
            return ["bench"]

        async def aclose(self):
            return None

    cwd = Path(args.db).parent
    config = load_config(db=args.db, env={}, cwd=cwd)
    ws = await Workspace.open(config, args.session, env={})
    if args.window:
        await ws.ledger.set_window(args.session, args.window)
    await ws.ledger.set_provider(args.session, "demo", args.model)
    get_encoding()
    # What the app has done once the session is shown: one request assembled and
    # counted, and one pass over every row of the session (its group list), which
    # leaves SQLite's page cache as warm as the app's.
    await ws.prompt()
    await ws.ledger.lanes(args.session)
    orch = Orchestrator(ws, provider_factory=lambda cfg: BenchProvider())
    clock = _Clock()
    _wrap(orch, "_planned_request", clock, "assembly")
    _wrap(orch, "_finish", clock, "persisting")
    _wrap(orch.compactor, "after_reply", clock, "after_reply")
    _wrap(orch.compactor, "lane_summary", clock, "lane_summary")
    stream = orch._stream

    async def streamed(*a, **k):
        BenchProvider.streaming = True
        clock.mark("streaming")
        try:
            return await stream(*a, **k)
        finally:
            BenchProvider.streaming = False
            clock.mark("other")

    orch._stream = streamed
    events: list[str] = []

    def emit(event) -> None:
        if event.kind == "compaction":
            events.append(f"{event.phase} {event.case}: {event.text[:160]}")
        elif event.kind == "error":
            events.append(f"error: {event.message}")

    if args.trace:
        import tracemalloc

        tracemalloc.start(12)
    rss_before = _status_mb("VmRSS")
    beat = asyncio.create_task(clock.heartbeat(args.trace))
    import threading

    stop = threading.Event()
    watcher = threading.Thread(target=clock.watch, args=(stop,), daemon=True)
    watcher.start()
    await asyncio.sleep(0.03)
    cpu0, t0 = time.process_time(), time.perf_counter()
    clock.mark("other")
    outcome = await orch.run_turn("bench: one more turn", emit)
    await orch.wait_background()
    clock.mark("done")
    t1, cpu1 = time.perf_counter(), time.process_time()
    await asyncio.sleep(0.03)
    beat.cancel()
    stop.set()
    watcher.join()
    rss_after = _status_mb("VmRSS")
    out = {
        "stalls": clock.stalls(t1),
        "rss_before": rss_before,
        "rss_after": rss_after,
        "rss_peak": _status_mb("VmHWM"),
        "rss_phases": clock.rss,
        "cpu_s": cpu1 - cpu0,
        "wall_s": t1 - t0,
        "error": outcome.error,
        "events": events,
        "where": sorted(clock.where.items(), key=lambda kv: -kv[1])[:8],
    }
    if args.trace:
        import tracemalloc

        out["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 1e6
        if clock.trace_peak is not None:
            size, snap = clock.trace_peak
            out["traced_high_mb"] = size / 1e6
            out["top"] = _top(snap)
        tracemalloc.stop()
    await orch.aclose()
    await ws.close()
    return out


def _top(snapshot, n: int = 12) -> list[str]:
    """The largest allocation sites alive in `snapshot`: the innermost slop_tui frame, or
    for the database thread (rows that aiosqlite fetched) the innermost frame of it."""
    stats = snapshot.statistics("traceback")
    by_site: dict[str, int] = {}
    for st in stats:
        frames = list(st.traceback)  # oldest first
        own = [f for f in frames if "slop_tui" in f.filename]
        if own:
            f = own[-1]
            site = f"{f.filename.split('slop_tui/', 1)[-1]}:{f.lineno}"
        else:
            f = frames[-1]
            site = f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.lineno}"
            if any("aiosqlite" in x.filename for x in frames):
                site += " (rows fetched in the aiosqlite thread)"
        by_site[site] = by_site.get(site, 0) + st.size
    ranked = sorted(by_site.items(), key=lambda kv: -kv[1])[:n]
    return [f"{size / 1e6:7.1f} MB  {site}" for site, size in ranked]


# -- the parent --------------------------------------------------------------------------


def spawn(
    template: Path,
    work: Path,
    session: str,
    window: int | None,
    extractive: bool,
    model: str,
    tag: str,
    args: argparse.Namespace,
    trace: bool = False,
) -> dict:
    db = work / f"run-{tag}.db"
    shutil.copyfile(template, db)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--db",
        str(db),
        "--session",
        session,
        "--deltas",
        str(args.deltas),
        "--rate",
        str(args.rate),
        "--model",
        model,
    ]
    if window:
        cmd += ["--window", str(window)]
    if extractive:
        cmd.append("--extractive")
    if trace:
        cmd.append("--trace")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLOP_", "OPENAI", "GEMINI"))}
    env["SLOP_CONFIG"] = str(work / "no-config.toml")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=env, timeout=900)
    for p in work.glob(f"run-{tag}.db*"):
        p.unlink()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one run per case, a short reply")
    ap.add_argument("--runs", type=int, default=None, help="runs per case (default 3)")
    ap.add_argument("--trace", action="store_true", help="also a tracemalloc run at 20,000")
    ap.add_argument(
        "--keep", default="", help="build the ledger in this folder and keep it (reused next time)"
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--db", default="", help=argparse.SUPPRESS)
    ap.add_argument("--session", default="", help=argparse.SUPPRESS)
    ap.add_argument("--window", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--extractive", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--deltas", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, default=200.0, help="streamed deltas per second")
    ap.add_argument("--model", default="gpt-4o", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args)), default=str))
        return
    args.deltas = args.deltas or (60 if args.quick else 200)
    runs = args.runs or (1 if args.quick else 3)
    from tui import build  # bench/tui.py's ledger, so both benches measure the same sessions

    work = Path(args.keep or tempfile.mkdtemp(prefix="slop-tui-bg-"))
    work.mkdir(parents=True, exist_ok=True)
    template = work / "template.db"
    started = time.perf_counter()
    load = os.getloadavg()
    try:
        if not template.exists():  # --keep DIR reuses the ledger built there
            asyncio.run(build(template, args.quick))
        results: dict[str, list[dict]] = {case[0]: [] for case in CASES}
        for i in range(runs):
            for label, session, window, extractive, model in CASES:
                results[label].append(
                    spawn(template, work, session, window, extractive, model, f"{i}", args)
                )
        traced = (
            spawn(template, work, "20k", None, False, "gpt-4o", "trace", args, trace=True)
            if args.trace
            else None
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(results, runs, args, load, traced)
    print(
        f"\nwhole bench {time.perf_counter() - started:.0f} s; load average at end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def report(results, runs, args, load, traced) -> None:
    print(f"# bench/background.py ({'quick' if args.quick else 'full'}): {c.machine()}")
    print(
        f"load average at start: {' '.join(f'{x:.2f}' for x in load)}. One turn per fresh "
        f"process, reply of {args.deltas} deltas at {args.rate:.0f}/s, then its background "
        f"job; median of {runs} run(s) per case (max in brackets).\n"
    )
    labels = [case[0] for case in CASES]
    rows = []

    def cell(vals: list[float], fmt: str) -> str:
        med = c.median(vals)
        return fmt.format(med) + (f" ({fmt.format(max(vals))})" if len(vals) > 1 else "")

    for key, name in PHASES:
        row = [f"longest stall, {name}"]
        worst = 0.0
        for label in labels:
            vals = [r["stalls"].get(key, 0.0) for r in results[label]]
            worst = max(worst, c.median(vals))
            row.append(cell(vals, "{:.0f} ms"))
        rows.append([*row, f"≤ {STALL_TARGET_MS:.0f} ms", c.verdict(worst, STALL_TARGET_MS)])
    for key, name in (
        ("rss_before", "RSS before the turn"),
        ("rss_after", "RSS after turn + job"),
        ("rss_peak", "peak RSS (VmHWM)"),
    ):
        row = [name] + [cell([r[key] for r in results[lb]], "{:.0f} MB") for lb in labels]
        big = c.median([r[key] for r in results["20,000 msgs"]])
        last = key == "rss_after"
        rows.append(
            [
                *row,
                f"≤ {RSS_TARGET_MB:.0f} MB at 20,000" if last else "",
                c.verdict(big, RSS_TARGET_MB) if last else "",
            ]
        )
    rows.append(
        ["CPU time, turn + job"]
        + [cell([r["cpu_s"] for r in results[lb]], "{:.2f} s") for lb in labels]
        + ["", ""]
    )
    rows.append(
        ["wall time, turn + job"]
        + [cell([r["wall_s"] for r in results[lb]], "{:.2f} s") for lb in labels]
        + ["", ""]
    )
    print(c.table(["measure", *labels, "target", "result"], rows))
    print()
    for label in labels:
        r = results[label][0]
        ends = ", ".join(
            f"{name} {r['rss_phases'][key]:.0f}" for key, name in PHASES if key in r["rss_phases"]
        )
        print(f"- {label}: VmRSS (MB) when each phase last ended: {ends}")
        for stack, n in r["where"]:
            print(f"    stalled {n * 5} ms in: {stack}")
        if r["error"]:
            print(f"- {label}: the turn ended with an error: {r['error']}")
        for e in r["events"]:
            if not e.startswith("started"):
                print(f"- {label}: {e}")
    if traced:
        print(
            f"\n## tracemalloc, 20,000 msgs: traced peak {traced['traced_peak_mb']:.1f} MB; "
            f"allocation sites alive at the highest heartbeat sample "
            f"({traced.get('traced_high_mb', 0):.1f} MB):\n"
        )
        for line in traced.get("top", []):
            print(f"    {line}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
