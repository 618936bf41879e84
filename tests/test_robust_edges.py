"""The edges a user and a misbehaving server reach outside the happy paths, each run
through the real command line (`python -m slop_tui.cli` in a child process, talking
to the fake server of this process) or the Pilot: escape sequences on every printed
path, streams without data, signals while a tool runs, two turns on one session,
broken files, provider edge cases, exports, odd file names and sparse files.

docs/reliability.md ("Edges") has one row per test.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from slop_tui.context.assemble import PAIR_ACK
from slop_tui.ledger import Ledger
from slop_tui.records import NewMessage
from slop_tui.safe_text import UNSAFE_CODEPOINTS
from tests.fakeserver import FakeLLMServer, FakeToolCall, Reply
from tests.fault_support import (
    child_env,
    ctrl_c_as_in_a_terminal,
    openai_env,
    pids_with_cmdline,
    query,
    wait_until,
)
from tests.workspace_fixtures import open_workspace

# Everything a hostile model or file can put in text: OSC 52 (clipboard write), OSC 0
# (window title), clear screen, a one-byte C1 CSI, a bidi override and a bare CR.
OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
HOSTILE = f"A{OSC52}B\x1b]0;pwned\x07C\x1b[2JD\x9b31mE\u202eF\rG"


def run_cli(
    args: list[str],
    cwd: Path,
    extra: dict[str, str] | None = None,
    timeout: float = 180,
    served_by: FakeLLMServer | None = None,
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`slop-tui ARGS` in a child process: its result and how long it ran; with
    `served_by`, from its first request to that server on, so the time the child's
    interpreter took to start (a minute on a loaded machine) is left out."""
    env = child_env(cwd, extra)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "slop_tui.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="strict",  # a lone surrogate reaching stdout would fail here
        timeout=timeout,
    )
    if served_by is not None and served_by.requests:
        started = served_by.requests[0].received
    return proc, time.monotonic() - started


def start_up(tmp_path: Path) -> float:
    """How long `slop-tui exec` takes in a fresh folder right now: the child's own
    start-up, which a loaded machine stretches from half a second to a minute. A bound
    on a child that talks to no server is this plus what the test is about."""
    folder = tmp_path / "start-up"
    folder.mkdir()
    proc, took = run_cli(["exec", "/session list"], folder)
    assert proc.returncode == 0, proc.stderr
    return took


def assert_inert(text: str) -> None:
    """No code point that a terminal would execute (controls but tab and newline,
    C1, bidi overrides, lone surrogates) nor a bare CR is in `text`."""
    bad = sorted({f"U+{ord(c):04X}" for c in text if ord(c) in UNSAFE_CODEPOINTS})
    assert not bad, f"{bad} reached the terminal: {text!r}"


def one_line(stderr: str) -> str:
    """The single line a failure prints (and nothing that looks like a traceback)."""
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr
    assert "Event loop is closed" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if not line.startswith("slop-tui: warning:")]
    assert len(lines) == 1, stderr
    return lines[0]


def tool_round_trip(root: Path, fake_llm, call: FakeToolCall) -> tuple[str, float]:
    """`ask` whose model makes `call` and then answers: the tool result the model got
    back, and how long `ask` ran."""
    fake_llm.enqueue(Reply(tool_calls=[call]), Reply(text="noted"))
    proc, took = run_cli(["ask", "go"], root, openai_env(fake_llm), served_by=fake_llm)
    assert proc.returncode == 0, proc.stderr
    [result] = [m for m in fake_llm.last_chat.messages if m["role"] == "tool"]
    return result["content"], took


def app_env(monkeypatch, root: Path, config: Path) -> None:
    """A TUI run in `root`: no provider keys, `config` as the user's config file."""
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLOP_DB", "SLOP_SESSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLOP_CONFIG", str(config))
    monkeypatch.chdir(root)


def write_config(root: Path, text: str) -> None:
    (root / ".slop").mkdir(exist_ok=True)
    (root / ".slop" / "config.toml").write_text(text, encoding="utf-8")


def db_path(root: Path) -> Path:
    return root / ".slop" / "slop.db"


# -- 1. one neutraliser on every printed path --------------------------------------------


def test_ask_text_output_tool_lines_and_provider_errors_are_neutralised(tmp_path, fake_llm):
    fake_llm.enqueue(
        Reply(
            text=f"intro {HOSTILE}",
            tool_calls=[FakeToolCall(f"x{OSC52}\u202etool", {"q": "\x9b2J\u202e"}, id="c1")],
        ),
        Reply(text=f"done {HOSTILE}"),
        Reply(status=401, error_message=f"bad {HOSTILE}"),
    )
    proc, _ = run_cli(["ask", "hello"], tmp_path, openai_env(fake_llm))
    assert proc.returncode == 0, proc.stderr
    assert_inert(proc.stdout)
    assert_inert(proc.stderr)
    assert "␛]52;c;" in proc.stdout and "<U+202E>" in proc.stdout and "␍G" in proc.stdout
    assert "[tool] x␛]52;c;" in proc.stdout  # the tool's name and arguments, shown inert
    # The ledger keeps every byte the model sent.
    stored = query(db_path(tmp_path), "SELECT content FROM messages WHERE role='assistant'")
    assert stored[-1][0] == f"done {HOSTILE}"

    proc, _ = run_cli(["ask", "again"], tmp_path, openai_env(fake_llm))
    assert proc.returncode == 1
    line = one_line(proc.stderr)
    assert "bad A␛]52;c;" in line
    assert_inert(proc.stderr)


def test_ask_json_output_escapes_what_a_terminal_would_run(tmp_path, fake_llm):
    fake_llm.enqueue(Reply(text=HOSTILE))
    proc, _ = run_cli(["ask", "--output", "json", "hello"], tmp_path, openai_env(fake_llm))
    assert proc.returncode == 0, proc.stderr
    assert_inert(proc.stdout)
    assert "\\u009b" in proc.stdout and "\\u202e" in proc.stdout
    events = json.loads(proc.stdout)  # still JSON, with exactly the model's text
    finished = [e for e in events if "state_updated" in e]
    assert finished[0]["text"] == HOSTILE


async def test_exec_output_of_stored_text_is_neutralised_everywhere(tmp_path):
    """Stored text printed by `exec`: a message, memos, the scratchpad, history search,
    the context, the handoff and the session list (with a hostile session name)."""
    name = f"S{HOSTILE}"
    ws = await open_workspace(tmp_path, session=name)
    try:
        user = await ws.ledger.append_user(ws.session, f"question {HOSTILE} needle")
        await ws.ledger.append(
            ws.session, user.group_id, [NewMessage("assistant", f"answer {HOSTILE}")]
        )
        await ws.ledger.add_state(ws.session, user.group_id, f"Goal: {HOSTILE}")
        await ws.ledger.set_scratchpad(ws.session, f"- [ ] {HOSTILE}")
        memo = await ws.ledger.add_memo(f"memo {HOSTILE}", [f"t{OSC52}"])
        assert await ws.write_handoff("manual") is not None
    finally:
        await ws.close()
    commands = [
        f"/message show {user.group_id}",
        f"/memo show {memo.id}",
        "/memo list",
        "/session scratchpad show",
        "/history search needle",
        "/context show",
        "/handoff show",
        "/session list",
    ]
    for line in commands:
        proc, _ = run_cli(["exec", "--session", name, line], tmp_path)
        assert proc.returncode == 0, (line, proc.stderr)
        assert_inert(proc.stdout)
        assert_inert(proc.stderr)
        assert "␛" in proc.stdout, (line, proc.stdout)  # the text was there, made visible


# -- 2. stream deadlines -------------------------------------------------------------------

PING = b": keep-alive\n\n"


def _sse(delta: dict, finish: str | None = None) -> bytes:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def test_keep_alive_comments_are_not_data(tmp_path, fake_llm):
    """A server that sends only SSE comments after the first words: the idle deadline
    (`timeout = 1`) ends the reply, which is kept as interrupted (was: forever)."""
    write_config(tmp_path, "[providers.openai]\ntimeout = 1\n")
    fake_llm.enqueue(
        Reply(raw=[_sse({"role": "assistant", "content": "Hello"}), *[PING] * 300], delay=0.1)
    )
    proc, took = run_cli(["ask", "hi"], tmp_path, openai_env(fake_llm), served_by=fake_llm)
    assert proc.returncode == 1
    assert "no data for 1 s" in one_line(proc.stderr)
    assert len(fake_llm.chat_requests) == 1  # no retry once text was shown
    assert took < 25, took  # the pings alone would last 30 s
    rows = query(db_path(tmp_path), "SELECT role, status, content FROM messages ORDER BY id")
    assert rows[-1] == ("assistant", "interrupted", "Hello")


def test_a_stall_before_any_output_is_retried_once(tmp_path, fake_llm):
    write_config(tmp_path, "[providers.openai]\ntimeout = 1\n")
    gate = threading.Event()  # headers, then nothing: released when the test ends
    fake_llm.enqueue(Reply(text="never", gate=gate), Reply(text="never", gate=gate))
    try:
        proc, took = run_cli(["ask", "hi"], tmp_path, openai_env(fake_llm), served_by=fake_llm)
    finally:
        gate.set()
    assert proc.returncode == 1
    assert "did not answer in time: no data for 1 s" in one_line(proc.stderr)
    assert len(fake_llm.chat_requests) == 2  # one retry (was: six, 163 s at timeout 5)
    assert took < 30, took  # without the idle deadline the gate holds it for the 180 s run


def test_the_reply_deadline_ends_a_trickling_stream(tmp_path, fake_llm):
    """Data every 0.2 s never trips the idle deadline; `reply_timeout` ends the reply."""
    write_config(tmp_path, "[providers.openai]\ntimeout = 5\nreply_timeout = 4\n")
    fake_llm.enqueue(Reply(text="x" * 200, chunk_size=1, delay=0.2))
    proc, took = run_cli(["ask", "hi"], tmp_path, openai_env(fake_llm), served_by=fake_llm)
    assert proc.returncode == 1
    assert "did not finish its reply within 4 s" in one_line(proc.stderr)
    assert took < 30, took  # the whole trickle lasts 40 s
    rows = query(db_path(tmp_path), "SELECT status, content FROM messages WHERE role='assistant'")
    assert rows[0][0] == "interrupted" and set(rows[0][1]) == {"x"} and len(rows[0][1]) < 200


def _refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize(
    ("base_url", "said", "most"),
    [
        ("not a url", "is not an http:// or https:// URL", 8.0),
        ("file:///etc/passwd", "is not an http:// or https:// URL", 8.0),
        ("http://127.0.0.1:99999/v1", "is not a valid URL", 8.0),
        (None, "could not be reached", 10.0),  # refused: one retry after 2 s
    ],
)
def test_a_base_url_that_cannot_work_fails_at_once(tmp_path, base_url, said, most):
    url = base_url or _refused_url()
    baseline = start_up(tmp_path)
    proc, took = run_cli(["ask", "hi"], tmp_path, {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": url})
    assert proc.returncode == 1
    assert said in one_line(proc.stderr)
    assert took < most + baseline, (took, baseline)  # was: about 128 s of retries


def test_the_turn_deadline_stops_a_model_that_keeps_calling_tools(tmp_path, fake_llm):
    """`[tools] turn_timeout` bounds the whole turn: the model calls tools again and
    again, the last one runs for ever; at the deadline it is killed, its call answered,
    and the turn ends with one line."""
    # 12 s: the two first calls run in the sandbox before the third starts, even at load.
    write_config(tmp_path, "[tools]\nturn_timeout = 12\n")
    endless = _unique_seconds()

    def call(command: str) -> Reply:
        return Reply(
            text="Working.", tool_calls=[FakeToolCall("execute_bash", {"command": command})]
        )

    fake_llm.enqueue(call("echo step 1"), call("echo step 2"), call(f"sleep {endless}"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "slop_tui.cli", "ask", "--approve", "all", "build it"],
        cwd=tmp_path,
        env=child_env(tmp_path, openai_env(fake_llm)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: _sleepers(endless), "the third call runs", proc=proc)
        started = time.monotonic()
        out, err = proc.communicate(timeout=30)
        waited = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err
    assert one_line(err) == (
        "slop-tui: The turn stopped at its deadline of 12 s ([tools] turn_timeout); what it "
        "produced is kept. Ask again to continue."
    )
    assert waited < 12 + 15, waited  # the command itself sleeps for 300 s
    wait_until(lambda: _sleepers(endless) is None, "the running command was killed", timeout=5)
    rows = query(
        db_path(tmp_path),
        "SELECT role, status, tool_call_id, content FROM messages ORDER BY id",
    )
    calls = [r for r in rows if r[1] == "tool_call"]
    results = [r for r in rows if r[0] == "tool"]
    assert len(calls) == 3 and all(r[3] == "Working." for r in calls)
    assert [r[2] for r in results] == [r[2] for r in calls]  # every call answered, in order
    assert "step 2" in results[1][3] and results[2][1] == "error"
    assert "stopped at the turn's deadline (12 s, [tools] turn_timeout)" in results[2][3]
    # The next turn's request holds every call with its result, no synthetic one.
    fake_llm.enqueue(Reply(text="ok"))
    again, _ = run_cli(["ask", "go on"], tmp_path, openai_env(fake_llm))
    assert again.returncode == 0, again.stderr
    sent = [m for m in fake_llm.last_chat.messages if m["role"] == "tool"]
    assert len(sent) == 3 and "stopped at the turn's deadline" in sent[2]["content"]


def test_the_turn_deadline_ends_a_trickling_reply_and_keeps_its_text(tmp_path, fake_llm):
    """The turn's deadline comes before the reply's own (`reply_timeout`): the text so
    far is kept as interrupted and the line names the turn's setting."""
    write_config(
        tmp_path,
        "[tools]\nturn_timeout = 5\n[providers.openai]\ntimeout = 5\nreply_timeout = 60\n",
    )
    # The deadline counts the turn's work before the request too, which a loaded
    # machine stretches to seconds: 5 s leaves room for it, the trickle lasts 30 s.
    fake_llm.enqueue(Reply(text="x" * 300, chunk_size=1, delay=0.1))
    proc, took = run_cli(["ask", "hi"], tmp_path, openai_env(fake_llm), served_by=fake_llm)
    assert proc.returncode == 1
    assert "The turn stopped at its deadline of 5 s ([tools] turn_timeout)" in one_line(proc.stderr)
    assert took < 25, took
    rows = query(db_path(tmp_path), "SELECT status, content FROM messages WHERE role='assistant'")
    assert rows, "the turn ended before its request"
    assert rows[0][0] == "interrupted" and set(rows[0][1]) == {"x"} and len(rows[0][1]) < 300


def test_a_turn_timeout_that_is_not_a_positive_number_is_refused(tmp_path, fake_llm):
    for bad in ("nan", "inf", "-1.5", "0.0", '"soon"'):
        write_config(tmp_path, f"[tools]\nturn_timeout = {bad}\n")
        fake_llm.enqueue(Reply(text="ok"))
        proc, _ = run_cli(["ask", "hi"], tmp_path, openai_env(fake_llm))
        assert proc.returncode == 0, proc.stderr
        assert "turn_timeout" in proc.stderr and "ok" in proc.stdout, (bad, proc.stderr)


async def test_the_turn_deadline_closes_an_unanswered_approval_dialog(
    tmp_path, fake_llm, monkeypatch
):
    """The deadline counts the time an approval waits: the question is closed, the call
    answered (not run), the error shown, and the workspace takes the next prompt."""
    from slop_tui.ui.app import SlopApp
    from slop_tui.ui.screens.dialogs import ApprovalScreen
    from tests.fakeserver import wait_for
    from tests.test_app import started

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    monkeypatch.setenv("SLOP_CONFIG", str(tmp_path / "user.toml"))
    (tmp_path / "user.toml").write_text("[tools]\nturn_timeout = 5\n")
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("write_file", {"path": "out.txt", "content": "x"})])
    )
    app = SlopApp(db=str(db_path(tmp_path)), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press(*"write it", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=20)
        await wait_for(pilot, lambda: not app.turns.busy, timeout=20)
        await wait_for(pilot, lambda: not isinstance(app.screen, ApprovalScreen))
        ws = app.workspace
        rows = await ws.ledger.session_messages(ws.session)
        assert [(r.role, r.status) for r in rows] == [
            ("user", "completed"),
            ("assistant", "tool_call"),
            ("tool", "error"),
        ]
        assert "stopped at the turn's deadline (5 s" in rows[-1].content
        shown = " ".join(str(w.render()) for w in app.query("#conversation Static"))
        assert "The turn stopped at its deadline of 5 s" in shown
    assert not (tmp_path / "out.txt").exists()


# -- 3. signals ------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _unique_seconds() -> str:
    """A `sleep` argument no other process has, so the test can find that process from
    outside: a command in the shell's sandbox sees pids of its own namespace, so the
    pids it could write down (`$!`, `$$`) are not the host's."""
    return f"300.{random.randrange(10**8):08d}"


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def _sleepers(*seconds: str) -> list[int] | None:
    """Host pids of one live `sleep S` per argument, or None until all have started."""
    found = [pids_with_cmdline(b"sleep\0" + s.encode() + b"\0") for s in seconds]
    return [p[0] for p in found] if all(len(p) == 1 for p in found) else None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_while_a_tool_runs_kills_its_processes(tmp_path, fake_llm, sig):
    """SIGTERM and SIGHUP stop `ask` as Ctrl-C (SIGINT) does: the running tool's
    processes, a `setsid` one included, end with it."""
    detached, child = _unique_seconds(), _unique_seconds()
    command = f"setsid sleep {detached} & sleep {child} & wait"
    fake_llm.enqueue(Reply(tool_calls=[FakeToolCall("execute_bash", {"command": command})]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "slop_tui.cli", "ask", "--approve", "all", "run it"],
        cwd=tmp_path,
        env=child_env(tmp_path, openai_env(fake_llm)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    try:
        wait_until(
            lambda: _sleepers(detached, child) is not None,
            "the tool started its processes",
            proc=proc,
        )
        pids = _sleepers(detached, child)
        assert pids is not None
        pids.append(_parent(pids[1]))  # the shell that started them
        assert all(_alive(p) for p in pids)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    said = "cancelled" if sig == signal.SIGINT else f"stopped by {signal.Signals(sig).name}"
    assert one_line(err) == f"slop-tui: {said}."
    wait_until(lambda: not any(_alive(p) for p in pids), "every tool process ended", timeout=5)
    rows = query(db_path(tmp_path), "SELECT role, status, content FROM messages ORDER BY id")
    assert rows[-1][0] == "tool" and "cancelled" in rows[-1][2]


def test_a_setsid_child_is_killed_at_the_timeout(tmp_path, fake_llm):
    detached = _unique_seconds()
    command = f"setsid sleep {detached} & touch started; sleep 300"
    fake_llm.enqueue(
        Reply(
            tool_calls=[FakeToolCall("execute_bash", {"command": command, "timeout_seconds": 1})]
        ),
        Reply(text="it timed out"),
    )
    proc, took = run_cli(["ask", "--approve", "all", "run it"], tmp_path, openai_env(fake_llm))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "never retrieved" not in proc.stderr
    assert (tmp_path / "started").exists()
    wait_until(lambda: _sleepers(detached) is None, "the setsid child ended", timeout=3)
    result = [m for m in fake_llm.last_chat.messages if m["role"] == "tool"][0]["content"]
    assert "timed out after 1 s; it and its child processes were killed" in result


# -- 4. two turns on one session ---------------------------------------------------------------


class _Lines:
    """A child's stdout, read by a thread so the test can wait for a line."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)

    def join(self) -> str:
        self._thread.join(timeout=20)
        return "".join(self.lines)


def test_a_second_turn_on_a_session_waits_and_groups_stay_together(tmp_path, fake_llm):
    gate = threading.Event()
    (tmp_path / "notes.txt").write_text("the notes\n")
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("read_file", {"path": "notes.txt"}, id="a1")], gate=gate),
        Reply(text="A is done"),
        Reply(text="B is done"),
    )
    env = child_env(tmp_path, openai_env(fake_llm))
    argv = [sys.executable, "-m", "slop_tui.cli", "ask"]
    procs = []
    try:
        a = subprocess.Popen([*argv, "question A"], cwd=tmp_path, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        procs.append(a)
        fake_llm.wait_for_requests(1, timeout=120)  # A's request is in flight, held
        b = subprocess.Popen([*argv, "question B"], cwd=tmp_path, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        procs.append(b)
        b_out = _Lines(b)
        wait_until(
            lambda: any("Another turn on session" in line for line in b_out.lines),
            "B says it waits",
            proc=b,
        )
        assert len(fake_llm.chat_requests) == 1  # B sent nothing while A runs
        gate.set()
        assert a.wait(timeout=120) == 0, a.stderr.read() if a.stderr else ""
        assert b.wait(timeout=120) == 0, b.stderr.read() if b.stderr else ""
        out = b_out.join()
    finally:
        gate.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert "B is done" in out
    requests = fake_llm.chat_requests
    last = [(r.messages[-1]["role"], r.messages[-1]["content"]) for r in requests]
    assert last[0][0] == "user" and last[0][1].endswith("question A")
    assert last[1][0] == "tool" and last[2][1].endswith("question B")
    # B's request reads group by group: A's prompt, call, result and answer, then B's
    # prompt, although B's prompt was stored before A's call (the ids interleave).
    sent = [(m["role"], m.get("content") or "") for m in requests[2].messages]
    sent = [
        (role, text)
        for role, text in sent
        if role != "system"
        and not text.startswith(("## Context for the Current Request", "## Repository Files"))
        and text != PAIR_ACK
    ]
    assert [role for role, _ in sent] == ["user", "assistant", "tool", "assistant", "user"], sent
    assert sent[0][1].endswith("question A") and sent[-1][1].endswith("question B")
    rows = query(db_path(tmp_path), "SELECT id, group_id, role, content FROM messages")
    group_a = next(g for _, g, r, c in rows if r == "user" and c == "question A")
    prompt_b = next(i for i, _, r, c in rows if r == "user" and c == "question B")
    assert any(i > prompt_b and g == group_a for i, g, _, _ in rows)
    assert not query(db_path(tmp_path), "SELECT key FROM app_state WHERE key LIKE 'turn/%'")


# -- 5. broken files -------------------------------------------------------------------------------

_DEEP = {
    "arrays": "a = " + "[" * 3000 + "]" * 3000 + "\n",
    "inline tables": "a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n",
    "dotted headers": "[providers." + ".".join(["x"] * 20000) + "]\n",
}


@pytest.mark.parametrize("shape", sorted(_DEEP))
def test_a_deeply_nested_config_file_is_one_warning(tmp_path, shape):
    """The same nesting in the user's config file and the project's: each is one
    warning, and the command runs (was: RecursionError at start-up, for every command
    and the TUI)."""
    user = tmp_path / "user-config.toml"
    user.write_text(_DEEP[shape])
    write_config(tmp_path, _DEEP[shape])
    proc, _ = run_cli(["exec", "/session list"], tmp_path, {"SLOP_CONFIG": str(user)})
    assert proc.returncode == 0, proc.stderr
    assert "default_session" in proc.stdout
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    warnings = proc.stderr.splitlines()
    assert len(warnings) == 2, warnings
    for warning, path in zip(warnings, (user, tmp_path / ".slop" / "config.toml"), strict=True):
        assert warning.startswith(f"slop-tui: warning: {path}:") and "nest" in warning


async def test_a_deeply_nested_theme_file_does_not_stop_the_app(tmp_path, monkeypatch):
    from slop_tui.ui.app import SlopApp
    from tests.test_app import started

    home = tmp_path / "home"
    (home / "themes").mkdir(parents=True)
    (home / "themes" / "deep.toml").write_text(_DEEP["arrays"])
    (home / "themes" / "dotted.toml").write_text("[variables." + ".".join("v" * 5000) + "]\n")
    app_env(monkeypatch, tmp_path, home / "config.toml")
    app = SlopApp(db=str(tmp_path / "slop.db"), user_themes=True, blink=False)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await started(pilot)
        messages = [n.message for n in app._notifications]
        [note] = [m for m in messages if "theme files were skipped" in m]
        assert "deep.toml" in note and "dotted.toml" in note and "nested too deeply" in note
        assert app.theme == "slop-dark"


GARBAGE = b"\xde\xad\xbe\xef"


async def _damaged_ledger(root: Path) -> tuple[Path, int]:
    """A ledger whose messages table's root page (an interior page) is overwritten;
    and that page's offset."""
    path = db_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    async with await Ledger.open(path) as led:
        for i in range(60):
            user = await led.append_user("default_session", f"prompt {i} " + "x" * 300)
            await led.append("default_session", user.group_id, [NewMessage("assistant", "y" * 500)])
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        root_page = con.execute(
            "SELECT rootpage FROM sqlite_master WHERE name='messages'"
        ).fetchone()[0]
        size = con.execute("PRAGMA page_size").fetchone()[0]
        interior = con.execute("SELECT COUNT(*) FROM messages").fetchone()[0] > 20
    assert interior and root_page > 1
    with open(path, "r+b") as fh:
        fh.seek((root_page - 1) * size)
        fh.write(GARBAGE * (size // 4))
    return path, (root_page - 1) * size


async def test_a_damaged_database_is_one_line(tmp_path, fake_llm):
    path, page = await _damaged_ledger(tmp_path)
    for args in (
        ["exec", "/message list"],
        ["exec", "/session list"],
        ["exec", "/history search prompt"],
        ["ask", "hello"],
    ):
        proc, _ = run_cli(args, tmp_path, openai_env(fake_llm))
        assert proc.returncode == 1, (args, proc.stdout)
        assert "is damaged and cannot be read (database disk image is malformed)" in one_line(
            proc.stderr
        )
    with open(path, "rb") as fh:  # nothing wrote over the damage (or "repaired" it)
        fh.seek(page)
        assert fh.read(64) == GARBAGE * 16


async def test_a_damaged_database_is_one_banner_in_the_tui(tmp_path, monkeypatch):
    from slop_tui.ui.app import SlopApp
    from tests.fakeserver import wait_for

    path, _ = await _damaged_ledger(tmp_path)
    app_env(monkeypatch, tmp_path, tmp_path / "no-config.toml")
    app = SlopApp(db=str(path), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:  # was: WorkerFailed, a traceback
        await wait_for(pilot, lambda: app.startup_error is not None)
        assert "is damaged and cannot be read" in app.startup_error
        assert app.workspace is None


def test_a_fifo_as_the_database_is_one_line(tmp_path):
    fifo = tmp_path / "ledger.db"
    os.mkfifo(fifo)
    baseline = start_up(tmp_path)
    proc, took = run_cli(["exec", "--db", str(fifo), "/session list"], tmp_path)
    assert proc.returncode == 1
    assert "is a FIFO (named pipe), not a database file" in one_line(proc.stderr)
    assert took < 10 + baseline, (took, baseline)


def test_another_programs_database_with_user_version_3(tmp_path):
    other = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(other)) as con:
        con.execute("CREATE TABLE notes(x)")
        con.execute("PRAGMA user_version=3")
        con.commit()
    before = other.read_bytes()
    proc, _ = run_cli(["exec", "--db", str(other), "/session list"], tmp_path)
    assert proc.returncode == 1
    line = one_line(proc.stderr)
    assert "another program, not a slop-tui database" in line and "newer" not in line
    assert other.read_bytes() == before


def _can_mount_read_only(folder: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind -o ro '{folder}' '{folder}'"],
        capture_output=True,
    )
    return probe.returncode == 0


def test_a_read_only_file_system_is_named_as_such(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    if not _can_mount_read_only(project):
        pytest.skip("needs `unshare -m` and a read-only bind mount (root)")
    outcomes = {}
    for case, db in (("existing", "kept.db"), ("new", "fresh.db")):
        if case == "existing":
            with contextlib.closing(sqlite3.connect(project / db)):
                pass
        script = (
            f"mount --bind -o ro '{project}' '{project}' && "
            f"exec '{sys.executable}' -m slop_tui.cli exec --db '{project / db}' '/session list'"
        )
        env = child_env(project)
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c", script],
            cwd=project, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        outcomes[case] = proc
    for proc in outcomes.values():
        assert proc.returncode == 1
        line = one_line(proc.stderr)
        assert "mounted read-only" in line and "permission denied" not in line


# -- 6. provider edge cases ---------------------------------------------------------------------


def test_invalid_utf8_in_an_openai_delta_becomes_replacement_characters(tmp_path, fake_llm):
    raw = [
        _sse({"role": "assistant", "content": ""}),
        b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":"caf\xc3 ok \xff\xfe"},'
        b'"finish_reason":null}]}\n\n',
        _sse({}, "stop"),
        b"data: [DONE]\n\n",
    ]
    fake_llm.enqueue(Reply(raw=raw))
    proc, _ = run_cli(["ask", "hi"], tmp_path, openai_env(fake_llm))
    assert proc.returncode == 0, proc.stderr
    assert "caf\ufffd ok \ufffd\ufffd" in proc.stdout
    rows = query(db_path(tmp_path), "SELECT status, content FROM messages WHERE role='assistant'")
    assert rows == [("completed", "caf\ufffd ok \ufffd\ufffd")]


def test_a_provider_timeout_that_is_not_a_positive_number_is_refused(tmp_path):
    values = ["nan", "inf", "-inf", "-1.5", "0.0"]
    write_config(
        tmp_path,
        "".join(
            f'[providers.p{i}]\nkind = "openai"\n{key} = {value}\n'
            for i, value in enumerate(values)
            for key in (("timeout", "reply_timeout")[i % 2],)
        ),
    )
    proc, _ = run_cli(["exec", "/session list"], tmp_path, {"OPENAI_API_KEY": "x"})
    assert proc.returncode == 0, proc.stderr
    warnings = proc.stderr.splitlines()
    assert len(warnings) == len(values), warnings
    for i, (warning, value) in enumerate(zip(warnings, values, strict=True)):
        assert f"[providers.p{i}]" in warning and f"= {float(value)!r}" in warning
        assert "must be a positive, finite number of seconds" in warning


def test_an_unknown_default_provider_is_a_clear_warning(tmp_path):
    write_config(tmp_path, 'default_provider = "nope"\n')
    proc, _ = run_cli(["exec", "/session list"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    [warning] = proc.stderr.splitlines()
    assert "default_provider = 'nope' is not a configured provider" in warning
    assert "using 'demo'" in warning


def test_unparsable_tool_arguments_are_reported_to_the_model(tmp_path, fake_llm):
    (tmp_path / "README.md").write_text("hello\n")
    result, _ = tool_round_trip(tmp_path, fake_llm, FakeToolCall("read_file", '{"path": "READ'))
    assert "the arguments are not valid JSON" in result, result
    assert "the call was not run" in result
    assert "is required" not in result and "hello" not in result


# -- 7. export -----------------------------------------------------------------------------------


def test_export_goes_to_its_own_folder_and_never_overwrites(tmp_path):
    """A session named README exported as Markdown met the project's README.md."""
    readme = tmp_path / "README.md"
    readme.write_text("# my uncommitted readme\n")
    proc, _ = run_cli(["exec", "--session", "README", "/export markdown"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    exported = tmp_path / ".slop" / "exports" / "README.md"
    assert exported.is_file() and str(exported) in proc.stdout
    assert readme.read_text() == "# my uncommitted readme\n"
    exported.write_text("edited by hand")
    proc, _ = run_cli(["exec", "--session", "README", "/export markdown"], tmp_path)
    assert proc.returncode == 1 and "already exists" in one_line(proc.stderr)
    assert exported.read_text() == "edited by hand"


async def test_the_palette_export_asks_before_it_overwrites(tmp_path, monkeypatch):
    from slop_tui.ui.app import SlopApp
    from slop_tui.ui.screens.dialogs import ConfirmScreen
    from tests.fakeserver import wait_for
    from tests.test_app import started
    from tests.test_app_actions import palette

    app_env(monkeypatch, tmp_path, tmp_path / "no-config.toml")
    (tmp_path / "package.json").write_text('{"name": "mine"}\n')
    app = SlopApp(db=str(db_path(tmp_path)), session="package", user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        target = tmp_path / ".slop" / "exports" / "package.json"
        await palette(pilot, "Export session as JSON")
        await wait_for(pilot, target.exists)
        target.write_text("mine too")
        await palette(pilot, "Export session as JSON")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
    assert target.read_text() == "mine too"
    assert (tmp_path / "package.json").read_text() == '{"name": "mine"}\n'


# -- 8. small -------------------------------------------------------------------------------------


def test_a_newline_in_a_file_name_is_no_fake_entry(tmp_path, fake_llm):
    (tmp_path / "real.txt").write_text("x")
    (tmp_path / "a\nfake.txt").write_text("x")
    result, _ = tool_round_trip(tmp_path, fake_llm, FakeToolCall("list_directory", {"path": "."}))
    lines = result.splitlines()
    assert '"a\\nfake.txt"' in lines and "real.txt" in lines
    assert "fake.txt" not in lines  # no second entry made up by the newline


def test_grep_finds_text_in_a_large_sparse_file(tmp_path, fake_llm):
    big = tmp_path / "big.log"
    with open(big, "wb") as fh:
        fh.write(b"the needle is on the first line\nsecond line\n")
    os.truncate(big, 2 * 1024**3)  # 2 GB, nearly all of it a hole
    (tmp_path / "blob.bin").write_bytes(b"needle\x00\xff\xfe" * 100)  # a real binary
    result, took = tool_round_trip(tmp_path, fake_llm, FakeToolCall("grep", {"pattern": "needle"}))
    assert "big.log:1:the needle is on the first line" in result, result
    assert "blob.bin" not in result
    assert took < 20, took
