"""`/repo map` and `/repo tree`: the repository's own layers of the context.

The map (`## Repository Structure`) and the file tree (`## Repository Files`)
are built by `slop_tui.repomap`; these commands show them and set their
budgets, stored in the ledger so every process of the project uses them.
"""

from __future__ import annotations

from slop_tui.commands.base import TABLE, CommandError, UsageError, command, ok, parse_int
from slop_tui.records import Changed

CAT = "Context & history"
TABLE.default_sub["repo"] = "map"

_NAMES = {"map": "repository map", "tree": "file tree"}


async def _layer(ws, which: str) -> tuple[str, str]:
    """(the layer's text as the next request would carry it, a one-line status)."""
    choice = await ws.provider_choice()
    max_input = ws.model_info(choice.model).max_input_tokens
    map_budget, tree_budget = await ws.repo_settings(max_input)
    budget = map_budget if which == "map" else tree_budget
    if budget <= 0:
        return "", f"The {_NAMES[which]} is off; /repo {which} on turns it on."
    window = await ws.ledger.window(ws.session, 0)
    files, _notes = await ws.context_files()
    repo_map, tree, notes = await ws.repo_sources(window[-40:], [p for p, _ in files], max_input)
    text = repo_map if which == "map" else tree
    tokens = ws.ledger.count_tokens(text) if text else 0
    status = f"The {_NAMES[which]}: {tokens:,} of {budget:,} tokens."
    if notes:
        status += " " + " ".join(n.removeprefix("repo map: ") + "." for n in notes)
    return text, status


async def _set(ws, which: str, args: str) -> str:
    """Apply `on`, `off` or `tokens N`; the confirmation."""
    from slop_tui.workspace import KEY_FILE_TREE, KEY_REPO_MAP

    usage = f"/repo {which} [on|off|tokens N]"
    key = KEY_REPO_MAP if which == "map" else KEY_FILE_TREE
    words = args.split()
    name = _NAMES[which]
    if words == ["on"]:
        await ws.ledger.set_setting(key, "")
        return f"The {name} is on (its configured budget)."
    if words == ["off"]:
        await ws.ledger.set_setting(key, "off")
        return f"The {name} is off: no longer sent. /repo {which} on brings it back."
    if len(words) == 2 and words[0] == "tokens":
        n = parse_int(words[1], "tokens", usage, minimum=0)
        await ws.ledger.set_setting(key, str(n) if n else "off")
        return f"The {name} is sent within {n:,} tokens." if n else f"The {name} is off."
    raise UsageError(f"Usage: {usage}")


async def _show_or_set(ws, which: str, args: str):
    if args.strip():
        return ok(await _set(ws, which, args), changed=Changed.FILES)
    try:
        text, status = await _layer(ws, which)
    except OSError as exc:
        raise CommandError(f"The {_NAMES[which]} cannot be built: {exc.strerror}.") from None
    return ok(f"{status}\n\n{text}".rstrip() if text else status, data=text)


@command(
    "repo",
    "map",
    "/repo map [on|off|tokens N]",
    "Show the repository map sent with each request, or turn it on, off, or set its budget.",
    CAT,
)
async def repo_map(ws, args: str):
    return await _show_or_set(ws, "map", args)


@command(
    "repo",
    "tree",
    "/repo tree [on|off|tokens N]",
    "Show the file tree sent with each request, or turn it on, off, or set its budget.",
    CAT,
)
async def repo_tree(ws, args: str):
    return await _show_or_set(ws, "tree", args)
