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

import logging
from concurrent.futures import Future

from slop_tui.lazy import import_in_background, imported


def _import_sdk() -> None:
    """Load the SDK; its log records stay out of the terminal."""
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    import httpx2  # noqa: F401
    import mcp.client.client  # noqa: F401
    import mcp.client.stdio  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401


def preload_sdk() -> Future[None]:
    """Start importing the SDK in a daemon thread (once); the future says when it is done."""
    return import_in_background("mcp-sdk", _import_sdk)


async def sdk_ready() -> None:
    """Wait until the SDK is imported (starting the import if nothing has)."""
    await imported("mcp-sdk", _import_sdk)
