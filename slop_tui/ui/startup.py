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
  there) and repainted: the same lines, coloured.
"""

from __future__ import annotations

from typing import Any

from slop_tui.ui.widgets import blocks

HIGHLIGHT_AFTER = 1.0  # seconds after the first full screen


def defer_for_first_screen() -> None:
    blocks.hold_code_highlighting()


def first_screen_shown(app: Any) -> None:
    """The workspace's panes show the ledger: schedule what was deferred."""
    if blocks.code_highlighting_held():
        app.set_timer(HIGHLIGHT_AFTER, lambda: _start_highlighting(app))


def _start_highlighting(app: Any) -> None:
    app.run_worker(_highlight(app), group="startup")


async def _highlight(app: Any) -> None:
    from slop_tui.ui.widgets.conversation import ConversationView

    blocks.release_code_highlighting()
    for view in app.query(ConversationView):
        await view.render_again()
