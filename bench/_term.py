"""A program in a pseudo-terminal, its output read by a terminal emulator (pyte).

What bench/screen.py and bench/peers.py measure with: the wall clock of what a
user's terminal shows, from outside the process.

- `Term(argv, ...)` opens a pty of the given size, starts the program on it (a
  new session, the pty as stdin/stdout/stderr) and stamps `t0` just before the
  spawn. A reader thread takes the output as it comes (`os.read` releases the
  GIL) and stamps each chunk with `time.perf_counter()` when it was read; the
  emulator is fed later, on the caller's thread, so a slow emulator never
  delays a timestamp nor makes the program wait on a full pty buffer.
- `pump(probe, timeout)` feeds the queued chunks in order and returns the read
  time of the first chunk after which `probe(term)` holds.
- `stamping()`: while keys are timed, this process's own pauses stay out of the
  times: its reader thread stamps a chunk when it holds the interpreter lock, which
  the caller's thread keeps while it feeds the emulator (up to the switch interval,
  5 ms by default: 0.5 ms inside) or while it runs a garbage collection (the
  emulator's cells made a full one of this process take 80-230 ms on a loaded
  machine): no automatic collection inside, what was made before is frozen.
- A *change* is a chunk that changes any character on the screen, or the
  attributes of more than `BLINK_CELLS` cells: a blinking cursor (an attribute
  toggled on one or two cells every half second) is not a change, so "the
  screen has settled" can be seen while a cursor blinks.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import fcntl
import gc
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pyte

BLINK_CELLS = 2

# xterm key sequences, as a terminal sends them for these keys.
KEYS = {
    "up": b"\x1b[A",
    "down": b"\x1b[B",
    "pageup": b"\x1b[5~",
    "pagedown": b"\x1b[6~",
    "end": b"\x1b[F",
    "home": b"\x1b[H",
    "f2": b"\x1bOQ",
    "f3": b"\x1bOR",
    "ctrl+u": b"\x15",
    "ctrl+p": b"\x10",
    "ctrl+q": b"\x11",
    "backspace": b"\x7f",
    "enter": b"\r",
    "escape": b"\x1b",
    "tab": b"\t",
}


def click(x: int, y: int) -> bytes:
    """A left click at column x, row y (0-based), in the SGR mouse encoding."""
    return f"\x1b[<0;{x + 1};{y + 1}M\x1b[<0;{x + 1};{y + 1}m".encode()


def status_kb(pid: int, field: str) -> int | None:
    """A `kB` field of /proc/PID/status (VmHWM, VmRSS), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (and its waited-for children), seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    # After the ")": state is field 3 of the full line, utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / ticks


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


_OPEN: set[Term] = set()  # started and not closed yet


@atexit.register
def _kill_open() -> None:
    """A bench that dies must not leave its programs running on a closed pty: they
    spin there, most of a CPU each, and skew every later measure on the machine."""
    for term in list(_OPEN):
        _kill_group(term.proc)


class Term:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        cwd: str,
        cols: int = 120,
        rows: int = 40,
        stderr: int | None = None,
    ) -> None:
        self.cols, self.rows = cols, rows
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.lines: list[tuple] = [self._line(y) for y in range(rows)]
        self.last_change: float | None = None  # read time of the latest change
        self.changes = 0
        self.bytes = 0
        self._queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self._ready = threading.Condition()
        self._closed = False
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.master = master
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave if stderr is None else stderr,
            env=env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        _OPEN.add(self)  # killed at exit if not closed (see _kill_open)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- output ---------------------------------------------------------------------

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:  # EIO: the program closed the terminal (it exited)
                data = b""
            now = time.perf_counter()
            with self._ready:
                if data:
                    self._queue.append((now, data))
                else:
                    self._closed = True
                self._ready.notify_all()
            if not data:
                return

    def _line(self, y: int) -> tuple:
        line = self.screen.buffer[y]
        return tuple(line[x] for x in range(self.cols))

    def _feed(self, data: bytes) -> bool:
        """Feed one chunk; True when it changed the screen (see the module docstring)."""
        self.bytes += len(data)
        self.stream.feed(data)
        dirty = self.screen.dirty
        cells = 0
        text = False
        for y in dirty:
            if y >= self.rows:
                continue
            new = self._line(y)
            old = self.lines[y]
            if new == old:
                continue
            for a, b in zip(old, new, strict=True):
                if a != b:
                    cells += 1
                    text = text or a.data != b.data
            self.lines[y] = new
        dirty.clear()
        return text or cells > BLINK_CELLS

    def pump(
        self, probe: Callable[[Term], bool] | None, timeout: float, *, after: float = 0.0
    ) -> float | None:
        """Feed what the program wrote until `probe` holds after a chunk read at or after
        `after`; returns that chunk's read time, or None after `timeout` seconds (or
        when the program closed its terminal). `probe=None` feeds what is queued now
        (not what arrives meanwhile: a program writing faster than the emulator reads
        would keep it feeding for ever)."""
        deadline = time.perf_counter() + timeout
        left_to_feed = len(self._queue) if probe is None else -1
        while True:
            if left_to_feed == 0:
                return None
            left_to_feed -= 1
            with self._ready:
                while not self._queue and not self._closed and probe is not None:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        return None
                    self._ready.wait(left)
                if not self._queue:
                    return None
                t, data = self._queue.popleft()
            if self._feed(data):
                self.last_change = t
                self.changes += 1
            if probe is not None and t >= after and probe(self):
                return t
            if probe is not None and time.perf_counter() > deadline:
                return None

    def drain(self) -> None:
        self.pump(None, 0)

    def settle(self, quiet: float, timeout: float) -> float | None:
        """Wait until the screen has not changed for `quiet` seconds from now; returns the
        read time of its last change (None: it kept changing for `timeout` seconds)."""
        since = time.perf_counter()
        deadline = since + timeout
        while time.perf_counter() < deadline:
            self.drain()
            last = max(self.last_change or self.t0, since)
            left = last + quiet - time.perf_counter()
            if left <= 0:
                return self.last_change or self.t0
            with self._ready:
                if not self._queue and not self._closed:
                    self._ready.wait(max(0.0, min(left, deadline - time.perf_counter())))
                if self._closed and not self._queue:
                    return self.last_change or self.t0
        return None

    # -- what the screen shows --------------------------------------------------------

    def text(self, y: int, x0: int = 0, x1: int | None = None) -> str:
        return "".join(c.data for c in self.lines[y][x0:x1])

    def region(self, x0: int, x1: int, y0: int, y1: int) -> list[str]:
        return [self.text(y, x0, x1) for y in range(y0, y1)]

    def find(self, needle: str) -> tuple[int, int] | None:
        for y in range(self.rows):
            x = self.text(y).find(needle)
            if x >= 0:
                return x, y
        return None

    def dump(self) -> str:
        return "\n".join(self.text(y) for y in range(self.rows))

    # -- input and the process --------------------------------------------------------

    def send(self, data: bytes | str) -> float:
        """Write keys as the terminal would; returns the time just before the write."""
        if isinstance(data, str):
            data = KEYS.get(data) or data.encode()
        t = time.perf_counter()
        os.write(self.master, data)
        return t

    def close(self) -> None:
        """End the program and everything it started (SIGKILL to its process group: what
        it leaves behind is a throwaway copy) and close the pty."""
        _kill_group(self.proc)
        _OPEN.discard(self)
        self.proc.wait(10)
        try:
            os.close(self.master)
        except OSError:
            pass
        self._reader.join(1.0)


@contextlib.contextmanager
def stamping() -> Iterator[None]:
    """Chunks stamped as they are read while keys are timed (see the module docstring)."""
    interval = sys.getswitchinterval()
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    sys.setswitchinterval(0.0005)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def environment(**extra: str) -> dict[str, str]:
    """The environment a program gets in these terminals: the caller's, less the
    provider keys and slop-tui's own variables, as a 256-colour xterm with truecolor."""
    env = dict(os.environ)
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "SLOP_DB",
        "SLOP_SESSION",
        "SLOP_CONFIG",
        "TEXTUAL",
        "TEXTUAL_ANIMATIONS",
        "PYTHONDONTWRITEBYTECODE",
        "COLUMNS",
        "LINES",
        "TMUX",
    ):
        env.pop(var, None)
    env.update(TERM="xterm-256color", COLORTERM="truecolor", LANG="C.UTF-8")
    env.update(extra)
    return env


if __name__ == "__main__":  # a look at what a program shows: python bench/_term.py CMD...
    term = Term(sys.argv[1:], env=environment(), cwd=os.getcwd())
    term.settle(1.0, 20.0)
    print(term.dump())
    term.close()
