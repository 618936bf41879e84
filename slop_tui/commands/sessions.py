"""Session commands (seed 001) and the workspace-wide throttle."""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict

from slop_tui.commands.base import (
    CommandError,
    CommandResult,
    UsageError,
    command,
    edit_in_editor,
    no_args,
    ok,
    plural,
    refuse_while_running,
    split_first,
)
from slop_tui.context.redact import contains_secret, redact_secrets
from slop_tui.records import DEFAULT_SESSION, Changed

CAT = "Sessions"


def _when(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "-"


def _name(args: str, usage: str) -> str:
    name = args.strip()
    if not name:
        raise UsageError(f"a session name is needed. Usage: {usage}")
    return name


@command(
    "session",
    "activate",
    "/session activate NAME",
    "Switch to session NAME (created on its first message).",
    CAT,
    aliases=("switch",),
)
async def session_activate(ws, args: str) -> CommandResult:
    name = _name(args, "/session activate NAME")
    await ws.switch_session(name)
    exists = await ws.ledger.get_session(name) is not None
    note = "" if exists else " (new: it is created with its first message)"
    return ok(f"Switched to session '{name}'{note}.", changed=Changed.SESSION)


@command(
    "session",
    "list",
    "/session list [--all]",
    "Sessions that have history, with groups, messages, tokens, last use and first "
    "prompt; --all also those without.",
    CAT,
)
async def session_list(ws, args: str) -> CommandResult:
    flag = args.strip()
    if flag not in ("", "--all"):
        raise UsageError("Usage: /session list [--all]")
    stored = await ws.ledger.list_sessions()
    rows = [r for r in stored if flag or r.messages or r.name == ws.session]
    hidden = len(stored) - len(rows)
    names = [r.name for r in rows]
    lines = [
        "| | session | groups | messages | tokens | last used | first prompt |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mark = "✓" if r.name == ws.session else ""
        preview = r.preview.replace("|", "\\|")
        lines.append(
            f"| {mark} | {r.name} | {r.groups} | {r.messages} | {r.tokens} | "
            f"{_when(r.last_used)} | {preview} |"
        )
    if ws.session not in names:
        lines.append(f"| ✓ | {ws.session} | 0 | 0 | 0 | - | (not written yet) |")
    if hidden:
        lines += ["", f"{hidden} session(s) without history not shown; /session list --all."]
    return ok("\n".join(lines), data=[asdict(r) for r in rows])


@command(
    "session",
    "remove",
    "/session remove NAME",
    "Move session NAME and everything in it to the trash; the current one moves to "
    "default_session.",
    CAT,
)
async def session_remove(ws, args: str) -> CommandResult:
    name = _name(args, "/session remove NAME")
    edit = await ws.ledger.trash_session(name)
    if edit is None:
        raise CommandError(f"there is no session named '{name}'.")
    text = (
        f"Moved session '{name}' ({plural(edit.groups, 'group')}) to the trash (entry {edit.id})."
    )
    if name == ws.session:
        await ws.switch_session(DEFAULT_SESSION)
        text += f" Now in '{DEFAULT_SESSION}'."
    return ok(
        text, changed=Changed.SESSION | Changed.HISTORY | Changed.STATE, data=edit, revert="/redo"
    )


@command(
    "session",
    "clear",
    "/session clear",
    "Move this session's history, usage and STATE to the trash; keep its scratchpad and window.",
    CAT,
)
async def session_clear(ws, args: str) -> CommandResult:
    no_args(args, "/session clear", " (it clears the current session)")
    edit = await ws.ledger.clear_session(ws.session)
    if edit is None:
        return ok(f"Session '{ws.session}' has no history to clear.")
    await ws.reload_pending_handoff()
    return ok(
        f"Cleared session '{ws.session}': {plural(edit.groups, 'group')} ({plural(edit.messages, 'message')}) "
        f"moved to the trash (entry {edit.id}); scratchpad and window size kept.",
        changed=Changed.HISTORY | Changed.STATE,
        data=edit,
        revert="/redo",
    )


@command(
    "session",
    "clone",
    "/session clone NAME",
    "Copy this session (messages, STATE, scratchpad, usage) to NAME and switch to it.",
    CAT,
)
async def session_clone(ws, args: str) -> CommandResult:
    name = _name(args, "/session clone NAME")
    await refuse_while_running(ws)  # it switches to the clone
    await ws.ledger.clone_session(ws.session, name)
    source = ws.session
    await ws.switch_session(name)
    return ok(f"Cloned '{source}' to '{name}' and switched to it.", changed=Changed.SESSION)


SCRATCHPAD_USAGE = "/session scratchpad [show | edit [--keep-secrets] | set [--keep-secrets] TEXT]"
KEEP_SECRETS = "--keep-secrets"


async def _store_scratchpad(ws, text: str, keep: bool, verb: str) -> CommandResult:
    """Store the user's scratchpad text: secrets replaced by [REDACTED] (it is sent with
    every request) unless the user insists with --keep-secrets; either way they are told."""
    clean = text if keep else redact_secrets(text)
    await ws.ledger.set_scratchpad(ws.session, clean)
    note = ""
    if clean != text:
        note = (
            " Secrets in it were replaced by [REDACTED] (it is sent with every request); "
            f"add {KEEP_SECRETS} to keep them as typed."
        )
    elif keep and contains_secret(text):
        note = " It holds secrets, kept as typed: they are sent with every request."
    return ok(f"Scratchpad {verb} ({len(clean)} characters).{note}", changed=Changed.SCRATCHPAD)


@command(
    "session",
    "scratchpad",
    SCRATCHPAD_USAGE,
    "Show, edit ($EDITOR) or set this session's scratchpad (secrets in it are replaced "
    f"by [REDACTED] unless {KEEP_SECRETS} is given).",
    CAT,
)
async def session_scratchpad(ws, args: str) -> CommandResult:
    op, rest = split_first(args)
    sess = await ws.current()
    if op in ("", "show", "read"):
        body = sess.scratchpad or "(empty)"
        if contains_secret(sess.scratchpad):
            body += "\n\n(it holds secrets kept as typed: they are sent with every request)"
        return ok(f"## Scratchpad [{ws.session}]\n\n{body}", data=sess.scratchpad)
    if op == "set":
        text = args.strip()[3:].lstrip(" ")
        keep = text == KEEP_SECRETS or text.startswith(KEEP_SECRETS + " ")
        if keep:
            text = text[len(KEEP_SECRETS) :].lstrip(" ")
        return await _store_scratchpad(ws, text, keep, "set")
    if op == "edit":
        if rest.strip() not in ("", KEEP_SECRETS):
            raise UsageError(f"unknown option '{rest.strip()}'. Usage: {SCRATCHPAD_USAGE}")
        edited = edit_in_editor(ws, sess.scratchpad, ".md")
        if edited is None:
            raise CommandError("the editor failed; the scratchpad was not changed.")
        if edited == sess.scratchpad:
            return ok("No changes made.")
        return await _store_scratchpad(ws, edited, rest.strip() == KEEP_SECRETS, "saved")
    raise UsageError(f"unknown scratchpad operation. Usage: {SCRATCHPAD_USAGE}")


@command(
    "throttle",
    None,
    "/throttle [SECONDS]",
    "Show or set the pause between tool-loop iterations (kept across sessions).",
    "Models & tools",
)
async def throttle(ws, args: str) -> CommandResult:
    if not args.strip():
        return ok(f"Current throttle: {ws.throttle:g} seconds.")
    try:
        seconds = float(args.strip())
    except ValueError:
        raise UsageError(
            "the throttle must be a number of seconds. Usage: /throttle [SECONDS]"
        ) from None
    if seconds < 0 or seconds != seconds or seconds > 3600:
        raise UsageError(
            "the throttle must be between 0 and 3600 seconds. Usage: /throttle [SECONDS]"
        )
    await ws.set_throttle(seconds)
    return ok(f"Throttle set to {seconds:g} seconds between tool-loop iterations.")
