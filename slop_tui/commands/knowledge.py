"""Memo, skill and tool-registry commands."""

from __future__ import annotations

import json

from slop_tui.commands.base import (
    CommandError,
    CommandResult,
    UsageError,
    command,
    edit_in_editor,
    ok,
    parse_int,
    split_first,
)
from slop_tui.context import extract_keywords, rank_memos, redact_secrets
from slop_tui.context.memos import memo_tags
from slop_tui.ledger import snippet
from slop_tui.records import EDIT_MEMO_REMOVE, EDIT_SKILL_REMOVE, Changed

CAT = "Memory & skills"
# Memos are sent with every request that matches them, in every session: like
# summaries and handoffs they never hold a secret (`redact_secrets`).
REDACTED_NOTE = " Secrets in it were replaced by [REDACTED]."


def _dropped_note(dropped: list[str]) -> str:
    if not dropped:
        return ""
    return f" Tags left out (they would match nearly every request): {', '.join(dropped)}."


def _memo_form(tags: tuple[str, ...], content: str) -> str:
    return f"# Tags: {', '.join(tags)}\n\n{content}"


def _parse_memo_form(text: str) -> tuple[list[str], str]:
    lines = text.splitlines()
    tags: list[str] = []
    if lines and lines[0].lower().startswith("# tags:"):
        tags = [t.strip() for t in lines[0].split(":", 1)[1].split(",") if t.strip()]
        lines = lines[1:]
    return tags, "\n".join(lines).strip()


async def _memo(ws, args: str, usage: str):
    memo_id = parse_int(args, "the memo id", usage, minimum=1)
    memo = await ws.ledger.get_memo(memo_id)
    if memo is None:
        raise CommandError(f"there is no memo {memo_id}.")
    return memo


def _origin(memo) -> str:
    """Who wrote a memo, and whether it waits for /memo confirm."""
    who = {"user": "you", "model": "the model"}.get(memo.source, "unknown")
    return f"{who}, quarantined" if memo.quarantined else who


@command(
    "memo",
    "list",
    "/memo list",
    "Every memo with its tags and author (quarantined ones wait for /memo confirm).",
    CAT,
)
async def memo_list(ws, args: str) -> CommandResult:
    memos = await ws.ledger.list_memos()
    if not memos:
        return ok("No memos yet.", data=[])
    lines = ["| id | tags | by | memo |", "|---|---|---|---|"]
    lines += [
        f"| {m.id} | {', '.join(m.tags)} | {_origin(m)} | "
        f"{snippet(m.content, 57).replace('|', chr(92) + '|')} |"
        for m in memos
    ]
    return ok("\n".join(lines), data=memos)


@command("memo", "show", "/memo show ID", "One memo in full.", CAT)
async def memo_show(ws, args: str) -> CommandResult:
    memo = await _memo(ws, args, "/memo show ID")
    hint = (
        f"\n**Quarantined**: it reads like an instruction to the model; it is not used "
        f"until /memo confirm {memo.id} (or /memo remove {memo.id})."
        if memo.quarantined
        else ""
    )
    return ok(
        f"### Memo {memo.id}\n**Tags**: {', '.join(memo.tags)}\n**By**: {_origin(memo)}{hint}"
        f"\n\n---\n\n{memo.content}",
        data=memo,
    )


@command(
    "memo",
    "confirm",
    "/memo confirm ID",
    "Release a quarantined memo the model saved, after reading it (/memo show ID).",
    CAT,
)
async def memo_confirm(ws, args: str) -> CommandResult:
    memo = await _memo(ws, args, "/memo confirm ID")
    if not await ws.ledger.confirm_memo(memo.id):
        raise CommandError(f"memo {memo.id} is not quarantined.")
    return ok(
        f"Memo {memo.id} confirmed: it is used in requests again, still marked as the "
        "model's note.",
        changed=Changed.MEMOS,
    )


@command("memo", "add", "/memo add TAG[,TAG…] CONTENT", "Save a memo (global to the project).", CAT)
async def memo_add(ws, args: str) -> CommandResult:
    tags_text, content = split_first(args)
    if not tags_text or not content.strip():
        raise UsageError("tags and content are needed. Usage: /memo add TAG[,TAG…] CONTENT")
    clean = redact_secrets(content.strip())
    note = REDACTED_NOTE if clean != content.strip() else ""
    tags, dropped = memo_tags(tags_text.split(","))
    note += _dropped_note(dropped)
    memo = await ws.ledger.add_memo(clean, tags)
    return ok(
        f"Saved memo {memo.id} [{', '.join(memo.tags)}].{note}", changed=Changed.MEMOS, data=memo
    )


@command("memo", "edit", "/memo edit ID", "Edit a memo in $EDITOR (empty text deletes it).", CAT)
async def memo_edit(ws, args: str) -> CommandResult:
    memo = await _memo(ws, args, "/memo edit ID")
    form = _memo_form(memo.tags, memo.content)
    edited = edit_in_editor(ws, form, ".md")
    if edited is None:
        raise CommandError("the editor failed; the memo was not changed.")
    if edited == form:
        return ok("No changes made.")
    tags, content = _parse_memo_form(edited)
    if not content:
        edit = await _trash(ws, EDIT_MEMO_REMOVE, memo.id)
        return ok(
            f"Memo {memo.id} moved to the trash (the edited text was empty; trash entry "
            f"{edit.id}).",
            changed=Changed.MEMOS,
            revert="/redo",
        )
    clean = redact_secrets(content)
    note = REDACTED_NOTE if clean != content else ""
    tags, dropped = memo_tags(tags)
    note += _dropped_note(dropped)
    await ws.ledger.update_memo(memo.id, clean, tags)
    return ok(f"Memo {memo.id} updated.{note}", changed=Changed.MEMOS)


async def _trash(ws, kind: str, row_id: int):
    edit = await ws.ledger.trash_knowledge(kind, row_id)
    if edit is None:  # removed meanwhile (another process)
        raise CommandError(f"it is not there any more (id {row_id}).")
    return edit


@command(
    "memo",
    "remove",
    "/memo remove ID",
    "Move a memo to the trash (/redo or /trash restore brings it back).",
    CAT,
    aliases=("delete",),
)
async def memo_remove(ws, args: str) -> CommandResult:
    memo = await _memo(ws, args, "/memo remove ID")
    edit = await _trash(ws, EDIT_MEMO_REMOVE, memo.id)
    return ok(
        f"Memo {memo.id} moved to the trash (trash entry {edit.id}).",
        changed=Changed.MEMOS,
        revert="/redo",
    )


@command(
    "memo",
    "search",
    "/memo search QUERY",
    "Memos matching the query's keywords (tags first, then full text).",
    CAT,
)
async def memo_search(ws, args: str) -> CommandResult:
    if not args.strip():
        raise UsageError("a query is needed. Usage: /memo search QUERY")
    keywords = extract_keywords(args.replace(",", " ")) or [args.strip().lower()]
    candidates, bm25 = await ws.ledger.memo_candidates(keywords)
    memos = rank_memos(keywords, candidates, bm25, limit=20)
    if not memos:
        return ok("No memo matches.", data=[])
    lines = ["| id | tags | memo |", "|---|---|---|"]
    lines += [f"| {m.id} | {', '.join(m.tags)} | {snippet(m.content, 57)} |" for m in memos]
    return ok("\n".join(lines), data=memos)


# -- skills -----------------------------------------------------------------

SKILL_TEMPLATE = "# Name: {name}\n# Description: {description}\n\n# System Prompt Patch\n{patch}"


def _parse_skill_form(text: str) -> tuple[str, str, str]:
    name = description = ""
    patch_lines: list[str] = []
    in_patch = False
    for line in text.splitlines():
        low = line.lower()
        if not in_patch and low.startswith("# name:"):
            name = line.split(":", 1)[1].strip()
        elif not in_patch and low.startswith("# description:"):
            description = line.split(":", 1)[1].strip()
        elif not in_patch and low.strip() == "# system prompt patch":
            in_patch = True
        elif in_patch:
            patch_lines.append(line)
    return name, description, "\n".join(patch_lines).strip()


async def _skill(ws, ref: str, usage: str):
    if not ref.strip():
        raise UsageError(f"a skill name or id is needed. Usage: {usage}")
    if ref.strip().isdigit():  # an id: the one bounded parse of every id argument
        parse_int(ref, "the skill id", usage, minimum=1)
    skill = await ws.ledger.get_skill(ref.strip())
    if skill is None:
        raise CommandError(f"there is no skill '{ref.strip()}'.")
    return skill


@command("skill", "list", "/skill list", "Skills, their activations and which are active.", CAT)
async def skill_list(ws, args: str) -> CommandResult:
    skills = await ws.ledger.list_skills()
    lines = ["| id | skill | description | activations | active |", "|---|---|---|---|---|"]
    for s in skills:
        mark = "✓" if s.name in ws.active_skills else ""
        desc = snippet(s.description, 57).replace("|", "\\|")
        lines.append(f"| {s.id} | {s.name} | {desc} | {s.activation_count} | {mark} |")
    return ok("\n".join(lines), data=skills)


@command("skill", "show", "/skill show NAME|ID", "A skill's description and prompt patch.", CAT)
async def skill_show(ws, args: str) -> CommandResult:
    s = await _skill(ws, args, "/skill show NAME|ID")
    return ok(f"### Skill {s.id}: {s.name}\n{s.description}\n\n{s.prompt_patch}", data=s)


@command(
    "skill",
    "add",
    "/skill add NAME [PATCH…]",
    "Create a skill; without PATCH it opens $EDITOR on a template.",
    CAT,
)
async def skill_add(ws, args: str) -> CommandResult:
    name, patch = split_first(args)
    if not name:
        raise UsageError("a name is needed. Usage: /skill add NAME [PATCH…]")
    description = ""
    if not patch.strip():
        edited = edit_in_editor(ws, SKILL_TEMPLATE.format(name=name, description="", patch=""))
        if edited is None or not edited.strip():
            return ok("No skill added.")
        name, description, patch = _parse_skill_form(edited)
        if not name or not patch:
            raise CommandError("the form needs a '# Name:' line and a patch; no skill added.")
    s = await ws.ledger.add_skill(name, description, patch.strip())
    return ok(f"Skill '{s.name}' added (id {s.id}).", changed=Changed.SKILLS, data=s)


@command("skill", "edit", "/skill edit NAME|ID", "Edit a skill in $EDITOR (renames work).", CAT)
async def skill_edit(ws, args: str) -> CommandResult:
    s = await _skill(ws, args, "/skill edit NAME|ID")
    form = SKILL_TEMPLATE.format(name=s.name, description=s.description, patch=s.prompt_patch)
    edited = edit_in_editor(ws, form)
    if edited is None:
        raise CommandError("the editor failed; the skill was not changed.")
    if edited == form:
        return ok("No changes made.")
    name, description, patch = _parse_skill_form(edited)
    if not name:
        raise CommandError("the form lost its '# Name:' line; the skill was not changed.")
    updated = await ws.ledger.update_skill(
        s.id, name=name, description=description, prompt_patch=patch
    )
    if s.name in ws.active_skills and updated.name != s.name:
        await ws.set_active_skills([updated.name if n == s.name else n for n in ws.active_skills])
    return ok(f"Skill {updated.id} saved as '{updated.name}'.", changed=Changed.SKILLS)


@command(
    "skill",
    "delete",
    "/skill delete NAME|ID",
    "Move a skill to the trash (/redo or /trash restore brings it back).",
    CAT,
    aliases=("remove",),
)
async def skill_delete(ws, args: str) -> CommandResult:
    s = await _skill(ws, args, "/skill delete NAME|ID")
    edit = await _trash(ws, EDIT_SKILL_REMOVE, s.id)
    if s.name in ws.active_skills:
        await ws.set_active_skills([n for n in ws.active_skills if n != s.name])
    return ok(
        f"Skill '{s.name}' moved to the trash (trash entry {edit.id}).",
        changed=Changed.SKILLS,
        revert="/redo",
    )


@command(
    "skill",
    "activate",
    "/skill activate NAME|ID",
    "Add a skill's prompt patch to every request (kept across sessions).",
    CAT,
)
async def skill_activate(ws, args: str) -> CommandResult:
    s = await _skill(ws, args, "/skill activate NAME|ID")
    if s.name in ws.active_skills:
        return ok(f"Skill '{s.name}' is already active.")
    await ws.set_active_skills([*ws.active_skills, s.name])
    await ws.ledger.count_skill_activation(s.id)
    return ok(f"Skill '{s.name}' activated.", changed=Changed.SKILLS)


@command("skill", "deactivate", "/skill deactivate NAME|ID", "Stop applying a skill.", CAT)
async def skill_deactivate(ws, args: str) -> CommandResult:
    s = await _skill(ws, args, "/skill deactivate NAME|ID")
    if s.name not in ws.active_skills:
        return ok(f"Skill '{s.name}' was not active.")
    await ws.set_active_skills([n for n in ws.active_skills if n != s.name])
    return ok(f"Skill '{s.name}' deactivated.", changed=Changed.SKILLS)


# -- tools --------------------------------------------------------------------

TOOLS = "Models & tools"


async def _tool(ws, args: str, usage: str):
    name = args.strip()
    if not name:
        raise UsageError(f"a tool name is needed. Usage: {usage}")
    tool = await ws.ledger.get_tool(name)
    if tool is None:
        raise CommandError(f"there is no tool '{name}'.")
    return tool


@command(
    "tool", "list", "/tool list", "The agent's tools, enabled or not, with call counts.", TOOLS
)
async def tool_list(ws, args: str) -> CommandResult:
    tools = await ws.ledger.list_tools()
    lines = ["| tool | source | enabled | calls | description |", "|---|---|---|---|---|"]
    lines += [
        f"| {t.name} | {_source(ws, t.name)} | {'✅' if t.enabled else '❌'} | {t.call_count} | "
        f"{snippet(t.description, 60).replace('|', chr(92) + '|')} |"
        for t in tools
    ]
    return ok("\n".join(lines), data=tools)


def _source(ws, name: str) -> str:
    """Where a tool comes from: built in, or the MCP server that offers it."""
    if not name.startswith("mcp__"):
        return "built-in"
    server = ws.mcp.server_of(name) if ws.mcp is not None else ""
    return f"MCP {server}" if server else "MCP (not configured)"


@command("tool", "show", "/tool show NAME", "A tool's description and JSON schema.", TOOLS)
async def tool_show(ws, args: str) -> CommandResult:
    t = await _tool(ws, args, "/tool show NAME")
    schema = json.dumps(json.loads(t.schema_json), indent=2)
    return ok(f"### {t.name}\n{t.description}\n\n```json\n{schema}\n```", data=t)


@command("tool", "enable", "/tool enable NAME", "Offer a tool to the model again.", TOOLS)
async def tool_enable(ws, args: str) -> CommandResult:
    t = await _tool(ws, args, "/tool enable NAME")
    await ws.ledger.set_tool_enabled(t.name, True)
    return ok(f"Tool '{t.name}' enabled.", changed=Changed.TOOLS)


@command(
    "tool",
    "disable",
    "/tool disable NAME",
    "Stop offering a tool; its past calls become placeholders in the request.",
    TOOLS,
)
async def tool_disable(ws, args: str) -> CommandResult:
    t = await _tool(ws, args, "/tool disable NAME")
    await ws.ledger.set_tool_enabled(t.name, False)
    return ok(f"Tool '{t.name}' disabled.", changed=Changed.TOOLS)
