"""Shared fixtures: the fake LLM server, a loopback-only network guard, snapshot layout."""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_textual_snapshot as pts

from tests.fakeserver import FakeLLMServer

# --- SVG snapshots in <repo>/snapshots/<test_module>/<test>.svg --------------------------
# snap_compare looks SVGImageExtension up by its module-global name at call time, so
# swapping the class here is enough (providers_testing.md §1.1). Because that folder is
# outside tests/, partial runs need --snapshot-warn-unused (already in pyproject addopts).

SNAPSHOT_ROOT = Path(__file__).resolve().parent.parent / "snapshots"


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
