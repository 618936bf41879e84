"""The `demo` provider: the real OpenAI adapter talking to an in-process fake model.

A stdlib `ThreadingHTTPServer` on 127.0.0.1 (a random free port, a daemon
thread, started on first use and shared by every demo provider of the process)
speaks the OpenAI chat-completions SSE format; `demo_script.next_step` decides
what it says. Because the whole client path is the production one (SDK,
stream assembly, payload, parser), `make run` without an API key exercises
the same code as a real turn. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slop_tui.providers.config import ProviderConfig, with_overrides
from slop_tui.providers.demo_script import DEMO_MODEL, DemoStep, next_step
from slop_tui.providers.openai_provider import OpenAIProvider

log = logging.getLogger(__name__)

DEFAULT_DELAY = 0.01  # seconds between streamed events: slow enough to look like typing
DELAY_HEADER = "x-slop-demo-delay"
_WORDS = re.compile(r"\S+\s*|\s+")


def _pieces(text: str, words: int = 2) -> list[str]:
    tokens = _WORDS.findall(text)
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]


def _events(body: Mapping[str, Any], step: DemoStep) -> Iterator[dict[str, Any] | str]:
    """The SSE events of one streamed reply, in the order OpenAI sends them."""
    base = {
        "id": "chatcmpl-demo",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body.get("model") or DEMO_MODEL,
        "system_fingerprint": "fp_slop_demo",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice], "usage": None}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(step.text):
        yield chunk({"content": piece})
    seed = len(body.get("messages") or [])
    for index, call in enumerate(step.calls):
        # Unique within a conversation: the message count grows every step.
        head = {"index": index, "id": f"call_demo_{seed}_{index}", "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        arguments = json.dumps(call.arguments)
        half = len(arguments) // 2
        for part in (arguments[:half], arguments[half:]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    yield chunk({}, "tool_calls" if step.calls else "stop")
    prompt_tokens = len(json.dumps(body.get("messages") or [])) // 4
    completion = (len(step.text) + sum(len(json.dumps(c.arguments)) for c in step.calls)) // 4
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": usage}
    yield "[DONE]"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "SlopDemo/1.0"
    timeout = 60  # an idle keep-alive connection must not pin a thread forever

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # the TUI owns the terminal

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            row = {"id": DEMO_MODEL, "object": "model", "created": 0, "owned_by": "slop-tui"}
            self._json(200, {"object": "list", "data": [row]})
        else:
            self._json(404, _error(f"demo server: no route for GET {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.endswith("/chat/completions"):
            self._json(404, _error(f"demo server: no route for POST {self.path}"))
            return
        try:
            body = json.loads(raw)
            step = next_step(body)
        except (ValueError, AttributeError, TypeError) as exc:
            self._json(400, _error(f"demo server: cannot read the request: {exc}"))
            return
        try:
            delay = max(0.0, float(self.headers.get(DELAY_HEADER, DEFAULT_DELAY)))
        except ValueError:
            delay = DEFAULT_DELAY
        try:
            if body.get("stream"):
                self._stream(body, step, delay)
            else:
                self._json(200, _completion(body, step))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client cancelled the turn

    def _stream(self, body: Mapping[str, Any], step: DemoStep, delay: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for event in _events(body, step):
            if delay:
                time.sleep(delay)
            data = event if isinstance(event, str) else json.dumps(event)
            payload = b"data: " + data.encode() + b"\n\n"
            self.wfile.write(b"%X\r\n%s\r\n" % (len(payload), payload))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def _completion(body: Mapping[str, Any], step: DemoStep) -> dict[str, Any]:
    """A non-streamed reply (not used by the app, which always streams)."""
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if step.calls:
        message["tool_calls"] = [
            {
                "id": f"call_demo_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for i, c in enumerate(step.calls)
        ]
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": "tool_calls" if step.calls else "stop",
    }
    return {
        "id": "chatcmpl-demo",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model") or DEMO_MODEL,
        "choices": [choice],
    }


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The stdlib prints a traceback to stderr, which would scribble over the
        # TUI; a client that hangs up (a cancelled turn) is routine anyway.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return
        log.warning("demo server: error while serving %s", client_address, exc_info=True)


class DemoServer:
    """The loopback server; one per process, see `demo_server()`."""

    def __init__(self) -> None:
        self._httpd = _QuietServer(("127.0.0.1", 0), _Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="slop-demo-server", daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


_server: DemoServer | None = None
_server_lock = threading.Lock()


def demo_server() -> DemoServer:
    """The process-wide demo server, started on first call."""
    global _server
    with _server_lock:
        if _server is None:
            _server = DemoServer()
        return _server


DEMO_CONFIG = ProviderConfig(name="demo", kind="demo", model=DEMO_MODEL)


class DemoProvider(OpenAIProvider):
    """The OpenAI adapter pointed at the demo server (strategy `openai`, model `slop-demo`).

    `delay` (seconds between streamed events) defaults to `config.extra["delay"]`
    or 0.01; tests pass 0.
    """

    def __init__(self, config: ProviderConfig | None = None, *, delay: float | None = None):
        config = config or DEMO_CONFIG
        if delay is None:
            delay = float(config.extra.get("delay", DEFAULT_DELAY))
        super().__init__(
            with_overrides(config, api_key="demo"),
            default_headers={DELAY_HEADER: f"{delay:g}"},
            trust_env=False,  # a proxy variable must not divert loopback traffic
        )
        self.delay = delay

    def _extra_body(self) -> dict[str, Any]:
        return {}  # `extra` holds demo settings, not request fields

    def _get_client(self) -> Any:
        if self._client is None:
            # Start the server only when a request is actually made.
            self.config = with_overrides(self.config, base_url=demo_server().base_url)
        return super()._get_client()
