"""Each of slop-tui's patches to Textual, on and off: what it buys, side by side.

    python bench/textual_patches.py [--runs N] [--patches a,b] [--keys] [--keep DIR]

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="starts per configuration")
    ap.add_argument("--patches", default="", help="only these patches (comma-separated)")
    ap.add_argument("--keys", action="store_true", help="also the key cases (10 keys each)")
    ap.add_argument("--keep", default="", help="build the ledger in this folder and keep it")
    args = ap.parse_args()
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
    main()
