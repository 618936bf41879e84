"""Provider adapters: a `Prompt` in, vendor wire format out, project events back.

Importing this package imports neither `openai` nor `google.genai` (each costs
most of a second); the adapters import them on first use.

    configs, errors = load_provider_configs(os.environ, toml.get("providers"))
    provider = create_provider(configs[default_provider_name(configs, os.environ)])
    async for item in stream_with_retries(provider, prompt):
        ...  # TextDelta / ThinkingDelta, then one ProviderReply; or ProviderError
"""

from __future__ import annotations

from slop_tui.providers.base import (
    ERROR_KINDS,
    Provider,
    ProviderError,
    ProviderReply,
    StreamItem,
    TextDelta,
    ThinkingDelta,
)
from slop_tui.providers.config import (
    ProviderConfig,
    default_provider_name,
    load_provider_configs,
)
from slop_tui.providers.retry import RetryPolicy, retry_delay, stream_with_retries

__all__ = [
    "ERROR_KINDS",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderReply",
    "RetryPolicy",
    "StreamItem",
    "TextDelta",
    "ThinkingDelta",
    "create_provider",
    "default_provider_name",
    "load_provider_configs",
    "retry_delay",
    "stream_with_retries",
]


def create_provider(config: ProviderConfig) -> Provider:
    """The adapter for a configuration (no network, no SDK import until first use)."""
    if config.kind == "openai":
        from slop_tui.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(config)
    if config.kind in ("gemini", "gemini_gca"):
        from slop_tui.providers.gemini_provider import GeminiProvider

        return GeminiProvider(config)
    if config.kind == "demo":
        from slop_tui.providers.demo import DemoProvider

        return DemoProvider(config)
    raise ValueError(f"unknown provider kind {config.kind!r}")
