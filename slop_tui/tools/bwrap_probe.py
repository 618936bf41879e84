"""Whether bubblewrap can build the sandbox here: one run of `bwrap ... true`.

The probe is a process (~10 ms here, tens of ms on a loaded machine). The
workspace command starts it before its own imports (`start_early`, cli.py), so
it runs on another core while Textual is imported, and the app's check of
whether the sandbox can run (`unavailable`, beside the ledger's open) takes its
result instead of starting and waiting for a second one. The result is the
same either way: the same command, the same timeout counted from its start,
the same sentences; it is kept for the process (`verdict`), so the sandbox
built later (`slop_tui/tools/sandbox.py`'s `detect`) stands on the same answer
as the header. A probe nobody takes (the sandbox turned off, another bwrap
found) is let finish and reaped by `discard_early`.

Standard library only: it is imported before the workspace's modules.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Mapping
from functools import lru_cache

PROBE_TIMEOUT = 5.0

# bwrap path -> (the probe started for it, when it started).
_early: dict[str, tuple[subprocess.Popen[bytes], float]] = {}


def wanted(env: Mapping[str, str]) -> str:
    """The bubblewrap command `env` names (`SLOP_BWRAP`, default `bwrap`)."""
    return env.get("SLOP_BWRAP") or "bwrap"


def find(env: Mapping[str, str]) -> str | None:
    """The path of that command on `env`'s PATH, or None."""
    return shutil.which(wanted(env), path=env.get("PATH"))


def probe_argv(bwrap: str) -> list[str]:
    return [bwrap, "--die-with-parent", "--cap-drop", "ALL", "--unshare-pid", "--unshare-net",
            "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"]  # fmt: skip


def start_early(bwrap: str | None) -> bool:
    """Start the probe of `bwrap` (a resolved path; None: nothing) now, for `probe` to
    take later; whether one was started."""
    if bwrap is None or bwrap in _early:
        return False
    try:
        proc = subprocess.Popen(
            probe_argv(bwrap),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError:
        return False  # `probe` runs it again and says why
    _early[bwrap] = (proc, time.monotonic())
    return True


def unavailable(mode: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """Whether the sandbox can run here: (bwrap's path, None), or (None, why not, one
    line) when `[tools] sandbox` is "off", bwrap is not installed or its probe failed.
    The sandbox (`slop_tui/tools/sandbox.py`'s `detect`) is built on this answer; the
    app's header shows it before the sandbox is built."""
    if mode == "off":
        discard_early()
        return None, 'turned off by [tools] sandbox = "off"'
    found = find(env)
    if found is None:
        return None, f"{wanted(env)} is not installed (Debian: apt-get install bubblewrap)"
    why = verdict(found)
    return (found, None) if why is None else (None, why)


@lru_cache(maxsize=8)
def verdict(bwrap: str) -> str | None:
    """`probe(bwrap)`, once per process and bwrap path: later askers get its answer."""
    return probe(bwrap)


def probe(bwrap: str) -> str | None:
    """None when `bwrap` can build the sandbox here, else why not (one line)."""
    try:
        early = _early.pop(bwrap, None)
        if early is None:
            done = subprocess.run(
                probe_argv(bwrap),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT,
            )
            returncode, stderr = done.returncode, done.stderr
        else:
            returncode, stderr = _result(*early)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} cannot run: {exc}"
    if returncode != 0:
        err = stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{bwrap} failed: {err[-1] if err else f'exit code {returncode}'}"
    return None


def _result(proc: subprocess.Popen[bytes], started: float) -> tuple[int, bytes]:
    """The early probe's exit code and error output, within the timeout counted from
    its start (past it killed and reaped, as `subprocess.run` does)."""
    try:
        _, stderr = proc.communicate(timeout=max(0.0, started + PROBE_TIMEOUT - time.monotonic()))
    except subprocess.TimeoutExpired:
        _end(proc)
        raise subprocess.TimeoutExpired(proc.args, PROBE_TIMEOUT) from None
    return proc.returncode, stderr


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def discard_early() -> None:
    """Reap the probes nobody took. Each is let finish (a few ms; killed only past the
    timeout, as `probe` does): bwrap killed while it sets the sandbox up can leave its
    child running."""
    while _early:
        _, (proc, started) = _early.popitem()
        with contextlib.suppress(subprocess.TimeoutExpired):
            _result(proc, started)
