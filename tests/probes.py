"""Scripts run in a child process: the app started as the `slop-tui` command starts
it (its first frame held for the conversation), recording the modules loaded when
that first frame is written."""

from __future__ import annotations

import textwrap

_FIRST_FRAME = """
import asyncio, json, sys
from slop_tui.ui import startup
{before_app}
from slop_tui.ui.app import SlopApp
startup.defer_for_first_screen()

async def main():
    app = SlopApp(db=sys.argv[1], user_themes=False, blink=False)
    seen = []
    display = app._display

    def recording(screen, renderable):
        if not seen:
            seen.append(sorted(sys.modules))
        return display(screen, renderable)

    app._display = recording
    async with app.run_test(size={size}) as pilot:
        while not app.ready and app.startup_error is None:
            await pilot.pause(0.05)
{while_running}
{after_exit}
    print(json.dumps({result}))

asyncio.run(main())
"""


def first_frame_probe(
    *,
    size: tuple[int, int],
    while_running: str,
    result: str,
    before_app: str = "",
    after_exit: str = "",
) -> str:
    """The probe's source. `seen[0]` is the sorted module names at the first frame;
    `while_running` runs once the app is ready (inside `run_test`, with `app` and
    `pilot`), `after_exit` after the app has exited, and `result` is the expression
    printed as the last line of JSON."""
    return _FIRST_FRAME.format(
        before_app=textwrap.dedent(before_app).strip(),
        size=size,
        while_running=textwrap.indent(textwrap.dedent(while_running).strip(), " " * 8),
        after_exit=textwrap.indent(textwrap.dedent(after_exit).strip(), " " * 4),
        result=result,
    )
