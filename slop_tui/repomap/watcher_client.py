"""Talking to the project's watcher process (`watcher_process`), which keeps watching
the files after the app exits.

A map asks `ask(root, token)`: "what changed since `token`?". The answer is a new
token and the root-relative paths changed since the old one, or `changed=None`
("unknown": the watcher restarted, the token is another instance's, or it lost
track in a burst); no watcher, a refused or slow connection or a garbled answer
is None. Either way the caller then looks at every file: the watcher only ever
saves `stat`s. The paths are hints: the map `stat`s each one itself, and a path
that leaves the project (absolute, `..`, a NUL) is dropped here.

Where the socket lives: a folder only this user can enter (`runtime_dir`):
`$SLOP_RUNTIME_DIR` when set (tests), else `$XDG_RUNTIME_DIR/slop-tui` when that
is under `/run`, else `/tmp/slop-tui-<uid>`. Both `/run` and `/tmp` are empty
folders of the model's sandboxed shell (`tools/sandbox.py`), so the shell can
neither reach a socket nor plant one. The folder must be a real folder (not a
symlink) owned by this user with no access for others, or nothing is used. Each
project's socket and lock are named by a hash of its resolved root (a unix
socket's path is limited to about 107 bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROTOCOL = 1
ASK_TIMEOUT = 3.0  # seconds: the watcher's own sync wait (2 s) and some
MAX_REPLY = 1 << 22  # bytes of an answer read at most
MAX_REQUEST = 4096
MAX_TOKEN = 100
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
OFF_VALUES = frozenset({"0", "off", "false", "no"})
DEFAULT_IDLE_MINUTES = 30.0


@dataclass(frozen=True, slots=True)
class Answer:
    """A watcher's answer: its token now and the paths changed since the token asked
    about (None: it cannot know; the caller looks at every file)."""

    token: str
    changed: list[str] | None


def idle_seconds(context: Mapping[str, object], env: Mapping[str, str] | None = None) -> float:
    """How long a watcher waits for a client before it exits, from `[context]
    repo_watcher_idle` (minutes); 0: no watcher. `SLOP_REPO_WATCHER=off` in the
    environment turns it off whatever the config says."""
    env = os.environ if env is None else env
    if env.get("SLOP_REPO_WATCHER", "").strip().lower() in OFF_VALUES:
        return 0.0
    value = context.get("repo_watcher_idle", DEFAULT_IDLE_MINUTES)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return DEFAULT_IDLE_MINUTES * 60
    return max(0.0, float(value)) * 60


def runtime_dir(create: bool = False, env: Mapping[str, str] | None = None) -> Path | None:
    """The folder of the sockets (see the module docstring), or None when it is not
    this user's alone (or cannot be made)."""
    env = os.environ if env is None else env
    uid = os.getuid()
    chosen = env.get("SLOP_RUNTIME_DIR", "")
    if chosen:
        folder = Path(chosen)
    else:
        xdg = env.get("XDG_RUNTIME_DIR", "")
        if xdg and os.path.isabs(xdg) and os.path.realpath(xdg).startswith("/run/"):
            folder = Path(xdg) / "slop-tui"
        else:
            folder = Path("/tmp") / f"slop-tui-{uid}"
    if create:
        with contextlib.suppress(FileExistsError, FileNotFoundError, PermissionError):
            os.mkdir(folder, 0o700)
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        return None
    return folder


def project_key(root: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:32]


def socket_path(root: Path, folder: Path) -> Path | None:
    """The project's socket; None when its path is too long, or the runtime folder is
    inside the project (the sandboxed shell could reach it there)."""
    path = folder / f"{project_key(root)}.sock"
    real_root = os.path.join(os.path.realpath(root), "")
    if os.path.join(os.path.realpath(folder), "").startswith(real_root):
        return None
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def lock_path(root: Path, folder: Path) -> Path:
    return folder / f"{project_key(root)}.lock"


def clients_path(root: Path, folder: Path) -> Path:
    return folder / f"{project_key(root)}.clients"


def hold(root: Path, env: Mapping[str, str] | None = None) -> int | None:
    """Tell the project's watcher that an app runs, for as long as this process keeps
    the returned descriptor open (a shared lock on the project's `.clients` file): the
    watcher counts its idle time only while no app holds it. None when it cannot."""
    import fcntl

    folder = runtime_dir(create=True, env=env)
    if folder is None:
        return None
    try:
        fd = os.open(clients_path(root, folder), os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def held(root: Path, folder: Path) -> bool:
    """Whether an app holds the project's `.clients` lock (see `hold`)."""
    import fcntl

    try:
        fd = os.open(clients_path(root, folder), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing lets go of a lock taken here
    return False


def peer_uid(conn: socket.socket) -> int | None:
    """The user id of the process at the other end (Linux; None elsewhere)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def ask(
    root: Path,
    token: str | None,
    timeout: float = ASK_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> Answer | None:
    """Ask the project's watcher what changed since `token` (see the module
    docstring); None when there is no usable answer."""
    folder = runtime_dir(env=env)
    path = socket_path(root, folder) if folder is not None else None
    if path is None:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(path))
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                return None
            request = {"v": PROTOCOL, "token": token}
            conn.sendall(json.dumps(request).encode() + b"\n")
            data = _read_line(conn, time.monotonic() + timeout)
    except (OSError, ValueError):
        return None
    return parse_answer(data)


def _read_line(conn: socket.socket, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the watcher did not answer in time")
        conn.settimeout(left)
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("the watcher closed the connection mid-answer")
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)
        if size > MAX_REPLY:
            raise ValueError("the watcher's answer is too long")


def parse_answer(data: bytes) -> Answer | None:
    """A watcher's answer line, checked: None for anything but a well-formed one."""
    try:
        reply = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(reply, dict) or reply.get("v") != PROTOCOL:
        return None
    token, changed = reply.get("token"), reply.get("changed")
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN:
        return None
    if changed is None:
        return Answer(token, None)
    if not isinstance(changed, list) or not all(isinstance(p, str) for p in changed):
        return None
    return Answer(token, [p for p in changed if inside(p)])


def inside(rel: str) -> bool:
    """A root-relative path that stays in the project (`/`-separated, no `..`)."""
    if not rel or "\0" in rel or rel.startswith("/") or "\\" in rel:
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


def start(root: Path, idle: float, log: Path | None = None) -> None:
    """Start the project's watcher, detached (its own session; it leaves the process
    that starts it at once, so nothing waits for it). One that runs already makes a
    second one exit at once. Returns when the starter process has left."""
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "slop_tui.repomap.watcher_process", str(root), str(idle)],
            cwd=str(root),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=out,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return
    finally:
        if log is not None and not isinstance(out, int):
            out.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def running_pid(root: Path, env: Mapping[str, str] | None = None) -> int | None:
    """The process id of the project's running watcher (the holder of its lock; -1
    while it has not written it yet), or None."""
    import fcntl

    folder = runtime_dir(env=env)
    if folder is None:
        return None
    try:
        fd = os.open(lock_path(root, folder), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def stop(root: Path, wait: float = 10.0, env: Mapping[str, str] | None = None) -> bool:
    """Stop the project's running watcher (SIGTERM to the holder of its lock) and wait
    until it has let go of its lock; True when none runs any more."""
    deadline = time.monotonic() + wait
    signalled = None
    while (pid := running_pid(root, env)) is not None:
        if pid > 0 and pid != signalled:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            signalled = pid
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
