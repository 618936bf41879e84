"""The one parser of stored vendor JSON."""

from __future__ import annotations

import json

import pytest

from slop_tui import message_parser as mp
from slop_tui.records import Message, ToolCall
from tests.test_context_factories import answer, gemini_calls, openai_calls, user


def _row(payload: str | None, strategy: str | None, status: str = "tool_call", content: str = ""):
    return Message(
        1, "s", 1, "main", "assistant", content, status=status, payload=payload, strategy=strategy
    )


def test_openai_calls_are_parsed_with_arguments() -> None:
    row = openai_calls(1, 1, [("call_1", "read_file", {"path": "/a"}), ("call_2", "ls", {})])
    assert mp.tool_calls(row) == (
        ToolCall("call_1", "read_file", {"path": "/a"}),
        ToolCall("call_2", "ls", {}),
    )


def test_openai_missing_pieces_get_defaults() -> None:
    payload = {
        "role": "assistant",
        "tool_calls": [
            {"type": "function", "function": {"arguments": "not json"}},
            {"id": "x", "function": {"name": "f", "arguments": "[1, 2]"}},
            "garbage",
        ],
    }
    calls = mp.tool_calls(_row(json.dumps(payload), "openai"))
    assert calls == (
        ToolCall("unknown#0", "unknown", {}, "the arguments are not valid JSON (Expecting value)"),
        ToolCall("x", "f", {}, "the arguments must be a JSON object, not a JSON list"),
    )


def test_gemini_snake_case_calls_get_name_index_ids() -> None:
    row = gemini_calls(1, 1, [("read_file", {"path": "/a"}), ("read_file", {"path": "/b"})])
    assert mp.tool_calls(row) == (
        ToolCall("read_file#0", "read_file", {"path": "/a"}),
        ToolCall("read_file#1", "read_file", {"path": "/b"}),
    )


def test_gemini_camel_case_and_explicit_ids() -> None:
    parts = [
        {"text": "thinking", "thought": True},
        {
            "functionCall": {"name": "ls", "args": {"d": "."}, "id": "fc-9"},
            "thoughtSignature": "c2ln",
        },
        {"functionCall": {"name": "ls"}},
    ]
    calls = mp.tool_calls(_row(json.dumps(parts), "gemini_gca"))
    # The index counts calls only, not the text part before them.
    assert calls == (ToolCall("fc-9", "ls", {"d": "."}), ToolCall("ls#1", "ls", {}))


def test_gemini_bare_part_object_is_accepted() -> None:
    part = {"functionCall": {"name": "ls", "args": {}}}
    assert mp.tool_calls(_row(json.dumps(part), "gemini")) == (ToolCall("ls#0", "ls", {}),)


def test_unknown_strategy_falls_back_to_the_payload_shape() -> None:
    openai = openai_calls(1, 1, [("c", "f", {})])
    gemini = gemini_calls(2, 1, [("g", {})])
    assert mp.tool_calls(_row(openai.payload, None)) == (ToolCall("c", "f", {}),)
    assert mp.tool_calls(_row(gemini.payload, None)) == (ToolCall("g#0", "g", {}),)
    assert mp.tool_calls(_row('{"what": 1}', None)) == ()


@pytest.mark.parametrize("payload", [None, "", "{", "null", "42", '"str"', "[1, 2]", "[[[["])
@pytest.mark.parametrize("strategy", ["openai", "gemini", "gemini_gca", None, "other"])
def test_malformed_payloads_never_raise(payload: str | None, strategy: str | None) -> None:
    row = _row(payload, strategy, content="said")
    assert mp.tool_calls(row) == ()
    assert mp.assistant_text(row) == "said"
    assert isinstance(mp.gemini_parts_for_replay(row), list)


def test_only_tool_call_rows_have_calls() -> None:
    row = openai_calls(1, 1, [("c", "f", {})])
    completed = Message(1, "s", 1, "main", "assistant", "x", payload=row.payload, strategy="openai")
    assert mp.tool_calls(completed) == ()
    assert mp.tool_calls(user(2, 1)) == ()


def test_assistant_text_prefers_content_then_payload() -> None:
    assert mp.assistant_text(answer(1, 1, "final")) == "final"
    with_text = openai_calls(1, 1, [("c", "f", {})], text="let me look")
    assert mp.assistant_text(with_text) == "let me look"
    # content empty: the payload's text is used (OpenAI `content`, Gemini non-thought text).
    payload = json.dumps({"role": "assistant", "content": "from payload", "tool_calls": []})
    assert mp.assistant_text(_row(payload, "openai")) == "from payload"
    parts = [
        {"text": "hidden", "thought": True},
        {"text": "visible"},
        {"function_call": {"name": "f"}},
    ]
    assert mp.assistant_text(_row(json.dumps(parts), "gemini")) == "visible"


def test_native_payload() -> None:
    row = openai_calls(1, 1, [("c", "f", {})])
    assert mp.native_payload(row)["tool_calls"][0]["id"] == "c"
    assert mp.native_payload(_row("{bad", "openai")) is None
    assert mp.native_payload(_row(None, "openai")) is None


def test_gemini_parts_for_replay_keeps_signatures_in_snake_case() -> None:
    row = gemini_calls(1, 1, [("ls", {"d": "."})], text="checking", camel=True)
    assert mp.gemini_parts_for_replay(row) == [
        {"text": "checking"},
        {"function_call": {"name": "ls", "args": {"d": "."}}, "thought_signature": "c2lnbmF0dXJl"},
    ]


def test_gemini_parts_for_replay_falls_back_to_text() -> None:
    assert mp.gemini_parts_for_replay(answer(1, 1, "hi", strategy="gemini")) == [{"text": "hi"}]
    assert mp.gemini_parts_for_replay(answer(1, 1, "", strategy="gemini")) == []
    # An OpenAI payload is not a Gemini part.
    openai = openai_calls(1, 1, [("c", "f", {})], text="t")
    assert mp.gemini_parts_for_replay(openai) == [{"text": "t"}]
