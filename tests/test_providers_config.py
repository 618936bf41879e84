"""Provider configuration from the environment and config.toml, and the factory."""

from __future__ import annotations

import tomllib

from slop_tui.providers import (
    ProviderConfig,
    create_provider,
    default_provider_name,
    load_provider_configs,
)
from slop_tui.providers.config import NO_KEY


def test_nothing_configured_means_demo() -> None:
    configs, errors = load_provider_configs({}, None)
    assert errors == []
    assert configs["demo"] == ProviderConfig(name="demo", kind="demo", model="slop-demo")
    assert configs["openai"].api_key is None and configs["openai"].model == "gpt-4o-mini"
    assert configs["gemini"].api_key is None and configs["gemini"].model == "gemini-2.5-flash"
    assert "gemini_gca" not in configs
    assert default_provider_name(configs, {}) == "demo"


def test_openai_from_env() -> None:
    env = {"OPENAI_API_KEY": "sk-1", "OPENAI_MODEL": "gpt-4.1", "GEMINI_API_KEY": "g"}
    configs, _ = load_provider_configs(env, None)
    openai = configs["openai"]
    assert (openai.kind, openai.model, openai.api_key, openai.base_url) == (
        "openai",
        "gpt-4.1",
        "sk-1",
        None,
    )
    assert default_provider_name(configs, env) == "openai"  # openai wins over gemini


def test_openai_api_base_alias_and_keyless_compatible_server() -> None:
    env = {"OPENAI_API_BASE": "http://localhost:11434/v1"}
    configs, _ = load_provider_configs(env, None)
    assert configs["openai"].base_url == "http://localhost:11434/v1"
    assert configs["openai"].api_key == NO_KEY
    assert default_provider_name(configs, env) == "openai"
    both = {"OPENAI_BASE_URL": "http://a/v1", "OPENAI_API_BASE": "http://b/v1"}
    assert load_provider_configs(both, None)[0]["openai"].base_url == "http://a/v1"


def test_gemini_key_fallbacks() -> None:
    configs, _ = load_provider_configs({"GOOGLE_API_KEY": "google"}, None)
    assert configs["gemini"].api_key == "google"
    assert default_provider_name(configs, {}) == "gemini"
    env = {"GOOGLE_API_KEY": "google", "GEMINI_API_KEY": "gemini", "GEMINI_BASE_URL": "http://g"}
    configs, _ = load_provider_configs(env, None)
    assert (configs["gemini"].api_key, configs["gemini"].base_url) == ("gemini", "http://g")


def test_vertex_settings_give_gemini_gca() -> None:
    env = {
        "GOOGLE_GENAI_USE_VERTEXAI": "true",
        "GOOGLE_CLOUD_PROJECT": "proj",
        "GOOGLE_CLOUD_LOCATION": "europe-west4",
    }
    gca = load_provider_configs(env, None)[0]["gemini_gca"]
    assert gca.kind == "gemini_gca"
    assert dict(gca.extra) == {"project": "proj", "location": "europe-west4"}


TOML = """
[providers.openai]
model = "gpt-4.1-mini"

[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen"
timeout = 30

[providers.router]
kind = "openai"
base_url = "https://openrouter.ai/api/v1"
api_key_env = "OPENROUTER_KEY"
extra = { transforms = ["strip_reasoning"] }

[providers.gem]
kind = "gemini"
api_key = "inline"
api_version = "v1beta"
"""


def test_table_entries_add_and_override() -> None:
    env = {"OPENAI_API_KEY": "sk-env", "OPENROUTER_KEY": "or-key"}
    configs, errors = load_provider_configs(env, tomllib.loads(TOML)["providers"])
    assert errors == []
    # Same name: the table's fields win, the rest comes from the environment.
    assert (configs["openai"].model, configs["openai"].api_key) == ("gpt-4.1-mini", "sk-env")
    local = configs["local"]
    assert (local.kind, local.model, local.api_key, local.timeout) == ("openai", "qwen", NO_KEY, 30)
    router = configs["router"]
    assert router.api_key == "or-key" and dict(router.extra) == {"transforms": ["strip_reasoning"]}
    gem = configs["gem"]
    assert (gem.kind, gem.model, gem.api_key, gem.api_version) == (
        "gemini",
        "gemini-2.5-flash",
        "inline",
        "v1beta",
    )
    assert default_provider_name(configs, env) == "openai"


def test_a_different_kind_does_not_inherit_env_values() -> None:
    env = {"OPENAI_API_KEY": "sk-env", "OPENAI_MODEL": "gpt-x"}
    configs, _ = load_provider_configs(env, {"openai": {"kind": "gemini", "api_key": "g"}})
    assert (configs["openai"].kind, configs["openai"].model) == ("gemini", "gemini-2.5-flash")


def test_bad_entries_are_reported_not_raised() -> None:
    table = {
        "notatable": "x",
        "weird": {"kind": "anthropic"},
        "nokind": {"model": "m"},
        "badtimeout": {"kind": "openai", "timeout": -1},
        "badmodel": {"kind": "openai", "model": 3},
        "typo": {"kind": "openai", "modle": "m", "api_key": "k"},
        "unsetkey": {"kind": "openai", "api_key_env": "NOPE_NOT_SET"},
        "demo": {"kind": "openai"},
    }
    configs, errors = load_provider_configs({}, table)
    for name in ("notatable", "weird", "nokind", "badtimeout", "badmodel"):
        assert name not in configs
        assert any(f"[providers.{name}]" in e for e in errors), (name, errors)
    assert configs["typo"].api_key == "k"  # kept; the unknown key is reported
    assert any("modle" in e for e in errors)
    assert configs["unsetkey"].api_key is None
    assert any("NOPE_NOT_SET" in e for e in errors)
    assert configs["demo"].kind == "demo"  # the fallback cannot be hidden
    assert all("\n" not in e for e in errors)
    assert load_provider_configs({}, ["not", "a", "table"])[1] == [  # type: ignore[arg-type]
        "[providers]: expected a table of named providers"
    ]


def test_the_key_never_shows_in_repr() -> None:
    config = ProviderConfig(name="openai", kind="openai", model="m", api_key="sk-secret")
    assert "sk-secret" not in repr(config)


def test_create_provider_picks_the_adapter() -> None:
    configs, _ = load_provider_configs(
        {"GOOGLE_GENAI_USE_VERTEXAI": "1", "GOOGLE_CLOUD_PROJECT": "p"}, None
    )
    made = {name: create_provider(c) for name, c in configs.items()}
    assert {n: (type(p).__name__, p.strategy, p.model) for n, p in made.items()} == {
        "openai": ("OpenAIProvider", "openai", "gpt-4o-mini"),
        "gemini": ("GeminiProvider", "gemini", "gemini-2.5-flash"),
        "gemini_gca": ("GeminiProvider", "gemini_gca", "gemini-2.5-flash"),
        "demo": ("DemoProvider", "openai", "slop-demo"),
    }
    assert all(p.name == n for n, p in made.items())
