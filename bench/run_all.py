"""`make bench`: run every benchmark in one process tree, one after another.

    python bench/run_all.py [--quick]

Each script prints its own table; run them together so the figures in
docs/performance.md come from one run on one machine state. At the end, one
table gathers every script's target rows (measured value, target, PASS/FAIL),
read from what the scripts printed:

- `targets:` blocks (`  what: value  PASS`), as bench/ledger.py and
  bench/assembly.py print them;
- markdown table rows with a non-empty `target` column; the verdict comes from
  a `result` column or a PASS/FAIL cell, and when a script gives none (e.g.
  bench/turn.py) it is judged here from the numbers (`≤ 10 ms` against
  `8.38 ms`, same unit only) and marked `(judged)`.

A script that prints no such row is listed as such (its report has to be read).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    "ledger.py",
    "assembly.py",
    "turn.py",
    "edits.py",
    "background.py",
    "tui.py",
    "context_sim.py",
    "load.py",
]

_VERDICT = re.compile(r"^(?P<what>.+?)\s+(?P<verdict>PASS|FAIL)\s*$")
_NUMBER = re.compile(r"(?P<num>[0-9][0-9,]*(?:\.[0-9]+)?)\s*(?P<unit>[^\s0-9|]*(?:\s?CPU)?)")
_LE = ("≤", "<=", "<")
_GE = ("≥", ">=", ">")


@dataclass
class TargetRow:
    script: str
    what: str
    measured: str
    target: str
    result: str


def _clean(cell: str) -> str:
    return cell.replace("**", "").strip()


def _cells(line: str) -> list[str]:
    return [_clean(c) for c in line.strip().strip("|").split("|")]


def judge(measured: str, target: str) -> str:
    """PASS/FAIL from `≤ 10 ms` vs `8.38 ms` (same unit); "" when it cannot be told."""
    t = target.strip()
    op = next((o for o in (*_LE, *_GE) if t.startswith(o)), None)
    want, got = _NUMBER.search(t), _NUMBER.search(measured)
    if op is None or want is None or got is None:
        return ""
    if want.group("unit").strip() != got.group("unit").strip():
        return ""
    a = float(got.group("num").replace(",", ""))
    b = float(want.group("num").replace(",", ""))
    ok = a <= b if op in _LE else a >= b
    return ("PASS" if ok else "FAIL") + " (judged)"


def target_rows(script: str, output: str) -> list[TargetRow]:
    """Every target row a script printed (see the module docstring for the forms)."""
    rows: list[TargetRow] = []
    in_targets = False
    header: list[str] | None = None
    for raw in output.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if stripped.lower() == "targets:":
            in_targets, header = True, None
            continue
        if in_targets:
            m = _VERDICT.match(stripped)
            if stripped and m:
                what, _, value = m.group("what").rpartition(": ")
                rows.append(
                    TargetRow(script, what or value, value if what else "", "", m.group("verdict"))
                )
                continue
            if stripped.startswith("("):  # a note such as "(checked by the full run)"
                continue
            in_targets = False
        if stripped.startswith("|"):
            cells = _cells(stripped)
            if header is None:
                header = [c.lower() for c in cells]
                continue
            if set(stripped) <= set("|-: "):  # the rule under the header
                continue
            rows.extend(_table_row(script, header, cells))
        else:
            header = None
    return rows


def _table_row(script: str, header: list[str], cells: list[str]) -> list[TargetRow]:
    if "target" not in header or len(cells) != len(header):
        return []
    col = dict(zip(header, cells, strict=True))
    target = col["target"]
    if not target:
        return []
    value_at = next((header.index(k) for k in ("value", "median", "measured") if k in header), 1)
    label = " · ".join(c for c in cells[:value_at] if c)
    measured = cells[value_at]
    verdict = col.get("result", "")
    if verdict not in ("PASS", "FAIL"):
        verdict = next((c for c in cells if c in ("PASS", "FAIL")), "") or judge(measured, target)
    return [TargetRow(script, label, measured, target, verdict or "?")]


def summary(rows: list[TargetRow], silent: list[str]) -> str:
    """One markdown table of every target row, failures easy to find."""

    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    lines = [
        "| script | target row | measured | target | result |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        result = f"**{r.result}**" if r.result.startswith("FAIL") else r.result
        lines.append(
            f"| {r.script} | {esc(r.what)} | {esc(r.measured)} | {esc(r.target)} | {result} |"
        )
    passed = sum(r.result.startswith("PASS") for r in rows)
    failed = sum(r.result.startswith("FAIL") for r in rows)
    lines.append("")
    lines.append(f"{passed} PASS, {failed} FAIL, {len(rows) - passed - failed} not judged.")
    for name in silent:
        lines.append(f"{name}: no target rows with a verdict were found; read its report above.")
    return "\n".join(lines)


def run(path: Path, extra: list[str]) -> tuple[int, str]:
    """Run one script, echoing its stdout as it comes, and return (exit code, stdout)."""
    proc = subprocess.Popen(
        [sys.executable, str(path), *extra], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    out: list[str] = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        out.append(line)
    return proc.wait(), "".join(out)


def main() -> int:
    extra = sys.argv[1:]
    failed = 0
    rows: list[TargetRow] = []
    silent: list[str] = []
    for name in SCRIPTS:
        path = HERE / name
        if not path.exists():
            continue
        print(f"\n## {name}\n", flush=True)
        t0 = time.perf_counter()
        code, output = run(path, extra)
        print(f"\n({name}: {time.perf_counter() - t0:.1f} s, exit {code})", flush=True)
        failed |= code != 0
        found = target_rows(name, output)
        rows.extend(found)
        if not any(r.result != "?" for r in found):
            silent.append(name)
    print("\n## Summary: every target row\n")
    print(summary(rows, silent), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
