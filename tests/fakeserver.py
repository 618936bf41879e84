"""A scripted, stdlib-only LLM server speaking the OpenAI and Gemini wire formats.

It runs in its own thread (not on the test's event loop) so that the same server serves
async tests and sync ``snap_compare`` tests, whose ``App.run()`` owns a separate loop.
See shared/research/providers_testing.md §7 for the design and the SDK facts it relies on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "FakeLLMServer",
    "PrefixCache",
    "FakeToolCall",
    "RecordedRequest",
    "Reply",
    "ReplySource",
    "b64",
    "wait_for",
]

# A gate that nobody opens must not hang the suite forever.
GATE_TIMEOUT = 30.0
# Fixed so that anything derived from the chunk metadata is stable in snapshots.
_CREATED = 1_700_000_000

_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    403: "permission_error",
    429: "rate_limit_exceeded",
}
_GEMINI_ERROR_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# Lets one script drive both providers: a reason written in either dialect is translated.
_TO_GEMINI_FINISH = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "function_call": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}
_TO_OPENAI_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
}

_GEMINI_ROUTE = re.compile(
    r"^(?P<prefix>.*?)/(?P<ver>v1|v1beta|v1alpha)/models"
    r"(?:/(?P<model>[^/:]+)(?::(?P<method>streamGenerateContent|generateContent|countTokens))?)?$"
)
# Gemini explicit context caches: create (POST .../cachedContents), delete (DELETE .../NAME).
_GEMINI_CACHE_ROUTE = re.compile(
    r"^(?P<prefix>.*?)/(?P<ver>v1|v1beta|v1alpha)/cachedContents(?:/(?P<id>[^/:]+))?$"
)
_OPENAI_MODELS_ROUTE = re.compile(r"^(?P<prefix>.*?)/models(?:/(?P<model>[^/]+))?$")


@dataclass
class FakeToolCall:
    """One function call; ``args`` as a str is sent verbatim (for malformed-JSON tests)."""

    name: str
    args: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    arg_chunks: int = 3

    def args_json(self) -> str:
        return self.args if isinstance(self.args, str) else json.dumps(self.args)

    def args_object(self) -> dict[str, Any]:
        return json.loads(self.args) if isinstance(self.args, str) else dict(self.args)


class _QuietServer(ThreadingHTTPServer):
    """A client dropping an idle keep-alive connection is normal, not an error to print."""

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass
class Reply:
    """A provider-neutral scripted answer; each endpoint renders it in its own wire format,
    so one script can be run against both providers.

    - ``text`` / ``thinking``: a str is cut into ``chunk_size`` pieces, a list is sent as
      exact deltas. ``thinking`` becomes Gemini ``thought: true`` parts; OpenAI ignores it.
    - ``tool_calls``: OpenAI streams each call's arguments in ``arg_chunks`` pieces (a missing
      id becomes ``call_<n>``, numbered per test); Gemini sends whole ``functionCall`` parts,
      all in the last chunk, with an ``id`` only if one was given.
    - ``thought_signature``: base64 text, put on the first Gemini functionCall part (else on
      the last answer part), so tests can check that the app sends it back.
    - ``finish_reason``: None gives the provider's default (``stop``/``tool_calls``, ``STOP``);
      either dialect is translated (``length`` <-> ``MAX_TOKENS``); ``""`` sends no finish
      reason, no usage chunk and no ``[DONE]``: a silently truncated stream.
    - ``cached_tokens`` / ``reasoning_tokens``: OpenAI ``prompt_tokens_details.cached_tokens``
      / ``completion_tokens_details.reasoning_tokens``; Gemini ``cachedContentTokenCount`` /
      ``thoughtsTokenCount``.
    - ``delay``: seconds before each event. ``gate``: held after the headers until set.
    - ``disconnect_after``: cut the socket after N events (or ``raw`` pieces), without the
      closing chunk. OpenAI's first event is the role chunk.
    - ``status`` >= 400: a provider-shaped error body with ``error_message``; ``headers`` go
      on any response (``retry-after``, ``x-request-id``).
    - ``raw``: exact body bytes (a list is written as separate flushed pieces), with
      ``content_type``; everything else but status/headers/delay/gate/disconnect is ignored.
    - ``in_stream_error``: a message (or a full error object) sent as an SSE event after the
      content, in place of the finish.
    - ``done=False``: omit OpenAI's ``data: [DONE]`` but keep the finish reason.
    - ``usage=False``: the provider reports no usage (no OpenAI usage chunk even when
      asked for, no Gemini ``usageMetadata``), as some compatible servers do.
    """

    text: str | list[str] = ""
    tool_calls: list[FakeToolCall] = field(default_factory=list)
    thinking: str | list[str] = ""
    thought_signature: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    chunk_size: int = 8
    delay: float = 0.0
    gate: threading.Event | None = None
    disconnect_after: int | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error_message: str | None = None
    raw: bytes | list[bytes] | None = None
    content_type: str | None = None
    in_stream_error: str | dict[str, Any] | None = None
    done: bool = True
    usage: bool = True

    def text_deltas(self) -> list[str]:
        return _split(self.text, self.chunk_size)

    def thinking_deltas(self) -> list[str]:
        return _split(self.thinking, self.chunk_size)


def _split(value: str | list[str], size: int) -> list[str]:
    if isinstance(value, list):
        return list(value)
    size = max(1, size)
    return [value[i : i + size] for i in range(0, len(value), size)]


def _split_n(s: str, n: int) -> list[str]:
    if not s:
        return []
    n = max(1, min(n, len(s)))
    step = -(-len(s) // n)
    return [s[i : i + step] for i in range(0, len(s), step)]


@dataclass
class RecordedRequest:
    """What the client sent. ``headers`` keys are lower-case; ``body`` is parsed JSON or None."""

    provider: str  # "openai" | "gemini" | "unknown"
    # "chat" | "stream" | "generate" | "count_tokens" | "models" | "cache_create" |
    # "cache_delete" | "unknown"
    kind: str
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    model: str | None
    raw_body: bytes = b""
    disconnected: bool = False  # set when a write failed: the client went away (cancel)
    # time.monotonic() when it was read: a clock shared with a child process that sent it
    received: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """OpenAI chat messages as sent."""
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def contents(self) -> list[dict[str, Any]]:
        """Gemini contents as sent (camelCase keys, roles ``user``/``model``)."""
        return list(self.body.get("contents") or []) if isinstance(self.body, dict) else []

    @property
    def stream(self) -> bool:
        return self.kind == "stream"


ReplySource = Reply | Callable[[RecordedRequest], Reply]


class FakeLLMServer:
    """Threaded HTTP server on 127.0.0.1 with a FIFO script of :class:`Reply` objects."""

    def __init__(self, models: Iterable[str] = ("fake-model", "gemini-2.5-flash")) -> None:
        self._default_models = list(models)
        self.models: list[str] = list(self._default_models)
        self.default_reply: ReplySource | None = None
        self.requests: list[RecordedRequest] = []
        # Requests that found the queue empty; the fixture fails the test on any.
        self.unscripted: list[RecordedRequest] = []
        self._queue: deque[ReplySource] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._counters: dict[str, int] = {}
        # Gemini explicit caches: name -> the tokens it holds (see `_serve_cache`).
        self.caches: dict[str, int] = {}
        # A scripted failure of the next cache creations (status >= 400), None: they work.
        self.cache_error: Reply | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        if self._httpd is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        httpd = _QuietServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeLLMServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- URLs --------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/openai/v1"

    @property
    def gemini_base_url(self) -> str:
        return f"{self.base_url}/gemini"

    # -- script ------------------------------------------------------------------

    def enqueue(self, *replies: ReplySource) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.unscripted.clear()
            self.default_reply = None
            self.models = list(self._default_models)
            self._counters.clear()
            self.caches.clear()
            self.cache_error = None

    @property
    def last(self) -> RecordedRequest:
        with self._lock:
            if not self.requests:
                raise AssertionError("fake server: no request was received")
            return self.requests[-1]

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Requests that consumed (or tried to consume) a scripted reply."""
        with self._lock:
            return [r for r in self.requests if r.kind in ("chat", "stream", "generate")]

    @property
    def last_chat(self) -> RecordedRequest:
        chats = self.chat_requests
        if not chats:
            raise AssertionError("fake server: no chat/generate request was received")
        return chats[-1]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until ``count`` requests have arrived (e.g. before opening a gate)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"fake server: {len(self.requests)}/{count} requests arrived")
            return list(self.requests)

    # -- internals used by the handler -------------------------------------------

    def _record(self, req: RecordedRequest) -> None:
        with self._arrived:
            self.requests.append(req)
            self._arrived.notify_all()

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            n = self._counters.get(prefix, 0)
            self._counters[prefix] = n + 1
        return f"{prefix}{n}"

    def _pop_reply(self, req: RecordedRequest) -> Reply | None:
        with self._lock:
            source = self._queue.popleft() if self._queue else self.default_reply
            if source is None:
                self.unscripted.append(req)
                return None
        reply = source(req) if callable(source) else source
        if not isinstance(reply, Reply):
            raise TypeError(f"scripted reply factory returned {type(reply).__name__}, not Reply")
        return reply


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeLLM/1.0"
    # An idle keep-alive connection must not pin a thread forever.
    timeout = 60
    fake: FakeLLMServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    # -- dispatch ------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        self._headers_sent = False
        raw_body = self._read_body()
        url = urlsplit(self.path)
        path = url.path
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = None
        provider, kind, model = self._route(self.command, path, headers, body)
        req = RecordedRequest(
            provider=provider,
            kind=kind,
            method=self.command,
            path=path,
            query=parse_qs(url.query, keep_blank_values=True),
            headers=headers,
            body=body,
            model=model,
            raw_body=raw_body,
        )
        self.fake._record(req)
        try:
            self._serve(req)
        except (BrokenPipeError, ConnectionResetError):
            req.disconnected = True
            self.close_connection = True
        except Exception as exc:  # a bug in a test's script must surface, not hang the client
            if self._headers_sent:
                self.close_connection = True
                return
            self._send_json(500, _error_body(req.provider, 500, f"fake server error: {exc!r}"))

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _route(
        self, method: str, path: str, headers: dict[str, str], body: Any
    ) -> tuple[str, str, str | None]:
        provider = "unknown"
        if path.startswith("/openai/"):
            provider = "openai"
        elif path.startswith("/gemini/"):
            provider = "gemini"
        if provider == "gemini" and (c := _GEMINI_CACHE_ROUTE.match(path)):
            if method == "POST" and not c["id"]:
                model = body.get("model") if isinstance(body, dict) else None
                return "gemini", "cache_create", model
            if method == "DELETE" and c["id"]:
                return "gemini", "cache_delete", None
        if provider in ("unknown", "gemini"):
            m = _GEMINI_ROUTE.match(path)
            # A bare /v1/models is ambiguous; only the Gemini SDK sends x-goog-api-key.
            if m and (provider == "gemini" or m["method"] or "x-goog-api-key" in headers):
                gm = m["method"]
                if gm and method == "POST":
                    kind = {
                        "streamGenerateContent": "stream",
                        "generateContent": "generate",
                        "countTokens": "count_tokens",
                    }[gm]
                    return "gemini", kind, m["model"]
                if not gm and method == "GET":
                    return "gemini", "models", m["model"]
        if provider in ("unknown", "openai"):
            if path.endswith("/chat/completions") and method == "POST":
                model = body.get("model") if isinstance(body, dict) else None
                stream = isinstance(body, dict) and bool(body.get("stream"))
                return "openai", "stream" if stream else "chat", model
            m = _OPENAI_MODELS_ROUTE.match(path)
            if m and method == "GET":
                return "openai", "models", m["model"]
        return provider, "unknown", None

    def _serve(self, req: RecordedRequest) -> None:
        if req.kind == "unknown":
            msg = f"fake server: no route for {req.method} {req.path}"
            self._send_json(404, _error_body(req.provider, 404, msg))
        elif req.kind == "models":
            self._serve_models(req)
        elif req.kind in ("cache_create", "cache_delete"):
            self._serve_cache(req)
        elif req.kind == "count_tokens":
            contents = (req.body or {}).get("contents") or []
            self._send_json(200, {"totalTokens": max(1, len(json.dumps(contents)) // 4)})
        else:
            reply = self.fake._pop_reply(req)
            if reply is None:
                msg = f"fake server: no scripted reply for {req.method} {req.path} ({req.kind})"
                self._send_json(500, _error_body(req.provider, 500, msg))
                return
            if req.provider == "gemini":
                cached = self._cache_usage(req, reply)
                if cached is None:
                    msg = f"CachedContent not found (or permission denied): {req.body.get('cachedContent')}"
                    self._send_json(404, _error_body("gemini", 404, msg))
                    return
                reply = cached
            self._serve_reply(req, reply)

    def _serve_cache(self, req: RecordedRequest) -> None:
        """Gemini's cachedContents: a created cache holds about a token per 4 characters
        of its contents, system instruction and tools (as JSON); a request naming it is
        reported with that many `cachedContentTokenCount` (see `_cache_usage`)."""
        fake = self.fake
        if req.kind == "cache_delete":
            name = "cachedContents/" + req.path.rsplit("/", 1)[-1]
            if fake.caches.pop(name, None) is None:
                msg = f"CachedContent not found (or permission denied): {name}"
                self._send_json(404, _error_body("gemini", 404, msg))
            else:
                self._send_json(200, {})
            return
        if fake.cache_error is not None:
            err = fake.cache_error
            self._send_json(err.status, _error_body("gemini", err.status, err.error_message))
            return
        body = req.body if isinstance(req.body, dict) else {}
        held = {k: body.get(k) for k in ("contents", "systemInstruction", "tools") if k in body}
        tokens = max(1, len(json.dumps(held, sort_keys=True)) // 4)
        name = f"cachedContents/{fake._next_id('cache')}"
        with fake._lock:
            fake.caches[name] = tokens
        self._send_json(
            200,
            {
                "name": name,
                "model": body.get("model"),
                "createTime": "2026-01-01T00:00:00Z",
                "updateTime": "2026-01-01T00:00:00Z",
                "expireTime": "2099-01-01T00:00:00Z",
                "usageMetadata": {"totalTokenCount": tokens},
            },
        )

    def _cache_usage(self, req: RecordedRequest, reply: Reply) -> Reply | None:
        """The reply for a generateContent that names a cached content: its tokens are
        cached input (added to the prompt's); None when there is no such cache."""
        name = req.body.get("cachedContent") if isinstance(req.body, dict) else None
        if not name:
            return reply
        tokens = self.fake.caches.get(name)
        if tokens is None:
            return None
        return replace(reply, prompt_tokens=reply.prompt_tokens + tokens, cached_tokens=tokens)

    def _serve_models(self, req: RecordedRequest) -> None:
        models = self.fake.models
        if req.model is not None and req.model not in models:
            msg = f"fake server: unknown model {req.model!r}"
            self._send_json(404, _error_body(req.provider, 404, msg))
            return
        if req.provider == "openai":
            rows = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]
            if req.model is not None:
                self._send_json(200, rows[models.index(req.model)])
            else:
                self._send_json(200, {"object": "list", "data": rows})
            return
        rows = [
            {
                "name": f"models/{m}",
                "displayName": m,
                "inputTokenLimit": 1048576,
                "outputTokenLimit": 65536,
                "supportedActions": ["generateContent", "countTokens"],
            }
            for m in models
        ]
        if req.model is not None:
            self._send_json(200, rows[models.index(req.model)])
        else:
            self._send_json(200, {"models": rows})

    # -- replies -------------------------------------------------------------------

    def _serve_reply(self, req: RecordedRequest, reply: Reply) -> None:
        if reply.gate is not None and not req.stream:
            reply.gate.wait(GATE_TIMEOUT)
        gate = reply.gate if req.stream else None
        if reply.raw is not None:
            self._serve_raw(req, reply, gate)
            return
        if reply.status >= 400:
            if gate is not None:
                gate.wait(GATE_TIMEOUT)
            if reply.delay:
                time.sleep(reply.delay)
            body = _error_body(req.provider, reply.status, reply.error_message)
            self._send_json(reply.status, body, reply.headers)
            return
        if req.stream:
            if req.provider == "openai":
                events = _openai_events(self.fake, req, reply)
            else:
                events = _gemini_events(req, reply)
            ct = reply.content_type or "text/event-stream; charset=utf-8"
            sep = b"\n\n" if req.provider == "openai" else b"\r\n\r\n"
            self._stream(reply, [_sse(e, sep) for e in events], ct, gate)
            return
        if reply.delay:
            time.sleep(reply.delay)
        if req.provider == "openai":
            payload = _openai_completion(self.fake, req, reply)
        else:
            payload = _gemini_merged(_gemini_events(req, reply))
        if reply.disconnect_after is not None:
            self._begin_chunked(reply.status, reply.content_type or "application/json", reply)
            self._cut()
            return
        self._send_json(reply.status, payload, reply.headers, reply.content_type)

    def _serve_raw(self, req: RecordedRequest, reply: Reply, gate: threading.Event | None) -> None:
        pieces = [reply.raw] if isinstance(reply.raw, bytes) else list(reply.raw or [])
        default_ct = "text/event-stream; charset=utf-8" if req.stream else "application/json"
        self._stream(reply, pieces, reply.content_type or default_ct, gate)

    def _stream(
        self, reply: Reply, pieces: list[bytes], ct: str, gate: threading.Event | None
    ) -> None:
        self._begin_chunked(reply.status, ct, reply)
        if gate is not None:
            gate.wait(GATE_TIMEOUT)
        for i, piece in enumerate(pieces):
            if reply.disconnect_after is not None and i >= reply.disconnect_after:
                break
            if reply.delay:
                time.sleep(reply.delay)
            self._write_chunk(piece)
        if reply.disconnect_after is not None:
            self._cut()
        else:
            self._end_chunked()

    # -- low-level I/O ---------------------------------------------------------------

    def _begin_chunked(self, status: int, content_type: str, reply: Reply) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.flush()
        self._headers_sent = True

    def _write_chunk(self, data: bytes) -> None:
        if not data:
            return  # a zero-length chunk would end the body early
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _cut(self) -> None:
        """Drop the connection mid-body, as a crashed upstream or proxy would."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_json(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        content_type: str | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type or "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self._headers_sent = True
        self.wfile.write(data)
        self.wfile.flush()


# -- wire rendering (pure functions) ----------------------------------------------------


def _sse(event: dict[str, Any] | str, sep: bytes) -> bytes:
    # Gemini ends events with CRLF pairs, OpenAI with LF pairs, as the real services do.
    data = event if isinstance(event, str) else json.dumps(event)
    return b"data: " + data.encode() + sep


def _error_body(provider: str, status: int, message: str | None) -> dict[str, Any]:
    message = message or _reason(status)
    if provider == "gemini":
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _GEMINI_ERROR_STATUS.get(status, "UNKNOWN"),
            }
        }
    etype = _OPENAI_ERROR_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": etype, "param": None, "code": etype}}


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def _in_stream_error(provider: str, err: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(err, dict):
        return err if "error" in err else {"error": err}
    if provider == "gemini":
        return {"error": {"code": 500, "message": err, "status": "INTERNAL"}}
    return {"error": {"message": err, "type": "server_error", "param": None, "code": None}}


def _openai_finish(reply: Reply) -> str:
    if reply.finish_reason:
        return _TO_OPENAI_FINISH.get(reply.finish_reason, reply.finish_reason)
    return "tool_calls" if reply.tool_calls else "stop"


def _openai_usage(reply: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reply.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _resolve_call_ids(fake: FakeLLMServer, reply: Reply) -> list[str]:
    return [tc.id or fake._next_id("call_") for tc in reply.tool_calls]


def _openai_events(
    fake: FakeLLMServer, req: RecordedRequest, reply: Reply
) -> list[dict[str, Any] | str]:
    body = req.body if isinstance(req.body, dict) else {}
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": fake._next_id("chatcmpl-fake"),
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": req.model or "fake-model",
        "system_fingerprint": "fp_fake",
        "service_tier": "default",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        ev = dict(base)
        ev["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        if include_usage:
            ev["usage"] = None
        return ev

    events: list[dict[str, Any] | str] = [
        chunk({"role": "assistant", "content": "", "refusal": None})
    ]
    events += [chunk({"content": d}) for d in reply.text_deltas()]
    for index, (tc, call_id) in enumerate(
        zip(reply.tool_calls, _resolve_call_ids(fake, reply), strict=True)
    ):
        head = {"index": index, "id": call_id, "type": "function"}
        head["function"] = {"name": tc.name, "arguments": ""}
        events.append(chunk({"tool_calls": [head]}))
        for piece in _split_n(tc.args_json(), tc.arg_chunks):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    if reply.in_stream_error is not None:
        events.append(_in_stream_error("openai", reply.in_stream_error))
        return events
    if reply.finish_reason == "":
        return events
    events.append(chunk({}, _openai_finish(reply)))
    if include_usage and reply.usage:
        events.append({**base, "choices": [], "usage": _openai_usage(reply)})
    if reply.done:
        events.append("[DONE]")
    return events


def _openai_completion(fake: FakeLLMServer, req: RecordedRequest, reply: Reply) -> dict[str, Any]:
    text = "".join(reply.text_deltas())
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text if (text or not reply.tool_calls) else None,
        "refusal": None,
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.args_json()},
            }
            for tc, cid in zip(reply.tool_calls, _resolve_call_ids(fake, reply), strict=True)
        ]
    return {
        "id": fake._next_id("chatcmpl-fake"),
        "object": "chat.completion",
        "created": _CREATED,
        "model": req.model or "fake-model",
        "system_fingerprint": "fp_fake",
        "service_tier": "default",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _openai_finish(reply) if reply.finish_reason != "" else None,
            }
        ],
        "usage": _openai_usage(reply),
    }


def _gemini_parts(reply: Reply) -> list[list[dict[str, Any]]]:
    """Parts grouped by the chunk that carries them; function calls share the last chunk."""
    groups: list[list[dict[str, Any]]] = [
        [{"text": d, "thought": True}] for d in reply.thinking_deltas()
    ]
    groups += [[{"text": d}] for d in reply.text_deltas()]
    if reply.tool_calls:
        calls = []
        for tc in reply.tool_calls:
            fc: dict[str, Any] = {"name": tc.name, "args": tc.args_object()}
            if tc.id:
                fc["id"] = tc.id
            calls.append({"functionCall": fc})
        groups.append(calls)
    if not groups:
        groups = [[{"text": ""}]]
    if reply.thought_signature is not None:
        # Real Gemini signs the first function call, or else the closing answer part.
        target = next(
            (p for g in groups for p in g if "functionCall" in p),
            next((p for g in reversed(groups) for p in g if not p.get("thought")), groups[-1][-1]),
        )
        target["thoughtSignature"] = reply.thought_signature
    return groups


def _gemini_usage(reply: Reply, final: bool) -> dict[str, Any]:
    if not final:
        return {"promptTokenCount": reply.prompt_tokens, "totalTokenCount": reply.prompt_tokens}
    usage: dict[str, Any] = {
        "promptTokenCount": reply.prompt_tokens,
        "candidatesTokenCount": reply.completion_tokens,
        "totalTokenCount": reply.prompt_tokens + reply.completion_tokens + reply.reasoning_tokens,
    }
    if reply.cached_tokens:
        usage["cachedContentTokenCount"] = reply.cached_tokens
    if reply.reasoning_tokens:
        usage["thoughtsTokenCount"] = reply.reasoning_tokens
    return usage


def _gemini_events(req: RecordedRequest, reply: Reply) -> list[dict[str, Any] | str]:
    groups = _gemini_parts(reply)
    finishing = reply.in_stream_error is None and reply.finish_reason != ""
    finish = _TO_GEMINI_FINISH.get(reply.finish_reason or "stop", reply.finish_reason)
    events: list[dict[str, Any] | str] = []
    for i, parts in enumerate(groups):
        last = i == len(groups) - 1
        cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if last and finishing:
            cand["finishReason"] = finish
        event = {
            "candidates": [cand],
            "usageMetadata": _gemini_usage(reply, last),
            "modelVersion": req.model or "fake-model",
            "responseId": "fake-resp",
        }
        if not reply.usage:
            del event["usageMetadata"]
        events.append(event)
    if reply.in_stream_error is not None:
        events.append(_in_stream_error("gemini", reply.in_stream_error))
    return events


def _gemini_merged(events: list[dict[str, Any] | str]) -> dict[str, Any]:
    chunks = [e for e in events if isinstance(e, dict) and "candidates" in e]
    merged: list[dict[str, Any]] = []
    for ev in chunks:
        for part in ev["candidates"][0]["content"]["parts"]:
            prev = merged[-1] if merged else None
            # generateContent consolidates runs of text the way the real API does.
            if (
                prev is not None
                and "text" in part
                and "text" in prev
                and bool(prev.get("thought")) == bool(part.get("thought"))
                and "thoughtSignature" not in prev
            ):
                prev["text"] += part["text"]
                if "thoughtSignature" in part:
                    prev["thoughtSignature"] = part["thoughtSignature"]
            else:
                merged.append(dict(part))
    out = json.loads(json.dumps(chunks[-1]))
    out["candidates"][0]["content"]["parts"] = merged
    return out


# -- helpers for tests ----------------------------------------------------------------


class PrefixCache:
    """Prompt caching the way OpenAI documents it, for a reply factory.

    A request's prompt is its tool declarations, then its messages (or Gemini's
    system instruction and contents), in order, as tokens. A cached prefix is
    served when at least `minimum` (1,024) leading tokens equal those of a request
    seen before; the hit grows in `step` (128) token blocks. `reply(req)` returns
    a `Reply` with `prompt_tokens` and `cached_tokens` set, and remembers the
    request. `count` turns text into tokens (a list of ids); `retention` requests
    are remembered, newest first (the provider keeps a few minutes of entries).
    """

    def __init__(
        self,
        count: Callable[[str], list[int]],
        *,
        minimum: int = 1024,
        step: int = 128,
        retention: int = 64,
        reply: Callable[[RecordedRequest], Reply] | None = None,
    ) -> None:
        self.count, self.minimum, self.step, self.retention = count, minimum, step, retention
        self.make = reply or (lambda req: Reply(text="ok"))
        self.seen: deque[list[int]] = deque(maxlen=retention)
        self.log: list[tuple[int, int]] = []  # (prompt tokens, cached tokens) per request

    @staticmethod
    def prompt_parts(body: dict[str, Any]) -> list[str]:
        """The request's cacheable parts in sending order, one text each."""
        parts = [json.dumps(t, sort_keys=True) for t in body.get("tools") or []]
        if "systemInstruction" in body:
            parts.append(json.dumps(body["systemInstruction"], sort_keys=True))
        for m in body.get("messages") or body.get("contents") or []:
            parts.append(json.dumps(m, sort_keys=True))
        return parts

    def cached(self, tokens: list[int]) -> int:
        best = 0
        for old in self.seen:
            lo, hi = 0, min(len(old), len(tokens))  # old[:lo] == tokens[:lo]
            if old[:hi] == tokens[:hi]:
                lo = hi
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if old[:mid] == tokens[:mid]:
                    lo = mid
                else:
                    hi = mid
            best = max(best, lo)
        if best < self.minimum:
            return 0
        return best - best % self.step

    def __call__(self, req: RecordedRequest) -> Reply:
        body = req.body if isinstance(req.body, dict) else {}
        tokens: list[int] = []
        for part in self.prompt_parts(body):
            tokens += self.count(part)
        hit = self.cached(tokens)
        self.seen.appendleft(tokens)
        self.log.append((len(tokens), hit))
        reply = self.make(req)
        reply.prompt_tokens, reply.cached_tokens = len(tokens), hit
        return reply


def b64(data: bytes) -> str:
    """Base64 text as Gemini puts it in ``thoughtSignature``."""
    return base64.b64encode(data).decode()


async def wait_for(
    pilot: Any,
    pred: Callable[[], bool],
    timeout: float = 5.0,
    interval: float = 0.01,
) -> None:
    """Poll ``pred`` until true; Pilot has no ``wait_until``, and workers start late.

    ``pilot`` may be None outside a Textual app (plain asyncio tests).
    """
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not reached within {timeout} s")
        pause: Awaitable[Any] = (
            pilot.pause(interval) if pilot is not None else asyncio.sleep(interval)
        )
        await pause


async def click_when_shown(pilot: Any, selector: str, timeout: float = 30.0) -> None:
    """Click ``selector`` once it is laid out and the topmost widget at its centre.

    A dialog is on the stack a few frames before its buttons have a region; a
    click in that gap lands on nothing and the test would wait for an answer
    that never comes.
    """
    app = pilot.app

    def shown() -> bool:
        found = app.screen.query(selector)
        if not found:
            return False
        widget = found.first()
        region = widget.region
        if not region.area:
            return False
        try:
            at, _ = app.screen.get_widget_at(*region.center)
        except Exception:  # noqa: BLE001 - no widget there yet
            return False
        return at is widget or widget in at.ancestors

    await wait_for(pilot, shown, timeout=timeout)
    assert await pilot.click(selector), f"the click on {selector} did not land"
