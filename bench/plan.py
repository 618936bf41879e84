"""Building the context plan: window 5 on a 100,000-message ledger.

    python bench/plan.py [--quick] [--runs N] [--dir DIR]

The plan (`slop_tui.context.plan.build_plan`) is what every request and every
pane of the workspace is drawn from, so it is built after every turn, every
edit and every projection. Measured on a realistic ledger (`_common.fill`:
20 sessions, groups of five messages with tool calls, 200-2,000 characters
each), window 5, three states of the session:

- `summary`: a lane summary covers the rows older than the window but the last
  few groups (what a session looks like when lane summaries keep up);
- `no summary`: nothing summarised yet, so the newest 60 rows that left the
  window are sent word for word (the cap; the rest wait): the worst case;
- `compaction off`: the window alone (seed 000).

Per case: `build` is the pure function on records already read (the target),
`read + build` is `Workspace.plan()` (the ledger reads, memos, files, then
the build), and `display` is `Workspace.display_plan()` (the panes' counter).
Each is timed `--runs` times (default 5) of 40 calls each; the table gives the
median of the runs' medians and their range (min-max), and the p95 of all calls.
Token counts are characters / 4 (`rough`), so tokenisation is not measured.

Target: building the plan <= 5 ms median at window 5 with 100,000 messages.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import _common as c

from slop_tui.config import load_config
from slop_tui.context.assemble import AssemblyInputs, rough_tokens
from slop_tui.context.plan import (
    PlanInputs,
    PlanSettings,
    build_plan,
    head_summary,
    pending_cap,
)
from slop_tui.ledger import Ledger
from slop_tui.workspace import Workspace

TARGET_MS = 5.0
CALLS = 40


def rough(text: str) -> int:
    return (len(text) + 3) // 4


async def timed(fn: Callable[[], Awaitable[object]], runs: int) -> tuple[list[float], list[int]]:
    """(median ns of each run, every call's ns)."""
    for _ in range(3):
        await fn()
    medians, every = [], []
    for _ in range(runs):
        calls = []
        for _ in range(CALLS):
            t = time.perf_counter_ns()
            await fn()
            calls.append(time.perf_counter_ns() - t)
        medians.append(c.median(calls))
        every += calls
    return medians, every


async def pure_inputs(ws: Workspace) -> tuple[PlanInputs, PlanSettings]:
    """The records `Workspace.plan` reads, read once (so only the build is timed)."""
    sess = await ws.current()
    window = await ws.ledger.window(ws.session, sess.window_size, lane=sess.lane)
    comp = ws.compaction_settings()
    summaries = await ws.ledger.summaries(ws.session, sess.lane) if comp.enabled else []
    start = min(m.group_id for m in window)
    head = head_summary(summaries, start, sess.lane)
    backlog = []
    if comp.enabled:
        backlog = await ws.ledger.lane_backlog(
            ws.session,
            sess.lane,
            start,
            head.last_message_id if head else 0,
            pending_cap(comp),
            newest=True,
        )
    state = await ws.ledger.current_state(ws.session)
    inputs = AssemblyInputs(
        session=sess,
        messages=window,
        strategy="openai",
        state=state.content if state else None,
        scratchpad=sess.scratchpad,
        skills=await ws.skills(),
        tools=await ws.enabled_tools(),
    )
    settings = PlanSettings(
        context=ws.context_settings(), compaction=comp, model=ws.model_info("gpt-4o")
    )
    return PlanInputs(assembly=inputs, backlog=backlog, summaries=summaries), settings


async def case(db: Path, name: str, label: str, runs: int, compaction: dict) -> list[object]:
    config = load_config(db=str(db), env={}, cwd=db.parent)
    config = dataclasses.replace(config, compaction=compaction)
    ws = await Workspace.open(config, name, count_tokens=rough, env={})
    try:
        inputs, settings = await pure_inputs(ws)
        plan = build_plan(inputs, settings, rough_tokens)

        async def pure() -> None:
            build_plan(inputs, settings, rough_tokens)

        build, build_all = await timed(pure, runs)
        read, read_all = await timed(ws.plan, runs)
        display, display_all = await timed(ws.display_plan, runs)
        sess = await ws.current()
        return [
            label,
            f"{sess.message_count:,}",
            len(plan.window_groups),
            plan.pending_messages,
            plan.head.id if plan.head else "-",
            f"{plan.request_tokens:,}",
            f"{c.median(build) / 1e6:.2f} ({min(build) / 1e6:.2f}-{max(build) / 1e6:.2f})",
            c.ms(c.p95(build_all)),
            f"{c.median(read) / 1e6:.2f} ({min(read) / 1e6:.2f}-{max(read) / 1e6:.2f})",
            c.ms(c.p95(read_all)),
            f"{c.median(display) / 1e6:.2f} ({min(display) / 1e6:.2f}-{max(display) / 1e6:.2f})",
            c.ms(c.p95(display_all)),
            c.median(build) / 1e6,
        ]
    finally:
        await ws.close()


async def prepare(db: Path, messages: int, seed: int) -> str:
    """The ledger, and the session measured (window 5; a lane summary of all but the
    rows just outside its window, stored as the summary case needs it)."""
    names = c.session_names(20)
    ledger = await Ledger.open(db, count_tokens=rough)
    try:
        groups = await c.fill(ledger, messages, names, seed=seed)
        name = max(names, key=lambda s: len(groups[s]))
        await ledger.set_window(name, 5)
        covered = groups[name][:-8]  # three groups (15 rows) left between summary and window
        rows = await ledger.group_messages(name, covered[-1])
        summary = "## User Intent\n- refactor the parser\n" + "- a decision\n" * 40
        await ledger.add_summary(name, "main", "lane", [covered[0], rows[-1].id], summary)
        return name
    finally:
        await ledger.close()


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 10,000-message ledger")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="build the ledger here (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    messages = 10_000 if args.quick else 100_000
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="slop-bench-") as tmp:
        db = Path(tmp) / "plan.db"
        name = await prepare(db, messages, args.seed)
        rows.append(await case(db, name, "summary", args.runs, {}))
        # The same session without its summary: the newest 60 waiting rows are sent.
        ledger = await Ledger.open(db, count_tokens=rough)
        try:
            for s in await ledger.summaries(name):
                await ledger.discard_summary(name, s.id)
        finally:
            await ledger.close()
        rows.append(await case(db, name, "no summary", args.runs, {}))
        rows.append(await case(db, name, "compaction off", args.runs, {"enabled": False}))
    print(c.machine())
    print(
        f"window 5, ledger of {messages:,} messages in 20 sessions; {args.runs} runs of "
        f"{CALLS} calls; ms: median of the runs' medians (range), p95 of all calls\n"
    )
    headers = [
        "case",
        "session msgs",
        "window groups",
        "pending rows",
        "summary",
        "request tokens",
        "build ms",
        "build p95",
        "read+build ms",
        "read+build p95",
        "display ms",
        "display p95",
    ]
    print(c.table(headers, [r[:-1] for r in rows]))
    print("\ntargets:")
    for r in rows:
        value = r[-1]
        print(
            f"  building the plan <= {TARGET_MS:g} ms median at window 5 with {messages:,} "
            f"messages ({r[0]}): {value:.2f} ms  {c.verdict(value, TARGET_MS)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
