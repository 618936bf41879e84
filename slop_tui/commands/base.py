"""The command table and the one dispatcher every surface calls.

The TUI's prompt, its command palette, its keys and `slop-tui exec` all call
`dispatch`, so a click and a slash command cannot drift apart. The same table
renders `/help` and `docs/commands.md`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slop_tui.records import Changed

if TYPE_CHECKING:
    from slop_tui.workspace import Workspace

CATEGORIES = (
    "Core",
    "Sessions",
    "Context & history",
    "Memory & skills",
    "Models & tools",
)


@dataclass(frozen=True)
class CommandResult:
    """What a command did, for any surface to render."""

    ok: bool = True
    text: str = ""
    error_kind: str | None = None  # "unknown" | "usage" | "failed" | "exists" | "busy"
    data: object | None = None
    send: str | None = None  # text to send to the model as the user's message
    # `/reply GID` from a topic lane: the group the sent prompt replies to, quoted for
    # that turn (`Orchestrator.run_turn(reply_to=...)`).
    reply_to: int | None = None
    changed: Changed = Changed.NONE  # what the panes should draw again
    quit: bool = False
    # The command that reverts this edit (e.g. "/redo"): every surface announces it,
    # the TUI with its key (`announcement`).
    revert: str | None = None
    # Long text (`/context show`): `slop-tui exec` on a terminal opens it in $EDITOR when
    # it is taller than the screen instead of printing it.
    page: bool = False

    @property
    def exit_code(self) -> int:
        if self.ok:
            return 0
        return 2 if self.error_kind in ("unknown", "usage") else 1

    def announcement(self, how: str | None = None) -> str:
        """The text, with the way back when the command took something away: `how` names
        it (a key), else the reverting command."""
        if not self.revert:
            return self.text
        return f"{self.text} {how or self.revert} brings it back."


class UsageError(Exception):
    """Wrong arguments; the message is the one-line usage."""


class CommandError(Exception):
    """The command could not be carried out; the message says why in one sentence.

    `kind` becomes the result's `error_kind` and `data` its `data`: "exists" (with
    the path) is a file the command would overwrite, which the TUI offers to
    overwrite after asking."""

    def __init__(self, message: str, *, kind: str = "failed", data: object = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.data = data


Handler = Callable[["Workspace", str], Awaitable[CommandResult]]


@dataclass(frozen=True)
class Command:
    name: str  # "session"
    sub: str | None  # "activate", or None for a command without subcommands
    usage: str  # "/session activate NAME"
    summary: str
    category: str
    handler: Handler
    aliases: tuple[str, ...] = ()  # alternative subcommand names (or command names)

    @property
    def label(self) -> str:
        return f"/{self.name} {self.sub}" if self.sub else f"/{self.name}"


@dataclass
class CommandTable:
    commands: list[Command] = field(default_factory=list)
    command_aliases: dict[str, str] = field(default_factory=dict)  # "messages" -> "message"
    default_sub: dict[str, str] = field(default_factory=dict)  # "/session" alone -> "list"

    def add(self, cmd: Command) -> None:
        self.commands.append(cmd)

    def names(self) -> list[str]:
        return sorted({c.name for c in self.commands} | set(self.command_aliases))

    def find(self, name: str, sub: str | None) -> Command | None:
        for c in self.commands:
            if c.name == name and (c.sub == sub or (sub is not None and sub in c.aliases)):
                return c
        return None

    def subs(self, name: str) -> list[Command]:
        return [c for c in self.commands if c.name == name and c.sub]


TABLE = CommandTable()


def command(
    name: str,
    sub: str | None,
    usage: str,
    summary: str,
    category: str,
    aliases: tuple[str, ...] = (),
) -> Callable[[Handler], Handler]:
    def wrap(fn: Handler) -> Handler:
        TABLE.add(Command(name, sub, usage, summary, category, fn, aliases))
        return fn

    return wrap


def ok(
    text: str = "",
    *,
    changed: Changed = Changed.NONE,
    data: object = None,
    revert: str | None = None,
    page: bool = False,
) -> CommandResult:
    return CommandResult(ok=True, text=text, changed=changed, data=data, revert=revert, page=page)


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 entry`, `2 entries`, `0 messages`."""
    return f"{n} {one if n == 1 else many or one + 's'}"


async def refuse_while_running(ws: Workspace) -> None:
    """CommandError while this process runs a turn (for commands that cannot wait)."""
    running = await ws.ledger.running_here()
    if running is not None:
        raise CommandError(
            f"group {running[1]}'s turn is still running; wait for it or cancel it (Esc) first."
        )


def split_first(text: str) -> tuple[str, str]:
    """Split on the first run of whitespace: ('session', 'activate my name')."""
    parts = text.strip().split(None, 1)
    if not parts:
        return "", ""
    return parts[0], parts[1] if len(parts) > 1 else ""


# The largest value an SQLite INTEGER holds: ids and counts above it cannot be looked up.
MAX_INT = 2**63 - 1


def parse_int(value: str, what: str, usage: str, minimum: int | None = None) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise UsageError(f"{what} must be a whole number. Usage: {usage}") from None
    if minimum is not None and n < minimum:
        raise UsageError(f"{what} must be {minimum} or more. Usage: {usage}")
    if n > MAX_INT:
        raise UsageError(f"{what} is too large (at most {MAX_INT}). Usage: {usage}")
    return n


def one_number(args: str, what: str, usage: str) -> int:
    """The single positive number a command takes, e.g. `/url remove N`."""
    words = args.split()
    if len(words) != 1:
        raise UsageError(f"one {what} is needed. Usage: {usage}")
    return parse_int(words[0], what, usage, minimum=1)


def no_args(args: str, usage: str, why: str = "") -> None:
    """Refuse arguments to a command that takes none; `why` says what it acts on."""
    if args.strip():
        raise UsageError(f"{usage} takes no arguments{why}.")


def parse_options(args: str, options: dict[str, str], usage: str) -> tuple[str, dict[str, str]]:
    """Split `TEXT --opt VALUE` into the free text and the given options."""
    try:
        tokens = shlex.split(args)
    except ValueError as exc:
        raise UsageError(f"{exc}. Usage: {usage}") from None
    free: list[str] = []
    found: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in options:
            if i + 1 >= len(tokens):
                raise UsageError(f"{tok} needs a value. Usage: {usage}")
            found[options[tok]] = tokens[i + 1]
            i += 2
            continue
        if tok.startswith("--"):
            raise UsageError(f"unknown option {tok}. Usage: {usage}")
        free.append(tok)
        i += 1
    return " ".join(free), found


def edit_in_editor(ws: Workspace, initial: str, suffix: str = ".md") -> str | None:
    """Open text in the workspace's editor ($EDITOR by default); None if it failed."""
    if ws.editor is not None:
        return ws.editor(initial, suffix)
    return run_editor(ws.env, initial, suffix)


def run_editor(env: Mapping[str, str], initial: str, suffix: str = ".md") -> str | None:
    """Open text in $VISUAL / $EDITOR (else vi) on a temporary file; the text after, or
    None when the editor failed."""
    editor = env.get("VISUAL") or env.get("EDITOR") or "vi"
    fd, path = tempfile.mkstemp(prefix="slop-", suffix=suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(initial)
        try:
            code = subprocess.call([*shlex.split(editor), path])
        except OSError as exc:
            raise CommandError(f"cannot start the editor '{editor}': {exc.strerror}.") from exc
        if code != 0:
            return None
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    finally:
        os.unlink(path)
