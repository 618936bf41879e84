"""Shared builders for the provider tests (no tests here)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Sequence

from slop_tui.context.prompt import Layer, Prompt, PromptMessage, ToolSpec
from slop_tui.providers import ProviderConfig, ProviderError, ProviderReply, StreamItem
from slop_tui.providers.base import TextDelta, ThinkingDelta
from slop_tui.records import ToolCall

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def prompt(
    *messages: PromptMessage,
    system: str = "You are terse.",
    tools: Sequence[ToolSpec] = (WEATHER,),
    strategy: str = "openai",
) -> Prompt:
    layers = (Layer("system", system, len(system) // 4),) if system else ()
    return Prompt(layers=layers, messages=messages, tools=tuple(tools), strategy=strategy)


def user(text: str) -> PromptMessage:
    return PromptMessage(role="user", text=text)


def assistant(
    text: str, calls: Sequence[ToolCall] = (), native: object | None = None
) -> PromptMessage:
    return PromptMessage(role="assistant", text=text, tool_calls=tuple(calls), native=native)


def tool(call_id: str, name: str, text: str) -> PromptMessage:
    return PromptMessage(role="tool", text=text, tool_call_id=call_id, tool_name=name)


def openai_config(base_url: str, timeout: float = 10.0, **extra: object) -> ProviderConfig:
    return ProviderConfig(
        name="openai",
        kind="openai",
        model="fake-model",
        base_url=base_url,
        api_key="x",
        timeout=timeout,
        extra=extra,
    )


def gemini_config(base_url: str, timeout: float = 10.0, **extra: object) -> ProviderConfig:
    return ProviderConfig(
        name="gemini",
        kind="gemini",
        model="gemini-2.5-flash",
        base_url=base_url,
        api_key="x",
        timeout=timeout,
        extra=extra,
    )


class Collected:
    """Everything a stream produced, and the error that ended it, if any."""

    def __init__(self) -> None:
        self.items: list[StreamItem] = []
        self.error: ProviderError | None = None

    @property
    def text(self) -> str:
        return "".join(i.text for i in self.items if isinstance(i, TextDelta))

    @property
    def thinking(self) -> str:
        return "".join(i.text for i in self.items if isinstance(i, ThinkingDelta))

    @property
    def reply(self) -> ProviderReply:
        assert self.error is None, f"stream failed: {self.error!r}"
        assert self.items and isinstance(self.items[-1], ProviderReply), self.items
        assert not any(isinstance(i, ProviderReply) for i in self.items[:-1])
        return self.items[-1]


async def collect(stream: AsyncIterator[StreamItem]) -> Collected:
    out = Collected()
    try:
        async for item in stream:
            out.items.append(item)
    except ProviderError as err:
        out.error = err
    return out


def refused_url(path: str) -> str:
    """A loopback URL nobody listens on (bound, then closed)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}{path}"
