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

Then one table puts the in-process measure of the workspace (bench/tui.py:
frames timed inside the app) beside the black-box one (bench/screen.py: the
real `slop-tui` in a pty, read by a terminal emulator), row by row (`SIDE_BY_SIDE`).
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
    "plan.py",
    "turn.py",
    "edits.py",
    "background.py",
    "tui.py",
    "screen.py",
    "context_sim.py",
    "security.py",
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


# (what, bench/tui.py's measure, bench/screen.py's measure), by the tables' first column
SIDE_BY_SIDE = [
    (
        "process start → conversation shown",
        "process start → conversation fully shown",
        "process start → last message on screen, settled",
    ),
    (
        "CPU time until shown",
        "CPU time used until fully shown (less load-sensitive)",
        "CPU time of the process when settled",
    ),
    (
        "typing in the prompt, idle",
        "key → frame, typing in the prompt, idle",
        "key → screen, typing in the prompt, idle",
    ),
    (
        "up in the groups pane, idle",
        "key → frame, up in the groups pane, idle",
        "key → screen, up in the groups pane, idle",
    ),
    (
        "ctrl+u in the conversation, idle",
        "key → frame, ctrl+u (older page) in the conversation",
        "key → screen, ctrl+u (older groups) in the conversation, idle",
    ),
    (
        "typing in the prompt, reply streaming",
        "key → frame, typing in the prompt, reply streaming",
        "key → screen, typing in the prompt, reply streaming",
    ),
    (
        "up in the groups pane, reply streaming",
        "key → frame, up in the groups pane, reply streaming",
        "key → screen, up in the groups pane, reply streaming",
    ),
    (
        "PageUp in the conversation, reply streaming",
        "key → frame, PageUp in the conversation, reply streaming",
        "key → screen, PageUp in the conversation, reply streaming",
    ),
    (
        "peak memory when shown",
        "peak RSS (VmHWM) when shown",
        "peak memory (VmHWM) when shown",
    ),
]


def table_cells(output: str) -> list[dict[str, str]]:
    """Every row of every markdown table in `output`, as {header: cell}."""
    found: list[dict[str, str]] = []
    header: list[str] | None = None
    for raw in output.splitlines():
        stripped = raw.strip()
        if not stripped.startswith("|"):
            header = None
            continue
        cells = _cells(stripped)
        if header is None:
            header = [h.lower() for h in cells]
        elif not set(stripped) <= set("|-: ") and len(cells) == len(header):
            found.append(dict(zip(header, cells, strict=True)))
    return found


def side_by_side(tui_output: str, screen_output: str) -> str:
    """The in-process and the black-box measure of the same things, one row each."""

    def index(output: str) -> dict[tuple[str, str], str]:
        out = {}
        for row in table_cells(output):
            value = row.get("value") or row.get("median") or ""
            spread = row.get("spread", "")
            out[(row.get("measure", ""), row.get("session", ""))] = (
                f"{value} ({spread})" if spread else value
            )
        return out

    inside, outside = index(tui_output), index(screen_output)
    sessions = list(dict.fromkeys(s for _m, s in [*inside, *outside] if s))
    lines = [
        "| measure | session | in-process (bench/tui.py) | black-box (bench/screen.py) |",
        "|---|---|---|---|",
    ]
    for what, tui_key, screen_key in SIDE_BY_SIDE:
        for session in sessions:
            a = inside.get((tui_key, session), "")
            b = outside.get((screen_key, session), "")
            if a or b:
                lines.append(f"| {what} | {session} | {a or '–'} | {b or '–'} |")
    lines.append("")
    lines.append(
        "Keys: in-process median (p95 / max), frames timed inside the app, animations off; "
        "black-box p99 (median / max), the key's bytes to the screen showing its effect."
    )
    return "\n".join(lines)


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
    outputs: dict[str, str] = {}
    for name in SCRIPTS:
        path = HERE / name
        if not path.exists():
            continue
        print(f"\n## {name}\n", flush=True)
        t0 = time.perf_counter()
        code, output = run(path, extra)
        print(f"\n({name}: {time.perf_counter() - t0:.1f} s, exit {code})", flush=True)
        failed |= code != 0
        outputs[name] = output
        found = target_rows(name, output)
        rows.extend(found)
        if not any(r.result != "?" for r in found):
            silent.append(name)
    print("\n## Summary: every target row\n")
    print(summary(rows, silent), flush=True)
    if "tui.py" in outputs or "screen.py" in outputs:
        print("\n## The workspace, measured inside the process and from outside\n")
        print(side_by_side(outputs.get("tui.py", ""), outputs.get("screen.py", "")), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
