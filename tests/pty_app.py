"""The real `slop-tui` command on a pseudo-terminal, as a user runs it: bench/_term.py's
`Term` (a pty read by the pyte terminal emulator), a project folder of its own, and a
configuration whose one provider is the tests' fake server (so any request it makes
is recorded)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def term_module() -> ModuleType:
    """bench/_term.py (the tests skip where pyte is not installed)."""
    pytest.importorskip("pyte")
    if "_term" in sys.modules:
        return sys.modules["_term"]
    spec = importlib.util.spec_from_file_location("_term", BENCH / "_term.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_term"] = module
    spec.loader.exec_module(module)
    return module


# The pty made the program's controlling terminal, as a terminal emulator's shell
# makes it: closing the terminal then sends the program SIGHUP.
CONTROLLING = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def start(  # type: ignore[no-untyped-def]
    tmp_path: Path, base_url: str, *, cols: int = 100, rows: int = 30, controlling: bool = False
):
    """`slop-tui` started in `tmp_path/project` on a terminal of its own, its prompt
    shown and the side panes filled; the `Term`. `controlling`: the terminal is the
    program's controlling terminal (a hang-up reaches it)."""
    term_mod = term_module()
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    config.write_text(
        'default_provider = "fake"\n\n[providers.fake]\nkind = "openai"\n'
        f'base_url = "{base_url}"\nmodel = "fake-model"\napi_key = "sk-test"\n'
    )
    env = term_mod.environment(
        SLOP_CONFIG=str(config),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    argv = [str(Path(sys.executable).parent / "slop-tui")]
    if controlling:
        argv = [sys.executable, "-c", CONTROLLING, *argv]
    term = term_mod.Term(argv, env=env, cwd=str(project), cols=cols, rows=rows)
    try:
        assert term.pump(lambda t: t.find("Type a prompt") is not None, 60.0) is not None
        time.sleep(0.5)  # the side panes filled: keys land as they will later
    except BaseException:
        term.close()
        raise
    return term


def wait_for_exit(term, timeout: float = 30.0) -> int | None:  # type: ignore[no-untyped-def]
    """The program's exit code once it has ended (None: still running at `timeout`)."""
    deadline = time.monotonic() + timeout
    while term.proc.poll() is None and time.monotonic() < deadline:
        try:
            term.proc.wait(0.2)
        except subprocess.TimeoutExpired:
            term.pump(lambda t: False, 0.05)  # what it writes meanwhile is read
    return term.proc.poll()
