"""Load: a ledger of 1,000,000 messages across 100 sessions, and what a user does on it.

    python bench/load.py [--quick] [--messages N] [--sessions N] [--runs N] [--dir DIR]
                         [--rebuild]

`--quick` is a smoke run on 100,000 messages with one TUI start. The ledger is
generated once and cached by its parameters (messages, sessions, seed and a
digest of the schema migrations) in DIR (default: <tmp>/slop-bench-load), so a
rerun reuses it; `--rebuild` builds it again. Generation: one 10,000-message
block is written by `_common.fill` (the realistic five-message groups of the
other benches: prompt, tool call with two calls, two results, answer with a
STATE block; 200-2,000 characters per content; groups spread at random over
the sessions), then copied with shifted ids by `INSERT ... SELECT` in SQLite
(one transaction per copy; the ledger's own triggers keep the per-session
totals), so no Python loop runs per row.

Every timed operation goes through the app's own code:

- open: `Ledger.open(path)` (connect, pragmas, schema check, in-flight
  recovery check) and `Workspace.open(config)` (plus settings, tool registry);
- window read: `ledger.window(session, 5)` over all sessions in turn;
- assembly: `Workspace.plan()` on the largest session, window 5 (ledger
  reads, memos, skills, tools, summaries, the rows that left the window and
  await a summary, then the context plan with the workspace's real token
  counter): the request built before each provider call;
- `/message list`, `/session list` and `/session activate NAME` (alternating
  between the largest session and another) through the command dispatcher, as
  typed;
- time to interactive: a fresh process of the workspace app on the largest
  session (bench/tui_child.py, as bench/tui.py spawns it: headless 120x40, the
  parent's spawn time as zero). "Interactive" is the first frame drawn after
  `app.ready` (ledger open, panes filled: keys are handled from then on);
  "fully shown" is the last frame before the screen went quiet. The child runs on
  the cached ledger itself (a 2 GB copy per start would dominate the run); the
  writes of the session switches and of the app (app_state, handoffs) are undone
  afterwards so the cache stays as built.

Targets: window-5 assembly <= 10 ms median; time to interactive <= 1.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import _common as c

from slop_tui.commands import dispatch
from slop_tui.config import load_config
from slop_tui.ledger import Ledger
from slop_tui.ledger.schema import MIGRATIONS, SCHEMA_VERSION
from slop_tui.workspace import Workspace

ASSEMBLY_TARGET_MS = 10.0
INTERACTIVE_TARGET_S = 1.5
BLOCK = 10_000  # messages written by `fill`; the rest are SQL copies of it
CHILD = Path(__file__).resolve().parent / "tui_child.py"


@dataclass
class Figures:
    messages: int
    sessions: int
    path: Path
    built_s: float | None  # None: the cached ledger was reused
    size: int = 0
    largest: str = ""
    largest_msgs: int = 0
    open_ns: list[int] = field(default_factory=list)
    ws_open_ns: list[int] = field(default_factory=list)
    window_ns: list[int] = field(default_factory=list)
    prompt_ns: list[int] = field(default_factory=list)
    prompt_msgs: int = 0
    prompt_tokens: int = 0
    list_ns: list[int] = field(default_factory=list)
    sessions_ns: list[int] = field(default_factory=list)
    switch_ns: list[int] = field(default_factory=list)
    tui: list[dict] = field(default_factory=list)


# --- the ledger -------------------------------------------------------------------------


def cache_path(folder: Path, messages: int, sessions: int, seed: int) -> Path:
    schema = hashlib.sha1(repr(MIGRATIONS).encode()).hexdigest()[:8]
    name = f"load-{messages}m-{sessions}s-seed{seed}-v{SCHEMA_VERSION}-{schema}.db"
    return folder / name


async def build(path: Path, messages: int, sessions: int, seed: int) -> float:
    """Write the ledger to a temporary name, then rename: a cache is never half-built."""
    if messages % BLOCK:
        raise SystemExit(f"--messages must be a multiple of {BLOCK:,}")
    tmp = path.with_name(path.name + ".building")
    for p in path.parent.glob(tmp.name + "*"):
        p.unlink()
    t0 = time.perf_counter()
    ledger = await Ledger.open(tmp)
    try:
        await c.fill(ledger, BLOCK, c.session_names(sessions), seed=seed)
        db = ledger._db
        counts = {}
        for table in ("messages", "state_versions", "usage"):
            row = await (await db.execute(f"SELECT MAX(id) FROM {table}")).fetchone()
            counts[table] = row[0]
        assert counts["messages"] == BLOCK, counts
        span = (BLOCK // c.GROUP_SIZE) * 30.0  # seconds of generated time per block
        copies = messages // BLOCK
        for k in range(1, copies):
            off, dt = k * BLOCK, k * span
            await db.execute("BEGIN IMMEDIATE")
            await db.execute(
                """INSERT INTO messages(id, session_id, group_id, lane, role, content, payload,
                       tool_call_id, tool_name, status, parsing_strategy, tokens, created_at)
                   SELECT id + :off, session_id, group_id + :off, lane, role, content, payload,
                       tool_call_id, tool_name, status, parsing_strategy, tokens, created_at + :dt
                   FROM messages WHERE id <= :n ORDER BY id""",
                {"off": off, "dt": dt, "n": BLOCK},
            )
            await db.execute(
                """INSERT INTO state_versions(session_id, group_id, content, created_at)
                   SELECT session_id, group_id + :off, content, created_at + :dt
                   FROM state_versions WHERE id <= :n ORDER BY id""",
                {"off": off, "dt": dt, "n": counts["state_versions"]},
            )
            await db.execute(
                """INSERT INTO usage(session_id, group_id, provider, model, prompt_tokens,
                       completion_tokens, cached_tokens, created_at)
                   SELECT session_id, group_id + :off, provider, model, prompt_tokens,
                       completion_tokens, cached_tokens, created_at + :dt
                   FROM usage WHERE id <= :n ORDER BY id""",
                {"off": off, "dt": dt, "n": counts["usage"]},
            )
            await db.execute("COMMIT")
            if k % 10 == 0 or k == copies - 1:
                el = time.perf_counter() - t0
                print(
                    f"  built {off + BLOCK:,} of {messages:,} messages ({el:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        row = await (
            await db.execute("SELECT COUNT(*), SUM(message_count) FROM sessions")
        ).fetchone()
        total = (await (await db.execute("SELECT COUNT(*) FROM messages")).fetchone())[0]
        assert row[0] == sessions and row[1] == total == messages, (row, total)
        await db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        await ledger.close()
    os.replace(tmp, path)
    for p in path.parent.glob(tmp.name + "-*"):
        p.unlink()
    return time.perf_counter() - t0


# --- measurements -----------------------------------------------------------------------


async def _timed(fn, runs: int, warm: int = 3) -> list[int]:
    for _ in range(warm):
        await fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        await fn()
        out.append(time.perf_counter_ns() - t)
    return out


async def measure(fig: Figures, work: Path, quick: bool) -> None:
    path = fig.path
    fig.size = c.db_bytes(path)

    async def open_close() -> None:
        await (await Ledger.open(path)).close()

    fig.open_ns = await _timed(open_close, 10, warm=1)

    config = load_config(db=str(path), env={}, cwd=work)

    async def ws_open_close() -> None:
        await (await Workspace.open(config, env={})).ledger.close()

    fig.ws_open_ns = await _timed(ws_open_close, 5, warm=1)

    ws = await Workspace.open(config, env={})
    try:
        rows = await ws.ledger._all("SELECT name, message_count FROM sessions")
        names = [r[0] for r in rows]
        fig.largest, fig.largest_msgs = max(((r[0], r[1]) for r in rows), key=lambda x: x[1])
        other = next(n for n in names if n != fig.largest)

        i = 0

        async def window() -> None:
            nonlocal i
            got = await ws.ledger.window(names[i % len(names)], 5)
            i += 1
            assert len({m.group_id for m in got}) == 5

        fig.window_ns = await _timed(window, 200)

        await ws.switch_session(fig.largest)
        prompt = None

        async def assemble() -> None:
            nonlocal prompt
            plan = await ws.plan()
            # The window's 5 groups; the request also carries the newest rows that left
            # it while no summary covers them (this ledger has none).
            assert len(plan.window_groups) == 5, plan.window_groups
            prompt = plan.request

        fig.prompt_ns = await _timed(assemble, 200)
        assert prompt is not None
        fig.prompt_msgs, fig.prompt_tokens = len(prompt.messages), prompt.total_tokens

        async def message_list() -> None:
            res = await dispatch(ws, "/message list")
            assert res.ok and len(res.data) == 10, res.text

        fig.list_ns = await _timed(message_list, 50)

        async def session_list() -> None:
            res = await dispatch(ws, "/session list")
            assert res.ok and res.text.count("\n") >= fig.sessions, res.text[:200]

        fig.sessions_ns = await _timed(session_list, 5, warm=1)

        targets = [other, fig.largest]
        j = 0

        async def switch() -> None:
            nonlocal j
            res = await dispatch(ws, f"/session activate {targets[j % 2]}")
            j += 1
            assert res.ok, res.text

        fig.switch_ns = await _timed(switch, 20 if not quick else 10, warm=2)
        await ws.switch_session(fig.largest)  # the TUI starts on it
    finally:
        await ws.ledger.close()  # not ws.close(): no exit handoff, no turn ran

    runs = 1 if quick else 3
    spawn_tui(path, fig.largest, work, "warmup")  # bytecode, page cache; not counted
    fig.tui = [spawn_tui(path, fig.largest, work, str(k)) for k in range(runs)]


def spawn_tui(db: Path, session: str, work: Path, tag: str) -> dict:
    """One fresh app process on the ledger (as bench/tui.py spawns it, without the copy)."""
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none", SLOP_CONFIG=str(work / "no-config.toml"))
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLOP_DB", "SLOP_SESSION"):
        env.pop(var, None)
    cmd = [sys.executable, str(CHILD), "--db", str(db), "--session", session, "--cwd", str(work)]
    t0 = time.time()
    proc = subprocess.run(
        [*cmd, "--t0", repr(t0)], capture_output=True, text=True, cwd=work, env=env, timeout=300
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"TUI child {tag} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(lines[-1])
    if out.get("exception") or not out.get("ok"):
        raise RuntimeError(f"TUI child {tag} did not finish: {json.dumps(out)[:2000]}")
    return out


async def snapshot_state(path: Path) -> dict:
    """What the measurements may write: app_state, and the newest handoff/compaction ids."""
    led = await Ledger.open(path)
    try:
        state = [tuple(r) for r in await led._all("SELECT key, value FROM app_state")]
        marks = {}
        for table in ("handoffs", "compaction_log", "summaries", "state_versions", "usage"):
            row = await led._one(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
            marks[table] = row[0]
        return {"state": state, "marks": marks}
    finally:
        await led.close()


async def restore_state(path: Path, snap: dict) -> None:
    led = await Ledger.open(path)
    try:
        async with led.transaction() as db:
            await db.execute("DELETE FROM app_state")
            await db.executemany("INSERT INTO app_state(key, value) VALUES (?, ?)", snap["state"])
            for table, mark in snap["marks"].items():
                await db.execute(f"DELETE FROM {table} WHERE id > ?", (mark,))
        await led._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        await led.close()


# --- report -----------------------------------------------------------------------------


def report(fig: Figures, quick: bool) -> None:
    print(f"# bench/load.py ({'quick' if quick else 'full'}): {c.machine()}")
    built = (
        f"built in {fig.built_s:.1f} s"
        if fig.built_s is not None
        else "reused from the cache (--rebuild builds it again)"
    )
    print(
        f"ledger: {fig.messages:,} messages in {fig.sessions} sessions, {c.mb(fig.size)} MB "
        f"(with -wal/-shm), {built}: {fig.path}"
    )
    print(
        f"largest session: {fig.largest} ({fig.largest_msgs:,} messages, "
        f"{fig.largest_msgs // c.GROUP_SIZE:,} groups); load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    )
    ms = c.ms
    rows = [
        ["database size", f"{c.mb(fig.size)} MB", "", "", ""],
        [
            "Ledger.open",
            ms(c.median(fig.open_ns)) + " ms",
            f"max {ms(max(fig.open_ns))} ms",
            "",
            "",
        ],
        [
            "Workspace.open",
            ms(c.median(fig.ws_open_ns)) + " ms",
            f"max {ms(max(fig.ws_open_ns))} ms",
            "",
            "",
        ],
        [
            "window read, last 5 groups (all sessions in turn)",
            ms(c.median(fig.window_ns)) + " ms",
            f"p95 {ms(c.p95(fig.window_ns))} ms",
            "",
            "",
        ],
    ]
    a = c.median(fig.prompt_ns) / 1e6
    rows.append(
        [
            f"**window-5 assembly** (Workspace.plan, {fig.prompt_msgs} messages, "
            f"{fig.prompt_tokens:,} tokens)",
            f"{a:.2f} ms",
            f"p95 {ms(c.p95(fig.prompt_ns))} ms",
            f"≤ {ASSEMBLY_TARGET_MS:g} ms",
            c.verdict(a, ASSEMBLY_TARGET_MS),
        ]
    )
    rows.append(
        [
            "/message list (dispatcher)",
            ms(c.median(fig.list_ns)) + " ms",
            f"p95 {ms(c.p95(fig.list_ns))} ms",
            "",
            "",
        ]
    )
    rows.append(
        [
            f"/session list (dispatcher, {fig.sessions} sessions)",
            ms(c.median(fig.sessions_ns)) + " ms",
            f"max {ms(max(fig.sessions_ns))} ms",
            "",
            "",
        ]
    )
    rows.append(
        [
            "/session activate (dispatcher, handoff included)",
            ms(c.median(fig.switch_ns)) + " ms",
            f"p95 {ms(c.p95(fig.switch_ns))} ms",
            "",
            "",
        ]
    )

    def tui_row(label: str, key: str, target: float | None = None, unit: str = "s") -> None:
        vals = [r[key] for r in fig.tui if r.get(key) is not None]
        if not vals:
            return
        med = c.median(vals)
        spread = f"{min(vals):.2f}–{max(vals):.2f}" if len(vals) > 1 else ""
        rows.append(
            [
                label,
                f"{med:.2f} {unit}",
                spread,
                f"≤ {target:g} s" if target else "",
                c.verdict(med, target) if target else "",
            ]
        )

    n = len(fig.tui)
    tui_row(
        f"**time to interactive** (first frame after app.ready, {n} start(s))",
        "ready_frame",
        INTERACTIVE_TARGET_S,
    )
    tui_row("process start → first frame", "first_frame")
    tui_row("process start → conversation fully shown", "shown")
    tui_row("CPU time until fully shown", "cpu_shown", unit="s CPU")
    print(c.table(["measure", "median", "spread", "target", "result"], rows))
    if fig.messages < 1_000_000:
        print("\n(the 1,000,000-message figures come from the full run, without --quick)")


async def main_async(args: argparse.Namespace) -> int:
    messages = args.messages or (100_000 if args.quick else 1_000_000)
    folder = Path(args.dir or Path(tempfile.gettempdir()) / "slop-bench-load")
    folder.mkdir(parents=True, exist_ok=True)
    path = cache_path(folder, messages, args.sessions, args.seed)
    built_s = None
    if args.rebuild or not path.exists():
        print(f"building {path} ...", file=sys.stderr, flush=True)
        built_s = await build(path, messages, args.sessions, args.seed)
    fig = Figures(messages, args.sessions, path, built_s)
    work = Path(tempfile.mkdtemp(prefix="slop-bench-load-work-"))
    (work / "README.md").write_text("# load bench project\n")
    snap = await snapshot_state(path)
    try:
        await measure(fig, work, args.quick)
    finally:
        await restore_state(path, snap)
        shutil.rmtree(work, ignore_errors=True)
    report(fig, args.quick)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100,000 messages, one TUI start")
    ap.add_argument("--messages", type=int, default=None, help="a multiple of 10,000")
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", help="where the cached ledgers live (default <tmp>/slop-bench-load)")
    ap.add_argument("--rebuild", action="store_true", help="build the ledger even if cached")
    return asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
