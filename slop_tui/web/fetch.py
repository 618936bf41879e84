"""Fetching a web page safely for URL context and the `fetch_url` tool.

With httpx2 (the maintained httpx line both provider SDKs use):

- only `http` and `https` URLs, without credentials in them;
- the host is resolved first and every address checked before any connection:
  loopback, private, link-local, shared, multicast, reserved and unspecified
  addresses (IPv4-mapped IPv6 too) are refused unless `allow_private`
  (config `[network] allow_private = true`);
- the connection goes to the address that was checked (the `Host` header and
  TLS's SNI name carry the host name, so the certificate is still checked
  against it): a DNS answer that changes between the check and the connection
  (DNS rebinding) cannot redirect it. Proxies from the environment are not used,
  since they would connect elsewhere;
- redirects are followed by hand, each hop checked again, at most
  `max_redirects`;
- the body is read as a stream and abandoned past `max_bytes`; the whole fetch
  has one deadline (`timeout`);
- HTML becomes Markdown (`convert.html_to_markdown`); other text is kept as it
  is; anything else is refused.

Every failure is a `FetchError` with one line that says what went wrong.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

MAX_BYTES = 2_000_000
MAX_CHARS = 200_000  # Markdown kept of a page; the rest is cut with a note
TIMEOUT = 15.0
MAX_REDIRECTS = 5
USER_AGENT = "slop-tui (URL context)"
_HTML = ("text/html", "application/xhtml+xml")
_TEXT = ("application/json", "application/xml", "application/javascript", "application/toml")
_REDIRECTS = (301, 302, 303, 307, 308)

Resolver = Callable[[str, int], Awaitable[list[str]]]


class FetchError(Exception):
    """A page that cannot be fetched; the message is one line."""


@dataclass(frozen=True, slots=True)
class Page:
    """A fetched page: the address asked for, the final one, its title and text."""

    url: str
    final_url: str
    title: str
    content: str  # Markdown (HTML pages) or the text as served
    content_type: str
    size: int  # bytes received


@dataclass(frozen=True, slots=True)
class FetchLimits:
    max_bytes: int = MAX_BYTES
    timeout: float = TIMEOUT
    max_redirects: int = MAX_REDIRECTS
    allow_private: bool = False


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system resolver)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an acceptable URL, else FetchError."""
    if any(c in url for c in "\r\n\t ") or not url.isprintable():
        raise FetchError("the address contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchError(f"not a valid address ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchError(f"only http and https addresses are fetched, not {scheme or 'this'}")
    if not parts.hostname:
        raise FetchError("the address has no host")
    if parts.username or parts.password:
        raise FetchError("an address with a user name or password is not fetched")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def check_address(
    address: str, allow_private: bool
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address, or FetchError when it is not a public one (and private ones are not
    allowed)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    if ip.is_unspecified or ip.is_multicast:
        raise FetchError(f"{ip} is not an address a page can be fetched from")
    if not allow_private and not ip.is_global:
        raise FetchError(
            f"{ip} is a loopback, private or reserved address; set [network] allow_private "
            "= true to fetch from it"
        )
    return ip


async def _vetted(host: str, port: int, limits: FetchLimits, resolve: Resolver) -> str:
    try:
        ipaddress.ip_address(host)
        addresses = [host]
    except ValueError:
        try:
            addresses = await resolve(host, port)
        except OSError as exc:
            raise FetchError(f"{host} cannot be resolved ({exc.strerror or exc})") from None
    if not addresses:
        raise FetchError(f"{host} cannot be resolved")
    checked = [check_address(a, limits.allow_private) for a in addresses]
    return str(checked[0])


def _content_kind(content_type: str) -> str:
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime in _HTML:
        return "html"
    if mime.startswith("text/") or mime in _TEXT or mime.endswith(("+json", "+xml")):
        return "text"
    return ""


async def fetch_page(
    url: str, limits: FetchLimits | None = None, *, resolve: Resolver = system_resolver
) -> Page:
    """The page at `url`, converted to Markdown (see the module docstring)."""
    limits = limits or FetchLimits()
    try:
        async with asyncio.timeout(limits.timeout):
            return await _fetch(url, limits, resolve)
    except TimeoutError:
        raise FetchError(f"no complete answer within {limits.timeout:g} s") from None


async def _fetch(url: str, limits: FetchLimits, resolve: Resolver) -> Page:
    import httpx2

    current = url
    seen: list[str] = []
    async with httpx2.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=limits.timeout
    ) as client:
        for _hop in range(limits.max_redirects + 1):
            scheme, host, port = check_url(current)
            address = await _vetted(host, port, limits, resolve)
            parts = urlsplit(current)
            literal = f"[{address}]" if ":" in address else address
            default = (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
            netloc = literal if default else f"{literal}:{port}"
            target = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
            host_header = host if default else f"{host}:{port}"
            if ":" in host and not host.startswith("["):
                host_header = f"[{host}]" if default else f"[{host}]:{port}"
            extensions = {"sni_hostname": host} if scheme == "https" else {}
            headers = {
                "Host": host_header,
                "User-Agent": USER_AGENT,
                "Accept": "text/html, text/*;q=0.9, */*;q=0.1",
            }
            try:
                async with client.stream(
                    "GET", target, headers=headers, extensions=extensions
                ) as resp:
                    if resp.status_code in _REDIRECTS and resp.headers.get("location"):
                        seen.append(current)
                        current = urljoin(current, resp.headers["location"])
                        continue
                    if resp.status_code >= 400:
                        reason = resp.reason_phrase or ""
                        raise FetchError(
                            f"the server answered {resp.status_code} {reason}".rstrip()
                        )
                    content_type = resp.headers.get("content-type", "")
                    kind = _content_kind(content_type)
                    if not kind:
                        shown = content_type.split(";", 1)[0] or "no content type"
                        raise FetchError(f"not HTML or text ({shown})")
                    body = bytearray()
                    async for chunk in resp.aiter_bytes():
                        body.extend(chunk)
                        if len(body) > limits.max_bytes:
                            raise FetchError(
                                f"the page is larger than {limits.max_bytes / 1e6:g} MB"
                            )
                    charset = resp.charset_encoding or "utf-8"
            except httpx2.TimeoutException:
                raise FetchError(f"no complete answer within {limits.timeout:g} s") from None
            except httpx2.HTTPError as exc:
                raise FetchError(f"the connection failed ({type(exc).__name__}: {exc})") from None
            try:
                text = bytes(body).decode(charset, "replace")
            except LookupError:
                text = bytes(body).decode("utf-8", "replace")
            title = ""
            if kind == "html":
                from slop_tui.web.convert import html_to_markdown

                title, text = await asyncio.to_thread(html_to_markdown, text)
            if len(text) > MAX_CHARS:
                text = text[:MAX_CHARS] + f"\n\n[cut: the page has {len(text):,} characters]\n"
            return Page(url, current, title, text, content_type, len(body))
    raise FetchError(f"more than {limits.max_redirects} redirects (last: {seen[-1]})")
