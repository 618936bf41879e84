"""The fake server against the real SDKs: if these pass, app tests can trust the wire format."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
import pytest_textual_snapshot as pts
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tests.conftest import SNAPSHOT_ROOT, NetworkBlockedError, NetworkGuard
from tests.fakeserver import FakeLLMServer, FakeToolCall, RecordedRequest, Reply, b64, wait_for

GEMINI_MODEL = "gemini-2.5-flash"


# --- clients and stream collectors ----------------------------------------------------------


@pytest.fixture
async def oai(fake_llm: FakeLLMServer) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=fake_llm.openai_base_url, api_key="x", max_retries=0)
    yield client
    await client.close()


@pytest.fixture
async def gem(fake_llm: FakeLLMServer) -> AsyncIterator[genai.Client]:
    client = genai.Client(
        api_key="x", http_options=types.HttpOptions(base_url=fake_llm.gemini_base_url)
    )
    yield client
    await client.aio.aclose()


async def openai_stream(client: openai.AsyncOpenAI, **kw: Any) -> dict[str, Any]:
    kw.setdefault("model", "fake-model")
    kw.setdefault("messages", [{"role": "user", "content": "hi"}])
    out: dict[str, Any] = {"text": [], "calls": {}, "finish": None, "usage": None, "chunks": 0}
    stream = await client.chat.completions.create(stream=True, **kw)
    async for ch in stream:
        out["chunks"] += 1
        if ch.usage:
            out["usage"] = ch.usage
        for c in ch.choices:
            d = c.delta
            if d.content:
                out["text"].append(d.content)
            for tc in d.tool_calls or []:
                slot = out["calls"].setdefault(tc.index, {"id": None, "name": "", "args": []})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    slot["args"].append(tc.function.arguments)
            if c.finish_reason:
                out["finish"] = c.finish_reason
    return out


async def gemini_stream(client: genai.Client, contents: Any = "hi", **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "text": [],
        "thoughts": [],
        "calls": [],
        "parts": [],
        "finish": None,
        "usage": None,
        "chunks": 0,
    }
    stream = await client.aio.models.generate_content_stream(
        model=GEMINI_MODEL, contents=contents, **kw
    )
    async for ch in stream:
        out["chunks"] += 1
        out["usage"] = ch.usage_metadata or out["usage"]
        cand = ch.candidates[0]
        for part in cand.content.parts or []:
            out["parts"].append(part)
            if part.function_call:
                out["calls"].append(part.function_call)
            elif part.thought:
                out["thoughts"].append(part.text)
            elif part.text is not None:
                out["text"].append(part.text)
        if cand.finish_reason:
            out["finish"] = cand.finish_reason
    return out


# --- streamed text -------------------------------------------------------------------------


async def test_openai_streamed_text(fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI) -> None:
    fake_llm.enqueue(Reply(text="Hello there, friend."))
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    out = await openai_stream(oai, messages=msgs, stream_options={"include_usage": True})

    assert out["text"] == ["Hello th", "ere, fri", "end."]
    assert out["finish"] == "stop"
    assert (out["usage"].prompt_tokens, out["usage"].completion_tokens) == (10, 5)
    req = fake_llm.last
    assert (req.provider, req.kind, req.method) == ("openai", "stream", "POST")
    assert req.path == "/openai/v1/chat/completions"
    assert req.model == "fake-model"
    assert req.messages == msgs
    assert req.body["stream_options"] == {"include_usage": True}
    assert req.headers["authorization"] == "Bearer x"


async def test_openai_without_include_usage_sends_no_usage(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI
) -> None:
    fake_llm.enqueue(Reply(text=["exact", " deltas"]))
    out = await openai_stream(oai)
    assert out["text"] == ["exact", " deltas"]
    assert out["usage"] is None


async def test_gemini_streamed_text(fake_llm: FakeLLMServer, gem: genai.Client) -> None:
    fake_llm.enqueue(Reply(thinking="hmm, let me think", text="Let me look that up."))
    contents = [
        types.Content(role="user", parts=[types.Part(text="hi")]),
        types.Content(role="model", parts=[types.Part(text="hello")]),
        types.Content(role="user", parts=[types.Part(text="weather?")]),
    ]
    config = types.GenerateContentConfig(system_instruction="sys", temperature=0.2)
    out = await gemini_stream(gem, contents, config=config)

    assert "".join(out["thoughts"]) == "hmm, let me think"
    assert "".join(out["text"]) == "Let me look that up."
    assert out["finish"] == types.FinishReason.STOP
    assert (out["usage"].prompt_token_count, out["usage"].candidates_token_count) == (10, 5)
    req = fake_llm.last
    assert (req.provider, req.kind, req.model) == ("gemini", "stream", GEMINI_MODEL)
    assert req.path == f"/gemini/v1/models/{GEMINI_MODEL}:streamGenerateContent"
    assert req.query == {"alt": ["sse"]}
    assert [c["role"] for c in req.contents] == ["user", "model", "user"]
    assert req.body["systemInstruction"]["parts"] == [{"text": "sys"}]
    assert req.headers["x-goog-api-key"] == "x"


async def test_gemini_api_version_v1beta(fake_llm: FakeLLMServer) -> None:
    client = genai.Client(
        api_key="x",
        http_options=types.HttpOptions(base_url=fake_llm.gemini_base_url, api_version="v1beta"),
    )
    try:
        fake_llm.enqueue(Reply(text="ok"))
        out = await gemini_stream(client)
    finally:
        await client.aio.aclose()
    assert out["text"] == ["ok"]
    assert fake_llm.last.path == f"/gemini/v1beta/models/{GEMINI_MODEL}:streamGenerateContent"


async def test_bare_v1_prefix_serves_openai(fake_llm: FakeLLMServer) -> None:
    client = openai.AsyncOpenAI(base_url=f"{fake_llm.base_url}/v1", api_key="x", max_retries=0)
    try:
        fake_llm.enqueue(Reply(text="bare"))
        out = await openai_stream(client)
        models = await client.models.list()
    finally:
        await client.close()
    assert out["text"] == ["bare"]
    assert [m.id for m in models.data] == fake_llm.models
    assert fake_llm.requests[0].path == "/v1/chat/completions"


# --- tool calls ------------------------------------------------------------------------------


async def test_openai_streamed_tool_call(fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI) -> None:
    fake_llm.enqueue(
        Reply(text="Let me check.", tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})])
    )
    out = await openai_stream(oai)

    assert "".join(out["text"]) == "Let me check."
    assert out["finish"] == "tool_calls"
    call = out["calls"][0]
    assert (call["id"], call["name"]) == ("call_0", "get_weather")
    assert len(call["args"]) == 3  # arguments really arrive in pieces
    assert json.loads("".join(call["args"])) == {"city": "Paris"}


async def test_gemini_tool_call_and_thought_signature_round_trip(
    fake_llm: FakeLLMServer, gem: genai.Client
) -> None:
    sig = b64(b"opaque-signature")
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})], thought_signature=sig),
        Reply(text="Sunny."),
    )
    out = await gemini_stream(gem, "weather in Paris?")
    assert [(c.name, c.args, c.id) for c in out["calls"]] == [
        ("get_weather", {"city": "Paris"}, None)
    ]
    part = out["parts"][-1]
    assert part.thought_signature == b"opaque-signature"

    # What the app will persist: whole parts as JSON, then rebuilt for the next turn.
    stored = json.loads(json.dumps(part.model_dump(mode="json", exclude_none=True)))
    rebuilt = types.Part.model_validate(stored)
    assert rebuilt.thought_signature == b"opaque-signature"
    history = [
        types.Content(role="user", parts=[types.Part(text="weather in Paris?")]),
        types.Content(role="model", parts=[rebuilt]),
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"r": "sunny"})],
        ),
    ]
    out2 = await gemini_stream(gem, history)
    assert out2["text"] == ["Sunny."]
    sent = fake_llm.last.contents
    assert [c["role"] for c in sent] == ["user", "model", "user"]
    assert sent[1]["parts"][0]["thoughtSignature"] == sig
    assert sent[1]["parts"][0]["functionCall"] == {"name": "get_weather", "args": {"city": "Paris"}}
    assert sent[2]["parts"][0]["functionResponse"]["response"] == {"r": "sunny"}


@pytest.mark.parametrize("provider", ["openai", "gemini"])
async def test_parallel_tool_calls(
    provider: str, fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    fake_llm.enqueue(
        Reply(
            tool_calls=[
                FakeToolCall("read_file", {"path": "a.py"}),
                FakeToolCall("read_file", {"path": "b.py"}, id="explicit"),
            ]
        )
    )
    if provider == "openai":
        out = await openai_stream(oai)
        calls = [
            (c["id"], c["name"], json.loads("".join(c["args"])))
            for _, c in sorted(out["calls"].items())
        ]
        assert calls == [
            ("call_0", "read_file", {"path": "a.py"}),
            ("explicit", "read_file", {"path": "b.py"}),
        ]
        assert out["finish"] == "tool_calls"
    else:
        out = await gemini_stream(gem)
        calls = [(c.id, c.name, c.args) for c in out["calls"]]
        assert calls == [
            (None, "read_file", {"path": "a.py"}),
            ("explicit", "read_file", {"path": "b.py"}),
        ]
        assert out["chunks"] == 1  # parallel calls share one chunk, as the real API does


# --- usage ------------------------------------------------------------------------------------


async def test_usage_with_cached_tokens(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    reply = Reply(
        text="x", prompt_tokens=100, completion_tokens=20, cached_tokens=64, reasoning_tokens=3
    )
    fake_llm.enqueue(reply, reply)
    u = (await openai_stream(oai, stream_options={"include_usage": True}))["usage"]
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens) == (100, 20, 120)
    assert u.prompt_tokens_details.cached_tokens == 64
    assert u.completion_tokens_details.reasoning_tokens == 3

    g = (await gemini_stream(gem))["usage"]
    assert (g.prompt_token_count, g.candidates_token_count) == (100, 20)
    assert g.cached_content_token_count == 64
    assert g.thoughts_token_count == 3
    assert g.total_token_count == 123


# --- non-streaming --------------------------------------------------------------------------


async def test_non_streaming_both(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    reply = Reply(
        thinking="ponder",
        text="Here you go, a long answer.",
        tool_calls=[FakeToolCall("f", {"x": 1})],
    )
    fake_llm.enqueue(reply, reply)
    r = await oai.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "hi"}]
    )
    msg = r.choices[0].message
    assert msg.content == "Here you go, a long answer."
    assert msg.tool_calls[0].function.name == "f"
    assert json.loads(msg.tool_calls[0].function.arguments) == {"x": 1}
    assert r.choices[0].finish_reason == "tool_calls"
    assert fake_llm.last.kind == "chat"

    g = await gem.aio.models.generate_content(model=GEMINI_MODEL, contents="hi")
    parts = g.candidates[0].content.parts
    assert [(p.thought, p.text) for p in parts[:2]] == [
        (True, "ponder"),
        (None, "Here you go, a long answer."),
    ]
    assert g.function_calls[0].args == {"x": 1}
    assert fake_llm.last.kind == "generate"
    assert fake_llm.last.query == {}


async def test_empty_reply_is_one_empty_text_part(
    fake_llm: FakeLLMServer, gem: genai.Client
) -> None:
    fake_llm.enqueue(Reply())
    g = await gem.aio.models.generate_content(model=GEMINI_MODEL, contents="hi")
    assert [p.text for p in g.candidates[0].content.parts] == [""]


# --- scripting features ---------------------------------------------------------------------


async def test_callable_reply_sees_the_request(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI
) -> None:
    def echo(req: RecordedRequest) -> Reply:
        return Reply(text="echo: " + req.messages[-1]["content"])

    fake_llm.enqueue(echo)
    out = await openai_stream(oai, messages=[{"role": "user", "content": "ping"}])
    assert "".join(out["text"]) == "echo: ping"


@pytest.mark.parametrize("provider", ["openai", "gemini"])
async def test_empty_queue_is_a_500_and_is_reported(
    provider: str, fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    if provider == "openai":
        with pytest.raises(openai.InternalServerError, match="no scripted reply"):
            await openai_stream(oai)
    else:
        with pytest.raises(genai_errors.ServerError, match="no scripted reply"):
            await gemini_stream(gem)
    assert len(fake_llm.unscripted) == 1
    fake_llm.unscripted.clear()  # otherwise the fixture fails this test, as it should


async def test_default_reply(fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI) -> None:
    fake_llm.default_reply = Reply(text="fallback")
    for _ in range(2):
        assert (await openai_stream(oai))["text"] == ["fallback"]


async def test_gate_holds_the_stream(fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI) -> None:
    gate = threading.Event()
    fake_llm.enqueue(Reply(text="released", gate=gate))
    task = asyncio.create_task(openai_stream(oai))
    await asyncio.to_thread(fake_llm.wait_for_requests, 1)
    await asyncio.sleep(0.1)
    assert not task.done()
    gate.set()
    assert (await asyncio.wait_for(task, 5))["text"] == ["released"]


async def test_cancel_mid_stream_then_next_request_works(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI
) -> None:
    fake_llm.enqueue(Reply(text="x" * 200, chunk_size=1, delay=0.01), Reply(text="after"))
    seen: list[str] = []

    async def consume() -> None:
        stream = await oai.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for ch in stream:
            seen.extend(c.delta.content or "" for c in ch.choices)

    task = asyncio.create_task(consume())
    await wait_for(None, lambda: len(seen) >= 3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_for(None, lambda: fake_llm.requests[0].disconnected, timeout=3)
    assert (await openai_stream(oai))["text"] == ["after"]


# --- errors ---------------------------------------------------------------------------------


async def test_openai_429_retry_after_then_success(fake_llm: FakeLLMServer) -> None:
    client = openai.AsyncOpenAI(base_url=fake_llm.openai_base_url, api_key="x", max_retries=2)
    limited = Reply(status=429, error_message="quota", headers={"retry-after": "0.01"})
    fake_llm.enqueue(limited, limited, Reply(text="finally"))
    try:
        out = await openai_stream(client)
    finally:
        await client.close()
    assert out["text"] == ["finally"]
    assert [r.headers["x-stainless-retry-count"] for r in fake_llm.requests] == ["0", "1", "2"]


async def test_openai_429(fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI) -> None:
    fake_llm.enqueue(Reply(status=429, error_message="quota", headers={"retry-after": "1"}))
    with pytest.raises(openai.RateLimitError) as ei:
        await openai_stream(oai)
    e = ei.value
    assert e.status_code == 429
    assert e.body == {
        "message": "quota",
        "type": "rate_limit_exceeded",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert e.response.headers["retry-after"] == "1"


async def test_gemini_429_is_not_retried(fake_llm: FakeLLMServer, gem: genai.Client) -> None:
    fake_llm.enqueue(Reply(status=429, error_message="quota", headers={"retry-after": "1"}))
    with pytest.raises(genai_errors.ClientError) as ei:
        await gemini_stream(gem)
    assert (ei.value.code, ei.value.status, ei.value.message) == (
        429,
        "RESOURCE_EXHAUSTED",
        "quota",
    )
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize(
    ("status", "oai_exc", "gem_status"),
    [
        (400, openai.BadRequestError, "INVALID_ARGUMENT"),
        (401, openai.AuthenticationError, "UNAUTHENTICATED"),
        (403, openai.PermissionDeniedError, "PERMISSION_DENIED"),
        (404, openai.NotFoundError, "NOT_FOUND"),
        (500, openai.InternalServerError, "INTERNAL"),
        (503, openai.InternalServerError, "UNAVAILABLE"),
    ],
)
async def test_status_error_mapping(
    status: int,
    oai_exc: type[openai.APIStatusError],
    gem_status: str,
    fake_llm: FakeLLMServer,
    oai: openai.AsyncOpenAI,
    gem: genai.Client,
) -> None:
    fake_llm.enqueue(Reply(status=status, error_message="nope"), Reply(status=status))
    with pytest.raises(oai_exc) as oe:
        await openai_stream(oai)
    assert oe.value.status_code == status
    assert oe.value.message == f"Error code: {status} - nope"
    gem_exc = genai_errors.ClientError if status < 500 else genai_errors.ServerError
    with pytest.raises(gem_exc) as ge:
        await gemini_stream(gem)
    assert (ge.value.code, ge.value.status) == (status, gem_status)


async def test_in_stream_error(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    reply = Reply(text="partial", in_stream_error="overloaded mid-stream")
    fake_llm.enqueue(reply, reply)
    with pytest.raises(openai.APIError, match="overloaded mid-stream") as oe:
        await openai_stream(oai)
    assert not isinstance(oe.value, openai.APIStatusError)
    assert oe.value.body["type"] == "server_error"
    with pytest.raises(genai_errors.ServerError) as ge:
        await gemini_stream(gem)
    assert (ge.value.code, ge.value.message) == (500, "overloaded mid-stream")


async def test_malformed_data_line(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    good_openai = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}],
    }
    good_gemini = {"candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"}}]}
    fake_llm.enqueue(
        Reply(raw=[f"data: {json.dumps(good_openai)}\n\n".encode(), b"data: {not json\n\n"]),
        Reply(
            raw=[f"data: {json.dumps(good_gemini)}\r\n\r\n".encode(), b"data: {not json\r\n\r\n"]
        ),
    )
    seen: list[str] = []
    with pytest.raises(json.JSONDecodeError):  # bare, not wrapped by the SDK
        stream = await oai.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for ch in stream:
            seen.append(ch.choices[0].delta.content)
    assert seen == ["ok"]
    with pytest.raises(genai_errors.UnknownApiResponseError):
        async for ch in await gem.aio.models.generate_content_stream(
            model=GEMINI_MODEL, contents="hi"
        ):
            seen.append(ch.text)
    assert seen == ["ok", "ok"]


async def test_openai_non_sse_200_yields_nothing(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI
) -> None:
    fake_llm.enqueue(Reply(raw=b'{"hello": 1}', content_type="application/json"))
    out = await openai_stream(oai)
    assert out["chunks"] == 0 and out["finish"] is None


async def test_missing_finish_reason_ends_quietly(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    reply = Reply(text="cut short", finish_reason="")
    fake_llm.enqueue(reply, reply)
    out = await openai_stream(oai, stream_options={"include_usage": True})
    assert ("".join(out["text"]), out["finish"], out["usage"]) == ("cut short", None, None)
    g = await gemini_stream(gem)
    assert ("".join(g["text"]), g["finish"]) == ("cut short", None)


async def test_finish_reason_is_translated_per_provider(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    reply = Reply(text="long", finish_reason="length")
    fake_llm.enqueue(reply, reply)
    assert (await openai_stream(oai))["finish"] == "length"
    assert (await gemini_stream(gem))["finish"] == types.FinishReason.MAX_TOKENS


async def test_mid_stream_disconnect(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    # OpenAI's first event is the role chunk, so 3 events carry 2 text pieces.
    reply = Reply(text="abcdefghijklmnop", chunk_size=4, disconnect_after=3)
    fake_llm.enqueue(reply, reply)
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        stream = await oai.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for ch in stream:
            seen.append(ch.choices[0].delta.content)
    assert seen == ["", "abcd", "efgh"]
    with pytest.raises(httpx2.RemoteProtocolError):  # not wrapped by google-genai
        async for ch in await gem.aio.models.generate_content_stream(
            model=GEMINI_MODEL, contents="hi"
        ):
            seen.append(ch.text)
    assert seen[3:] == ["abcd", "efgh", "ijkl"]


# --- models and countTokens -----------------------------------------------------------------


async def test_models_routes(
    fake_llm: FakeLLMServer, oai: openai.AsyncOpenAI, gem: genai.Client
) -> None:
    fake_llm.models = ["alpha", "beta"]
    page = await oai.models.list()
    assert [(m.id, m.owned_by) for m in page.data] == [("alpha", "fake"), ("beta", "fake")]
    assert fake_llm.last.provider == "openai" and fake_llm.last.kind == "models"
    names = [m.name async for m in await gem.aio.models.list()]
    assert names == ["models/alpha", "models/beta"]
    assert fake_llm.last.provider == "gemini" and fake_llm.last.kind == "models"
    one = await gem.aio.models.get(model="beta")
    assert (one.name, one.input_token_limit) == ("models/beta", 1048576)
    assert (await oai.models.retrieve("alpha")).id == "alpha"
    assert fake_llm.pending == 0


async def test_count_tokens_does_not_use_the_queue(
    fake_llm: FakeLLMServer, gem: genai.Client
) -> None:
    r = await gem.aio.models.count_tokens(model=GEMINI_MODEL, contents="hello world")
    sent = fake_llm.last
    assert sent.kind == "count_tokens"
    assert sent.body == {"contents": [{"parts": [{"text": "hello world"}], "role": "user"}]}
    assert r.total_tokens == len(json.dumps(sent.contents)) // 4
    assert not fake_llm.unscripted


def test_unknown_route_is_404(fake_llm: FakeLLMServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", fake_llm.port, timeout=5)
    try:
        conn.request("POST", "/nope", body=b"{}", headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = json.loads(resp.read())
        # The same keep-alive connection stays usable after an error.
        conn.request("GET", "/openai/v1/models")
        again = conn.getresponse()
        assert again.status == 200
        again.read()
    finally:
        conn.close()
    assert resp.status == 404
    assert "no route for POST /nope" in body["error"]["message"]


# --- fixtures' own guarantees -------------------------------------------------------------


def test_network_guard_refuses_non_loopback(
    network_guard: NetworkGuard, fake_llm: FakeLLMServer
) -> None:
    started = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        with pytest.raises(NetworkBlockedError):
            s.connect(("10.255.255.1", 9))
        with pytest.raises(NetworkBlockedError):
            s.connect_ex(("10.255.255.1", 9))
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("example.com", 443), timeout=5)
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s6:
        with pytest.raises(NetworkBlockedError):
            s6.connect(("2001:db8::1", 9, 0, 0))
    assert time.monotonic() - started < 0.5
    assert len(network_guard.blocked) == 4
    network_guard.blocked.clear()  # expected here; anywhere else it fails the test

    # Loopback still works.
    socket.create_connection(("127.0.0.1", fake_llm.port), timeout=5).close()
    socket.create_connection(("localhost", fake_llm.port), timeout=5).close()
    a, b = socket.socketpair()
    a.close()
    b.close()


def test_snapshots_go_to_top_level_folder() -> None:
    assert SNAPSHOT_ROOT == Path(__file__).resolve().parent.parent / "snapshots"
    ext = pts.SVGImageExtension

    class _Loc:
        filepath = __file__

    assert ext.dirname(test_location=_Loc()) == str(SNAPSHOT_ROOT / "test_fakeserver")
