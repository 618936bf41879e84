"""The map's watcher process (`repomap/watcher_process.py`, `watcher_client.py`): a real
process watching real files while no app runs, asked by the next map what changed.

Each test that starts one stops it (`keepers`); conftest's `_no_keeper_left` fails a
test after which one still runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slop_tui.context.tokens import default_counter
from slop_tui.repomap import watcher_client as wc
from slop_tui.repomap.map import NOTIFY_BURST, RepoMap
from tests.conftest import RUN_MARK, live_keepers, stray_watchers
from tests.fault_support import ROOT
from tests.workspace_fixtures import open_workspace

BUDGET = 2048


def count(text: str) -> int:
    return default_counter().base_count(text)


def make_project(root: Path, files: int = 6) -> Path:
    (root / ".slop").mkdir(parents=True)
    for i in range(files):
        p = root / f"pkg{i % 2}" / f"mod_{i}.py"
        p.parent.mkdir(exist_ok=True)
        nxt = (i + 1) % files
        p.write_text(
            f"from pkg import helper_{nxt}\n\ndef helper_{i}(x):\n    return helper_{nxt}(x)\n"
        )
    return root


def rendered(rm: RepoMap) -> str:
    return rm.render(BUDGET, count).text


def cold_text(root: Path) -> tuple[str, list[str]]:
    """The map a build with no store gives of the same files."""
    rm = RepoMap(root, None)
    rm.refresh()
    try:
        return rendered(rm), list(rm.paths)
    finally:
        rm.close()


def wait_for(pred, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Keepers:
    """Watcher processes this test started, stopped at its end."""

    def __init__(self) -> None:
        self.roots: list[Path] = []

    def start(self, root: Path, idle: float = 120.0) -> int:
        self.roots.append(root)
        wc.start(root, idle)
        wait_for(lambda: wc.ask(root, None) is not None, "the watcher's first answer")
        pid = wc.running_pid(root)
        assert pid is not None
        return pid

    def stop_all(self) -> None:
        for root in self.roots:
            assert wc.stop(root), f"the watcher of {root} did not stop"


@pytest.fixture
def keepers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Keepers]:
    monkeypatch.setenv("SLOP_REPO_WATCHER", "on")
    k = Keepers()
    try:
        yield k
    finally:
        k.stop_all()


def session_with_token(root: Path) -> None:
    """An app's session: a watching map, the watcher process started after its first
    look, a later look takes the watcher's token; closing stores it with the stamps."""
    rm = RepoMap(root, root / ".slop", watch=True, keeper=True)
    rm.refresh()
    assert rm.told == "all"
    rendered(rm)
    rm.refresh()
    assert rm._token is not None
    rm.close()


def next_start(root: Path, watch: bool = True) -> RepoMap:
    rm = RepoMap(root, root / ".slop", watch=watch, keeper=True)
    rm.refresh()
    return rm


def full_check_gives_the_right_map(root: Path) -> None:
    """The next start looks at every file, parses the one changed file, and its map is
    a cold build's."""
    rm = next_start(root)
    try:
        assert rm.told == "all" and rm.parsed == 1
        assert rendered(rm) == cold_text(root)[0]
    finally:
        rm.close()


# --- a change made while no app runs -----------------------------------------------------


def test_a_change_made_while_no_app_runs_is_seen_without_a_full_check(
    tmp_path: Path, keepers: Keepers
) -> None:
    root = make_project(tmp_path / "p")
    rm = RepoMap(root, root / ".slop", watch=True, keeper=True)
    rm.refresh()
    keepers.start(root)
    rm.refresh()
    rm.close()
    # No app runs: one file gets a new function.
    changed = root / "pkg1" / "mod_3.py"
    changed.write_text(changed.read_text() + "\n\ndef added_while_closed(y):\n    return y\n")
    rm = next_start(root)
    try:
        assert (rm.told, rm.looked, rm.parsed) == ("keeper", 1, 1)
        assert rendered(rm) == cold_text(root)[0]
        assert "added_while_closed" in rm.render(8192, count, (), "added_while_closed").text
        assert rm.watching  # the app's own watcher goes on from there
    finally:
        rm.close()
    # `slop-tui ask` looks once, without a watcher of its own: the same.
    changed.write_text(changed.read_text() + "\n\ndef added_again(y):\n    return y\n")
    rm = next_start(root, watch=False)
    try:
        assert (rm.told, rm.looked, rm.parsed) == ("keeper", 1, 1)
        assert rendered(rm) == cold_text(root)[0]
    finally:
        rm.close()
    # Nothing changed since: a start stats no file at all.
    rm = next_start(root)
    assert (rm.told, rm.looked, rm.parsed) == ("keeper", 0, 0)
    rm.close()


# --- every failure falls back to the full check -------------------------------------------


def test_a_restarted_watcher_answers_unknown_and_the_full_check_gives_the_right_map(
    tmp_path: Path, keepers: Keepers
) -> None:
    root = make_project(tmp_path / "p")
    keepers.start(root)
    session_with_token(root)
    assert wc.stop(root)
    (root / "pkg0" / "mod_0.py").write_text("def while_no_watcher():\n    return 0\n")
    keepers.start(root)  # another instance: the stored token is not its own
    full_check_gives_the_right_map(root)


def test_a_burst_of_changes_is_an_overflow_and_the_full_check_follows(
    tmp_path: Path, keepers: Keepers
) -> None:
    root = make_project(tmp_path / "p")
    notes = root / "notes"
    notes.mkdir()
    for i in range(NOTIFY_BURST + 10):
        (notes / f"n{i}.txt").write_text("x")
    keepers.start(root)
    session_with_token(root)
    for i in range(NOTIFY_BURST + 10):
        (notes / f"n{i}.txt").write_text("changed")
    (root / "pkg1" / "mod_5.py").write_text("def in_the_burst():\n    return 5\n")
    full_check_gives_the_right_map(root)


def test_no_watcher_and_a_stale_socket_fall_back_to_the_full_check(
    tmp_path: Path, keepers: Keepers
) -> None:
    root = make_project(tmp_path / "p")
    pid = keepers.start(root)
    session_with_token(root)
    os.kill(pid, signal.SIGKILL)  # dies without removing its socket
    wait_for(lambda: wc.running_pid(root) is None, "the watcher's end")
    folder = wc.runtime_dir()
    assert folder is not None
    sock = wc.socket_path(root, folder)
    assert sock is not None and sock.exists()
    (root / "pkg0" / "mod_4.py").write_text("def after_the_crash():\n    return 4\n")
    full_check_gives_the_right_map(root)
    sock.unlink()  # no socket at all
    (root / "pkg0" / "mod_4.py").write_text("def no_socket():\n    return 4\n")
    rm = next_start(root)
    assert rm.told == "all" and rm.parsed == 1
    rm.close()
    # A new watcher replaces a stale socket file.
    sock.write_bytes(b"")
    keepers.start(root)
    assert wc.ask(root, None) is not None


@pytest.mark.parametrize(
    "reply",
    [
        b"not json\n",
        b'{"v": 1, "token": 7, "changed": []}\n',
        b'{"v": 2, "token": "x.1", "changed": []}\n',
        b'{"v": 1, "token": "x.1", "changed": "pkg0/mod_0.py"}\n',
        b'{"v": 1, "token": "x.1", "changed": [1, 2]}\n',
        b"",
        None,  # no answer at all: the client's time runs out
    ],
)
def test_a_garbled_or_missing_answer_falls_back_to_the_full_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reply: bytes | None
) -> None:
    monkeypatch.setenv("SLOP_REPO_WATCHER", "on")
    monkeypatch.setattr(wc.ask, "__defaults__", (0.5, None))
    root = make_project(tmp_path / "p")
    with FakeKeeper(root, lambda _req: b'{"v": 1, "token": "x.1", "changed": null}\n'):
        session_with_token(root)
    (root / "pkg1" / "mod_1.py").write_text("def behind_a_liar():\n    return 1\n")
    with FakeKeeper(root, lambda _req: reply):
        full_check_gives_the_right_map(root)


def test_paths_outside_the_project_are_dropped_from_an_answer() -> None:
    line = json.dumps(
        {
            "v": 1,
            "token": "a.3",
            "changed": ["/etc/passwd", "../../x.py", "a/../../b", "ok/file.py", "a\0b", ""],
        }
    ).encode()
    answer = wc.parse_answer(line)
    assert answer is not None and answer.changed == ["ok/file.py"]
    assert wc.parse_answer(b'{"v": 1, "token": "' + b"t" * 200 + b'", "changed": null}') is None


class FakeKeeper:
    """A process-less stand-in on the project's socket answering `reply(request)` (None:
    it never answers)."""

    def __init__(self, root: Path, reply) -> None:
        folder = wc.runtime_dir(create=True)
        assert folder is not None
        self.path = wc.socket_path(root, folder)
        assert self.path is not None
        self.reply = reply
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        self.server.listen(4)
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self.server.settimeout(0.1)
        while not self.stop:
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                request = conn.recv(4096)
                out = self.reply(request)
                if out is None:
                    time.sleep(1.0)
                else:
                    conn.sendall(out)

    def __enter__(self) -> FakeKeeper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop = True
        self.thread.join()
        self.server.close()
        self.path.unlink()


# --- lifetime ----------------------------------------------------------------------------


def _foreground(root: Path, idle: float) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slop_tui.repomap.watcher_process",
            str(root),
            str(idle),
            "--foreground",
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
    )


def test_one_watcher_a_project_a_second_start_exits_quietly(
    tmp_path: Path, keepers: Keepers
) -> None:
    root = make_project(tmp_path / "p")
    pid = keepers.start(root)
    second = _foreground(root, 60)
    assert second.wait(timeout=60) == 0
    assert wc.running_pid(root) == pid
    assert wc.ask(root, None) is not None


def test_it_exits_when_idle_once_no_app_runs_when_its_folder_goes_and_on_sigterm(
    tmp_path: Path,
) -> None:
    idle = make_project(tmp_path / "idle")
    app = wc.hold(idle)  # an app runs: the watcher is not idle
    assert app is not None
    proc = _foreground(idle, 1.0)
    wait_for(lambda: wc.ask(idle, None) is not None, "the first answer")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=3.5)
    os.close(app)  # the app exits: idle from then, no request comes
    assert proc.wait(timeout=30) == 0
    assert wc.running_pid(idle) is None
    folder = wc.runtime_dir()
    assert folder is not None and not wc.socket_path(idle, folder).exists()

    gone = make_project(tmp_path / "gone")
    proc = _foreground(gone, 600)
    wait_for(lambda: wc.ask(gone, None) is not None, "the first answer")
    shutil.rmtree(gone / ".slop")
    assert proc.wait(timeout=30) == 0

    termed = make_project(tmp_path / "termed")
    proc = _foreground(termed, 600)
    wait_for(lambda: wc.ask(termed, None) is not None, "the first answer")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert not wc.socket_path(termed, folder).exists()
    assert live_keepers(folder) == []


def test_the_runtime_folder_must_be_the_users_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv("SLOP_RUNTIME_DIR", str(shared))
    assert wc.runtime_dir() is None
    link = tmp_path / "link"
    private = Path(tempfile.mkdtemp(prefix="rt-"))  # short: a socket path has ~107 bytes
    request.addfinalizer(lambda: shutil.rmtree(private, ignore_errors=True))
    link.symlink_to(private)
    monkeypatch.setenv("SLOP_RUNTIME_DIR", str(link))
    assert wc.runtime_dir() is None
    monkeypatch.setenv("SLOP_RUNTIME_DIR", str(private))
    assert wc.runtime_dir() == private
    # Inside the project, the sandboxed shell could reach it: not used.
    assert wc.socket_path(private.parent, private) is None
    assert wc.socket_path(tmp_path, private) is not None
    assert wc.socket_path(tmp_path, private / ("x" * 80)) is None  # too long a path
    root = make_project(tmp_path / "p")
    monkeypatch.setenv("SLOP_RUNTIME_DIR", str(shared))
    assert wc.ask(root, None) is None


def test_idle_setting_and_the_switch() -> None:
    assert wc.idle_seconds({}, {}) == wc.DEFAULT_IDLE_MINUTES * 60
    assert wc.idle_seconds({"repo_watcher_idle": 0}, {}) == 0
    assert wc.idle_seconds({"repo_watcher_idle": 2.5}, {}) == 150
    assert wc.idle_seconds({"repo_watcher_idle": 10}, {"SLOP_REPO_WATCHER": "off"}) == 0


# --- who starts one -------------------------------------------------------------------------


async def test_the_app_starts_one_after_its_first_look_and_ask_does_not(
    tmp_path: Path, keepers: Keepers
) -> None:
    root = make_project(tmp_path / "p")
    ws = await open_workspace(root)
    ws.watch_files = False  # `slop-tui ask` / `exec`: one look, no watcher started
    try:
        await ws.repo_sources([], [], 1_000_000)
        ws.keep_watching()
    finally:
        await ws.close()
    assert wc.running_pid(root) is None
    ws = await open_workspace(root)  # the app
    try:
        assert wc.running_pid(root) is None
        keepers.roots.append(root)
        await ws.repo_sources([], [], 1_000_000)
        wait_for(lambda: wc.ask(root, None) is not None, "the app's watcher")
        pid = wc.running_pid(root)
        await ws.repo_sources([], [], 1_000_000)  # once: it runs
        folder = wc.runtime_dir()
        assert folder is not None and wc.held(root, folder)  # the app runs
    finally:
        await ws.close()
    assert not wc.held(root, folder)
    assert wc.running_pid(root) == pid  # it outlives the app


async def test_repo_watcher_idle_0_starts_none(tmp_path: Path, keepers: Keepers) -> None:
    root = make_project(tmp_path / "p")
    (tmp_path / "user.toml").write_text("[context]\nrepo_watcher_idle = 0\n")
    ws = await open_workspace(root, env={"SLOP_CONFIG": str(tmp_path / "user.toml")})
    try:
        await ws.repo_sources([], [], 1_000_000)
        ws.keep_watching()
        assert ws.repo_map()._keeper is False
    finally:
        await ws.close()
    time.sleep(0.3)
    assert wc.running_pid(root) is None


def test_a_git_project_is_not_listed_again_unless_its_index_or_ignores_changed(
    tmp_path: Path, keepers: Keepers
) -> None:
    root = make_project(tmp_path / "p")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    keepers.start(root)
    session_with_token(root)
    (root / "pkg1" / "mod_1.py").write_text("def edited_in_git():\n    return 1\n")
    rm = next_start(root)
    try:
        assert (rm.told, rm.looked, rm.parsed) == ("keeper", 1, 1)
        assert rendered(rm) == cold_text(root)[0]
    finally:
        rm.close()
    (root / ".gitignore").write_text("pkg0/\n")
    rm = next_start(root)
    try:
        assert not any(p.startswith("pkg0/") for p in rm.paths)
        assert rm.paths == cold_text(root)[1]
        assert rendered(rm) == cold_text(root)[0]
    finally:
        rm.close()


def test_a_watcher_this_run_starts_outside_its_folder_is_found_as_a_stray(tmp_path):
    """conftest's check for a watcher that a process of the run started with another
    runtime folder (the user's, when an environment lost `SLOP_RUNTIME_DIR`): it finds
    that one and not one in the run's own folder."""
    run_folder = Path(os.environ[RUN_MARK])
    elsewhere = tmp_path / "runtime"
    elsewhere.mkdir(mode=0o700)
    root = make_project(tmp_path / "project")
    proc = subprocess.Popen(
        [sys.executable, "-m", "slop_tui.repomap.watcher_process", str(root), "600"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "SLOP_RUNTIME_DIR": str(elsewhere)},
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: proc.pid in stray_watchers(run_folder), "the stray found")
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.pid not in stray_watchers(run_folder)
    inside = _foreground(make_project(tmp_path / "inside"), 600)
    try:
        wait_for(lambda: inside.pid in live_keepers(run_folder), "the watcher in the folder")
        assert inside.pid not in stray_watchers(run_folder)
    finally:
        inside.kill()
        inside.wait(timeout=30)
