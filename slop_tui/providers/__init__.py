"""Provider adapters: a `Prompt` in, vendor wire format out, project events back.

Importing this package imports neither `openai` nor `google.genai` (each costs
most of a second); the adapters import them on first use.

    configs, errors = load_provider_configs(os.environ, toml.get("providers"))
    provider = create_provider(configs[default_provider_name(configs, os.environ)])
    async for item in stream_with_retries(provider, prompt):
        ...  # TextDelta / ThinkingDelta, then one ProviderReply; or ProviderError
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slop_tui.lazy import lazy_exports

if TYPE_CHECKING:
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

# The names are resolved lazily (PEP 562): the app's first screen reads the provider
# configuration (`providers.config`) for its header; the adapters' base and the retry
# loop (with their imports) come with the first request.
# public name -> the submodule that defines it
_SOURCES: dict[str, str] = {
    "ERROR_KINDS": "base",
    "Provider": "base",
    "ProviderError": "base",
    "ProviderReply": "base",
    "StreamItem": "base",
    "TextDelta": "base",
    "ThinkingDelta": "base",
    "ProviderConfig": "config",
    "default_provider_name": "config",
    "load_provider_configs": "config",
    "RetryPolicy": "retry",
    "retry_delay": "retry",
    "stream_with_retries": "retry",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())


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
