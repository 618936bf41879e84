"""The Gemini adapter driven through the real `google-genai` SDK against the fake server."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from slop_tui import message_parser
from slop_tui.context.isolation import isolate
from slop_tui.context.prompt import Layer, Prompt
from slop_tui.providers import ProviderConfig, ProviderError, TextDelta, ThinkingDelta
from slop_tui.providers.gemini_payload import DUMMY_THOUGHT_SIGNATURE
from slop_tui.providers.gemini_provider import GeminiProvider
from slop_tui.records import STATUS_TOOL_CALL, Message, ToolCall
from tests.fakeserver import FakeLLMServer, FakeToolCall, Reply, b64, wait_for
from tests.test_providers_support import (
    WEATHER,
    assistant,
    collect,
    gemini_config,
    prompt,
    refused_url,
    tool,
    user,
)


@pytest.fixture
async def provider(fake_llm: FakeLLMServer) -> AsyncIterator[GeminiProvider]:
    p = GeminiProvider(gemini_config(fake_llm.gemini_base_url))
    yield p
    await p.aclose()


def _row(id: int, role: str, content: str, **kw: Any) -> Message:
    return Message(id=id, session="s", group_id=1, lane="main", role=role, content=content, **kw)


async def test_streams_text_and_thoughts(fake_llm: FakeLLMServer, provider: GeminiProvider) -> None:
    fake_llm.enqueue(Reply(text="Hello from Gemini.", thinking="hmm, greet"))
    out = await collect(provider.stream(prompt(user("hi"), strategy="gemini")))
    kinds = [type(i).__name__ for i in out.items[:-1]]
    assert kinds[0] == "ThinkingDelta" and "TextDelta" in kinds
    assert out.thinking == "hmm, greet" and out.text == "Hello from Gemini."
    reply = out.reply
    assert (reply.text, reply.thinking, reply.finish_reason, reply.complete) == (
        "Hello from Gemini.",
        "hmm, greet",
        "STOP",
        True,
    )
    # Streamed pieces are stored as one part per run; thoughts stay separate.
    assert json.loads(reply.payload or "") == [
        {"text": "hmm, greet", "thought": True},
        {"text": "Hello from Gemini."},
    ]
    assert reply.tool_calls == ()
    assert fake_llm.last.query == {"alt": ["sse"]}


async def test_tool_call_with_signature_replays_byte_identically(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    signature = b64(b"opaque-signature-bytes")
    fake_llm.enqueue(
        Reply(
            text="Checking.",
            tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})],
            thought_signature=signature,
        )
    )
    first = prompt(user("Weather in Paris?"), strategy="gemini")
    reply = (await collect(provider.stream(first))).reply
    assert reply.tool_calls == (ToolCall("get_weather#0", "get_weather", {"city": "Paris"}),)
    parts = json.loads(reply.payload or "")
    assert parts == [
        {"text": "Checking."},
        {
            "function_call": {"name": "get_weather", "args": {"city": "Paris"}},
            "thought_signature": signature,
        },
    ]

    # Store it the way the ledger does, run it through isolation, send the next request.
    rows = [
        _row(1, "user", "Weather in Paris?"),
        _row(
            2,
            "assistant",
            reply.text,
            status=STATUS_TOOL_CALL,
            payload=reply.payload,
            strategy="gemini",
        ),
        _row(
            3,
            "tool",
            "sunny",
            tool_call_id="get_weather#0",
            tool_name="get_weather",
            strategy="gemini",
        ),
    ]
    assert message_parser.tool_calls(rows[1]) == reply.tool_calls
    isolated = isolate(rows, "gemini")
    second = Prompt(
        layers=(Layer("system", "sys", 1),),
        messages=isolated.messages,
        tools=(WEATHER,),
        strategy="gemini",
    )
    fake_llm.enqueue(Reply(text="It is sunny."))
    assert (await collect(provider.stream(second))).reply.text == "It is sunny."
    contents = fake_llm.last.body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"] == [
        {"text": "Checking."},
        {
            "functionCall": {"args": {"city": "Paris"}, "name": "get_weather"},
            "thoughtSignature": signature,
        },
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"content": "sunny"}}}
    ]


async def test_signature_bytes_survive_any_base64_alphabet(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    raw = bytes(range(250, 256)) * 4  # encodes to '+' and '/' in standard base64
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("get_weather", {})], thought_signature=b64(raw))
    )
    reply = (await collect(provider.stream(prompt(user("x"), strategy="gemini")))).reply
    native = json.loads(reply.payload or "")
    p = prompt(
        user("x"),
        assistant("", reply.tool_calls, native=native),
        tool("get_weather#0", "get_weather", "ok"),
        strategy="gemini",
    )
    fake_llm.enqueue(Reply(text="done"))
    await collect(provider.stream(p))
    sent = fake_llm.last.body["contents"][1]["parts"][0]["thoughtSignature"]
    # The SDK re-encodes with the URL-safe alphabet; the bytes are what matter.
    assert base64.urlsafe_b64decode(sent) == raw


async def test_parallel_calls_pair_results_by_id_when_gemini_gave_one(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            tool_calls=[
                FakeToolCall("get_weather", {"city": "Paris"}, id="fc_1"),
                FakeToolCall("get_weather", {"city": "Oslo"}),
            ]
        )
    )
    reply = (await collect(provider.stream(prompt(user("both"), strategy="gemini")))).reply
    assert [(c.id, c.arguments["city"]) for c in reply.tool_calls] == [
        ("fc_1", "Paris"),
        ("get_weather#1", "Oslo"),
    ]
    p = prompt(
        user("both"),
        assistant("", reply.tool_calls, native=json.loads(reply.payload or "")),
        tool("fc_1", "get_weather", "sunny"),
        tool("get_weather#1", "get_weather", "rain"),
        strategy="gemini",
    )
    fake_llm.enqueue(Reply(text="ok"))
    await collect(provider.stream(p))
    model, results = fake_llm.last.body["contents"][1:]
    # Unsigned calls (Gemini 2.5) get the documented dummy on the first call only.
    assert [part.get("thoughtSignature") for part in model["parts"]] == [
        DUMMY_THOUGHT_SIGNATURE,
        None,
    ]
    assert [part["functionResponse"] for part in results["parts"]] == [
        {"id": "fc_1", "name": "get_weather", "response": {"content": "sunny"}},
        {"name": "get_weather", "response": {"content": "rain"}},
    ]


async def test_usage_with_cached_and_thought_tokens(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            text="ok", prompt_tokens=42, completion_tokens=7, cached_tokens=30, reasoning_tokens=3
        )
    )
    reply = (await collect(provider.stream(prompt(user("hi"), strategy="gemini")))).reply
    assert (reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens) == (42, 10, 30)


async def test_request_body_merges_roles_and_matches_what_was_sent(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    calls = (ToolCall("get_weather#0", "get_weather", {"city": "Paris"}),)
    p = prompt(
        user("Weather in Paris?"),
        assistant("Let me look."),
        assistant("", calls),  # altered calls: no native, rebuilt
        tool("get_weather#0", "get_weather", "sunny"),
        user("And tomorrow?"),
        strategy="gemini",
    )
    fake_llm.enqueue(Reply(text="Also sunny."))
    await collect(provider.stream(p))
    sent = fake_llm.last.body
    assert sent == {
        "contents": [
            {"parts": [{"text": "Weather in Paris?"}], "role": "user"},
            {
                "parts": [
                    {"text": "Let me look."},
                    {
                        "functionCall": {"args": {"city": "Paris"}, "name": "get_weather"},
                        "thoughtSignature": DUMMY_THOUGHT_SIGNATURE,
                    },
                ],
                "role": "model",
            },
            {
                "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"content": "sunny"}}},
                    {"text": "And tomorrow?"},
                ],
                "role": "user",
            },
        ],
        "systemInstruction": {"parts": [{"text": "You are terse."}], "role": "user"},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "description": WEATHER.description,
                        "name": "get_weather",
                        "parameters_json_schema": WEATHER.parameters,
                    }
                ]
            }
        ],
        "generationConfig": {},
    }
    assert provider.request_body(p) == sent
    assert fake_llm.last.path == "/gemini/v1/models/gemini-2.5-flash:streamGenerateContent"


def _error_body(status: int, extra: dict[str, object]) -> bytes:
    names = {429: "RESOURCE_EXHAUSTED", 400: "INVALID_ARGUMENT"}
    return json.dumps(
        {"error": {"code": status, "message": "quota", "status": names[status], **extra}}
    ).encode()


_RETRY_INFO = {
    "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7.5s"},
    ]
}
_BAD_KEY = {
    "details": [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"},
    ]
}
_EVENT = (
    b'data: {"candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, '
    b'"index": 0}]}\r\n\r\n'
)
JSON = "application/json"


@pytest.mark.parametrize(
    ("reply", "kind", "status", "started", "partial"),
    [
        (Reply(status=429, headers={"retry-after": "3"}), "rate_limit", 429, False, ""),
        (
            Reply(status=429, raw=_error_body(429, _RETRY_INFO), content_type=JSON),
            "rate_limit",
            429,
            False,
            "",
        ),
        (Reply(status=500), "server", 500, False, ""),
        (Reply(status=503), "server", 503, False, ""),
        (Reply(status=401), "auth", 401, False, ""),
        (Reply(status=403), "auth", 403, False, ""),
        (Reply(status=400, error_message="bad tool history"), "bad_request", 400, False, ""),
        (
            Reply(status=400, raw=_error_body(400, _BAD_KEY), content_type=JSON),
            "auth",
            400,
            False,
            "",
        ),
        (Reply(status=404), "not_found", 404, False, ""),
        (Reply(raw=[_EVENT, b"data: {not json\r\n\r\n"]), "malformed", None, True, "Hi"),
        (Reply(raw=b'{"hello": 1}', content_type=JSON), "malformed", None, False, ""),
        (Reply(text="partial answer", finish_reason=""), "truncated", None, True, "partial answer"),
        (
            Reply(text="abcdefghijklmnop", chunk_size=4, disconnect_after=2),
            "network",
            None,
            True,
            "abcdefgh",
        ),
        (Reply(text="Hi", in_stream_error="mid-stream failure"), "server", 500, True, "Hi"),
    ],
    ids=[
        "429-retry-after",
        "429-retry-info",
        "500",
        "503",
        "401",
        "403",
        "400",
        "400-bad-key",
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
    provider: GeminiProvider,
    reply: Reply,
    kind: str,
    status: int | None,
    started: bool,
    partial: str,
) -> None:
    fake_llm.enqueue(reply)
    out = await collect(provider.stream(prompt(user("hi"), strategy="gemini")))
    err = out.error
    assert err is not None, out.items
    assert (err.kind, err.status, err.output_started, err.partial_text) == (
        kind,
        status,
        started,
        partial,
    )
    assert "gemini provider" in err.message and "\n" not in err.message
    assert out.text == partial
    assert len(fake_llm.chat_requests) == 1
    if kind == "rate_limit":
        assert err.retry_after == (7.5 if reply.raw else 3.0)
    if reply.error_message:
        assert reply.error_message in err.message


async def test_connection_refused(fake_llm: FakeLLMServer) -> None:
    provider = GeminiProvider(gemini_config(refused_url("/gemini")))
    try:
        out = await collect(provider.stream(prompt(user("hi"), strategy="gemini")))
    finally:
        await provider.aclose()
    assert out.error is not None
    assert (out.error.kind, out.error.output_started, out.error.retryable) == (
        "network",
        False,
        True,
    )


async def test_read_timeout(fake_llm: FakeLLMServer) -> None:
    provider = GeminiProvider(gemini_config(fake_llm.gemini_base_url, timeout=1.0))
    # 1 s leaves the request time to reach the server on a loaded machine; the reply
    # still comes three times later.
    fake_llm.enqueue(Reply(text="slow", delay=3.0))
    try:
        out = await collect(provider.stream(prompt(user("hi"), strategy="gemini")))
    finally:
        await provider.aclose()
    assert out.error is not None and out.error.kind == "timeout"


async def test_cancel_mid_stream_and_next_request_works(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    first = asyncio.Event()
    seen: list[str] = []

    async def consume() -> None:
        async for item in provider.stream(prompt(user("long"), strategy="gemini")):
            if isinstance(item, TextDelta | ThinkingDelta):
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
    out = await collect(provider.stream(prompt(user("again"), strategy="gemini")))
    assert out.reply.text == "fresh"


async def test_list_models_strips_the_prefix(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    assert await provider.list_models() == ["fake-model", "gemini-2.5-flash"]


async def test_missing_key_is_a_config_error() -> None:
    provider = GeminiProvider(ProviderConfig(name="gemini", kind="gemini", model="m"))
    with pytest.raises(ProviderError) as info:
        async for _ in provider.stream(prompt(user("hi"), strategy="gemini")):
            pass
    assert info.value.kind == "config" and "GEMINI_API_KEY" in info.value.message
    # The body can still be shown without a key.
    assert provider.request_body(prompt(user("hi")))["contents"] == [
        {"parts": [{"text": "hi"}], "role": "user"}
    ]


async def test_vertex_mode_constructs_offline() -> None:
    config = ProviderConfig(
        name="gemini_gca",
        kind="gemini_gca",
        model="gemini-2.5-flash",
        extra={"project": "demo-project", "location": "us-central1"},
    )
    provider = GeminiProvider(config)
    try:
        assert provider.strategy == "gemini_gca"
        body = provider.request_body(prompt(user("hi")))
        assert body["contents"] == [{"parts": [{"text": "hi"}], "role": "user"}]
        assert provider._get_client().vertexai
    finally:
        await provider.aclose()


async def test_unreadable_stored_parts_fall_back_to_rebuilt_calls(
    provider: GeminiProvider,
) -> None:
    call = ToolCall("get_weather#0", "get_weather", {"city": "Rome"})
    readable = [{"text": "Sure.", "from_a_newer_sdk": 1}]  # unknown field: dropped
    broken = [{"function_call": {"name": "get_weather", "args": "not an object"}}]
    p = prompt(
        user("Rome?"),
        assistant("Sure.", native=readable),
        assistant("", (call,), native=broken),
        tool("get_weather#0", "get_weather", "hot"),
        strategy="gemini",
    )
    model = provider.request_body(p)["contents"][1]
    assert model["parts"] == [
        {"text": "Sure."},
        {
            "functionCall": {"args": {"city": "Rome"}, "name": "get_weather"},
            "thoughtSignature": DUMMY_THOUGHT_SIGNATURE,
        },
    ]
