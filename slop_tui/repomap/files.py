"""Which files of a project the repository map and the file tree cover.

`git ls-files` when the root is a git work tree (tracked files plus untracked
ones that no ignore file excludes), else a walk that reads every `.gitignore`
it passes (pathspec's gitignore rules). Either way `.slop/`, `.git/`,
vendored and generated folders are left out, and the walk never follows a
symlinked folder, so a symlink loop cannot make it spin.

A walk records the modification time of every folder it read and the stamp of
every ignore file it read: a file created, removed or renamed changes its
folder's time, so `unchanged(root, listing)` tells with one `stat` per folder
whether the listing still holds (git's listing is asked again each time).
With git the folders come from a walk of the folders alone (the same ignore
rules, no files) and the listed files' folders: they are what a watcher of the
files watches (`.git` and `.git/info` too).
"""

from __future__ import annotations

import os
import stat as stat_mode
import subprocess
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from pathlib import Path

import pathspec

# Folders never listed: the app's own state, VCS metadata, dependencies and builds.
SKIP_DIRS = frozenset(
    {
        ".slop",
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "bower_components",
        "vendor",
        "third_party",
        "site-packages",
        ".venv",
        "venv",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "dist",
        "build",
        "target",
        ".next",
        ".gradle",
        ".idea",
        ".cache",
        "generated",
    }
)
# Generated files by name: minified bundles, protobuf stubs, lock files.
_GENERATED_SUFFIXES = (".min.js", ".min.css", "_pb2.py", "_pb2_grpc.py", ".pb.go", ".lock")
GIT_TIMEOUT = 10.0


@dataclass
class Listing:
    """Project files (root-relative, `/`-separated, sorted) and one note per problem."""

    paths: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: str = "walk"  # "git" | "walk"
    # A walk's folders (root-relative, "" for the root) -> mtime_ns, and the stamps
    # ((size, mtime_ns); (-1, -1) for none) of the ignore files it looked for.
    folders: dict[str, int] = field(default_factory=dict)
    ignores: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Of a fresh git listing: each listed file's (size, mtime_ns), looked at while
    # leaving out the tracked files that are gone (not stored; a refresh reuses them).
    stamps: dict[str, tuple[int, int]] = field(default_factory=dict)


def skipped(path: str) -> bool:
    """True for a path inside a skipped folder or named like a generated file."""
    parts = path.split("/")
    if any(p in SKIP_DIRS for p in parts[:-1]):
        return True
    return parts[-1].endswith(_GENERATED_SUFFIXES)


def list_files(root: Path) -> Listing:
    """Every listed file under `root` (see the module docstring)."""
    listing = _git_files(root)
    if listing is None:
        listing = _walk(root)
    listing.paths = sorted(p for p in listing.paths if not skipped(p))
    return listing


def unchanged(root: Path, listing: Listing) -> bool:
    """Whether a walk's listing still holds: no folder it read has a new modification
    time, no ignore file changed, and the root is still not a git work tree."""
    if listing.source != "walk" or not listing.folders or (root / ".git").exists():
        return False
    base = str(root)
    prefix = os.path.join(base, "")
    stat = os.stat
    try:
        for rel, mtime in listing.folders.items():
            if stat(prefix + rel if rel else base).st_mtime_ns != mtime:
                return False
    except OSError:
        return False
    # An ignore file made or removed changed its folder's time: only those that were
    # there are looked at again.
    return all(
        _ignore_stamp(root, rel) == stamp
        for rel, stamp in listing.ignores.items()
        if stamp != _NO_IGNORE
    )


_NO_IGNORE = (-1, -1)  # the stamp of an ignore file that is not there


def _ignore_stamp(root: Path, rel: str) -> tuple[int, int]:
    try:
        st = os.stat(os.path.join(root, rel))
    except OSError:
        return _NO_IGNORE
    return (st.st_size, st.st_mtime_ns)


def _git_files(root: Path) -> Listing | None:
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    paths = []
    for raw in out.split(b"\0"):
        if raw:
            paths.append(raw.decode("utf-8", "surrogateescape"))
    # A deleted but still tracked file is listed by git: only what exists is mapped.
    found = stat_files(root, list(dict.fromkeys(paths)))
    stamps = {
        p: (st.st_size, st.st_mtime_ns)
        for p, st in found.items()
        if isinstance(st, os.stat_result) and stat_mode.S_ISREG(st.st_mode)
    }
    listing = Listing(list(stamps), [], "git", _git_folders(root, stamps))
    listing.stamps = stamps
    return listing


def _git_folders(root: Path, paths: Iterable[str]) -> dict[str, int]:
    """What a watcher of a git listing watches: every folder the ignore files leave
    (an empty one may get files), the folder of every listed file (a tracked file
    may sit in an ignored one), and `.git` and `.git/info` (the index and the
    exclude file change the listing)."""
    folders = _walk(root, files=False).folders
    extra = {".git", ".git/info"}
    for p in paths:
        folder = p.rpartition("/")[0]
        while folder and folder not in folders and folder not in extra:
            extra.add(folder)
            folder = folder.rpartition("/")[0]
    for folder in sorted(extra):
        try:
            st = os.stat(root / folder)
        except OSError:
            continue
        if stat_mode.S_ISDIR(st.st_mode):
            folders[folder] = st.st_mtime_ns
    return folders


def stat_files(root: Path, paths: Iterable[str]) -> dict[str, os.stat_result | OSError]:
    """Each of `paths` (root-relative) -> its `os.stat` (symlinks followed), or the
    error that stopped it."""
    base = os.path.join(str(root), "")
    out: dict[str, os.stat_result | OSError] = {}
    for p in paths:
        try:
            out[p] = os.stat(base + p)
        except OSError as exc:
            out[p] = exc
    return out


NO_STAMP = -2  # what `stamp_array` gives a file it cannot stat
_SIZE_AND_MTIME = attrgetter("st_size", "st_mtime_ns")


def stamp_array(paths: list[str]) -> array:
    """The stamps of absolute `paths` (symlinks followed) as one int64 array, each
    file's size then its mtime_ns (`NO_STAMP` twice for a path that cannot be
    stat'ed): a check of every file compares it with the stored one at once, and
    no object is kept per file. The loop runs in C (`map`, `attrgetter`, `chain`):
    its Python form cost a third more on a busy machine."""
    try:
        return array("q", chain.from_iterable(map(_SIZE_AND_MTIME, map(os.stat, paths))))
    except OSError:
        pass
    out = array("q")
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.extend((NO_STAMP, NO_STAMP))
            continue
        out.extend((st.st_size, st.st_mtime_ns))
    return out


def _walk(root: Path, files: bool = True) -> Listing:
    """The listed files and every folder read; with `files` false, the folders alone
    (the same ignore rules; a file entry costs nothing)."""
    listing = Listing()
    stack: list[tuple[str, list[tuple[str, pathspec.PathSpec]]]] = [("", [])]
    while stack:
        rel, specs = stack.pop()
        folder = root / rel if rel else root
        specs = [*specs, *_ignore_spec(folder, rel, listing)]
        try:
            listing.folders[rel] = os.stat(folder).st_mtime_ns
            entries = list(os.scandir(folder))
        except OSError as exc:
            listing.notes.append(f"{rel or '.'}: cannot be listed ({exc.strerror})")
            continue
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if not files and not is_dir:
                    continue
                is_file = not is_dir and entry.is_file()
            except OSError as exc:
                listing.notes.append(f"{path}: skipped ({exc.strerror})")
                continue
            if is_dir:
                if entry.name in SKIP_DIRS or _ignored(specs, path + "/"):
                    continue
                stack.append((path, specs))
            elif is_file and not _ignored(specs, path):
                listing.paths.append(path)
            elif entry.is_symlink() and not is_file:
                listing.notes.append(f"{path}: a symlink that leads nowhere readable; skipped")
    return listing


def _ignore_spec(
    folder: Path, rel: str, listing: Listing
) -> Iterable[tuple[str, pathspec.PathSpec]]:
    ignore = folder / ".gitignore"
    name = f"{rel}/.gitignore" if rel else ".gitignore"
    listing.ignores[name] = _ignore_stamp(folder, ".gitignore")
    try:
        text = ignore.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ()
    except OSError as exc:
        listing.notes.append(f"{rel + '/' if rel else ''}.gitignore: unreadable ({exc.strerror})")
        return ()
    return ((rel, pathspec.GitIgnoreSpec.from_lines(text.splitlines())),)


def _ignored(specs: list[tuple[str, pathspec.PathSpec]], path: str) -> bool:
    for base, spec in specs:
        sub = path[len(base) + 1 :] if base else path
        if spec.match_file(sub):
            return True
    return False
