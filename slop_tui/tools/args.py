"""Tool-call arguments: JSON decoding and a small JSON-schema check.

Only what the tool schemas use is supported (type, required, properties,
items, enum, minimum, maximum, default). Errors are one line, named after the
tool and the argument, because the model reads them and retries:
`read_file: 'start_line' must be an integer`.

A string with a lone surrogate (a JSON `"\\ud800"` escape, which `json.loads`
accepts) is refused: it cannot be encoded as UTF-8, so no path, command line,
file or ledger row could hold it.

Leniency, on purpose: integral floats (`5.0`) and digit strings (`"5"`) are
accepted as integers because models send them; `null` for an optional
argument means "not given". An unknown argument is refused, naming the valid ones
(`execute_bash: unknown argument 'timeout'; its arguments are command,
timeout_seconds`): ignored, a misspelt limit would silently not apply.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from slop_tui.tools.base import Tool, ToolError

_INT_TEXT = re.compile(r"[+-]?\d{1,18}")
_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
}


def lone_surrogate(text: str) -> str | None:
    """`U+D800`-style name of the first lone surrogate in `text`; None for valid Unicode.

    Python holds undecodable bytes (`surrogateescape`: argv, file names) and JSON
    `\\ud800` escapes as lone surrogates; SQLite, files and the terminal take UTF-8 only.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"U+{ord(text[exc.start]):04X}"
    return None


def parse_arguments(name: str, raw: dict[str, Any] | str | None) -> dict[str, Any]:
    """The call's arguments as a dict; a JSON string is decoded, empty means `{}`."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ToolError(f"{name}: the arguments are not valid JSON ({exc.msg})") from None
    if not isinstance(raw, dict):
        raise ToolError(f"{name}: the arguments must be a JSON object")
    return dict(raw)


def argument_problem(tool: Tool, raw: dict[str, Any] | str | None) -> str | None:
    """Why a call's arguments cannot run (the one-line `ToolError` message), or None:
    checked before anyone is asked to approve the call."""
    try:
        validate(tool, parse_arguments(tool.name, raw))
    except ToolError as exc:
        return exc.message
    return None


def validate(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """Checked arguments with schema defaults filled in; raises `ToolError`."""
    return _object(tool.name, tool.parameters, args, prefix="")


def _object(tool: str, schema: dict[str, Any], value: dict[str, Any], prefix: str) -> dict:
    props: dict[str, Any] = schema.get("properties", {})
    out: dict[str, Any] = {}
    unknown = [key for key in value if key not in props]
    if unknown:
        names = ", ".join(repr(f"{prefix}{k}") for k in unknown)
        valid = ", ".join(f"{prefix}{k}" for k in props) or "none"
        what = "argument" if len(unknown) == 1 else "arguments"
        raise ToolError(f"{tool}: unknown {what} {names}; the valid ones are {valid}")
    for key, val in value.items():
        if val is None:
            continue  # null means "not given"; `required` below catches it
        out[key] = _check(tool, props[key], val, f"{prefix}{key}")
    for key in schema.get("required", ()):
        if key not in out:
            raise ToolError(f"{tool}: '{prefix}{key}' is required")
    for key, sub in props.items():
        if key not in out and "default" in sub:
            out[key] = sub["default"]
    return out


def _check(tool: str, schema: dict[str, Any], value: Any, where: str) -> Any:
    kind = schema.get("type")
    value = _coerce(kind, value)
    if kind and not _is(kind, value):
        raise ToolError(f"{tool}: '{where}' must be {_TYPE_WORDS.get(kind, kind)}")
    if isinstance(value, str) and (bad := lone_surrogate(value)) is not None:
        raise ToolError(
            f"{tool}: '{where}' contains {bad}, a lone surrogate that is not valid Unicode; "
            "send UTF-8 text"
        )
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(str(c) for c in schema["enum"])
        raise ToolError(f"{tool}: '{where}' must be one of {choices}")
    if kind in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolError(f"{tool}: '{where}' must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ToolError(f"{tool}: '{where}' must be at most {schema['maximum']}")
    if kind == "array" and "items" in schema:
        return [_check(tool, schema["items"], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind == "object":
        return _object(tool, schema, value, prefix=f"{where}.")
    return value


def _coerce(kind: str | None, value: Any) -> Any:
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            return int(value.strip())
    if kind == "number" and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return number if math.isfinite(number) else value
    return value


def _is(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True
