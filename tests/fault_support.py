"""Shared pieces of the fault tests: child processes, markers, ledger checks.

Child processes are real programs (`python -m slop_tui.cli ...` or
tests/fault_child.py) talking to the fake server of the parent test process.
Every wait is on a marker (a row in the database, a line on stdout, a file)
with a deadline, never on a bare sleep.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slop_tui import message_parser
from slop_tui.records import Message

ROOT = Path(__file__).resolve().parent.parent
CHILD = ROOT / "tests" / "fault_child.py"


def child_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: no real credentials, no user config, loopback only."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLOP_", "OPENAI_", "GEMINI_", "GOOGLE_")) and "PROXY" not in k.upper()
    }
    env["HOME"] = str(home)
    env["SLOP_CONFIG"] = str(home / "no-user-config.toml")
    for name in ("SLOP_REPO_WATCHER", "SLOP_RUNTIME_DIR"):  # the map's watcher: off
        if name in os.environ:
            env[name] = os.environ[name]
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


def openai_env(fake) -> dict[str, str]:
    return {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": fake.openai_base_url}


def spawn(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(pred: Callable[[], Any], what: str, timeout: float = 120.0, proc=None) -> Any:
    """Poll `pred` until it returns something truthy; fail with `what` at the deadline
    (or at once when `proc` exited: its stderr is in the message). The deadline only
    bounds a hang: a child's start-up alone can take a minute on a loaded machine."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"{what}: the child exited {proc.returncode}: {proc.stderr.read()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout} s")
        time.sleep(0.01)


def query(db: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """A short read on its own connection (what another process would see now)."""
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as con:
        try:
            return con.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # the schema is not created yet
            return []


def inflight(db: Path) -> list[dict]:
    rows = query(db, "SELECT value FROM app_state WHERE key LIKE 'inflight/%'")
    return [json.loads(r[0]) for r in rows]


def pids_with_cmdline(cmdline: bytes) -> list[int]:
    """Host pids of live (non-zombie) processes with exactly this command line. A
    command in the shell's sandbox sees pids of its own namespace (`$$`, `$!`), so a
    test finds its processes from outside."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                if fh.read() != cmdline:
                    continue
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
        except (OSError, IndexError):
            continue
        found.append(int(entry.name))
    return found


def kill_hard(proc: subprocess.Popen) -> None:
    """SIGKILL (no handler, no finally runs) and reap, so the pid is really gone."""
    proc.kill()
    proc.communicate(timeout=10)


def integrity(db: Path) -> str:
    return query(db, "PRAGMA integrity_check")[0][0]


def counters_match(db: Path) -> None:
    """The trigger-kept per-session totals agree with the rows (no half-applied write)."""
    kept = dict(
        (
            (s, (n, t))
            for s, n, t in query(db, "SELECT name, message_count, token_total FROM sessions")
        )
    )
    real = {
        s: (n, t or 0)
        for s, n, t in query(
            db, "SELECT session_id, COUNT(*), SUM(tokens) FROM messages GROUP BY session_id"
        )
    }
    for name, totals in kept.items():
        assert totals == real.get(name, (0, 0)), (name, totals, real.get(name))


def orphan_calls(rows: list[Message]) -> list[str]:
    """Call ids of stored tool calls that have no stored result in their group."""
    answered = {(m.group_id, m.tool_call_id) for m in rows if m.role == "tool"}
    return [
        c.id
        for m in rows
        for c in message_parser.tool_calls(m)
        if (m.group_id, c.id) not in answered
    ]


def check_openai_request(messages: list[dict]) -> None:
    """Structurally valid chat messages: every assistant tool call is answered right
    after it, every tool message answers a call of the assistant message before its run."""
    pending: set[str] = set()
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "tool":
            assert m["tool_call_id"] in pending, f"message {i}: tool result without its call"
            pending.discard(m["tool_call_id"])
            continue
        assert not pending, f"message {i}: calls {pending} were not answered"
        if role == "assistant":
            calls = m.get("tool_calls") or []
            assert calls or (m.get("content") or "").strip(), f"message {i}: empty assistant"
            pending = {c["id"] for c in calls}
            for c in calls:  # the wire type; a model's invalid JSON is replayed as it came
                assert isinstance(c["function"]["arguments"], str) and c["function"]["name"]
        else:
            assert role in ("system", "user", "developer"), role
    assert not pending, f"calls {pending} were not answered"


def check_gemini_request(contents: list[dict]) -> None:
    """Each model turn with function calls is followed by a user turn answering each one."""
    for i, c in enumerate(contents):
        assert c["role"] in ("user", "model"), c["role"]
        calls = [p["functionCall"]["name"] for p in c["parts"] if "functionCall" in p]
        if calls:
            nxt = contents[i + 1] if i + 1 < len(contents) else None
            assert nxt is not None and nxt["role"] == "user", f"content {i}: calls unanswered"
            answers = [
                p["functionResponse"]["name"] for p in nxt["parts"] if "functionResponse" in p
            ]
            assert sorted(answers) == sorted(calls), (calls, answers)
        assert c["parts"], f"content {i} has no parts"


def unprivileged(cmd: list[str]) -> list[str] | None:
    """`cmd` run so that file permissions apply to it: as root, without the capabilities
    that bypass them (setpriv drops them from the bounding set); None if impossible."""
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", *cmd]


def ctrl_c_as_in_a_terminal() -> None:
    """A child's `preexec_fn`: SIGINT at its default, as a terminal's foreground job has
    it. A process started with SIGINT ignored (as a shell's background job is) keeps
    ignoring it, as Python itself does; the test process may have been started so."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
