"""What a tool is, the context it runs in, and how its result is framed.

A tool is declared once with `@tool(...)`: the decorator turns the async run
function into a `Tool` carrying the name, description, JSON-schema parameters
and kind, so the schema the model sees and the code that runs cannot drift.
Run functions return the result body as text, or raise `ToolError` for a
failure the model can act on; `registry.run_tool` frames both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slop_tui.context.prompt import ToolSpec
from slop_tui.context.tiers import cut_middle
from slop_tui.records import STATUS_COMPLETED, STATUS_ERROR
from slop_tui.tools.errors import ToolError

if TYPE_CHECKING:  # the ledger pulls in aiosqlite; tools only need its methods
    from slop_tui.ledger import Ledger
    from slop_tui.tools.sandbox import Sandbox

KIND_READ = "read"
KIND_WRITE = "write"
KIND_SHELL = "shell"
KIND_NETWORK = "network"  # reaches the network (fetch_url): asks like a write
KINDS = (KIND_READ, KIND_WRITE, KIND_SHELL, KIND_NETWORK)

RESULT_HEADER = "### TOOL_RESULT: "
RESULT_FOOTER = "\n\n---"


@dataclass
class ToolContext:
    """Everything a tool may touch: the ledger, the session, the project folder."""

    ledger: Ledger
    session: str
    project_root: Path
    bash_timeout: float = 180.0
    # What a tool returns at most, before the context engine's tiers cut it further.
    # Reading tools page (read_file, grep): a page is at most this.
    max_output_chars: int = 200_000
    # A shell command's output cannot be read again later: the ledger keeps it
    # whole up to this (head and tail beyond it), recoverable through query_db.
    max_command_output_chars: int = 8_000_000
    cancel_event: asyncio.Event | None = None
    # The shell's OS sandbox (None or unavailable: commands run unconfined; the
    # orchestrator then asks before every one), and the variables it never gets
    # besides the common credential names (the providers' `api_key_env`).
    sandbox: Sandbox | None = None
    secret_env_names: frozenset[str] = frozenset()
    # Lines for the user (not the model) that tools add as they run; the orchestrator
    # shows them after the tool step, also when the step was cancelled or stopped.
    notices: list[str] = field(default_factory=list)
    # query_db limits (tests lower the time limit).
    db_time_limit: float = 2.0
    db_max_rows: int = 200
    db_max_chars: int = 100_000
    # fetch_url may connect to loopback and private addresses (`[network] allow_private`).
    allow_private: bool = False

    @property
    def root(self) -> Path:
        """The project root with symlinks resolved: the fence for every file tool."""
        return Path(self.project_root).resolve()

    def cancelled(self) -> bool:
        return self.cancel_event is not None and self.cancel_event.is_set()


def frame(name: str, body: str) -> str:
    """`### TOOL_RESULT: <name>\\n<body>\\n\\n---`, the reference tool's framing."""
    return f"{RESULT_HEADER}{name}\n{body}{RESULT_FOOTER}"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A framed tool result; `ok` is False when the body starts with `Error: `.

    `notice` is one line for the user, not the model (e.g. a memo was quarantined);
    the orchestrator turns it into a `Notice` event.
    """

    text: str
    ok: bool
    name: str
    notice: str = ""
    # Images the result carries (read_file on an image): the orchestrator records them
    # on the tool row, and the request sends them after the results (`images` package).
    images: tuple[Any, ...] = ()

    @property
    def status(self) -> str:
        """The ledger status for the tool row: `completed` or `error`."""
        return STATUS_COMPLETED if self.ok else STATUS_ERROR

    @property
    def body(self) -> str:
        """The text without the `### TOOL_RESULT` frame (for the UI)."""
        head = f"{RESULT_HEADER}{self.name}\n"
        text = self.text
        if text.startswith(head):
            text = text[len(head) :]
        if text.endswith(RESULT_FOOTER):
            text = text[: -len(RESULT_FOOTER)]
        return text


def ok_result(name: str, body: str, notice: str = "", images: tuple[Any, ...] = ()) -> ToolResult:
    return ToolResult(frame(name, body), True, name, notice, images)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a run function may return instead of a plain body: the body and a notice."""

    body: str
    notice: str = ""
    images: tuple[Any, ...] = ()  # `images.ImageInfo` of an image the tool read


def error_result(name: str, message: str, detail: str = "") -> ToolResult:
    return ToolResult(frame(name, ToolError(message, detail).body()), False, name)


RunFn = Callable[[dict[str, Any], ToolContext], Awaitable["str | Reply"]]


@dataclass(frozen=True, slots=True)
class Tool:
    """One agent tool: its declaration and its code."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: str
    run: RunFn = field(repr=False, compare=False)

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


def tool(
    name: str,
    description: str,
    kind: str,
    properties: dict[str, dict[str, Any]] | None = None,
    required: Sequence[str] = (),
) -> Callable[[RunFn], Tool]:
    """Declare a tool: `@tool("read_file", "...", "read", {...}, ["path"])`."""
    if kind not in KINDS:
        raise ValueError(f"tool kind must be one of {KINDS}, not {kind!r}")
    props = dict(properties or {})
    missing = [r for r in required if r not in props]
    if missing:
        raise ValueError(f"{name}: required parameters without a schema: {missing}")
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(required)

    def wrap(fn: RunFn) -> Tool:
        return Tool(name, description, schema, kind, fn)

    return wrap


def cap_text(text: str, limit: int, what: str = "output") -> str:
    """Keep the head and the tail of an over-long text, with a note between them.

    The tail usually holds what matters (the error at the end of a build log),
    so it gets the larger share.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    note = (
        f"\n\n... [{len(text) - limit:,} characters of {what} omitted; capped at {limit:,}] ...\n\n"
    )
    return cut_middle(text, limit, note, head_ratio=0.25)
