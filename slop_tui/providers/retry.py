"""One retry policy for every provider, and the header parsing it needs.

Both SDKs have their own retries switched off (OpenAI `max_retries=0`,
google-genai never retries by default) so that this module alone decides:
rate limits, 5xx, dropped connections and timeouts are retried with
exponential backoff, but only before any output was streamed, because a retry
after that would show the user the same text twice. A server's own hint
(`Retry-After`, `X-RateLimit-Reset`, Google `RetryInfo`) raises the wait.

Errors a retry rarely fixes are retried once at most: a refused connection or a
host name that does not resolve (a local server that is restarting gets its 2 s;
a port where nothing listens fails in about 2 s instead of two minutes), and a
timeout (a server that accepted the request and then sent nothing for the whole
idle deadline). A configuration error (no key, a base URL that is not http(s))
is never retried. Every attempt, wait and stream together stay within the
provider's `reply_timeout`.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from slop_tui.context.prompt import Prompt
from slop_tui.providers.base import (
    RETRYABLE_KINDS,
    DeadlinePassed,
    Provider,
    ProviderError,
    StreamItem,
    TextDelta,
    Watchdog,
    valid_item,
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Up to `max_retries` retries waiting base*2^attempt seconds (2, 4, … 64 s).

    A wait longer than `max_delay` (a server asking for an hour on a daily
    quota) is not retried: a clear error beats a silent hour-long pause.
    """

    max_retries: int = 6
    base_delay: float = 2.0
    max_delay: float = 120.0
    unreachable_retries: int = 1  # refused connection, unknown host
    timeout_retries: int = 1  # a whole idle deadline without data


def retry_delay(error: ProviderError, attempt: int, policy: RetryPolicy) -> float | None:
    """Seconds to wait before retry number `attempt + 1`, or None to give up.

    `attempt` counts the retries already made (0 for the first failure).
    """
    if error.kind not in RETRYABLE_KINDS or error.output_started:
        return None
    limit = policy.max_retries
    if error.unreachable:
        limit = min(limit, policy.unreachable_retries)
    if error.kind == "timeout":
        limit = min(limit, policy.timeout_retries)
    if attempt >= limit:
        return None
    delay = min(policy.base_delay * (2**attempt), policy.max_delay)
    if error.retry_after is not None:
        delay = max(delay, error.retry_after)
    return None if delay > policy.max_delay else delay


OnRetry = Callable[[ProviderError, float, int], Awaitable[None] | None]


async def stream_with_retries(
    provider: Provider,
    prompt: Prompt,
    model: str | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    on_retry: OnRetry | None = None,
    until: float | None = None,
) -> AsyncIterator[StreamItem]:
    """`provider.stream` re-run on retryable errors raised before any output.

    `on_retry(error, delay, attempt)` (sync or async; attempt counts from 1)
    runs before each wait so the caller can say why it is waiting. Every item
    comes out with valid Unicode texts (`valid_item`): a lone surrogate in
    the model's text must not lose the answer when it is stored. The whole
    reply, retries and waits included, ends at `provider.reply_timeout`, and
    at the caller's deadline `until` (loop time; a turn's), whichever is first:
    that one is a `deadline` error, with the text shown so far.
    """
    policy = policy or RetryPolicy()
    loop = asyncio.get_running_loop()
    limit = provider.reply_timeout
    deadline = loop.time() + limit if limit else None
    if until is not None and (deadline is None or until < deadline):
        deadline, limit = until, None  # the caller's deadline comes first
    attempt = 0
    watchdog = Watchdog(until=deadline)
    while True:
        shown: list[str] = []  # the answer text handed out by this attempt
        yielded = False
        stream = provider.stream(prompt, model)
        try:
            while True:
                try:
                    item = await watchdog.wait(anext(stream, None))
                except DeadlinePassed:
                    raise _reply_timeout(provider, limit, yielded, shown) from None
                if item is None:
                    return
                item = valid_item(item)
                if isinstance(item, TextDelta):
                    shown.append(item.text)
                yielded = True
                yield item
        except ProviderError as err:
            # Belt and braces: never retry once the caller has seen output,
            # even if an adapter forgot to set output_started.
            delay = None if yielded else retry_delay(err, attempt, policy)
            if delay is None or (deadline is not None and loop.time() + delay >= deadline):
                raise
            attempt += 1
            if on_retry is not None:
                result = on_retry(err, delay, attempt)
                if inspect.isawaitable(result):
                    await result
            await sleep(delay)
        finally:
            watchdog.close()
            await stream.aclose()


def _reply_timeout(
    provider: Provider, limit: float | None, started: bool, shown: list[str]
) -> ProviderError:
    if limit is None:  # the caller's deadline passed first
        return ProviderError(
            "deadline",
            f"The {provider.name} provider's reply was stopped at the caller's deadline.",
            output_started=started,
            partial_text="".join(shown),
        )
    return ProviderError(
        "timeout",
        f"The {provider.name} provider did not finish its reply within {limit:g} s "
        "(the reply_timeout setting); it was stopped.",
        output_started=started,
        partial_text="".join(shown),
    )


# --- header and error-body parsing ------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_QUOTA_RESET = re.compile(r"reset after\s+((?:\d+(?:\.\d+)?(?:ms|us|µs|ns|h|m|s))+)")


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def parse_duration(value: object) -> float | None:
    """A Go/protobuf duration (`"0.42s"`, `"1m3s"`, `"20ms"`, `"1h"`) in seconds."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        return None
    return _finite(total)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After`: seconds (fractions allowed) or an HTTP date; never negative."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        finite = _finite(seconds)
        return None if finite is None else max(0.0, finite)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def parse_ratelimit_reset(value: str | None, now: float | None = None) -> float | None:
    """`X-RateLimit-Reset`: an epoch timestamp (> 1e9) or relative seconds.

    OpenAI's `x-ratelimit-reset-*` durations (`"6m0s"`, `"20ms"`) are accepted too.
    """
    if value is None:
        return None
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        return parse_duration(text)
    if not math.isfinite(number):
        return None
    if number > 1e9:
        now = time.time() if now is None else now
        return max(0.0, number - now)
    return max(0.0, number)


def google_retry_delay(error_body: object) -> float | None:
    """The longest wait a Google error body asks for, or None.

    Looks at `details[].retryDelay` (google.rpc.RetryInfo),
    `details[].metadata.quotaResetDelay` (google.rpc.ErrorInfo) and the text
    "Your quota will reset after 19s." in the message. Accepts the whole body
    (`{"error": {...}}`) or the inner error object.
    """
    if not isinstance(error_body, Mapping):
        return None
    inner = error_body.get("error")
    err = inner if isinstance(inner, Mapping) else error_body
    found: list[float] = []
    details = err.get("details")
    for detail in details if isinstance(details, list) else []:
        if not isinstance(detail, Mapping):
            continue
        delay = parse_duration(detail.get("retryDelay"))
        if delay is not None:
            found.append(delay)
        metadata = detail.get("metadata")
        if isinstance(metadata, Mapping):
            delay = parse_duration(metadata.get("quotaResetDelay"))
            if delay is not None:
                found.append(delay)
    message = err.get("message")
    if isinstance(message, str):
        for match in _QUOTA_RESET.finditer(message):
            delay = parse_duration(match.group(1).rstrip("."))
            if delay is not None:
                found.append(delay)
    return max(found) if found else None


def retry_after_from_headers(
    headers: Mapping[str, str] | None, status: int | None, now: float | None = None
) -> float | None:
    """The longest wait the response headers ask for (`retry-after-ms`,
    `retry-after`, and for 429 `x-ratelimit-reset`)."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    found: list[float] = []
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            found.append(value)
    after = parse_retry_after(lower.get("retry-after"), now)
    if after is not None:
        found.append(after)
    if status == 429:
        reset = parse_ratelimit_reset(lower.get("x-ratelimit-reset"), now)
        if reset is not None:
            found.append(reset)
    return max(found) if found else None
