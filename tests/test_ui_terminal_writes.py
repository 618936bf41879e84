"""`frames-written-at-once` (ui/textual_fixes.py): a frame reaches the terminal from the
thread that drew it when nothing is queued ahead of it, and the output keeps its order
when the terminal does not take it all at once."""

from __future__ import annotations

import os
import select
import threading
import tty

from textual.drivers._writer_thread import WriterThread

from slop_tui.ui import textual_fixes as fixes


class Recorded:
    """The writer thread's file: what it is given, in order. `hold` keeps its writes
    waiting (a writer thread that has not got the interpreter or a core yet)."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, fd: int, hold: threading.Event | None = None) -> None:
        self.fd = fd
        self.hold = hold
        self.got: list[str | bytes] = []
        self.buffer = self

    def fileno(self) -> int:
        return self.fd

    def write(self, data):  # type: ignore[no-untyped-def]
        if self.hold is not None:
            self.hold.wait(5)
        self.got.append(data)
        return len(data)

    def flush(self) -> None:
        pass


def _pty() -> tuple[int, int]:
    """A pseudo-terminal in raw mode, as Textual puts the app's terminal."""
    master, slave = os.openpty()
    tty.setraw(slave)
    return master, slave


def _read_all(fd: int, wait: float) -> bytes:
    out = b""
    while select.select([fd], [], [], wait)[0]:
        out += os.read(fd, 1 << 16)
        wait = 0.05
    return out


def test_a_frame_is_on_the_terminal_without_the_writer_thread():
    assert "frames-written-at-once" in fixes.installed()
    master, slave = _pty()
    hold = threading.Event()
    writer = WriterThread(Recorded(slave, hold))
    writer.start()
    try:
        writer.write("\x1b[2;3Hthe frame")
        # Textual's writer thread would write it; here that thread is held.
        assert _read_all(master, 1.0) == b"\x1b[2;3Hthe frame"
        assert writer._file.got == []
    finally:
        hold.set()
        writer.stop()
        os.close(master)
        os.close(slave)


def test_what_the_terminal_does_not_take_goes_after_in_order():
    master, slave = _pty()
    file = Recorded(slave)
    writer = WriterThread(file)
    writer.start()
    try:
        # More than a pty's buffer holds while nobody reads it: the terminal takes a
        # part, the rest goes to the writer thread, and the next frame after it.
        big = "".join(f"line {i:06d}\n" for i in range(40_000))
        writer.write(big)
        writer.write("the next frame")
        writer.stop()
        taken = _read_all(master, 0.2)
        assert 0 < len(taken) < len(big)
        assert file.got[0] == big.encode()[len(taken) :]
        assert file.got[1:] == ["the next frame"]
    finally:
        os.close(master)
        os.close(slave)


def test_not_a_terminal_everything_goes_through_the_writer_thread(tmp_path):
    with open(tmp_path / "out", "w") as f:
        file = Recorded(f.fileno())
        writer = WriterThread(file)
        writer.start()
        writer.write("a")
        writer.write("b")
        writer.stop()
    assert file.got == ["a", "b"]
