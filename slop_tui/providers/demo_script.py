"""The scripted agent behind the `demo` provider (pure: messages in, next step out).

It reads an OpenAI chat request the way a model would and plays one short
agent turn with the app's real tools: list the project, read README.md if
there is one, look at its own history with `query_db`, note the turn in the
scratchpad, then answer in Markdown ending with a `### STATE` block. Steps
whose tool the request does not offer are skipped, so the demo never calls a
tool the app has disabled. The text is deterministic for a given request, so
UI snapshots of a demo turn are stable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slop_tui.context.assemble import BEGIN_MARKER, END_MARKER

DEMO_MODEL = "slop-demo"
HISTORY_SQL = (
    "SELECT id, role, substr(content,1,60) AS preview FROM messages ORDER BY id DESC LIMIT 5"
)

INTRO = (
    "Hi! This is the **offline demo** of slop-tui: a scripted agent on a loopback server, "
    "not a language model. Watch one agent turn: I will look around the project, read, "
    "check my own history and take a note before answering.\n\n"
)


@dataclass(frozen=True, slots=True)
class DemoCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class DemoStep:
    """One reply of the scripted agent: some text and maybe tool calls."""

    text: str
    calls: tuple[DemoCall, ...] = field(default=())


def _text_of(content: object) -> str:
    """Message content as text (a string, or a list of `{"type": "text"}` parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


def _offered(body: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def _turn(messages: Sequence[Any]) -> tuple[str, list[str], dict[str, str]]:
    """The latest user prompt, the tools called since, and their results by tool name."""
    start = 0
    for i, msg in enumerate(messages):
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            start = i
    prompt = _text_of(messages[start].get("content")) if messages else ""
    # The context engine marks the history's first and last messages; the
    # demo answers the user's words, not the markers.
    for marker in (BEGIN_MARKER, END_MARKER):
        prompt = prompt.replace(marker, "")
    names_by_id: dict[str, str] = {}
    called: list[str] = []
    results: dict[str, str] = {}
    for msg in messages[start + 1 :]:
        if not isinstance(msg, Mapping):
            continue
        if msg.get("role") == "assistant":
            for call in msg.get("tool_calls") or []:
                function = call.get("function") or {}
                name = function.get("name", "")
                names_by_id[call.get("id", "")] = name
                called.append(name)
        elif msg.get("role") == "tool":
            name = names_by_id.get(msg.get("tool_call_id", ""), "")
            results[name] = _text_of(msg.get("content"))
    return prompt, called, results


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def next_step(body: Mapping[str, Any]) -> DemoStep:
    """What the demo agent does next for an OpenAI chat-completions request body."""
    messages = body.get("messages") or []
    offered = _offered(body)
    prompt, called, results = _turn(messages)
    intro = "" if called else INTRO
    if "list_directory" in offered and "list_directory" not in called:
        return DemoStep(intro, (DemoCall("list_directory", {"path": "."}),))
    listing = results.get("list_directory", "")
    if "read_file" in offered and "read_file" not in called and "README.md" in listing:
        text = intro + "The listing has a README.md, so I will read it.\n\n"
        return DemoStep(text, (DemoCall("read_file", {"path": "README.md"}),))
    if "query_db" in offered and "query_db" not in called:
        text = intro + "Now a look at this session's own history in the ledger.\n\n"
        return DemoStep(text, (DemoCall("query_db", {"sql": HISTORY_SQL}),))
    if "manage_scratchpad" in offered and "manage_scratchpad" not in called:
        note = f"- demo turn: {prompt[:40]}\n"
        text = intro + "Noting this turn in the scratchpad.\n\n"
        args = {"action": "append", "content": note}
        return DemoStep(text, (DemoCall("manage_scratchpad", args),))
    return DemoStep(intro + final_answer(prompt, called, results))


def _summary(name: str, result: str) -> str:
    lines = [
        line
        for line in result.splitlines()
        if line.strip() and not line.startswith("### TOOL_RESULT") and line.strip() != "---"
    ]
    first = _one_line(lines[0], 70).replace("`", "'") if lines else "(empty)"
    count = f"{len(lines)} line{'s' if len(lines) != 1 else ''}"
    body = "\n".join(lines)
    try:
        rows = json.loads(body)
    except ValueError:
        rows = None
    if isinstance(rows, list):
        count = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
    return f"- `{name}`: {count}; first: `{first}`"


def final_answer(prompt: str, called: Sequence[str], results: Mapping[str, str]) -> str:
    """The closing Markdown answer with its `### STATE` block."""
    asked = _one_line(prompt, 200) or "(an empty prompt)"
    out = [
        "## Offline demo",
        "",
        "This answer comes from slop-tui's built-in **demo provider**, a scripted agent, "
        "not a language model. Set `OPENAI_API_KEY` or `GEMINI_API_KEY`, or add a "
        "`[providers.NAME]` table to config.toml, to talk to a real model.",
        "",
        f"You asked: *{asked.replace('*', '')}*",
        "",
    ]
    if called:
        out.append("What the tools returned:")
        out.append("")
        out.extend(_summary(name, results.get(name, "")) for name in called)
    else:
        out.append("No tools were offered, so I answered directly.")
    resolved = ", ".join(dict.fromkeys(called)) or "answered without tools"
    out += [
        "",
        "### STATE",
        f"Goal: {_one_line(prompt, 80) or 'try the demo'}",
        "Context: offline demo provider; no model was called",
        f"Resolved: {resolved}",
        f"Technical Anchors: provider=demo, model={DEMO_MODEL}",
        "",
    ]
    return "\n".join(out)
