"""URL context and `fetch_url`: the address checks, redirects, caps, conversion, the
`/url` commands, the layer in the plan, and what the real SDKs send.

Pages come from a 127.0.0.1 server, so every fetch that should reach it sets
`allow_private` explicitly; the ones that must not reach it assert it received
nothing."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slop_tui.commands import dispatch
from slop_tui.context.assemble import URLS_ACK
from slop_tui.context.prompt import KIND_PAIR, LAYER_URLS
from slop_tui.tools.approval import Decision, approval_decision
from slop_tui.web import FetchError, FetchLimits, check_address, check_url, fetch_page
from slop_tui.web.convert import html_to_markdown
from tests.test_cli import run
from tests.workspace_fixtures import open_workspace, rough

PAGE = b"""<!doctype html><html><head><title>Ownership Guide</title>
<script>alert('x')</script><style>p{}</style></head><body>
<nav><a href="/a">Chapter list one</a><a href="/b">Chapter list two</a></nav>
<main><h1>What is ownership?</h1>
<p>Each value has an <em>owner</em>; when the owner goes out of scope the value is dropped.</p>
<pre><code class="language-rust">let s = String::from("hello");</code></pre>
<ul><li>first rule</li><li>second rule</li></ul></main>
<footer>copyright notice</footer></body></html>"""


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
    seen: list[tuple[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append((self.path, self.headers.get("Host", "")))
        if self.path == "/slow":
            time.sleep(2.0)
        if self.path == "/huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                for _ in range(400):
                    self.wfile.write(b"x" * 10_000)
            except OSError:
                pass
            return
        status, headers, body = self.routes.get(self.path, (404, {}, b"missing"))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    _Handler.seen = []
    _Handler.routes = {
        "/page.html": (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE),
        "/notes.txt": (200, {"Content-Type": "text/plain"}, b"plain notes\n"),
        "/image.png": (200, {"Content-Type": "image/png"}, b"\x89PNG...."),
        "/loop": (302, {"Location": "/loop"}, b""),
        "/moved": (301, {"Location": "/page.html"}, b""),
        "/to-ftp": (302, {"Location": "ftp://example.com/file"}, b""),
        "/to-zero": (302, {"Location": "http://0.0.0.0:9/"}, b""),
    }
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()


OPEN = FetchLimits(allow_private=True, timeout=5.0)


# -- the address checks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("ftp://example.com/x", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("http://user:pw@example.com/", "user name or password"),
        ("http:///nohost", "no host"),
        ("http://exa mple.com/", "spaces or control"),
    ],
)
def test_addresses_that_are_never_fetched(url: str, error: str) -> None:
    with pytest.raises(FetchError, match=error):
        check_url(url)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "::1",
        "::ffff:127.0.0.1",
        "100.64.0.1",
        "fc00::1",
    ],
)
def test_private_addresses_are_refused_unless_allowed(address: str) -> None:
    with pytest.raises(FetchError, match="allow_private"):
        check_address(address, allow_private=False)
    assert check_address(address, allow_private=True)


def test_public_addresses_pass_and_unspecified_never_does() -> None:
    assert str(check_address("93.184.216.34", False)) == "93.184.216.34"
    with pytest.raises(FetchError):
        check_address("0.0.0.0", True)


async def test_loopback_is_refused_before_any_connection(site: str) -> None:
    with pytest.raises(FetchError, match="allow_private"):
        await fetch_page(site + "/page.html", FetchLimits(allow_private=False))
    assert _Handler.seen == []


async def test_a_name_resolving_to_any_private_address_is_refused(site: str) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "127.0.0.1"]

    port = int(site.rsplit(":", 1)[1])
    with pytest.raises(FetchError, match="127.0.0.1"):
        await fetch_page(f"http://docs.example:{port}/page.html", FetchLimits(), resolve=resolve)
    assert _Handler.seen == []


async def test_the_connection_goes_to_the_checked_address(site: str) -> None:
    """DNS rebinding: the name is resolved once, checked, and that address is connected to
    (a second lookup that would answer otherwise is never made); Host keeps the name."""
    calls = []

    async def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.9.9.9"]

    port = int(site.rsplit(":", 1)[1])
    page = await fetch_page(f"http://docs.example:{port}/page.html", OPEN, resolve=resolve)
    assert calls == ["docs.example"]
    assert _Handler.seen == [("/page.html", f"docs.example:{port}")]
    assert page.title == "Ownership Guide"


@pytest.mark.parametrize(
    ("path", "error"),
    [("/to-ftp", "only http and https"), ("/to-zero", "0.0.0.0 is not an address")],
)
async def test_every_redirect_hop_is_checked_again(site: str, path: str, error: str) -> None:
    with pytest.raises(FetchError, match=error):
        await fetch_page(site + path, OPEN)
    assert [p for p, _h in _Handler.seen] == [path]  # the refused hop was never requested


# -- what a fetch returns --------------------------------------------------------------------


async def test_html_becomes_markdown_without_scripts_or_navigation(site: str) -> None:
    page = await fetch_page(site + "/page.html", OPEN)
    assert page.title == "Ownership Guide"
    assert page.content.startswith("# What is ownership?")
    assert "```" in page.content and 'let s = String::from("hello");' in page.content
    assert "- first rule" in page.content and "*owner*" in page.content
    for gone in ("alert(", "Chapter list", "p{}"):
        assert gone not in page.content


async def test_text_is_kept_and_redirects_are_followed(site: str) -> None:
    page = await fetch_page(site + "/notes.txt", OPEN)
    assert page.content == "plain notes\n" and page.title == ""
    moved = await fetch_page(site + "/moved", OPEN)
    assert moved.final_url == site + "/page.html" and moved.title == "Ownership Guide"


@pytest.mark.parametrize(
    ("path", "limits", "error"),
    [
        ("/missing", OPEN, "answered 404"),
        ("/image.png", OPEN, r"not HTML or text \(image/png\)"),
        ("/loop", OPEN, "more than 5 redirects"),
        ("/huge", FetchLimits(allow_private=True, max_bytes=1_000_000), "larger than 1 MB"),
        ("/slow", FetchLimits(allow_private=True, timeout=0.5), "within 0.5 s"),
    ],
)
async def test_bad_pages_fail_with_one_line(site: str, path: str, limits, error: str) -> None:
    with pytest.raises(FetchError, match=error) as info:
        await fetch_page(site + path, limits)
    assert "\n" not in str(info.value)


def test_convert_keeps_a_page_without_main() -> None:
    title, md = html_to_markdown("<html><body><h2>Only</h2><p>text here</p></body></html>")
    assert title == "" and md == "## Only\n\ntext here\n"


# -- /url and the layer ---------------------------------------------------------------------


async def test_url_commands_store_the_page_and_send_it_as_a_pair(tmp_path: Path, site: str) -> None:
    (tmp_path / "README.md").write_text("# demo\n")
    ws = await open_workspace(tmp_path)
    try:
        ws.config = type(ws.config)(**{**ws.config.__dict__, "network": {"allow_private": True}})
        r = await dispatch(ws, f"/url add {site}/page.html")
        assert r.ok, r.text
        assert "Ownership Guide" in r.text and "/url remove" in r.text
        before = await ws.ledger.url_pages(ws.session)
        bad = await dispatch(ws, f"/url add {site}/image.png")
        assert not bad.ok and bad.text.count("\n") == 0 and "not HTML or text" in bad.text
        assert await ws.ledger.url_pages(ws.session) == before  # nothing else changed
        listing = await dispatch(ws, "/url list")
        assert f"{site}/page.html" in listing.text
        await ws.ledger.append_user(ws.session, "summarise the page")
        plan = await ws.plan(count_tokens=rough)
        req = plan.request
        pairs = [m for m in req.messages if m.kind == KIND_PAIR]
        assert [m.role for m in pairs] == ["user", "assistant", "user", "assistant"]
        urls = pairs[2]
        assert urls.text.startswith("## URL Context") and "What is ownership?" in urls.text
        assert pairs[3].text == URLS_ACK
        assert plan.layer_tokens()[LAYER_URLS] == urls.tokens + pairs[3].tokens
        assert sum(plan.layer_tokens().values()) == plan.request_tokens
        # Dropped as a layer: out of the request, kept, and back on restore.
        assert (await dispatch(ws, "/context drop urls")).ok
        plan = await ws.plan(count_tokens=rough)
        assert LAYER_URLS not in [la.name for la in plan.request.layers]
        assert await ws.ledger.url_pages(ws.session) == before
        assert (await dispatch(ws, "/context restore pages")).ok
        plan = await ws.plan(count_tokens=rough)
        assert LAYER_URLS in [la.name for la in plan.request.layers]
        r = await dispatch(ws, f"/url remove {before[0].id}")
        assert r.ok
        plan = await ws.plan(count_tokens=rough)
        assert LAYER_URLS not in [la.name for la in plan.request.layers]
        r = await dispatch(ws, "/url remove 99")
        assert not r.ok and "/url list" in r.text
    finally:
        await ws.close()


async def test_url_add_refuses_loopback_without_allow_private(tmp_path: Path, site: str) -> None:
    ws = await open_workspace(tmp_path)
    try:
        r = await dispatch(ws, f"/url add {site}/page.html")
        assert not r.ok and "allow_private" in r.text
        assert await ws.ledger.url_pages(ws.session) == []
        assert _Handler.seen == []
    finally:
        await ws.close()


def test_fetch_url_has_its_own_approval_kind() -> None:
    assert approval_decision("fetch_url", "reads") is Decision.ASK
    assert approval_decision("fetch_url", "none") is Decision.DENY
    assert approval_decision("fetch_url", "all") is Decision.ALLOW


# -- through the real CLI and SDKs -------------------------------------------------------------


def _user_config(tmp_path: Path, allow_private: bool) -> dict[str, str]:
    cfg = tmp_path / "user-config.toml"
    cfg.write_text(f"[network]\nallow_private = {'true' if allow_private else 'false'}\n")
    return {"SLOP_CONFIG": str(cfg)}


def _openai(fake_llm, tmp_path: Path) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "x",
        "OPENAI_BASE_URL": fake_llm.openai_base_url,
        "OPENAI_MODEL": "fake-model",
        "GIT_CEILING_DIRECTORIES": str(tmp_path.parent),
    }


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_real_sdk_request_carries_the_url_pair(
    tmp_path: Path, fake_llm, site: str, provider: str
) -> None:
    from tests.fakeserver import Reply

    env = _user_config(tmp_path, True)
    if provider == "openai":
        env |= _openai(fake_llm, tmp_path)
    else:
        env |= {
            "GEMINI_API_KEY": "x",
            "GEMINI_BASE_URL": fake_llm.gemini_base_url,
            "GEMINI_MODEL": "gemini-2.5-flash",
            "GIT_CEILING_DIRECTORIES": str(tmp_path.parent),
        }
    r = run(["exec", f"/url add {site}/page.html"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    fake_llm.enqueue(Reply(text="done"))
    r = run(["ask", "what does the page say?"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    body = fake_llm.chat_requests[-1].body
    if provider == "openai":
        msgs = body["messages"]
        # system, the file tree pair, then the URL pair
        pair = msgs[3:5]
        assert msgs[1]["content"].startswith("## Repository Files")
        assert pair[0]["role"] == "user" and pair[0]["content"].startswith("## URL Context")
        assert pair[1] == {"role": "assistant", "content": URLS_ACK}
        text = pair[0]["content"]
        assert msgs[-1]["role"] == "user" and "what does the page say?" in msgs[-1]["content"]
    else:
        contents = body["contents"]
        assert contents[0]["parts"][0]["text"].startswith("## Repository Files")
        text = contents[2]["parts"][0]["text"]
        assert text.startswith("## URL Context")
        assert contents[3] == {"role": "model", "parts": [{"text": URLS_ACK}]}
    assert f"### Ownership Guide ({site}/page.html)" in text
    assert "# What is ownership?" in text and "Chapter list" not in text


def test_model_fetch_url_reaches_loopback_only_when_allowed(
    tmp_path: Path, fake_llm, site: str
) -> None:
    """An attacker-scripted model asks for a loopback page: refused (nothing reaches the
    server) without `[network] allow_private`; read with it."""
    from tests.fakeserver import FakeToolCall, Reply

    for allowed in (False, True):
        _Handler.seen.clear()
        env = _user_config(tmp_path, allowed) | _openai(fake_llm, tmp_path)
        fake_llm.enqueue(
            Reply(text="", tool_calls=[FakeToolCall("fetch_url", {"url": site + "/page.html"})]),
            Reply(text="ok"),
        )
        r = run(["ask", "--approve", "all", "read the page"], tmp_path, env)
        assert r.returncode == 0, r.stderr
        last = fake_llm.chat_requests[-1].messages
        result = [m for m in last if m["role"] == "tool"][-1]["content"]
        if allowed:
            assert "What is ownership?" in result and "untrusted text" in result
            assert [p for p, _h in _Handler.seen] == ["/page.html"]
        else:
            assert "allow_private" in result and _Handler.seen == []
