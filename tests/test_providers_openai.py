"""The OpenAI adapter driven through the real `openai` SDK against the fake server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from slop_tui import message_parser
from slop_tui.providers import ProviderConfig, ProviderError, TextDelta
from slop_tui.providers.openai_provider import OpenAIProvider
from slop_tui.records import STATUS_TOOL_CALL, Message, ToolCall
from tests.fakeserver import FakeLLMServer, FakeToolCall, Reply, wait_for
from tests.test_providers_support import (
    WEATHER,
    assistant,
    collect,
    openai_config,
    prompt,
    refused_url,
    tool,
    user,
)


@pytest.fixture
async def provider(fake_llm: FakeLLMServer) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(openai_config(fake_llm.openai_base_url))
    yield p
    await p.aclose()


def _row(payload: str | None, text: str = "") -> Message:
    return Message(
        id=1,
        session="s",
        group_id=1,
        lane="main",
        role="assistant",
        content=text,
        status=STATUS_TOOL_CALL,
        payload=payload,
        strategy="openai",
    )


async def test_streams_text(fake_llm: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake_llm.enqueue(Reply(text="Hello there, how are you today?"))
    out = await collect(provider.stream(prompt(user("hi"))))
    deltas = [i for i in out.items if isinstance(i, TextDelta)]
    assert len(deltas) > 1  # really streamed, not one blob
    assert out.text == "Hello there, how are you today?"
    reply = out.reply
    assert reply.text == out.text
    assert (reply.finish_reason, reply.complete, reply.tool_calls, reply.payload) == (
        "stop",
        True,
        (),
        None,
    )
    assert fake_llm.last.headers["x-stainless-retry-count"] == "0"


async def test_tool_call_payload_round_trips_through_the_parser(
    fake_llm: FakeLLMServer, provider: OpenAIProvider
) -> None:
    call = FakeToolCall("get_weather", {"city": "Paris"}, id="call_abc")
    fake_llm.enqueue(Reply(text="Let me check.", tool_calls=[call]))
    reply = (await collect(provider.stream(prompt(user("weather?"))))).reply
    assert reply.tool_calls == (ToolCall("call_abc", "get_weather", {"city": "Paris"}),)
    assert reply.finish_reason == "tool_calls" and reply.complete
    assert json.loads(reply.payload or "") == {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {
                "id": "call_abc",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert message_parser.tool_calls(_row(reply.payload, reply.text)) == reply.tool_calls


async def test_parallel_tool_calls_keep_their_order(
    fake_llm: FakeLLMServer, provider: OpenAIProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            tool_calls=[
                FakeToolCall("get_weather", {"city": "Paris"}, arg_chunks=4),
                FakeToolCall("get_weather", {"city": "Oslo"}, arg_chunks=2),
                FakeToolCall("list_directory", {"path": "."}),
            ]
        )
    )
    reply = (await collect(provider.stream(prompt(user("go"))))).reply
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Oslo"}),
        ("list_directory", {"path": "."}),
    ]
    assert len({c.id for c in reply.tool_calls}) == 3
    assert json.loads(reply.payload or "")["content"] is None
    assert message_parser.tool_calls(_row(reply.payload)) == reply.tool_calls


async def test_usage_with_cached_tokens(fake_llm: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake_llm.enqueue(Reply(text="ok", prompt_tokens=42, completion_tokens=7, cached_tokens=30))
    reply = (await collect(provider.stream(prompt(user("hi"))))).reply
    assert (reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens) == (42, 7, 30)
    assert fake_llm.last.body["stream_options"] == {"include_usage": True}


async def test_request_body_is_exact_and_matches_what_was_sent(
    fake_llm: FakeLLMServer, provider: OpenAIProvider
) -> None:
    calls = (
        ToolCall("call_1", "get_weather", {"city": "Paris"}),
        ToolCall("call_2", "get_weather", {"city": "Oslo"}),
    )
    p = prompt(
        user("Weather in Paris and Oslo?"),
        assistant("Checking both.", calls),
        tool("call_1", "get_weather", "sunny"),
        tool("call_2", "get_weather", "rain"),
        assistant("Paris is sunny, Oslo rainy."),
        user("Thanks"),
    )
    fake_llm.enqueue(Reply(text="You're welcome."))
    await collect(provider.stream(p))
    sent = fake_llm.last.body
    assert sent == {
        "model": "fake-model",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris and Oslo?"},
            {
                "role": "assistant",
                "content": "Checking both.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
            {"role": "assistant", "content": "Paris is sunny, Oslo rainy."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": WEATHER.description,
                    "parameters": WEATHER.parameters,
                },
            }
        ],
    }
    assert provider.request_body(p) == sent


async def test_native_message_is_replayed_verbatim_and_extra_fields_sent(
    fake_llm: FakeLLMServer,
) -> None:
    native = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_x",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
            }
        ],
    }
    p = prompt(
        user("Rome?"),
        assistant("", (ToolCall("call_x", "get_weather", {"city": "Rome"}),), native=native),
        tool("call_x", "get_weather", "hot"),
        system="",
        tools=(),
    )
    provider = OpenAIProvider(openai_config(fake_llm.openai_base_url, temperature=0.2))
    try:
        fake_llm.enqueue(Reply(text="Hot."))
        await collect(provider.stream(p, model="other-model"))
    finally:
        await provider.aclose()
    sent = fake_llm.last.body
    assert sent["model"] == "other-model" and sent["temperature"] == 0.2
    assert "tools" not in sent
    assert sent["messages"][1] == native  # argument string byte-identical
    assert provider.request_body(p, model="other-model") == sent


def _chunk(content: str) -> bytes:
    event = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


@pytest.mark.parametrize(
    ("reply", "kind", "status", "started", "partial"),
    [
        (Reply(status=429, headers={"retry-after": "3"}), "rate_limit", 429, False, ""),
        (Reply(status=500), "server", 500, False, ""),
        (Reply(status=503), "server", 503, False, ""),
        (Reply(status=401), "auth", 401, False, ""),
        (Reply(status=403), "auth", 403, False, ""),
        (Reply(status=400, error_message="bad tool history"), "bad_request", 400, False, ""),
        (Reply(status=422), "bad_request", 422, False, ""),
        (Reply(status=404), "not_found", 404, False, ""),
        (Reply(raw=[_chunk("Hi"), b"data: {not json\n\n"]), "malformed", None, True, "Hi"),
        (
            Reply(raw=b'{"hello": 1}', content_type="application/json"),
            "malformed",
            None,
            False,
            "",
        ),
        (Reply(text="partial answer", finish_reason=""), "truncated", None, True, "partial answer"),
        (
            Reply(text="abcdefghijklmnop", chunk_size=4, disconnect_after=3),
            "network",
            None,
            True,
            "abcdefgh",
        ),
        (
            Reply(text="Hi", in_stream_error="overloaded mid-stream"),
            "stream_error",
            None,
            True,
            "Hi",
        ),
    ],
    ids=[
        "429",
        "500",
        "503",
        "401",
        "403",
        "400",
        "422",
        "404",
        "malformed-data-line",
        "non-sse-200",
        "no-finish-reason",
        "disconnect",
        "in-stream-error",
    ],
)
async def test_failures_are_mapped(
    fake_llm: FakeLLMServer,
    provider: OpenAIProvider,
    reply: Reply,
    kind: str,
    status: int | None,
    started: bool,
    partial: str,
) -> None:
    fake_llm.enqueue(reply)
    out = await collect(provider.stream(prompt(user("hi"))))
    err = out.error
    assert err is not None, out.items
    assert (err.kind, err.status, err.output_started, err.partial_text) == (
        kind,
        status,
        started,
        partial,
    )
    assert "openai provider" in err.message and "\n" not in err.message
    assert out.text == partial  # what was shown is what the error keeps
    assert len(fake_llm.chat_requests) == 1  # the SDK's own retries are off
    if kind == "rate_limit":
        assert err.retry_after == 3.0 and err.retryable
    if reply.error_message:
        assert reply.error_message in err.message
    if reply.in_stream_error:
        assert "overloaded mid-stream" in err.message


async def test_connection_refused(fake_llm: FakeLLMServer) -> None:
    provider = OpenAIProvider(openai_config(refused_url("/v1")))
    try:
        out = await collect(provider.stream(prompt(user("hi"))))
    finally:
        await provider.aclose()
    assert out.error is not None
    assert (out.error.kind, out.error.output_started, out.error.retryable) == (
        "network",
        False,
        True,
    )


async def test_read_timeout(fake_llm: FakeLLMServer) -> None:
    provider = OpenAIProvider(openai_config(fake_llm.openai_base_url, timeout=1.0))
    # 1 s leaves the request time to reach the server on a loaded machine; the reply
    # still comes three times later.
    fake_llm.enqueue(Reply(text="slow", delay=3.0))
    try:
        out = await collect(provider.stream(prompt(user("hi"))))
    finally:
        await provider.aclose()
    assert out.error is not None and out.error.kind == "timeout"


async def test_missing_key_is_a_config_error() -> None:
    provider = OpenAIProvider(ProviderConfig(name="openai", kind="openai", model="m"))
    with pytest.raises(ProviderError) as info:
        async for _ in provider.stream(prompt(user("hi"))):
            pass
    assert info.value.kind == "config" and "OPENAI_API_KEY" in info.value.message
    assert provider.request_body(prompt(user("hi")))["model"] == "m"  # shown without a key


async def test_cancel_mid_stream_closes_it_and_the_next_request_works(
    fake_llm: FakeLLMServer, provider: OpenAIProvider
) -> None:
    first = asyncio.Event()
    seen: list[str] = []

    async def consume() -> None:
        async for item in provider.stream(prompt(user("long"))):
            if isinstance(item, TextDelta):
                seen.append(item.text)
                first.set()

    fake_llm.enqueue(Reply(text=["tok "] * 40, delay=0.05))
    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 0 < len(seen) < 40
    # The HTTP stream was really closed: the server's next write failed.
    await wait_for(None, lambda: fake_llm.chat_requests[0].disconnected, timeout=5)

    fake_llm.enqueue(Reply(text="fresh"))
    out = await collect(provider.stream(prompt(user("again"))))
    assert out.reply.text == "fresh"


async def test_list_models(fake_llm: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake_llm.models = ["zeta", "alpha"]
    assert await provider.list_models() == ["alpha", "zeta"]
