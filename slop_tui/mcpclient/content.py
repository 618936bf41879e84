"""A server's tool result as the text a tool row holds.

Text blocks are kept as they are; every other kind becomes one labelled line,
so the model knows something was there and the turn never fails on a block
type it does not know. Images get a placeholder (they are not sent to the
model from a tool result).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any


def _size(data: Any) -> str:
    if not isinstance(data, str):
        return "unknown size"
    try:
        return f"{len(base64.b64decode(data, validate=False)):,} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data):,} characters of base64"


def block_text(block: Any, server: str) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", None) or "unknown type"
        return (
            f"[{kind} from MCP server '{server}': {mime}, {_size(getattr(block, 'data', None))}; "
            f"not shown to the model]"
        )
    if kind == "resource_link":
        parts = [str(getattr(block, "name", "") or ""), str(getattr(block, "uri", ""))]
        mime = getattr(block, "mime_type", None)
        if mime:
            parts.append(f"({mime})")
        desc = getattr(block, "description", None)
        if desc:
            parts.append(f"- {desc}")
        return "[resource link: " + " ".join(p for p in parts if p) + "]"
    if kind == "resource":
        res = getattr(block, "resource", None)
        uri = str(getattr(res, "uri", ""))
        text = getattr(res, "text", None)
        if isinstance(text, str):
            return f"[resource {uri}]\n{text}"
        mime = getattr(res, "mime_type", None) or "unknown type"
        return f"[binary resource {uri}: {mime}, {_size(getattr(res, 'blob', None))}; not shown]"
    return f"[content of type {str(kind)[:40]!r} from MCP server '{server}'; not shown]"


def result_text(result: Any, server: str) -> tuple[str, bool]:
    """(text, is_error) of a `CallToolResult`."""
    blocks = list(getattr(result, "content", None) or [])
    parts = [block_text(b, server) for b in blocks]
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2, default=str))
    text = "\n".join(parts) if parts else "(no output)"
    return text, bool(getattr(result, "is_error", False))
