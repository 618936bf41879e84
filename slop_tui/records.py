"""Frozen records that every layer speaks.

The ledger maps SQLite rows to these; the context engine consumes them; the
UI renders them. Nothing here does I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# Message roles and statuses -------------------------------------------------

ROLES = ("system", "user", "assistant", "tool")

STATUS_COMPLETED = "completed"
STATUS_TOOL_CALL = "tool_call"
STATUS_ERROR = "error"
STATUS_DROPPED = "dropped"
STATUS_INTERRUPTED = "interrupted"
STATUS_SUMMARIZED = "summarized"
STATUSES = (
    STATUS_COMPLETED,
    STATUS_TOOL_CALL,
    STATUS_ERROR,
    STATUS_DROPPED,
    STATUS_INTERRUPTED,
    STATUS_SUMMARIZED,
)

# Parsing strategies (provider payload families) -----------------------------

STRATEGY_OPENAI = "openai"
STRATEGY_GEMINI = "gemini"
STRATEGY_GEMINI_GCA = "gemini_gca"
STRATEGIES = (STRATEGY_OPENAI, STRATEGY_GEMINI, STRATEGY_GEMINI_GCA)

DEFAULT_LANE = "main"
# The `lane` of the session summary (`[compaction] session_summary`): not a lane
# name (`check_lane` refuses it), so no lane's rows or summaries ever meet it.
SESSION_LANE = "*"
DEFAULT_SESSION = "default_session"
DEFAULT_WINDOW = 5


def strategy_family(strategy: str | None) -> str | None:
    """`gemini` and `gemini_gca` share one tool-call family."""
    if strategy in (STRATEGY_GEMINI, STRATEGY_GEMINI_GCA):
        return STRATEGY_GEMINI
    return strategy


class Changed(enum.Flag):
    """What an edit changed, so the panes that show it are drawn again (one snapshot
    read of the workspace for the set)."""

    NONE = 0
    HISTORY = enum.auto()  # rows of the conversation: added, dropped, removed, restored
    STATE = enum.auto()
    SCRATCHPAD = enum.auto()
    WINDOW = enum.auto()
    SESSION = enum.auto()  # the current session, or the list of sessions
    LANE = enum.auto()
    PROVIDER = enum.auto()  # the provider or model
    FILES = enum.auto()  # files in the context
    HANDOFF = enum.auto()
    MEMOS = enum.auto()
    SKILLS = enum.auto()
    TOOLS = enum.auto()
    CONTEXT = enum.auto()  # another layer of the next request (the personality, …)
    ALL = (HISTORY | STATE | SCRATCHPAD | WINDOW | SESSION | LANE | PROVIDER | FILES) | (
        HANDOFF | MEMOS | SKILLS | TOOLS
    )


@dataclass(frozen=True, slots=True)
class Message:
    """One ledger row of the `messages` table."""

    id: int
    session: str
    group_id: int | None
    lane: str
    role: str
    content: str
    status: str = STATUS_COMPLETED
    payload: str | None = None  # provider-native JSON (tool-call rows, Gemini parts)
    tool_call_id: str | None = None
    tool_name: str | None = None
    strategy: str | None = None
    tokens: int = 0
    created_at: float = 0.0  # epoch seconds, sub-second precision

    @property
    def is_tool_related(self) -> bool:
        return self.role == "tool" or self.status == STATUS_TOOL_CALL


@dataclass(frozen=True, slots=True)
class Session:
    """One row of `sessions` plus the totals the ledger keeps without scanning."""

    name: str
    window_size: int = DEFAULT_WINDOW
    scratchpad: str = ""
    provider: str | None = None
    model: str | None = None
    lane: str = DEFAULT_LANE
    created_at: float = 0.0
    updated_at: float = 0.0
    message_count: int = 0
    token_total: int = 0


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A line of `/session list`."""

    name: str
    groups: int
    messages: int
    tokens: int
    last_used: float
    preview: str


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A line of `/message list` and of the workspace's group list."""

    group_id: int
    lane: str
    prompt: str
    messages: int
    tokens: int
    status: str  # completed | dropped | interrupted | error | summarized (worst of the group)
    created_at: float


@dataclass(frozen=True, slots=True)
class StateVersion:
    """One version of the `### STATE` anchor, tied to the group that produced it."""

    id: int
    session: str
    group_id: int | None
    content: str
    created_at: float


@dataclass(frozen=True, slots=True)
class UsageCost:
    """One call's cost in USD, by part (see slop_tui/pricing.py); `source` says where
    the price came from (`genai-prices`, `config`, `demo`)."""

    input: float
    cached: float
    output: float
    reasoning: float
    saved: float
    source: str

    @property
    def total(self) -> float:
        return self.input + self.cached + self.output + self.reasoning


PURPOSE_TURN = "turn"
PURPOSE_CACHE = "cache"  # a context cache written for a call (Gemini explicit caching)


@dataclass(frozen=True, slots=True)
class Usage:
    """One provider call. `cost` None: the model's price is unknown (or the provider
    reported no usage, `reported` False); never a made-up figure."""

    id: int
    session: str
    group_id: int | None
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    created_at: float
    reasoning_tokens: int = 0
    reported: bool = True
    cost: UsageCost | None = None
    purpose: str = PURPOSE_TURN


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Usage summed per provider and model."""

    provider: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost: float = 0.0  # USD, of the calls whose price is known
    saved: float = 0.0  # USD the cached input saved
    unpriced: int = 0  # calls whose model has no known price
    unreported: int = 0  # calls the provider reported no usage for


@dataclass(frozen=True, slots=True)
class Spend:
    """What a set of calls cost: `cost` sums the calls whose price is known; `unpriced`
    and `unreported` count the others, so a total is never shown as complete when
    it is not. `background` (summaries, compaction, rebuilds) is part of the totals."""

    calls: int = 0
    cost: float = 0.0
    saved: float = 0.0
    unpriced: int = 0
    unreported: int = 0
    background: Spend | None = None

    @property
    def complete(self) -> bool:
        """Every call has a known cost."""
        return not self.unpriced and not self.unreported


MEMO_USER = "user"
MEMO_MODEL = "model"
MEMO_UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Memo:
    id: int
    content: str
    tags: tuple[str, ...]
    created_at: float
    source: str = "user"  # MEMO_USER, MEMO_MODEL or MEMO_UNKNOWN (saved before it was recorded)
    quarantined: bool = False  # instruction-shaped, waiting for the user's /memo confirm


@dataclass(frozen=True, slots=True)
class Skill:
    id: int
    name: str
    description: str
    prompt_patch: str
    activation_count: int = 0


@dataclass(frozen=True, slots=True)
class ToolInfo:
    name: str
    description: str
    schema_json: str
    enabled: bool = True
    call_count: int = 0


# `summaries.superseded`: whether a stored summary may stand for its rows.
SUMMARY_VALID = 0
SUMMARY_DISCARDED = 1  # `/context uncompact`
SUMMARY_STALE = 2  # a group it covers was dropped, restored, removed or undone since


@dataclass(frozen=True, slots=True)
class Summary:
    """A rolling summary of a span of messages (compaction, lanes)."""

    id: int
    session: str
    lane: str
    kind: str
    first_message_id: int
    last_message_id: int
    content: str
    version: int
    created_at: float

    def overlaps(self, first_id: int) -> bool:
        """Whether the span reaches the row `first_id` (or a later one): what an edit of
        a group starting there takes out of date."""
        return self.last_message_id >= first_id


@dataclass(frozen=True, slots=True)
class HistoryHit:
    """A `/history search` result."""

    message_id: int
    session: str
    group_id: int | None
    role: str
    snippet: str
    created_at: float


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to append; the ledger assigns id, time and (for users) the group."""

    role: str
    content: str
    status: str = STATUS_COMPLETED
    payload: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    strategy: str | None = None
    tokens: int | None = None  # None: the ledger counts them with its token counter
    lane: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A provider-neutral tool call extracted by the message parser.

    `arguments_error` says why the model's arguments could not be read (not
    JSON, or JSON that is not an object); `arguments` is then `{}` and the call
    is answered with that error instead of being run.
    """

    id: str
    name: str
    arguments: dict = field(default_factory=dict)
    arguments_error: str | None = None


# Continuity: compaction audit, handoffs, files in context, lanes ----

COMPACTION_CASES = ("truncate", "summarize", "elide", "emergency", "shed")
HANDOFF_REASONS = ("compaction", "session_switch", "exit", "checkpoint", "manual")


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """One audited reduction of a request or of a lane's history (`/context log`)."""

    id: int
    session: str
    lane: str
    trigger: str  # what set it off, e.g. "90% of max input" or "history > 24000 tokens"
    case_kind: str  # one of COMPACTION_CASES
    tokens_before: int
    tokens_after: int
    summary_id: int | None
    first_message_id: int | None
    last_message_id: int | None
    detail: str
    created_at: float
    undone: bool = False  # its summary was discarded (`/context uncompact`)
    stale: bool = False  # its summary is out of date: the history it covers changed


@dataclass(frozen=True, slots=True)
class Handoff:
    """Where work stood: written at compaction, session switch, exit and checkpoints."""

    session: str
    reason: str  # one of HANDOFF_REASONS
    task: str = ""
    branch: str | None = None
    head_commit: str | None = None
    modified_files: tuple[str, ...] = ()
    untracked_files: tuple[str, ...] = ()
    completed: tuple[str, ...] = ()
    remaining: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    continuation: str = ""
    id: int = 0  # 0 until stored
    created_at: float = 0.0
    consumed: bool = False


@dataclass(frozen=True, slots=True)
class ContextFile:
    """A file the user put into a session's context with `/file add` (root-relative path)."""

    session: str
    path: str
    added_at: float


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """One lane of a session (`/lane list`); counts cover visible rows only."""

    lane: str
    groups: int  # groups with at least one visible row
    messages: int  # visible rows (not dropped, not summarized)
    tokens: int  # tokens of the visible rows
    summarized: int  # rows covered by a summary
    last_used: float  # newest row of the lane, any status
    last_summary_at: float | None = None  # newest active summary of the lane


# The edit journal and the trash -------------------------------------------------

EDIT_UNDO = "undo"  # /undo: the last interaction left the context (to the trash)
EDIT_REMOVE = "remove"  # /message remove: a group to the trash
EDIT_RETRY = "retry"  # /retry: a failed prompt to the trash, sent again as a new turn
EDIT_DROP = "drop"  # /context drop: soft drop (the rows stay, status 'dropped')
EDIT_RESTORE = "restore"  # /context restore: a soft drop reverted
EDIT_CLEAR = "clear"  # /session clear: a session's history to the trash
EDIT_SESSION_REMOVE = "session_remove"  # /session remove: a whole session to the trash
EDIT_TRASH_RESTORE = "trash_restore"  # /trash restore, /redo: rows back from the trash
EDIT_EMPTY = "empty"  # /trash empty: the only hard delete
EDIT_MEMO_REMOVE = "memo_remove"  # /memo remove: a memo to the trash
EDIT_SKILL_REMOVE = "skill_remove"  # /skill delete: a skill to the trash
EDIT_STATE_SET = "state_set"  # /state set: a STATE version written by hand
EDIT_SCRATCHPAD = "scratchpad"  # a scratchpad write (command, SCRATCHPAD: signal, tool)
EDIT_UNCOMPACT = "uncompact"  # /context uncompact: summaries discarded
EDIT_AUTO_DROP = "auto_drop"  # the engine dropped rows on its own (a 400 fix, an overflow)
# Edits of values: /undo takes the newest back (when it is newer than the last
# interaction), /redo makes it again.
VALUE_EDIT_KINDS = (EDIT_STATE_SET, EDIT_SCRATCHPAD, EDIT_UNCOMPACT, EDIT_AUTO_DROP)
EDIT_KINDS = (
    EDIT_UNDO,
    EDIT_REMOVE,
    EDIT_RETRY,
    EDIT_DROP,
    EDIT_RESTORE,
    EDIT_CLEAR,
    EDIT_SESSION_REMOVE,
    EDIT_TRASH_RESTORE,
    EDIT_EMPTY,
    EDIT_MEMO_REMOVE,
    EDIT_SKILL_REMOVE,
    *VALUE_EDIT_KINDS,
)
# What an edit is now: in effect, reverted (by /redo, /trash restore, /context restore),
# or its trashed rows were deleted by /trash empty.
EDIT_DONE = "done"
EDIT_REVERTED = "reverted"
EDIT_EMPTIED = "emptied"


@dataclass(frozen=True, slots=True)
class Edit:
    """One entry of the edit journal (`edits`): what changed, when, and how to invert it.

    An edit that `trashed` rows holds them in the trash tables until it is
    reverted or the trash is emptied; a `redoable` one is on the redo stack
    (`/redo` reverts the newest; a new turn clears the stack).
    """

    id: int
    session: str
    kind: str  # one of EDIT_KINDS
    group_id: int | None
    messages: int  # messages the edit moved or changed
    state: str  # EDIT_DONE | EDIT_REVERTED | EDIT_EMPTIED
    trashed: bool
    redoable: bool
    created_at: float
    label: str = ""  # the group's prompt, the session's first prompt, the memo or skill
    groups: int = 0  # groups the edit moved or changed
    row_id: int | None = None  # the memo or skill a knowledge edit moved


@dataclass(frozen=True, slots=True)
class UrlPage:
    """A web page in a session's URL context (`/url add`), its text as Markdown."""

    id: int
    session: str
    url: str
    final_url: str
    title: str
    content: str
    content_type: str
    fetched_at: float


@dataclass(frozen=True, slots=True)
class McpResource:
    """A resource of an MCP server in a session's context (`/mcp resource add`), as text."""

    id: int
    session: str
    server: str
    uri: str
    name: str
    mime: str
    content: str
    read_at: float


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image attached to a prompt (or waiting for the next one: `message_id` None),
    its bytes in `.slop/images/<sha256>.<ext>`."""

    id: int
    session: str
    message_id: int | None
    sha256: str
    name: str
    mime: str
    width: int
    height: int
    size: int
    added_at: float
