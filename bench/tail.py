"""What the slow keys are made of: the key traces of bench/tui_child.py, sorted by cause.

    BENCH_KEY_TRACE=1 python bench/tui_child.py ... --latency --page N > run.json
    python bench/tail.py run.json [run.json ...]   # pooled
    python bench/tail.py --ab main=a.json,b.json new=c.json,d.json

Every measured key of a child started with BENCH_KEY_TRACE=1 carries what happened
between the key and its effect's frame: the garbage collections (generation, ms), the
layout passes (a full reflow or a scroll's, ms), the frames drawn before the effect's
(another frame queued ahead of the key: the stream's, or a page's mount), what the
main thread ran, sampled every millisecond, and the CPU time the main thread used
from the key to its frame (`cpu_ms`): on a loaded machine the wall time also counts
the time the process waited for a core, the CPU time only the work on the key's way.

A key is *slow* when it took more than twice its case's median. Its cause is the
largest of: the collections inside it (`gc`), the full reflows (`reflow`: mounting
or a size change laid the screen out again), the scroll layouts (`scroll`), and the
frames drawn before the effect's (`queued`: the key waited behind another frame);
`other` when none of those is a third of it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

CAUSES = ("gc", "reflow", "scroll", "queued", "other")


def load(paths: list[str]) -> list[dict]:
    keys: list[dict] = []
    for path in paths:
        lines = [ln for ln in Path(path).read_text().splitlines() if ln.startswith("{")]
        keys.extend(json.loads(lines[-1]).get("keys") or [])
    return keys


def cause(key: dict) -> str:
    ms = key["ms"]
    parts = {
        "gc": sum(g_ms for _gen, g_ms in key["gc"]),
        "reflow": sum(lm for what, lm in key["layouts"] if what == "reflow"),
        "scroll": sum(lm for what, lm in key["layouts"] if what == "scroll"),
        # The frames before the effect's: the key's own frame came after them.
        "queued": sum(key["frames"][:-1]) if len(key["frames"]) > 1 else 0.0,
    }
    if len(key["frames"]) > 1 and key.get("first_frame_ms") is not None:
        parts["queued"] = max(parts["queued"], key["first_frame_ms"])
    what, most = max(parts.items(), key=lambda kv: kv[1])
    return what if most >= ms / 3 else "other"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(keys: list[dict]) -> dict[str, dict]:
    by: dict[str, list[dict]] = defaultdict(list)
    for key in keys:
        by[key["case"]].append(key)
    out = {}
    for case, ks in by.items():
        ms = [k["ms"] for k in ks]
        med = statistics.median(ms)
        slow = [k for k in ks if k["ms"] > 2 * med]
        cpu = [k["cpu_ms"] for k in ks if "cpu_ms" in k]
        out[case] = {
            "cpu": (statistics.median(cpu), pct(cpu, 0.9), pct(cpu, 0.99)) if cpu else None,
            "n": len(ms),
            "median": med,
            "p90": pct(ms, 0.9),
            "p99": pct(ms, 0.99),
            "max": max(ms),
            "slow": len(slow),
            "causes": Counter(cause(k) for k in slow),
            "gc_in_key": sum(1 for k in ks if any(g_ms >= 2 for _g, g_ms in k["gc"])),
        }
    return out


def table(name: str, summ: dict[str, dict]) -> str:
    head = (
        f"| {name}: case | n | median ms | p90 | p99 | max | slow (> 2× median) | "
        + " | ".join(CAUSES)
        + " | keys with a collection ≥ 2 ms | main thread's CPU ms: median / p90 / p99 |"
    )
    rows = [head, "|" + "---|" * (9 + len(CAUSES))]
    for case, s in summ.items():
        rows.append(
            f"| {case} | {s['n']} | {s['median']:.1f} | {s['p90']:.1f} | {s['p99']:.1f} | "
            f"{s['max']:.1f} | {s['slow']} | "
            + " | ".join(str(s["causes"].get(c, 0)) for c in CAUSES)
            + f" | {s['gc_in_key']} | "
            + (" / ".join(f"{v:.1f}" for v in s["cpu"]) if s["cpu"] else "–")
            + " |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="*", help="child JSON outputs, pooled")
    ap.add_argument("--ab", nargs="+", default=[], help="NAME=a.json,b.json ... side by side")
    args = ap.parse_args()
    if args.logs:
        print(table("all", summary(load(args.logs))))
    for spec in args.ab:
        name, _, files = spec.partition("=")
        print()
        print(table(name, summary(load(files.split(",")))))


if __name__ == "__main__":
    main()
