"""Keeping file tools inside the project root.

Every path a model names is resolved the way the OS would (symlinks followed,
`..` applied) and must land inside the resolved project root; only then is it
opened, and it is opened by its resolved name with `O_NOFOLLOW`, so a symlink
swapped in after the check is not followed at the last step. Non-regular
files (devices, FIFOs, sockets) are refused before opening and again with
`fstat` after opening with `O_NONBLOCK` (opening a FIFO must not hang).

What this does not defend against: a process that swaps a *directory*
component for a symlink between the check and the open. The agent's own
shell tool could do that, but it already runs with the user's rights.

`resolve_for_tool` adds the protected paths the model's file tools never
touch, read or write (`protected`): `.git/` and `.slop/` at any depth (a
written hook, `core.fsmonitor` or `.slop/config.toml` would run or configure
code at the user's next `git status` or start), any folder git takes as a
repository itself (`is_repository`: a bare one, `HEAD` with `objects/` and
`refs/`), and a write that would make a folder one (`HEAD`, `objects/`, `refs/`
or `commondir` completing the set: text files are enough, and git would then
run the `core.fsmonitor` of a `config` written next to them), the ledger
file with its `-wal`, `-shm` and `-journal` siblings wherever `--db` put it,
and what the project's git config names for git to run or read (a
`core.hooksPath` folder, an fsmonitor script, an included config:
`gitconfig.exec_paths`).
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from pathlib import Path

from slop_tui.tools import gitconfig
from slop_tui.tools.errors import ToolError

BINARY_SNIFF_BYTES = 8192
MAX_TEXT_BYTES = 100 * 1024 * 1024  # read_file / apply_patch refuse bigger files
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


def resolve_inside(root: Path, raw: str, tool: str) -> Path:
    """The resolved path for `raw` (relative to root, or absolute inside it)."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError(f"{tool}: the path is empty")
    if "\x00" in raw:
        raise ToolError(f"{tool}: the path contains a NUL character")
    given = Path(raw)
    candidate = given if given.is_absolute() else root / given
    try:
        resolved = candidate.resolve(strict=False)
    except (RuntimeError, OSError) as exc:  # a symlink loop (RuntimeError in 3.11)
        raise ToolError(f"{tool}: cannot resolve '{raw}': {exc}") from None
    if resolved != root and not resolved.is_relative_to(root):
        why = "a symlink leads" if _through_symlink(root, candidate) else "it points"
        raise ToolError(
            f"{tool}: '{raw}' is outside the project root ({why} outside {root}); "
            "file tools only work inside the project"
        )
    return resolved


PROTECTED_DIRS = (".git", ".slop")
# Folders the listing and search tools do not enter.
SKIP_DIRS = frozenset({".git", ".venv", "__pycache__", "node_modules", ".slop"})
_LEDGER_SIBLINGS = ("", "-wal", "-shm", "-journal")
# The names git's own test for "this folder is a repository" looks at.
REPOSITORY_NAMES = ("HEAD", "objects", "refs", "commondir")


def is_repository(names: set[str] | frozenset[str]) -> bool:
    """Whether git takes a folder holding these names as a repository (a bare one):
    HEAD with objects/ and refs/, or HEAD with commondir."""
    return "HEAD" in names and ("commondir" in names or {"objects", "refs"} <= names)


def _repository_names(folder: Path) -> set[str]:
    return {n for n in REPOSITORY_NAMES if os.path.lexists(folder / n)}


def protected(root: Path, path: Path, ledger: Path | None = None) -> str | None:
    """Why the file tools refuse `path` (resolved, inside `root`), or None."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = path.parts
    for part in parts:
        if part.casefold() in PROTECTED_DIRS:
            return f"{part}/ is protected (the repository's and slop-tui's own files)"
    why = repository_problem(root, parts)
    if why is not None:
        return why
    if ledger is not None:
        db = Path(ledger).resolve()
        if path.parent == db.parent and any(path.name == db.name + s for s in _LEDGER_SIBLINGS):
            return "it is slop-tui's ledger"
    for target in _configured(root):
        if path == target or path.is_relative_to(target):
            return (
                f"the repository's git config names '{display(root, target)}' for git to run "
                "or read (core.hooksPath, core.fsmonitor, a filter, an include, …)"
            )
    return None


def _configured(root: Path) -> list[Path]:
    """What the git config of the repository the project is in names for git to run or
    read, inside the project (`gitconfig.exec_paths`)."""
    entry = gitconfig.enclosing_git(root)
    gitdir = gitconfig.git_dir(entry) if entry is not None else None
    if gitdir is None:
        return []
    found = gitconfig.repository_exec_paths(gitdir, entry.parent)
    return [p for p in found if p != root and p.is_relative_to(root)]


def repository_problem(root: Path, parts: tuple[str, ...]) -> str | None:
    """Why `root/parts…` is off limits as (part of) a git repository folder, or None."""
    folder = root
    for part in (*parts, None):
        names = _repository_names(folder)
        if is_repository(names):
            return (
                f"'{display(root, folder)}' is a git repository (HEAD with objects/ and "
                "refs/), whose files git runs code from"
            )
        if part in REPOSITORY_NAMES and is_repository(names | {part}):
            return (
                f"'{part}' would make '{display(root, folder)}' a git repository (HEAD with "
                "objects/ and refs/), whose config git would run code from"
            )
        if part is None:
            return None
        folder = folder / part
    return None


def _off_limits(tool: str, shown: str, why: str) -> ToolError:
    return ToolError(
        f"{tool}: '{shown}' is off limits: {why}; the file tools never read or change it"
    )


def resolve_for_tool(root: Path, raw: str, tool: str, ledger: Path | None = None) -> Path:
    """`resolve_inside`, then refuse the protected paths (see the module docstring)."""
    path = resolve_inside(root, raw, tool)
    why = protected(root, path, ledger)
    if why is not None:
        raise _off_limits(tool, display(root, path), why)
    return path


def _through_symlink(root: Path, candidate: Path) -> bool:
    """Whether the lexical path stays inside root (so only a symlink made it escape)."""
    lexical = Path(os.path.normpath(candidate))
    return lexical == root or lexical.is_relative_to(root)


def display(root: Path, path: Path) -> str:
    """The root-relative POSIX path shown to the model (`.` for the root)."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return rel.as_posix() if rel.parts else "."


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def require_regular(path: Path, shown: str, tool: str) -> os.stat_result:
    """stat() the path and refuse anything but an existing regular file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ToolError(f"{tool}: '{shown}' does not exist") from None
    except OSError as exc:
        raise ToolError(f"{tool}: cannot access '{shown}': {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        hint = "; use list_directory" if stat.S_ISDIR(st.st_mode) else ""
        raise ToolError(f"{tool}: '{shown}' is {_kind(st.st_mode)}, not a file{hint}")
    return st


def open_regular(path: Path, shown: str, tool: str) -> int:
    """A read-only descriptor for a regular file (checked again after opening)."""
    require_regular(path, shown, tool)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise ToolError(f"{tool}: cannot open '{shown}': {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ToolError(f"{tool}: '{shown}' is {_kind(st.st_mode)}, not a file")
    if st.st_size > MAX_TEXT_BYTES:
        os.close(fd)
        raise ToolError(
            f"{tool}: '{shown}' is {st.st_size / 1e6:.0f} MB, over the {MAX_TEXT_BYTES // 2**20} MB "
            "limit; use grep, or execute_bash with head/sed"
        )
    return fd


def binary_refusal(shown: str, tool: str) -> ToolError:
    return ToolError(f"{tool}: binary file refused: '{shown}' is not UTF-8 text")


def read_text(path: Path, shown: str, tool: str) -> str:
    """The whole file as UTF-8 text; binary or non-UTF-8 content is refused."""
    fd = open_regular(path, shown, tool)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise binary_refusal(shown, tool)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise binary_refusal(shown, tool) from None


# One file-tool write at a time, with its repository check just before it: parallel
# writes of HEAD, objects/… and refs/… would each pass a check made earlier.
_WRITES = threading.Lock()


def write_text(root: Path, path: Path, shown: str, text: str, tool: str) -> bool:
    """Write `text` atomically; returns True when the file was created.

    An existing file is replaced through a temporary sibling and `os.replace`,
    keeping its permission bits, so a failure never leaves it half-written.
    Missing parent folders are created (they are inside root: `path` is).
    """
    with _WRITES:
        why = repository_problem(root, path.relative_to(root).parts)
        if why is not None:
            raise _off_limits(tool, shown, why)
        return _write_text(root, path, shown, text, tool)


def _write_text(root: Path, path: Path, shown: str, text: str, tool: str) -> bool:
    data = text.encode("utf-8")
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ToolError(f"{tool}: cannot access '{shown}': {exc.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{tool}: '{shown}' is {_kind(st.st_mode)}, not a file")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        if parent.resolve() != root and not parent.resolve().is_relative_to(root):
            raise ToolError(f"{tool}: '{shown}' is outside the project root")
        if st is None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o666)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return True
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".slop-tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return False
    except FileExistsError:
        raise ToolError(f"{tool}: '{shown}' appeared while writing; try again") from None
    except NotADirectoryError:
        raise ToolError(f"{tool}: a parent of '{shown}' is a file, not a folder") from None
    except OSError as exc:
        raise ToolError(f"{tool}: cannot write '{shown}': {exc.strerror}") from None
