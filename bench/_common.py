"""Shared helpers for the benches: a realistic ledger built fast, timing and tables.

The ledger is filled with `executemany` on the ledger's own connection (one
transaction, the same triggers as the app), so a 100k-message ledger takes
seconds. Only the *timed* operations go through the public `Ledger` API.

Shape (what a coding session looks like): groups of five messages (user
prompt, assistant tool call with two calls, two tool results, final answer
ending in a `### STATE` block), every content 200-2000 characters, groups
spread at random over the sessions so their ids interleave, one STATE version
per group and one usage row per assistant message.
"""

from __future__ import annotations

import contextlib
import json
import random
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from slop_tui.ledger import Ledger  # noqa: E402

GROUP_SIZE = 5
T0 = 1_750_000_000.0  # a fixed epoch, so runs are reproducible

_WORDS = (
    "the ledger window group session tool result assistant prompt parser index query "
    "sqlite wal token state anchor scratchpad memo skill provider model stream cancel "
    "retry config theme layout widget render truncate history summary lane migration "
    "def class return await async import from self none true false if else for while "
    "error warning trace file path line column value key list dict set tuple int str"
).split()


def corpus(seed: int, size: int = 200_000) -> str:
    """Pseudo-prose with newlines and code-ish punctuation; sliced for contents."""
    rnd = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        word = rnd.choice(_WORDS)
        sep = rnd.choices(
            [" ", "\n", ", ", ". ", "(", ")", " = ", ": "], [60, 6, 5, 5, 1, 1, 1, 1]
        )[0]
        out.append(word + sep)
        n += len(word) + len(sep)
    return "".join(out)


@dataclass
class Built:
    path: Path
    messages: int
    sessions: list[str]
    groups: dict[str, list[int]]  # group ids per session, oldest first
    seconds: float


def tokens_of(text: str) -> int:
    return (len(text) + 3) // 4


async def fill(
    ledger: Ledger,
    messages: int,
    sessions: Sequence[str],
    *,
    seed: int = 1,
    min_chars: int = 200,
    max_chars: int = 2000,
) -> dict[str, list[int]]:
    """Append `messages` rows (a multiple of 5) in groups of five; returns group ids."""
    if messages % GROUP_SIZE:
        raise ValueError("messages must be a multiple of 5")
    rnd = random.Random(seed)
    text = corpus(seed)
    span = len(text) - max_chars - 1

    def content(prefix: str = "") -> str:
        n = rnd.randint(min_chars, max_chars) - len(prefix)
        at = rnd.randint(0, span)
        return prefix + text[at : at + max(n, 0)]

    db = ledger._db
    row = await (await db.execute("SELECT COALESCE(MAX(id), 0) FROM messages")).fetchone()
    next_id = row[0] + 1
    groups: dict[str, list[int]] = {s: [] for s in sessions}
    msg_rows: list[tuple] = []
    state_rows: list[tuple] = []
    usage_rows: list[tuple] = []
    for g in range(messages // GROUP_SIZE):
        session = sessions[rnd.randrange(len(sessions))] if len(sessions) > 1 else sessions[0]
        gid = next_id
        groups[session].append(gid)
        t = T0 + g * 30.0
        c1, c2 = f"call_{gid}_a", f"call_{gid}_b"
        reasoning = content()
        payload = json.dumps(
            {
                "role": "assistant",
                "content": reasoning,
                "tool_calls": [
                    {
                        "id": c1,
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"src/mod_{g % 97}.py"}),
                        },
                    },
                    {
                        "id": c2,
                        "type": "function",
                        "function": {
                            "name": "query_db",
                            "arguments": json.dumps({"sql": "SELECT count(*) FROM messages"}),
                        },
                    },
                ],
            }
        )
        state = f"### STATE\nGoal: task {g}\nTechnical Anchors: port {8000 + g % 1000}\n"
        final = content() + "\n\n" + state
        rows = [
            ("user", content(f"prompt {g}: "), None, None, None, "completed"),
            ("assistant", reasoning, payload, None, None, "tool_call"),
            ("tool", content("### TOOL_RESULT: read_file\n"), None, c1, "read_file", "completed"),
            ("tool", content("### TOOL_RESULT: query_db\n"), None, c2, "query_db", "completed"),
            ("assistant", final, None, None, None, "completed"),
        ]
        for i, (role, body, pay, call_id, tool, status) in enumerate(rows):
            msg_rows.append(
                (
                    next_id,
                    session,
                    gid,
                    "main",
                    role,
                    body,
                    pay,
                    call_id,
                    tool,
                    status,
                    "openai",
                    tokens_of(body),
                    t + i,
                )
            )
            next_id += 1
        state_rows.append((session, gid, state, t + 4))
        usage_rows.append((session, gid, "openai", "gpt-4o", 4000 + g % 500, 300, 1000, t + 1))
        usage_rows.append((session, gid, "openai", "gpt-4o", 4600 + g % 500, 400, 3000, t + 4))

    await db.execute("BEGIN IMMEDIATE")
    try:
        await db.executemany(
            "INSERT OR IGNORE INTO sessions(name, created_at, updated_at) VALUES (?,?,?)",
            [(s, T0, T0) for s in sessions],
        )
        await db.executemany(
            """INSERT INTO messages(id, session_id, group_id, lane, role, content, payload,
                   tool_call_id, tool_name, status, parsing_strategy, tokens, created_at)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            msg_rows,
        )
        await db.executemany(
            "INSERT INTO state_versions(session_id, group_id, content, created_at) "
            "VALUES (?,?,?,?)",
            state_rows,
        )
        await db.executemany(
            """INSERT INTO usage(session_id, group_id, provider, model, prompt_tokens,
                   completion_tokens, cached_tokens, created_at) VALUES (?,?,?,?,?,?,?,?)""",
            usage_rows,
        )
        await db.executemany(
            "UPDATE sessions SET scratchpad=? WHERE name=?",
            [(f"## Plan for {s}\n" + "- [ ] step\n" * 12, s) for s in sessions],
        )
        await db.execute("COMMIT")
    except BaseException:
        await db.execute("ROLLBACK")
        raise
    # No ANALYZE: the app does not run it, so the plans measured are the ones users get.
    await db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return groups


def session_names(n: int) -> list[str]:
    return [f"session-{i:02d}" for i in range(n)]


def db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


# --- statistics and printing ---------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def us(ns: float) -> str:
    return f"{ns / 1e3:.0f}"


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def mb(size: int) -> str:
    return f"{size / 1e6:.1f}"


def verdict(value: float, limit: float) -> str:
    return "PASS" if value <= limit else "FAIL"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table, columns padded so it also reads as plain text."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


@contextlib.contextmanager
def busy(processes: int) -> Iterator[None]:
    """`processes` programs that only spin the CPU, at the caller's priority, while
    inside: a machine made as loaded as a shared one, on purpose and alike for every
    build measured in it."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def machine() -> str:
    import os
    import platform
    import sqlite3

    return (
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPU(s), {platform.system()} {platform.machine()}"
    )
