"""Provider settings from the environment and from `config.toml`.

Environment variables give the default `openai`, `gemini` and (for Vertex AI)
`gemini_gca` entries; a `[providers.NAME]` table in config.toml adds named
endpoints or sets fields of the env-derived entry of the same name that the
environment leaves unset (a key can stay in the environment while the model
is pinned in the file). The environment outranks the files: a field a
variable sets (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`, the
`GEMINI_*` ones) keeps the variable's value whatever a file says. An OpenAI-compatible
server (Ollama, vLLM, OpenRouter, llama.cpp) is kind `openai` with a
`base_url`; without a key it gets the placeholder key `none`, which such
servers ignore. `demo` is always present.

Nothing here raises on bad input: each problem becomes a one-line error that
the caller shows, and the broken entry is left out.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = ("openai", "gemini", "gemini_gca", "demo")
DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "gemini": "gemini-2.5-flash",
    "gemini_gca": "gemini-2.5-flash",
    "demo": "slop-demo",
}
# Seconds without data (a stream event; keep-alive comments do not count) before a
# reply is given up: also the longest wait for the first event, so it leaves room
# for a model that reasons silently before it answers.
DEFAULT_TIMEOUT = 300.0
# Seconds one whole reply may take: the first attempt, every retry and its wait,
# and the stream to its last event.
DEFAULT_REPLY_TIMEOUT = 1800.0
NO_KEY = "none"  # what keyless OpenAI-compatible servers get (the SDK insists on a key)

_TABLE_KEYS = {
    "kind",
    "model",
    "base_url",
    "api_key",
    "api_key_env",
    "api_version",
    "timeout",
    "reply_timeout",
    "project",
    "location",
    "extra",
}
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class ProviderConfig:
    """One named endpoint.

    `extra` holds kind-specific settings: for `openai` extra request-body
    fields (e.g. `{"temperature": 0.2}` or OpenRouter's `transforms`), for
    `gemini`/`gemini_gca` `GenerateContentConfig` fields (e.g.
    `{"thinking_config": {"include_thoughts": true}}`) plus `project` and
    `location` for Vertex AI, for `demo` the streaming `delay` in seconds.
    """

    name: str
    kind: str
    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_version: str | None = None
    timeout: float = DEFAULT_TIMEOUT  # idle deadline on data (see DEFAULT_TIMEOUT)
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT  # overall deadline of one reply

    @property
    def has_key(self) -> bool:
        """A usable credential (a real key, or a keyless compatible server)."""
        if self.kind == "demo":
            return True
        if self.kind == "gemini_gca":
            return True  # Vertex AI uses application-default credentials
        return bool(self.api_key) and (self.api_key != NO_KEY or self.base_url is not None)


def _env(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def _from_env(env: Mapping[str, str]) -> dict[str, ProviderConfig]:
    configs: dict[str, ProviderConfig] = {}
    base = _env(env, "OPENAI_BASE_URL", "OPENAI_API_BASE")
    key = _env(env, "OPENAI_API_KEY")
    configs["openai"] = ProviderConfig(
        name="openai",
        kind="openai",
        model=_env(env, "OPENAI_MODEL") or DEFAULT_MODELS["openai"],
        base_url=base,
        api_key=key or (NO_KEY if base else None),
    )
    configs["gemini"] = ProviderConfig(
        name="gemini",
        kind="gemini",
        model=_env(env, "GEMINI_MODEL") or DEFAULT_MODELS["gemini"],
        base_url=_env(env, "GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"),
        api_key=_env(env, "GEMINI_API_KEY", "GOOGLE_API_KEY"),
        api_version=_env(env, "GEMINI_API_VERSION", "GOOGLE_GENAI_API_VERSION"),
    )
    vertex = (_env(env, "GOOGLE_GENAI_USE_VERTEXAI") or "").lower() in _TRUE
    project = _env(env, "GOOGLE_CLOUD_PROJECT")
    if vertex or project:
        configs["gemini_gca"] = ProviderConfig(
            name="gemini_gca",
            kind="gemini_gca",
            model=_env(env, "GEMINI_MODEL") or DEFAULT_MODELS["gemini_gca"],
            api_version=_env(env, "GOOGLE_GENAI_API_VERSION"),
            extra={
                "project": project,
                "location": _env(env, "GOOGLE_CLOUD_LOCATION") or "global",
            },
        )
    configs["demo"] = ProviderConfig(name="demo", kind="demo", model=DEFAULT_MODELS["demo"])
    return configs


def _env_fields(env: Mapping[str, str]) -> dict[str, set[str]]:
    """Per env-derived entry, the fields a variable set (these outrank any file)."""
    out: dict[str, set[str]] = {"openai": set(), "gemini": set(), "gemini_gca": set()}
    for entry, field_name, names in (
        ("openai", "base_url", ("OPENAI_BASE_URL", "OPENAI_API_BASE")),
        ("openai", "api_key", ("OPENAI_API_KEY",)),
        ("openai", "model", ("OPENAI_MODEL",)),
        ("gemini", "base_url", ("GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")),
        ("gemini", "api_key", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
        ("gemini", "model", ("GEMINI_MODEL",)),
        ("gemini", "api_version", ("GEMINI_API_VERSION", "GOOGLE_GENAI_API_VERSION")),
        ("gemini_gca", "model", ("GEMINI_MODEL",)),
        ("gemini_gca", "api_version", ("GOOGLE_GENAI_API_VERSION",)),
    ):
        if _env(env, *names) is not None:
            out[entry].add(field_name)
    return out


def _opt_str(entry: Mapping[str, Any], key: str, where: str, errors: list[str]) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        errors.append(f"{where}: {key} must be a non-empty string")
        raise ValueError(key)
    return value.strip()


def _from_table(
    name: str,
    entry: object,
    env: Mapping[str, str],
    base: ProviderConfig | None,
    errors: list[str],
) -> ProviderConfig | None:
    where = f"[providers.{name}]"
    if not isinstance(entry, Mapping):
        errors.append(f"{where}: expected a table, got {type(entry).__name__}")
        return None
    unknown = sorted(set(entry) - _TABLE_KEYS)
    if unknown:
        errors.append(f"{where}: unknown key(s) {', '.join(unknown)} ignored")
    try:
        kind = _opt_str(entry, "kind", where, errors)
        if kind is None:
            kind = base.kind if base else (name if name in KINDS else None)
        if kind is None:
            errors.append(f"{where}: kind is required (one of {', '.join(KINDS)})")
            return None
        if kind not in KINDS:
            errors.append(f"{where}: unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
            return None
        fields = {
            k: _opt_str(entry, k, where, errors)
            for k in ("model", "base_url", "api_key", "api_key_env", "api_version")
        }
        project = _opt_str(entry, "project", where, errors)
        location = _opt_str(entry, "location", where, errors)
    except ValueError:
        return None
    seconds = {}
    for key in ("timeout", "reply_timeout"):
        value = entry.get(key, None)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            errors.append(
                f"{where}: {key} = {value!r} must be a positive, finite number of seconds"
            )
            return None
        seconds[key] = value
    timeout = seconds["timeout"]
    extra = entry.get("extra", {})
    if not isinstance(extra, Mapping):
        errors.append(f"{where}: extra must be a table")
        return None

    # Only an entry of the same kind inherits env values; a new kind starts clean.
    inherit = base if base is not None and base.kind == kind else None
    if inherit is not None:  # what a variable set outranks the file
        for set_by_env in _env_fields(env).get(name, ()):
            fields[set_by_env] = None
            if set_by_env == "api_key":
                fields["api_key_env"] = None
    api_key = fields["api_key"]
    if api_key is None and fields["api_key_env"] is not None:
        api_key = _env(env, fields["api_key_env"])
        if api_key is None:
            errors.append(f"{where}: api_key_env {fields['api_key_env']} is not set")
    merged_extra = dict(inherit.extra) if inherit else {}
    merged_extra.update(extra)
    if project is not None:
        merged_extra["project"] = project
    if location is not None:
        merged_extra["location"] = location
    base_url = fields["base_url"] or (inherit.base_url if inherit else None)
    if api_key is None and inherit is not None and fields["api_key_env"] is None:
        api_key = inherit.api_key
    if api_key is None and kind == "openai" and base_url is not None:
        api_key = NO_KEY
    return ProviderConfig(
        name=name,
        kind=kind,
        model=fields["model"] or (inherit.model if inherit else DEFAULT_MODELS[kind]),
        base_url=base_url,
        api_key=api_key,
        api_version=fields["api_version"] or (inherit.api_version if inherit else None),
        timeout=float(timeout) if timeout is not None else DEFAULT_TIMEOUT,
        extra=merged_extra,
        reply_timeout=(
            float(seconds["reply_timeout"])
            if seconds["reply_timeout"] is not None
            else DEFAULT_REPLY_TIMEOUT
        ),
    )


def load_provider_configs(
    env: Mapping[str, str], table: Mapping[str, Any] | None = None
) -> tuple[dict[str, ProviderConfig], list[str]]:
    """All configured providers by name, and one-line errors for broken entries.

    `table` is the `[providers]` table of config.toml (NAME -> entry). Entry
    keys: kind, model, base_url, api_key or api_key_env (the name of a
    variable holding the key), api_version, timeout, project, location, extra.
    """
    configs = _from_env(env)
    errors: list[str] = []
    if table is not None and not isinstance(table, Mapping):
        errors.append("[providers]: expected a table of named providers")
        table = None
    for name, entry in (table or {}).items():
        if not isinstance(name, str) or not name.strip():
            errors.append(f"[providers]: invalid provider name {name!r}")
            continue
        config = _from_table(name, entry, env, configs.get(name), errors)
        if config is not None:
            configs[name] = config
    if "demo" not in configs or configs["demo"].kind != "demo":
        # `demo` is the promised fallback; an entry that hides it is refused.
        if "demo" in configs:
            errors.append("[providers.demo]: the name demo is reserved for the offline demo")
        configs["demo"] = ProviderConfig(name="demo", kind="demo", model=DEFAULT_MODELS["demo"])
    return configs, errors


def strategy_of(kind: str) -> str:
    """The parsing strategy a provider of `kind` writes and replays (the offline demo
    speaks OpenAI-shaped payloads)."""
    return "openai" if kind in ("openai", "demo") else kind


def default_provider_name(configs: Mapping[str, ProviderConfig], env: Mapping[str, str]) -> str:
    """`openai` if it has a key (or a keyless base URL), else `gemini` if it has a key, else `demo`.

    `env` is accepted for symmetry with `load_provider_configs` (keys are
    already resolved into `configs`).
    """
    for name in ("openai", "gemini"):
        config = configs.get(name)
        if config is not None and config.kind == name and config.has_key:
            return name
    return "demo"


def base_url_problem(url: str | None) -> str | None:
    """Why `url` can never work as a provider's base URL, or None when it may.

    Such a URL ("not a url", `file://…`, a port past 65535) fails the same way on
    every attempt, so it is a configuration error, reported at once and never
    retried."""
    if url is None:
        return None
    from urllib.parse import urlsplit

    shown = url if len(url) <= 80 else url[:79] + "…"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port out of range or not a number
    except ValueError as exc:
        return f"base_url {shown!r} is not a valid URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        return f"base_url {shown!r} is not an http:// or https:// URL"
    if not parts.hostname or any(c.isspace() for c in url) or port == 0:
        return f"base_url {shown!r} names no host (or port) to connect to"
    return None


def with_overrides(config: ProviderConfig, **changes: Any) -> ProviderConfig:
    """A copy with some fields replaced (e.g. tests pointing at a loopback server)."""
    return dataclasses.replace(config, **changes)
