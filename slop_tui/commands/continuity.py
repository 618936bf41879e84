"""Continuity commands: lanes, replies, handoffs, files in context,
the compaction audit log and un-compaction.

Every handler checks all of its input before it writes anything, so a bad
argument leaves the ledger unchanged.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from pathlib import Path

from slop_tui import workspace
from slop_tui.commands.base import (
    TABLE,
    CommandError,
    CommandResult,
    UsageError,
    command,
    no_args,
    ok,
    parse_int,
    split_first,
)
from slop_tui.continuity.handoff import handoff_markdown, record_handoff
from slop_tui.ledger import LANE_FORMS, LedgerError, check_lane, lane_group, reply_lane, snippet
from slop_tui.records import (
    DEFAULT_LANE,
    SESSION_LANE,
    SUMMARY_DISCARDED,
    SUMMARY_STALE,
    Changed,
    CompactionRecord,
)
from slop_tui.tools.base import ToolError
from slop_tui.tools.paths import display, resolve_inside, write_text

CAT = "Context & history"
CAT_SESSIONS = "Sessions"

for _name, _sub in (("lane", "list"), ("handoff", "show"), ("file", "list")):
    TABLE.default_sub.setdefault(_name, _sub)


def project_root(ws) -> Path:
    """The resolved project root: the fence for `/file` and `/handoff export`."""
    return Path(ws.config.project_root).resolve()


def _tool_error(exc: ToolError, label: str) -> CommandError:
    """A path-safety refusal from tools.paths without its tool-name prefix."""
    text = str(exc)
    prefix = f"{label}: "
    return CommandError(text[len(prefix) :] if text.startswith(prefix) else text)


def _words(args: str, usage: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError as exc:
        raise UsageError(f"{exc}. Usage: {usage}") from None


def _file_paths(args: str, usage: str, root: Path) -> list[str]:
    """The paths of a `/file` command: quotes group words, a backslash is a path
    separator as Windows writes it (`src\\app.py` is `src/app.py`, seed 003), unless a
    file of that exact name exists."""
    lexer = shlex.shlex(args, posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError as exc:
        raise UsageError(f"{exc}. Usage: {usage}") from None
    return [w.replace("\\", "/") if "\\" in w and not (root / w).exists() else w for w in words]


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M") if t else "-"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# -- lanes ---------------------------------------------------------------------


def _lane_arg(args: str, usage: str) -> str:
    words = args.split()
    if len(words) != 1:
        raise UsageError(f"one lane name is needed ({LANE_FORMS}). Usage: {usage}")
    try:
        return check_lane(words[0])
    except LedgerError as exc:
        raise UsageError(f"{str(exc).rstrip('.')}. Usage: {usage}") from None


async def _switch(ws, lane: str) -> CommandResult:
    sess = await ws.current()
    if sess.lane == lane:
        return ok(f"Already in lane {lane}.", data=lane)
    await ws.ledger.set_lane(ws.session, lane)
    info = await ws.ledger.lane_info(ws.session, lane)
    what = f"{info.groups} group(s)" if info.groups else "no messages yet"
    return ok(
        f"Lane {lane} ({what}); was {sess.lane}.", changed=Changed.LANE | Changed.HISTORY, data=lane
    )


@command(
    "lane",
    "list",
    "/lane list",
    "Lanes of this session: groups, messages, tokens, last used; * is the current one.",
    CAT,
)
async def lane_list(ws, args: str) -> CommandResult:
    no_args(args, "/lane list")
    sess = await ws.current()
    lanes = await ws.ledger.lanes(ws.session)
    if not any(i.lane == sess.lane for i in lanes):
        lanes.insert(0, await ws.ledger.lane_info(ws.session, sess.lane))
    lines = [
        "| lane | groups | messages | tokens | summarized | last used |",
        "|---|---|---|---|---|---|",
    ]
    for i in lanes:
        mark = "* " if i.lane == sess.lane else ""
        lines.append(
            f"| {mark}{_cell(i.lane)} | {i.groups} | {i.messages} | {i.tokens} | "
            f"{i.summarized} | {_when(i.last_used)} |"
        )
    return ok("\n".join(lines), data=lanes)


@command("lane", "switch", "/lane switch NAME", f"Continue in another lane: {LANE_FORMS}.", CAT)
async def lane_switch(ws, args: str) -> CommandResult:
    lane = _lane_arg(args, "/lane switch NAME")
    gid = lane_group(lane)
    if gid is not None and not await ws.ledger.group_exists(ws.session, gid):
        raise CommandError(f"session '{ws.session}' has no group {gid} to reply to.")
    return await _switch(ws, lane)


@command("lane", "new", "/lane new NAME", "Start the topic lane topic:NAME and switch to it.", CAT)
async def lane_new(ws, args: str) -> CommandResult:
    usage = "/lane new NAME"
    name = args.strip()
    if name.startswith("topic:"):
        name = name[len("topic:") :]
    if not name or len(name.split()) != 1:
        raise UsageError(f"one topic name is needed. Usage: {usage}")
    lane = _lane_arg(f"topic:{name}", usage)
    info = await ws.ledger.lane_info(ws.session, lane)
    if info.last_used:
        raise CommandError(f"lane {lane} already exists; /lane switch {lane} continues it.")
    return await _switch(ws, lane)


@command(
    "reply",
    None,
    "/reply GID TEXT",
    "Reply to group GID and send TEXT: in its own lane reply:GID (started or continued), "
    "or, from a topic lane, in that topic with group GID quoted.",
    CAT,
)
async def reply(ws, args: str) -> CommandResult:
    usage = "/reply GID TEXT"
    first, text = split_first(args)
    if not first or not text.strip():
        raise UsageError(f"a group id and the reply are needed. Usage: {usage}")
    gid = parse_int(first, "the group id", usage, minimum=1)
    if not await ws.ledger.group_exists(ws.session, gid):
        raise CommandError(f"session '{ws.session}' has no group {gid}.")
    sess = await ws.current()
    reply_to = None
    if sess.lane.startswith("topic:"):
        # Seed 002: topic > reply. The reply stays in its topic; the replied-to group is
        # quoted for this turn (kept with the prompt, `Ledger.append_user(reply_to=...)`).
        reply_to = gid
        lane = sess.lane
    else:
        lane = reply_lane(gid)
        if sess.lane != lane:
            await ws.ledger.set_lane(ws.session, lane)
    return CommandResult(
        ok=True,
        text=f"Replying to group {gid} in lane {lane}.",
        send=text,
        reply_to=reply_to,
        changed=Changed.LANE | Changed.HISTORY,
        data=lane,
    )


# -- handoffs ------------------------------------------------------------------


@command(
    "handoff",
    "show",
    "/handoff show",
    "The latest handoff: task, git, progress, decisions, continuation.",
    CAT_SESSIONS,
)
async def handoff_show(ws, args: str) -> CommandResult:
    no_args(args, "/handoff show")
    h = await ws.ledger.latest_handoff(ws.session)
    if h is None:
        return ok(f"Session '{ws.session}' has no handoff yet; /handoff write records one.")
    return ok(handoff_markdown(h), data=h)


@command(
    "handoff",
    "write",
    "/handoff write",
    "Record a handoff now (STATE goal, scratchpad checklist, git status).",
    CAT_SESSIONS,
)
async def handoff_write(ws, args: str) -> CommandResult:
    no_args(args, "/handoff write")
    h = await record_handoff(ws.ledger, ws.session, "manual", project_root(ws))
    assert h is not None
    return ok(handoff_markdown(h), changed=Changed.HANDOFF, data=h)


@command(
    "handoff",
    "export",
    "/handoff export FILE [--force]",
    "Write the latest handoff as Markdown to FILE inside the project.",
    CAT_SESSIONS,
)
async def handoff_export(ws, args: str) -> CommandResult:
    usage = "/handoff export FILE [--force]"
    words = _words(args, usage)
    force = "--force" in words
    rest = [w for w in words if w != "--force"]
    if len(rest) != 1 or rest[0].startswith("--"):
        raise UsageError(f"one file name is needed. Usage: {usage}")
    label = "/handoff export"
    root = project_root(ws)
    try:
        path = resolve_inside(root, rest[0], label)
    except ToolError as exc:
        raise _tool_error(exc, label) from None
    shown = display(root, path)
    if path.exists() and not force:
        raise CommandError(f"'{shown}' already exists; add --force to overwrite it.")
    h = await ws.ledger.latest_handoff(ws.session)
    if h is None:
        raise CommandError(
            f"session '{ws.session}' has no handoff yet; /handoff write records one."
        )
    try:
        write_text(root, path, shown, handoff_markdown(h), label)
    except ToolError as exc:
        raise _tool_error(exc, label) from None
    return ok(f"Wrote handoff {h.id} to {shown}.", data=path)


# -- files in context ------------------------------------------------------------


def read_context_file(root: Path, path: str, label: str = "/file") -> tuple[str, str]:
    """`workspace.read_context_file` with its refusal as a CommandError."""
    try:
        return workspace.read_context_file(root, path, label)
    except workspace.ContextFileError as exc:
        raise CommandError(str(exc)) from None


@command(
    "file",
    "add",
    "/file add PATH…",
    "Put project files into the context as their own layer (text files inside the project).",
    CAT,
)
async def file_add(ws, args: str) -> CommandResult:
    usage = "/file add PATH…"
    root = project_root(ws)
    paths = _file_paths(args, usage, root)
    if not paths:
        raise UsageError(f"at least one path is needed. Usage: {usage}")
    checked: dict[str, int] = {}
    for raw in paths:  # every path is checked before any is added
        shown, text = read_context_file(root, raw, "/file add")
        checked[shown] = ws.ledger.count_tokens(text)
    present = {f.path for f in await ws.ledger.context_files(ws.session)}
    added = [p for p in checked if p not in present]
    for p in added:
        await ws.ledger.add_context_file(ws.session, p)
    parts = []
    if added:
        parts.append("Added " + ", ".join(f"{p} ({checked[p]} tokens)" for p in added) + ".")
    again = [p for p in checked if p in present]
    if again:
        parts.append("Already in the context: " + ", ".join(again) + ".")
    return ok(" ".join(parts), changed=Changed.FILES if added else (), data=added)


@command("file", "remove", "/file remove PATH", "Take a file out of the context.", CAT)
async def file_remove(ws, args: str) -> CommandResult:
    usage = "/file remove PATH"
    root = project_root(ws)
    paths = _file_paths(args, usage, root)
    if len(paths) != 1:
        raise UsageError(f"one path is needed. Usage: {usage}")
    raw = paths[0]
    candidates = [raw]
    try:
        candidates.insert(0, display(root, resolve_inside(root, raw, "/file remove")))
    except ToolError:
        pass  # e.g. a file that now resolves elsewhere: try the stored name as typed
    for name in candidates:
        if await ws.ledger.remove_context_file(ws.session, name):
            return ok(f"Removed {name} from the context.", changed=Changed.FILES)
    raise CommandError(f"'{raw}' is not in the context; /file list shows what is.")


@command("file", "list", "/file list", "Files in the context, with tokens per file.", CAT)
async def file_list(ws, args: str) -> CommandResult:
    no_args(args, "/file list")
    files = await ws.ledger.context_files(ws.session)
    if not files:
        return ok("No files in the context; /file add PATH adds one.", data=[])
    root = project_root(ws)
    lines = ["| file | tokens | added |", "|---|---|---|"]
    total = 0
    rows = []
    for f in files:
        try:
            _shown, text = read_context_file(root, f.path)
        except CommandError as exc:
            tokens, note = 0, f"unreadable: {exc}"
        else:
            tokens, note = ws.ledger.count_tokens(text), ""
        total += tokens
        rows.append((f.path, tokens, note))
        cell = f"{tokens}" if not note else _cell(note)
        lines.append(f"| {_cell(f.path)} | {cell} | {_when(f.added_at)} |")
    lines.append(f"\nTotal: {total} tokens in {len(files)} file(s).")
    return ok("\n".join(lines), data=rows)


# -- compaction audit and un-compaction ----------------------------------------


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def retrieval_hint(session: str, r: CompactionRecord) -> str:
    """How to read what a compaction removed, as a query_db call."""
    if r.first_message_id is None:
        return ""
    last = r.last_message_id if r.last_message_id is not None else r.first_message_id
    sql = (
        f"SELECT id, role, content FROM messages WHERE session_id={_sql_text(session)} "
        f"AND id BETWEEN {r.first_message_id} AND {last}"
    )
    return f'query_db(sql="{sql}")'


def summary_standing(summary_id: int, head_id: int | None, r: CompactionRecord | None) -> str:
    """Where a stored summary stands, from the context plan (the same fact
    `/context uncompact` acts on)."""
    if r is not None and r.stale:
        return "out of date: a group under it changed since; the next lane summary replaces it"
    if r is not None and r.undone:
        return "discarded by /context uncompact"
    if summary_id == head_id:
        return f"in the request; /context uncompact {summary_id} sends its messages again"
    return "stored, not in the request now (used again when its span lies outside the window)"


def _log_entry(session: str, r: CompactionRecord, head_id: int | None) -> str:
    saved = r.tokens_before - r.tokens_after
    pct = f" (−{saved * 100 // r.tokens_before}%)" if r.tokens_before > 0 and saved > 0 else ""
    where = "the whole session" if r.lane == SESSION_LANE else f"lane {r.lane}"
    head = (
        f"- **#{r.id}** {_when(r.created_at)} · {where} · **{r.case_kind}** · "
        f"trigger: {r.trigger or '-'} · tokens {r.tokens_before} → {r.tokens_after}{pct}"
    )
    lines = [head]
    if r.first_message_id is not None:
        last = r.last_message_id if r.last_message_id is not None else r.first_message_id
        lines.append(f"  - covered messages {r.first_message_id}–{last}")
    if r.summary_id is not None:
        lines.append(f"  - summary {r.summary_id}: {summary_standing(r.summary_id, head_id, r)}")
    if r.detail:
        lines.append(f"  - {' '.join(r.detail.split())}")
    hint = retrieval_hint(session, r)
    if hint:
        lines.append(f"  - retrieve: `{hint}`")
    return "\n".join(lines)


@command(
    "context",
    "log",
    "/context log [N]",
    "The compaction audit trail: trigger, tokens before → after, case, covered messages.",
    CAT,
)
async def context_log(ws, args: str) -> CommandResult:
    n = parse_int(args, "N", "/context log [N]", minimum=1) if args.strip() else 20
    records = await ws.ledger.compaction_log(ws.session, n)
    if not records:
        return ok(f"Session '{ws.session}' has no compactions yet.", data=[])
    head = (await ws.plan()).head
    head_id = head.id if head is not None else None
    body = "\n".join(_log_entry(ws.session, r, head_id) for r in records)
    return ok(f"## Compactions of session '{ws.session}' (newest first)\n\n{body}", data=records)


@command(
    "context",
    "uncompact",
    "/context uncompact SUMMARY_ID",
    "Take a summary out of the request: its messages are sent word for word again "
    "until a new lane summary covers them.",
    CAT,
)
async def context_uncompact(ws, args: str) -> CommandResult:
    sid = parse_int(args, "the summary id", "/context uncompact SUMMARY_ID", minimum=1)
    summary = await ws.ledger.get_summary(ws.session, sid)
    if summary is None:
        raise CommandError(f"session '{ws.session}' has no summary {sid}; /context log lists them.")
    state = await ws.ledger.summary_state(sid)
    if state == SUMMARY_DISCARDED:
        return ok(f"Summary {sid} was already discarded; it is not in the request.")
    if state == SUMMARY_STALE:
        return ok(
            f"Summary {sid} is out of date (a group under it changed) and not in the request; "
            "the next lane summary replaces it."
        )
    head = (await ws.plan()).head
    in_request = head is not None and head.id == sid
    n = await ws.ledger.discard_summary(ws.session, sid)
    lane = (
        ""
        if summary.lane == DEFAULT_LANE
        else " of the whole session"
        if summary.lane == SESSION_LANE
        else f" in lane {summary.lane}"
    )
    later = f" (and {n - 1} later summary(ies) built on it)" if n > 1 else ""
    if in_request:
        text = (
            f"Un-compacted summary {sid}{lane}{later}: messages {summary.first_message_id}–"
            f"{summary.last_message_id} that lie outside the window are sent word for word "
            "again, until a new lane summary covers them; /context window N keeps more "
            "groups in the window for good."
        )
    else:
        text = f"Discarded summary {sid}{lane}{later}; it was not in the request."
    return ok(text, changed=Changed.HISTORY, data=n)


# -- personality ------------------------------------------------------------------------

_LEVELS = {"--lane": 0, "--global": 2}


def _personality_level(args: str, usage: str) -> tuple[int, str]:
    """(level: 0 lane, 1 session, 2 global; the text) of a `/personality` argument."""
    words = args.strip().split(None, 1)
    if words and words[0].startswith("--"):
        if words[0] not in _LEVELS:
            raise UsageError(f"unknown option {words[0]}. Usage: {usage}")
        return _LEVELS[words[0]], words[1].strip() if len(words) > 1 else ""
    return 1, args.strip()


@command(
    "personality",
    "show",
    "/personality show",
    "The personality the model is given (seed 002: the lane's, else the session's, else the "
    "global one) and each level.",
    CAT,
)
async def personality_show(ws, args: str) -> CommandResult:
    no_args(args, "/personality show")
    sess = await ws.current()
    text, source = await ws.personality(sess)
    lines = [f"In effect: {f'the {source}' if source else 'none'}."]
    for key, where in workspace.personality_keys(ws.session, sess.lane):
        value = (await ws.ledger.get_setting(key) or "").strip()
        lines.append(f"- {where}: {snippet(value, 80) if value else '(not set)'}")
    return ok("\n".join(lines), data=text)


@command(
    "personality",
    "set",
    "/personality set [--lane|--global] TEXT",
    "Set the personality of this session (or of its current lane, or of every session).",
    CAT,
)
async def personality_set(ws, args: str) -> CommandResult:
    usage = "/personality set [--lane|--global] TEXT"
    level, text = _personality_level(args, usage)
    if not text:
        raise UsageError(f"the personality text is needed. Usage: {usage}")
    sess = await ws.current()
    key, where = workspace.personality_keys(ws.session, sess.lane)[level]
    await ws.ledger.set_setting(key, text)
    return ok(f"Personality of the {where} set ({len(text)} characters).", changed=Changed.CONTEXT)


@command(
    "personality",
    "clear",
    "/personality clear [--lane|--global]",
    "Remove the personality of this session (or of its lane, or the global one).",
    CAT,
)
async def personality_clear(ws, args: str) -> CommandResult:
    usage = "/personality clear [--lane|--global]"
    level, rest = _personality_level(args, usage)
    if rest:
        raise UsageError(f"no text is taken. Usage: {usage}")
    sess = await ws.current()
    key, where = workspace.personality_keys(ws.session, sess.lane)[level]
    await ws.ledger.set_setting(key, "")
    return ok(f"Personality of the {where} cleared.", changed=Changed.CONTEXT)
