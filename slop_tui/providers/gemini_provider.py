"""Gemini through google-genai's async client, streamed.

Kind `gemini` is the Gemini Developer API (an API key); kind `gemini_gca` is
the same SDK in Vertex AI mode (`vertexai=True` with a project and location,
credentials from Application Default Credentials). Both share one tool-call
family, so their stored parts replay to each other. Vertex mode cannot be
exercised offline beyond constructing the client.

The SDK is imported lazily (~0.6 s). google-genai makes one attempt by default;
`retry.py` is the one retry policy. Transport errors arrive unwrapped
(`httpx2.*`), so they are classified by class name (see `transport_kind`).

Explicit context caching (docs/context.md, "Gemini: implicit and explicit
caching"). Gemini caches repeated prefixes on its own (implicit caching, no
guarantee); an explicit cache (`client.aio.caches.create`) guarantees the
discount but bills its creation at the full input rate and its storage by the
hour. So one is made only for a prefix that is large and has stayed the same:
the tool declarations, the system instruction and the leading engine contents
(the pair layers, the pinned message when it ends a content), estimated at
`EXPLICIT_CACHE_MIN_TOKENS` or more, and sent byte-identical in a recent
request. Requests then name it (`cached_content`) and send only the rest; a
changed prefix that qualifies replaces it (the old one is deleted), and the
cache lives `EXPLICIT_CACHE_TTL` seconds. A cache that cannot be created never
fails a request: it goes out whole, and the reply carries a one-line notice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from slop_tui.context.prompt import ENGINE_KINDS, KIND_CONTEXT, Prompt
from slop_tui.providers.base import (
    IdleTimeout,
    Provider,
    ProviderError,
    ProviderReply,
    StreamItem,
    TextDelta,
    ThinkingDelta,
    Watchdog,
    dumps,
    idle_error,
    is_bad_url,
    is_unreachable,
    payload_tool_calls,
    provider_error,
    status_kind,
    transport_kind,
)
from slop_tui.providers.config import ProviderConfig, base_url_problem
from slop_tui.providers.gemini_payload import (
    gemini_contents,
    gemini_function_declarations,
    merge_part,
)
from slop_tui.providers.retry import google_retry_delay, retry_after_from_headers
from slop_tui.providers.sdk import sdk_ready
from slop_tui.records import STRATEGY_GEMINI, STRATEGY_GEMINI_GCA

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

_COMPLETE_FINISH = {"STOP"}
_CONFIG_ONLY = ("project", "location")  # `extra` keys that configure the client, not requests

# An explicit cache is made for a stable prefix of at least this many tokens (estimated
# at 4 characters a token): the largest of the models' minimums (Gemini 2.5 Pro and 3
# Pro: 4,096; the Flash models: 1,024). Below it, implicit caching is all there is.
EXPLICIT_CACHE_MIN_TOKENS = 4096
EXPLICIT_CACHE_TTL = 300  # seconds; storage is billed by the hour, so it is kept short
_CACHE_MARGIN = 30  # seconds before its expiry a cache is no longer named
_CHARS_PER_TOKEN = 4
_RECENT_PREFIXES = 8  # prefixes remembered (a background call's prompt comes in between)
_CACHED_AWAY = ("system_instruction", "tools", "tool_config")  # held by the cache instead


@dataclass(frozen=True, slots=True)
class _Prefix:
    """The part of a request an explicit cache would hold: `contents` leading contents,
    with the system instruction and tools; `digest` of its JSON, `tokens` estimated."""

    contents: int
    digest: str
    tokens: int


@dataclass(frozen=True, slots=True)
class _ExplicitCache:
    name: str
    prefix: _Prefix
    tokens: int  # as the service counted them
    expires: float  # time.monotonic()


def _enum_text(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


@dataclass
class _Assembly:
    chunks: int = 0
    candidates: int = 0
    parts: list[dict[str, Any]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    finish: str | None = None
    blocked: str | None = None
    usage: Any = None
    started: bool = False

    def feed(self, chunk: types.GenerateContentResponse) -> list[StreamItem]:
        self.chunks += 1
        out: list[StreamItem] = []
        if chunk.usage_metadata is not None:
            self.usage = chunk.usage_metadata  # cumulative: the last one wins
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason is not None and not chunk.candidates:
            self.blocked = _enum_text(feedback.block_reason)
        candidate = chunk.candidates[0] if chunk.candidates else None
        if candidate is None:
            return out
        self.candidates += 1
        content = candidate.content
        for part in (content.parts if content is not None else None) or []:
            if part.text:
                if part.thought:
                    self.thinking.append(part.text)
                    out.append(ThinkingDelta(part.text))
                else:
                    self.text.append(part.text)
                    out.append(TextDelta(part.text))
            if part.function_call is not None:
                self.started = True
            merge_part(self.parts, part.model_dump(mode="json", exclude_none=True))
        if candidate.finish_reason is not None:
            self.finish = _enum_text(candidate.finish_reason)
        if out:
            self.started = True
        return out

    @property
    def answer(self) -> str:
        return "".join(self.text)

    def reply(self, strategy: str) -> ProviderReply:
        text = self.answer
        payload = dumps(self.parts)
        usage = self.usage
        completion = int(getattr(usage, "candidates_token_count", 0) or 0)
        # Thoughts are billed as output, as OpenAI counts reasoning tokens.
        thoughts = int(getattr(usage, "thoughts_token_count", 0) or 0)
        completion += thoughts
        calls = payload_tool_calls(strategy, text, payload)
        return ProviderReply(
            text=text,
            tool_calls=calls,
            payload=payload,
            finish_reason=self.finish,
            prompt_tokens=int(getattr(usage, "prompt_token_count", 0) or 0),
            completion_tokens=completion,
            cached_tokens=int(getattr(usage, "cached_content_token_count", 0) or 0),
            complete=self.finish in _COMPLETE_FINISH,
            thinking="".join(self.thinking),
            reasoning_tokens=thoughts,
            usage_reported=usage is not None,
        )


class GeminiProvider(Provider):
    """A Gemini endpoint (Developer API, or Vertex AI for kind `gemini_gca`)."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.name = config.name
        self.model = config.model
        self.strategy = STRATEGY_GEMINI_GCA if config.kind == "gemini_gca" else STRATEGY_GEMINI
        self.reply_timeout = config.reply_timeout
        self._client: genai.Client | None = None
        self._cache: _ExplicitCache | None = None
        self._recent: deque[str] = deque(maxlen=_RECENT_PREFIXES)

    @property
    def vertex(self) -> bool:
        return self.strategy == STRATEGY_GEMINI_GCA

    # -- client ------------------------------------------------------------------------

    def _check_config(self) -> None:
        """A configuration that cannot work fails at once, before the SDK is loaded."""
        if (problem := base_url_problem(self.config.base_url)) is not None:
            raise provider_error("config", self.name, detail=problem)
        if not self.vertex and not self.config.api_key:
            raise provider_error(
                "config",
                self.name,
                detail="no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY), or api_key / "
                f"api_key_env in [providers.{self.name}]",
            )

    async def _ready_client(self) -> genai.Client:
        """The client, its SDK imported in a thread (the event loop goes on drawing)."""
        if self._client is None:
            self._check_config()
            await sdk_ready("gemini")
        return self._get_client()

    def _get_client(self) -> genai.Client:
        if self._client is not None:
            return self._client
        self._check_config()
        from google import genai
        from google.genai import types

        http_options = types.HttpOptions(
            base_url=self.config.base_url,
            api_version=self.config.api_version,
            timeout=max(1, int(self.config.timeout * 1000)),  # milliseconds
        )
        try:
            if self.vertex:
                self._client = genai.Client(
                    vertexai=True,
                    project=self.config.extra.get("project"),
                    location=self.config.extra.get("location"),
                    api_key=self.config.api_key,
                    http_options=http_options,
                )
            else:
                self._client = genai.Client(api_key=self.config.api_key, http_options=http_options)
        except (ValueError, TypeError) as exc:
            raise provider_error("config", self.name, detail=exc) from exc
        return self._client

    # -- request -----------------------------------------------------------------------

    def _request(self, prompt: Prompt) -> tuple[list[types.Content], types.GenerateContentConfig]:
        from google.genai import types

        known = frozenset(types.Part.model_fields)
        try:
            contents = [types.Content.model_validate(c) for c in gemini_contents(prompt, known)]
        except ValueError:
            # A stored part this SDK cannot read must not make the session unusable.
            rebuilt = gemini_contents(prompt, known, replay_native=False)
            contents = [types.Content.model_validate(c) for c in rebuilt]
        config: dict[str, Any] = {
            k: v for k, v in self.config.extra.items() if k not in _CONFIG_ONLY
        }
        if prompt.system_text:
            config["system_instruction"] = prompt.system_text
        declarations = gemini_function_declarations(prompt)
        if declarations:
            config["tools"] = [{"function_declarations": declarations}]
        try:
            return contents, types.GenerateContentConfig.model_validate(config)
        except ValueError as exc:
            detail = f"invalid extra settings: {exc}"
            raise provider_error("config", self.name, detail=detail) from exc

    def request_body(self, prompt: Prompt, model: str | None = None) -> dict[str, Any]:
        """The JSON the SDK sends, produced by the SDK's own request converter."""
        contents, config = self._request(prompt)
        try:
            api_client = self._get_client()._api_client
        except ProviderError:
            api_client = None  # no key yet: show the body anyway
        return _wire_body(api_client, model or self.model, contents, config, self.vertex)

    # -- streaming ---------------------------------------------------------------------

    # -- explicit context caching ------------------------------------------------------

    def _prefix(
        self,
        prompt: Prompt,
        model: str,
        contents: list[types.Content],
        config: types.GenerateContentConfig,
    ) -> _Prefix | None:
        """The cacheable prefix of a request, or None when it is too small (or the
        settings name a cached content of their own)."""
        if config.cached_content:
            return None
        head = _head_messages(prompt)
        count = len(gemini_contents(replace(prompt, messages=head))) if head else 0
        dump = {"by_alias": True, "mode": "json", "exclude_none": True}
        held = {
            "model": model,
            "system": config.system_instruction,
            "tools": [t.model_dump(**dump) for t in config.tools or []],
            "tool_config": config.tool_config.model_dump(**dump) if config.tool_config else None,
            "contents": [c.model_dump(**dump) for c in contents[:count]],
        }
        text = json.dumps(held, sort_keys=True, default=str)
        tokens = len(text) // _CHARS_PER_TOKEN
        if tokens < EXPLICIT_CACHE_MIN_TOKENS:
            return None
        return _Prefix(count, hashlib.sha256(text.encode()).hexdigest(), tokens)

    async def _use_cache(
        self, client: genai.Client, model: str, prefix: _Prefix, contents, config
    ) -> tuple[_ExplicitCache | None, bool]:
        """The explicit cache this request names (None: send it whole), and whether it
        was created for it. Raises what creating it raised."""
        seen = prefix.digest in self._recent
        self._recent.append(prefix.digest)
        cache = self._cache
        if cache is not None and cache.prefix.digest == prefix.digest:
            if time.monotonic() < cache.expires - _CACHE_MARGIN:
                return cache, False
        elif not seen:
            return None, False  # a new prefix: cached once it comes again
        from google.genai import types

        if cache is not None:
            self._cache = None
            await self._drop(client, cache)
        made = await asyncio.wait_for(
            client.aio.caches.create(
                model=model,
                config=types.CreateCachedContentConfig(
                    contents=contents[: prefix.contents] or None,
                    system_instruction=config.system_instruction,
                    tools=config.tools,
                    tool_config=config.tool_config,
                    ttl=f"{EXPLICIT_CACHE_TTL}s",
                ),
            ),
            timeout=self.config.timeout,
        )
        usage = made.usage_metadata
        counted = int(getattr(usage, "total_token_count", 0) or 0) or prefix.tokens
        self._cache = _ExplicitCache(
            str(made.name), prefix, counted, time.monotonic() + EXPLICIT_CACHE_TTL
        )
        return self._cache, True

    async def _drop(self, client: genai.Client, cache: _ExplicitCache) -> None:
        """Delete a cache no request will name again; a failure is left to its expiry."""
        try:
            await asyncio.wait_for(client.aio.caches.delete(name=cache.name), timeout=10)
        except Exception:  # noqa: BLE001 - it expires on its own within the TTL
            pass

    async def _cached_request(
        self, client: genai.Client, model: str, prompt: Prompt, contents, config
    ) -> tuple[list[types.Content], types.GenerateContentConfig, int, str]:
        """(contents, config) to send, the tokens written to a new cache for it, and a
        notice ("" or one line: the cache could not be made, the request goes whole)."""
        prefix = self._prefix(prompt, model, contents, config)
        if prefix is None:
            return contents, config, 0, ""
        try:
            cache, created = await self._use_cache(client, model, prefix, contents, config)
        except Exception as exc:  # noqa: BLE001 - a cache is an optimisation, never a failure
            detail = exc.message if hasattr(exc, "message") and exc.message else exc
            notice = (
                f"The {self.name} provider's context cache could not be created ({detail}); "
                "this request was sent without it."
            )
            return contents, config, 0, " ".join(str(notice).split())
        if cache is None:
            return contents, config, 0, ""
        update: dict[str, Any] = dict.fromkeys(_CACHED_AWAY)
        update["cached_content"] = cache.name
        return (
            contents[prefix.contents :],
            config.model_copy(update=update),
            cache.tokens if created else 0,
            "",
        )

    # -- streaming ---------------------------------------------------------------------

    async def stream(self, prompt: Prompt, model: str | None = None) -> AsyncIterator[StreamItem]:
        model = model or self.model
        client = await self._ready_client()
        contents, config = self._request(prompt)
        contents, config, written, notice = await self._cached_request(
            client, model, prompt, contents, config
        )
        state = _Assembly()
        stream = None
        watchdog = Watchdog(idle=self.config.timeout)
        try:
            try:
                stream = await watchdog.wait(
                    client.aio.models.generate_content_stream(
                        model=model, contents=contents, config=config
                    )
                )
                while (chunk := await watchdog.wait(anext(stream, None))) is not None:
                    for item in state.feed(chunk):
                        yield item
            except ProviderError:
                raise
            except Exception as exc:  # every SDK/transport failure becomes a ProviderError
                raise self._map_error(exc, state) from exc
        finally:
            watchdog.close()
            if stream is not None:
                # Also on cancellation: closing the generator closes the HTTP response.
                await stream.aclose()
        if state.blocked is not None:
            raise provider_error(
                "bad_request",
                self.name,
                message=f"The {self.name} provider blocked the prompt ({state.blocked}).",
            )
        if state.candidates == 0:
            raise provider_error(
                "malformed",
                self.name,
                message=f"The {self.name} provider answered without a stream of candidates; "
                "check that base_url points at a Gemini API.",
            )
        if state.finish is None:
            raise provider_error(
                "truncated", self.name, output_started=state.started, partial_text=state.answer
            )
        yield replace(state.reply(self.strategy), cache_write_tokens=written, notice=notice)

    def _map_error(self, exc: Exception, state: _Assembly | None = None) -> ProviderError:
        from google.genai import errors

        common: dict[str, Any] = {
            "output_started": state.started if state else False,
            "partial_text": state.answer if state else "",
        }
        if isinstance(exc, IdleTimeout):
            return idle_error(self.name, exc, **common)
        if is_bad_url(exc):
            return provider_error("config", self.name, detail=exc)
        if isinstance(exc, errors.UnknownApiResponseError):
            return provider_error("malformed", self.name, detail=exc, **common)
        if isinstance(exc, errors.APIError):
            status = int(exc.code) if isinstance(exc.code, int) else None
            kind = status_kind(status) if status and status >= 400 else "stream_error"
            if kind == "bad_request" and _invalid_key(exc.details):
                kind = "auth"  # Gemini answers a bad key with 400 INVALID_ARGUMENT
            retry_after = None
            if kind in ("rate_limit", "server"):
                headers = getattr(getattr(exc, "response", None), "headers", None)
                hints = [
                    google_retry_delay(exc.details),
                    retry_after_from_headers(headers, status),
                ]
                found = [h for h in hints if h is not None]
                retry_after = max(found) if found else None
            detail = exc.message or exc.status or str(exc)
            return provider_error(
                kind, self.name, status=status, detail=detail, retry_after=retry_after, **common
            )
        kind = transport_kind(exc)
        if kind == "timeout":
            detail = f"no data within {self.config.timeout:g} s"
            return provider_error("timeout", self.name, detail=detail, **common)
        if kind == "network":
            if common["output_started"]:
                msg = f"The {self.name} provider dropped the connection mid-reply: {exc}."
                return provider_error("network", self.name, message=msg, **common)
            where = self.config.base_url or "the Gemini API"
            return provider_error(
                "network",
                self.name,
                detail=f"{where}: {exc}",
                unreachable=is_unreachable(exc),
                **common,
            )
        return provider_error(
            "stream_error", self.name, detail=f"{type(exc).__name__}: {exc}", **common
        )

    # -- models and lifecycle ----------------------------------------------------------

    async def list_models(self) -> list[str]:
        client = await self._ready_client()
        try:
            pager = await client.aio.models.list()
            names = [m.name async for m in pager if m.name]
        except Exception as exc:
            raise self._map_error(exc) from exc
        # "models/gemini-2.5-flash" (and Vertex "publishers/google/models/…") -> the bare name.
        return sorted({n.rsplit("models/", 1)[-1] for n in names})

    async def aclose(self) -> None:
        client, self._client = self._client, None
        cache, self._cache = self._cache, None
        if client is not None:
            if cache is not None and time.monotonic() < cache.expires:
                await self._drop(client, cache)
            await client.aio.aclose()


def _head_messages(prompt: Prompt) -> tuple:
    """The leading engine messages (pair layers, the pinned message) that make whole
    Gemini contents: the last one is left out while the next message would be merged
    into its content (same role)."""
    messages = prompt.messages
    end = 0
    while end < len(messages) and messages[end].kind in ENGINE_KINDS - {KIND_CONTEXT}:
        end += 1
    while 0 < end < len(messages) and _gemini_role(messages[end]) == _gemini_role(
        messages[end - 1]
    ):
        end -= 1
    return tuple(messages[:end])


def _gemini_role(msg) -> str:
    return "model" if msg.role == "assistant" else "user"


def _invalid_key(details: object) -> bool:
    err = details.get("error", details) if isinstance(details, Mapping) else None
    if not isinstance(err, Mapping):
        return False
    for detail in err.get("details") or []:
        if isinstance(detail, Mapping) and detail.get("reason") == "API_KEY_INVALID":
            return True
    return False


def _wire_body(
    api_client: Any,
    model: str,
    contents: list[types.Content],
    config: types.GenerateContentConfig,
    vertex: bool,
) -> dict[str, Any]:
    """Run the SDK's private request converter, as `generate_content_stream` does.

    Falls back to a camelCase dump (close, not byte-exact) if a future SDK
    renames the converter or no client could be built.
    """
    from google.genai import _common, models, types

    convert = getattr(
        models,
        "_GenerateContentParameters_to_vertex" if vertex else "_GenerateContentParameters_to_mldev",
        None,
    )
    if api_client is not None and convert is not None:
        try:
            params = types._GenerateContentParameters(model=model, contents=contents, config=config)
            body = convert(api_client, params, None, params)
            for key in ("_url", "_query", "config"):
                body.pop(key, None)
            return _common.encode_unserializable_types(_common.convert_to_dict(body))
        except (AttributeError, TypeError):
            pass
    dump = {"by_alias": True, "mode": "json", "exclude_none": True}
    body = {"contents": [c.model_dump(**dump) for c in contents]}
    if config.system_instruction is not None:
        body["systemInstruction"] = {"parts": [{"text": config.system_instruction}], "role": "user"}
    if config.tools:
        body["tools"] = [t.model_dump(**dump) for t in config.tools]
    return body
