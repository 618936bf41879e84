"""Which files changed since the map last looked, told by the operating system.

A `Watcher` asks for change notifications (inotify on Linux, FSEvents on macOS,
ReadDirectoryChangesW on Windows, through watchfiles' binding of the Rust
`notify` crate) on each listed folder, not recursively: a folder the map skips
(`node_modules/`, `.venv/`) costs no watch. The notifications pile up in
`notify`'s own thread between two looks; `changed()` takes them.

`changed()` first writes a file of its own in the store's folder (watched
too) and waits until that file's notification arrives: notifications of one
watcher come in the order the changes were made, so every change made before
the call has then arrived. If it does not arrive in time, or the watcher
reports an error, `changed()` answers None and the map looks at every file,
as without a watcher: a late notification never leaves a change unseen.
"""

from __future__ import annotations

import itertools
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path

SYNC_PREFIX = "repomap-sync-"
SYNC_WAIT = 2.0  # seconds `changed()` waits for its own file's notification
_STEP_MS = 1  # how often the waiting looks at what has arrived
_GATHER_MS = 50  # a stream of notifications is handed over at least this often


class WatchUnavailable(Exception):
    """No watcher here: watchfiles missing, or the system refused the watches."""


class Watcher:
    """Notifications for the files of `folders` (root-relative, "" for the root) and
    for `sync_dir` (see the module docstring)."""

    def __init__(self, root: Path, folders: Iterable[str], sync_dir: Path) -> None:
        try:
            from watchfiles._rust_notify import RustNotify
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise WatchUnavailable(str(exc)) from exc
        self.root = os.path.join(str(root), "")
        self.folders = frozenset(folders)
        self.sync_dir = str(sync_dir)
        paths = [self.root + f if f else str(root) for f in sorted(self.folders)]
        paths.append(self.sync_dir)
        try:
            # (paths, debug, force_polling, poll_delay_ms, recursive, ignore_permission_denied)
            self._notify = RustNotify(paths, False, False, 0, False, True)
        except (OSError, RuntimeError) as exc:
            raise WatchUnavailable(str(exc)) from exc
        # Each watcher's sync files have names of their own: another map's watcher on the
        # same store sees them too, and must not take them for its own.
        self._name = f"{SYNC_PREFIX}{os.getpid()}-{secrets.token_hex(4)}-"
        self._ticks = itertools.count()
        self.closed = False

    def changed(self, wait: float = SYNC_WAIT) -> set[str] | None:
        """The root-relative paths changed since the last call (files and folders,
        created, changed or removed), once every change made before this call has
        been told; None when that cannot be known (see the module docstring)."""
        if self.closed:
            return None
        sync = os.path.join(self.sync_dir, f"{self._name}{next(self._ticks)}")
        try:
            with open(sync, "w"):
                pass
        except OSError:
            return None
        seen: set[str] = set()
        deadline = _Deadline(time.monotonic() + wait)
        try:
            while sync not in seen:
                # No timeout: `watch` returns only what arrived, or "stop" at the deadline
                # (its timeout path empties the pending set, and would drop what came
                # in just then). "stop", "signal" or an error drop what was pending: the
                # caller then looks at every file.
                got = self._notify.watch(_GATHER_MS, _STEP_MS, 0, deadline)
                if not isinstance(got, set):
                    return None
                seen.update(path for _change, path in got)
        except Exception:  # the watcher's own error (a folder it cannot read, ...)
            return None
        finally:
            try:
                os.unlink(sync)
            except OSError:
                pass
        out = set()
        for path in seen:
            if path.startswith(self.root):
                out.add(path[len(self.root) :].replace(os.sep, "/"))
            elif path == self.root.rstrip(os.sep):
                out.add("")
        return out

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._notify.close()


class _Deadline:
    """What `RustNotify.watch` asks at each step whether to stop waiting."""

    def __init__(self, at: float) -> None:
        self.at = at

    def is_set(self) -> bool:
        return time.monotonic() > self.at
