"""The sandbox's probe started before the workspace's imports (slop_tui/tools/bwrap_probe.py):
the app takes its result, the same one a probe of its own gives, and no process is
left behind."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from slop_tui.tools import bwrap_probe
from slop_tui.tools.sandbox import _probe, detect


def fake_bwrap(tmp_path: Path, body: str, name: str = "bwrap") -> str:
    """A stand-in for bwrap: a shell script (it is given bwrap's arguments)."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture(autouse=True)
def no_probe_left():
    yield
    bwrap_probe.discard_early()
    _probe.cache_clear()


def test_the_early_probe_s_result_is_the_one_a_probe_of_its_own_gives(
    tmp_path, monkeypatch
) -> None:
    bwrap = fake_bwrap(tmp_path, 'echo "bwrap: setting up uid map: Permission denied" >&2; exit 1')
    own = bwrap_probe.probe(bwrap)  # no early probe: a process of its own
    assert own == f"{bwrap} failed: bwrap: setting up uid map: Permission denied"
    assert bwrap_probe.start_early(bwrap)
    ran: list[object] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    assert bwrap_probe.probe(bwrap) == own
    assert ran == []  # the early one's result, no second process
    assert bwrap_probe._early == {}


def test_the_sandbox_takes_the_early_probe(tmp_path, monkeypatch) -> None:
    bwrap = fake_bwrap(tmp_path, "exit 0")
    env = {"SLOP_BWRAP": bwrap, "PATH": os.environ.get("PATH", "")}
    assert bwrap_probe.start_early(bwrap)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("probed twice"))
    box = detect(env=env)
    assert box.available and box.bwrap == bwrap


def test_an_early_probe_past_the_timeout_is_killed_and_reported_as_one_of_its_own(
    tmp_path, monkeypatch
) -> None:
    bwrap = fake_bwrap(tmp_path, "exec sleep 30")
    monkeypatch.setattr(bwrap_probe, "PROBE_TIMEOUT", 0.3)
    own = bwrap_probe.probe(bwrap)
    assert bwrap_probe.start_early(bwrap)
    proc = bwrap_probe._early[bwrap][0]
    started = time.monotonic()
    assert bwrap_probe.probe(bwrap) == own
    assert own.startswith(f"{bwrap} cannot run: ") and "timed out after 0.3 seconds" in own
    assert time.monotonic() - started < 5 and proc.returncode is not None  # killed, reaped


def test_a_probe_nobody_takes_is_let_finish_and_reaped(tmp_path) -> None:
    """Not killed while it runs (bwrap killed while it sets the sandbox up can leave
    its child running): let finish, then reaped."""
    done = tmp_path / "done"
    bwrap = fake_bwrap(tmp_path, f"sleep 0.2; touch {done}")
    assert bwrap_probe.start_early(bwrap)
    proc = bwrap_probe._early[bwrap][0]
    bwrap_probe.discard_early()
    assert done.exists() and proc.returncode == 0 and bwrap_probe._early == {}


def test_a_probe_nobody_takes_is_ended_past_the_timeout(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(bwrap_probe, "PROBE_TIMEOUT", 0.3)
    bwrap = fake_bwrap(tmp_path, "exec sleep 30")
    assert bwrap_probe.start_early(bwrap)
    proc = bwrap_probe._early[bwrap][0]
    assert detect("off").reason.startswith("turned off")  # the sandbox off: not taken
    assert bwrap_probe._early == {} and proc.returncode is not None


def test_the_workspace_command_probes_before_its_imports_and_leaves_no_process(
    tmp_path, monkeypatch
) -> None:
    from slop_tui import cli
    from slop_tui.ui import app as ui_app

    bwrap = fake_bwrap(tmp_path, "exec sleep 30")
    monkeypatch.setenv("SLOP_BWRAP", bwrap)
    monkeypatch.setattr(bwrap_probe, "PROBE_TIMEOUT", 0.3)
    seen: list[subprocess.Popen] = []

    def run_app(**kw) -> int:
        seen.extend(proc for proc, _ in bwrap_probe._early.values())
        return 0

    monkeypatch.setattr(ui_app, "run_app", run_app)
    monkeypatch.setattr(cli, "_run_app", lambda args: run_app())
    assert cli._run_tui(cli.build_parser().parse_args(["--db", str(tmp_path / "x.db")])) == 0
    assert len(seen) == 1 and seen[0].args[0] == bwrap  # running while the app starts
    assert seen[0].returncode is not None and bwrap_probe._early == {}  # not taken: reaped
