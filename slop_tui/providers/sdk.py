"""The providers' SDKs, imported off the event loop.

`import openai` is ~0.7 s of CPU and ~25 MB (its hundreds of pydantic types),
`google.genai` about as much. Imported where a request first needs them, on the
event loop, the whole app stood still for that long at the first reply. Instead
a provider awaits `sdk_ready(kind)` before it builds its client (the import runs
in a daemon thread, once per process: slop_tui/lazy.py), and the app starts it
(`preload_sdk`) a little after its first screen, so the first reply usually finds
the SDK loaded. The offline demo has no SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from slop_tui.lazy import import_in_background, imported


def _openai() -> None:
    import openai  # noqa: F401
    import openai._streaming  # noqa: F401


def _genai() -> None:
    from google import genai  # noqa: F401
    from google.genai import errors, types  # noqa: F401


# Provider kind -> (the import's name, what it imports).
LOADERS: dict[str, tuple[str, Callable[[], None]]] = {
    "openai": ("openai-sdk", _openai),
    "gemini": ("genai-sdk", _genai),
    "gemini_gca": ("genai-sdk", _genai),
}


def preload_sdk(kind: str) -> Future[None] | None:
    """Start importing the SDK of providers of `kind` in a daemon thread (once); None
    for a kind without one."""
    if kind not in LOADERS:
        return None
    return import_in_background(*LOADERS[kind])


async def sdk_ready(kind: str) -> None:
    """Wait until the SDK of `kind` is imported (starting the import if nothing did). An
    SDK that cannot be imported raises here, as the import would have."""
    if kind in LOADERS:
        await imported(*LOADERS[kind])
