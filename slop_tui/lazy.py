"""Package attributes resolved on first use (PEP 562), for packages whose public
names live in submodules that are costly to import all at once.

A package lists `public name -> submodule` and binds the two functions this
returns as its module-level `__getattr__` and `__dir__`:

    __getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())

The first lookup of a name imports its submodule and stores the value in the
package's namespace, so later lookups are plain attribute reads.

Large SDKs (`openai`, `google-genai`, `mcp`: hundreds of pydantic models, 0.5-3 s
of CPU) are imported off the event loop instead: `import_in_background` runs one
loader in a daemon thread, once per process, and `imported` is what a coroutine
awaits before it uses the SDK. The event loop then waits for the thread at most
the interpreter's switch interval (5 ms) at a time, not for the whole import.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable, Mapping, MutableMapping
from concurrent.futures import Future
from typing import Any

_lock = threading.Lock()
_loads: dict[str, Future[None]] = {}


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


def import_in_background(name: str, loader: Callable[[], None]) -> Future[None]:
    """Run `loader` (imports) in a daemon thread, once per `name` in this process; the
    future is done when it finished (or holds what it raised: each user says so)."""
    with _lock:
        loading = _loads.get(name)
        if loading is not None:
            return loading
        loading = Future()
        loading.set_running_or_notify_cancel()  # from here on it cannot be cancelled
        _loads[name] = loading

    def run() -> None:
        try:
            loader()
        except BaseException as exc:
            loading.set_exception(exc)
        else:
            loading.set_result(None)

    threading.Thread(target=run, name=f"{name}-import", daemon=True).start()
    return loading


async def imported(name: str, loader: Callable[[], None]) -> None:
    """Wait until `loader` has run (starting it now if nothing did); an Esc of the
    coroutine waiting never cancels the import itself."""
    await asyncio.shield(asyncio.wrap_future(import_in_background(name, loader)))
