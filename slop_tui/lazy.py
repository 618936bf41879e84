"""Package attributes resolved on first use (PEP 562), for packages whose public
names live in submodules that are costly to import all at once.

A package lists `public name -> submodule` and binds the two functions this
returns as its module-level `__getattr__` and `__dir__`:

    __getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())

The first lookup of a name imports its submodule and stores the value in the
package's namespace, so later lookups are plain attribute reads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_exports(
    package: str, sources: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose globals are `namespace`."""

    def __getattr__(name: str) -> Any:
        module = sources.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *sources])

    return __getattr__, __dir__
