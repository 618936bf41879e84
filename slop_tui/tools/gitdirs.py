"""Git repositories in the project: what the sandboxed shell may not create or change.

git runs code a repository names: hooks, `core.fsmonitor` (run by `git status`
and `git grep` alike), clean filters. A command that writes one into the project
gets the user's next `git status` to run it, outside any sandbox; so does
slop-tui's own `git grep` or handoff. What git takes as a repository ("git
markers") is what this module finds:

- an entry named `.git` of any kind: a folder, a `gitdir:` file, a symlink;
- a folder git takes as a repository itself (a bare one, `paths.is_repository`):
  `HEAD` with `objects/` and `refs/`, or `HEAD` with `commondir` (git's own
  test). The project root counts too: git run in it uses it when there is no
  `.git` (text files are enough, and then `git status` and `git grep` run a
  `core.fsmonitor` of its `config`).

`scan` walks the project once before a sandboxed command (bounded: it does not
enter the usual heavy folders, `SKIP_DIRS`, nor a repository, and stops after
`MAX_WALK_DIRS` folders). Every marker found is bound read-only in the sandbox
(`GitScan.readonly`). Bubblewrap can only cover what exists, so `sweep` walks
again after the command (in every case: it ended, failed, timed out or was
cancelled, and its processes are gone) and moves every marker that is new or
replaced out of the project into `.slop/git-quarantine/<run>/`, under its
relative path, with a `README.txt`: a new `.git` entry whole, a folder that
became a repository by its `HEAD` (without it git does not take the folder as
a repository; the rest stays where it was). Nothing is deleted.

Shell commands run in parallel: a marker one run creates can be seen by
another run's `scan` before the first run's `sweep`. So a run trusts only the
markers of the baseline, the scan taken when no other sandboxed run was active
in the project (`begin`/`end` keep that per project root in this process);
`shell_running` tells slop-tui's own git callers (`grep`) to leave git alone
while one runs.
"""

from __future__ import annotations

import datetime as _dt
import errno
import itertools
import os
import shlex
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from slop_tui.safe_text import neutralise
from slop_tui.tools import gitconfig
from slop_tui.tools.paths import REPOSITORY_NAMES, SKIP_DIRS, is_repository

GIT = ".git"
HEAD = "HEAD"
QUARANTINE = Path(".slop") / "git-quarantine"
# Heavy folders the walks do not enter (dependencies, caches, build output).
WALK_SKIP = SKIP_DIRS | {
    ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".cache",
    "venv", "target", ".gradle", ".terraform",
}  # fmt: skip
# Of those, the ones package managers fill, where a command may well create a folder
# (and so a repository): the walk after a command enters them too.
HEAVY_DIRS = frozenset({"node_modules", ".venv", "venv", "target"})
MAX_WALK_DIRS = 20_000
# The entries of a git directory bound read-only when the project root itself is one
# (the root cannot be bound read-only as a whole).
GIT_DIR_ENTRIES = (
    HEAD, "config", "config.worktree", "objects", "refs", "hooks", "info", "packed-refs",
    "commondir", "index", "modules", "worktrees",
)  # fmt: skip
_RUN_IDS = itertools.count(1)

# st_dev, st_ino, file type of a marker (lstat), and a symlink's target: a marker
# bound read-only cannot be replaced, but a `.git` symlink (its target is bound) can,
# and a new link may get the old one's inode.
Identity = tuple[int, int, int, str]


@dataclass(frozen=True)
class GitScan:
    """The git markers of a project at one moment."""

    root: Path
    markers: dict[Path, Identity] = field(default_factory=dict)
    complete: bool = True  # False: the walk stopped at MAX_WALK_DIRS
    taken: float = 0.0  # time.time() when the walk began
    # Paths in the project the repositories' git config makes git run or read
    # (`gitconfig.exec_paths`: a hooksPath folder, an fsmonitor script, an included
    # config), each with whether it existed when the scan was made.
    configured: dict[Path, bool] = field(default_factory=dict)

    @property
    def readonly(self) -> tuple[Path, ...]:
        """What the sandbox binds read-only: each `.git` entry (a symlink's target
        when it is inside the project), each repository folder but the root, and
        the git entries of the root when it is one."""
        out: list[Path] = []
        for marker in self.markers:
            if marker.name == HEAD:
                folder = marker.parent
                if folder == self.root:
                    out += [p for p in (folder / n for n in GIT_DIR_ENTRIES) if _exists(p)]
                else:
                    out.append(folder)
            elif marker.is_symlink():
                target = marker.resolve()
                if target != self.root and target.is_relative_to(self.root) and target.exists():
                    out.append(target)
            else:
                out.append(marker)
        out += [p for p, existed in self.configured.items() if existed and _exists(p)]
        return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Moved:
    """A git marker `sweep` took out of the project (or failed to: `error`)."""

    path: Path  # where it was, relative to the root
    to: Path | None  # where it is now (absolute), None when it could not be moved
    error: str = ""


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def _identity(path: str, st: os.stat_result) -> Identity:
    target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
    return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), target)


def _repository_head(entries: list[os.DirEntry]) -> os.DirEntry | None:
    """The `HEAD` entry when git would take the folder of `entries` as a repository
    (`paths.is_repository`; HEAD a file or a symlink)."""
    names = {e.name: e for e in entries if e.name in REPOSITORY_NAMES}
    head = names.get(HEAD)
    if head is None or head.is_dir(follow_symlinks=False) or not is_repository(set(names)):
        return None
    return head


def scan(root: Path, trusted: GitScan | None = None) -> GitScan:
    """The git markers under `root` (see the module docstring).

    The walk enters neither `.git` entries nor heavy folders. Before a command
    (`trusted` None) it does not enter repository folders either (they are bound
    read-only); after one it enters those not in `trusted`, whose contents the
    command could have written.
    """
    root = Path(root).resolve()
    top = str(root)
    taken = time.time()
    after = trusted is not None
    markers: dict[Path, Identity] = {}
    stack, seen = [top], 0  # paths as str: a Path per folder doubled the walk's time
    heavy: list[str] = []  # entered last, with what is left of the walk's budget
    while stack or heavy:
        folder = stack.pop() if stack else heavy.pop()
        seen += 1
        if seen > MAX_WALK_DIRS:
            return GitScan(root, markers, complete=False, taken=taken)
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=_name, reverse=True)  # a stable order
        except OSError:
            continue
        head = _repository_head(entries)
        if head is not None:
            marker = Path(head.path)
            try:
                markers[marker] = _identity(head.path, head.stat(follow_symlinks=False))
            except OSError:
                pass
            if folder != top and (trusted is None or marker in trusted.markers):
                continue
        for entry in entries:
            try:
                if entry.name == GIT:
                    st = entry.stat(follow_symlinks=False)
                    markers[Path(entry.path)] = _identity(entry.path, st)
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name not in WALK_SKIP:
                        stack.append(entry.path)
                    elif after and entry.name in HEAVY_DIRS:
                        heavy.append(entry.path)
            except OSError:
                continue
    return GitScan(root, markers, taken=taken, configured=configured_paths(root, markers))


def configured_paths(root: Path, markers: dict[Path, Identity]) -> dict[Path, bool]:
    """`GitScan.configured`: what the git config of each repository found (and of the
    one the project lies in) names for git to run or read, inside the project."""
    repos: list[tuple[Path | None, Path]] = []
    for marker in markers:
        if marker.name == HEAD:
            repos.append((marker.parent, marker.parent))
        else:
            repos.append((gitconfig.git_dir(marker), marker.parent))
    if root / GIT not in markers and (outer := gitconfig.enclosing_git(root)) is not None:
        repos.append((gitconfig.git_dir(outer), outer.parent))
    slop = root / ".slop"
    found: dict[Path, bool] = {}
    for gitdir, worktree in repos:
        if gitdir is None:
            continue
        for path in gitconfig.repository_exec_paths(gitdir, worktree):
            if path != root and path.is_relative_to(root) and not path.is_relative_to(slop):
                found[path] = _exists(path)
    return found


def _name(entry: os.DirEntry) -> str:
    return entry.name


def sweep(before: GitScan, run: str) -> list[Moved]:
    """Move every marker that is not in `before` (new, or replaced: another
    identity) into the quarantine folder of `run`; see the module docstring."""
    root = before.root
    after = scan(root, trusted=before)
    new = sorted(
        m
        for m, ident in after.markers.items()
        if before.markers.get(m) != ident
        and ((before.complete and not _in_heavy(root, m)) or _changed_since(m, before))
    )
    # A hooks folder, fsmonitor script or included config the config names that was
    # not there before: the command made it for git to run.
    new += sorted(p for p, existed in before.configured.items() if not existed and _exists(p))
    if not new:
        return []
    folder = root / QUARANTINE / run
    moved: list[Moved] = []
    for marker in new:
        rel = marker.relative_to(root)
        if any(rel.is_relative_to(m.path) for m in moved if m.to is not None):
            continue  # inside something moved already
        dest = folder / rel
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(marker, dest)
            except OSError as exc:
                if exc.errno != errno.EXDEV:  # .slop is on another file system
                    raise
                shutil.move(marker, dest)  # copies, then removes the original
            moved.append(Moved(rel, dest))
        except FileNotFoundError:
            continue  # gone already (a parallel run's sweep took it)
        except OSError as exc:
            moved.append(Moved(rel, None, exc.strerror or str(exc)))
    if any(m.to is not None for m in moved):
        _readme(root, folder, moved)
    else:
        _drop_empty(folder)
    return moved


def _drop_empty(folder: Path) -> None:
    """Remove the folders a sweep made and moved nothing into (a parallel command's sweep
    moved its markers first): a quarantine folder is never left without its README."""
    for path, _dirs, _files in os.walk(folder, topdown=False):
        try:
            os.rmdir(path)  # only an empty folder goes
        except OSError:
            pass


def _in_heavy(root: Path, marker: Path) -> bool:
    """Whether a marker lies in a heavy folder, which only the walk after a command enters
    (so the scan before it does not know the repositories already there)."""
    return any(part in HEAVY_DIRS for part in marker.relative_to(root).parts[:-1])


def _changed_since(marker: Path, before: GitScan) -> bool:
    """After a walk that stopped at its limit, a marker it did not reach may be old:
    only one created or changed since is moved."""
    try:
        return marker.lstat().st_ctime >= before.taken - 1.0
    except OSError:
        return False


def _readme(root: Path, folder: Path, moved: list[Moved]) -> None:
    lines = [
        "A shell command the model ran in slop-tui's sandbox created these git",
        "repository files in the project. git would have run code they name (hooks,",
        "core.fsmonitor, filters) at your next `git status`, so slop-tui moved them",
        "here instead. Nothing was deleted. Do not run git inside this folder.",
        "",
        "To put one back (from the project root):",
        "",
    ]
    for m in moved:
        if m.to is not None:  # names the command chose: quoted, and inert in a terminal
            move = f"mv {shlex.quote(str(m.to.relative_to(root)))} {shlex.quote(str(m.path))}"
            lines.append("    " + neutralise(move))
    try:
        (folder / "README.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    except OSError:
        pass  # the move is what matters; the note is a courtesy


def run_id() -> str:
    """A quarantine folder name: the time of the run, this process, a counter."""
    now = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{now}-{os.getpid()}-{next(_RUN_IDS)}"


# -- runs in parallel ---------------------------------------------------------------------


@dataclass
class _Project:
    baseline: GitScan
    runs: int = 0


_ACTIVE: dict[Path, _Project] = {}


def begin(found: GitScan) -> GitScan:
    """Register a sandboxed run that scanned `found` before it started; returns what
    its sweep trusts (the baseline's markers that are still there, unchanged)."""
    project = _ACTIVE.get(found.root)
    if project is None:
        project = _ACTIVE[found.root] = _Project(found)
    project.runs += 1
    base = project.baseline.markers
    trusted = {m: i for m, i in found.markers.items() if base.get(m) == i}
    return GitScan(found.root, trusted, found.complete, found.taken, found.configured)


def end(root: Path) -> None:
    """The run registered by `begin` for `root` finished (and swept)."""
    project = _ACTIVE.get(root)
    if project is not None:
        project.runs -= 1
        if project.runs <= 0:
            del _ACTIVE[root]


def shell_running(root: Path) -> bool:
    """Whether a sandboxed shell command runs in this project now (in this process)."""
    return Path(root).resolve() in _ACTIVE
