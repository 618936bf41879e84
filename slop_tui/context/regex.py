"""Regular expressions compiled when first used.

The context engine's modules hold about 120 patterns (the secret shapes, the
summaries' and the constraints' cues, the memo checks). Compiled at import, they
cost about 50 ms of CPU on every start of the app, before its first frame, though
nothing on that frame matches one. `lazy` gives a pattern that compiles itself at
its first use; from then on its methods are the compiled pattern's own, read as
plain attributes.

Compiling one is parsing it and generating its matcher's code, in Python: the
first plan of a session with user messages compiles about 40 of them (20-40 ms
of CPU, after the first frame, before the side panes are shown). `keep_compiled`
gives a table (the app's is kept in the user cache, ui/startup.py) in which each
pattern's generated code is kept by its text and flags: a pattern found there is
made from it by `_sre.compile`, as `re.compile` makes it from the code it has just
generated (the same object: equal patterns, same flags and groups), in a few
microseconds. The table is trusted as the `.pyc` files beside the code are (the
user's own, like the dataclass code kept beside it); an entry that does not read
back, or that `_sre.compile` refuses, is compiled again as `re.compile` would and
replaced.
"""

from __future__ import annotations

import _sre
import marshal
import re
import sys
import threading
from typing import Any, Protocol, cast


class Table(Protocol):
    """Byte strings by key (slop_tui/codecache.py's `CacheFile`)."""

    def get(self, key: Any) -> bytes | None: ...

    def put(self, key: Any, data: bytes) -> None: ...


_kept: Table | None = None


def fits() -> bool:
    """This Python's `re` has the parts the table is made from (CPython 3.11-3.13)."""
    compiler = getattr(re, "_compiler", None)
    return (
        hasattr(re, "_parser")
        and hasattr(compiler, "_code")
        and hasattr(_sre, "compile")
        and hasattr(_sre, "MAGIC")
    )


def table_name() -> str:
    """The kept table's file name: per interpreter and `_sre` code version, and per
    layout of the table (`2`: bytes patterns too, each key with its pattern's type,
    which an older build's reading refuses, dropping the whole table)."""
    tag = f"{sys.implementation.cache_tag}-{sys.hexversion:x}-{_sre.MAGIC}"
    return f"regex-code-2-{tag}.marshal"


def valid_key(key: object) -> bool:
    """A key of the table read back: a pattern's text (or bytes), its flags, and
    whether it is bytes."""
    return (
        type(key) is tuple
        and len(key) == 3
        and type(key[0]) in (str, bytes)
        and type(key[1]) is int
        and key[2] is (type(key[0]) is bytes)
    )


def keep_compiled(table: Table | None) -> bool:
    """Compile the lazy patterns through `table` (None: as `re.compile` does). False when
    this Python's `re` is not the one this was written for (then nothing changes)."""
    global _kept
    if table is not None and not fits():
        return False
    _kept = table
    return True


def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, from the kept table when it holds the pattern."""
    table = _kept
    if table is None:
        return re.compile(pattern, flags)
    made = _made(table, pattern, int(flags))
    return re.compile(pattern, flags) if made is None else made


def _made(table: Table, pattern: Any, flags: int) -> Any:
    """The pattern made from its code in `table` (generated and put there first if it
    is not); None for a pattern `re` refuses."""
    key = (pattern, flags, type(pattern) is bytes)  # "x" and b"x" are equal keys otherwise
    data = table.get(key)
    if data is not None:
        try:
            return _sre.compile(pattern, *marshal.loads(data))
        except (EOFError, ValueError, TypeError, RuntimeError):
            pass  # not an entry `_sre` takes: made again below
    made = _generated(pattern, flags)
    if made is None:
        return None
    table.put(key, marshal.dumps(made))
    return _sre.compile(pattern, *made)


def _compile_kept(pattern: Any, flags: int = 0) -> Any:
    """`re._compiler.compile` with a pattern's code from the kept table (a text or bytes
    pattern; a parsed one, a DEBUG one and one `re` refuses compiled as before)."""
    table = _kept
    if (
        table is not None
        and type(pattern) in (str, bytes)
        and not flags & re.DEBUG
        and threading.get_ident() == _keeping_thread
    ):
        made = _made(table, pattern, int(flags))
        if made is not None:
            return made
    return _re_compile(pattern, flags)


_re_compile = re._compiler.compile  # type: ignore[attr-defined]
_keeping_thread: int | None = None  # whose patterns `keep_every_pattern` keeps


def keep_every_pattern() -> bool:
    """Every pattern this thread has `re` compile from text or bytes (`re.compile`,
    `re.match` and the others, on a miss of `re`'s own cache) made through the kept
    table (`keep_compiled`), not only the lazy ones, until
    `stop_keeping_every_pattern`. The libraries compile theirs as they are imported
    (Textual's CSS tokenizer, Rich, the standard library's argparse, json, tomllib...):
    ~85 patterns and ~18 ms of CPU before the app's first frame, made from the table
    in well under a millisecond. The workspace command keeps them from before
    Textual's import until the app's code is imported, before any project or session
    data is read: a pattern made from the user's text (a lane's name) or from the
    project (the repository map's ignore rules, in another thread) never reaches the
    table, which every project shares. False when no table is kept or this Python's
    `re` does not fit."""
    global _keeping_thread
    if _kept is None or not fits():
        return False
    _keeping_thread = threading.get_ident()
    re._compiler.compile = _compile_kept  # type: ignore[attr-defined]
    return True


def stop_keeping_every_pattern() -> None:
    """`re` has its own compiler back (if `keep_every_pattern` had replaced it)."""
    compiler = re._compiler  # type: ignore[attr-defined]
    if compiler.compile is _compile_kept:
        compiler.compile = _re_compile


def _generated(pattern: str, flags: int) -> tuple | None:
    """What `re._compiler.compile` passes to `_sre.compile` after the pattern, in plain
    values (marshal takes no `re` constants); None for a pattern `re` refuses (then
    `re.compile` raises its own error)."""
    parser, compiler = re._parser, re._compiler  # type: ignore[attr-defined]
    try:
        parsed = parser.parse(pattern, flags)
        code = compiler._code(parsed, flags)
    except re.error:
        return None
    state = parsed.state
    groupindex = {str(k): int(i) for k, i in state.groupdict.items()}
    indexgroup: list[str | None] = [None] * state.groups
    for k, i in groupindex.items():
        indexgroup[i] = k
    return (
        int(flags | state.flags),
        [int(c) for c in code],
        state.groups - 1,
        groupindex,
        tuple(indexgroup),
    )


# What a use reads from the compiled pattern, bound on the lazy one at the first use.
_BOUND = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class LazyPattern:
    """`re.compile(pattern, flags)`, made at the first use of anything but `pattern`."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends probing: not a use
            raise AttributeError(name)
        made = compiled(self.pattern, self._flags)
        for method in _BOUND:
            self.__dict__[method] = getattr(made, method)
        self.__dict__.update(flags=made.flags, groups=made.groups)
        self.__dict__["groupindex"] = made.groupindex
        return getattr(made, name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r}, {self._flags!r})"


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern used like `re.compile(pattern, flags)`'s, compiled when first used."""
    return cast("re.Pattern[str]", LazyPattern(pattern, flags))
