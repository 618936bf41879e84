"""The `slop-tui` command's start path: what waits until the first screen is shown.

Only the command defers (cli.py calls `defer_for_first_screen` before the
workspace is imported); an app made by a test or an embedder draws everything
at once, so its screens do not depend on timing.

- **Code highlighting.** Fenced code in answers is drawn in its box without
  its Pygments lexer until the first full screen has been up for
  `HIGHLIGHT_AFTER` seconds (ui/widgets/blocks.py, `hold_code_highlighting`):
  building the Python and SQL lexers is 60-90 ms of CPU each, and the first
  screen's answers hold both. Then the answers on screen and those built
  ahead for paging are rendered again in a thread (the lexers are built
  there) and repainted: the same lines, coloured. Markdown's own modules
  (markdown-it, Rich's Markdown) are imported in a thread just before, if
  the first screen drew its answers from the lines kept from the last start
  (`blocks.keep_answer_lines`).
- **The empty screen.** The app's widgets are composed before the workspace
  is opened; drawn then, they would be laid out and painted empty (about
  50 ms of CPU at 120x40), only to be laid out again with the ledger's
  contents a moment later, while the ledger is read on the same event loop.
  The first frame waits until the panes are filled (`hold_first_frame`), or
  `FIRST_FRAME_WAIT` seconds at most: a slow open (a large migration) shows
  the screen it has by then.
- **The dataclass code cache.** The methods the start compiled (a first start,
  or one after an upgrade) are written to the user cache `CODE_CACHE_SAVE_AFTER`
  seconds after the first full screen (slop_tui/codecache.py), not only at exit:
  a process that is killed never gets there.
- **Regular expressions.** The libraries' patterns compiled as they are imported
  (~85 before the first frame, ~18 ms of CPU) and the context engine's that the
  first plan (the side panes' fill) uses (about 40, 20-40 ms): their generated
  code is kept in the user cache beside the dataclass code and read back at the
  next start (`cli.keep_compiled_patterns`, slop_tui/context/regex.py).
  Every pattern the main thread compiles until the app's code is imported goes
  through it (`keep_every_pattern`), the context engine's lazy ones always; none
  made from the user's or the project's text (a lane's name, the repository
  map's ignore rules) is kept.
- **The MCP SDK.** With MCP servers configured, the SDK's import (seconds)
  starts in a background thread `MCP_PRELOAD_AFTER` seconds after the first
  full screen (`Workspace.preload_mcp`), so the first turn that needs a
  server does not wait for it.
- **The provider's SDK.** `openai` or `google-genai` (~0.7 s of CPU, ~25 MB)
  is imported in a background thread `PROVIDER_PRELOAD_AFTER` seconds after
  the first full screen (`Workspace.preload_provider`); the first reply would
  otherwise wait for it (slop_tui/providers/sdk.py).
- **The user first.** The highlighting and the two SDKs' imports start only
  once the user has not typed or clicked for `USER_PAUSE_S` (`when_user_pauses`):
  a thread that imports or renders takes Python's interpreter lock from the
  event loop in 5 ms slices, and a key handled meanwhile took two to three
  times as long. A user who types on without a pause gets them when they stop,
  or when a turn needs them (a provider awaits its SDK, in a thread; the first
  streamed answer imports Markdown's modules, ~50 ms).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from slop_tui.ui.widgets import blocks

HIGHLIGHT_AFTER = 1.0  # seconds after the first full screen
FIRST_FRAME_WAIT = 1.0  # seconds the first frame waits for the workspace at most
MCP_PRELOAD_AFTER = 2.0  # seconds after the first full screen
# Seconds after the first full screen: after the start's own deferred work (the
# highlighting at 1 s, the MCP SDK at 2 s), which the import's thread would slow down.
PROVIDER_PRELOAD_AFTER = 3.0
CODE_CACHE_SAVE_AFTER = 0.5  # seconds after the first full screen
SANDBOX_AFTER = 0.5  # seconds after the first full screen
# Seconds without a key or a click before the deferred work above starts (a reading
# pause; typing runs at 0.1-0.3 s a key).
USER_PAUSE_S = 1.0

_hold_first_frame = False


def defer_for_first_screen() -> None:
    global _hold_first_frame
    blocks.hold_code_highlighting()
    _hold_first_frame = True


class WorkspaceOpening:
    """The workspace being opened from the moment the app runs, before its first screen
    is composed: the open's reads wait on the ledger's thread while the screen's widgets
    are made and styled, and the screen takes the workspace once it is mounted
    (`SlopApp.open_workspace`). Beside the ledger's open, a thread waits for bwrap's
    probe: the header says from the first screen whether the tools are sandboxed (the
    sandbox itself is built after it, `_build_sandbox`)."""

    def __init__(self, config: Any, session: str | None, env: dict[str, str] | None) -> None:
        import asyncio

        self.config = config
        # (the workspace, whether its sandbox can run: a future)
        self.task = asyncio.ensure_future(self._open(config, session, env))

    @staticmethod
    async def _open(config: Any, session: str | None, env: dict[str, str] | None):
        import asyncio
        import os

        from slop_tui.workspace import Workspace, sandbox_can_run

        seen_env = env if env is not None else os.environ
        probe = asyncio.ensure_future(asyncio.to_thread(sandbox_can_run, config, seen_env))
        workspace = await Workspace.open(config, session, env=env, defer_writes=True)
        return workspace, probe

    async def close(self) -> None:
        """The app ends before its screen took the workspace: the open is cancelled
        (`Workspace.open` closes what it opened), or the workspace it opened closed."""
        import asyncio

        self.task.cancel()
        await asyncio.wait([self.task])
        if not self.task.cancelled() and self.task.exception() is None:
            await self.task.result()[0].close()


def hold_first_frame(app: Any) -> None:
    """Called as the app mounts: on the command's start, no frame until the panes are
    filled (`release_first_frame`) or FIRST_FRAME_WAIT has passed."""
    if not _hold_first_frame:
        return
    from slop_tui.ui.textual_fixes import hold_frames

    hold_frames(app)
    app.set_timer(FIRST_FRAME_WAIT, lambda: release_first_frame(app))


def release_first_frame(app: Any) -> None:
    """The panes are filled (or opening failed, or took too long): draw. Releasing
    what is not held (the second of the two calls) does nothing."""
    from slop_tui.ui.textual_fixes import release_frames

    release_frames(app)


def first_screen_shown(app: Any) -> None:
    """The workspace's panes show the ledger: schedule what was deferred."""
    blocks.first_screen_drawn()  # the answers' lines kept for the next start are these
    if blocks.code_highlighting_held():
        _after_then_paused(app, HIGHLIGHT_AFTER, lambda: _start_highlighting(app))
    if (ws := app.workspace) is not None and ws.config.mcp:
        _after_then_paused(app, MCP_PRELOAD_AFTER, ws.preload_mcp)
    if ws is not None:
        _after_then_paused(app, SANDBOX_AFTER, lambda: _build_sandbox(app, ws))
        _after_then_paused(app, PROVIDER_PRELOAD_AFTER, lambda: _preload_provider(app, ws))
    from slop_tui.codecache import save_code_cache

    app.set_timer(CODE_CACHE_SAVE_AFTER, save_code_cache)


def when_user_pauses(app: Any, work: Callable[[], object], pause: float = USER_PAUSE_S) -> None:
    """Run `work` once no key or click has come for `pause` seconds (now, if none has);
    not at all once the app has stopped."""
    if not app.is_running:
        return
    collector = getattr(app, "collector", None)
    if collector is None or not collector.input_within(pause):
        work()
        return
    app.set_timer(pause / 4, lambda: when_user_pauses(app, work, pause))


def _after_then_paused(app: Any, delay: float, work: Callable[[], object]) -> None:
    app.set_timer(delay, lambda: when_user_pauses(app, work))


def _build_sandbox(app: Any, ws: Any) -> None:
    """The shell's sandbox, built in a thread (`Workspace.prepare_sandbox`)."""
    app.run_worker(ws.prepare_sandbox, group="startup", exit_on_error=False)


def _preload_provider(app: Any, ws: Any) -> None:
    app.run_worker(ws.preload_provider, group="startup", exit_on_error=False)


def _start_highlighting(app: Any) -> None:
    app.run_worker(partial(_highlight, app), group="startup")


async def _highlight(app: Any) -> None:
    import asyncio

    from slop_tui.ui.widgets.conversation import ConversationView

    # Markdown's modules, if the first screen's answers were drawn from kept lines: in
    # a thread now, not on the event loop at the first streamed reply.
    await asyncio.to_thread(blocks.load_markdown)
    blocks.release_code_highlighting()
    for view in app.query(ConversationView):
        await view.render_again()
