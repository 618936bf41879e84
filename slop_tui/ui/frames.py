"""Waiting for Textual's next frame from a coroutine."""

from __future__ import annotations

import asyncio
from contextlib import suppress

from textual.message_pump import MessagePump


async def frame_drawn(node: MessagePump, timeout: float = 0.25) -> None:
    """Return once the screen has been refreshed after this call (at most `timeout`
    seconds: a closing app draws no more frames)."""
    drawn = asyncio.get_running_loop().create_future()
    node.call_after_refresh(lambda: drawn.done() or drawn.set_result(None))
    with suppress(TimeoutError):
        await asyncio.wait_for(drawn, timeout)
