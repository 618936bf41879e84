"""Running a child process for a tool: closed stdin, its own process group, a
deadline, cancellation, capped output, and nothing left running on the way out.

`start_new_session=True` puts the child in a new session and process group:
the whole group can be signalled at once, and the child has no controlling
terminal, so programs that prompt on /dev/tty (ssh, sudo, git credentials)
fail at once instead of stealing the TUI's terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slop_tui.tools.base import ToolError

TERM_GRACE = 0.5  # SIGTERM, then SIGKILL for whatever is left after this long
LINGER_GRACE = 0.2  # after the command exits, how long background jobs may hold its output
POLL = 0.05
READ_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class ProcOutcome:
    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool = False
    # Background processes kept stdout/stderr open after the command exited; they were killed.
    stopped_background: bool = False


class CappedBuffer:
    """Bytes with a cap: keeps the first quarter and the last three quarters."""

    def __init__(self, limit: int) -> None:
        self.limit = max(16, limit)
        self.head_cap = self.limit // 4
        self.tail_cap = self.limit - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_cap:  # trim in batches, not per chunk
                del self.tail[: -self.tail_cap]

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_cap :]) if self.tail else b""
        omitted = self.total - len(self.head) - len(tail)
        head = self.head.decode("utf-8", "replace")
        if omitted <= 0:
            return head + tail.decode("utf-8", "replace") if tail else head
        note = f"\n... [{omitted:,} bytes omitted; output capped at {self.limit:,} bytes] ...\n"
        return head + note + tail.decode("utf-8", "replace")


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process is still in the group.

    Orphaned children are re-parented to init, and a slow init (some
    container and microVM inits) leaves them as zombies for a second or
    more; zombies keep `killpg(pgid, 0)` succeeding, so on Linux /proc is
    consulted to ignore them.
    """
    if not _signal_group(pgid, 0):
        return False
    try:
        entries = os.scandir("/proc")
    except OSError:
        return True
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False


async def kill_group(pgid: int) -> None:
    """SIGTERM the group, wait up to TERM_GRACE for it to empty, then SIGKILL it."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TERM_GRACE
    while loop.time() < deadline:
        await asyncio.sleep(0.02)
        if not _group_alive(pgid):
            return
    _signal_group(pgid, signal.SIGKILL)


async def _pump(stream: asyncio.StreamReader | None, buf: CappedBuffer) -> None:
    if stream is None:
        return
    while chunk := await stream.read(READ_CHUNK):
        buf.add(chunk)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    cancel_event: asyncio.Event | None = None,
    max_bytes: int = 200_000,
    env: Mapping[str, str] | None = None,
) -> ProcOutcome:
    """Run argv to completion, the deadline, or cancellation.

    Cancellation (the task is cancelled, or `cancel_event` is set) kills the
    process group and raises `asyncio.CancelledError`.
    """
    creating = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    )
    try:
        proc = await asyncio.shield(creating)
    except OSError as exc:
        raise ToolError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    except asyncio.CancelledError:
        # Cancelled while asyncio was still connecting the pipes: the child may
        # already run. Left alone, asyncio would kill only the shell and then
        # wait for its background jobs to close the pipes (up to their whole
        # runtime), so take the handle and kill the group now.
        with contextlib.suppress(Exception):
            late = await creating
            await kill_group(late.pid)
            transport = getattr(late, "_transport", None)
            if transport is not None:
                transport.close()
        raise
    out, err = CappedBuffer(max_bytes), CappedBuffer(max_bytes)
    readers = asyncio.gather(_pump(proc.stdout, out), _pump(proc.stderr, err))
    waiter = asyncio.ensure_future(proc.wait())  # 3.11: resolves once the pipes close too
    stopped = False
    try:
        timed_out = await _wait(proc, readers, waiter, timeout, cancel_event)
        if timed_out:
            await kill_group(proc.pid)
        elif not readers.done():
            # The command exited but background jobs still hold its output open.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(readers), LINGER_GRACE)
            if not readers.done():
                stopped = True
                await kill_group(proc.pid)
    except BaseException:  # cancellation included: leave nothing running
        await kill_group(proc.pid)
        _abandon(proc, readers, waiter)
        raise
    await _drain(proc, readers, waiter)
    return ProcOutcome(out.text(), err.text(), proc.returncode, timed_out, stopped)


async def _wait(
    proc: asyncio.subprocess.Process,
    readers: asyncio.Future,
    waiter: asyncio.Future,
    timeout: float,
    cancel_event: asyncio.Event | None,
) -> bool:
    """Wait for the exit; True when the deadline passed first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    cancel_wait = asyncio.ensure_future(cancel_event.wait()) if cancel_event else None
    try:
        while True:
            if cancel_event is not None and cancel_event.is_set():
                raise asyncio.CancelledError("tool call cancelled")
            if waiter.done() or (proc.returncode is not None and not readers.done()):
                return False
            remaining = deadline - loop.time()
            if remaining <= 0:
                return True
            pending = {f for f in (readers, waiter, cancel_wait) if f is not None and not f.done()}
            # The short poll notices an exit whose output is still held open by a child.
            await asyncio.wait(
                pending, timeout=min(POLL, remaining), return_when=asyncio.FIRST_COMPLETED
            )
    finally:
        if cancel_wait is not None:
            cancel_wait.cancel()


async def _drain(
    proc: asyncio.subprocess.Process, readers: asyncio.Future, waiter: asyncio.Future
) -> None:
    """Collect the rest of the output once the group is gone (bounded)."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(readers), 1.0)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(waiter), 1.0)
    _abandon(proc, readers, waiter)


def _abandon(
    proc: asyncio.subprocess.Process, readers: asyncio.Future, waiter: asyncio.Future
) -> None:
    """Stop reading; a process outside our group (it called setsid) may still hold the pipes."""
    for fut in (readers, waiter):
        if fut.done():
            if not fut.cancelled():
                fut.exception()  # mark it retrieved; a read error here changes nothing
        else:
            fut.cancel()
    transport = getattr(proc, "_transport", None)  # no public way to close the pipes early
    if transport is not None and not (readers.done() and waiter.done()):
        transport.close()
