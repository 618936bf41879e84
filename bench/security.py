"""The trust boundary's figures: the secret detector on its corpus, and query_db's limit.

    python bench/security.py [--runs N]

1. The detector (`slop_tui/context/redact.py`) on the shipped corpus
   `tests/data/secrets_corpus.toml`: recall (credential shapes whose secret
   does not survive, whole or as a 10-character fragment) and the false-positive
   rate (look-alikes that come out changed, and lines of this project's own
   source and docs, `--detector` runs only this part), plus its speed on 200,000
   characters of code.
2. `query_db` through `run_tool` with the default 2 s limit: how long a call
   takes for statements that used to outrun the limit (one `instr` call ran
   134 s, a 2,000,000-item `IN` list 5.6 s), a plain recursive bomb, and a
   trivial SELECT (the cost of the worker process), and a full-text MATCH (the
   statement names `memos_fts`, so the worker first builds the index of the
   visible memos, 1,000 here). Median and range of N runs.
3. The shell sandbox's git scan (`slop_tui/tools/gitdirs.py`), run before and
   after every sandboxed command: its time on trees of 100 to 19,000 folders
   (and, the walk after a command entering `node_modules`, with one beside them),
   and a whole sandboxed `execute_bash true` on each, with and (side by side,
   the scans replaced by empty ones) without them.
   Side by side, the same kind of `instr` call run the old way, in-process with
   the progress handler and an interrupt from a watchdog thread at the limit
   (smaller, so it ends): it runs on past the limit, because neither stops a
   function call that is under way.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from slop_tui.context.redact import contains_secret, redact_secrets  # noqa: E402
from slop_tui.ledger import Ledger  # noqa: E402
from slop_tui.tools import ToolContext, registry_rows, run_tool  # noqa: E402
from slop_tui.tools.sqlguard import open_readonly  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "secrets_corpus.toml"
LIMIT = 2.0
STATEMENTS = {
    "instr(10 MB text, 200 KB needle)": (
        "SELECT instr(hex(zeroblob(5000000)), hex(zeroblob(100000)) || '1') AS n"
    ),
    "replace() over 60 MB": (
        "SELECT length(replace(hex(zeroblob(30000000)), '0', '0')) AS n"
    ),
    "IN list of 2,000,000 items": (
        "SELECT 1 WHERE 1 IN (" + ",".join(["1"] * 2_000_000) + ")"
    ),
    "endless recursive CTE": (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"
    ),
    "SELECT 1 (worker overhead)": "SELECT 1 AS x",
    "MATCH on memos_fts (1,000 memos: the scoped index is built first)": (
        "SELECT count(*) AS n FROM memos_fts WHERE memos_fts MATCH 'deploy'"
    ),
}  # fmt: skip
MEMOS = 1000  # memos in the bench ledger: the scoped full-text index is built from them


def leaks(secret: str, text: str, n: int = 10) -> bool:
    if len(secret) <= n:
        return secret in text
    return any(secret[i : i + n] in text for i in range(len(secret) - n + 1))


def project_lines() -> list[str]:
    """The negative corpus of ordinary code and prose: every non-empty line of this
    project's source and docs."""
    files = [*sorted((ROOT / "slop_tui").rglob("*.py")), *sorted((ROOT / "docs").glob("*.md"))]
    return [
        line for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def detector_table(runs: int) -> None:
    corpus = tomllib.loads(CORPUS.read_text(encoding="utf-8"))
    pos, neg = corpus["positive"], corpus["negative"]
    found = sum(not leaks(p["secret"], redact_secrets(p["text"])) for p in pos)
    changed = sum(redact_secrets(n["text"]) != n["text"] for n in neg)
    lines = project_lines()
    flagged = [line for line in lines if contains_secret(line)]
    code = "".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "slop_tui").rglob("*.py"))
    )[:200_000]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        redact_secrets(code)
        times.append((time.perf_counter() - start) * 1000)
    print("## Secret detector (tests/data/secrets_corpus.toml)\n")
    print("| measure | value | target | result |")
    print("|---|---|---|---|")
    recall = found / len(pos)
    fp = changed / len(neg)
    own = len(flagged) / len(lines)
    print(f"| recall ({found} of {len(pos)} credential shapes) | {recall:.1%} | 100 % | "
          f"{'PASS' if recall == 1 else 'FAIL'} |")  # fmt: skip
    print(f"| false positives ({changed} of {len(neg)} look-alikes) | {fp:.1%} | ≤ 1 % | "
          f"{'PASS' if fp <= 0.01 else 'FAIL'} |")  # fmt: skip
    print(f"| false positives ({len(flagged)} of {len(lines):,} lines of this project's source "
          f"and docs) | {own:.2%} | ≤ 1 % | {'PASS' if own <= 0.01 else 'FAIL'} |")  # fmt: skip
    print(f"| redact 200,000 characters of code | {statistics.median(times):.1f} ms "
          f"({min(times):.1f}–{max(times):.1f}) |  |  |\n")  # fmt: skip
    for line in flagged:
        print(f"    flagged: {line.strip()[:100]}")
    print()


async def query_table(runs: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="slop-bench-security-"))
    ledger = await Ledger.open(folder / "slop.db")
    await ledger.register_tools(registry_rows())
    await ledger.append_user("bench", "hello")
    for i in range(MEMOS):
        words = " ".join(f"word{(i * 7 + j) % 997}" for j in range(40))
        await ledger.add_memo(f"memo {i}: deploy notes {words}", [f"tag{i % 20}"])
    ctx = ToolContext(ledger=ledger, session="bench", project_root=folder, db_time_limit=LIMIT)
    print(f"## query_db with a {LIMIT:g} s limit ({runs} runs each)\n")
    print("| statement | median | range | outcome | target | result |")
    print("|---|---|---|---|---|---|")
    try:
        for name, sql in STATEMENTS.items():
            times, outcome = [], ""
            for _ in range(runs):
                start = time.monotonic()
                result = await run_tool("query_db", {"sql": sql}, ctx)
                times.append(time.monotonic() - start)
                first = result.body.splitlines()[0]
                outcome = (
                    first.removeprefix("Error: query_db: ")[:48] if not result.ok else "answered"
                )
            med = statistics.median(times)
            bound = LIMIT + 0.5
            verdict = "PASS" if max(times) <= bound else "FAIL"
            print(f"| {name} | {med:.3f} s | {min(times):.3f}–{max(times):.3f} s | "
                  f"{outcome} | ≤ {bound:g} s | {verdict} |")  # fmt: skip
        times = [in_process(ledger.path) for _ in range(runs)]
        med = statistics.median(times)
        print(f"| same kind of instr() call in-process, watchdog interrupt at {LIMIT:g} s (old way) "
              f"| {med:.3f} s | {min(times):.3f}–{max(times):.3f} s | runs past the limit "
              "|  |  |")  # fmt: skip
    finally:
        await ledger.close()


IN_PROCESS_BOMB = "SELECT instr(hex(zeroblob(1500000)), hex(zeroblob(40000)) || '1') AS n"


def in_process(path: Path) -> float:
    """The old query_db: a guarded connection in this process, stopped by its progress
    handler or by `interrupt()` from a timer at the limit."""
    import sqlite3
    import threading

    start = time.monotonic()
    conn, _ = open_readonly(path, start + LIMIT, lambda: False, "bench")
    timer = threading.Timer(LIMIT, conn.interrupt)
    timer.start()
    try:
        conn.execute(IN_PROCESS_BOMB).fetchall()
    except sqlite3.OperationalError:
        pass  # interrupted, once the call returned
    finally:
        timer.cancel()
        conn.close()
    return time.monotonic() - start


def _tree(root: Path, folders: int, files_per_folder: int, repos: int) -> None:
    """`folders` folders in a three-level tree, `files_per_folder` small files in each,
    `repos` of them nested repositories (a `.git` folder with a config)."""
    made = 0
    for a in range(64):
        for b in range(64):
            for c in range(64):
                if made >= folders:
                    return
                folder = root / f"a{a}" / f"b{b}" / f"c{c}"
                folder.mkdir(parents=True, exist_ok=True)
                for f in range(files_per_folder):
                    (folder / f"f{f}.txt").write_bytes(b"x")
                if made < repos:
                    (folder / ".git").mkdir()
                    (folder / ".git" / "config").write_bytes(b"[core]\n")
                made += 1


async def git_scan_table(runs: int) -> None:
    """What the shell sandbox's git scan costs: `gitdirs.scan` (run once before and
    once after every sandboxed command) on project trees of growing size, and a whole
    sandboxed `execute_bash true` on the same tree."""
    from slop_tui.tools import gitdirs
    from slop_tui.tools.sandbox import detect

    sandbox = detect()
    print(f"\n## The shell sandbox's git scan ({runs} runs each)\n")
    print(
        "| project | scan (before or after a command) | `execute_bash true`, sandboxed "
        "| the same without the scans |"
    )
    print("|---|---|---|---|")
    for folders, files in ((100, 10), (2_000, 10), (MAX_DIRS, 5)):
        folder = Path(tempfile.mkdtemp(prefix="slop-bench-gitscan-"))
        _tree(folder, folders, files, repos=20)
        scans = []
        for _ in range(runs):
            start = time.perf_counter()
            found = gitdirs.scan(folder)
            scans.append(time.perf_counter() - start)
        assert len(found.markers) == 20 and found.complete
        shell = bare = "(no bwrap here)"
        if sandbox.available:
            ledger = await Ledger.open(folder / ".slop" / "slop.db")
            await ledger.register_tools(registry_rows())
            ctx = ToolContext(ledger=ledger, session="b", project_root=folder, sandbox=sandbox)
            try:
                shell = _ms(await _shell_times(ctx, runs))
                scan, sweep = gitdirs.scan, gitdirs.sweep
                gitdirs.scan = lambda root, trusted=None: gitdirs.GitScan(Path(root).resolve())
                gitdirs.sweep = lambda before, run: []
                try:
                    bare = _ms(await _shell_times(ctx, runs))
                finally:
                    gitdirs.scan, gitdirs.sweep = scan, sweep
            finally:
                await ledger.close()
        name = f"{folders:,} folders, {folders * files:,} files, 20 nested repositories"
        print(f"| {name} | {_ms(scans)} | {shell} | {bare} |")
    # The walk after a command also enters node_modules (and the other package folders).
    print("\n| project | scan before a command | scan after it (enters node_modules) |")
    print("|---|---|---|")
    for modules in (2_000, MAX_DIRS // 2):
        folder = Path(tempfile.mkdtemp(prefix="slop-bench-gitscan-"))
        _tree(folder, 100, 10, repos=20)
        _tree(folder / "node_modules", modules, 2, repos=0)
        before, after = [], []
        for _ in range(runs):
            start = time.perf_counter()
            found = gitdirs.scan(folder)
            before.append(time.perf_counter() - start)
            start = time.perf_counter()
            gitdirs.scan(folder, trusted=found)
            after.append(time.perf_counter() - start)
        name = f"100 folders, 20 repositories, node_modules of {modules:,} folders"
        print(f"| {name} | {_ms(before)} | {_ms(after)} |")


async def _shell_times(ctx: ToolContext, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = await run_tool("execute_bash", {"command": "true"}, ctx)
        times.append(time.perf_counter() - start)
        assert result.ok, result.text
    return times


MAX_DIRS = 19_000  # just under gitdirs.MAX_WALK_DIRS


def _ms(times: list[float]) -> str:
    return (
        f"{statistics.median(times) * 1000:.1f} ms "
        f"({min(times) * 1000:.1f}–{max(times) * 1000:.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--detector", action="store_true", help="only the secret detector")
    args = parser.parse_args()
    detector_table(max(5, args.runs))
    if args.detector:
        return
    asyncio.run(query_table(max(5, args.runs)))
    asyncio.run(git_scan_table(max(5, args.runs)))


if __name__ == "__main__":
    main()
