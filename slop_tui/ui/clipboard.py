"""Copy text to the system clipboard, with OSC 52 as the fallback.

Textual's `App.copy_to_clipboard` only writes an OSC 52 escape, which some
terminals ignore (macOS Terminal, tmux without `set-clipboard`). So the
system tool comes first: wl-copy, xclip, xsel or pbcopy, whichever is on
PATH and has a display to talk to. A tool that fails or hangs (2 s) is
skipped and the next one tried; OSC 52 is the last resort.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from typing import Any, Protocol

TIMEOUT = 2.0

# (name, argv, environment variable the tool needs to reach a display, or None)
SYSTEM_TOOLS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("wl-copy", ("wl-copy",), "WAYLAND_DISPLAY"),
    ("xclip", ("xclip", "-selection", "clipboard"), "DISPLAY"),
    ("xsel", ("xsel", "--clipboard", "--input"), "DISPLAY"),
    ("pbcopy", ("pbcopy",), None),
)

Which = Callable[[str], "str | None"]
Run = Callable[..., Any]


class ClipboardApp(Protocol):
    def copy_to_clipboard(self, text: str) -> None: ...


def system_copy(
    text: str,
    *,
    which: Which = shutil.which,
    run: Run = subprocess.run,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Copy with the first system tool that works; its name, or None if none did."""
    env = os.environ if env is None else env
    data = text.encode("utf-8")
    for name, argv, needs in SYSTEM_TOOLS:
        if needs and not env.get(needs):
            continue
        exe = which(argv[0])
        if not exe:
            continue
        try:
            # stdout/stderr go to /dev/null, not a pipe: wl-copy and xclip fork a
            # child that keeps serving the selection, and a captured pipe would
            # stay open until the timeout.
            proc = run(
                [exe, *argv[1:]],
                input=data,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if getattr(proc, "returncode", 1) == 0:
            return name
    return None


def _remember(app: ClipboardApp, text: str) -> None:
    # Keep Textual's in-app clipboard (what Input/TextArea paste) in step with
    # the system one; `copy_to_clipboard` would do it but also writes OSC 52.
    from slop_tui.ui.textual_fixes import remember_copied

    remember_copied(app, text)  # type: ignore[arg-type]


def copy_text(
    app: ClipboardApp,
    text: str,
    *,
    which: Which = shutil.which,
    run: Run = subprocess.run,
    env: Mapping[str, str] | None = None,
) -> str:
    """Copy `text`; returns "system:<tool>" or "osc52" (how it was copied).

    Blocks for as long as the system tool takes (at most 2 s per tool); from
    an async handler prefer `copy_text_async`.
    """
    tool = system_copy(text, which=which, run=run, env=env)
    if tool is not None:
        _remember(app, text)
        return f"system:{tool}"
    app.copy_to_clipboard(text)
    return "osc52"


async def copy_text_async(
    app: ClipboardApp,
    text: str,
    *,
    which: Which = shutil.which,
    run: Run = subprocess.run,
    env: Mapping[str, str] | None = None,
) -> str:
    """`copy_text` with the system tool run in a thread, so the UI keeps drawing."""
    tool = await asyncio.to_thread(system_copy, text, which=which, run=run, env=env)
    if tool is not None:
        _remember(app, text)
        return f"system:{tool}"
    app.copy_to_clipboard(text)
    return "osc52"


def describe(method: str) -> str:
    """A notification line for the result of a copy."""
    if method.startswith("system:"):
        return f"Copied to the clipboard ({method.split(':', 1)[1]})."
    return "Copied with OSC 52 (the terminal must allow clipboard access)."


__all__ = ["SYSTEM_TOOLS", "copy_text", "copy_text_async", "describe", "system_copy"]
