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
from slop_tui.tools.sandbox import detect


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
    bwrap_probe.verdict.cache_clear()


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


@pytest.mark.parametrize(
    ("body", "available"),
    [("exit 0", True), ('echo "bwrap: no user namespaces" >&2; exit 1', False)],
)
def test_the_header_s_answer_and_the_sandbox_built_later_agree_on_one_probe(
    tmp_path, monkeypatch, body, available
) -> None:
    """The app's header says whether the sandbox can run before the sandbox is built
    (`unavailable`); the sandbox built later takes the same probe's verdict."""
    bwrap = fake_bwrap(tmp_path, body)
    env = {"SLOP_BWRAP": bwrap, "PATH": os.environ.get("PATH", "")}
    runs: list[object] = []
    real_run = subprocess.run

    def counted_run(*args, **kw):
        runs.append(args)
        return real_run(*args, **kw)

    monkeypatch.setattr(subprocess, "run", counted_run)
    found, why = bwrap_probe.unavailable("auto", env)
    box = detect(env=env)
    assert (found is not None) is available is box.available and len(runs) == 1
    assert box.reason == ("bubblewrap" if available else why) and (why is None) is available


def test_the_sandbox_turned_off_or_missing_needs_no_probe(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("probed"))
    env = {"SLOP_BWRAP": str(tmp_path / "no-such-bwrap"), "PATH": ""}
    assert bwrap_probe.unavailable("auto", env) == (
        None,
        f"{tmp_path / 'no-such-bwrap'} is not installed (Debian: apt-get install bubblewrap)",
    )
    assert bwrap_probe.unavailable("off", env)[0] is None
    assert not detect("off", env).available and "turned off" in detect("off", env).reason
