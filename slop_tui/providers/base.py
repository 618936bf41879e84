"""What every provider adapter speaks: stream events, the final reply, one error type.

An adapter turns a provider-neutral `Prompt` into one vendor's request and the
vendor's stream back into `TextDelta` / `ThinkingDelta` items followed by exactly
one `ProviderReply`. Every failure, whatever SDK or transport raised it, leaves
the adapter as a `ProviderError` whose `kind` the retry policy and the
orchestrator can act on without knowing the vendor.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import json
import math
import re
import socket
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from slop_tui import message_parser
from slop_tui.context.prompt import Prompt
from slop_tui.records import STATUS_TOOL_CALL, Message, ToolCall

ERROR_KINDS = (
    "rate_limit",  # 429 / quota exhausted
    "server",  # 5xx
    "network",  # refused, reset, dropped mid-stream
    "timeout",  # connect or read timeout
    "auth",  # 401 / 403
    "bad_request",  # 400 / 422 (often a broken tool history)
    "not_found",  # 404 (unknown model, wrong base URL)
    "malformed",  # unparsable data, or a 200 that is not a stream
    "truncated",  # the stream ended without a finish reason
    "stream_error",  # an error object inside the stream, or anything unexpected
    "config",  # missing key, bad settings: fix the configuration, do not retry
    "deadline",  # the caller's overall deadline (a turn's) passed: never retried
)

# Kinds worth retrying when nothing has been streamed yet (see retry.py).
RETRYABLE_KINDS = frozenset({"rate_limit", "server", "network", "timeout"})


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer text."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of the model's visible reasoning (Gemini thought parts, `reasoning_content`)."""

    text: str


@dataclass(frozen=True, slots=True)
class ProviderReply:
    """The assembled reply; always the last item of a successful stream.

    `payload` is the JSON to store on the assistant row so the same strategy
    family can replay it: OpenAI the whole assistant message object (only when
    there are tool calls), Gemini the list of all model parts (always, because
    answer parts can carry a thought signature too). `complete` is False when
    the model stopped early on purpose (length limit, content filter, safety):
    the text is whole as sent, but the answer may be cut.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    payload: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    complete: bool = True
    thinking: str = ""
    # Part of `completion_tokens` the model spent reasoning (OpenAI
    # `completion_tokens_details.reasoning_tokens`, Gemini thoughts).
    reasoning_tokens: int = 0
    # False when the provider sent no usage at all: the counts are unknown, not zero.
    usage_reported: bool = True
    # Tokens written to an explicit context cache made for this call (Gemini): billed
    # once at the input rate, apart from the call's own usage.
    cache_write_tokens: int = 0
    # One line for the user about the call (a context cache that could not be made).
    notice: str = ""


StreamItem = TextDelta | ThinkingDelta | ProviderReply

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD.

    JSON lets a model send "\\ud800" on its own; Python decodes it into a str
    that cannot be encoded as UTF-8, so storing or printing it would fail and
    the answer would be lost. Everything else passes through unchanged.
    """
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


def valid_item(item: StreamItem) -> StreamItem:
    """A stream item whose texts are valid Unicode (see `valid_text`)."""
    if isinstance(item, ProviderReply):
        text, thinking = valid_text(item.text), valid_text(item.thinking)
        payload = None if item.payload is None else valid_text(item.payload)
        if text is item.text and thinking is item.thinking and payload is item.payload:
            return item
        return replace(item, text=text, thinking=thinking, payload=payload)
    text = valid_text(item.text)
    return item if text is item.text else replace(item, text=text)


class ProviderError(Exception):
    """A failed provider call, classified.

    `output_started` tells the retry policy that deltas were already handed to
    the caller (so a retry would duplicate them); `partial_text` is the answer
    text received before the failure, kept so the ledger can store it as
    interrupted. `unreachable` marks a connection that was refused or a host
    name that did not resolve: the policy retries those only briefly.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        output_started: bool = False,
        partial_text: str = "",
        unreachable: bool = False,
    ) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown provider error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.output_started = output_started
        self.partial_text = partial_text
        self.unreachable = unreachable

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS and not self.output_started

    def __repr__(self) -> str:
        return (
            f"ProviderError({self.kind!r}, {self.message!r}, status={self.status!r}, "
            f"retry_after={self.retry_after!r}, output_started={self.output_started!r})"
        )


class Provider(ABC):
    """One configured endpoint: a name, a payload strategy and a default model.

    `reply_timeout` (seconds, None: no limit) bounds one whole reply, retries
    included (`retry.stream_with_retries` enforces it); the idle deadline on
    data is the adapter's own (`next_event`).
    """

    name: str
    strategy: str  # "openai" | "gemini" | "gemini_gca"
    model: str
    reply_timeout: float | None = None

    @abstractmethod
    def request_body(self, prompt: Prompt, model: str | None = None) -> dict[str, Any]:
        """The exact JSON body `stream` would send for `prompt` (for `/context show --json`)."""

    @abstractmethod
    def stream(self, prompt: Prompt, model: str | None = None) -> AsyncIterator[StreamItem]:
        """Deltas as they arrive, then one `ProviderReply`; raises `ProviderError`."""

    @abstractmethod
    async def list_models(self) -> list[str]:
        """Model names the endpoint offers (raises `ProviderError`)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release the HTTP client; the provider may be used again afterwards."""


def payload_tool_calls(strategy: str, text: str, payload: str | None) -> tuple[ToolCall, ...]:
    """The tool calls of a payload, read by the one message parser.

    Going through `message_parser` means the orchestrator sees exactly the
    calls (and synthesized ids) it will see again when it reads the stored row.
    """
    if payload is None:
        return ()
    row = Message(
        id=0,
        session="",
        group_id=None,
        lane="",
        role="assistant",
        content=text,
        status=STATUS_TOOL_CALL,
        payload=payload,
        strategy=strategy,
    )
    return message_parser.tool_calls(row)


def dumps(value: object) -> str:
    """Compact JSON that keeps non-ASCII text readable in the ledger."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def short(text: object, limit: int = 300) -> str:
    """One line of an error detail, cut to `limit` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


T = TypeVar("T")


class IdleTimeout(Exception):
    """No data arrived from the provider for `seconds` (see `Watchdog`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no data for {seconds:g} s")
        self.seconds = seconds


class DeadlinePassed(Exception):
    """A `Watchdog`'s overall deadline passed during a wait."""


class Watchdog:
    """Deadlines for the many waits of one stream, at the cost of one timer.

    `await watchdog.wait(awaitable)` raises `IdleTimeout` when that one wait
    runs `idle` seconds, and `DeadlinePassed` when it runs past `until` (loop
    time). Only time spent waiting counts: between waits the caller handles an
    event (stores it, draws it), and that is not the provider being slow.

    The adapters wait for every stream event through one: the SDKs' HTTP read
    timeouts count bytes, so a server that sends only SSE keep-alive comments
    (which the SDKs skip without yielding anything) would hold a reply forever.
    `asyncio.timeout` around each wait does the same at ~40 µs per event; this
    costs two assignments per event and moves its one timer when it fires early.
    Call `close` when the stream ends.
    """

    def __init__(self, idle: float | None = None, until: float | None = None) -> None:
        self.idle = idle
        self.until = until
        self._since: float | None = None  # when the current wait began
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task | None = None
        self._fired: Exception | None = None

    async def wait(self, awaitable: Awaitable[T]) -> T:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.until is not None and now >= self.until:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise DeadlinePassed()
        self._since = now
        if self._handle is None:
            self._task = asyncio.current_task()
            self._handle = loop.call_at(self._due(), self._check, loop)
        try:
            return await awaitable
        except asyncio.CancelledError:
            fired, self._fired = self._fired, None
            if fired is not None and self._task is not None and self._task.uncancel() == 0:
                raise fired from None
            raise
        finally:
            self._since = None

    def _due(self) -> float:
        due = math.inf if self.until is None else self.until
        if self.idle is not None and self._since is not None:
            due = min(due, self._since + self.idle)
        return due

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        self._handle = None
        if self._since is None or self._task is None:
            return  # between waits: the next wait sets the timer again
        now = loop.time()
        if self.until is not None and now >= self.until:
            self._fired = DeadlinePassed()
        elif self.idle is not None and now >= self._since + self.idle:
            self._fired = IdleTimeout(self.idle)
        else:  # the wait began after the timer was set: move it
            self._handle = loop.call_at(self._due(), self._check, loop)
            return
        self._task.cancel()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def idle_error(provider: str, exc: IdleTimeout, **common: Any) -> ProviderError:
    return provider_error(
        "timeout",
        provider,
        detail=f"no data for {exc.seconds:g} s (the timeout setting; keep-alive comments "
        "do not count)",
        **common,
    )


_UNREACHABLE_ERRNOS = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH}


def is_unreachable(exc: BaseException) -> bool:
    """True when the chain of `exc` holds a refused connection or a host name that
    did not resolve (retrying soon rarely helps: nothing listens there)."""
    seen: set[int] = set()
    item: BaseException | None = exc
    while item is not None and id(item) not in seen:
        seen.add(id(item))
        if isinstance(item, ConnectionRefusedError | socket.gaierror):
            return True
        if isinstance(item, OSError) and item.errno in _UNREACHABLE_ERRNOS:
            return True
        item = item.__cause__ or item.__context__
    return False


def is_bad_url(exc: BaseException) -> bool:
    """True for the HTTP stack's refusal of a URL itself (`file://`, no scheme)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    cause = exc.__cause__
    if cause is not None:
        names |= {cls.__name__ for cls in type(cause).__mro__}
    return bool(names & {"UnsupportedProtocol", "InvalidURL"})


_TIMEOUT_CLASSES = {
    "TimeoutException",  # httpx / httpx2 (ReadTimeout, ConnectTimeout, WriteTimeout, PoolTimeout)
    "ServerTimeoutError",  # aiohttp, should it ever become google-genai's transport
    "TimeoutError",  # builtin (asyncio.TimeoutError is the same class on 3.11)
}
_NETWORK_CLASSES = {
    "TransportError",  # httpx / httpx2: ConnectError, RemoteProtocolError, ReadError, ...
    "ClientConnectionError",  # aiohttp
    "ClientPayloadError",  # aiohttp: body cut short
    "ConnectionError",  # builtin: refused, reset, broken pipe
}


def transport_kind(exc: BaseException) -> str | None:
    """`timeout` or `network` for a transport exception of any HTTP stack, else None.

    Matched by class name along the MRO so the mapping survives a change of
    transport (google-genai switches to aiohttp whenever it is importable)
    without importing any of them.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _TIMEOUT_CLASSES:
        return "timeout"
    if names & _NETWORK_CLASSES:
        return "network"
    return None


def status_kind(status: int) -> str:
    """The error kind of an HTTP status >= 400."""
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server"
    return "bad_request"


_TEMPLATES = {
    "rate_limit": "{label} is rate-limiting requests{code}{detail}; wait a moment and try again.",
    "server": "{label} had a server error{code}{detail}; try again later.",
    "auth": "{label} refused the credentials{code}{detail}; check the API key.",
    "bad_request": "{label} rejected the request as invalid{code}{detail}.",
    "not_found": (
        "{label} does not know this model or URL{code}{detail}; check the model name and base URL."
    ),
    "timeout": "{label} did not answer in time{detail}.",
    "network": "{label} could not be reached{detail}; check the base URL and the connection.",
    "malformed": "{label} sent a response that could not be parsed{detail}.",
    "truncated": "{label} ended the stream before the reply was finished{detail}.",
    "stream_error": "{label} reported an error in the middle of the reply{detail}.",
    "config": "{label} is not configured{detail}.",
}


def provider_error(
    kind: str,
    provider: str,
    *,
    status: int | None = None,
    detail: object = "",
    retry_after: float | None = None,
    output_started: bool = False,
    partial_text: str = "",
    message: str | None = None,
    unreachable: bool = False,
) -> ProviderError:
    """A `ProviderError` whose message is one sentence naming the provider."""
    if message is None:
        text = short(detail).rstrip(".") if detail else ""
        message = _TEMPLATES[kind].format(
            label=f"The {provider} provider",
            code=f" (HTTP {status})" if status else "",
            detail=f": {text}" if text else "",
        )
    return ProviderError(
        kind,
        message,
        status=status,
        retry_after=retry_after,
        output_started=output_started,
        partial_text=partial_text,
        unreachable=unreachable,
    )
