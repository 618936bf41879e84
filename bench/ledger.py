"""Ledger speed on 1k, 10k and 100k messages: append, last-5-groups read, open.

    python bench/ledger.py [--quick] [--dir DIR]

`--quick` runs only the 1k and 10k ledgers. Ledgers are built in a temporary
folder (or DIR, which must be on the disk you care about) with the realistic
shape described in bench/_common.py; every timed operation goes through the
public `Ledger` API:

- append: `ledger.append(session, group, [one message])`, each its own
  transaction (BEGIN IMMEDIATE ... COMMIT, then the row is read back), 200 times;
- last 5 groups: `ledger.window(session, 5)`, 200 reads over the sessions in turn;
- one group: `ledger.group_messages(session, gid)`, 200 reads of random groups;
- open: `Ledger.open(path)` (connect, pragmas, schema-version check), 10 times.

Targets: last-5-groups read <= 2 ms median at 100k messages; open <= 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import _common as c

from slop_tui.ledger import Ledger
from slop_tui.records import NewMessage

WINDOW_TARGET_MS = 2.0
OPEN_TARGET_MS = 100.0
READS = 200
APPENDS = 200
OPENS = 10


@dataclass
class Result:
    messages: int
    sessions: int
    build_s: float
    size: int
    append_ns: list[int]
    window_ns: list[int]
    group_ns: list[int]
    open_ns: list[int]
    window_rows: int
    plan: list[str]


async def _window_plan(ledger: Ledger, session: str) -> list[str]:
    """EXPLAIN QUERY PLAN of the exact SQL `ledger.window` runs (captured, not copied)."""
    captured: list[tuple[str, object]] = []

    def spy(real):
        async def read(sql, params=()):
            captured.append((sql, params))
            return await real(sql, params)

        return read

    readers = ("_all", "_tuples")  # window() reads plain tuples since 28e146f
    for name in readers:
        setattr(ledger, name, spy(getattr(ledger, name)))
    try:
        await ledger.window(session, 5)
    finally:
        for name in readers:
            delattr(ledger, name)
    sql, params = captured[-1]
    rows = await ledger._all("EXPLAIN QUERY PLAN " + sql, params)  # type: ignore[arg-type]
    depth = {0: -1}
    out = []
    for r in rows:
        node, parent, detail = r[0], r[1], r[3]
        depth[node] = depth.get(parent, -1) + 1
        out.append("  " * depth[node] + detail)
    return out


async def run(messages: int, sessions: int, folder: Path, seed: int) -> Result:
    path = folder / f"ledger-{messages}-{sessions}.db"
    names = c.session_names(sessions)
    t0 = time.perf_counter()
    ledger = await Ledger.open(path)
    groups = await c.fill(ledger, messages, names, seed=seed)
    await ledger.close()
    build_s = time.perf_counter() - t0
    size = c.db_bytes(path)

    open_ns = []
    for _ in range(OPENS):
        t = time.perf_counter_ns()
        led = await Ledger.open(path)
        open_ns.append(time.perf_counter_ns() - t)
        await led.close()

    ledger = await Ledger.open(path)
    try:
        active = [s for s in names if groups[s]]
        rnd = random.Random(seed)
        for s in active:  # warm the page cache once per session, like a running app
            await ledger.window(s, 5)

        window_ns, rows = [], 0
        for i in range(READS):
            s = active[i % len(active)]
            t = time.perf_counter_ns()
            got = await ledger.window(s, 5)
            window_ns.append(time.perf_counter_ns() - t)
            rows += len(got)
            assert len({m.group_id for m in got}) == min(5, len(groups[s]))

        group_ns = []
        for _ in range(READS):
            s = rnd.choice(active)
            gid = rnd.choice(groups[s])
            t = time.perf_counter_ns()
            got = await ledger.group_messages(s, gid)
            group_ns.append(time.perf_counter_ns() - t)
            assert len(got) == c.GROUP_SIZE

        plan = await _window_plan(ledger, active[0])

        body = c.corpus(seed + 1, 4000)
        append_ns = []
        for i in range(APPENDS):
            s = active[i % len(active)]
            text = body[: 200 + (i * 37) % 1800]
            msg = NewMessage("assistant", text, tokens=c.tokens_of(text))
            t = time.perf_counter_ns()
            await ledger.append(s, groups[s][-1], [msg])
            append_ns.append(time.perf_counter_ns() - t)
    finally:
        await ledger.close()
    return Result(
        messages,
        sessions,
        build_s,
        size,
        append_ns,
        window_ns,
        group_ns,
        open_ns,
        rows // READS,
        plan,
    )


def report(results: list[Result]) -> None:
    print(c.machine())
    print(
        f"medians over {APPENDS} appends, {READS} window reads, {READS} group reads, "
        f"{OPENS} opens; content 200-2000 chars, groups of 5 messages\n"
    )
    rows = []
    for r in results:
        rows.append(
            [
                f"{r.messages:,}",
                r.sessions,
                f"{r.messages // r.sessions:,}",
                c.mb(r.size),
                f"{r.build_s:.1f}",
                c.us(c.median(r.append_ns)),
                c.us(c.p95(r.append_ns)),
                c.ms(c.median(r.window_ns)),
                c.ms(c.p95(r.window_ns)),
                r.window_rows,
                c.ms(c.median(r.group_ns)),
                c.ms(c.median(r.open_ns)),
                c.ms(max(r.open_ns)),
            ]
        )
    print(
        c.table(
            [
                "messages",
                "sessions",
                "msgs/session",
                "DB MB",
                "build s",
                "append µs p50",
                "append µs p95",
                "last-5 ms p50",
                "last-5 ms p95",
                "rows read",
                "one group ms p50",
                "open ms p50",
                "open ms max",
            ],
            rows,
        )
    )

    base = results[0]
    print(f"\nratios to the {base.messages:,}-message ledger ({base.sessions} sessions):\n")
    ratio_rows = []
    for r in results[1:]:
        ratio_rows.append(
            [
                f"{r.messages:,} / {r.sessions}",
                f"{r.messages / base.messages:.0f}x",
                f"{c.median(r.append_ns) / c.median(base.append_ns):.2f}x",
                f"{c.median(r.window_ns) / c.median(base.window_ns):.2f}x",
                f"{c.median(r.group_ns) / c.median(base.group_ns):.2f}x",
                f"{c.median(r.open_ns) / c.median(base.open_ns):.2f}x",
            ]
        )
    print(
        c.table(
            ["messages / sessions", "size", "append", "last-5", "one group", "open"], ratio_rows
        )
    )

    print("\ntargets:")
    biggest = max(r.messages for r in results)
    for r in results:
        if r.messages == biggest:
            w = c.median(r.window_ns) / 1e6
            print(
                f"  last-5-groups read <= {WINDOW_TARGET_MS:g} ms median at {r.messages:,} "
                f"messages ({r.sessions} session(s)): {w:.2f} ms  "
                f"{c.verdict(w, WINDOW_TARGET_MS)}"
            )
    if biggest < 100_000:
        print("  (the 100k target is checked by the full run, without --quick)")
    worst_open = max(c.median(r.open_ns) for r in results) / 1e6
    print(
        f"  open <= {OPEN_TARGET_MS:g} ms: worst median {worst_open:.2f} ms  "
        f"{c.verdict(worst_open, OPEN_TARGET_MS)}"
    )

    last = results[-1]
    print(
        f"\nEXPLAIN QUERY PLAN of ledger.window(session, 5) "
        f"({last.messages:,} messages, {last.sessions} session(s)):"
    )
    for line in last.plan:
        print("  " + line)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the 1k and 10k ledgers")
    parser.add_argument("--dir", type=Path, help="build the ledgers here (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    plan = [(1_000, 20), (10_000, 20)]
    if not args.quick:
        plan += [(100_000, 20), (100_000, 1)]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="slop-bench-") as tmp:
        results = [await run(n, s, Path(tmp), args.seed) for n, s in plan]
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
