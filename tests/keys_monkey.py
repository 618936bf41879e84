"""A monkey for where keys land: a random click on the workspace, then a sentence typed.

`KeysMonkey(project, seed).run(steps)` drives the real `SlopApp` (Pilot, headless)
over a real ledger. Each step clicks a random cell of the panes (the conversation,
the group list's rows, the sessions, STATE, the gauge, the preview; not the group
marks, whose click is a drop, nor the editors, where a click means "type here"),
closes any dialog the click opened, then types a sentence of words that start with
the panes' letters (`d`, `r`, `c`, `e`, `j`, `w`, `[`, `]`), in one burst or one key
at a time. After every step, once the app is quiet (no letter waiting to act, every
message handled, no worker running):

- the prompt holds the sentence, whole (first letter included);
- the ledger is unchanged: messages, sessions, STATE, the journal of edits (the
  redo chain) and the trash (`tests/test_commands_edits.fingerprint`).

A broken one is an unintended edit or a lost key, and counts as a violation.

The events go in the way a terminal's driver delivers them (`App.post_message`: a
mouse button down and up, from which the app makes the click; keys), and the
monkey waits on conditions (every message queued on the app and the shown screen
handled) rather than on Pilot's idle heuristic, which sleeps in 20 ms slices until
the process looks idle, up to a second at a time on a loaded machine.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from textual import events

from tests.fakeserver import wait_for
from tests.test_app import started
from tests.test_app_actions import make_app, seed
from tests.test_commands_edits import fingerprint

SIZE = (120, 40)
WORDS = (
    "do drop docs redo run check copy edit explain just wrap write [x] ]] [ ] review "
    "the a unit tests next please can you then and it now what why"
).split()
NAMES = {" ": "space", "/": "slash", "[": "left_square_bracket", "]": "right_square_bracket"}
CLICKABLE = ("#conversation", "#group-list", "#session-list", "#state", "#gauge", "#preview")


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))


def key(ch: str) -> events.Key:
    return events.Key(NAMES.get(ch, ch), ch)


async def handled(app, timeout: float = 30.0) -> None:
    """Every message queued so far on the app and on the shown screen's widgets is
    handled: each node runs a callback queued behind them."""
    loop = asyncio.get_running_loop()
    waits = []
    for node in (app, *app.screen.walk_children(with_self=True)):
        done = loop.create_future()
        if node.call_later(done.set_result, None):
            waits.append(done)
    if waits:
        await asyncio.wait_for(asyncio.gather(*waits), timeout)


async def quiet(app) -> None:
    """Handled, and no worker running (the dialogs' own workers wait on their answer)."""
    await handled(app)
    busy = [w for w in app.workers if w.group != "dialogs" and not w.is_finished]
    if busy:
        await app.workers.wait_for_complete(busy)
        await handled(app)


@dataclass
class KeysMonkeyResult:
    steps: int = 0
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)


class KeysMonkey:
    def __init__(self, project, seed_: int) -> None:
        self.project = project
        self.rng = random.Random(seed_)

    async def run(
        self, steps: int, *, seconds: float | None = None, progress=None
    ) -> KeysMonkeyResult:
        """`steps` steps, or fewer when `seconds` run out; `progress(result)` after
        every 100."""
        await seed(self.project, [(f"question {i}", f"answer {i}") for i in range(1, 7)])
        result = KeysMonkeyResult()
        start = time.monotonic()
        app = make_app(self.project)
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot)
            ws = app.workspace
            before = await fingerprint(ws)
            prompt = app.workspace_screen.query_one("#prompt")
            for step in range(steps):
                if seconds is not None and time.monotonic() - start > seconds:
                    break
                if progress is not None and step and step % 100 == 0:
                    result.seconds = time.monotonic() - start
                    progress(result)
                prompt.text = ""
                where = await self._click(app)
                text = sentence(self.rng)
                burst = self.rng.random() < 0.7
                for ch in text:
                    app.post_message(key(ch))
                    if not burst:  # each key handled, then a typist's gap (under TEXT_RUN)
                        await handled(app)
                        await asyncio.sleep(self.rng.uniform(0.01, 0.05))
                try:
                    await wait_for(
                        pilot,
                        lambda t=text: prompt.text == t and not app.keys.holding,
                        timeout=5,
                    )
                except TimeoutError:
                    result.violations.append(
                        f"step {step}: after a click on {where}, {'a burst' if burst else 'keys'}"
                        f" {text!r} left the prompt as {prompt.text!r}"
                    )
                await quiet(app)
                now = await fingerprint(ws)
                if now != before:
                    result.violations.append(
                        f"step {step}: typing {text!r} after a click on {where} changed the ledger"
                    )
                    before = now
                result.steps += 1
        result.seconds = time.monotonic() - start
        return result

    async def _click(self, app) -> str:
        """A press and release of the left button on a random cell of a random pane;
        whatever it opened is closed with Escape."""
        selector = self.rng.choice(CLICKABLE)
        widget = app.workspace_screen.query_one(selector)
        region = widget.region
        if region.width <= 1 or region.height <= 0:
            return f"{selector} (hidden)"
        x = self.rng.randrange(region.width)
        y = self.rng.randrange(region.height)
        if selector == "#group-list" and x == widget.content_region.x - region.x:
            x += 1  # the mark's column: its click drops (an intended edit)
        at = {"x": region.x + x, "y": region.y + y, "delta_x": 0, "delta_y": 0, "button": 1}
        at.update(shift=False, meta=False, ctrl=False, screen_x=at["x"], screen_y=at["y"])
        for kind in (events.MouseDown, events.MouseUp):
            app.post_message(kind(None, **at))
            await handled(app)
        await quiet(app)
        while app.screen is not app.workspace_screen:  # a click that opened something
            app.post_message(events.Key("escape", None))
            await quiet(app)
        return f"{selector} ({x}, {y})"
