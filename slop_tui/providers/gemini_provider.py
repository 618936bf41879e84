"""Gemini through google-genai's async client, streamed.

Kind `gemini` is the Gemini Developer API (an API key); kind `gemini_gca` is
the same SDK in Vertex AI mode (`vertexai=True` with a project and location,
credentials from Application Default Credentials). Both share one tool-call
family, so their stored parts replay to each other. Vertex mode cannot be
exercised offline beyond constructing the client.

The SDK is imported lazily (~0.6 s). google-genai makes one attempt by default;
`retry.py` is the one retry policy. Transport errors arrive unwrapped
(`httpx2.*`), so they are classified by class name (see `transport_kind`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slop_tui.context.prompt import Prompt
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
from slop_tui.records import STRATEGY_GEMINI, STRATEGY_GEMINI_GCA

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

_COMPLETE_FINISH = {"STOP"}
_CONFIG_ONLY = ("project", "location")  # `extra` keys that configure the client, not requests


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

    @property
    def vertex(self) -> bool:
        return self.strategy == STRATEGY_GEMINI_GCA

    # -- client ------------------------------------------------------------------------

    def _get_client(self) -> genai.Client:
        if self._client is not None:
            return self._client
        if (problem := base_url_problem(self.config.base_url)) is not None:
            raise provider_error("config", self.name, detail=problem)
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
                if not self.config.api_key:
                    raise ValueError(
                        "no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY), or api_key / "
                        f"api_key_env in [providers.{self.name}]"
                    )
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

    async def stream(self, prompt: Prompt, model: str | None = None) -> AsyncIterator[StreamItem]:
        contents, config = self._request(prompt)
        client = self._get_client()
        state = _Assembly()
        stream = None
        watchdog = Watchdog(idle=self.config.timeout)
        try:
            try:
                stream = await watchdog.wait(
                    client.aio.models.generate_content_stream(
                        model=model or self.model, contents=contents, config=config
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
        yield state.reply(self.strategy)

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
        client = self._get_client()
        try:
            pager = await client.aio.models.list()
            names = [m.name async for m in pager if m.name]
        except Exception as exc:
            raise self._map_error(exc) from exc
        # "models/gemini-2.5-flash" (and Vertex "publishers/google/models/…") -> the bare name.
        return sorted({n.rsplit("models/", 1)[-1] for n in names})

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aio.aclose()


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
