"""`[mcp.servers.NAME]` tables: what each Model Context Protocol server is and how it runs.

Pure: reads the merged config mapping, returns `ServerSettings` and one-line
warnings. Nothing here starts a process or imports the SDK, so reading the
settings costs nothing at start-up.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

APPROVE_ASK = "ask"  # every call asks (the default)
APPROVE_READS = "reads"  # tools the server marks read-only run; the others ask
APPROVE_ALL = "all"  # every call runs
APPROVALS = (APPROVE_ASK, APPROVE_READS, APPROVE_ALL)
DEFAULT_TIMEOUT = 60.0  # seconds one call may take
DEFAULT_START_TIMEOUT = 30.0  # seconds to start, initialize and list the tools
# A server name becomes part of tool names (`mcp__NAME__TOOL`), which providers
# limit to 64 characters of [A-Za-z0-9_-].
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

_KEYS: dict[str, Any] = {
    "command": str,
    "args": list,
    "env": dict,
    "cwd": str,
    "url": str,
    "headers": dict,
    "enabled": bool,
    "timeout": (int, float),
    "start_timeout": (int, float),
    "approve": str,
    "sandbox": bool,
    "network": bool,
}


@dataclass(frozen=True)
class ServerSettings:
    """One configured server: a stdio program (`command`) or a streamable HTTP `url`."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    timeout: float = DEFAULT_TIMEOUT
    start_timeout: float = DEFAULT_START_TIMEOUT
    approve: str = APPROVE_ASK
    sandbox: bool | None = None  # None: in the sandbox when bubblewrap can run
    network: bool = False

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


class MissingVariable(ValueError):
    """An `${VAR}` reference names a variable the environment does not have."""


def expand(value: str, env: Mapping[str, str]) -> str:
    """`${VAR}` references replaced by the environment's values (secrets stay out of files)."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise MissingVariable(f"the environment variable {name} is not set")
        return env[name]

    return _VAR.sub(sub, value)


def expand_all(values: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    return {k: expand(v, env) for k, v in values.items()}


def parse_servers(raw: Any, where: str = "config") -> tuple[dict[str, ServerSettings], list[str]]:
    """The servers of a merged `[mcp]` table, and a warning per problem (the server or
    key it names is left out)."""
    warnings: list[str] = []
    if not raw:
        return {}, warnings
    if not isinstance(raw, Mapping):
        return {}, [f"{where}: [mcp] should be a table; ignored."]
    for key in raw:
        if key != "servers":
            warnings.append(f"{where}: unknown key 'mcp.{key}' ignored.")
    servers = raw.get("servers", {})
    if not isinstance(servers, Mapping):
        return {}, [*warnings, f"{where}: [mcp.servers] should be a table; ignored."]
    out: dict[str, ServerSettings] = {}
    for name, table in servers.items():
        parsed = _one(str(name), table, warnings, where)
        if parsed is not None:
            out[parsed.name] = parsed
    return out, warnings


def _one(name: str, table: Any, warnings: list[str], where: str) -> ServerSettings | None:
    head = f"{where}: [mcp.servers.{name}]"
    if not NAME_RE.match(name):
        warnings.append(f"{head}: a server name is 1-32 letters, digits, '_' or '-'; left out.")
        return None
    if not isinstance(table, Mapping):
        warnings.append(f"{head} should be a table; left out.")
        return None
    values: dict[str, Any] = {}
    for key, value in table.items():
        want = _KEYS.get(key)
        if want is None:
            warnings.append(f"{head}: unknown key '{key}' ignored.")
        elif (isinstance(value, bool) and want is not bool) or not isinstance(value, want):
            warnings.append(f"{head}: '{key}' has the wrong type; ignored.")
        else:
            values[key] = value
    for key in ("args",):
        if key in values and not all(isinstance(a, str) for a in values[key]):
            warnings.append(f"{head}: '{key}' must be a list of strings; ignored.")
            values.pop(key)
    for key in ("env", "headers"):
        if key in values and not all(isinstance(v, str) for v in values[key].values()):
            warnings.append(f"{head}: every '{key}' value must be a string; ignored.")
            values.pop(key)
    for key, default in (("timeout", DEFAULT_TIMEOUT), ("start_timeout", DEFAULT_START_TIMEOUT)):
        value = values.get(key)
        if value is not None and not (math.isfinite(value) and value >= 0.1):
            warnings.append(
                f"{head}: '{key}' must be a finite number, at least 0.1; using {default:g}."
            )
            values.pop(key)
    if values.get("approve", APPROVE_ASK) not in APPROVALS:
        warnings.append(f"{head}: 'approve' must be ask, reads or all; using 'ask'.")
        values.pop("approve")
    command, url = values.get("command", ""), values.get("url", "")
    if bool(command.strip()) == bool(url.strip()):
        warnings.append(f"{head}: give exactly one of 'command' (stdio) or 'url' (HTTP); left out.")
        return None
    if url and not url.startswith(("http://", "https://")):
        warnings.append(f"{head}: 'url' must start with http:// or https://; left out.")
        return None
    return ServerSettings(
        name=name,
        command=command,
        args=tuple(values.get("args", ())),
        env=dict(values.get("env", {})),
        cwd=values.get("cwd", ""),
        url=url,
        headers=dict(values.get("headers", {})),
        enabled=values.get("enabled", True),
        timeout=float(values.get("timeout", DEFAULT_TIMEOUT)),
        start_timeout=float(values.get("start_timeout", DEFAULT_START_TIMEOUT)),
        approve=values.get("approve", APPROVE_ASK),
        sandbox=values.get("sandbox"),
        network=values.get("network", False),
    )
