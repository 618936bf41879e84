"""Where a slow key's time went, on the user's clock: bench/screen.py's key cases, traced.

    python bench/screen_trace.py [--runs N] [--presses N] [--app 2k] [--cases WORD,...]
                                 [--env VAR=VALUE ...] [--keep DIR] [--show]

bench/screen.py's measure (the installed `slop-tui` on a 120x40 pty read by pyte,
the same ledger, fake provider and key cases) with the app started with
bench/screen_trace_site on its PYTHONPATH: its `sitecustomize` records what the
app did (the input thread's read, every event-loop callback with its CPU time and
its wait for a core, the frames drawn and written, the collections) on the same
clock as the bench's. Each press is then taken apart:

- **input**: the key written → the app's input thread read it;
- **cpu**: the main thread's CPU time in the callbacks between the key and its frame;
- **core**: the time those callbacks waited for a core (`/proc/.../schedstat`);
- **handoff**: the frame handed to Textual's writer thread → written (0 when the
  event loop wrote it at once, `frames-written-at-once`);
- **stamp**: the frame written → the bench read it (the bench's own delay, and the
  kernel's passing of the bytes);
- **gc**: the app's collections in between.

A press over its target (16 ms idle, 33 ms while a reply streams) is counted under
its largest part. `--show` prints every slow press with what ran in it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import screen
import tui
from _term import Term

SITE = Path(__file__).resolve().parent / "screen_trace_site"
PARTS = ("input", "cpu", "core", "handoff", "stamp", "gc")


class Recorder:
    """Each measured press's send time, result and case (KeyCases.press wrapped)."""

    def __init__(self) -> None:
        self.presses: list[dict] = []
        self.sends: list[float] = []
        press, send, close = screen.KeyCases.press, Term.send, Term.close
        recorder = self

        def _press(self, case, key, probe_for, idle, rest=0.05):  # type: ignore[no-untyped-def]
            before = len(self.run.keys.get(case, []))
            start = time.perf_counter()
            press(self, case, key, probe_for, idle, rest)
            got = self.run.keys.get(case, [])
            if len(got) > before:
                sent = [t for t in recorder.sends if t >= start]
                if sent:
                    recorder.presses.append({"case": case, "ms": got[-1], "ts": sent[0]})

        def _send(self, data):  # type: ignore[no-untyped-def]
            t = send(self, data)
            recorder.sends.append(t)
            return t

        def _close(self) -> None:  # the app writes its trace, then ends
            try:
                os.kill(self.pid, signal.SIGUSR2)
                time.sleep(1.5)
            except OSError:
                pass
            close(self)

        screen.KeyCases.press = _press
        Term.send = _send
        Term.close = _close


def parts_of(press: dict, events: list) -> dict:
    ts = press["ts"]
    got = ts + press["ms"] / 1e3
    near = [e for e in events if ts - 0.05 <= e[1] <= got + 0.002]
    reads = [e for e in near if e[0] == "in" and e[1] >= ts - 0.0002]
    t_in = (reads[0][1] - ts) * 1e3 if reads else 0.0
    queued = [e for e in near if e[0] == "enq" and e[1] <= got]
    written = [e for e in near if e[0] == "write" and e[1] <= got + 0.0005]
    calls = [e for e in near if e[0] == "cb" and e[1] + e[2] / 1e3 > ts and e[1] < got]
    handoff = 0.0
    stamp = 0.0
    if written:
        stamp = max(0.0, (got - written[-1][1]) * 1e3)
        if queued and queued[-1][1] <= written[-1][1]:
            handoff = max(0.0, (written[-1][1] - queued[-1][1]) * 1e3)
    return {
        "input": t_in,
        "cpu": sum(e[3] for e in calls),
        "core": sum(e[4] for e in calls),
        "handoff": handoff,
        "stamp": stamp,
        "gc": sum(e[2] for e in near if e[0] == "gc" and ts <= e[1] <= got),
        "ran": [
            f"{e[3]}.{e[4]}:{e[2]:.1f}"
            for e in near
            if e[0] == "msg" and e[2] > 1.5 and e[1] + e[2] / 1e3 > ts and e[1] < got
        ]
        + [
            f"{e[3]}:{e[2]:.1f}"
            for e in near
            if e[0] == "timer" and e[2] > 1.0 and e[1] + e[2] / 1e3 > ts and e[1] < got
        ],
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(rows: dict[str, list[dict]], show: bool) -> None:
    print("| case | n | ms: median / p90 / max | " + " | ".join(PARTS) + " |")
    print("|---|---:|---|" + "---|" * len(PARTS))
    for case, rs in rows.items():
        ms = [r["ms"] for r in rs]
        cells = [
            f"{statistics.median(r[p] for r in rs):.1f} / {pct([r[p] for r in rs], 0.9):.1f}"
            for p in PARTS
        ]
        print(
            f"| {case} | {len(rs)} | {statistics.median(ms):.1f} / {pct(ms, 0.9):.1f} / "
            f"{max(ms):.1f} | " + " | ".join(cells) + " |"
        )
    print("\n(parts: median / p90 of all presses, ms)\n")
    total: Counter = Counter()
    for case, rs in rows.items():
        target = screen.KEY_TARGET_MS if "idle" in case else screen.KEY_STREAMING_TARGET_MS
        slow = [r for r in rs if r["ms"] > target]
        largest = Counter(max(PARTS, key=lambda p, r=r: r[p]) for r in slow)
        total.update(largest)
        mean = {p: sum(r[p] for r in slow) / (len(slow) or 1) for p in PARTS}
        print(
            f"{case}: {len(slow)} of {len(rs)} over {target:.0f} ms; largest part: "
            + ", ".join(f"{k} {v}" for k, v in largest.most_common())
            + "; their mean parts: "
            + ", ".join(f"{p} {mean[p]:.1f}" for p in PARTS)
        )
        if show:
            for r in slow:
                print(
                    f"    {r['ms']:6.1f} ms  "
                    + " ".join(f"{p} {r[p]:.1f}" for p in PARTS)
                    + "  "
                    + " ".join(r["ran"][:6])
                )
    print("\nslow presses by their largest part:", dict(total.most_common()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--presses", type=int, default=30)
    ap.add_argument("--app", default="2k", choices=["empty", "2k", "20k"])
    ap.add_argument("--cases", default="typing,pageup,palette,up in the groups")
    ap.add_argument("--env", action="append", default=[], metavar="VAR=VALUE")
    ap.add_argument("--keep", default="", help="work (and leave the traces) in this folder")
    ap.add_argument("--show", action="store_true", help="every slow press and what ran in it")
    ap.add_argument(
        "--dump", default="", help="write every press, its parts and the events around it (JSON)"
    )
    args = ap.parse_args()
    recorder = Recorder()
    work = Path(args.keep or tempfile.mkdtemp(prefix="slop-tui-screen-trace-"))
    work.mkdir(parents=True, exist_ok=True)
    template = work / "template.db"
    if not template.exists():
        asyncio.run(tui.build(template, False))
        screen.mark_ledger(template)
    fake, config = screen.streaming_provider(work)
    starter = screen.Starter(work, template, config)
    path = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH", "")) if p)
    starter.env.update(PYTHONPATH=path)
    starter.env.update(v.split("=", 1) for v in args.env)
    only = tuple(w for w in args.cases.split(",") if w)
    rows: dict[str, list[dict]] = defaultdict(list)
    dumped: list[dict] = []
    try:
        screen.measure_start(starter, args.app, "warmup", keys=0, timeout=60)
        for i in range(args.runs):
            traces = work / f"trace-{i}"
            starter.env["SCREEN_TRACE"] = str(traces)
            recorder.presses.clear()
            recorder.sends.clear()
            run = screen.measure_start(
                starter, args.app, f"trace-{i}", keys=args.presses, timeout=60, only=only
            )
            if run.note:
                print(f"run {i}: {run.note}", file=sys.stderr)
            events = []
            for f in work.glob(f"trace-{i}.*"):
                events += [json.loads(line) for line in f.read_text().splitlines()]
            events.sort(key=lambda e: e[1])
            for p in recorder.presses:
                rows[p["case"]].append({"ms": p["ms"], **parts_of(p, events)})
                if args.dump:
                    near = [e for e in events if p["ts"] - 0.6 <= e[1] <= p["ts"] + 0.6]
                    dumped.append({**p, "run": i, **rows[p["case"]][-1], "events": near})
            print(f"run {i + 1} of {args.runs}: {len(recorder.presses)} presses", file=sys.stderr)
    finally:
        fake.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumped))
    print(f"# {args.app}, {args.runs} start(s), {args.presses} presses a case and start")
    report(rows, args.show)


if __name__ == "__main__":
    main()
