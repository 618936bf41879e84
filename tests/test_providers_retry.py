"""The one retry policy: backoff, server hints, and `stream_with_retries` on real SDKs."""

from __future__ import annotations

import pytest

from slop_tui.providers import ProviderError, RetryPolicy, retry_delay, stream_with_retries
from slop_tui.providers.gemini_provider import GeminiProvider
from slop_tui.providers.openai_provider import OpenAIProvider
from slop_tui.providers.retry import (
    google_retry_delay,
    parse_duration,
    parse_ratelimit_reset,
    parse_retry_after,
    retry_after_from_headers,
)
from tests.fakeserver import FakeLLMServer, Reply
from tests.test_providers_support import collect, gemini_config, openai_config, prompt, user

NOW = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def _err(kind: str, retry_after: float | None = None, started: bool = False) -> ProviderError:
    return ProviderError(kind, "x", retry_after=retry_after, output_started=started)


# --- retry_delay ----------------------------------------------------------------------


def test_exponential_backoff_from_two_seconds() -> None:
    policy = RetryPolicy()
    delays = [retry_delay(_err("server"), n, policy) for n in range(7)]
    assert delays == [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, None]


def test_server_hint_raises_the_wait() -> None:
    policy = RetryPolicy()
    assert retry_delay(_err("rate_limit", 3.0), 0, policy) == 3.0
    assert retry_delay(_err("rate_limit", 3.0), 2, policy) == 8.0  # backoff already longer


def test_a_wait_beyond_max_delay_is_not_retried() -> None:
    assert retry_delay(_err("rate_limit", 3600.0), 0, RetryPolicy()) is None


@pytest.mark.parametrize("kind", ["rate_limit", "server", "network", "timeout"])
def test_retryable_kinds_only_before_output(kind: str) -> None:
    assert retry_delay(_err(kind), 0, RetryPolicy()) == 2.0
    assert retry_delay(_err(kind, started=True), 0, RetryPolicy()) is None


@pytest.mark.parametrize(
    "kind",
    [
        "auth",
        "bad_request",
        "not_found",
        "malformed",
        "truncated",
        "stream_error",
        "config",
        "deadline",
    ],
)
def test_other_kinds_are_never_retried(kind: str) -> None:
    assert retry_delay(_err(kind), 0, RetryPolicy()) is None


# --- header and body parsing ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("0", 0.0),
        ("-4", 0.0),
        ("Tue, 14 Nov 2023 22:13:50 GMT", 30.0),
        ("Tue, 14 Nov 2023 22:00:00 GMT", 0.0),  # in the past
        ("soon", None),
        ("", None),
        (None, None),
        ("nan", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1700000030", 30.0),  # epoch timestamp
        ("1700000030.5", 30.5),
        ("1699999990", 0.0),  # already passed
        ("12", 12.0),  # relative seconds
        ("0.25", 0.25),
        ("6m0s", 360.0),  # OpenAI x-ratelimit-reset-* style
        ("20ms", 0.02),
        ("later", None),
        (None, None),
    ],
)
def test_parse_ratelimit_reset(value: str | None, expected: float | None) -> None:
    result = parse_ratelimit_reset(value, NOW)
    assert result == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.421239755s", 0.421239755),
        ("2.923s", 2.923),
        ("1m3s", 63.0),
        ("1h", 3600.0),
        ("500ms", 0.5),
        ("19s", 19.0),
        ("3", None),
        ("s", None),
        ("1x", None),
        (12, None),
    ],
)
def test_parse_duration(value: object, expected: float | None) -> None:
    result = parse_duration(value)
    assert result == (pytest.approx(expected) if expected is not None else None)


def test_google_retry_delay_takes_the_longest_hint() -> None:
    body = {
        "error": {
            "code": 429,
            "message": "Quota exceeded. Your quota will reset after 19s.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.421239755s"},
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "RATE_LIMIT_EXCEEDED",
                    "metadata": {"quotaResetDelay": "2.923s"},
                },
            ],
        }
    }
    assert google_retry_delay(body) == 19.0
    body["error"]["message"] = "Quota exceeded."
    assert google_retry_delay(body) == pytest.approx(2.923)
    body["error"]["details"][1]["metadata"]["quotaResetDelay"] = "1m3s"
    assert google_retry_delay(body["error"]) == 63.0  # the inner object works too
    del body["error"]["details"][1]
    assert google_retry_delay(body) == pytest.approx(0.421239755)


@pytest.mark.parametrize(
    "body", [None, "text", [], {}, {"error": {"message": "nope"}}, {"error": {"details": "x"}}]
)
def test_google_retry_delay_without_hints(body: object) -> None:
    assert google_retry_delay(body) is None


def test_retry_after_from_headers() -> None:
    assert retry_after_from_headers({"Retry-After": "2", "retry-after-ms": "2500"}, 429) == 2.5
    reset = {"x-ratelimit-reset": "1700000040"}
    assert retry_after_from_headers(reset, 429, NOW) == 40.0
    assert retry_after_from_headers(reset, 503, NOW) is None  # only meaningful for 429
    assert retry_after_from_headers({}, 429) is None
    assert retry_after_from_headers({"retry-after-ms": "junk"}, 429) is None


# --- stream_with_retries on real SDKs --------------------------------------------------------


class FakeSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_openai_429_with_retry_after_then_success(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Reply(status=429, headers={"retry-after": "3"}), Reply(text="finally"))
    sleep, notes = FakeSleep(), []
    provider = OpenAIProvider(openai_config(fake_llm.openai_base_url))
    try:
        out = await collect(
            stream_with_retries(
                provider,
                prompt(user("hi")),
                sleep=sleep,
                on_retry=lambda err, delay, attempt: notes.append((err.kind, delay, attempt)),
            )
        )
    finally:
        await provider.aclose()
    assert out.reply.text == "finally"
    assert sleep.delays == [3.0] and sleep.delays[0] >= 3
    assert notes == [("rate_limit", 3.0, 1)]
    assert len(fake_llm.chat_requests) == 2


async def test_gemini_503_then_success_with_async_on_retry(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Reply(status=503), Reply(text="back"))
    sleep, notes = FakeSleep(), []

    async def on_retry(err: ProviderError, delay: float, attempt: int) -> None:
        notes.append((err.kind, delay, attempt))

    provider = GeminiProvider(gemini_config(fake_llm.gemini_base_url))
    try:
        out = await collect(
            stream_with_retries(provider, prompt(user("hi")), sleep=sleep, on_retry=on_retry)
        )
    finally:
        await provider.aclose()
    assert out.reply.text == "back"
    assert sleep.delays == [2.0] and notes == [("server", 2.0, 1)]


async def test_retries_are_exhausted(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(*[Reply(status=500) for _ in range(3)])
    sleep = FakeSleep()
    provider = OpenAIProvider(openai_config(fake_llm.openai_base_url))
    try:
        out = await collect(
            stream_with_retries(
                provider, prompt(user("hi")), policy=RetryPolicy(max_retries=2), sleep=sleep
            )
        )
    finally:
        await provider.aclose()
    assert out.error is not None and out.error.kind == "server"
    assert sleep.delays == [2.0, 4.0]
    assert len(fake_llm.chat_requests) == 3


async def test_no_retry_once_output_started(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Reply(text="abcdefghijkl", chunk_size=4, disconnect_after=3))
    sleep = FakeSleep()
    provider = OpenAIProvider(openai_config(fake_llm.openai_base_url))
    try:
        out = await collect(stream_with_retries(provider, prompt(user("hi")), sleep=sleep))
    finally:
        await provider.aclose()
    assert out.error is not None and out.error.kind == "network" and out.error.output_started
    assert out.text == "abcdefgh" == out.error.partial_text
    assert sleep.delays == [] and len(fake_llm.chat_requests) == 1


async def test_no_retry_for_a_bad_request(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Reply(status=400))
    sleep = FakeSleep()
    provider = GeminiProvider(gemini_config(fake_llm.gemini_base_url))
    try:
        out = await collect(stream_with_retries(provider, prompt(user("hi")), sleep=sleep))
    finally:
        await provider.aclose()
    assert out.error is not None and out.error.kind == "bad_request"
    assert sleep.delays == []


async def test_the_callers_deadline_stops_a_reply_and_a_retry(fake_llm: FakeLLMServer) -> None:
    """`until` (a turn's deadline) before the reply's own ends the stream as a `deadline`
    error with the text so far; a retry whose wait would pass it is not made."""
    import asyncio

    fake_llm.enqueue(Reply(text="x" * 100, chunk_size=1, delay=0.05))
    provider = OpenAIProvider(openai_config(fake_llm.openai_base_url))  # reply_timeout 1800 s
    loop = asyncio.get_running_loop()
    try:
        start = loop.time()
        out = await collect(stream_with_retries(provider, prompt(user("hi")), until=start + 1.0))
        took = loop.time() - start
        assert out.error is not None and out.error.kind == "deadline", out.error
        assert "caller's deadline" in out.error.message and out.error.output_started
        assert out.error.partial_text == out.text and set(out.text) == {"x"}
        assert 1.0 <= took < 3.0, took
        fake_llm.enqueue(Reply(status=503))
        sleep = FakeSleep()
        out = await collect(
            stream_with_retries(provider, prompt(user("hi")), sleep=sleep, until=loop.time() + 1.5)
        )
        assert out.error is not None and out.error.kind == "server" and sleep.delays == []
    finally:
        await provider.aclose()


# --- limits per kind, and the watchdog behind both deadlines ------------------------------


def test_refused_and_timeouts_are_retried_once_config_errors_never() -> None:
    policy = RetryPolicy()
    refused = ProviderError("network", "x", unreachable=True)
    assert retry_delay(refused, 0, policy) == 2.0 and retry_delay(refused, 1, policy) is None
    assert retry_delay(_err("timeout"), 0, policy) == 2.0
    assert retry_delay(_err("timeout"), 1, policy) is None
    assert retry_delay(_err("network"), 5, policy) is not None  # a reset: the full 6
    assert retry_delay(_err("config"), 0, policy) is None


async def test_the_watchdog_ends_a_wait_that_runs_past_its_idle_time() -> None:
    import asyncio

    from slop_tui.providers.base import IdleTimeout, Watchdog

    never = asyncio.Event()
    watchdog = Watchdog(idle=0.05)
    try:
        with pytest.raises(IdleTimeout) as info:
            await watchdog.wait(never.wait())
        assert info.value.seconds == 0.05
        # Time between waits is the caller's, not the provider's: it does not count.
        assert await watchdog.wait(asyncio.sleep(0, "first")) == "first"
        await asyncio.sleep(0.12)
        assert await watchdog.wait(asyncio.sleep(0.01, "second")) == "second"
        assert asyncio.current_task().cancelling() == 0  # nothing left pending
    finally:
        watchdog.close()


async def test_the_watchdog_deadline_and_a_real_cancel() -> None:
    import asyncio

    from slop_tui.providers.base import DeadlinePassed, Watchdog

    loop = asyncio.get_running_loop()
    never = asyncio.Event()
    watchdog = Watchdog(idle=10, until=loop.time() + 0.05)
    with pytest.raises(DeadlinePassed):
        await watchdog.wait(never.wait())
    with pytest.raises(DeadlinePassed):  # past the deadline: refused at once
        await watchdog.wait(asyncio.sleep(0))
    watchdog.close()

    # A cancellation from outside stays a cancellation.
    patient = Watchdog(idle=10)
    task = asyncio.ensure_future(patient.wait(never.wait()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    patient.close()
