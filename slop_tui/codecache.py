"""Dataclasses' generated methods, compiled once and kept in the user cache (with the
other code the standard library compiles from text as modules are imported).

`@dataclass` writes each method it generates (`__init__`, `__repr__`, `__eq__`,
and a frozen class's `__setattr__`, `__delattr__` and `__hash__`) as source
text and compiles it with `exec`; on Python 3.11 that is one compile per
method. The ~95 dataclasses imported before the app's first frame (slop-tui's
records, events and context engine, and a few of Textual's and markdown-it's)
compile ~520 methods: ~70 ms of CPU, a third of slop-tui's own imports, at
every start.

The compiled code depends only on that text and the interpreter, as a
module's `.pyc` depends only on its source. `use_code_cache(folder)` gives the
`dataclasses` module an `exec` of its own (a module global shadows the
builtin): a text it has compiled before is taken from a table loaded from
`folder`, any other is compiled as `exec` would (file name `<string>`, no
inherited `__future__` flags) and added; the table is written back
(atomically) if a text was new, at exit and when the app's first screen is up
(`save_code_cache`). The methods made are the same either way:
same code, same globals, same defaults. The same table serves `collections`'
`eval` (each `namedtuple`'s `__new__`, a lambda compiled from its fields' names)
and `typing`'s `compile` (each annotation read as text by `typing.NamedTuple`
and `ForwardRef`) until the app's code is imported (`stop_keeping_expressions`):
137 texts before the first frame (50 named tuples'), most of them Textual's and
Rich's, ~2 ms of CPU compiled and ~0.2 ms from the table. A
Python whose `dataclasses`, `collections` or `typing` no longer compiles text
there simply never asks the table (no speed-up, no change).

Only the workspace command (`slop-tui` without a subcommand) installs it
(cli.py, before its modules are imported): `exec`, `ask` and `trust`, tests and
embedders compile as usual and leave no file. The file
is trusted like the `.pyc` files beside the code (both are the user's own and
writable by them alone); one that cannot be read as a table of texts and code
is ignored and replaced.
"""

from __future__ import annotations

import atexit
import builtins
import collections
import dataclasses
import marshal
import os
import sys
import threading
import typing
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import CodeType
from typing import Any

# The start of the table's key for a text compiled as an expression (an `eval`), which
# a text compiled as statements (every other key) never has.
EVAL_KEY = "\x00eval\x00"

# Past this many entries the file keeps only what the last run used (the texts
# of dataclasses changed since are never asked for again).
MAX_ENTRIES = 5000

# The files of the user cache that hold the user's own text (the answers' drawn lines,
# slop_tui/ui/widgets/blocks.py), by the start of their names: emptying the trash, the
# one hard delete, removes them (`forget_user_text`).
TEXT_FILES = ("answer-lines-",)
# This process's tables of such files.
_text_tables: weakref.WeakSet[CacheFile] = weakref.WeakSet()


def user_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CACHE_HOME/slop-tui` (default `~/.cache/slop-tui`): things that can be rebuilt."""
    env = os.environ if env is None else env
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "slop-tui"


def loaded_cache_dir(project: Path | None = None) -> Path | None:
    """The user cache for the files a start loads as code, pickles or marshalled data
    (the dataclass code, Textual's parsed CSS, the answers' drawn lines, the tokenizer's
    ranks); None when it lies inside the
    project (`project`, default the current folder), where the model's shell may write:
    a file put there would run outside the sandbox at the next start."""
    cache = user_cache_dir().resolve()
    project = (project or Path.cwd()).resolve()
    if cache == project or project in cache.parents:
        return None
    return cache


def forget_user_text(folder: Path | None = None) -> int:
    """Empty this process's tables of the user's text and remove every such file from
    `folder` (default the user cache); the number of files removed. Another running
    process that read a file before does not write its entries back (`CacheFile.save`
    merges with the file as it is then)."""
    for table in list(_text_tables):
        table.forget()
    folder = user_cache_dir() if folder is None else folder
    removed = 0
    try:
        names = [p for p in folder.iterdir() if p.name.startswith(TEXT_FILES)]
    except OSError:
        return 0
    for path in names:
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def _is_text(key: object) -> bool:
    return type(key) is str


class CacheFile:
    """A table of byte strings kept in one file of the user cache.

    Read whole at start (a file that is not such a table is ignored), each entry
    decoded by its user only when asked for; written back atomically by `save`
    when it gained an entry. `valid_key` says which keys a table read back may
    hold (anything else makes the whole file ignored)."""

    def __init__(
        self,
        path: Path,
        valid_key: Callable[[object], bool] = _is_text,
        *,
        recent: int | None = None,
        holds_text: bool = False,
    ) -> None:
        self.path = path
        self.valid_key = valid_key
        self.read_as = _identity(path)  # the file as it was when the table was read
        self.table: dict[Any, bytes] = _read(path, valid_key)
        self.used: dict[Any, bytes] = {}  # what this process asked for or added
        self.added: set[Any] = set()  # the keys this process added
        self.unsaved = 0  # entries added since the last write
        # With `recent`: the table holds (and the file keeps) only the entries last
        # asked for or added, at most this many.
        self.recent = recent
        self._lock = threading.Lock()  # entries may be asked for and added in threads
        if holds_text:  # the user's text: `forget_user_text` empties it
            _text_tables.add(self)

    def get(self, key: Any) -> bytes | None:
        with self._lock:
            data = self.table.get(key)
            if data is not None:
                if self.recent is not None:
                    self.used.pop(key, None)  # the most recent last
                self.used[key] = data
            return data

    def put(self, key: Any, data: bytes) -> None:
        with self._lock:
            if self.recent is not None:
                self.used.pop(key, None)
            self.table[key] = self.used[key] = data
            self.added.add(key)
            self.unsaved += 1
            if self.recent is not None and len(self.table) > 2 * self.recent:
                self.table = self._kept()
                self.used = {k: v for k, v in self.used.items() if k in self.table}

    def _kept(self) -> dict[Any, bytes]:
        """The table to keep: with `recent`, the entries of the file this process did not
        ask for, then those it did, the most recent `recent` of them."""
        if self.recent is None:
            return self.table if len(self.table) <= MAX_ENTRIES else self.used
        order = {k: v for k, v in self.table.items() if k not in self.used}
        order.update(self.used)
        keys = list(order)[-self.recent :] if self.recent else []
        return {k: order[k] for k in keys}

    def _merge_file(self) -> None:
        """The file changed since the table was read (another process saved it, or
        `forget_user_text` removed it): the table becomes the file's entries and those
        this process added. Entries read from the older file are not written back, so
        a table emptied by one process is not filled again by another's exit."""
        table = _read(self.path, self.valid_key)
        table.update({k: self.table[k] for k in self.added if k in self.table})
        self.table = table
        self.used = {k: v for k, v in self.used.items() if k in table}

    def forget(self) -> None:
        """No entries, in memory or in the file."""
        with self._lock:
            self.table, self.used, self.added, self.unsaved = {}, {}, set(), 0
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                return
            self.read_as = None

    def save(self) -> None:
        """Write the table if this process added an entry (since the last write)."""
        if not self.unsaved:
            return
        import tempfile  # at exit only: not on the start path

        with self._lock:
            if _identity(self.path) != self.read_as:
                self._merge_file()
            table = self._kept()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(marshal.dumps(table))
                os.replace(tmp, self.path)
                self.unsaved = 0
                self.read_as = _identity(self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except (OSError, ValueError):
            pass  # a cache: a read-only or full disk only costs the next start the work


class CodeCache(CacheFile):
    """The table of compiled texts behind `dataclasses`' own `exec`."""

    def __init__(self, path: Path) -> None:
        # Each text's code marshalled on its own: a run reads back only the code it asks
        # for (the file also holds the methods of modules imported later, or by
        # `slop-tui exec`).
        super().__init__(path)
        self.compiled = 0  # texts not in the table: compiled in this process

    def code(self, key: str, source: str, mode: str) -> CodeType:
        """`source` compiled in `mode` (file name `<string>`, no `__future__` flags: as the
        standard library's modules compile it), from the table under `key` or compiled
        and added."""
        data = self.get(key)
        code = None
        if data is not None:
            try:
                code = marshal.loads(data)
            except (EOFError, ValueError, TypeError):
                code = None
            if type(code) is not CodeType:
                code = None
        if code is None:
            code = builtins.compile(source, "<string>", mode, dont_inherit=True)
            self.put(key, marshal.dumps(code))
            self.compiled += 1
        return code

    def exec(self, source, namespace=None, local_names=None, /):
        """`exec` as `dataclasses` calls it, with the texts' code from the table."""
        if namespace is None:  # the caller's globals, as the builtin takes them
            namespace = vars(dataclasses)
        if isinstance(source, str):
            source = self.code(source, source, "exec")
        return builtins.exec(source, namespace, local_names)

    def eval(self, source, namespace=None, local_names=None, /):
        """`eval` as `collections.namedtuple` calls it (its `__new__`'s lambda)."""
        if namespace is None:
            namespace = vars(collections)
        if isinstance(source, str):
            source = self.code(EVAL_KEY + source, source, "eval")
        return builtins.eval(source, namespace, local_names)

    def compile(self, source, filename, mode, flags=0, dont_inherit=False, optimize=-1, **kw):
        """`compile` as `typing.ForwardRef` calls it (an annotation's text, `'<string>'`,
        `'eval'`); any other call is the builtin's."""
        as_typing = (filename, mode, flags, optimize) == ("<string>", "eval", 0, -1)
        if isinstance(source, str) and as_typing and not kw:
            return self.code(EVAL_KEY + source, source, "eval")
        return builtins.compile(source, filename, mode, flags, dont_inherit, optimize, **kw)


_installed: CodeCache | None = None
_others: list[CacheFile] = []  # other tables of the start, saved with this one


def use_code_cache(folder: Path) -> CodeCache:
    """Compile dataclasses' methods through the table kept in `folder` (once per
    process; a second call returns the table already in use)."""
    global _installed
    if _installed is None:
        name = f"dataclass-code-{sys.implementation.cache_tag}-{sys.hexversion:x}.marshal"
        _installed = CodeCache(folder / name)
        dataclasses.exec = _installed.exec  # type: ignore[attr-defined]
        collections.eval = _installed.eval  # type: ignore[attr-defined]
        typing.compile = _installed.compile  # type: ignore[attr-defined]
        atexit.register(_installed.save)
    return _installed


def stop_keeping_expressions() -> None:
    """`collections` and `typing` compile with the builtins again. The workspace command
    calls it once the app's code is imported: what they compile from then on (a named
    tuple or an annotation a library makes at run time) may be made from the user's text
    or a server's, and is not kept in the user's shared table."""
    if _installed is None:
        return
    for module, name in ((collections, "eval"), (typing, "compile")):
        if vars(module).get(name) == getattr(_installed, name):
            delattr(module, name)


def keep_with_code_cache(table: CacheFile) -> None:
    """Save `table` when the code cache is saved (and at exit)."""
    _others.append(table)
    atexit.register(table.save)


def stop_keeping(table: CacheFile) -> None:
    """Save `table` no more (neither with the code cache nor at exit)."""
    if table in _others:
        _others.remove(table)
    atexit.unregister(table.save)


def save_code_cache() -> None:
    """Write the tables now if they hold new entries (the app does this once its first
    screen is up: a process that is killed never reaches its exit handlers)."""
    for table in [_installed, *_others]:
        if table is not None:
            table.save()


def installed_stamp(paths: list[str]) -> str | None:
    """A short text that changes when any of `paths` (files, or folders: an upgrade
    that replaces a package's files changes its folder) is replaced; None if one is
    missing. For a cache of what code made from its input: its file name carries it."""
    import hashlib

    try:
        seen = [(p, os.stat(p).st_mtime_ns) for p in paths]
    except OSError:
        return None
    return hashlib.sha256(repr(seen).encode()).hexdigest()[:12]


def _identity(path: Path) -> tuple[int, int, int] | None:
    """What tells one version of a file from another; None when there is none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _read(path: Path, valid_key: Callable[[object], bool]) -> dict[Any, bytes]:
    try:
        table = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if type(table) is not dict or not all(
        valid_key(k) and type(v) is bytes for k, v in table.items()
    ):
        return {}
    return table
