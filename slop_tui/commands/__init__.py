"""Every slash command: one table, one parser, one dispatcher.

`await dispatch(workspace, "/session list")` returns a `CommandResult` that
the TUI, the command palette and `slop-tui exec` all render the same way.
`python -m slop_tui.commands --markdown` prints docs/commands.md from the
same table `/help` uses.
"""

from __future__ import annotations

from slop_tui.commands import (  # noqa: F401  (registration)
    continuity,
    export_cmds,
    history,
    image,
    knowledge,
    mcp_cmds,
    models,
    repo,
    sessions,
    trash,
    url,
)
from slop_tui.commands.base import (
    CATEGORIES,
    TABLE,
    Command,
    CommandError,
    CommandResult,
    UsageError,
    command,
    ok,
    split_first,
)
from slop_tui.ledger import LedgerError
from slop_tui.records import Changed
from slop_tui.tools.args import lone_surrogate

TABLE.command_aliases.update({"messages": "message", "usage": "stats", "quit": "exit"})
TABLE.default_sub.update(
    {
        "session": "list",
        "message": "list",
        "tool": "list",
        "skill": "list",
        "memo": "list",
        "context": "show",
        "state": "show",
        "trash": "list",
        "mcp": "list",
    }
)


@command("help", None, "/help", "This list.", "Core")
async def help_cmd(ws, args: str) -> CommandResult:
    return ok(help_markdown(heading_level=2))


@command("exit", None, "/exit", "Leave slop-tui (also /quit).", "Core")
async def exit_cmd(ws, args: str) -> CommandResult:
    return CommandResult(ok=True, text="Bye.", quit=True)


def is_command(text: str) -> bool:
    return text.lstrip().startswith("/")


def resolve(text: str) -> tuple[Command | None, str, CommandResult | None]:
    """Find the command a line names; returns (command, its arguments, error)."""
    name, rest = split_first(text.lstrip()[1:])
    name = TABLE.command_aliases.get(name, name)
    if not name or not any(c.name == name for c in TABLE.commands):
        word = text.strip().split(None, 1)[0] if text.strip() else "/"
        return (
            None,
            "",
            CommandResult(ok=False, text=f"Unknown command: {word}", error_kind="unknown"),
        )
    direct = TABLE.find(name, None)
    if direct is not None:
        return direct, rest, None
    sub, sub_rest = split_first(rest)
    if not sub:
        sub = TABLE.default_sub.get(name, "")
        sub_rest = ""
    cmd = TABLE.find(name, sub)
    if cmd is None:
        subs = " | ".join(c.sub or "" for c in TABLE.subs(name))
        return None, "", CommandResult(ok=False, error_kind="usage", text=f"Usage: /{name} {subs}")
    return cmd, sub_rest, None


async def dispatch(ws, text: str) -> CommandResult:
    """Run one slash command. Never raises for bad input: errors are one line."""
    if (bad := lone_surrogate(text)) is not None:
        # argv holds undecodable bytes as lone surrogates (`slop-tui exec $'\xff'`);
        # the ledger stores UTF-8 only, so such a line is refused before anything runs.
        return CommandResult(
            ok=False,
            error_kind="usage",
            text=f"The line contains {bad}, which is not valid Unicode "
            "(undecodable input); retype it as UTF-8 text.",
        )
    if not is_command(text):
        return CommandResult(ok=True, send=text)
    cmd, args, error = resolve(text)
    if error is not None:
        return error
    assert cmd is not None
    try:
        return await cmd.handler(ws, args)
    except UsageError as exc:
        return CommandResult(ok=False, text=str(exc), error_kind="usage")
    except (CommandError, LedgerError) as exc:
        return CommandResult(
            ok=False,
            text=f"{cmd.label}: {_sentence(str(exc))}",
            error_kind=getattr(exc, "kind", "failed"),
            data=getattr(exc, "data", None),
        )


def _sentence(text: str) -> str:
    line = " ".join(text.split())
    return line if line.endswith(".") else line + "."


def completions(prefix: str) -> list[tuple[str, str]]:
    """(completion, hint) pairs for what the user has typed so far."""
    out: list[tuple[str, str]] = []
    for cmd in TABLE.commands:
        label = cmd.label
        if label.startswith(prefix.strip()) or (prefix.strip() and prefix.startswith(label)):
            out.append((label, cmd.usage))
    return out


def help_markdown(heading_level: int = 1) -> str:
    h = "#" * heading_level
    lines = [f"{h} Commands", ""]
    for cat in CATEGORIES:
        cmds = [c for c in TABLE.commands if c.category == cat]
        if not cmds:
            continue
        lines += [f"{h}# {cat}", "", "| command | what it does |", "|---|---|"]
        for c in cmds:
            usage = c.usage.replace("|", "\\|")
            alias = f" (alias: {', '.join(c.aliases)})" if c.aliases else ""
            lines.append(f"| `{usage}` | {c.summary}{alias} |")
        lines.append("")
    aliases = ", ".join(f"`/{a}` → `/{t}`" for a, t in sorted(TABLE.command_aliases.items()))
    lines += [f"Command aliases: {aliases}.", ""]
    return "\n".join(lines)


def commands_doc() -> str:
    """The text of docs/commands.md (a test fails when the file differs)."""
    intro = (
        "<!-- Generated by `make docs` (python -m slop_tui.commands --markdown). "
        "Do not edit by hand. -->\n\n"
        "Every command is one entry of one table in `slop_tui/commands/`; the TUI's prompt, "
        "its keys, the command palette and `slop-tui exec` all run the same code.\n"
        "A line that does not start with `/` is sent to the model. An unknown command prints "
        "`Unknown command: /x` and does nothing else; wrong arguments print one usage line.\n\n"
    )
    body = help_markdown(heading_level=1)
    first, rest = body.split("\n", 1)
    return first + "\n\n" + intro + rest.lstrip("\n")


__all__ = [
    "Changed",
    "CommandResult",
    "TABLE",
    "commands_doc",
    "completions",
    "dispatch",
    "help_markdown",
    "is_command",
    "resolve",
]
