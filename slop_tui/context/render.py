"""`/context show`: a `Prompt` as readable text, layer by layer, with token counts.

It renders the very object the provider adapter sends, so what is shown is
what is sent (the adapter's JSON is `/context show --json`).
"""

from __future__ import annotations

import json

from slop_tui.context.prompt import ENGINE_KINDS, PLACEMENT_SYSTEM, Prompt, PromptMessage
from slop_tui.context.tokens import o200k_count


def layer_figure(tokens: int, text: str) -> str:
    """A layer's token figure as shown: its o200k count, which depends on its text
    alone, so a byte-identical layer shows the same figure whatever the model's
    calibration (the request's total is calibrated); `≈` and the engine's count when
    the text has not been counted yet."""
    base = o200k_count(text)
    return f"{base}" if base is not None else f"≈{tokens}"


def _call_line(name: str, call_id: str, arguments: dict) -> str:
    args = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return f"  -> call {name} [{call_id}] {args}"


def _message_header(index: int, msg: PromptMessage) -> str:
    where = []
    if msg.message_id is not None:
        where.append(f"#{msg.message_id}")
    if msg.group_id is not None:
        where.append(f"group {msg.group_id}")
    who = msg.role
    if msg.role == "tool":
        who = f"tool {msg.tool_name or '?'} [{msg.tool_call_id or '?'}]"
    extra = []
    if msg.tier:
        extra.append(f"tier {msg.tier}")
    if msg.truncated:
        extra.append("truncated")
    if msg.message_id is None:
        extra.append("synthetic")
    if msg.native is not None:
        extra.append("native payload")
    if msg.kind is not None:
        extra.append(f"{msg.kind} message")
    tail = f" · {', '.join(extra)}" if extra else ""
    origin = f" ({', '.join(where)})" if where else ""
    return f"[{index}] {who}{origin} · {msg.tokens} tokens{tail}"


def render_prompt(prompt: Prompt) -> str:
    """Human-readable text of a prompt with tokens per layer and per message.

    Layers that travel in a message (pinned or context, see `layout.py`) are
    shown as layers, labelled with their message; the message itself is then
    listed by its header only, so no text is shown twice.
    """
    out: list[str] = []
    history = prompt.history
    layout = "" if prompt.layout == "default" else f", layout {prompt.layout}"
    # The request's count, as the gauge and the preview's heading give it, and what it
    # is made of: the text below and the tool declarations listed at the end.
    tools = f" + {prompt.tool_tokens:,} of tool declarations" if prompt.tool_tokens else ""
    out.append(
        f"=== Context for strategy {prompt.strategy} · {prompt.request_tokens:,} tokens "
        f"({prompt.total_tokens:,} of text{tools}; {len(prompt.layers)} layer(s), "
        f"{len(history)} message(s){layout}) ==="
    )
    figures = [layer_figure(layer.tokens, layer.text) for layer in prompt.layers]
    if figures != [str(layer.tokens) for layer in prompt.layers]:
        out.append(
            "(layers in o200k tokens, which stay put for the same text; the total is "
            "calibrated to the model's reported counts, or estimated where marked ≈)"
        )
    for layer, figure in zip(prompt.layers, figures, strict=True):
        where = "" if layer.placement == PLACEMENT_SYSTEM else f" · in {layer.placement} message"
        out.append(f"\n--- layer: {layer.name} · {figure} tokens{where} ---")
        out.append(layer.text.strip("\n"))
    if prompt.files:
        out.append(f"\n--- files in context · {len(prompt.files)} ---")
        out.extend(f"- {f.path} · {f.tokens} tokens" for f in prompt.files)
    out.append(f"\n--- history · {len(history)} message(s) · {prompt.history_tokens} tokens ---")
    for i, msg in enumerate(prompt.messages, start=1):
        out.append(_message_header(i, msg))
        if msg.kind in ENGINE_KINDS:
            names = [la.name for la in prompt.layers if la.placement == msg.kind]
            out.append(f"(layers {', '.join(names)}: shown above)")
        elif msg.text:
            out.append(msg.text)
        for image in msg.images:
            out.append(
                f"[image: {image.name}, {image.width}×{image.height}, {image.tokens} tokens]"
            )
        for call in msg.tool_calls:
            out.append(_call_line(call.name, call.id, call.arguments))
        out.append("")
    if prompt.tools:
        out.append(f"--- tools declared · {len(prompt.tools)} · {prompt.tool_tokens} tokens ---")
        out.extend(f"- {t.name}" for t in prompt.tools)
    if prompt.notes:
        out.append("\n--- notes ---")
        out.extend(f"- {n}" for n in prompt.notes)
    return "\n".join(out).rstrip("\n") + "\n"
