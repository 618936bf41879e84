"""The project's watcher process: keeps watching the files after the app exits, so the
next process's map asks it what changed instead of `stat`ing every file.

    python -m slop_tui.repomap.watcher_process ROOT IDLE_SECONDS [--foreground]

Started by the app (`watcher_client.start`) once its map's first look is done. It
leaves its starter at once (a second fork; `--foreground` stays, for tests), takes
the project's lock in the runtime folder (`watcher_client.runtime_dir`; a watcher
that runs already holds it, and this one exits quietly), lists the files and
watches their folders with the map's own `Watcher`, then answers on a unix
socket, one request a connection:

    -> {"v": 1, "token": "<token or null>"}
    <- {"v": 1, "token": "<token now>", "changed": ["path", ...] | null}

A token is this instance's id and a count of the batches of notifications it has
taken. Asked about a token, it first takes every notification of a change made
before the request (`Watcher.changed`: a sync file of its own), then answers the
paths changed since that token, or null when it cannot know: a token of another
instance (it restarted), one older than its last loss of track, or more than
`NOTIFY_BURST` paths since (the map's own rule: the system's queue of
notifications may have overflowed in such a burst). It loses track when its
watcher fails, in such a burst, and when a folder is made or removed (it watches
each folder on its own, and moves its watches). Only paths cross the socket,
never a file's content, and only for a peer of the same user.

It exits after `IDLE_SECONDS` without a request while no app holds the project's
`.clients` lock (`watcher_client.hold`: an app runs), when the project's `.slop/`
folder (or the project) is removed or its socket is taken away, and on SIGTERM.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--foreground"]
    if len(args) != 2:
        print("usage: watcher_process ROOT IDLE_SECONDS [--foreground]", file=sys.stderr)
        return 2
    try:
        idle = float(args[1])
    except ValueError:
        return 2
    if "--foreground" not in argv and os.fork() > 0:
        os._exit(0)  # the starter returns at once; the watcher is nobody's child
    from pathlib import Path

    root = Path(os.path.realpath(args[0]))
    return _Keeper(root, idle).run()


class _Keeper:
    def __init__(self, root, idle: float) -> None:
        self.root = root
        self.idle = idle

    def run(self) -> int:
        import fcntl
        import signal

        from slop_tui.repomap import watcher_client as wc

        folder = wc.runtime_dir(create=True)
        if folder is None:
            return 0
        sock_path = wc.socket_path(self.root, folder)
        if sock_path is None or not (self.root / ".slop").is_dir():
            return 0
        try:
            lock = os.open(
                wc.lock_path(self.root, folder), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600
            )
        except OSError:
            return 0
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # one runs already
        os.ftruncate(lock, 0)
        os.pwrite(lock, str(os.getpid()).encode(), 0)
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            self._serve(sock_path)
        except _Stopped:
            pass
        finally:
            os.close(lock)  # the pid stays: it counts only while the lock is held
        return 0

    def _serve(self, sock_path) -> None:
        import secrets
        import socket
        import time

        from slop_tui.repomap.watcher_client import MAX_REQUEST, held, peer_uid

        self.instance = secrets.token_hex(8)
        self.seq = 0  # batches of notifications taken
        self.floor = 0  # tokens older than this one are unknown
        self.last: dict[str, int] = {}  # path -> the batch it last changed in
        self.watcher = None
        slop = self.root / ".slop"
        slop_ino = os.stat(slop).st_ino
        self._rewatch()
        if self.watcher is None:
            return  # the system refused the watches: nothing to tell
        # Holding the lock, any socket file there is a dead watcher's.
        try:
            os.unlink(sock_path)
        except FileNotFoundError:
            pass
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_mask = os.umask(0o177)
        try:
            server.bind(str(sock_path))
        finally:
            os.umask(old_mask)
        sock_ino = os.stat(sock_path).st_ino
        server.listen(8)
        server.settimeout(1.0)
        last_client = time.monotonic()
        try:
            while True:
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    if held(self.root, sock_path.parent):
                        last_client = time.monotonic()  # an app runs: not idle
                    elif self.idle > 0 and time.monotonic() - last_client > self.idle:
                        return
                    try:
                        if (
                            os.stat(slop).st_ino != slop_ino
                            or os.stat(sock_path).st_ino != sock_ino
                        ):
                            return
                    except OSError:
                        return  # the project, its .slop/ or the socket is gone
                    continue
                last_client = time.monotonic()
                with conn:
                    try:
                        uid = peer_uid(conn)
                        if uid is not None and uid != os.getuid():
                            continue
                        conn.settimeout(2.0)
                        request = _read_request(conn, MAX_REQUEST)
                        reply = self._answer(request)
                        conn.sendall(reply)
                    except (OSError, ValueError):
                        continue
                if self.watcher is None:
                    return  # watching failed again: a later app starts a new one
        finally:
            server.close()
            try:
                if os.stat(sock_path).st_ino == sock_ino:
                    os.unlink(sock_path)
            except OSError:
                pass
            if self.watcher is not None:
                self.watcher.close()

    def _rewatch(self) -> None:
        """A new watcher on the folders of a fresh listing; every earlier token is
        unknown from now on."""
        from slop_tui.repomap.files import list_files
        from slop_tui.repomap.watch import Watcher, WatchUnavailable

        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
        self.listing = list_files(self.root)
        try:
            self.watcher = Watcher(self.root, self.listing.folders, self.root / ".slop")
        except WatchUnavailable:
            self.watcher = None
        self._lose_track()

    def _lose_track(self) -> None:
        self.seq += 1
        self.floor = self.seq
        self.last.clear()

    def _take(self) -> None:
        """Take the notifications of every change made before now."""
        from slop_tui.repomap.map import NOTIFY_BURST, _burst

        events = self.watcher.changed() if self.watcher is not None else None
        if events is None:
            self._rewatch()
            return
        events = {e for e in events if not e.startswith(".slop/") and e != ".slop"}
        if not events:
            return
        if _burst(events) > NOTIFY_BURST:
            self._lose_track()
            return
        self.seq += 1
        for path in events:
            self.last[path] = self.seq
        if len(self.last) > 4 * NOTIFY_BURST:
            self._lose_track()
        elif self._listing_moved(events):
            from slop_tui.repomap.files import list_files

            fresh = list_files(self.root)
            if self.watcher is None or frozenset(fresh.folders) != self.watcher.folders:
                self._rewatch()
            else:
                self.listing = fresh

    def _listing_moved(self, events: set[str]) -> bool:
        """Whether the notified paths may change which folders are listed: an ignore
        file, git's index or exclude file, a folder made or removed."""
        root = os.path.join(str(self.root), "")
        for rel in events:
            if rel.rpartition("/")[2] == ".gitignore" or rel in (".git/index", ".git/info/exclude"):
                return True
            if rel in self.listing.folders or os.path.isdir(root + rel):
                return True
        return False

    def _answer(self, request: dict) -> bytes:
        import json

        from slop_tui.repomap.map import NOTIFY_BURST
        from slop_tui.repomap.watcher_client import PROTOCOL

        self._take()
        token = request.get("token")
        changed: list[str] | None = None
        if isinstance(token, str):
            instance, _, seq_text = token.partition(".")
            if instance == self.instance and seq_text.isdigit():
                seq = int(seq_text)
                if self.floor <= seq <= self.seq:
                    changed = sorted(p for p, s in self.last.items() if s > seq)
                    if len(changed) > NOTIFY_BURST:
                        changed = None
        if self.watcher is None:
            changed = None
        reply = {"v": PROTOCOL, "token": f"{self.instance}.{self.seq}", "changed": changed}
        return json.dumps(reply).encode() + b"\n"


def _read_request(conn, limit: int) -> dict:
    import json

    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(limit)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise ValueError("request too long")
    request = json.loads(data)
    if not isinstance(request, dict):
        raise ValueError("not a request")
    return request


class _Stopped(Exception):
    pass


def _stop(_signum: int, _frame: object) -> None:
    raise _Stopped


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
