"""OpenAI chat completions, streamed, for OpenAI and every compatible server.

The SDK is imported lazily (it costs ~0.8 s) and its own retries are off:
`retry.py` is the one retry policy. The stream quirks handled here come from
providers_testing.md §2: the usage chunk has `choices == []`, tool-call
arguments arrive in pieces keyed by `index`, a malformed `data:` line raises a
bare `json.JSONDecodeError`, a 200 that is not SSE yields zero chunks, and a
stream cut without a finish reason ends without any error.

Invalid UTF-8 in an event becomes U+FFFD, as google-genai does: the SDK's SSE
decoder decodes each line strictly and a single bad byte lost the whole reply
("UnicodeDecodeError"). That relies on two private names of the SDK,
`AsyncOpenAI._make_sse_decoder` and `SSEDecoder._decode_lines` (openai 3.x);
`tests/test_robust_edges.py` fails if they change.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slop_tui.context.layout import cache_breakpoints
from slop_tui.context.prompt import Prompt, PromptMessage
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
from slop_tui.providers.retry import retry_after_from_headers
from slop_tui.providers.sdk import sdk_ready
from slop_tui.records import STRATEGY_OPENAI, ToolCall

if TYPE_CHECKING:
    import openai

# Finish reasons of a reply that ended the way the model meant it to.
_COMPLETE_FINISH = {"stop", "tool_calls", "function_call"}
# Compatible servers stream reasoning under one of these delta fields.
_REASONING_FIELDS = ("reasoning_content", "reasoning")
_CONNECT_TIMEOUT = 10.0
_OWNED_FIELDS = ("model", "messages", "stream", "stream_options", "tools")


def _call_json(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": json.dumps(call.arguments, ensure_ascii=False),
        },
    }


def _assistant_message(msg: PromptMessage) -> dict[str, Any]:
    native = msg.native
    if (
        isinstance(native, Mapping)
        and native.get("role") == "assistant"
        and isinstance(native.get("tool_calls"), list)
        and native["tool_calls"]
    ):
        # The stored message object, verbatim: ids and argument strings exactly
        # as the model produced them.
        return dict(native)
    return {
        "role": "assistant",
        "content": msg.text or None,
        "tool_calls": [_call_json(c) for c in msg.tool_calls],
    }


def openai_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """The chat `messages` for a prompt: the system text first, then the conversation."""
    out: list[dict[str, Any]] = []
    if prompt.system_text:
        out.append({"role": "system", "content": prompt.system_text})
    shown: list[PromptMessage] = []  # tool results with images, shown after their run
    for msg in prompt.messages:
        if msg.role != "tool" and shown:
            out.append(_tool_images(shown))
            shown = []
        if msg.role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": msg.text}
            )
            if msg.images:
                shown.append(msg)
        elif msg.role == "assistant" and msg.tool_calls:
            out.append(_assistant_message(msg))
        elif msg.role == "assistant":
            out.append({"role": "assistant", "content": msg.text})
        elif msg.images:
            out.append({"role": "user", "content": _user_parts(msg)})
        else:
            out.append({"role": "user", "content": msg.text})
    if shown:
        out.append(_tool_images(shown))
    return out


# Anthropic's breakpoint mark, as OpenRouter passes it on (at most 4 per request).
CACHE_CONTROL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4


def takes_cache_control(model: str) -> bool:
    """A model that caches only at explicit breakpoints: an Anthropic model named the
    way OpenRouter's (and LiteLLM's) OpenAI-compatible APIs name them,
    `anthropic/<model>`, whatever the base URL. OpenAI and Gemini models cache
    prefixes on their own."""
    return model.lower().startswith("anthropic/")


def with_breakpoints(messages: list[dict[str, Any]], prompt: Prompt) -> list[dict[str, Any]]:
    """`messages` (from `openai_messages(prompt)`) with a `cache_control` mark on the text
    part that ends each non-empty cached tier (`layout.cache_breakpoints`)."""
    marks = cache_breakpoints(prompt, MAX_BREAKPOINTS)
    offset = 1 if prompt.system_text else 0  # the system message comes first
    at = [i + offset for i in marks.messages]
    if marks.system:
        at.insert(0, 0)
    out = list(messages)
    for i in at:
        msg = dict(out[i])
        text = msg.get("content")
        if isinstance(text, str) and text:
            msg["content"] = [{"type": "text", "text": text, "cache_control": dict(CACHE_CONTROL)}]
            out[i] = msg
    return out


def _tool_images(results: list[PromptMessage]) -> dict[str, Any]:
    """A tool message holds text only: the images tool results returned follow their
    run of results as one user message, each labelled with its call."""
    parts: list[dict[str, Any]] = []
    for msg in results:
        parts.append(
            {"type": "text", "text": f"[image(s) returned by {msg.tool_name} ({msg.tool_call_id})]"}
        )
        parts.extend(_image_parts(msg))
    return {"role": "user", "content": parts}


def _image_parts(msg: PromptMessage) -> list[dict[str, Any]]:
    return [
        {
            "type": "image_url",
            "image_url": {
                "url": f"data:{i.mime};base64,{base64.b64encode(i.data).decode('ascii')}"
            },
        }
        for i in msg.images
    ]


def _user_parts(msg: PromptMessage) -> list[dict[str, Any]]:
    """A user message with images: its text part, then one `image_url` data-URI part per
    image (detail `auto`, the default)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": msg.text}] if msg.text else []
    return parts + _image_parts(msg)


def openai_tools(prompt: Prompt) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            },
        }
        for t in prompt.tools
    ]


@dataclass
class _Assembly:
    """The reply being put together from chunks."""

    chunks: int = 0
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish: str | None = None
    usage: Any = None
    started: bool = False

    def feed(self, chunk: Any) -> list[StreamItem]:
        self.chunks += 1
        out: list[StreamItem] = []
        if getattr(chunk, "usage", None):
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or []:  # [] on the usage chunk
            if choice.index not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                for name in _REASONING_FIELDS:
                    piece = getattr(delta, name, None)
                    if isinstance(piece, str) and piece:
                        self.thinking.append(piece)
                        out.append(ThinkingDelta(piece))
                        break
                if delta.content:
                    self.text.append(delta.content)
                    out.append(TextDelta(delta.content))
                for tc in delta.tool_calls or []:
                    self._tool_delta(tc)
            if choice.finish_reason:
                self.finish = choice.finish_reason
        if out:
            self.started = True
        return out

    def _tool_delta(self, tc: Any) -> None:
        self.started = True
        index = tc.index
        if index is None:
            # Some compatible servers omit the index: a new id opens a new call,
            # anything else continues the last one.
            index = len(self.calls) if (tc.id or not self.calls) else max(self.calls)
        slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if tc.id:
            slot["id"] = tc.id
        function = tc.function
        if function is not None:
            if function.name:
                slot["name"] += function.name
            if function.arguments:
                slot["arguments"] += function.arguments

    @property
    def answer(self) -> str:
        return "".join(self.text)

    def reply(self) -> ProviderReply:
        text = self.answer
        payload = None
        if self.calls:
            calls = []
            for n, index in enumerate(sorted(self.calls)):
                slot = self.calls[index]
                # A missing id would leave the tool result nothing to point at.
                call_id = slot["id"] or f"call_{n}"
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": slot["name"], "arguments": slot["arguments"]},
                    }
                )
            payload = dumps({"role": "assistant", "content": text or None, "tool_calls": calls})
        usage = self.usage
        details = getattr(usage, "prompt_tokens_details", None)
        output_details = getattr(usage, "completion_tokens_details", None)
        return ProviderReply(
            text=text,
            tool_calls=payload_tool_calls(STRATEGY_OPENAI, text, payload),
            payload=payload,
            finish_reason=self.finish,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
            complete=self.finish in _COMPLETE_FINISH,
            thinking="".join(self.thinking),
            reasoning_tokens=int(getattr(output_details, "reasoning_tokens", 0) or 0),
            usage_reported=usage is not None,
        )


@functools.cache
def _client_class() -> type:
    """`openai.AsyncOpenAI` whose SSE decoder reads invalid UTF-8 as U+FFFD."""
    import openai
    from openai._streaming import SSEDecoder

    class LenientSSEDecoder(SSEDecoder):
        def _decode_lines(self, lines: Iterator[bytes]) -> Iterator[Any]:
            # Lines are split at CR/LF bytes, which never occur inside a UTF-8
            # sequence, so decoding line by line replaces exactly the bad bytes.
            for raw_line in lines:
                sse = self.decode(raw_line.decode("utf-8", "replace"))
                if sse:
                    yield sse

    class LenientAsyncOpenAI(openai.AsyncOpenAI):
        def _make_sse_decoder(self) -> SSEDecoder:
            return LenientSSEDecoder()

    return LenientAsyncOpenAI


class OpenAIProvider(Provider):
    """An OpenAI-compatible chat-completions endpoint."""

    strategy = STRATEGY_OPENAI

    def __init__(
        self,
        config: ProviderConfig,
        *,
        default_headers: Mapping[str, str] | None = None,
        trust_env: bool = True,
    ) -> None:
        """`trust_env=False` ignores proxy variables (loopback servers such as the demo)."""
        self.config = config
        self.name = config.name
        self.model = config.model
        self.reply_timeout = config.reply_timeout
        self._default_headers = dict(default_headers or {})
        self._trust_env = trust_env
        self._client: openai.AsyncOpenAI | None = None

    # -- request ---------------------------------------------------------------------

    def request_body(self, prompt: Prompt, model: str | None = None) -> dict[str, Any]:
        model = model or self.model
        messages = openai_messages(prompt)
        if takes_cache_control(model):
            messages = with_breakpoints(messages, prompt)
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = openai_tools(prompt)
        if tools:
            body["tools"] = tools
        body.update(self._extra_body())
        return body

    def _extra_body(self) -> dict[str, Any]:
        # Fields this adapter owns are not overridable: changing them would break parsing.
        return {k: v for k, v in self.config.extra.items() if k not in _OWNED_FIELDS}

    def _check_config(self) -> None:
        """A configuration that cannot work fails at once, before the SDK is loaded."""
        if not self.config.api_key:
            raise provider_error(
                "config",
                self.name,
                detail="no API key: set OPENAI_API_KEY, or api_key / api_key_env "
                f"in [providers.{self.name}]",
            )
        if (problem := base_url_problem(self.config.base_url)) is not None:
            raise provider_error("config", self.name, detail=problem)

    async def _ready_client(self) -> openai.AsyncOpenAI:
        """The client, its SDK imported in a thread (the event loop goes on drawing)."""
        if self._client is None:
            self._check_config()
            await sdk_ready("openai")
        return self._get_client()

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._check_config()
            import openai

            self._client = _client_class()(
                api_key=self.config.api_key,
                base_url=self.config.base_url,
                max_retries=0,  # retry.py decides
                timeout=openai.Timeout(
                    self.config.timeout, connect=min(_CONNECT_TIMEOUT, self.config.timeout)
                ),
                default_headers=self._default_headers or None,
                http_client=(
                    None if self._trust_env else openai.DefaultAsyncHttpxClient(trust_env=False)
                ),
            )
        return self._client

    # -- streaming -------------------------------------------------------------------

    async def stream(self, prompt: Prompt, model: str | None = None) -> AsyncIterator[StreamItem]:
        body = self.request_body(prompt, model)
        client = await self._ready_client()
        extra = self._extra_body()
        kwargs = {k: v for k, v in body.items() if k not in extra}
        state = _Assembly()
        stream = None
        watchdog = Watchdog(idle=self.config.timeout)
        try:
            try:
                stream = await watchdog.wait(
                    client.chat.completions.create(**kwargs, extra_body=extra or None)
                )
                events = aiter(stream)
                while (chunk := await watchdog.wait(anext(events, None))) is not None:
                    for item in state.feed(chunk):
                        yield item
            except ProviderError:
                raise
            except Exception as exc:  # every SDK/transport failure becomes a ProviderError
                raise self._map_error(exc, state) from exc
        finally:
            watchdog.close()
            if stream is not None:
                # Also on cancellation: closing the response stops the HTTP stream.
                await stream.close()
        if state.chunks == 0:
            raise provider_error(
                "malformed",
                self.name,
                message=f"The {self.name} provider answered without a stream (HTTP 200 "
                "with no events); check that base_url points at an OpenAI-compatible /v1 API.",
            )
        if state.finish is None:
            raise provider_error(
                "truncated",
                self.name,
                output_started=state.started,
                partial_text=state.answer,
            )
        yield state.reply()

    def _map_error(self, exc: Exception, state: _Assembly | None = None) -> ProviderError:
        import openai

        started = state.started if state else False
        partial = state.answer if state else ""
        common: dict[str, Any] = {"output_started": started, "partial_text": partial}
        if isinstance(exc, IdleTimeout):
            return idle_error(self.name, exc, **common)
        if is_bad_url(exc):
            return provider_error("config", self.name, detail=exc.__cause__ or exc)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            kind = status_kind(status)
            body = exc.body
            detail = body.get("message") if isinstance(body, Mapping) else None
            retry_after = None
            if kind in ("rate_limit", "server"):
                retry_after = retry_after_from_headers(exc.response.headers, status)
            return provider_error(
                kind,
                self.name,
                status=status,
                detail=detail or exc.message,
                retry_after=retry_after,
                **common,
            )
        if isinstance(exc, openai.APITimeoutError):
            return provider_error(
                "timeout",
                self.name,
                detail=f"no data within {self.config.timeout:g} s",
                **common,
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            where = self.config.base_url or "api.openai.com"
            if started:
                msg = f"The {self.name} provider dropped the connection mid-reply: {cause}."
                return provider_error("network", self.name, message=msg, **common)
            return provider_error(
                "network",
                self.name,
                detail=f"{where}: {cause}",
                unreachable=is_unreachable(exc),
                **common,
            )
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
            return provider_error("malformed", self.name, detail=exc, **common)
        if isinstance(exc, openai.APIError):
            # An error object inside the stream (the SDK raises the bare APIError).
            return provider_error("stream_error", self.name, detail=exc.message, **common)
        kind = transport_kind(exc)
        if kind is not None:
            return provider_error(kind, self.name, detail=exc, **common)
        return provider_error(
            "stream_error", self.name, detail=f"{type(exc).__name__}: {exc}", **common
        )

    # -- models and lifecycle --------------------------------------------------------

    async def list_models(self) -> list[str]:
        client = await self._ready_client()
        try:
            return sorted([m.id async for m in client.models.list()])
        except Exception as exc:
            raise self._map_error(exc) from exc

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
