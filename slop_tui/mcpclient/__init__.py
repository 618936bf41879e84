"""Model Context Protocol servers as tool sources (headless).

`settings` reads `[mcp.servers.NAME]`; `naming` turns a server's tool into
what the model sees (`mcp__SERVER__TOOL`, a checked schema, a neutralised
description); `content` turns a result into the text a tool row holds;
`manager` runs the servers on the official SDK (`mcp` on PyPI), which `sdk`
imports in a background thread (after the app's first frame, or when the first
server starts).

Named `mcpclient`, not `mcp`, so it never shadows the SDK's package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slop_tui.mcpclient.naming import is_mcp_name
from slop_tui.mcpclient.sdk import preload_sdk
from slop_tui.mcpclient.settings import ServerSettings, parse_servers

if TYPE_CHECKING:  # the manager is imported when a workspace first needs it
    from slop_tui.ledger import Ledger
    from slop_tui.mcpclient.manager import McpManager
    from slop_tui.tools.sandbox import Sandbox

__all__ = ["ServerSettings", "build_manager", "is_mcp_name", "parse_servers", "preload_sdk"]


def build_manager(
    raw: Any,
    *,
    ledger: Ledger,
    project_root: Path,
    env: Mapping[str, str],
    sandbox: Callable[[], Sandbox],
) -> tuple[McpManager, list[str]]:
    """The manager of the `[mcp]` table (no server started) and the table's warnings."""
    from slop_tui.mcpclient.manager import McpManager

    servers, warnings = parse_servers(raw, "config.toml")
    manager = McpManager(
        servers, ledger=ledger, project_root=project_root, env=env, sandbox=sandbox
    )
    return manager, warnings
