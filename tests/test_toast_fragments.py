"""No notification leaves a fragment on the terminal: the real `slop-tui` in a
pseudo-terminal (read by pyte, as bench/screen.py does), notifications stacked over
the prompt row, replaced while shown, the terminal resized under them and text typed
beneath them; once they have timed out the screen is compared with a full repaint
(a resize away and back) and no line differs."""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

from bench._term import Term, environment

SLOP = Path(sys.executable).parent / "slop-tui"


def pump(term: Term, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        term.drain()
        time.sleep(0.05)
    term.drain()


def resize(term: Term, cols: int, rows: int) -> None:
    term.drain()
    fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    term.screen.resize(rows, cols)
    term.cols, term.rows = cols, rows
    term.lines = [term._line(y) for y in range(rows)]
    os.killpg(term.proc.pid, signal.SIGWINCH)


@pytest.mark.skipif(not SLOP.exists(), reason="the slop-tui console script is not installed")
def test_no_notification_fragment_stays_after_it_is_gone(tmp_path):
    env = environment(SLOP_CONFIG=str(tmp_path / "none.toml"))
    term = Term([str(SLOP)], env=env, cwd=str(tmp_path), cols=120, rows=40)
    try:
        assert term.pump(lambda t: t.find("Try the demo") is not None, 60) is not None
        pump(term, 0.5)
        term.send("escape")  # the first-run panel closed: the workspace
        assert term.pump(lambda t: t.find("Type a prompt") is not None, 30) is not None
        for i in range(4):  # error notices (10 s) stacked over the prompt row
            term.send(f"/nosuchcmd{i}\r".encode())
            pump(term, 0.15)
        term.send(b"\x03")  # the quit hint (5 s), beside them
        resize(term, 80, 24)
        pump(term, 0.4)
        for ch in b"typed under the notices while they show":
            term.send(bytes([ch]))
        pump(term, 0.3)
        term.send(b"\x03")
        resize(term, 120, 40)
        pump(term, 0.3)
        term.send(b"\x15")  # ctrl+u: the prompt emptied under them
        assert "Unknown command" in term.dump()
        pump(term, 12)  # every notice timed out
        shown = term.dump()
        assert "Unknown command" not in shown and "want to quit" not in shown
        resize(term, 119, 40)
        pump(term, 0.8)
        resize(term, 120, 40)
        pump(term, 1.2)
        assert term.dump() == shown  # a full repaint changes nothing: no fragment was left
    finally:
        term.close()
