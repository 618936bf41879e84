"""The black-box bench's instrument: a program in a pty read by pyte (bench/_term.py), and
how bench/screen.py tells a key's effect from the rest of the screen."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyte")

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


_term = _load("_term")

# Writes "ready", then answers each line of input with "ack <line>"; "quit" leaves.
PROGRAM = r"""
import sys
sys.stdout.write("\x1b[2J\x1b[Hready\r\n")
sys.stdout.flush()
for line in sys.stdin:
    if line.strip() == "quit":
        break
    sys.stdout.write("\x1b[3;1Hack " + line.strip())
    sys.stdout.flush()
"""


def test_term_times_a_key_to_its_effect_and_a_settled_screen_to_its_last_change(tmp_path):
    term = _term.Term(
        [sys.executable, "-c", PROGRAM], env=_term.environment(), cwd=str(tmp_path), cols=40, rows=8
    )
    try:
        assert term.pump(lambda t: t.find("ready") is not None, 10.0) is not None
        assert term.find("ready") == (0, 0)
        sent = term.send("one\r")
        got = term.pump(lambda t: t.find("ack one") is not None, 10.0, after=sent)
        assert got is not None and got >= sent  # the read time of the chunk that showed it
        assert term.text(2, 0, 7) == "ack one"
        # A settled screen reports the time of its last change, not the time it settled.
        last = term.settle(0.2, 5.0)
        assert last == got == term.last_change
        assert time.perf_counter() - last >= 0.2
        # A probe that never holds gives up at its deadline.
        assert term.pump(lambda t: t.find("never") is not None, 0.2) is None
        term.send("quit\r")
        assert term.proc.wait(10) == 0
    finally:
        term.close()


def test_a_blinking_cell_is_not_a_change(tmp_path):
    term = _term.Term(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env=_term.environment(),
        cwd=str(tmp_path),
        cols=10,
        rows=2,
    )
    try:
        assert term._feed(b"abcd") is True  # text
        assert term._feed(b"\x1b[1;1H\x1b[7ma\x1b[0m") is False  # one cell's attributes
        assert term._feed(b"\x1b[1;1H\x1b[7mabcd\x1b[0m") is True  # three more cells
        assert term._feed(b"\x1b[1;1Habcd") is True  # four cells back
        assert term._feed(b"\x1b[1;1Habcd") is False  # nothing changed
    finally:
        term.close()


def test_older_content_coming_into_view_is_told_from_a_streamed_reply(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # screen.py imports its neighbours
    screen = _load("screen")
    old = ["one", "two", "three", "four", ""]
    # PageUp: older lines appear above, the old ones move down (or off the pane).
    assert screen.older_in_view(old, ["zero", "one", "two", "three", "four"])
    assert screen.older_in_view(old, ["a", "b", "c", "d", "e"])
    # A streamed reply that the view follows moves lines up: not the key's effect.
    assert not screen.older_in_view(old, ["two", "three", "four", "five", "six"])
    assert not screen.older_in_view(old, list(old))


def test_a_page_jump_is_told_from_a_reply_whose_lines_repeat(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    screen = _load("screen")
    # A block's left bar is on every line, blank ones included; a streamed reply
    # repeats some lines (a list's items) further down.
    bar = [" █ " + text for text in ("", "alpha", "- item one", "- item two", "beta", "gamma")]
    page = [" █ " + text for text in ("", "- item one", "- item two", "older", "words", "")]
    # PageUp replaced the whole pane, and its first line of text was on it before:
    # the repeated items seem to have moved up, but only two lines agree on that move.
    assert screen.older_in_view(bar, page)
    # The reply grew and the view followed it: everything moved up by one line.
    followed = bar[1:] + [" █ delta"]
    assert not screen.older_in_view(bar, followed)


def test_the_log_keeps_each_case_as_it_ends_and_logs_pool_into_one_table(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.syspath_prepend(str(BENCH))
    screen = _load("screen")
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    for path, first in ((one, 0.5), (two, 0.7)):
        log = screen.Log(path, ["--runs", "1"])
        hello = screen.Run("hello", first=0.25, shown=0.3)
        log.start(0, hello)
        run = screen.Run("2k", first=first, shown=first + 0.1)
        run.keys["typing in the prompt, idle"] = [float(v) for v in range(1, 51)]
        log.case(0, run, "typing in the prompt, idle")
        log.start(0, run)
    # A third invocation, interrupted during its second key case: the first case is kept.
    three = tmp_path / "three.jsonl"
    log = screen.Log(three, [])
    run = screen.Run("2k")
    run.keys["typing in the prompt, idle"] = [100.0] * 10
    run.missed["up in the groups pane, idle"] = 1
    log.case(0, run, "typing in the prompt, idle")

    records = screen.read_logs([str(one), str(two), str(three)])
    runs = screen.runs_from(records)
    assert [r.first for r in runs["2k"]] == [0.5, 0.7, None]
    assert sorted(len(r.keys["typing in the prompt, idle"]) for r in runs["2k"]) == [10, 50, 50]
    assert "up in the groups pane, idle" not in runs["2k"][2].missed  # that case never ended

    screen.print_report(records, "pooled")
    out = capsys.readouterr().out
    typing = next(line for line in out.splitlines() if "typing in the prompt, idle" in line)
    # 110 presses pooled: the p99 is the interrupted run's 100 ms, the median 28 ms.
    assert "n=110" in typing and "100.0 ms" in typing and "median 28.0" in typing
    # Each start is paired with the hello-world app of its own invocation and run.
    ratio = next(line for line in out.splitlines() if "first useful frame ÷" in line)
    assert "2.00–2.80 per run" in ratio


def test_screen_ab_reports_logged_starts_with_the_ratio_and_its_spread(
    tmp_path, capsys, monkeypatch
):
    """`screen_ab.py --report`: the logged starts of a build at twice the hello-world
    app's times read 2.00× by medians and by geometric means; a build whose starts
    fall in two speeds has a wider resampled spread than one whose starts do not."""
    monkeypatch.syspath_prepend(str(BENCH))  # screen_ab imports _common and screen
    screen_ab = _load("screen_ab")
    log = tmp_path / "ab.jsonl"
    lines = []
    for i in range(9):
        hello = 0.3 + 0.01 * (i % 3)
        two_speeds = 1.4 if i % 2 else 1.0
        lines += [
            {"run": i, "build": "hello-world", "session": "", "first": hello, "shown": hello},
            {"run": i, "build": "steady", "session": "2k", "first": 2 * hello, "shown": 1.0},
            {"run": i, "build": "bimodal", "session": "2k", "first": 2 * hello * two_speeds},
        ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    results, hello = screen_ab._read_logs([str(log)])
    assert len(hello) == 9 and len(results[("steady", "2k")]) == 9
    steady = screen_ab._ratios(results[("steady", "2k")], hello, "first")
    assert steady.startswith("2.00× ±") and "geo 2.00× ±" in steady
    bimodal = screen_ab._ratios(results[("bimodal", "2k")], hello, "first")

    def spread(text: str) -> float:
        return float(text.split("±", 1)[1].split(";")[0])

    assert spread(bimodal) > spread(steady)
    monkeypatch.setattr(sys, "argv", ["screen_ab.py", "--report", str(log)])
    screen_ab.main()
    out = capsys.readouterr().out
    assert "9 run(s) read from the logs" in out and " bimodal | " in out
