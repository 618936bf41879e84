"""The one parser of stored provider JSON (seed 000, "Centralized Message Parsing").

Every layer that needs the tool calls or the text of a stored assistant row
asks this module, so the UI, the orchestrator and the context engine cannot
disagree about what a row means.

Stored shapes (see `records.Message`):

- `openai` tool-call rows: `payload` is the whole assistant message object,
  `{"role": "assistant", "content": str | null, "tool_calls": [{"id", "type",
  "function": {"name", "arguments": "<json string>"}}]}`.
- `gemini` / `gemini_gca` rows: `payload` is a JSON list of parts, each as
  google-genai's `part.model_dump(mode="json", exclude_none=True)` (snake_case:
  `function_call`, `thought_signature`, `text`, `thought`). camelCase
  (`functionCall`, `thoughtSignature`) and a bare part object are accepted too.

Nothing here raises on malformed JSON: a row that cannot be parsed yields no
tool calls and its plain `content`, because a corrupt row must never make a
whole session unusable.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable

from slop_tui.records import (
    STATUS_TOOL_CALL,
    STRATEGY_GEMINI,
    STRATEGY_OPENAI,
    Message,
    ToolCall,
    strategy_family,
)

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])([A-Z])")


# Parsed payloads kept (`_loads`, `_calls_of`): the tool-call rows of a window, which
# every assembly reads again. An entry holds its payload (~1 KB) and its parsed form,
# ~4 KB together: 1,024 of them ~4 MB. A window with more tool calls than this parses
# the rest again each time (~40 microseconds a row on a loaded 2-core machine).
PAYLOADS_KEPT = 1024


def native_payload(msg: Message) -> object | None:
    """The parsed `payload` JSON of a row, or None when absent or malformed.

    Parsed once per distinct payload and shared: treat the result as
    read-only (the provider adapters copy what they send).
    """
    if not msg.payload:
        return None
    return _loads(msg.payload)


def _parse(payload: str) -> object | None:
    try:
        return json.loads(payload)
    except (ValueError, TypeError, RecursionError):
        return None


_loads = functools.lru_cache(maxsize=PAYLOADS_KEPT)(_parse)


def _family(msg: Message, payload: object) -> str | None:
    family = strategy_family(msg.strategy)
    if family in (STRATEGY_OPENAI, STRATEGY_GEMINI):
        return family
    # A row without a known strategy (older data, tests): fall back to the shape,
    # which is unambiguous between the two families.
    if isinstance(payload, dict) and "tool_calls" in payload:
        return STRATEGY_OPENAI
    if isinstance(payload, list) or (
        isinstance(payload, dict) and ("function_call" in payload or "functionCall" in payload)
    ):
        return STRATEGY_GEMINI
    return None


def _gemini_parts(payload: object) -> list[dict]:
    """The dict parts of a Gemini payload (a list, or one bare part object)."""
    if isinstance(payload, dict):
        return [payload]
    if isinstance(payload, list):
        return [p for p in payload if isinstance(p, dict)]
    return []


def _get(part: dict, snake: str, camel: str) -> object:
    value = part.get(snake)
    return part.get(camel) if value is None else value


def _parse_arguments(raw: object) -> tuple[dict, str | None]:
    """The arguments as a dict, and why they could not be read (None: they could)."""
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str) and raw.strip():
        try:
            parsed = json.loads(raw)
        except ValueError as exc:
            return {}, f"the arguments are not valid JSON ({getattr(exc, 'msg', exc)})"
        except RecursionError:
            return {}, "the arguments are not valid JSON (nested too deeply)"
        if isinstance(parsed, dict):
            return parsed, None
        return {}, f"the arguments must be a JSON object, not a JSON {type(parsed).__name__}"
    return {}, None


def _openai_calls(payload: object) -> tuple[ToolCall, ...]:
    if not isinstance(payload, dict):
        return ()
    raw_calls = payload.get("tool_calls")
    if not isinstance(raw_calls, list):
        return ()
    calls: list[ToolCall] = []
    for index, raw in enumerate(c for c in raw_calls if isinstance(c, dict)):
        function = raw.get("function")
        function = function if isinstance(function, dict) else {}
        name = function.get("name")
        name = name if isinstance(name, str) and name else "unknown"
        call_id = raw.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else f"{name}#{index}"
        calls.append(ToolCall(call_id, name, *_parse_arguments(function.get("arguments"))))
    return tuple(calls)


def _gemini_calls(payload: object) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for part in _gemini_parts(payload):
        fc = _get(part, "function_call", "functionCall")
        if not isinstance(fc, dict):
            continue
        name = fc.get("name")
        name = name if isinstance(name, str) and name else "unknown"
        call_id = fc.get("id")
        # Gemini often omits call ids; the index among this row's calls makes a
        # stable id the tool-result row can point back to.
        index = len(calls)
        call_id = call_id if isinstance(call_id, str) and call_id else f"{name}#{index}"
        calls.append(ToolCall(call_id, name, *_parse_arguments(fc.get("args"))))
    return tuple(calls)


def tool_calls(msg: Message, *, keep: bool = True) -> tuple[ToolCall, ...]:
    """The provider-neutral tool calls of a `tool_call` row (empty for any other row).

    `keep=False` for a row read once (the input of a summary or a compaction): parsed
    without entering the cache, which holds the rows every assembly reads again."""
    if msg.status != STATUS_TOOL_CALL or not msg.payload:
        return ()
    if not keep:
        return _calls_in(msg.strategy, msg.payload, _parse)
    return _calls_of(msg.strategy, msg.payload)


def _calls_in(
    strategy: str | None, payload_json: str, loads: Callable[[str], object | None]
) -> tuple[ToolCall, ...]:
    probe = Message(
        0, "", None, "", "assistant", "", STATUS_TOOL_CALL, payload_json, strategy=strategy
    )
    payload = loads(payload_json)
    family = _family(probe, payload)
    if family == STRATEGY_OPENAI:
        return _openai_calls(payload)
    if family == STRATEGY_GEMINI:
        return _gemini_calls(payload)
    return ()


@functools.lru_cache(maxsize=PAYLOADS_KEPT)
def _calls_of(strategy: str | None, payload_json: str) -> tuple[ToolCall, ...]:
    # Stored payloads never change, and every assembly re-reads the same
    # window, so parsing each payload once per process is enough. ToolCall
    # records are frozen; callers must not mutate their `arguments`.
    return _calls_in(strategy, payload_json, _loads)


def _payload_text(msg: Message, payload: object) -> str:
    family = _family(msg, payload)
    if family == STRATEGY_OPENAI and isinstance(payload, dict):
        content = payload.get("content")
        return content if isinstance(content, str) else ""
    if family == STRATEGY_GEMINI:
        # Thought summaries are the model's private reasoning, not its answer.
        texts = [
            p["text"]
            for p in _gemini_parts(payload)
            if isinstance(p.get("text"), str) and not p.get("thought")
        ]
        return "".join(texts)
    return ""


def assistant_text(msg: Message, *, keep: bool = True) -> str:
    """The human-readable text of a row.

    `content` is authoritative (the ledger stores the text there for every
    row); the payload is consulted only when a tool-call row has no content
    (with `keep=False`, as in `tool_calls`, parsed without entering the cache).
    """
    if msg.content or msg.status != STATUS_TOOL_CALL:
        return msg.content
    if not keep:
        return _payload_text(msg, _parse(msg.payload) if msg.payload else None)
    return _payload_text(msg, native_payload(msg))


def _snake(key: str) -> str:
    return _CAMEL_BOUNDARY.sub(lambda m: "_" + m.group(1).lower(), key)


def gemini_parts_for_replay(msg: Message) -> list[dict]:
    """The stored Gemini parts of a row, ready to replay to a Gemini model.

    Parts keep everything they were stored with (notably `thought_signature`,
    which Gemini 3 requires on the first function call of the active loop);
    top-level keys are normalised to snake_case so adapters see one shape.
    Without usable stored parts the row's text becomes a single text part;
    a row with neither yields an empty list.
    """
    payload = native_payload(msg)
    parts = _gemini_parts(payload) if _family(msg, payload) == STRATEGY_GEMINI else []
    normalised = [{_snake(k): v for k, v in part.items()} for part in parts]
    normalised = [p for p in normalised if p]
    if normalised:
        return normalised
    text = assistant_text(msg)
    return [{"text": text}] if text else []
