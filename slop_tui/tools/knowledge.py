"""The agent's own knowledge: scratchpad, memos, skills (all in the ledger)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import weakref
from typing import Any

from slop_tui.context.memos import instruction_shaped, memo_tags, rank_memos, tag_matches
from slop_tui.context.redact import redact_secrets
from slop_tui.ledger import LedgerError, normalise_tags
from slop_tui.records import MEMO_MODEL
from slop_tui.tools.base import KIND_READ, Reply, ToolContext, ToolError, tool

ACTIVE_SKILLS_KEY = "active_skills"  # app_state: JSON list; skills belong to the workspace
MAX_RETRIEVED_MEMOS = 20

# Read-modify-write of the scratchpad and the active-skill list must not
# interleave when the model calls two such tools in parallel. One lock per
# ledger (and so per event loop: asyncio locks are bound to one loop).
_locks: weakref.WeakKeyDictionary[object, asyncio.Lock] = weakref.WeakKeyDictionary()


def _lock(ledger: object) -> asyncio.Lock:
    lock = _locks.get(ledger)
    if lock is None:
        lock = _locks[ledger] = asyncio.Lock()
    return lock


# --- scratchpad --------------------------------------------------------------------------


@tool(
    "manage_scratchpad",
    "Read, replace or append to this session's scratchpad: a persistent notepad for "
    "plans and checklists that is shown to you in every request.",
    KIND_READ,
    {
        "action": {"type": "string", "enum": ["read", "update", "append"]},
        "content": {"type": "string", "description": "New text (update) or text to add (append)."},
    },
    ["action"],
)
async def manage_scratchpad(args: dict[str, Any], ctx: ToolContext) -> str:
    action = args["action"]
    ledger = ctx.ledger
    if action == "read":
        text = (await ledger.session_or_default(ctx.session)).scratchpad
        return text if text else "Scratchpad is empty."
    if "content" not in args:
        raise ToolError(f"manage_scratchpad: 'content' is required for {action}")
    # The scratchpad is sent with every request and outlives /undo: no key the model
    # read in a tool output may live on in it.
    content = redact_secrets(args["content"])
    note = " Secrets in it were replaced by [REDACTED]." if content != args["content"] else ""
    async with _lock(ledger):
        if action == "update":
            new = content
        else:
            old = (await ledger.session_or_default(ctx.session)).scratchpad
            # A newline between entries, so appended items do not run together.
            sep = "\n" if old and not old.endswith("\n") and content else ""
            new = old + sep + content
        await ledger.set_scratchpad(ctx.session, new)
    verb = "updated" if action == "update" else "appended to"
    return f"Scratchpad {verb} ({len(new)} characters).{note}"


# --- memos -------------------------------------------------------------------------------


def _memo_json(memo: Any) -> dict[str, Any]:
    when = dt.datetime.fromtimestamp(memo.created_at, dt.UTC).isoformat(timespec="seconds")
    return {"id": memo.id, "content": memo.content, "tags": list(memo.tags), "created_at": when}


@tool(
    "save_memo",
    "Save a durable note for future sessions (memos are global). Tag it with a few "
    "lower-case keywords; hyphenated tags like 'arch-decision' match each part.",
    KIND_READ,
    {
        "content": {"type": "string", "description": "The note."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Keywords."},
    },
    ["content", "tags"],
)
async def save_memo(args: dict[str, Any], ctx: ToolContext) -> str | Reply:
    # A memo is sent again in later requests of every session: a key the model
    # read in a tool output must not live on in one, and text that reads like an
    # order (a prompt injection the model picked up) waits for the user.
    content: str = args["content"]
    clean = redact_secrets(content)
    shape = instruction_shaped(clean)
    tags, dropped = memo_tags(args["tags"])
    try:
        memo = await ctx.ledger.add_memo(
            clean, tags, source=MEMO_MODEL, quarantined=shape is not None
        )
    except LedgerError as exc:
        raise ToolError(f"save_memo: {exc}") from None
    tags = ", ".join(memo.tags) or "(none)"
    note = " Secrets in it were replaced by [REDACTED]." if clean != content else ""
    if dropped:
        note += f" Tags left out (they would match nearly every request): {', '.join(dropped)}."
    if shape is None:
        return f"Memo {memo.id} saved. Tags: {tags}.{note}"
    return Reply(
        f"Memo {memo.id} was quarantined: it reads like an instruction ({shape!r}), not a "
        f"note. It is not used until the user confirms it.{note} Save facts, not orders.",
        f"The model saved memo {memo.id}, which reads like an instruction ({shape!r}); it is "
        f"quarantined: /memo show {memo.id} to read it, /memo confirm {memo.id} to use it.",
    )


@tool(
    "retrieve_memos",
    "Find saved memos by tags: a tag matches exactly or as a hyphen part ('arch' finds "
    f"'arch-decision'). Returns a JSON list, best first, at most {MAX_RETRIEVED_MEMOS}.",
    KIND_READ,
    {"tags": {"type": "array", "items": {"type": "string"}, "description": "Tags to look for."}},
    ["tags"],
)
async def retrieve_memos(args: dict[str, Any], ctx: ToolContext) -> str:
    keywords = normalise_tags(args["tags"])
    if not keywords:
        raise ToolError("retrieve_memos: give at least one tag")
    candidates, bm25 = await ctx.ledger.memo_candidates(keywords)
    # Tags decide (exact or hyphen part, like the reference); the ledger's FTS
    # candidates are narrowed to tag matches, and BM25 only breaks ties.
    tagged = [m for m in candidates if any(tag_matches(k, t) for k in keywords for t in m.tags)]
    ranked = rank_memos(keywords, tagged, bm25, limit=MAX_RETRIEVED_MEMOS)
    return json.dumps([_memo_json(m) for m in ranked], ensure_ascii=False, indent=2)


# --- skills ------------------------------------------------------------------------------


async def active_skills(ledger: Any) -> list[str]:
    """The workspace's active skill names (app_state `active_skills`, a JSON list)."""
    raw = await ledger.get_setting(ACTIVE_SKILLS_KEY)
    try:
        value = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


@tool(
    "use_skill",
    "Activate or deactivate a skill (a named prompt patch, e.g. 'planner'). An active "
    "skill's instructions join the system prompt from the next request; activating also "
    "returns them now.",
    KIND_READ,
    {
        "name": {"type": "string", "description": "Skill name (or id)."},
        "action": {"type": "string", "enum": ["activate", "deactivate"], "default": "activate"},
    },
    ["name"],
)
async def use_skill(args: dict[str, Any], ctx: ToolContext) -> str:
    ledger = ctx.ledger
    ref = args["name"].strip()
    async with _lock(ledger):
        active = await active_skills(ledger)
        skill = await ledger.get_skill(ref) if ref else None
        if args["action"] == "deactivate":
            name = skill.name if skill else ref
            if name not in active:
                if skill is None:
                    raise ToolError(f"use_skill: unknown skill '{ref}'. {await _known(ledger)}")
                return f"Skill '{name}' was not active."
            active.remove(name)
            await ledger.set_setting(ACTIVE_SKILLS_KEY, json.dumps(active))
            return f"Skill '{name}' deactivated."
        if skill is None:  # checked before anything is stored (the reference stored phantoms)
            raise ToolError(f"use_skill: unknown skill '{ref}'. {await _known(ledger)}")
        if skill.name.startswith("mcp__") and skill.name not in active:
            # An MCP server's prompt: text from a server, which the user chooses to apply.
            raise ToolError(
                f"use_skill: '{skill.name}' is a prompt of an MCP server; only the user "
                f"activates it (/skill activate {skill.name})."
            )
        if skill.name in active:
            return f"Skill '{skill.name}' is already active.\n\n{skill.prompt_patch}"
        active.append(skill.name)
        await ledger.set_setting(ACTIVE_SKILLS_KEY, json.dumps(active))
        await ledger.count_skill_activation(skill.id)
    return f"Skill '{skill.name}' activated.\n\n{skill.prompt_patch}"


async def _known(ledger: Any) -> str:
    names = [s.name for s in await ledger.list_skills()]
    return f"Known skills: {', '.join(names)}." if names else "No skills are defined."


TOOLS = [manage_scratchpad, save_memo, retrieve_memos, use_skill]
