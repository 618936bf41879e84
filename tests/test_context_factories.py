"""Ledger-row factories and the structural-validity check shared by the context tests.

The tests at the bottom check the checker itself, so a lax validator cannot
make the isolation tests pass vacuously.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from slop_tui.context.prompt import PromptMessage
from slop_tui.records import Message, ToolCall

SESSION = "s"


def user(mid: int, gid: int | None, text: str = "question", **kw: object) -> Message:
    return Message(mid, SESSION, gid, "main", "user", text, **kw)  # type: ignore[arg-type]


def answer(mid: int, gid: int | None, text: str = "answer", strategy: str = "openai", **kw: object):
    return Message(mid, SESSION, gid, "main", "assistant", text, strategy=strategy, **kw)  # type: ignore[arg-type]


def openai_calls(
    mid: int, gid: int | None, calls: Sequence[tuple[str, str, dict]], text: str = ""
) -> Message:
    payload = {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
            for cid, name, a in calls
        ],
    }
    return Message(
        mid,
        SESSION,
        gid,
        "main",
        "assistant",
        text,
        status="tool_call",
        payload=json.dumps(payload),
        strategy="openai",
    )


def gemini_calls(
    mid: int,
    gid: int | None,
    calls: Sequence[tuple[str, dict]],
    text: str = "",
    strategy: str = "gemini",
    camel: bool = False,
) -> Message:
    """A Gemini tool-call row; calls have no ids, so they are `name#index`."""
    fc, sig = (
        ("functionCall", "thoughtSignature") if camel else ("function_call", "thought_signature")
    )
    parts: list[dict] = [{"text": text}] if text else []
    for i, (name, args) in enumerate(calls):
        part: dict = {fc: {"name": name, "args": args}}
        if i == 0:
            part[sig] = "c2lnbmF0dXJl"
        parts.append(part)
    return Message(
        mid,
        SESSION,
        gid,
        "main",
        "assistant",
        text,
        status="tool_call",
        payload=json.dumps(parts),
        strategy=strategy,
    )


def result(
    mid: int,
    gid: int | None,
    call_id: str,
    name: str,
    output: str = "ok",
    strategy: str = "openai",
    **kw: object,
) -> Message:
    framed = f"### TOOL_RESULT: {name}\n{output}\n\n---"
    return Message(
        mid,
        SESSION,
        gid,
        "main",
        "tool",
        framed,
        tool_call_id=call_id,
        tool_name=name,
        strategy=strategy,
        **kw,  # type: ignore[arg-type]
    )


def assert_structurally_valid(messages: Sequence[PromptMessage]) -> None:
    """What both OpenAI and Gemini require of a conversation.

    - roles are user / assistant / tool;
    - a tool message belongs to the run of tool messages right after an
      assistant message with tool calls, and answers one of its calls, once;
    - every call of such an assistant message is answered in that run;
    - no tool message follows a user message (implied by the above);
    - no empty message (Gemini rejects empty parts).
    """
    open_calls: dict[str, ToolCall] | None = None
    for i, m in enumerate(messages):
        assert m.role in ("user", "assistant", "tool"), f"#{i}: bad role {m.role}"
        if m.role == "tool":
            assert open_calls is not None, f"#{i}: tool message without a preceding call"
            assert m.tool_call_id in open_calls, f"#{i}: result {m.tool_call_id} has no open call"
            assert m.tool_name == open_calls[m.tool_call_id].name, f"#{i}: tool name mismatch"
            del open_calls[m.tool_call_id]
            continue
        assert not open_calls, f"#{i}: calls {sorted(open_calls or {})} left without result"
        assert m.text.strip() or m.tool_calls, f"#{i}: empty message"
        if m.role == "assistant" and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            assert len(set(ids)) == len(ids), f"#{i}: duplicate call ids"
            open_calls = {c.id: c for c in m.tool_calls}
        else:
            assert not m.tool_calls, f"#{i}: {m.role} message with tool calls"
            open_calls = None
    assert not open_calls, f"calls {sorted(open_calls or {})} left without result at the end"


# --- the checker checks -----------------------------------------------------------------


def _call(cid: str, name: str = "t") -> ToolCall:
    return ToolCall(cid, name, {})


def test_checker_accepts_a_valid_exchange() -> None:
    assert_structurally_valid(
        [
            PromptMessage("user", "q"),
            PromptMessage("assistant", "", tool_calls=(_call("a"), _call("b"))),
            PromptMessage("tool", "r", tool_call_id="b", tool_name="t"),
            PromptMessage("tool", "r", tool_call_id="a", tool_name="t"),
            PromptMessage("assistant", "done"),
        ]
    )


@pytest.mark.parametrize(
    "messages",
    [
        [PromptMessage("user", "q"), PromptMessage("tool", "r", tool_call_id="a", tool_name="t")],
        [
            PromptMessage("user", "q"),
            PromptMessage("assistant", "", tool_calls=(_call("a"),)),
            PromptMessage("assistant", "next"),
        ],
        [PromptMessage("user", "q"), PromptMessage("assistant", "", tool_calls=(_call("a"),))],
        [
            PromptMessage("assistant", "", tool_calls=(_call("a"),)),
            PromptMessage("tool", "r", tool_call_id="a", tool_name="t"),
            PromptMessage("tool", "r", tool_call_id="a", tool_name="t"),
        ],
        [
            PromptMessage("assistant", "", tool_calls=(_call("a"),)),
            PromptMessage("tool", "r", tool_call_id="a", tool_name="other"),
        ],
        [PromptMessage("user", "  ")],
    ],
    ids=[
        "tool-after-user",
        "call-without-result",
        "dangling-call",
        "double-result",
        "wrong-name",
        "empty",
    ],
)
def test_checker_rejects_invalid_exchanges(messages: list[PromptMessage]) -> None:
    with pytest.raises(AssertionError):
        assert_structurally_valid(messages)
