"""bench/screen_phases.py leaves no program behind: stopped by a signal or killed
outright, the bench's started programs end with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyte")

ROOT = Path(__file__).resolve().parent.parent

# The bench's own start path for a program: the guard first, in a pty of its own
# process group, the bench's handlers installed; prints the program's pid, then waits.
PARENT = r"""
import os, sys, time
sys.path[:0] = [{bench!r}, {root!r}]
import _term
import screen_phases
screen_phases.end_on_signals()
child = screen_phases.GUARD + "import time\nwhile True: time.sleep(0.05)\n"
env = dict(_term.environment(), PHASES_PARENT=str(os.getpid()))
term = _term.Term([sys.executable, "-c", child], env=env, cwd={root!r})
try:
    print(term.pid, flush=True)
    while True:
        time.sleep(0.05)
finally:
    term.close()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has ended; its parent has not reaped it yet


def _started() -> tuple[subprocess.Popen, int]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT.format(bench=str(ROOT / "bench"), root=str(ROOT))],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    time.sleep(0.3)  # the child has run its guard
    assert _alive(child)
    return parent, child


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_the_programs_the_bench_started_end_when_it_is_stopped(sig):
    parent, child = _started()
    try:
        parent.send_signal(sig)
        parent.wait(30)
        assert _gone_within(child, 10), f"the program outlived the bench ({sig.name})"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        parent.stdout.close()
        if _alive(child):
            os.kill(child, signal.SIGKILL)
