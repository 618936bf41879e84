"""What the model sees of a server's tool: its name, description and schema.

- Names are `mcp__SERVER__TOOL` (the form Claude Code made familiar), with
  characters outside `[A-Za-z0-9_-]` turned into `_`; a name over 64
  characters (OpenAI's limit, and the safe one for Gemini) is cut and ends in
  a hash of the whole, so two long names never collide.
- Descriptions are a stranger's text: neutralised (no terminal controls, bidi
  overrides), capped, and labelled with the server they come from.
- Schemas must be something both providers accept: an object schema whose
  property names Gemini takes (`[A-Za-z0-9_]`, at most 64), no remote
  `$ref`, not absurdly deep or large. A tool whose schema fails is skipped,
  and `/mcp` says why.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from slop_tui.safe_text import neutralise

PREFIX = "mcp__"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_SCHEMA_CHARS = 20_000
MAX_SCHEMA_DEPTH = 12
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_PARAM = re.compile(r"^[A-Za-z0-9_]{1,64}$")


def is_mcp_name(name: str) -> bool:
    return name.startswith(PREFIX)


def exposed_name(server: str, tool: str) -> str:
    """`mcp__SERVER__TOOL`, safe for every provider, at most 64 characters."""
    name = f"{PREFIX}{server}__{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def description_for_model(server: str, text: str | None) -> str:
    """The tool's description as declared to the model: labelled, neutralised, capped."""
    body = neutralise(" ".join((text or "").split()))
    if len(body) > MAX_DESCRIPTION:
        body = body[: MAX_DESCRIPTION - 1] + "…"
    return f"[MCP server '{server}'] {body}".rstrip()


def check_schema(schema: Any) -> tuple[dict[str, Any] | None, str]:
    """The schema to declare (a copy), or None and why it cannot be declared."""
    if not isinstance(schema, dict):
        return None, "its input schema is not a JSON object"
    schema = json.loads(json.dumps(schema))  # a private copy (and JSON-clean)
    kind = schema.get("type", "object")
    if kind != "object":
        return None, f"its input schema has type {kind!r}; providers need an object"
    schema["type"] = "object"
    schema.setdefault("properties", {})
    if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
        return None, f"its input schema is larger than {MAX_SCHEMA_CHARS:,} characters"
    why = _walk(schema, 0)
    if why:
        return None, why
    return schema, ""


def _walk(node: Any, depth: int) -> str:
    if depth > MAX_SCHEMA_DEPTH:
        return f"its input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
    if isinstance(node, list):
        for item in node:
            if why := _walk(item, depth + 1):
                return why
        return ""
    if not isinstance(node, dict):
        return ""
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#/"):
        return f"its input schema refers to a remote schema ({ref[:80]})"
    props = node.get("properties")
    if isinstance(props, dict):
        for key in props:
            if not _PARAM.match(str(key)):
                return (
                    f"parameter name {str(key)[:40]!r} is not accepted by Gemini "
                    "(letters, digits and '_', at most 64)"
                )
    for value in node.values():
        if why := _walk(value, depth + 1):
            return why
    return ""


def definition_hash(description: str | None, schema: Any) -> str:
    """What the user accepted of a tool: its description and schema, as the server sent them."""
    text = json.dumps({"d": description or "", "s": schema}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
