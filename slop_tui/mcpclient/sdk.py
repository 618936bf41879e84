"""The MCP SDK's import, in a background thread, once per process.

`mcp` takes seconds to import (its protocol types are large pydantic models).
`preload_sdk` starts the import in a daemon thread and returns a future that
is done when it finished; the app calls it once its first screen is up (when
servers are configured), so the first turn that needs a server finds the SDK
loaded. `sdk_ready` is what starting a server awaits: the same import, started
now if nothing started it, and never cancelled by an Esc of the turn waiting
for it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future

_lock = threading.Lock()
_loading: Future[None] | None = None


def _import_sdk() -> None:
    """Load the SDK; its log records stay out of the terminal."""
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    import httpx2  # noqa: F401
    import mcp.client.client  # noqa: F401
    import mcp.client.stdio  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401


def preload_sdk() -> Future[None]:
    """Start importing the SDK in a daemon thread (once); the future says when it is done."""
    global _loading
    with _lock:
        if _loading is None:
            loading: Future[None] = Future()
            loading.set_running_or_notify_cancel()  # from here on it cannot be cancelled

            def run() -> None:
                try:
                    _import_sdk()
                except BaseException as exc:  # an SDK that cannot load: each start says so
                    loading.set_exception(exc)
                else:
                    loading.set_result(None)

            threading.Thread(target=run, name="mcp-sdk-import", daemon=True).start()
            _loading = loading
        return _loading


async def sdk_ready() -> None:
    """Wait until the SDK is imported (starting the import if nothing has)."""
    await asyncio.shield(asyncio.wrap_future(preload_sdk()))
