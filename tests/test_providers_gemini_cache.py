"""Gemini explicit context caching through the real `google-genai` SDK against the fake
server: what the server received (the cache's create body, then a generateContent that
names the cache and leaves the cached prefix out), reuse, replacement, the threshold,
a failed creation, and how the cache is priced in the ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from slop_tui.commands import dispatch
from slop_tui.context.prompt import KIND_PAIR, KIND_PINNED, PromptMessage
from slop_tui.orchestrator import Notice
from slop_tui.providers import gemini_provider
from slop_tui.providers.gemini_provider import EXPLICIT_CACHE_TTL, GeminiProvider
from tests.fakeserver import FakeLLMServer, Reply
from tests.test_pricing import turns
from tests.test_providers_support import assistant, collect, gemini_config, prompt, user

BIG_SYSTEM = "You answer questions about the project. " * 600  # ~6,000 tokens
TREE = "src/\n  app.py\n  util.py\n"


@pytest.fixture
async def provider(fake_llm: FakeLLMServer) -> AsyncIterator[GeminiProvider]:
    p = GeminiProvider(gemini_config(fake_llm.gemini_base_url))
    yield p
    await p.aclose()


def request(*history: PromptMessage, system: str = BIG_SYSTEM):
    """A prompt with the file tree pair at its head, then the conversation."""
    head = (
        PromptMessage(role="user", text=TREE, kind=KIND_PAIR),
        PromptMessage(role="assistant", text="Noted the file tree.", kind=KIND_PAIR),
    )
    return prompt(*head, *history, system=system, strategy="gemini")


def kinds(fake: FakeLLMServer) -> list[str]:
    return [r.kind for r in fake.requests]


async def test_a_stable_large_prefix_is_cached_once_and_named_by_later_requests(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    first = request(user("What is in app.py?"))
    fake_llm.enqueue(Reply(text="A class.", prompt_tokens=30))
    reply = (await collect(provider.stream(first))).reply
    # First sighting of the prefix: sent whole, implicit caching only.
    assert kinds(fake_llm) == ["stream"] and reply.cache_write_tokens == 0
    assert "systemInstruction" in fake_llm.last.body and "cachedContent" not in fake_llm.last.body

    second = request(user("What is in app.py?"), assistant("A class."), user("And util.py?"))
    whole = provider.request_body(second)  # what would go out without the cache
    fake_llm.enqueue(Reply(text="Helpers.", prompt_tokens=40))
    reply = (await collect(provider.stream(second))).reply
    assert kinds(fake_llm) == ["stream", "cache_create", "stream"]
    create, sent = fake_llm.requests[1], fake_llm.requests[2]
    assert create.method == "POST" and create.path.endswith("/cachedContents")
    assert create.body["model"] == "models/gemini-2.5-flash"
    assert create.body["ttl"] == f"{EXPLICIT_CACHE_TTL}s"
    assert create.body["systemInstruction"] == whole["systemInstruction"]
    assert create.body["tools"] == whole["tools"]
    assert create.body["contents"] == whole["contents"][:2]  # the pair: tree and its ack
    [name] = fake_llm.caches
    assert sent.body["cachedContent"] == name
    assert "systemInstruction" not in sent.body and "tools" not in sent.body
    assert sent.body["contents"] == whole["contents"][2:]
    cached = fake_llm.caches[name]
    assert (reply.prompt_tokens, reply.cached_tokens) == (40 + cached, cached)
    assert reply.cache_write_tokens == cached and reply.notice == ""

    # Byte-identical prefix: the same cache, nothing created.
    third = request(*second.messages[2:], assistant("Helpers."), user("Thanks."))
    fake_llm.enqueue(Reply(text="Welcome."))
    reply = (await collect(provider.stream(third))).reply
    assert kinds(fake_llm)[3:] == ["stream"] and fake_llm.last.body["cachedContent"] == name
    assert reply.cache_write_tokens == 0 and reply.cached_tokens == cached

    # The prefix changes: sent whole once; when the new one comes again it replaces the old.
    changed = request(*third.messages[2:], system=BIG_SYSTEM + "Be brief.")
    fake_llm.enqueue(Reply(text="a"), Reply(text="b"))
    await collect(provider.stream(changed))
    assert kinds(fake_llm)[4:] == ["stream"] and "cachedContent" not in fake_llm.last.body
    await collect(provider.stream(changed))
    assert kinds(fake_llm)[5:] == ["cache_delete", "cache_create", "stream"]
    assert fake_llm.requests[5].method == "DELETE"
    assert fake_llm.requests[5].path.endswith(f"/{name}")
    [new] = fake_llm.caches
    assert new != name and fake_llm.last.body["cachedContent"] == new
    assert "Be brief." in fake_llm.requests[6].body["systemInstruction"]["parts"][0]["text"]

    await provider.aclose()  # the live cache is deleted with the client
    assert kinds(fake_llm)[-1] == "cache_delete" and fake_llm.caches == {}


async def test_below_the_threshold_only_implicit_caching(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    small = request(user("hi"), system="You are terse.")
    fake_llm.enqueue(Reply(text="a"), Reply(text="b"), Reply(text="c"))
    for _ in range(3):
        assert (await collect(provider.stream(small))).reply.cache_write_tokens == 0
    assert kinds(fake_llm) == ["stream"] * 3
    assert all("systemInstruction" in r.body for r in fake_llm.requests)


async def test_the_pinned_message_is_cached_only_when_it_ends_a_content(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    """The pinned message (a user message) merges with the first prompt into one content:
    the cache then holds what comes before it."""
    pinned = PromptMessage(role="user", text="## Repository map\n" + "x " * 50, kind=KIND_PINNED)
    msgs = (pinned, user("q"))
    p = prompt(*msgs, system=BIG_SYSTEM, strategy="gemini")
    fake_llm.enqueue(Reply(text="a"), Reply(text="b"))
    await collect(provider.stream(p))
    await collect(provider.stream(p))
    create = next(r for r in fake_llm.requests if r.kind == "cache_create")
    assert "contents" not in create.body  # system instruction and tools only
    assert len(fake_llm.last.body["contents"]) == 1  # the pinned text and the prompt, whole


async def test_a_cache_that_cannot_be_created_never_fails_the_request(
    fake_llm: FakeLLMServer, provider: GeminiProvider
) -> None:
    fake_llm.cache_error = Reply(status=429, error_message="Quota exceeded for cached content")
    p = request(user("hello"))
    fake_llm.enqueue(Reply(text="first"), Reply(text="second"))
    await collect(provider.stream(p))
    reply = (await collect(provider.stream(p))).reply
    assert reply.text == "second" and reply.cache_write_tokens == 0
    assert reply.notice == (
        "The gemini provider's context cache could not be created (Quota exceeded for cached "
        "content); this request was sent without it."
    )
    assert kinds(fake_llm) == ["stream", "cache_create", "stream"]
    assert "systemInstruction" in fake_llm.last.body and "cachedContent" not in fake_llm.last.body


# -- through the workspace: the notice, and the cache in the ledger --------------------


async def test_the_cache_is_priced_and_a_failure_is_one_notice(tmp_path, fake_llm, monkeypatch):
    monkeypatch.setattr(gemini_provider, "EXPLICIT_CACHE_MIN_TOKENS", 10)
    async with turns(tmp_path, fake_llm) as (ws, orch):
        await ws.ledger.set_provider(ws.session, "gemini", "gemini-2.5-flash")
        fake_llm.cache_error = Reply(status=500, error_message="backend unavailable")
        fake_llm.enqueue(Reply(text="one"), Reply(text="two"))
        assert (await orch.run_turn("first")).error is None
        events: list = []
        assert (await orch.run_turn("second", events.append)).error is None
        [notice] = [e.text for e in events if isinstance(e, Notice) and "cache" in e.text]
        assert "could not be created (backend unavailable)" in notice

        fake_llm.cache_error = None
        fake_llm.enqueue(Reply(text="three", prompt_tokens=100, completion_tokens=10))
        assert (await orch.run_turn("third")).error is None
        [name] = fake_llm.caches
        tokens = fake_llm.caches[name]
        assert fake_llm.last_chat.body["cachedContent"] == name
        turn, write = (await ws.ledger.recent_usage(ws.session, 2))[::-1]
        # gemini-2.5-flash: $0.30 input, $0.03 cached input, $2.50 output per 1M tokens.
        assert (write.purpose, write.prompt_tokens, write.cached_tokens) == ("cache", tokens, 0)
        assert write.cost.total == pytest.approx(tokens * 0.30 / 1e6)
        assert (turn.purpose, turn.prompt_tokens, turn.cached_tokens) == (
            "turn",
            100 + tokens,
            tokens,
        )
        assert turn.cost.total == pytest.approx((100 * 0.30 + tokens * 0.03 + 10 * 2.50) / 1e6)
        stats = (await dispatch(ws, "/stats")).text
        assert "| cache | 1 |" in stats  # a background call
