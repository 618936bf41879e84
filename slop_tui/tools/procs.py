"""Running a child process for a tool: closed stdin, its own process group, a
deadline, cancellation, capped output, and nothing left running on the way out.

`start_new_session=True` puts the child in a new session and process group:
the whole group can be signalled at once, and the child has no controlling
terminal, so programs that prompt on /dev/tty (ssh, sudo, git credentials)
fail at once instead of stealing the TUI's terminal.

A descendant can leave that group (`setsid`, a daemonising double fork), so
killing the group alone would leave it running. Every run therefore gets a tag
in its environment (`SLOP_TOOL_RUN=<id>`), which descendants inherit across
`setsid` and re-parenting; on Linux, stopping a run signals its process group,
every process descended from it (by parent pid) and every process whose
environment carries the tag (`/proc/<pid>/environ`). Only a process that left
the group, lost its parent chain *and* dropped the variable (`env -i`) escapes:
catching that needs cgroups.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import secrets
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slop_tui.tools.errors import ToolError

TERM_GRACE = 0.5  # SIGTERM, then SIGKILL for whatever is left after this long
LINGER_GRACE = 0.2  # after the command exits, how long background jobs may hold its output
POLL = 0.05
READ_CHUNK = 65536
RUN_TAG = "SLOP_TOOL_RUN"  # the environment variable that marks a run's processes
_RUN_IDS = itertools.count(1)


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


def _proc_table() -> list[tuple[int, int, int]] | None:
    """(pid, parent pid, process group) of every live process; None without /proc.

    Zombies and dead entries are left out: they cannot be signalled further, and
    a slow init (some container and microVM inits) keeps orphans as zombies for
    a second or more.
    """
    try:
        entries = os.scandir("/proc")
    except OSError:
        return None
    table = []
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                if fields[0] not in (b"Z", b"X"):
                    table.append((int(entry.name), int(fields[1]), int(fields[2])))
            except (OSError, IndexError, ValueError):
                continue
    return table


def _has_tag(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\0")
    except OSError:  # gone, or another user's process
        return False


def run_members(root: int, tag: str | None) -> set[int] | None:
    """The live processes of the run started as `root` (see the module docstring);
    None where /proc cannot be read."""
    table = _proc_table()
    if table is None:
        return None
    children: dict[int, list[int]] = {}
    found: set[int] = set()
    for pid, ppid, pgid in table:
        children.setdefault(ppid, []).append(pid)
        if pgid == root or pid == root:
            found.add(pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    if tag is not None:
        needle = f"{RUN_TAG}={tag}".encode()
        found.update(pid for pid, _, _ in table if pid not in found and _has_tag(pid, needle))
    found.discard(os.getpid())
    return found


def _signal(root: int, members: set[int] | None, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(root, sig)
    for pid in members or ():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def kill_group(pgid: int, tag: str | None = None) -> None:
    """Stop a run: SIGTERM its process group and every other member (`run_members`),
    wait up to TERM_GRACE for them to go, then SIGKILL whatever is left."""
    members = run_members(pgid, tag)
    if members is None:  # no /proc: the process group is all that can be found
        if not _group_alive(pgid):
            return
    elif not members:
        return
    _signal(pgid, members, signal.SIGTERM)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TERM_GRACE
    while loop.time() < deadline:
        await asyncio.sleep(0.02)
        members = run_members(pgid, tag)
        if members is None and not _group_alive(pgid):
            return
        if members is not None and not members:
            return
    _signal(pgid, run_members(pgid, tag), signal.SIGKILL)


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
    run's processes (`kill_group`) and raises `asyncio.CancelledError`.
    """
    tag = f"{os.getpid()}.{next(_RUN_IDS)}.{secrets.token_hex(4)}"
    child_env = dict(os.environ if env is None else env)
    child_env[RUN_TAG] = tag
    creating = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=child_env,
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
            await kill_group(late.pid, tag)
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
            await kill_group(proc.pid, tag)
        elif not readers.done():
            # The command exited but background jobs still hold its output open.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(readers), LINGER_GRACE)
            if not readers.done():
                stopped = True
                await kill_group(proc.pid, tag)
    except BaseException:  # cancellation included: leave nothing running
        await kill_group(proc.pid, tag)
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


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def _abandon(
    proc: asyncio.subprocess.Process, readers: asyncio.Future, waiter: asyncio.Future
) -> None:
    """Stop reading; a process outside our group (it called setsid) may still hold the pipes."""
    for fut in (readers, waiter):
        if not fut.done():
            fut.cancel()
        # Mark the outcome retrieved, now or when the cancellation lands: a read error
        # here changes nothing, and a cancelled gather otherwise ends with an
        # unretrieved CancelledError ("exception was never retrieved" on stderr).
        fut.add_done_callback(_retrieve)
    transport = getattr(proc, "_transport", None)  # no public way to close the pipes early
    if transport is not None and not (readers.done() and waiter.done()):
        transport.close()
