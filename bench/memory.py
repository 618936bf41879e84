"""Memory while replies stream: the workspace app at 20,000 messages, 20 replies.

    python bench/memory.py [--runs N] [--replies N] [--size 2k|20k] [--deltas N] [--keep DIR]
    python bench/memory.py --diagnose [--replies N]   # where the Python heap grows

Every run is a fresh child process (this file with `--child`) that starts the
real app as `slop-tui` does (the collector held until the first screen, code
highlighting deferred, the tokenizer's rank cache in a private cache folder),
headless at 120x40, on a private copy of bench/tui.py's ledger. Its provider
is an OpenAI-compatible one pointed at tests/fakeserver.py, which runs in
this (the parent) process so its memory is not the app's: every request goes
through the real `openai` SDK and streams `--deltas` deltas of markdown (a
heading, a list, a fenced code block; bench/screen.py's stream). A reply is
typed into the prompt and sent with Enter, as a user would; the child waits
until that reply's turn has started and ended (turns are counted: `pilot.press`
returns only once the process looks idle, up to ~2 s after the key plus every
widget's queue, and a short turn can start and end inside that wait, so
waiting to see the app busy could wait forever), then until its background
job (after-reply compaction, lane summary) and the tokenizer's release
(`TurnController.release_tokenizer`, 5 s after the last exact count) have
ended, then `SETTLE_S` more without input, so the app's own collector
(ui/collector.py) runs its between-keys collection as it would for a user.

Measured at each point (shown, then after every reply): the resident set
(VmRSS from /proc/self/status: everything, the Python heap, native libraries'
memory and malloc's arenas alike) and, in separate runs, the Python heap
allocated since the screen was shown (`tracemalloc`, started once shown, so
its own overhead stays out of the RSS runs). Runs alternate: RSS, traced, RSS,
traced, ...; `--runs` of each. Reported: median and range per point, and the
slope per reply after the third (least squares over replies 3..N, per run);
the peak so far (VmHWM: the tokenizer is built during a turn and released
after it); and the time from Enter to the reply's first streamed text, for the
first reply (the SDK's import) and the later ones (a tokenizer built again).
A run in which a reply does not start or end within 300 s (`MEMORY_TIMEOUT`)
is left out (its state and every task's await chain printed), another is made
in its place (at most `--runs` more), and the report says how many were left
out.

`--first-reply`: what the first reply loads, step by step, each in a fresh
process that has imported the app first (as it has when shown): the RSS each
step adds (the `openai` SDK's import, its client, tiktoken's import, building
the o200k_base encoding, then a full collection and `malloc_trim`, then the
encoding released as the app releases it when idle), 5 runs.

`--diagnose`: one traced run that prints the 25 source lines whose live
allocations grew most between reply 3 and the last reply.

`--probe`: after each reply, where the memory is (glibc's heap in use and
free, pymalloc's arenas and the bytes in their used blocks, the objects the
collector tracks and those frozen); at the end, a deep collection timed, what
it finds unreachable by type (the garbage the frozen set held), the widgets
among it and what holds its Strips, then what it and `malloc_trim` give back.

Targets: <= 100 MB at 20,000 messages shown; <= 150 MB after 20 replies;
<= 0.5 MB per reply after the third.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
SETTLE_S = 1.6  # the collector's between-keys collection needs 1 s without input
SHOWN_TARGET_MB = 100.0
REPLIES_TARGET_MB = 150.0
SLOPE_TARGET_MB = 0.5
POINTS = ("shown", 1, 3, 10, 20)


# -- the child: one app, N replies ------------------------------------------------------


def rss_mb(field: str = "VmRSS") -> float:
    """VmRSS (now) or VmHWM (the peak so far) from /proc, in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def awaiting(task: asyncio.Task) -> list[str]:
    """Where a task waits, innermost last: its coroutines' `await` chain (a suspended
    task's own stack is one frame)."""
    where, coro = [], task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            where.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return where


class _Mallinfo2(__import__("ctypes").Structure):
    _fields_ = [
        (name, __import__("ctypes").c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_probe() -> dict:
    """Where the resident memory is, without changing it: glibc's heap (bytes in use
    and free in its arenas, mmapped blocks), pymalloc's arenas (allocated, and the
    bytes in their used blocks), the objects the collector tracks and the frozen ones."""
    import ctypes
    import gc
    import re

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    with tempfile.TemporaryFile("w+") as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()

    def field(name: str) -> int:
        found = re.search(rf"# {name}\s*=\s*([\d,]+)", text)
        return int(found.group(1).replace(",", "")) if found else -1

    mb = 2**20
    return {
        "malloc_used": info.uordblks / mb,
        "malloc_free": info.fordblks / mb,
        "mmapped": info.hblkhd / mb,
        "py_arenas": field("arenas allocated current"),
        "py_used": field("bytes in allocated blocks") / mb,
        "gc_tracked": len(gc.get_objects()),
        "frozen": gc.get_freeze_count(),
    }


def child(args: argparse.Namespace) -> None:
    from slop_tui.ui.collector import hold_full_collections

    hold_full_collections()
    from slop_tui.ui.startup import defer_for_first_screen

    defer_for_first_screen()
    import tracemalloc

    from slop_tui.context.tokens import use_rank_cache
    from slop_tui.ui.app import SlopApp

    use_rank_cache(Path(args.cwd) / "cache")
    points: list[dict] = []
    diagnose: list[str] = []
    snapshots: dict[int, tracemalloc.Snapshot] = {}

    def record(label: object, submit_s: float | None = None) -> None:
        point = {"at": label, "rss": rss_mb(), "peak": rss_mb("VmHWM"), "submit": submit_s}
        if args.trace:
            point["traced"] = tracemalloc.get_traced_memory()[0] / 2**20
        if args.probe:
            point.update(heap_probe())
        points.append(point)

    def running(app: SlopApp) -> bool:
        """The turn, the background job after it or the tokenizer's release still runs."""
        return bool(
            app.turns.busy
            or app.turns.phase
            or any(
                w.group in ("turn", "tokenizer-release") and not w.is_finished for w in app.workers
            )
        )

    async def until(app: SlopApp, check, what: str) -> None:
        deadline = time.monotonic() + float(os.environ.get("MEMORY_TIMEOUT", 300))
        while not check():
            if time.monotonic() > deadline:
                prompt = app.query_one("#prompt")
                for task in asyncio.all_tasks():  # where each waits: what keeps the reply
                    print(f"task {task.get_name()}: {' <- '.join(awaiting(task))}", file=sys.stderr)
                raise SystemExit(
                    f"timed out: {what} (phase {app.turns.phase!r}, busy {app.turns.busy}, "
                    f"asking {app.turns.asking}, prompt {prompt.text!r}, held "
                    f"{getattr(prompt, 'held', '?')!r}, focused {app.focused!r}, screen "
                    f"{app.screen!r}, workers {[(w.group, w.name, w.state.name) for w in app.workers]})"
                )
            await asyncio.sleep(0.02)

    async def drive(pilot) -> None:
        app = pilot.app
        deadline = time.monotonic() + 120
        while not app.ready:
            if app.startup_error or time.monotonic() > deadline:
                raise SystemExit(f"not started: {app.startup_error}")
            await asyncio.sleep(0.05)
        await asyncio.sleep(SETTLE_S)
        if args.trace:
            tracemalloc.start()
        record("shown")
        prompt = app.query_one("#prompt")
        first_text: list[float] = []
        on_event = app.turns._on_event

        async def timed(event) -> None:  # when the reply's first text arrives
            if event.kind == "text" and not first_text:
                first_text.append(time.perf_counter())
            await on_event(event)

        app.turns._on_event = timed
        turns_run = {"started": 0, "ended": 0}
        turn_counted = app.turns._turn_counted

        async def counted(text, reply_to) -> None:  # each turn's start and end, counted
            turns_run["started"] += 1
            try:
                await turn_counted(text, reply_to)
            finally:
                turns_run["ended"] += 1

        app.turns._turn_counted = counted
        screen = app.workspace_screen
        take_line = screen._take_line
        took: list[float] = []

        async def timed_take(prompt, text) -> None:  # how long the screen takes a line
            t0 = time.perf_counter()
            try:
                await take_line(prompt, text)
            finally:
                took.append(time.perf_counter() - t0)

        screen._take_line = timed_take
        for i in range(1, args.replies + 1):
            app.workspace_screen.action_focus_prompt()
            prompt = app.query_one("#prompt")  # the prompt now mounted, not a replaced one
            prompt.text = f"question {i}: how does the ledger window move?"
            first_text.clear()
            pressed = time.perf_counter()
            await pilot.press("enter")
            if turns_run["ended"] >= i:
                # pilot.press returns once the process looks idle (up to 1 s twice, then
                # every widget's queue): a short turn may have run whole by then.
                print(
                    f"reply {i}: the turn ended before pilot.press returned "
                    f"({time.perf_counter() - pressed:.2f} s after Enter; the screen took the "
                    f"line in {took[-1] if took else -1:.2f} s)",
                    file=sys.stderr,
                )
            await until(app, lambda i=i: turns_run["started"] >= i, f"reply {i} started")
            await until(
                app, lambda i=i: turns_run["ended"] >= i and not running(app), f"reply {i} ended"
            )
            await asyncio.sleep(SETTLE_S)
            record(i, first_text[0] - pressed if first_text else None)
            print(f"reply {i}: {points[-1]}", file=sys.stderr, flush=True)
            if args.diagnose and i == 2:  # deeper tracebacks, from here on (they are slow)
                tracemalloc.stop()
                tracemalloc.start(args.frames)
            if args.diagnose and i in (3, args.replies):
                snapshots[i] = tracemalloc.take_snapshot()
        if args.probe:  # what a deep collection and a trim would give back now
            import ctypes
            import gc
            from collections import Counter

            before = rss_mb()
            gc.unfreeze()
            gc.set_debug(gc.DEBUG_SAVEALL)
            t0 = time.perf_counter()
            gc.collect()
            took = time.perf_counter() - t0
            garbage = Counter(type(o).__qualname__ for o in gc.garbage)
            print(
                f"deep collection: {len(gc.garbage)} objects unreachable, {took * 1000:.0f} ms; "
                + ", ".join(f"{k} {v}" for k, v in garbage.most_common(30)),
                file=sys.stderr,
            )
            from textual.strip import Strip
            from textual.widget import Widget

            widgets = Counter()
            for o in gc.garbage:
                if isinstance(o, Widget):
                    widgets[
                        (
                            type(o).__name__,
                            "closed" if o._closed else "open",
                            len(o._styles_cache._cache),
                            len(o._box_model_cache),
                            len(getattr(o, "_lines", None) or ()),
                        )
                    ] += 1
            print(f"garbage widgets: {widgets.most_common(40)}", file=sys.stderr)
            ids = {id(o) for o in gc.garbage}
            holders = Counter()
            for strip in [o for o in gc.garbage if type(o) is Strip][:400]:
                for ref in gc.get_referrers(strip):
                    if id(ref) in ids:
                        holders[type(ref).__name__] += 1
            print(f"holders of garbage strips: {holders.most_common(15)}", file=sys.stderr)

            def chain(obj: object, depth: int = 8) -> str:
                """The garbage objects above `obj`, first referrer at each level; a
                dict names the key it holds the object under."""
                steps, seen = [], {id(obj)}
                for _ in range(depth):
                    refs = [r for r in gc.get_referrers(obj) if id(r) in ids and id(r) not in seen]
                    if not refs:
                        break
                    ref = refs[0]
                    label = type(ref).__qualname__
                    if isinstance(ref, dict):
                        keys = [k for k, v in ref.items() if v is obj]
                        label += f"[{keys[0]!r}]" if keys else "[value]"
                    steps.append(label)
                    seen.add(id(ref))
                    obj = ref
                return " <- ".join(steps)

            chains = Counter(chain(o) for o in [g for g in gc.garbage if type(g) is Strip][::25])
            for text, n in chains.most_common(12):
                print(f"  {n} x Strip <- {text}", file=sys.stderr)
            gc.set_debug(0)
            gc.garbage.clear()
            gc.collect()
            print(f"after it: {heap_probe()}", file=sys.stderr)
            after_gc = rss_mb()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            print(
                f"deep collection: {after_gc - before:+.1f} MB, then malloc_trim: "
                f"{rss_mb() - after_gc:+.1f} MB",
                file=sys.stderr,
            )
        if args.diagnose:
            stats = snapshots[args.replies].compare_to(snapshots[3], "traceback")
            for stat in stats[:30]:
                frames = [
                    f"{fr.filename.split('site-packages/')[-1].split('/wt/cost/')[-1]}:{fr.lineno}"
                    for fr in reversed(stat.traceback)
                ]
                diagnose.append(
                    f"{stat.size_diff / 1024:8.1f} KiB {stat.count_diff:7d} blocks  "
                    + " <- ".join(frames)
                )
        app.exit()

    os.chdir(args.cwd)
    app = SlopApp(
        db=args.db,
        session=args.session,
        user_themes=False,
        blink=False,
        cwd=Path(args.cwd),
        env={"SLOP_CONFIG": args.config},
    )
    app.run(headless=True, size=(120, 40), auto_pilot=drive)
    print(json.dumps({"points": points, "diagnose": diagnose}))


def first_reply_steps() -> None:
    """One process: the app imported, then what the first reply loads, one step at a time."""
    import ctypes
    import gc

    import slop_tui.ui.app  # noqa: F401  (what a shown app has imported)

    def client() -> None:
        import openai

        openai.AsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9")

    def encoding() -> None:
        import threading

        from slop_tui.context.tokens import get_encoding

        worker = threading.Thread(target=get_encoding)  # the app builds it in a thread
        worker.start()
        worker.join()

    def release() -> None:
        from slop_tui.context.tokens import release_encoding, trim_heap

        release_encoding()
        trim_heap()

    steps = [
        ("import openai", lambda: __import__("openai")),
        ("openai.AsyncOpenAI()", client),
        (
            "import slop_tui.providers.openai_provider",
            lambda: __import__("slop_tui.providers.openai_provider"),
        ),
        ("import tiktoken", lambda: __import__("tiktoken")),
        ("o200k_base encoding built", encoding),
        ("gc.collect()", gc.collect),
        ("malloc_trim(0)", lambda: ctypes.CDLL("libc.so.6").malloc_trim(0)),
        ("encoding released, then trim_heap() (as the app does when idle)", release),
    ]
    out = {"app imported": rss_mb()}
    for name, step in steps:
        before = rss_mb()
        step()
        out[name] = rss_mb() - before
    print(json.dumps(out))


def first_reply_report(runs: int) -> None:
    results = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, str(HERE), "--first-reply-child"],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
            env=dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp(prefix="slop-tui-memory-")),
        )
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    import _common as c

    rows = [[name, summary([r[name] for r in results])] for name in results[0]]
    print(f"# bench/memory.py --first-reply: {c.machine()}, {runs} runs, median (min–max)\n")
    print(c.table(["step", "RSS MB (first row: total; then added)"], rows))


# -- the parent: the ledger, the server, the runs, the table --------------------------------


def spawn(work: Path, template: Path, config: Path, args, tag: str, trace: bool) -> dict:
    db = work / f"run-{tag}.db"
    for p in work.glob(f"run-{tag}.db*"):  # a killed run's WAL would not match the copy
        p.unlink()
    shutil.copyfile(template, db)
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none", XDG_CACHE_HOME=str(work / "xdg"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env.update(v.split("=", 1) for v in args.env)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(var, None)
    cmd = [
        sys.executable,
        str(HERE),
        "--child",
        "--db",
        str(db),
        "--session",
        args.size,
        "--cwd",
        str(work),
        "--config",
        str(config),
        "--replies",
        str(args.replies),
    ]
    if trace:
        cmd.append("--trace")
    if args.diagnose:
        cmd += ["--diagnose", "--frames", str(args.frames)]
    if args.probe:
        cmd.append("--probe")
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, timeout=1800)
    for p in work.glob(f"run-{tag}.db*"):
        p.unlink()
    if done.returncode != 0:
        print(f"child {tag} failed ({done.returncode}); left out", file=sys.stderr, flush=True)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def slope(points: list[dict], key: str, first: int) -> float:
    """Least-squares MB per reply over replies `first`..last."""
    xs = [p["at"] for p in points if isinstance(p["at"], int) and p["at"] >= first]
    ys = [p[key] for p in points if isinstance(p["at"], int) and p["at"] >= first]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def summary(values: list[float], digits: int = 1) -> str:
    return (
        f"{statistics.median(values):.{digits}f} "
        f"({min(values):.{digits}f}–{max(values):.{digits}f})"
    )


def report(rss_runs: list[dict], traced_runs: list[dict], replies: int) -> str:
    import _common as c

    at = [p for p in POINTS if p == "shown" or p <= replies]
    rows = []
    for name, runs, key in (
        ("VmRSS, MB", rss_runs, "rss"),
        ("VmHWM (the peak so far), MB", rss_runs, "peak"),
        ("Python heap since shown, MB (tracemalloc)", traced_runs, "traced"),
    ):
        if not runs or any(key not in p for r in runs for p in r["points"]):
            continue
        row = [name]
        for label in at:
            row.append(
                summary([next(p[key] for p in r["points"] if p["at"] == label) for r in runs])
            )
        first = 3 if replies >= 5 else 1
        row.append(summary([slope(r["points"], key, first) for r in runs], 2))
        rows.append(row)
    headers = [
        "",
        *(("shown" if a == "shown" else f"after reply {a}") for a in at),
        "MB/reply after 3rd",
    ]
    return c.table(headers, rows)


def submit_times(rss_runs: list[dict]) -> str:
    """Enter to the reply's first streamed text: the first reply, and the later ones."""
    first = [p["submit"] for r in rss_runs for p in r["points"] if p["at"] == 1]
    later = [
        p["submit"]
        for r in rss_runs
        for p in r["points"]
        if isinstance(p["at"], int) and p["at"] > 1 and p.get("submit") is not None
    ]
    if not first or None in first or not later:
        return ""
    return (
        f"Enter to the first streamed text, s: reply 1 {summary(first, 2)}; "
        f"replies 2 on {summary(later, 2)} ({len(later)} replies)"
    )


def verdicts(rss_runs: list[dict], replies: int) -> list[str]:
    import _common as c

    def med(label: object) -> float:
        return statistics.median(
            next(p["rss"] for p in r["points"] if p["at"] == label) for r in rss_runs
        )

    out = [f"shown <= {SHOWN_TARGET_MB:.0f} MB: {c.verdict(med('shown'), SHOWN_TARGET_MB)}"]
    out.append(
        f"after reply {replies} <= {REPLIES_TARGET_MB:.0f} MB: "
        f"{c.verdict(med(replies), REPLIES_TARGET_MB)}"
    )
    if replies >= 5:
        s = statistics.median(slope(r["points"], "rss", 3) for r in rss_runs)
        out.append(
            f"<= {SLOPE_TARGET_MB} MB per reply after the third: {c.verdict(s, SLOPE_TARGET_MB)}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--session", help=argparse.SUPPRESS)
    ap.add_argument("--cwd", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--probe",
        action="store_true",
        help="after each reply, where the memory is (malloc's and pymalloc's heaps, the "
        "collector's objects); at the end, what a deep collection and a trim give back",
    )
    ap.add_argument("--runs", type=int, default=5, help="RSS runs, and as many traced runs (5)")
    ap.add_argument("--replies", type=int, default=20, help="streamed replies per run (20)")
    ap.add_argument("--size", default="20k", choices=["2k", "20k"], help="the session (20k)")
    ap.add_argument("--deltas", type=int, default=400, help="deltas per reply (400)")
    ap.add_argument("--diagnose", action="store_true", help="where the Python heap grows")
    ap.add_argument("--frames", type=int, default=12, help="--diagnose: traceback depth (12)")
    ap.add_argument("--keep", default="", help="work in this folder and keep it")
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="set in the app's environment (e.g. MALLOC_ARENA_MAX=2); repeatable",
    )
    ap.add_argument("--no-trace", action="store_true", help="only the RSS runs")
    ap.add_argument("--first-reply", action="store_true", help="what the first reply loads")
    ap.add_argument("--first-reply-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.first_reply_child:
        first_reply_steps()
        return
    if args.first_reply:
        sys.path.insert(0, str(HERE.parent))
        first_reply_report(args.runs)
        return

    sys.path.insert(0, str(HERE.parent))
    import _common as c  # noqa: F401  (puts the repository on sys.path)
    import screen
    import tui

    from tests.fakeserver import FakeLLMServer, Reply

    started = time.perf_counter()
    load = os.getloadavg()
    work = Path(args.keep or tempfile.mkdtemp(prefix="slop-tui-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    template = work / "template.db"
    if not template.exists():
        asyncio.run(tui.build(template, False))
    fake = FakeLLMServer().start()
    fake.default_reply = Reply(
        text=screen.stream_deltas(args.deltas), delay=0.002, prompt_tokens=5000
    )
    config = work / "config.toml"
    screen.write_config(config, fake.openai_base_url)
    rss_runs: list[dict] = []
    traced_runs: list[dict] = []
    try:
        if args.diagnose:
            result = spawn(work, template, config, args, "diagnose", trace=True)
            print("\n".join(result["diagnose"]))
            return
        warm = argparse.Namespace(**{**vars(args), "replies": 1})
        spawn(work, template, config, warm, "warm", trace=False)  # bytecode, page cache
        attempts = 0
        while len(rss_runs) < args.runs and attempts < 2 * args.runs:
            i, attempts = attempts, attempts + 1  # a failed run is left out and made again
            if run := spawn(work, template, config, args, f"rss-{i}", trace=False):
                rss_runs.append(run)
            if not args.no_trace and (
                run := spawn(work, template, config, args, f"traced-{i}", trace=True)
            ):
                traced_runs.append(run)
            print(f"run {i + 1} done ({len(rss_runs)} of {args.runs})", file=sys.stderr)
        failed = attempts - len(rss_runs)
    finally:
        fake.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"# bench/memory.py: {c.machine()}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in load)}")
    if failed:
        print(f"runs left out (a reply did not start or end in time): {failed}")
    if args.env:
        print(f"environment of the app: {' '.join(args.env)}")
    print(
        f"{args.size} session, {args.replies} replies of {args.deltas} deltas through the openai "
        f"SDK; {len(rss_runs)} RSS runs and {len(traced_runs)} traced runs, interleaved; "
        "median (min–max)\n"
    )
    print(report(rss_runs, traced_runs, args.replies))
    print()
    if line := submit_times(rss_runs):
        print(line + "\n")
    for line in verdicts(rss_runs, args.replies):
        print(line)
    print(
        f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"whole bench {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
