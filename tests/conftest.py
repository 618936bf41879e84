"""Shared fixtures: the fake LLM server, a loopback-only network guard, snapshot layout,
and the markers every test gets from what it uses (docs/testing.md)."""

from __future__ import annotations

import atexit
import inspect
import ipaddress
import os
import shutil
import socket
import ssl
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType
from typing import Any

import pytest
import pytest_textual_snapshot as pts

from tests.fakeserver import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent

# --- The user cache: one folder of the test run's own ---------------------------------
# The commands write and remove files in `$XDG_CACHE_HOME/slop-tui` (slop_tui/codecache.py;
# emptying the trash removes the answers' kept lines): the suite never touches the
# user's. Set before any test (and inherited by pytest-xdist's workers and every
# subprocess); removed at the end of the process that made it.
if not os.environ.get("SLOP_TESTS_CACHE"):
    _cache = tempfile.mkdtemp(prefix="slop-tests-cache-")
    os.environ["SLOP_TESTS_CACHE"] = os.environ["XDG_CACHE_HOME"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

# --- SVG snapshots in <repo>/snapshots/<test_module>/<test>.svg --------------------------
# snap_compare looks SVGImageExtension up by its module-global name at call time, so
# swapping the class here is enough (providers_testing.md §1.1). Because that folder is
# outside tests/, partial runs need --snapshot-warn-unused (already in pyproject addopts).

SNAPSHOT_ROOT = ROOT / "snapshots"


class _TopLevelSVG(pts.SVGImageExtension):
    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(SNAPSHOT_ROOT / Path(test_location.filepath).stem)


pts.SVGImageExtension = _TopLevelSVG


# --- Textual's fixes, as the app installs them at start --------------------------------


@pytest.fixture(scope="session", autouse=True)
def _textual_fixes() -> None:
    """Widgets tested in apps of their own draw with the patches `SlopApp()` installs."""
    from slop_tui.ui import textual_fixes

    textual_fixes.install()


# --- network guard ----------------------------------------------------------------------

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


class NetworkBlockedError(ConnectionRefusedError):
    """A test tried to reach a host other than loopback."""


def _is_local_host(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    host = host.strip("[]").split("%", 1)[0]
    if host == "" or host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # a DNS name: resolving it would already leave the machine
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


@dataclass
class NetworkGuard:
    """Records refused attempts so a test that swallows the error still fails."""

    blocked: list[str] = field(default_factory=list)

    def check(self, family: int, address: Any) -> None:
        if family not in (socket.AF_INET, socket.AF_INET6):
            return  # AF_UNIX and friends never leave the machine
        host = address[0] if isinstance(address, tuple) and address else address
        if not _is_local_host(host):
            self.blocked.append(repr(address))
            raise NetworkBlockedError(
                f"network guard: tests may only connect to loopback, not {address!r}"
            )


@pytest.fixture(scope="session", autouse=True)
def network_guard() -> Iterator[NetworkGuard]:
    guard = NetworkGuard()
    orig_connect = socket.socket.connect
    orig_connect_ex = socket.socket.connect_ex
    orig_create_connection = socket.create_connection

    def connect(self: socket.socket, address: Any) -> None:
        guard.check(self.family, address)
        return orig_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        guard.check(self.family, address)
        return orig_connect_ex(self, address)

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        # Checked before getaddrinfo so a stray hostname fails fast instead of waiting on DNS.
        guard.check(socket.AF_INET, address)
        return orig_create_connection(address, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket.socket, "connect_ex", connect_ex)
        mp.setattr(socket, "create_connection", create_connection)
        _share_ssl_context(mp)
        yield guard


def _share_ssl_context(mp: pytest.MonkeyPatch) -> None:
    """Build each CA-loaded client SSL context once per session, not once per SDK client.

    Loading the CA bundle costs ~50 ms, and an OpenAI plus a Gemini client load it three
    times (google-genai builds two contexts itself), i.e. ~150 ms of setup per test. With
    the guard above no test can make a TLS connection (the fake server is plain HTTP on
    loopback), and the SDKs only mutate a context when they open a TLS connection, so
    sharing is safe. Server-side contexts (Purpose.CLIENT_AUTH) are left alone.
    """
    original = ssl.create_default_context
    cache: dict[tuple[Any, ...], ssl.SSLContext] = {}

    def create_default_context(
        purpose: ssl.Purpose = ssl.Purpose.SERVER_AUTH,
        *,
        cafile: Any = None,
        capath: Any = None,
        cadata: Any = None,
    ) -> ssl.SSLContext:
        if purpose != ssl.Purpose.SERVER_AUTH:
            return original(purpose, cafile=cafile, capath=capath, cadata=cadata)
        key = (cafile, capath, cadata)
        if key not in cache:
            cache[key] = original(purpose, cafile=cafile, capath=capath, cadata=cadata)
        return cache[key]

    mp.setattr(ssl, "create_default_context", create_default_context)
    try:
        import httpcore2
    except ImportError:  # the SDKs moved off httpx2; the stdlib patch still applies
        return
    original_httpcore = httpcore2.default_ssl_context
    shared: dict[bool, ssl.SSLContext] = {}

    def default_ssl_context(*, _trust_env: bool = True) -> ssl.SSLContext:
        if _trust_env not in shared:
            shared[_trust_env] = original_httpcore(_trust_env=_trust_env)
        return shared[_trust_env]

    mp.setattr(httpcore2, "default_ssl_context", default_ssl_context)


@pytest.fixture(autouse=True)
def _fail_on_blocked_network(network_guard: NetworkGuard) -> Iterator[None]:
    network_guard.blocked.clear()
    yield
    if network_guard.blocked:
        attempts = ", ".join(network_guard.blocked)
        network_guard.blocked.clear()
        pytest.fail(f"test tried to reach the network: {attempts}")


# --- fake LLM server --------------------------------------------------------------------

# Anything that could point an SDK or the app at a real service or a real user file.
_ENV = (
    "GEMINI_API_VERSION",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "OPENAI_MODEL",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GEMINI_MODEL",
    "GEMINI_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_HTTP_CLIENT",
    "SLOP_DB",
    "SLOP_SESSION",
    "SLOP_CONFIG",
    # httpx honours these even for 127.0.0.1, which would send the fake's traffic elsewhere.
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


@pytest.fixture(scope="session")
def _fake_llm_session() -> Iterator[FakeLLMServer]:
    # One server per session: stopping one waits out the 50 ms poll interval.
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def fake_llm(
    _fake_llm_session: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeLLMServer]:
    """The shared fake server, emptied for this test; fails the test on leftover script."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    srv = _fake_llm_session
    srv.reset()
    yield srv
    pending, unscripted = srv.pending, list(srv.unscripted)
    srv.reset()
    assert pending == 0, f"{pending} scripted replies were never requested"
    assert not unscripted, "requests with no scripted reply: " + ", ".join(
        f"{r.method} {r.path}" for r in unscripted
    )


# --- markers from what a test uses --------------------------------------------------------
# Every test is marked by what it reaches, so a new test needs no decorator:
#   snapshot    uses the snap_compare fixture (an SVG in snapshots/);
#   ui          runs a Textual app (run_test / run_async / snap_compare);
#   subprocess  starts a Python process (the CLI, a fault child, an import check);
#   slow        listed in tests/slow_tests.txt (measured with --durations).
# What a test uses is read from the compiled code of the test, its fixtures and every
# function or class of the tests package they name (class _Reach).

SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def _test_helper(obj: object) -> bool:
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return False
    return (getattr(obj, "__module__", "") or "").split(".")[0] in ("tests", "conftest")


def _code_names(code: CodeType) -> set[str]:
    """The global and attribute names a code object and its nested functions use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _code_names(const)
    return names


class _Reach:
    """The names a test reaches: its function, its fixtures and, transitively, every
    function or class of the tests package they name (read from the compiled code)."""

    def __init__(self) -> None:
        self._cache: dict[object, tuple[set[str], list[object]]] = {}

    def _read(self, obj: Any) -> tuple[set[str], list[object]]:
        if obj not in self._cache:
            names: set[str] = set()
            if inspect.isclass(obj):
                scope = vars(sys.modules[obj.__module__]) if obj.__module__ in sys.modules else {}
                for member in vars(obj).values():
                    member = getattr(member, "__func__", getattr(member, "fget", member))
                    if inspect.isfunction(member):
                        names |= _code_names(member.__code__)
            else:
                scope = obj.__globals__
                names = _code_names(obj.__code__)
            refs: list[object] = []
            for name in names:
                ref = scope.get(name)
                if inspect.ismodule(ref) and ref.__name__.startswith("tests."):
                    # `from tests import test_app` then `test_app.started(...)`
                    refs += [vars(ref)[n] for n in names if _test_helper(vars(ref).get(n))]
                elif _test_helper(ref):
                    refs.append(ref)
            self._cache[obj] = (names, refs)
        return self._cache[obj]

    def names(self, roots: list[object]) -> set[str]:
        seen: set[int] = set()
        found: set[str] = set()
        stack = list(roots)
        while stack:
            obj = inspect.unwrap(stack.pop())  # the function behind a decorator's wrapper
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            names, refs = self._read(obj)
            found |= names
            stack.extend(refs)
        return found


def _slow_ids() -> set[str]:
    if not SLOW_LIST.exists():
        return set()
    lines = (line.split("#", 1)[0].strip() for line in SLOW_LIST.read_text().splitlines())
    return {line for line in lines if line}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reach = _Reach()
    slow = _slow_ids()
    for item in items:
        fn = getattr(item, "function", None)
        if fn is None:
            continue
        roots: list[object] = [fn]
        info = getattr(item, "_fixtureinfo", None)
        for defs in info.name2fixturedefs.values() if info else ():
            func = defs[-1].func
            if _test_helper(inspect.unwrap(func)):
                roots.append(func)
        names = reach.names(roots)
        snapshot = "snap_compare" in item.fixturenames
        if snapshot:
            item.add_marker(pytest.mark.snapshot)
        if snapshot or {"run_test", "run_async"} & names:
            item.add_marker(pytest.mark.ui)
        if {"sys", "executable"} <= names:
            item.add_marker(pytest.mark.subprocess)
        base = item.nodeid.split("[", 1)[0]
        if item.nodeid in slow or base in slow:
            item.add_marker(pytest.mark.slow)


# --- no stray `:memory:` file -------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_memory_file() -> Iterator[None]:
    """Fail the test during which a file named `:memory:` appears at the repository root
    (SQLite's in-memory name taken as a path; the ledger refuses it)."""
    stray = ROOT / ":memory:"
    before = stray.exists()
    yield
    if not before and stray.exists():
        pytest.fail(f"a file named ':memory:' appeared at {ROOT} during this test")


# --- the repository map's watcher process ---------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def _keeper_runtime() -> Iterator[Path]:
    """No test starts the map's watcher process (`repomap.watcher_process`) unless it
    turns it on (`SLOP_REPO_WATCHER`); one a test starts has its socket in a folder of
    this run's own, never the user's."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="slop-rt-"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLOP_REPO_WATCHER", "off")
        mp.setenv("SLOP_RUNTIME_DIR", str(folder))
        mp.setenv(RUN_MARK, str(folder))
        yield folder
    shutil.rmtree(folder, ignore_errors=True)


# Set for the whole run (not a SLOP_ name: code that drops slop-tui's own variables from an
# environment keeps it), so a watcher process started by this run's processes is known by it
# wherever its socket went.
RUN_MARK = "PYTEST_SLOP_RUN"
WATCHER_MODULE = b"slop_tui.repomap.watcher_process"


def stray_watchers(folder: Path) -> list[int]:
    """Watcher processes started by this run (its mark in their environment) whose socket is
    not in the run's folder `folder`: started with the user's runtime folder."""
    import os

    mark = f"{RUN_MARK}={folder}".encode()
    inside = f"SLOP_RUNTIME_DIR={folder}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if WATCHER_MODULE not in argv:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if mark in env and inside not in env:
            found.append(pid)
    return found


def live_keepers(folder: Path) -> list[int]:
    """The process ids of the watcher processes whose lock in `folder` is held."""
    import fcntl
    import os

    found = []
    for lock in sorted(folder.glob("*.lock")):
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                found.append(int(text) if text.isdigit() else -1)
        finally:
            os.close(fd)
    return found


@pytest.fixture(autouse=True)
def _no_keeper_left(_keeper_runtime: Path) -> Iterator[None]:
    """Fail the test after which a watcher process still runs (it is stopped first)."""
    yield
    left = live_keepers(_keeper_runtime)
    if left:
        import os
        import signal
        import time

        for pid in left:
            if pid > 0:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        while live_keepers(_keeper_runtime) and time.monotonic() < deadline:
            time.sleep(0.02)
        pytest.fail(f"watcher process(es) left running after the test: {left}")


@pytest.fixture(scope="module", autouse=True)
def _no_stray_watcher(_keeper_runtime: Path) -> Iterator[None]:
    """Fail the test module after which a watcher process that one of this run's processes
    started in the user's runtime folder still runs (it is stopped first). Once a module:
    reading every process's command line takes a few ms."""
    yield
    left = stray_watchers(_keeper_runtime)
    if left:
        import os
        import signal

        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        pytest.fail(f"watcher process(es) started outside the run's folder and left: {left}")
