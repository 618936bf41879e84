"""Each of slop-tui's patches to Textual, on and off: what it buys, side by side.

    python bench/textual_patches.py [--runs N] [--patches a,b] [--keys] [--keep DIR]
    python bench/textual_patches.py --work [--patches a,b] [--keep DIR]
    python bench/textual_patches.py --wrap [--runs N]

Every start is bench/tui.py's child (`bench/tui_child.py`: the app headless at
120x40 in a fresh process, its frames timed from the spawn) on the 2,000-message
session of bench/tui.py's ledger. The configurations are "all" (every patch,
as the app runs) and one per patch with that patch left out
(SLOP_TUI_TEXTUAL_PATCHES_OFF, slop_tui/ui/textual_fixes.py); runs are
interleaved (run 1 of every configuration, then run 2, ...), so load on the
machine spreads over all of them. Printed per configuration: the start-up's
wall time to fully shown and its CPU time (which moves less with other load),
median and range; with `--keys`, bench/tui.py's key cases too (10 keys each,
idle and while a reply streams), their median and max over all runs. The
figures go to docs/textual-patches.md.

`--work`: instead of the clock, the work of the same start counted in the
process (headless `run_test`, 120x40, until the app is ready and 1 s more):
full layouts (`Compositor.reflow`), arrangements of the whole screen
(`Compositor._arrange_root`: a layout's own, or a widget's region looked up in
an invalidated map), `Stylesheet.apply` calls, `FIFOCache`s made,
`WrappedDocument.wrap` calls and their time, scrollbar updates
(`Widget._scroll_update`), frames written, screen renders
(`Compositor.render_update`, a frame's or one dropped) and screen refreshes
asked for while the first frame is held; the start is the
command's (`startup.defer_for_first_screen`: the first frame held until the
panes are filled); then 20 full layouts of the settled
screen (what each streamed update of a reply makes), their median time, and
the arrangements, scrollbar updates and frames each one made. Counts do not move with the load on
the machine; one start per configuration.

`--wrap`: the soft wrap of a context preview's text (70,000 characters of
the benches' pseudo-prose, as `TextArea` wraps it at 80 cells) with
Textual's `compute_wrap_offsets` and `get_tab_widths` and with the `ascii-wrap`
patch's, interleaved, best of 3 per run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c  # noqa: E402
import tui  # noqa: E402

from slop_tui.ui.textual_fixes import PATCHES, PATCHES_OFF_VARIABLE  # noqa: E402

KEY_CASES = ("prompt idle", "groups idle", "prompt streaming", "groups streaming")


def _range(values: list[float], scale: float, unit: str) -> str:
    values = [v * scale for v in values]
    return f"{statistics.median(values):.0f} {unit} [{min(values):.0f}-{max(values):.0f}]"


def _keys(runs: list[dict], case: str) -> str:
    pooled = [
        v * 1000 for r in runs for v in (r.get("latency", {}).get(case, {}).get("effect") or [])
    ]
    if not pooled:
        return "–"
    return f"{statistics.median(pooled):.1f} / {max(pooled):.0f}"


WORK = (
    "reflows",
    "arrangements",
    "styles applied",
    "caches made",
    "wraps",
    "wrap ms",
    "scrollbar updates",
    "frames",
    "renders",
    "renders held",
    "layout ms",
    "arrangements / layout",
    "scrollbar updates / layout",
    "frames / layout",
)
LAYOUTS = 20  # full layouts timed after the start, as each streamed update makes one


async def _count_work(db: str, cwd: str) -> dict[str, float]:
    """One start of the app in this process (patches as the environment says)."""
    from textual._compositor import Compositor
    from textual.app import App
    from textual.cache import FIFOCache
    from textual.css.stylesheet import Stylesheet
    from textual.document._wrapped_document import WrappedDocument
    from textual.screen import Screen
    from textual.widget import Widget

    from slop_tui.ui import startup
    from slop_tui.ui.app import SlopApp
    from slop_tui.ui.screens.firstrun import FirstRunScreen

    startup.defer_for_first_screen()  # as the command starts: the first frame held
    app = SlopApp(db=db, session="2k", user_themes=False, blink=False, cwd=Path(cwd))  # installs
    counts = dict.fromkeys(WORK, 0.0)

    def counting(owner, attr, key, timed=""):  # type: ignore[no-untyped-def]
        inner = getattr(owner, attr)

        def wrapper(*a, **k):  # type: ignore[no-untyped-def]
            counts[key] += 1
            if not timed:
                return inner(*a, **k)
            t = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                counts[timed] += (time.perf_counter() - t) * 1000

        setattr(owner, attr, wrapper)

    counting(Compositor, "reflow", "reflows")
    counting(Compositor, "_arrange_root", "arrangements")
    counting(Stylesheet, "apply", "styles applied")
    counting(FIFOCache, "__init__", "caches made")
    counting(WrappedDocument, "wrap", "wraps", "wrap ms")
    counting(Widget, "_scroll_update", "scrollbar updates")
    counting(Compositor, "render_update", "renders")
    refresh = Screen._compositor_refresh

    def held(self):  # type: ignore[no-untyped-def]
        counts["renders held"] += bool(self.app.__dict__.get("_slop_frames_held"))
        return refresh(self)

    Screen._compositor_refresh = held  # type: ignore[method-assign]
    display = App._display

    def framing(self, screen, renderable):  # type: ignore[no-untyped-def]
        counts["frames"] += renderable is not None
        return display(self, screen, renderable)

    App._display = framing  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        while not (app.ready or app.startup_error):
            await pilot.pause(0.05)
        if isinstance(app.screen, FirstRunScreen):
            await pilot.press("escape")
        await pilot.pause(1.0)
        start = dict(counts)  # the start's own work
        took = []
        for _ in range(LAYOUTS):
            t = time.perf_counter()
            app.screen._refresh_layout()
            took.append((time.perf_counter() - t) * 1000)
            await pilot.pause(0.05)
        per_layout = {
            f"{key} / layout": (counts[key] - start[key]) / LAYOUTS
            for key in ("arrangements", "scrollbar updates", "frames")
        }
    return {**start, **per_layout, "layout ms": statistics.median(took)}


def _work_child() -> None:
    import json

    print(json.dumps(asyncio.run(_count_work(sys.argv[2], sys.argv[3]))))


def _work(template: Path, work: Path, configs: list[str]) -> None:
    import json
    import shutil
    import subprocess

    rows = []
    for name in configs:
        db = work / f"work-{name}.db"
        shutil.copyfile(template, db)
        env = dict(os.environ, TEXTUAL_ANIMATIONS="none", SLOP_CONFIG=str(work / "none.toml"))
        env[PATCHES_OFF_VARIABLE] = "" if name == "all" else name
        done = subprocess.run(
            [sys.executable, __file__, "--work-child", str(db), str(work)],
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            timeout=600,
        )
        for p in work.glob(f"work-{name}.db*"):
            p.unlink()
        if done.returncode:
            raise RuntimeError(done.stderr[-3000:])
        counts = json.loads(done.stdout.strip().splitlines()[-1])
        label = "none" if name == "all" else name
        rows.append([label, *(f"{counts[k]:.3g}" for k in WORK)])
    print(
        "2,000 messages, one in-process start per row, counted until ready + 1 s; then "
        f"{LAYOUTS} full layouts (`Screen._refresh_layout`), their median time and work"
    )
    print(c.table(["left out", *WORK], rows))


def _wrap(runs: int) -> None:
    import timeit

    import textual.document._wrapped_document as wrapped
    from textual.document._document import Document

    from slop_tui.ui import textual_fixes

    text = c.corpus(7, 70_000)
    own = {
        name: textual_fixes.original(wrapped, name)
        for name in ("compute_wrap_offsets", "get_tab_widths")
    }
    fast = {
        "compute_wrap_offsets": textual_fixes.fast_wrap_offsets,
        "get_tab_widths": textual_fixes.fast_tab_widths,
    }
    document = wrapped.WrappedDocument(Document(text), tab_width=4)
    times: dict[str, list[float]] = {"Textual's": [], "ascii-wrap": []}
    for _ in range(runs):
        for label, functions in (("Textual's", own), ("ascii-wrap", fast)):
            for name, function in functions.items():
                setattr(wrapped, name, function)
            best = min(timeit.repeat(lambda: document.wrap(80, 4), number=1, repeat=3))
            times[label].append(best)
    for name, function in own.items():
        setattr(wrapped, name, function)
    print(f"{len(text):,} characters in {text.count(chr(10)) + 1:,} lines, wrapped at 80")
    print(c.table(["wrap", "ms"], [[k, _range(v, 1000, "ms")] for k, v in times.items()]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="starts per configuration")
    ap.add_argument("--patches", default="", help="only these patches (comma-separated)")
    ap.add_argument("--keys", action="store_true", help="also the key cases (10 keys each)")
    ap.add_argument("--keep", default="", help="build the ledger in this folder and keep it")
    ap.add_argument("--work", action="store_true", help="count the work of one start instead")
    ap.add_argument("--wrap", action="store_true", help="time the soft wrap fast path instead")
    args = ap.parse_args()
    if args.wrap:
        _wrap(args.runs)
        return
    names = list(dict.fromkeys(p.name for p in PATCHES))
    if args.patches:
        names = [n for n in names if n in args.patches.split(",")]
    configs = ["all", *names]

    work = Path(args.keep or tempfile.mkdtemp(prefix="slop-tui-patches-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "README.md").write_text("# bench project\n")
    template = work / "template.db"
    if not template.exists():
        tui.SIZES = [("empty", 0), ("2k", 2_000)]  # the 20,000 session is not used here
        asyncio.run(tui.build(template, quick=True))
    config = work / "quick-config.toml"
    config.write_text("[compaction]\nenabled = false\n")
    if args.work:
        _work(template, work, configs)
        return
    started = time.perf_counter()
    load = os.getloadavg()

    def start(name: str, tag: str) -> dict:
        os.environ[PATCHES_OFF_VARIABLE] = "" if name == "all" else name
        return tui.spawn(
            template,
            work,
            "2k",
            tag,
            latency=args.keys,
            presses=10,
            bg_wait=5.0,
            config=config,
        )

    start("all", "warmup")  # bytecode and page cache; not counted
    results: dict[str, list[dict]] = {name: [] for name in configs}
    for i in range(args.runs):
        for name in configs:
            results[name].append(start(name, f"{name}-{i}"))
    os.environ.pop(PATCHES_OFF_VARIABLE, None)

    headers = ["left out", "shown (wall)", "CPU to shown"]
    if args.keys:
        headers += [f"{case} ms (median / max)" for case in KEY_CASES]
    rows = []
    for name in configs:
        runs = results[name]
        row = [
            "none" if name == "all" else name,
            _range([r["shown"] for r in runs], 1000, "ms"),
            _range([r["cpu_shown"] for r in runs], 1000, "ms"),
        ]
        if args.keys:
            row += [_keys(runs, case) for case in KEY_CASES]
        rows.append(row)
    print(c.machine())
    print(
        f"2,000 messages, {args.runs} interleaved starts per row, load "
        f"{load[0]:.1f} at start, {time.perf_counter() - started:.0f} s in all"
    )
    print(c.table(headers, rows))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--work-child"]:
        _work_child()
    else:
        main()
