"""Taking edits back: /redo, /retry and the trash (ledger/edits.py holds the rules).

/undo, /message remove, /context drop, /session clear and /session remove never
hard-delete; what they take away is in the trash (or dropped in place) and
/redo brings back the newest of them until the next turn starts. /trash lists
and restores any entry; /trash empty is the only hard delete and needs --yes
(the TUI asks first and adds it).
"""

from __future__ import annotations

import datetime as _dt

from slop_tui.codecache import forget_user_text
from slop_tui.commands.base import (
    CommandError,
    CommandResult,
    UsageError,
    command,
    no_args,
    ok,
    parse_int,
    plural,
    refuse_while_running,
)
from slop_tui.ledger import snippet
from slop_tui.records import (
    EDIT_AUTO_DROP,
    EDIT_CLEAR,
    EDIT_DROP,
    EDIT_MEMO_REMOVE,
    EDIT_RETRY,
    EDIT_SCRATCHPAD,
    EDIT_SESSION_REMOVE,
    EDIT_SKILL_REMOVE,
    EDIT_STATE_SET,
    EDIT_UNCOMPACT,
    VALUE_EDIT_KINDS,
    Changed,
    Edit,
)

CAT = "Context & history"

_WHAT = {
    "undo": "undone group",
    "remove": "removed group",
    "retry": "failed prompt (sent again)",
    "clear": "cleared history",
    "session_remove": "removed session",
    "memo_remove": "removed memo",
    "skill_remove": "removed skill",
}


_VALUE_EDITS = {
    EDIT_STATE_SET: "the STATE set by hand",
    EDIT_SCRATCHPAD: "the scratchpad write",
    EDIT_UNCOMPACT: "the un-compaction",
}


def describe(edit: Edit) -> str:
    """What an edit took away, for one line: `group 12 of 's'`, `session 's'`, ..."""
    if edit.kind in _VALUE_EDITS:
        return f"{_VALUE_EDITS[edit.kind]} of session '{edit.session}'"
    if edit.kind == EDIT_AUTO_DROP and edit.group_id is None:
        return f"the {edit.messages} message(s) the engine dropped in session '{edit.session}'"
    if edit.kind == EDIT_AUTO_DROP:
        return f"the drop of group {edit.group_id} of session '{edit.session}' by the engine"
    if edit.kind == EDIT_MEMO_REMOVE:
        return f"the memo '{snippet(edit.label, 40)}'"
    if edit.kind == EDIT_SKILL_REMOVE:
        return f"the skill '{edit.label}'"
    if edit.kind == EDIT_SESSION_REMOVE:
        return f"session '{edit.session}' ({plural(edit.groups, 'group')})"
    if edit.kind == EDIT_CLEAR:
        return f"the history of session '{edit.session}' ({plural(edit.groups, 'group')})"
    return f"group {edit.group_id} of session '{edit.session}'"


def _when(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


@command(
    "redo",
    None,
    "/redo",
    "Bring back the newest thing an edit took away (/undo, /message remove, /context drop, "
    "/session clear or remove, /memo remove, /skill delete), or make again the STATE, "
    "scratchpad, un-compaction or automatic drop /undo took back; again for the one before; "
    "a new turn ends the chain.",
    CAT,
)
async def redo(ws, args: str) -> CommandResult:
    no_args(args, "/redo")
    edit = await ws.ledger.redo()
    if edit is None:
        raise CommandError(
            "nothing to redo: nothing was undone, removed, dropped or cleared since the last "
            "turn (/trash list shows what the trash still holds)."
        )
    await ws.reload_pending_handoff()
    verb = "Restored" if edit.kind == EDIT_DROP else "Brought back"
    if edit.kind in VALUE_EDIT_KINDS:
        verb = "Made again"
    text = f"{verb} {describe(edit)}"
    if edit.group_id is not None and edit.messages:
        text += f" ({plural(edit.messages, 'message')})"
    return ok(
        text + ".",
        changed=Changed.SESSION | Changed.HISTORY | Changed.STATE | Changed.MEMOS | Changed.SKILLS,
        data=edit,
    )


@command(
    "retry",
    None,
    "/retry [GID]",
    "Send again a prompt whose turn failed before any answer (marked !); the newest by "
    "default. The failed attempt goes to the trash.",
    CAT,
)
async def retry(ws, args: str) -> CommandResult:
    await refuse_while_running(ws)
    failed = await ws.ledger.failed_prompts(ws.session)
    if args.strip():
        gid = parse_int(args, "the group id", "/retry [GID]", minimum=1)
        if gid not in failed:
            raise CommandError(
                f"group {gid} is not a failed prompt of session '{ws.session}' (only a prompt "
                "marked ! can be sent again)."
            )
    elif failed:
        gid = failed[0]
    else:
        raise CommandError(f"session '{ws.session}' has no failed prompt to send again.")
    prompt = await ws.ledger.get_message(gid)
    assert prompt is not None
    await ws.ledger.trash_group(ws.session, gid, EDIT_RETRY, redoable=False)
    return CommandResult(
        ok=True,
        text=f"Sending group {gid}'s prompt again.",
        send=prompt.content,
        changed=Changed.HISTORY,
    )


@command(
    "trash",
    "list",
    "/trash list",
    "What the trash holds: undone and removed groups, cleared histories, removed sessions, "
    "memos and skills.",
    CAT,
)
async def trash_list(ws, args: str) -> CommandResult:
    no_args(args, "/trash list")
    entries = await ws.ledger.trash()
    if not entries:
        return ok("The trash is empty.", data=[])
    lines = [
        "| entry | when | what | session | group | messages | prompt |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        prompt = snippet(e.label, 48).replace("|", "\\|")
        session = e.session.replace("|", "\\|")
        group = e.group_id if e.group_id is not None else plural(e.groups, "group")
        if not e.session:  # a memo or a skill: global, no group
            session, group = "(all)", "–"
        lines.append(
            f"| {e.id} | {_when(e.created_at)} | {_WHAT.get(e.kind, e.kind)} | {session} | "
            f"{group} | {e.messages} | {prompt} |"
        )
    lines += ["", "`/trash restore ENTRY` brings one back; `/trash empty --yes` deletes them."]
    return ok("\n".join(lines), data=entries)


@command(
    "trash",
    "restore",
    "/trash restore ENTRY",
    "Bring back one trash entry (a group with its STATE, a history, a session, a memo, a skill).",
    CAT,
)
async def trash_restore(ws, args: str) -> CommandResult:
    entry = parse_int(args, "the trash entry", "/trash restore ENTRY", minimum=1)
    edit = await ws.ledger.get_edit(entry)
    await ws.ledger.restore_edit(entry)  # a LedgerError is the one line the user sees
    assert edit is not None
    await ws.reload_pending_handoff()
    count = f" ({plural(edit.messages, 'message')})" if edit.session else ""
    return ok(
        f"Restored trash entry {entry}: {describe(edit)}{count}.",
        changed=Changed.SESSION | Changed.HISTORY | Changed.STATE | Changed.MEMOS | Changed.SKILLS,
        data=edit,
    )


@command(
    "trash",
    "empty",
    "/trash empty --yes",
    "Delete everything in the trash for good: the only hard delete (the workspace asks first).",
    CAT,
)
async def trash_empty(ws, args: str) -> CommandResult:
    if args.strip() != "--yes":
        entries = await ws.ledger.trash()
        count = sum(e.messages for e in entries)
        raise UsageError(
            f"/trash empty deletes {plural(len(entries), 'entry', 'entries')} "
            f"({plural(count, 'message')}) for good; add --yes to confirm: /trash empty --yes"
        )
    edit = await ws.ledger.empty_trash()
    if edit is None:
        return ok("The trash is empty; nothing was deleted.")
    # The answers' lines kept in the user cache hold answers' text; they are only a
    # cache, so all of them go rather than a copy of a deleted answer staying behind.
    forget_user_text()
    return ok(
        f"Emptied the trash: {plural(edit.groups, 'entry', 'entries')} "
        f"({plural(edit.messages, 'message')}) deleted for good.",
        changed=Changed.HISTORY,
        data=edit,
    )


__all__ = ["describe"]
