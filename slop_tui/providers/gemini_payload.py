"""Gemini request contents and reply parts, as plain snake_case dicts.

Kept apart from the client code so the shaping rules can be read (and tested)
without a network: roles `user`/`model`; consecutive same-role messages merged
into one content (Gemini wants alternation, and tool results travel as
`function_response` parts of a user content); stored parts replayed verbatim
so their `thought_signature` survives; calls rebuilt from `tool_calls` when
isolation altered them, with the documented dummy signature because Gemini 3
rejects an unsigned function call.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from slop_tui.context.prompt import Prompt, PromptMessage
from slop_tui.records import ToolCall

# Documented by Google for calls that did not come from a Gemini 3 response
# (history from another model, or rebuilt calls): it skips signature validation.
DUMMY_THOUGHT_SIGNATURE = "skip_thought_signature_validator"


def _synthesized_id(call: ToolCall) -> bool:
    """True for the `name#index` ids the message parser invents when Gemini sent none."""
    return re.fullmatch(re.escape(call.name) + r"#\d+", call.id) is not None


def _native_parts(msg: PromptMessage, known: frozenset[str] | None) -> list[dict[str, Any]] | None:
    native = msg.native
    if not isinstance(native, list):
        return None
    parts = [copy.deepcopy(p) for p in native if isinstance(p, Mapping) and p]
    if known is not None:
        # A part stored by a newer SDK may carry fields this one would refuse.
        parts = [{k: v for k, v in p.items() if k in known} for p in parts]
        parts = [p for p in parts if p]
    if msg.tool_calls and not any("function_call" in p for p in parts):
        return None  # inconsistent with the calls the orchestrator will answer
    return parts or None


def _rebuilt_parts(msg: PromptMessage) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if msg.text.strip():
        parts.append({"text": msg.text})
    for call in msg.tool_calls:
        fc: dict[str, Any] = {"name": call.name, "args": dict(call.arguments)}
        if not _synthesized_id(call):
            fc["id"] = call.id
        parts.append({"function_call": fc})
    return parts


def _function_call_ids(parts: Iterable[Mapping[str, Any]]) -> set[str]:
    ids: set[str] = set()
    for part in parts:
        fc = part.get("function_call")
        if isinstance(fc, Mapping) and isinstance(fc.get("id"), str):
            ids.add(fc["id"])
    return ids


def gemini_contents(
    prompt: Prompt, known_part_fields: frozenset[str] | None = None, replay_native: bool = True
) -> list[dict[str, Any]]:
    """`contents` for `generateContent`, as snake_case dicts (`types.Content` input).

    `replay_native=False` rebuilds every model message from its text and calls
    (the fallback when a stored part no longer validates).
    """
    contents: list[dict[str, Any]] = []
    sent_ids: set[str] = set()
    for msg in prompt.messages:
        if msg.role == "assistant":
            role = "model"
            parts = _native_parts(msg, known_part_fields) if replay_native else None
            if parts is None:
                parts = _rebuilt_parts(msg)
            sent_ids |= _function_call_ids(parts)
        elif msg.role == "tool":
            role = "user"
            response: dict[str, Any] = {
                "name": msg.tool_name or "unknown",
                "response": {"content": msg.text},
            }
            # Gemini pairs results by id only when its call carried one.
            if msg.tool_call_id and msg.tool_call_id in sent_ids:
                response["id"] = msg.tool_call_id
            parts = [{"function_response": response}]
            parts += [{"inline_data": {"mime_type": i.mime, "data": i.data}} for i in msg.images]
        else:
            role = "user"
            parts = [{"text": msg.text}] if msg.text else []
            parts += [{"inline_data": {"mime_type": i.mime, "data": i.data}} for i in msg.images]
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    for content in contents:
        if content["role"] == "model":
            _ensure_signature(content["parts"])
    return contents


def _ensure_signature(parts: list[dict[str, Any]]) -> None:
    calls = [p for p in parts if "function_call" in p]
    if calls and not any(p.get("thought_signature") for p in calls):
        calls[0]["thought_signature"] = DUMMY_THOUGHT_SIGNATURE


def gemini_function_declarations(prompt: Prompt) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters}
        for t in prompt.tools
    ]


def _is_plain_text(part: Mapping[str, Any]) -> bool:
    return "text" in part and set(part) <= {"text", "thought", "thought_signature"}


def merge_part(parts: list[dict[str, Any]], part: dict[str, Any]) -> None:
    """Append a streamed part, joining runs of text the way the non-streamed API does.

    Text pieces of the same kind (answer or thought) are concatenated unless
    the earlier one is already signed; a signature on a later piece (Gemini
    often signs an empty closing text part) moves onto the joined part.
    Function calls and anything else are kept whole.
    """
    prev = parts[-1] if parts else None
    if (
        prev is not None
        and _is_plain_text(part)
        and _is_plain_text(prev)
        and bool(prev.get("thought")) == bool(part.get("thought"))
        and "thought_signature" not in prev
    ):
        prev["text"] += part["text"]
        if "thought_signature" in part:
            prev["thought_signature"] = part["thought_signature"]
        return
    parts.append(part)
