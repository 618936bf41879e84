"""Regular expressions compiled when first used.

The context engine's modules hold about 120 patterns (the secret shapes, the
summaries' and the constraints' cues, the memo checks). Compiled at import, they
cost about 50 ms of CPU on every start of the app, before its first frame, though
nothing on that frame matches one. `lazy` gives a pattern that compiles itself at
its first use; from then on its methods are the compiled pattern's own, read as
plain attributes.
"""

from __future__ import annotations

import re
from typing import Any, cast

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
        compiled = re.compile(self.pattern, self._flags)
        for method in _BOUND:
            self.__dict__[method] = getattr(compiled, method)
        self.__dict__.update(flags=compiled.flags, groups=compiled.groups)
        self.__dict__["groupindex"] = compiled.groupindex
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r}, {self._flags!r})"


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern used like `re.compile(pattern, flags)`'s, compiled when first used."""
    return cast("re.Pattern[str]", LazyPattern(pattern, flags))
