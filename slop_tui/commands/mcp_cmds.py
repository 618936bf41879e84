"""`/mcp`: the configured MCP servers, their state, and restarting, enabling,
disabling them and accepting a tool whose definition changed."""

from __future__ import annotations

from slop_tui.commands.base import CommandError, CommandResult, UsageError, command, ok, split_first
from slop_tui.records import Changed

TOOLS = "Models & tools"


def _manager(ws):
    if ws.mcp is None or not ws.mcp.configured:
        raise CommandError(
            "no MCP server is configured; add one under [mcp.servers.NAME] in config.toml "
            "(docs/configuration.md)."
        )
    return ws.mcp


def _server(ws, args: str, usage: str):
    mcp = _manager(ws)
    name = args.strip()
    if not name:
        raise UsageError(f"a server name is needed. Usage: {usage}")
    if name not in mcp.servers:
        raise CommandError(
            f"there is no MCP server '{name}'; configured: {', '.join(mcp.servers)}."
        )
    return mcp, name


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@command(
    "mcp",
    "list",
    "/mcp list",
    "MCP servers: status, tools, the sandbox each runs in, the last error.",
    TOOLS,
)
async def mcp_list(ws, args: str) -> CommandResult:
    mcp = _manager(ws)
    await mcp.pending()  # reads which servers /mcp disable switched off
    lines = [
        "| server | transport | status | tools | sandbox | last error |",
        "|---|---|---|---|---|---|",
    ]
    notes = []
    for server in mcp.servers.values():
        held = sum(1 for t in server.tools.values() if t.held)
        count = f"{len(server.tools)}" + (f" ({held} held)" if held else "")
        lines.append(
            f"| {server.name} | {server.settings.transport} | {mcp.status_line(server)} | "
            f"{count} | {mcp.describe_sandbox(server)} | {_cell(server.error) or '-'} |"
        )
        notes += [f"- {server.name}: {name} skipped: {why}" for name, why in server.skipped]
        notes += [
            f"- {server.name}: {t.exposed} is held until accepted (/mcp accept {server.name} "
            f"{t.name})"
            for t in server.tools.values()
            if t.held
        ]
    text = "\n".join(lines)
    if notes:
        text += "\n\n" + "\n".join(notes)
    outside = mcp.outside_sandbox()
    if outside:
        text += f"\n\nRunning outside the sandbox: {', '.join(outside)}."
    return ok(text, data=list(mcp.servers.values()))


@command("mcp", "restart", "/mcp restart NAME", "Stop an MCP server and start it again now.", TOOLS)
async def mcp_restart(ws, args: str) -> CommandResult:
    mcp, name = _server(ws, args, "/mcp restart NAME")
    server = mcp.servers[name]
    if server.status == "disabled":
        raise CommandError(f"MCP server '{name}' is disabled; /mcp enable {name} first.")
    await mcp.restart(name)
    notes = mcp.pop_notices()
    if server.status != "running":
        raise CommandError(f"MCP server '{name}' did not start: {server.error}")
    text = "\n".join([f"MCP server '{name}' restarted: {len(server.tools)} tools.", *notes])
    return ok(text, changed=Changed.TOOLS)


@command("mcp", "enable", "/mcp enable NAME", "Start offering an MCP server's tools again.", TOOLS)
async def mcp_enable(ws, args: str) -> CommandResult:
    mcp, name = _server(ws, args, "/mcp enable NAME")
    await mcp.set_enabled(name, True)
    return ok(f"MCP server '{name}' enabled; it starts with the next turn.", changed=Changed.TOOLS)


@command(
    "mcp",
    "disable",
    "/mcp disable NAME",
    "Stop an MCP server and stop offering its tools (kept across restarts).",
    TOOLS,
)
async def mcp_disable(ws, args: str) -> CommandResult:
    mcp, name = _server(ws, args, "/mcp disable NAME")
    await mcp.set_enabled(name, False)
    return ok(f"MCP server '{name}' disabled and stopped.", changed=Changed.TOOLS)


@command(
    "mcp",
    "accept",
    "/mcp accept SERVER [TOOL]",
    "Accept the changed description or schema of a held MCP tool (all of a server's if no TOOL).",
    TOOLS,
)
async def mcp_accept(ws, args: str) -> CommandResult:
    name, tool = split_first(args)
    mcp, name = _server(ws, name, "/mcp accept SERVER [TOOL]")
    done = await mcp.accept(name, tool.strip())
    if not done:
        raise CommandError(
            f"MCP server '{name}' has no held tool{f' {tool.strip()!r}' if tool.strip() else ''}."
        )
    return ok(f"Accepted: {', '.join(done)}; offered to the model again.", changed=Changed.TOOLS)
