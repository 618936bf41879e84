"""Configuration: where the ledger lives and what `config.toml` says.

Precedence, highest first: command-line options, environment variables, the
project's `.slop/config.toml`, the user's `~/.config/slop-tui/config.toml`
(or `$SLOP_CONFIG`), built-in defaults. A broken file never stops the app:
its problems are collected as one-line warnings and the defaults are used.

The project file may not redirect a provider, loosen approvals, override
prices or raise a spending limit until the user has trusted the folder
(`slop_tui.trust`): those settings of an untrusted file are left out, with one
warning naming them (`Config.untrusted`).
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_DB = Path(".slop") / "slop.db"

# Deepest nesting of tables and arrays accepted under one top-level key (the
# deepest real setting, `providers.NAME.extra.*`, needs a handful).
MAX_NESTING = 32
# Known top-level keys and tables; anything else is reported, not fatal.
_KNOWN = {
    "default_provider": str,
    "theme": str,
    "approve": str,
    "providers": dict,
    "keymap": dict,
    "truncation": dict,
    "context": dict,
    "tools": dict,
    "models": dict,
    "compaction": dict,
    "prices": dict,  # [prices.MODEL] input / output / cached_input, USD per million tokens
    "budget": dict,
    "network": dict,
    "mcp": dict,  # [mcp.servers.NAME], read by slop_tui.mcpclient.settings
}
_TOOLS_KEYS = {
    "max_iterations": int,
    "parallel": int,
    "bash_timeout": (int, float),
    "query_time_limit": (int, float),
    "turn_timeout": (int, float),  # seconds one whole turn may run
    "sandbox": str,  # "auto" | "off" (execute_bash's OS sandbox)
    "shell_network": bool,  # the sandboxed shell may use the network
}
_NETWORK_KEYS = {"allow_private": bool}  # URL context may fetch from private addresses
_CONTEXT_KEYS = {
    "window": int,
    "layout": str,
    "repo_map_tokens": int,
    "file_tree_tokens": int,
    "repo_watcher_idle": (int, float),  # minutes the map's watcher process outlives the app
}
# USD; a limit is off when absent.
_BUDGET_KEYS = {"session_cost_limit": (int, float), "daily_cost_limit": (int, float)}
# An hour: about max_iterations (50) steps of a minute each. A turn past it is
# almost always stuck (a model calling the same slow tool again and again).
DEFAULT_TURN_TIMEOUT = 3600.0
# Smallest allowed value of a number; TOML also allows inf and nan, which are refused.
_MINIMUM = {
    "tools.max_iterations": 1,
    "tools.parallel": 1,
    "tools.bash_timeout": 0.1,
    "tools.query_time_limit": 0.1,
    "tools.turn_timeout": 0.1,
    "context.window": 0,
    "context.repo_watcher_idle": 0,
    "budget.session_cost_limit": 0,
    "budget.daily_cost_limit": 0,
}


@dataclass(frozen=True)
class Config:
    db_path: Path
    project_root: Path
    config_files: tuple[Path, ...] = ()
    default_provider: str | None = None
    theme: str | None = None
    approve: str = "reads"
    providers: Mapping[str, Any] = field(default_factory=dict)
    keymap: Mapping[str, str] = field(default_factory=dict)
    truncation: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    tools: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Any] = field(default_factory=dict)  # [models.NAME] window overrides
    compaction: Mapping[str, Any] = field(default_factory=dict)
    prices: Mapping[str, Any] = field(default_factory=dict)  # valid [prices] overrides only
    budget: Mapping[str, Any] = field(default_factory=dict)
    network: Mapping[str, Any] = field(default_factory=dict)
    mcp: Mapping[str, Any] = field(default_factory=dict)  # MCP servers (slop_tui.mcpclient)
    warnings: tuple[str, ...] = ()
    # Settings of an untrusted project file that were left out (see slop_tui.trust).
    untrusted: tuple[str, ...] = ()
    user_config_dir: Path | None = None  # where the trusted-folder record lives
    # The folder slop-tui was started in when it is a subfolder of the project (a git
    # repository whose root holds the ledger); None when started in the project root.
    started_in: Path | None = None

    @property
    def max_iterations(self) -> int:
        return int(self.tools.get("max_iterations", 50))

    @property
    def parallel_tools(self) -> int:
        return int(self.tools.get("parallel", 4))

    @property
    def bash_timeout(self) -> float:
        return float(self.tools.get("bash_timeout", 180))

    @property
    def query_time_limit(self) -> float:
        """Seconds one `query_db` statement may run before it is stopped."""
        return float(self.tools.get("query_time_limit", 2.0))

    @property
    def turn_timeout(self) -> float:
        """Seconds one whole turn may run: every reply, tool run and approval in it."""
        return float(self.tools.get("turn_timeout", DEFAULT_TURN_TIMEOUT))

    @property
    def sandbox_mode(self) -> str:
        return str(self.tools.get("sandbox", "auto"))

    @property
    def shell_network(self) -> bool:
        return self.tools.get("shell_network") is True

    @property
    def allow_private(self) -> bool:
        """`[network] allow_private`: URL context may fetch from loopback and private
        addresses (off by default: a page or the model could reach the local network)."""
        return self.network.get("allow_private") is True

    @property
    def project_config(self) -> Path:
        return self.project_root / ".slop" / "config.toml"


def user_config_path(env: Mapping[str, str]) -> Path:
    if env.get("SLOP_CONFIG"):
        return Path(env["SLOP_CONFIG"]).expanduser()
    base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "slop-tui" / "config.toml"


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    return user_config_path(env if env is not None else os.environ).parent


def _read_toml(path: Path, warnings: list[str]) -> dict[str, Any]:
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a folder, or a FIFO open() would wait on
            warnings.append(f"{path}: not a regular file; using defaults for this file.")
            return {}
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        warnings.append(f"{path}: TOML syntax error ({exc}); using defaults for this file.")
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        warnings.append(
            f"{path}: arrays or tables nested too deeply to read; using defaults for this file."
        )
    except UnicodeDecodeError as exc:
        warnings.append(f"{path}: not UTF-8 text (byte {exc.start}); using defaults for this file.")
    except OSError as exc:
        warnings.append(f"{path}: cannot read ({exc.strerror}); using defaults for this file.")
    return {}


def nesting_depth(value: object, limit: int) -> int:
    """How deeply lists and tables nest in `value`, counted up to `limit + 1`.

    Iterative: a value nested thousands deep (`[a.a.a…]` headers parse without
    recursion) must not overflow the stack here, nor later in the code (merging,
    JSON encoding of a provider's `extra`) that walks it recursively.
    """
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _check_types(data: dict[str, Any], path: Path, warnings: list[str]) -> dict[str, Any]:
    clean: dict[str, Any] = {}
    for key, value in data.items():
        expected = _KNOWN.get(key)
        if expected is None:
            warnings.append(f"{path}: unknown key '{key}' ignored.")
            continue
        if nesting_depth(value, MAX_NESTING) > MAX_NESTING:
            warnings.append(
                f"{path}: '{key}' nests tables or arrays more than {MAX_NESTING} deep; ignored."
            )
            continue
        if not isinstance(value, expected):
            warnings.append(
                f"{path}: '{key}' should be a {expected.__name__}, not {type(value).__name__}; ignored."
            )
            continue
        clean[key] = value
    for table, spec in (
        ("tools", _TOOLS_KEYS),
        ("context", _CONTEXT_KEYS),
        ("budget", _BUDGET_KEYS),
        ("network", _NETWORK_KEYS),
    ):
        if table in clean:
            checked = {}
            for k, v in clean[table].items():
                want = spec.get(k)
                if want is None:
                    warnings.append(f"{path}: unknown key '{table}.{k}' ignored.")
                elif (isinstance(v, bool) and want is not bool) or not isinstance(v, want):
                    warnings.append(f"{path}: '{table}.{k}' has the wrong type; ignored.")
                elif (low := _MINIMUM.get(f"{table}.{k}")) is not None and not (
                    math.isfinite(v) and v >= low
                ):
                    warnings.append(
                        f"{path}: '{table}.{k}' = {v} must be a finite number, at least {low}; "
                        "using the default."
                    )
                else:
                    checked[k] = v
            clean[table] = checked
    if "compaction" in clean:
        from slop_tui.context.budget import removed_settings

        clean["compaction"], gone = removed_settings(clean["compaction"])
        warnings.extend(f"{path}: {warning}" for warning in gone)
    if "truncation" in clean:
        from slop_tui.context.tiers import TruncationSettings

        try:
            TruncationSettings.from_mapping(clean["truncation"])
        except (TypeError, ValueError) as exc:
            warnings.append(f"{path}: [truncation] {exc}; using the default limits.")
            clean.pop("truncation")
    if "prices" in clean:
        from slop_tui.pricing import parse_overrides

        valid, errors = parse_overrides(clean["prices"])
        warnings.extend(f"{path}: {error}" for error in errors)
        clean["prices"] = {k: v for k, v in clean["prices"].items() if k in valid}
    if "keymap" in clean:
        for k, v in clean["keymap"].items():
            if not isinstance(v, str):
                warnings.append(f"{path}: 'keymap.{k}' should be a key string; ignored.")
        clean["keymap"] = {str(k): v for k, v in clean["keymap"].items() if isinstance(v, str)}
    if clean.get("tools", {}).get("sandbox", "auto") not in ("auto", "off"):
        warnings.append(f"{path}: '[tools] sandbox' must be auto or off; using 'auto'.")
        clean["tools"].pop("sandbox")
    if "approve" in clean and clean["approve"] not in ("none", "reads", "all"):
        warnings.append(f"{path}: 'approve' must be none, reads or all; using 'reads'.")
        clean.pop("approve")
    return clean


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(
    *,
    db: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Read configuration from files and the environment; never raises for bad files."""
    from slop_tui.trust import sensitive, trust_state, untrusted_warning

    env = os.environ if env is None else env
    started = (cwd or Path.cwd()).resolve()
    cwd = project_root_for(started, env) if not (db or env.get("SLOP_DB")) else started
    warnings: list[str] = []
    user_path, project_path = user_config_path(env), cwd / ".slop" / "config.toml"
    merged: dict[str, Any] = {}
    used: list[Path] = []
    untrusted: list[str] = []
    for path in (user_path, project_path):
        data = _read_toml(path, warnings)
        if not data:
            continue
        used.append(path)
        data = _check_types(data, path, warnings)
        if path == project_path:
            state = trust_state(cwd, user_path.parent)
            if state.status != "trusted":
                data, untrusted = sensitive(
                    data, merged.get("approve", "reads"), merged.get("budget", {})
                )
                if untrusted:
                    warnings.append(untrusted_warning(path, untrusted, state))
        merged = _merge(merged, data)
    db_value = db or env.get("SLOP_DB")
    db_path = Path(db_value).expanduser() if db_value else cwd / DEFAULT_DB
    if not db_path.is_absolute():
        db_path = cwd / db_path
    return Config(
        db_path=db_path,
        project_root=cwd,
        config_files=tuple(used),
        default_provider=merged.get("default_provider"),
        theme=merged.get("theme"),
        approve=merged.get("approve", "reads"),
        providers=merged.get("providers", {}),
        keymap=merged.get("keymap", {}),
        truncation=merged.get("truncation", {}),
        context=merged.get("context", {}),
        tools=merged.get("tools", {}),
        models=merged.get("models", {}),
        compaction=merged.get("compaction", {}),
        prices=merged.get("prices", {}),
        budget=merged.get("budget", {}),
        network=merged.get("network", {}),
        mcp=merged.get("mcp", {}),
        warnings=tuple(warnings),
        untrusted=tuple(untrusted),
        user_config_dir=user_path.parent,
        started_in=started if started != cwd else None,
    )


def project_root_for(cwd: Path, env: Mapping[str, str]) -> Path:
    """Where the project is: `cwd`, or, when `cwd` is a subfolder of a git repository
    whose root holds a ledger (`.slop/slop.db`) and `cwd` has no `.slop/` of its own,
    that root, so one repository keeps one ledger. The search stops at the folders of
    `GIT_CEILING_DIRECTORIES`, as git's does."""
    if (cwd / ".slop").exists():
        return cwd
    ceilings = {
        Path(p).expanduser().resolve()
        for p in env.get("GIT_CEILING_DIRECTORIES", "").split(os.pathsep)
        if p.strip()
    }
    for parent in cwd.parents:
        if parent in ceilings:
            break
        if (parent / ".git").exists():
            return parent if (parent / DEFAULT_DB).is_file() else cwd
    return cwd
