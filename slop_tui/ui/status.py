"""The header's status line: what the app is doing, the session, provider, model and
window, shortened to fit the header."""

from __future__ import annotations

from collections.abc import Sequence

from slop_tui.ui.text import neutralise

TITLE = "slop-tui"


def status_line(
    phase: str,
    session: str,
    choice,
    sess,
    *,
    sandboxed: bool,
    width: int,
    root: str = "",
    cost: str = "",
    mcp_outside: Sequence[str] = (),
) -> tuple[str, bool]:
    """The header's line and whether the app's name still fits beside it.

    What the app is doing first (idle, streaming, running tools, retrying in N s,
    summarizing, compacting), then a warning when the shell or an MCP server runs
    without the sandbox, then the session, the provider and model, the window.
    Shortened to fit the header's width: the words go first, then the app's name,
    then the end of the line; the warning comes right after the phase, so it is
    never what is cut. `root`: the repository whose `.slop/` is used, when
    slop-tui was started in a subfolder of it; `cost`: the session's cost in money,
    once it has calls; `mcp_outside`: the MCP servers started without the sandbox."""
    phase = phase or "idle"
    lane = "" if sess.lane == "main" else f" · lane {sess.lane}"
    lane += f" · {cost}" if cost else ""
    # Without an OS sandbox every shell command asks first: say so where it is always seen.
    shell = "" if sandboxed else " · shell: NO SANDBOX"
    if mcp_outside:  # MCP servers started as programs of their own, without bubblewrap
        shell += f" · mcp NO SANDBOX: {', '.join(mcp_outside)}"
    window = sess.window_size or "all"
    root = f" · .slop/ of {root}/" if root else ""
    room = max(20, width - 12)  # the header's icon and margins
    demo = choice.name == "demo"
    long = "DEMO (offline, scripted)" if demo else f"{choice.name} · {choice.model}"
    short = "demo" if demo else choice.model
    for label, win in ((long, "window"), (short, "win")):
        text = f"{phase}{shell} · {session} · {label} · {win} {window}{lane}{root}"
        if len(text) + len(TITLE) + 3 <= room:
            return neutralise(text), True
    return neutralise(text), False
