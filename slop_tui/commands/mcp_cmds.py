"""`/mcp`: the configured MCP servers, their state, and restarting, enabling,
disabling them and accepting a tool or prompt whose definition changed;
`/mcp resource`: a server's resources as context (the `resources` layer)."""

from __future__ import annotations

from slop_tui.commands.base import (
    CommandError,
    CommandResult,
    UsageError,
    command,
    no_args,
    ok,
    one_number,
    split_first,
)
from slop_tui.records import Changed
from slop_tui.safe_text import neutralise

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
            f"- {server.name}: prompt {name} is no skill: {why}"
            for name, why in server.skipped_prompts
        ]
        notes += [
            f"- {server.name}: prompt {name} changed; its skill {p.skill} keeps the accepted "
            f"text until /mcp accept {server.name} {name}"
            for name, p in server.held_prompts.items()
        ]
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
    "Accept a held MCP tool's changed description or schema, or a changed prompt's text "
    "(all of a server's if no TOOL).",
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


RESOURCE_USAGE = "/mcp resource add SERVER URI | list | remove N"


@command(
    "mcp",
    "resource",
    RESOURCE_USAGE,
    "A server's text resource as context, sent with every request until removed; list "
    "them (and what running servers offer), or remove one.",
    TOOLS,
)
async def mcp_resource(ws, args: str) -> CommandResult:
    action, rest = split_first(args)
    if action == "add":
        return await _resource_add(ws, rest)
    if action == "remove":
        return await _resource_remove(ws, rest)
    if action in ("list", ""):
        no_args(rest, "/mcp resource list")
        return await _resource_list(ws)
    raise UsageError(f"unknown action '{action}'. Usage: {RESOURCE_USAGE}")


async def _resource_add(ws, args: str) -> CommandResult:
    from slop_tui.mcpclient.manager import ResourceProblem

    words = args.split()
    if len(words) != 2:
        raise UsageError("a server and a URI are needed. Usage: /mcp resource add SERVER URI")
    mcp, name = _server(ws, words[0], "/mcp resource add SERVER URI")
    uri = words[1]
    try:
        title, mime, text = await mcp.read_resource(name, uri)
    except ResourceProblem as exc:
        raise CommandError(f"{neutralise(uri)} was not added: {exc}.") from None
    stored = await ws.ledger.put_mcp_resource(ws.session, name, uri, title, mime, text)
    tokens = ws.ledger.count_tokens(text)
    label = f" ({title})" if title else ""
    return ok(
        f"Added {neutralise(uri)}{label} of MCP server '{name}': {tokens:,} tokens, sent with "
        f"every request until /mcp resource remove {stored.id}.",
        changed=Changed.FILES,
        data=stored.id,
    )


async def _resource_list(ws) -> CommandResult:
    attached = await ws.ledger.mcp_resources(ws.session)
    if attached:
        lines = ["| # | server | URI | name | tokens |", "|---|---|---|---|---|"]
        lines += [
            f"| {r.id} | {r.server} | {_cell(neutralise(r.uri))} | {_cell(r.name)} | "
            f"{ws.ledger.count_tokens(r.content):,} |"
            for r in attached
        ]
    else:
        lines = ["No MCP resource in the context; /mcp resource add SERVER URI adds one."]
    mcp = ws.mcp
    offered = []
    for server in mcp.servers.values() if mcp is not None else ():
        for uri, title, mime in server.resources:
            about = ", ".join(x for x in (title, mime) if x)
            offered.append(
                f"- {server.name}: {neutralise(uri)}" + (f" ({neutralise(about)})" if about else "")
            )
    if offered:
        lines += ["", "Offered by running servers:", *offered]
    return ok("\n".join(lines), data=[r.id for r in attached])


async def _resource_remove(ws, args: str) -> CommandResult:
    usage = "/mcp resource remove N"
    n = one_number(args, "resource number", usage)
    if not await ws.ledger.remove_mcp_resource(ws.session, n):
        raise CommandError(
            f"there is no resource {n}; /mcp resource list shows them and their numbers."
        )
    return ok(f"Removed resource {n} from the context.", changed=Changed.FILES)
