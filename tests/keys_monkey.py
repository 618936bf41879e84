"""A monkey for where keys land: a random click on the workspace, then a sentence typed.

`KeysMonkey(project, seed).run(steps)` drives the real `SlopApp` (Pilot, headless)
over a real ledger. Each step clicks a random cell of the panes (the conversation,
the group list's rows, the sessions, STATE, the gauge, the preview; not the group
marks, whose click is a drop, nor the editors, where a click means "type here"),
closes any dialog the click opened, then types a sentence of words that start with
the panes' letters (`d`, `r`, `c`, `e`, `j`, `w`, `[`, `]`), in one burst or one key
at a time. After every step:

- the prompt holds the sentence, whole (first letter included);
- the ledger is unchanged: messages, sessions, STATE, the journal of edits (the
  redo chain) and the trash (`tests/test_commands_edits.fingerprint`).

A broken one is an unintended edit or a lost key, and counts as a violation.
"""

from __future__ import annotations

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


@dataclass
class KeysMonkeyResult:
    steps: int = 0
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)


class KeysMonkey:
    def __init__(self, project, seed_: int) -> None:
        self.project = project
        self.rng = random.Random(seed_)

    async def run(self, steps: int) -> KeysMonkeyResult:
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
                prompt.text = ""
                where = await self._click(pilot, app)
                text = sentence(self.rng)
                burst = self.rng.random() < 0.7
                if burst:
                    for ch in text:
                        app.post_message(events.Key(NAMES.get(ch, ch), ch))
                else:
                    for ch in text:
                        await pilot.press(NAMES.get(ch, ch))
                try:
                    await wait_for(pilot, lambda t=text: prompt.text == t, timeout=5)
                except TimeoutError:
                    result.violations.append(
                        f"step {step}: after a click on {where}, {'a burst' if burst else 'keys'}"
                        f" {text!r} left the prompt as {prompt.text!r}"
                    )
                now = await fingerprint(ws)
                if now != before:
                    result.violations.append(
                        f"step {step}: typing {text!r} after a click on {where} changed the ledger"
                    )
                    before = now
                result.steps += 1
        result.seconds = time.monotonic() - start
        return result

    async def _click(self, pilot, app) -> str:
        selector = self.rng.choice(CLICKABLE)
        widget = app.workspace_screen.query_one(selector)
        region = widget.region
        if region.width <= 1 or region.height <= 0:
            return f"{selector} (hidden)"
        x = self.rng.randrange(region.width)
        y = self.rng.randrange(region.height)
        if selector == "#group-list" and x == widget.content_region.x - region.x:
            x += 1  # the mark's column: its click drops (an intended edit)
        await pilot.click(selector, offset=(x, y))
        await pilot.pause()
        while app.screen is not app.workspace_screen:  # a click that opened something
            await pilot.press("escape")
            await pilot.pause()
        return f"{selector} ({x}, {y})"
