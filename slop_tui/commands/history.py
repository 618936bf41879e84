"""Context and history commands (seed 000 §6, seed 003 history search)."""

from __future__ import annotations

import json

from slop_tui.commands.base import (
    CommandError,
    CommandResult,
    UsageError,
    command,
    edit_in_editor,
    no_args,
    ok,
    parse_int,
    parse_options,
    plural,
)
from slop_tui.commands.trash import describe
from slop_tui.context import extract_state, render_prompt
from slop_tui.ledger import snippet
from slop_tui.records import EDIT_REMOVE, EDIT_UNDO, Changed, Spend

CAT = "Context & history"


async def _group(ws, args: str, usage: str) -> int:
    gid = parse_int(args, "the group id", usage, minimum=1)
    if not await ws.ledger.group_messages(ws.session, gid):
        raise CommandError(f"session '{ws.session}' has no group {gid}.")
    return gid


@command(
    "context",
    "window",
    "/context window N",
    "Keep the last N groups in the request (0 = full history).",
    CAT,
)
async def context_window(ws, args: str) -> CommandResult:
    usage = "/context window N"
    if not args.strip():
        sess = await ws.current()
        return ok(f"Window: {sess.window_size or 'full history'}.")
    n = parse_int(args, "N", usage, minimum=0)
    await ws.ledger.set_window(ws.session, n)
    label = "Full history mode." if n == 0 else f"Rolling window: the last {n} group(s)."
    return ok(label, changed=Changed.WINDOW)


@command(
    "context",
    "show",
    "/context show [--json] [--editor]",
    "The exact next request: layer by layer with tokens, or the provider's JSON body.",
    CAT,
)
async def context_show(ws, args: str) -> CommandResult:
    words = args.split()
    editor = "--editor" in words
    flags = [w for w in words if w != "--editor"]
    if flags not in ([], ["--json"]) or len(words) != len(set(words)):
        raise UsageError("Usage: /context show [--json] [--editor]")
    flag = flags[0] if flags else ""
    choice = await ws.provider_choice()
    prompt = await ws.next_request(choice.strategy)
    if flag == "--json":
        from slop_tui.providers import create_provider
        from slop_tui.providers.sdk import sdk_ready

        config = ws.provider_configs()[choice.name]
        await sdk_ready(config.kind)  # Gemini's body comes from its SDK: loaded off the loop
        provider = create_provider(config)
        try:
            body = provider.request_body(prompt, choice.model)
        finally:
            await provider.aclose()
        text = json.dumps(body, indent=2, ensure_ascii=False)
        return _shown(ws, text, editor, ".json", body)
    header = f"# Context for session '{ws.session}' → {choice.name} ({choice.model})\n\n"
    return _shown(ws, header + render_prompt(prompt), editor, ".md", prompt)


def _shown(ws, text: str, editor: bool, suffix: str, data: object) -> CommandResult:
    """The text as the result (a terminal pages it into $EDITOR when it is taller than
    the screen: `CommandResult.page`), or with `--editor` opened in $EDITOR at once."""
    if not editor:
        return ok(text, data=data, page=True)
    if edit_in_editor(ws, text, suffix) is None:
        raise CommandError("the editor failed; nothing was changed.")
    return ok(f"Opened the context ({len(text.splitlines()):,} lines) in $EDITOR.", data=data)


@command(
    "context",
    "budget",
    "/context budget",
    "The token budget of the next request: history, limits, remaining, level, "
    "whether a summary is due; tokens per layer.",
    CAT,
)
async def context_budget(ws, args: str) -> CommandResult:
    from slop_tui.context.budget import budget_report

    no_args(args, "/context budget")
    choice = await ws.provider_choice()
    prompt = await ws.next_request(choice.strategy)
    info = ws.model_info(choice.model)
    settings = ws.compaction_settings()
    r = budget_report(prompt, info, settings)
    due = (
        f"yes (history above {settings.compaction_trigger_tokens:,})"
        if r.needs_summary
        else f"no (trigger {settings.compaction_trigger_tokens:,})"
    )
    if not settings.enabled:
        due = "no (compaction is disabled)"
    lines = [
        f"## Budget of the next request → {choice.name} ({choice.model})",
        "",
        "| | tokens |",
        "|---|---|",
        f"| context window ({info.source}) | {info.context_window:,} |",
        f"| reserved for the answer | {info.max_output:,} |",
        f"| max input | {r.max_input_tokens:,} |",
        f"| this request | {r.total_tokens:,} |",
        f"| remaining | {r.remaining:,} |",
        f"| used | {r.percent:.1f} % · {r.level} (warn {settings.warn_pct} %, "
        f"reduce {settings.reduce_pct} %) |",
        f"| history | {r.history_tokens:,} |",
        f"| max history (max input / 16) | {r.max_history_tokens:,} |",
        f"| summary due | {due} |",
        "",
        "| layer | placement | tokens |",
        "|---|---|---|",
    ]
    lines += [f"| {la.name} | {la.placement} | {la.tokens:,} |" for la in prompt.layers]
    lines.append(f"| history | messages | {prompt.history_tokens:,} |")
    if prompt.tool_tokens:
        lines.append(f"| tool declarations | tools | {prompt.tool_tokens:,} |")
    warnings = [*ws.warnings, *(n for n in prompt.notes if "left out" in n)]
    if warnings:
        lines += ["", *(f"- {w}" for w in warnings)]
    return ok("\n".join(lines), data=r)


# `/context drop LAYER`: the layers a request can go without, and the words for them.
LAYER_WORDS = {
    "repo_map": "repo_map",
    "map": "repo_map",
    "file_tree": "file_tree",
    "tree": "file_tree",
    "urls": "urls",
    "pages": "urls",
    "images": "images",
}
LAYER_TITLES = {
    "repo_map": "the repository map",
    "file_tree": "the file tree",
    "urls": "the URL pages",
    "images": "the images",
}


async def _drop(ws, args: str, dropped: bool) -> CommandResult:
    usage = "/context drop GID|LAYER" if dropped else "/context restore GID|LAYER"
    layer = LAYER_WORDS.get(args.strip().lower())
    if layer is not None:
        return await _drop_layer(ws, layer, dropped)
    gid = await _group(ws, args, usage)
    changed = await ws.ledger.drop_group(ws.session, gid, dropped)
    verb = "Dropped" if dropped else "Restored"
    if changed == 0:
        return ok(f"Group {gid} was already {'dropped' if dropped else 'active'}.")
    note = await _state_note(ws)
    return ok(
        f"{verb} group {gid} ({plural(changed, 'message')}).{note}",
        changed=Changed.HISTORY | Changed.STATE,
        revert="/redo" if dropped else None,
    )


async def _drop_layer(ws, layer: str, dropped: bool) -> CommandResult:
    title = LAYER_TITLES[layer]
    if not await ws.drop_layer(layer, dropped):
        state = "out of" if dropped else "in"
        return ok(
            f"{title.capitalize()} {'were' if title.endswith('s') else 'was'} already "
            f"{state} the requests."
        )
    if dropped:
        return ok(
            f"Dropped {title} from the next requests (kept).",
            changed=Changed.CONTEXT,
            revert=f"/context restore {layer}",
        )
    return ok(f"Restored {title} to the next requests.", changed=Changed.CONTEXT)


async def _state_note(ws) -> str:
    state = await ws.ledger.current_state(ws.session)
    return f" STATE now from group {state.group_id}." if state else " No STATE remains."


async def trash_group(ws, gid: int, kind: str, what: str) -> CommandResult:
    """Move a group to the trash for /undo and /message remove (one wording, one refresh)."""
    edit = await ws.ledger.trash_group(ws.session, gid, kind)
    if edit is None:
        raise CommandError(f"session '{ws.session}' has no group {gid}.")
    await ws.reload_pending_handoff()
    note = await _state_note(ws)
    return ok(
        f"{what} group {gid} ({plural(edit.messages, 'message')}; trash entry {edit.id}).{note}",
        changed=Changed.HISTORY | Changed.STATE,
        data=edit,
        revert="/redo",
    )


@command(
    "context",
    "drop",
    "/context drop GID|LAYER",
    "Soft-drop a group (hidden from the model, kept in the ledger, journalled; /redo or "
    "/context restore reverts it), or a layer: map, tree, urls or images.",
    CAT,
)
async def context_drop(ws, args: str) -> CommandResult:
    return await _drop(ws, args, True)


@command(
    "context",
    "restore",
    "/context restore GID|LAYER",
    "Undo a soft drop of a group (journalled) or of a layer.",
    CAT,
)
async def context_restore(ws, args: str) -> CommandResult:
    return await _drop(ws, args, False)


@command(
    "context",
    "unelide",
    "/context unelide [ID ...]",
    "Send elided tool results again (all, or these message ids) from the next request on.",
    CAT,
)
async def context_unelide(ws, args: str) -> CommandResult:
    usage = "/context unelide [ID ...]"
    words = args.split()
    ids = [parse_int(w, "a message id", usage, minimum=1) for w in words] if words else None
    elided = await ws.elided_results()
    if ids is not None:
        unknown = sorted(set(ids) - elided)
        if unknown:
            raise CommandError(
                f"message(s) {', '.join(map(str, unknown))} are not elided; "
                f"elided now: {', '.join(map(str, sorted(elided))) or 'none'}."
            )
    gone = await ws.unelide(ids)
    if not gone:
        return ok("No tool result is elided.")
    return ok(
        f"{len(gone)} elided tool result(s) are sent again from the next request on "
        f"(messages {', '.join(map(str, sorted(gone)))}); the guard ladder may elide them "
        "again when the request is too large.",
        changed=Changed.HISTORY,
    )


@command(
    "context",
    "rebuild",
    "/context rebuild",
    "Write a fresh STATE from the current window (asks the model when one is reachable).",
    CAT,
)
async def context_rebuild(ws, args: str) -> CommandResult:
    no_args(args, "/context rebuild")
    rebuild, own = ws.rebuild_state, None
    if rebuild is None:  # `slop-tui exec`: no turn has set one up, so ask the model here
        from slop_tui.orchestrator import Orchestrator

        own = Orchestrator(ws)
        rebuild = own.rebuild_state
    try:
        text = await rebuild()
    finally:
        if own is not None:
            await own.aclose()
            ws.rebuild_state = None
    if text:
        return ok(f"STATE rebuilt by the model:\n\n{text}", changed=Changed.STATE)
    return await rederive_state(ws, "no model was reachable, so")


async def rederive_state(ws, why: str) -> CommandResult:
    """Re-derive STATE from the window's own answers (no model call)."""
    sess = await ws.current()
    window = await ws.ledger.window(ws.session, sess.window_size, lane=sess.lane)
    for msg in reversed(window):
        if msg.role == "assistant" and msg.status == "completed":
            state = extract_state(msg.content)
            if state:
                await ws.ledger.add_state(ws.session, msg.group_id, state)
                return ok(
                    f"{why.capitalize()} STATE was re-derived from group {msg.group_id}.",
                    changed=Changed.STATE,
                )
    return ok(f"{why.capitalize()} the window holds no STATE block; the anchor is unchanged.")


@command(
    "state", "show", "/state show", "The current STATE anchor and the group it came from.", CAT
)
async def state_show(ws, args: str) -> CommandResult:
    no_args(args, "/state show")
    state = await ws.ledger.current_state(ws.session)
    if state is None:
        return ok(f"Session '{ws.session}' has no STATE yet; /state set TEXT writes one.")
    origin = f"group {state.group_id}" if state.group_id is not None else "set by hand"
    return ok(f"## STATE ({origin}, version {state.id})\n\n{state.content}", data=state)


@command(
    "state",
    "set",
    "/state set TEXT",
    "Store TEXT as a new STATE version (the earlier versions stay; /undo restores them).",
    CAT,
)
async def state_set(ws, args: str) -> CommandResult:
    text = args.strip()
    if not text:
        raise UsageError("the new STATE is needed. Usage: /state set TEXT")
    version = await ws.ledger.set_state_by_hand(ws.session, text)
    return ok(
        f"STATE saved as a new version ({version.id}, {len(text)} characters); "
        "/undo brings the previous one back.",
        changed=Changed.STATE,
        data=version,
    )


@command(
    "undo",
    None,
    "/undo",
    "Take back the newest edit: a STATE set by hand, a scratchpad write, an un-compaction "
    "or an automatic drop made after the last interaction; else the last interaction "
    "leaves the context (its group to the trash, the STATE before it returns). /redo "
    "brings it back.",
    CAT,
)
async def undo(ws, args: str) -> CommandResult:
    no_args(args, "/undo")
    edit = await ws.ledger.undo_value_edit(ws.session)
    if edit is not None:
        return ok(
            f"Took back {describe(edit)}.",  # the announcement names the way back
            changed=Changed.HISTORY | Changed.STATE | Changed.SESSION,
            data=edit,
            revert="/redo",
        )
    gid = await ws.ledger.last_group_id(ws.session)
    if gid is None:
        return ok("Nothing to undo.")
    return await trash_group(ws, gid, EDIT_UNDO, "Undid the last interaction:")


@command(
    "message",
    "list",
    "/message list [N]",
    "The last N groups (default 10): id, messages, their tokens, the tokens in context "
    "when the group's last call was made (prompt + completion), status, prompt.",
    CAT,
)
async def message_list(ws, args: str) -> CommandResult:
    n = parse_int(args, "N", "/message list [N]", minimum=1) if args.strip() else 10
    groups = await ws.ledger.list_groups(ws.session, n)
    if not groups:
        return ok(f"Session '{ws.session}' has no messages yet.", data=[])
    snapshots = await ws.ledger.group_snapshots(ws.session, [g.group_id for g in groups])
    # The short columns first and the prompt last: in a narrow pane the prompt wraps
    # and the numbers keep their headers.
    lines = [
        "| group | msgs | tokens | in context | status | prompt |",
        "|---|---|---|---|---|---|",
    ]
    for g in groups:
        prompt = snippet(g.prompt, 48).replace("|", "\\|")
        snap = snapshots.get(g.group_id)
        weight = f"{snap[0] + snap[1]:,}" if snap else "-"
        lines.append(
            f"| {g.group_id} | {g.messages} | {g.tokens} | {weight} | {g.status} | {prompt} |"
        )
    return ok("\n".join(lines), data=groups)


@command(
    "message",
    "show",
    "/message show GID",
    "Every message of one group, in full, with its size and the tokens in context of "
    "the call that produced it (prompt + completion).",
    CAT,
    aliases=("view",),
)
async def message_show(ws, args: str) -> CommandResult:
    gid = await _group(ws, args, "/message show GID")
    msgs = await ws.ledger.group_messages(ws.session, gid)
    snapshots = await ws.ledger.message_snapshots(ws.session, gid)
    parts = []
    for m in msgs:
        extra = f" {m.tool_name}" if m.tool_name else ""
        size = f"{m.tokens} tokens"
        if m.id in snapshots:
            prompt, completion = snapshots[m.id]
            size += (
                f" · {prompt + completion:,} tokens in context "
                f"(prompt {prompt:,} + completion {completion:,})"
            )
        parts.append(f"#### #{m.id} {m.role}{extra} [{m.status}] ({size})\n\n{m.content}")
    return ok("\n\n".join(parts), data=msgs)


@command(
    "message",
    "remove",
    "/message remove GID",
    "Move one group of this session (and the STATE it wrote) to the trash.",
    CAT,
)
async def message_remove(ws, args: str) -> CommandResult:
    gid = await _group(ws, args, "/message remove GID")
    return await trash_group(ws, gid, EDIT_REMOVE, "Moved to the trash:")


@command(
    "history",
    "search",
    "/history search TEXT [--role ROLE] [--limit N]",
    "Case-insensitive search across all sessions, newest first.",
    CAT,
)
async def history_search(ws, args: str) -> CommandResult:
    usage = "/history search TEXT [--role ROLE] [--limit N]"
    text, opts = parse_options(args, {"--role": "role", "--limit": "limit"}, usage)
    if not text:
        raise UsageError(f"what to search for is needed. Usage: {usage}")
    role = opts.get("role")
    if role and role not in ("user", "assistant", "tool", "system"):
        raise UsageError("--role must be user, assistant, tool or system.")
    limit = parse_int(opts["limit"], "--limit", usage, minimum=1) if "limit" in opts else 20
    hits = await ws.ledger.search_history(text, role=role, limit=min(limit, 500))
    if not hits:
        return ok(f"No message contains '{text}'.", data=[])
    lines = ["| message | session | group | role | text |", "|---|---|---|---|---|"]
    for h in hits:
        lines.append(
            f"| {h.message_id} | {h.session} | {h.group_id} | {h.role} | "
            f"{h.snippet.replace('|', chr(92) + '|')} |"
        )
    return ok("\n".join(lines), data=hits)


@command(
    "stats",
    None,
    "/stats",
    "Usage and cost per model, lane, turn, call and day; tool calls, skills, the sandbox.",
    CAT,
    aliases=("usage",),
)
async def stats(ws, args: str) -> CommandResult:
    from slop_tui.pricing import format_usd, spend_text

    totals = await ws.ledger.usage_totals(ws.session)
    lines = [f"## Usage for session '{ws.session}'"]
    if totals:
        lines += [
            "| provider | model | calls | prompt | completion | cached | cost | cache saved |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {t.provider} | {t.model} | {t.calls} | {t.prompt_tokens} | "
            f"{t.completion_tokens} | {t.cached_tokens} | "
            f"{spend_text(Spend(t.calls, t.cost, t.saved, t.unpriced, t.unreported))} | "
            f"{format_usd(t.saved)} |"
            for t in totals
        ]
        lines += ["", *await _cost_lines(ws)]
    else:
        lines.append("No usage recorded yet.")
    lines += await _day_lines(ws)
    purposes = await ws.ledger.usage_by_purpose(ws.session)
    background = [p for p in purposes if p[0] != "turn"]
    if background:
        lines += [
            "",
            "## Background model calls (summaries, compaction)",
            "| purpose | calls | prompt | completion |",
            "|---|---|---|---|",
        ]
        lines += [f"| {p} | {c} | {pt} | {ct} |" for p, c, pt, ct in background]
    tools = [t for t in await ws.ledger.list_tools() if t.call_count]
    if tools:
        lines += ["", "## Tool calls (all sessions)", "| tool | calls |", "|---|---|"]
        lines += [f"| {t.name} | {t.call_count} |" for t in tools]
    skills = [s for s in await ws.ledger.list_skills() if s.activation_count]
    if skills:
        lines += ["", "## Skill activations", "| skill | activations |", "|---|---|"]
        lines += [f"| {s.name} | {s.activation_count} |" for s in skills]
    lines += ["", "## Shell", f"Sandbox: {ws.sandbox.describe()}."]
    if ws.config.untrusted:
        lines.append(
            f"Project config: {', '.join(ws.config.untrusted)} ignored until you trust this "
            "folder (`slop-tui trust`)."
        )
    return ok("\n".join(lines), data=totals)


async def _cost_lines(ws) -> list[str]:
    """The session's cost, and its cost per lane, turn and call (newest first)."""
    from slop_tui.pricing import PRICE_UNKNOWN, format_usd, spend_text

    spend = await ws.ledger.spend(ws.session)
    back = spend.background or Spend()
    lines = [
        "## Cost",
        f"Session: {spend_text(spend)} in {spend.calls} call(s); background calls "
        f"(summaries, compaction, rebuilds): {spend_text(back) if back.calls else '$0.00'} in "
        f"{back.calls} call(s); the cache saved {format_usd(spend.saved)}.",
    ]
    check = await ws.budget_check()
    if check.text:
        lines.append(f"Budget: {check.text}")
    for key, title in (("lane", "lane"), ("turn", "turn (group)")):
        rows = await ws.ledger.spend_by(ws.session, key)
        lines += ["", f"| {title} | calls | cost | cache saved |", "|---|---|---|---|"]
        lines += [f"| {k} | {s.calls} | {spend_text(s)} | {format_usd(s.saved)} |" for k, s in rows]
    lines += [
        "",
        "| call | group | purpose | model | prompt | cached | output | reasoning | cost "
        "(input + cached + output + reasoning) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for u in await ws.ledger.recent_usage(ws.session):
        c = u.cost
        if not u.reported:
            cost = "no usage reported"
        elif c is None:
            cost = PRICE_UNKNOWN
        else:
            parts = " + ".join(format_usd(v) for v in (c.input, c.cached, c.output, c.reasoning))
            cost = f"{format_usd(c.total)} ({parts})"
        lines.append(
            f"| {u.id} | {u.group_id if u.group_id is not None else '-'} | {u.purpose} | "
            f"{u.model} | {u.prompt_tokens} | {u.cached_tokens} | {u.completion_tokens} | "
            f"{u.reasoning_tokens} | {cost} |"
        )
    return lines


async def _day_lines(ws) -> list[str]:
    """Every session's spend per day: each call made, its history cleared or trashed
    since or not (the figure `[budget] daily_cost_limit` is held to)."""
    from slop_tui.pricing import format_usd, spend_text

    rows = await ws.ledger.spend_per_day()
    if not rows:
        return []
    lines = [
        "",
        "Per day, every session of the ledger (calls whose history was cleared or "
        "removed since included):",
        "",
        "| day | calls | cost | cache saved |",
        "|---|---|---|---|",
    ]
    lines += [f"| {k} | {s.calls} | {spend_text(s)} | {format_usd(s.saved)} |" for k, s in rows]
    return lines


@command("schema", None, "/schema", "The ledger's CREATE statements.", CAT)
async def schema(ws, args: str) -> CommandResult:
    rows = await ws.ledger.schema_sql()
    return ok("\n\n".join(f"```sql\n{sql};\n```" for _name, sql in rows))
