"""The command palette: key -> updated list with 200 commands (`python bench/tui.py --palette`).

    python bench/tui.py --palette [--runs N]

The real `SlopApp` (headless, 120x40, an empty project, the demo provider) with
its palette filled to 200 entries: the app's actions, every slash command and
theme, then made-up commands with help texts as long as the real ones. Each
key is typed into the palette's input (`App.simulate_key`, the path a real key
takes); its time runs until the palette's search has finished, the list holds
the new hits and the next frame has been drawn. Every key of a few realistic
queries ("session act", "export", "quit", "ctx show", "zz" with no match) is
timed.

Side by side in one run: `SlopCommands` as it is, and the same provider with the
search it had before (Textual's fuzzy match on the help text too, which tries
every placement of the query's letters). Each run is a fresh app; a figure is
the median and range over runs of each run's median and worst key.

Target: <= 50 ms per key (one frame) at 200 commands on this machine.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from textual.command import CommandInput, CommandList, CommandPalette, Hit, Hits

from slop_tui.ui.app import SlopApp
from slop_tui.ui.frames import frame_drawn
from slop_tui.ui.palette import SlopCommands

ENTRIES = 200
QUERIES = ("session act", "export", "quit", "ctx show", "zz")
TARGET_MS = 50.0
HELP = (
    "Made-up command {i}: shows what the session holds, its groups, tokens and summaries, "
    "so the palette searches help texts as long as the real ones."
)


class BeforeCommands(SlopCommands):
    """The search before: Textual's fuzzy match on the title, then on the help text."""

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for entry in self.entries:
            score = matcher.match(entry.title)
            if score > 0:
                display = matcher.highlight(entry.title)
            else:
                score = matcher.match(entry.help) * 0.5
                display = entry.title
            if score > 0:
                yield Hit(score, display, entry.callback, text=entry.title, help=entry.help)


class PaletteApp(SlopApp):
    """The workspace whose palette has ENTRIES entries."""

    CSS_PATH = str(Path(__import__("slop_tui.ui.app").ui.app.__file__).with_name("app.tcss"))

    def palette_actions(self):
        actions = list(super().palette_actions())
        from slop_tui.commands import TABLE

        real = len(actions) + len(TABLE.commands) + len(self.available_themes)
        for i in range(max(0, ENTRIES - real)):
            actions.append((f"Made-up command {i}", HELP.format(i=i), _nothing))
        return actions


async def _nothing() -> None:
    return None


async def _gathered(palette: CommandPalette, timeout: float = 30.0) -> None:
    """The palette's search for the input's value has finished."""
    deadline = time.perf_counter() + timeout
    await asyncio.sleep(0)
    while any(not w.is_finished for w in palette.workers):
        if time.perf_counter() > deadline:
            raise TimeoutError("the palette's search did not finish")
        await asyncio.sleep(0.0005)


async def one_run(provider: type[SlopCommands], root: Path) -> list[float]:
    """Key -> list-and-frame times (ms) of every key of QUERIES in a fresh app."""
    PaletteApp.COMMANDS = {provider}
    app = PaletteApp(db=str(root / ".slop" / "slop.db"), user_themes=False, blink=False, cwd=root)
    times: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.perf_counter() + 30
        while not app.ready:
            if time.perf_counter() > deadline:
                raise TimeoutError("the workspace did not open")
            await pilot.pause(0.02)
        await pilot.pause()
        for query in QUERIES:
            await pilot.press("ctrl+p")
            deadline = time.perf_counter() + 10
            while not isinstance(app.screen, CommandPalette):
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"no palette; the screen is {app.screen!r}")
                await pilot.pause(0.01)
            palette = app.screen
            await _gathered(palette)
            await pilot.pause()
            field = palette.query_one(CommandInput)
            listing = palette.query_one(CommandList)
            for ch in query:
                start = time.perf_counter()
                if ch == " ":  # a simulated "space" key types nothing into an Input
                    field.insert_text_at_cursor(ch)
                else:
                    app.simulate_key(ch)
                while not field.value.endswith(ch):
                    await asyncio.sleep(0.0002)
                await _gathered(palette)
                await frame_drawn(app, timeout=1.0)
                times.append((time.perf_counter() - start) * 1000)
            assert listing.option_count > 0 or query == "zz", query
            await pilot.press("escape")
            while isinstance(app.screen, CommandPalette):
                await pilot.pause(0.01)
            print(".", end="", flush=True)
    return times


async def _session(root: Path) -> None:
    from slop_tui.ledger import Ledger

    (root / ".slop").mkdir(exist_ok=True)
    ledger = await Ledger.open(str(root / ".slop" / "slop.db"))
    try:
        await ledger.append_user("default_session", "a first prompt")
    finally:
        await ledger.close()


def _count_entries() -> int:
    from slop_tui.commands import TABLE

    app = PaletteApp(user_themes=False)
    return len(app.palette_actions()) + len(TABLE.commands) + len(app.available_themes)


def run(runs: int) -> dict:
    """Interleaved runs of the two searches; returns the table's figures."""
    results: dict[str, list[list[float]]] = {"now": [], "before": []}
    with tempfile.TemporaryDirectory(prefix="slop-palette-") as tmp:
        root = Path(tmp)
        (root / "README.md").write_text("# palette bench\n")
        asyncio.run(_session(root))  # a project with a session: no first-run panel
        for _ in range(runs):
            for name, provider in (("now", SlopCommands), ("before", BeforeCommands)):
                results[name].append(asyncio.run(one_run(provider, root)))
    return results


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} ({min(values):.1f}-{max(values):.1f})"


def report(results: dict, entries: int) -> bool:
    keys = sum(len(q) for q in QUERIES)
    print(f"\nCommand palette: {entries} entries, {keys} keys per run ({', '.join(QUERIES)})")
    print("key -> search done and frame drawn, ms: median (range) over runs")
    print(f"{'search':<8} {'runs':>4} {'median key':>22} {'worst key':>24}")
    ok = True
    for name, runs in results.items():
        medians = [statistics.median(r) for r in runs]
        worst = [max(r) for r in runs]
        print(f"{name:<8} {len(runs):>4} {_spread(medians):>22} {_spread(worst):>24}")
        if name == "now":
            ok = statistics.median(worst) <= TARGET_MS
    now = statistics.median([statistics.median(r) for r in results["now"]])
    before = statistics.median([statistics.median(r) for r in results["before"]])
    print(f"before / now (median key): {before / now:.1f}x")
    print(f"target: worst key <= {TARGET_MS:.0f} ms (median of runs): {'PASS' if ok else 'FAIL'}")
    return ok


def main(runs: int) -> int:
    entries = _count_entries()
    return 0 if report(run(runs), entries) else 1
