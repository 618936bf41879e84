"""What reversible edits cost: the trash and the journal against a realistic ledger.

    python bench/edits.py [--quick]

A ledger of 100,000 messages (20,000 with --quick) in 10 sessions, filled by
`_common.fill`. Timed through the public `Ledger` API, each the median of
`RUNS` rounds (an edit and its restore alternate, so the ledger is the same
for every round):

- a turn's start: `open_turn` (the prompt with its in-flight record, and the
  redo stack cleared) plus the record's removal at the end, against the plain
  `append_user` it replaced (side by side in one loop);
- moving one group (5 messages and its STATE) to the trash and back;
- `/session clear` and `/session remove` of a 10,000-message session
  (2,000 with --quick) and their restore;
- `/redo` of an undo.

Prints one table; targets: a group's trash and restore each ≤ 20 ms, a turn's
start ≤ 1 ms more than before.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import _common as c

from slop_tui.records import EDIT_UNDO

RUNS = 9


async def timed(fn) -> float:
    t0 = time.perf_counter_ns()
    await fn()
    return time.perf_counter_ns() - t0


async def main(quick: bool) -> None:
    total = 20_000 if quick else 100_000
    sessions = c.session_names(10)
    with tempfile.TemporaryDirectory() as folder:
        ledger = await c.Ledger.open(Path(folder) / "slop.db")
        try:
            groups = await c.fill(ledger, total, sessions)
            big = "big"
            big_messages = total // 10
            await c.fill(ledger, big_messages, [big], seed=2)
            rows = []

            plain, opened = [], []
            for i in range(200):
                plain.append(await timed(lambda i=i: ledger.append_user("turns", f"q{i}")))

                async def open_and_close(i=i):
                    msg = await ledger.open_turn("turns", f"q{i}")
                    await ledger.clear_inflight(msg.id)

                opened.append(await timed(open_and_close))
            extra = c.median(opened) - c.median(plain)
            rows.append(("a turn's prompt: append_user (before)", c.ms(c.median(plain)), "", ""))
            rows.append(
                (
                    "a turn's prompt with its in-flight record, and its removal (now)",
                    c.ms(c.median(opened)),
                    "",
                    "",
                )
            )
            rows.append(
                (
                    "… what a turn's start costs more",
                    c.ms(extra),
                    "≤ 1 ms",
                    c.verdict(extra / 1e6, 1.0),
                )
            )

            session = sessions[0]
            gid = groups[session][len(groups[session]) // 2]
            trash, back = [], []
            for _ in range(RUNS):
                holder = {}

                async def to_trash(holder=holder):
                    holder["edit"] = await ledger.trash_group(session, gid, EDIT_UNDO)

                trash.append(await timed(to_trash))
                back.append(await timed(lambda h=holder: ledger.restore_edit(h["edit"].id)))
            for what, values in (
                ("a group (5 messages, its STATE) to the trash", trash),
                ("… and back (/trash restore)", back),
            ):
                value = c.median(values)
                rows.append((what, c.ms(value), "≤ 20 ms", c.verdict(value / 1e6, 20)))

            redo = []
            for _ in range(RUNS):
                await ledger.trash_group(session, gid, EDIT_UNDO)
                redo.append(await timed(ledger.redo))
            rows.append(("/redo of that undo", c.ms(c.median(redo)), "", ""))

            for what, move in (
                ("/session clear", ledger.clear_session),
                ("/session remove", ledger.trash_session),
            ):
                out, back = [], []
                for _ in range(3 if quick else 5):
                    holder = {}

                    async def take(holder=holder, move=move):
                        holder["edit"] = await move(big)

                    out.append(await timed(take))
                    back.append(await timed(lambda h=holder: ledger.restore_edit(h["edit"].id)))
                rows.append(
                    (f"{what} of a {big_messages:,}-message session", c.ms(c.median(out)), "", "")
                )
                rows.append(("… and its restore", c.ms(c.median(back)), "", ""))
        finally:
            await ledger.close()
    print(
        f"# bench/edits.py ({'quick' if quick else 'full'}): {total + big_messages:,} messages, "
        f"medians of {RUNS} rounds (sessions: 3-5)\n"
    )
    print(c.table(["measure", "median (ms)", "target", "result"], rows))
    print()
    print(c.machine())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args().quick))
