"""Building one request: ledger read plus context assembly, window 5 and full history.

    python bench/assembly.py [--quick] [--dir DIR]

`--quick` runs only the 1k and 10k ledgers (the 2,000-message full history
always runs). One measured request is what the orchestrator does before each
provider call:

    session = await ledger.session_or_default(name)
    rows    = await ledger.window(name, N)
    state   = await ledger.current_state(name)
    prompt  = assemble(AssemblyInputs(...), ContextSettings(window=N), rough_tokens)

with the seeded `planner` skill active, two enabled tools (so stored tool calls
are replayed, not replaced by placeholders), five memos and the session's
scratchpad. Token counts: the ledger stores each message's count when it is
written; here the engine counts layer text (and any message text it changed,
e.g. a truncated tool result) with `rough_tokens` (characters / 4), the cheap
counter, so o200k tokenisation is not part of the measured path.

Targets: <= 5 ms median for window 5 at 100k messages; <= 50 ms for
the full history of a 2,000-message session.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import _common as c

from slop_tui.context.assemble import AssemblyInputs, ContextSettings, assemble, rough_tokens
from slop_tui.context.prompt import Prompt, ToolSpec
from slop_tui.ledger import Ledger
from slop_tui.records import Memo, Skill

WINDOW5_TARGET_MS = 5.0
FULL_TARGET_MS = 50.0
RUNS_WINDOW = 200
RUNS_FULL = 50

TOOLS = (
    ToolSpec(
        "read_file",
        "Read a text file with line numbers.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec(
        "query_db",
        "Run a read-only SQL query on the ledger.",
        {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
    ),
)
MEMOS = tuple(
    Memo(i, f"Decision {i}: keep the ledger the only SQLite user.\nWhy: one writer.", ("arch",), 0)
    for i in range(1, 6)
)


@dataclass
class Case:
    label: str
    ledger_messages: int
    session_messages: int
    window: int
    runs: int
    read_ns: list[int]
    assemble_ns: list[int]
    total_ns: list[int]
    cpu_ns: list[int]  # process CPU time of the request (both threads): steadier on a busy machine
    prompt: Prompt
    stored_chars: int  # history characters as stored (window rows)


async def request(
    ledger: Ledger, name: str, window: int, skills: tuple[Skill, ...]
) -> tuple[Prompt, int, int, int]:
    """One request: returns the prompt, read ns, assemble ns and stored characters."""
    t0 = time.perf_counter_ns()
    session = await ledger.session_or_default(name)
    rows = await ledger.window(name, window)
    state = await ledger.current_state(name)
    t1 = time.perf_counter_ns()
    inputs = AssemblyInputs(
        session=session,
        messages=rows,
        strategy="openai",
        state=state.content if state else None,
        scratchpad=session.scratchpad,
        memos=MEMOS,
        skills=skills,
        tools=TOOLS,
    )
    prompt = assemble(inputs, ContextSettings(window=window), count_tokens=rough_tokens)
    t2 = time.perf_counter_ns()
    return prompt, t1 - t0, t2 - t1, sum(len(m.content) for m in rows)


async def measure(
    ledger: Ledger, label: str, total: int, name: str, window: int, runs: int
) -> Case:
    planner = await ledger.get_skill("planner")
    skills = (planner,) if planner else ()
    session = await ledger.get_session(name)
    assert session is not None
    for _ in range(3):  # warm-up: page cache, imports, first-call paths
        await request(ledger, name, window, skills)
    read_ns, assemble_ns, total_ns, cpu_ns = [], [], [], []
    prompt, stored = None, 0
    for _ in range(runs):
        cpu = time.process_time_ns()
        prompt, r, a, stored = await request(ledger, name, window, skills)
        cpu_ns.append(time.process_time_ns() - cpu)
        read_ns.append(r)
        assemble_ns.append(a)
        total_ns.append(r + a)
    assert prompt is not None
    groups = {m.group_id for m in prompt.messages if m.group_id is not None}
    expected = session.message_count // c.GROUP_SIZE if window == 0 else window
    assert len(groups) == expected, (len(groups), expected)
    return Case(
        label,
        total,
        session.message_count,
        window,
        runs,
        read_ns,
        assemble_ns,
        total_ns,
        cpu_ns,
        prompt,
        stored,
    )


async def window_case(messages: int, folder: Path, seed: int) -> Case:
    path = folder / f"assembly-{messages}.db"
    names = c.session_names(20)
    ledger = await Ledger.open(path)
    try:
        groups = await c.fill(ledger, messages, names, seed=seed)
        name = max(names, key=lambda s: len(groups[s]))  # a typical, well-filled session
        return await measure(ledger, "window 5", messages, name, 5, RUNS_WINDOW)
    finally:
        await ledger.close()


async def full_case(folder: Path, seed: int) -> Case:
    """Full history (window 0) of a 2,000-message session inside a 10k-message ledger."""
    path = folder / "assembly-full.db"
    ledger = await Ledger.open(path)
    try:
        await c.fill(ledger, 8_000, c.session_names(19), seed=seed)
        await c.fill(ledger, 2_000, ["long-session"], seed=seed + 1)
        return await measure(ledger, "full history", 10_000, "long-session", 0, RUNS_FULL)
    finally:
        await ledger.close()


def report(cases: list[Case]) -> None:
    print(c.machine())
    print(
        "one request = session + window + current STATE read, then assemble (openai strategy); "
        "token counts: rough_tokens (chars/4) for layer text and changed messages; "
        "cpu = process CPU time of the request (both threads), steadier than wall time "
        "on a busy machine\n"
    )
    rows = []
    for k in cases:
        tool_msgs = [m for m in k.prompt.messages if m.role == "tool"]
        cut = [m for m in tool_msgs if m.truncated]
        sent = sum(len(m.text) for m in k.prompt.messages)
        layers = sum(layer.tokens for layer in k.prompt.layers)
        rows.append(
            [
                k.label,
                f"{k.ledger_messages:,}",
                f"{k.session_messages:,}",
                k.runs,
                c.ms(c.median(k.read_ns)),
                c.ms(c.median(k.assemble_ns)),
                c.ms(c.median(k.total_ns)),
                c.ms(c.p95(k.total_ns)),
                c.ms(c.median(k.cpu_ns)),
                len(k.prompt.messages),
                f"{k.prompt.total_tokens:,}",
                f"{layers:,}",
                f"{len(cut)}/{len(tool_msgs)} ({len(cut) / max(1, len(tool_msgs)):.0%})",
                f"{1 - sent / max(1, k.stored_chars):.0%}",
            ]
        )
    print(
        c.table(
            [
                "case",
                "ledger msgs",
                "session msgs",
                "runs",
                "read ms p50",
                "assemble ms p50",
                "total ms p50",
                "total ms p95",
                "cpu ms p50",
                "prompt msgs",
                "prompt tokens",
                "layer tokens",
                "tool results truncated",
                "history chars cut",
            ],
            rows,
        )
    )

    windows = [k for k in cases if k.window == 5]
    if len(windows) > 1:
        base = windows[0]
        print(f"\nwindow 5, ratios to the {base.ledger_messages:,}-message ledger:\n")
        print(
            c.table(
                ["ledger msgs", "size", "read", "assemble", "total"],
                [
                    [
                        f"{k.ledger_messages:,}",
                        f"{k.ledger_messages / base.ledger_messages:.0f}x",
                        f"{c.median(k.read_ns) / c.median(base.read_ns):.2f}x",
                        f"{c.median(k.assemble_ns) / c.median(base.assemble_ns):.2f}x",
                        f"{c.median(k.total_ns) / c.median(base.total_ns):.2f}x",
                    ]
                    for k in windows[1:]
                ],
            )
        )

    print("\ntargets:")
    biggest = max(windows, key=lambda k: k.ledger_messages)
    w = c.median(biggest.total_ns) / 1e6
    print(
        f"  window 5 <= {WINDOW5_TARGET_MS:g} ms median at {biggest.ledger_messages:,} messages: "
        f"{w:.2f} ms  {c.verdict(w, WINDOW5_TARGET_MS)}"
    )
    if biggest.ledger_messages < 100_000:
        print("  (the 100k target is checked by the full run, without --quick)")
    for k in cases:
        if k.window == 0:
            f = c.median(k.total_ns) / 1e6
            print(
                f"  full history of {k.session_messages:,} messages <= {FULL_TARGET_MS:g} ms "
                f"median: {f:.2f} ms  {c.verdict(f, FULL_TARGET_MS)}"
            )


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the 1k and 10k ledgers")
    parser.add_argument("--dir", type=Path, help="build the ledgers here (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="slop-bench-") as tmp:
        folder = Path(tmp)
        cases = [await window_case(n, folder, args.seed) for n in sizes]
        cases.append(await full_case(folder, args.seed))
    report(cases)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
