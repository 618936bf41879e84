"""After-reply compaction (seed 003), topic boundaries, summaries and anchors."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from slop_tui.context.assemble import AssemblyInputs, assemble
from slop_tui.context.budget import CompactionSettings
from slop_tui.context.compaction import (
    SAFE_BOUNDARY,
    CompactionDecision,
    TopicBoundary,
    apply_compaction,
    boundary_prompt,
    boundary_request,
    decide,
    format_messages,
    parse_boundary,
    should_compact,
    truncate_summary,
    verbatim_start,
)
from slop_tui.context.layout import longest_common_prefix, serialize_request
from slop_tui.context.prompt import PromptMessage, ToolSpec
from slop_tui.context.summaries import (
    ANCHORS_HEADER,
    SECTIONS,
    carried_anchors,
    clean_summary,
    complete_summary,
    extract_anchor_items,
    extract_anchors,
    extractive_summary,
    missing_anchors,
    standalone_summary_request,
    summary_anchors,
    summary_instruction,
    summary_request,
)
from slop_tui.records import Message, Session, Summary
from tests.test_context_factories import answer, openai_calls, result, user


def rows(tokens: list[int]) -> list[Message]:
    """Alternating user / assistant rows with stored token counts, ids 1.."""
    out = []
    for i, t in enumerate(tokens):
        role = "user" if i % 2 == 0 else "assistant"
        out.append(Message(i + 1, "s", i // 2 + 1, "main", role, f"m{i + 1}", tokens=t))
    return out


S = CompactionSettings(compaction_trigger_tokens=1_000, verbatim_window_tokens=300)


# --- should_compact ----------------------------------------------------------------------------


def test_should_compact() -> None:
    assert should_compact(24_000) is False
    assert should_compact(24_001) is True
    assert should_compact(10**6, CompactionSettings(enabled=False)) is False
    assert should_compact(1_001, S) is True


# --- verbatim window -------------------------------------------------------------------------


def test_verbatim_window_snaps_to_a_user_message_and_keeps_two_exchanges() -> None:
    msgs = rows([100] * 20)  # ids 1..20 at indices 0..19; users at even indices
    # 300 tokens: the last three messages (indices 17..19); index 17 is an answer,
    # so back to its user message at 16, which already leaves two user messages.
    assert verbatim_start(msgs, S) == 16
    three = CompactionSettings(verbatim_window_tokens=300, min_verbatim_exchanges=3)
    assert verbatim_start(msgs, three) == 14
    one = CompactionSettings(verbatim_window_tokens=100, min_verbatim_exchanges=1)
    assert verbatim_start(msgs, one) == 18
    # A last message above the window is still kept.
    assert verbatim_start(rows([10, 10, 10, 5_000]), one) == 2
    assert verbatim_start([], S) == 0


# --- the decision (seed 003 table) ------------------------------------------------------------


def test_below_trigger_empty_and_disabled_do_nothing() -> None:
    assert decide([], SAFE_BOUNDARY, S).case == "none"
    small = decide(rows([100] * 10), SAFE_BOUNDARY, S)
    assert (small.case, small.reason) == ("none", "history 1,000 tokens is not above 1,000")
    off = CompactionSettings(enabled=False, compaction_trigger_tokens=10)
    assert decide(rows([100] * 20), SAFE_BOUNDARY, off).case == "none"


def test_no_boundary_summarizes_everything_before_the_verbatim_window() -> None:
    msgs = rows([100] * 20)
    d = decide(msgs, SAFE_BOUNDARY, S)
    assert d.case == "summarize"
    assert d.covered_ids == tuple(range(1, 17))
    assert d.verbatim_ids == tuple(range(17, 21))
    assert (d.history_tokens, d.covered_tokens) == (2_000, 1_600)
    assert d.reason == "no topic boundary: summarize"
    assert (d.first_covered, d.last_covered) == (1, 16)
    kept = apply_compaction(msgs, d)
    assert [m.id for m in kept] == list(range(17, 21))
    assert len(kept) < len(msgs)


def test_confident_boundary_in_the_verbatim_window_truncates() -> None:
    msgs = rows([100] * 20)
    b = TopicBoundary(18, "switched to docs", 0.9, "Fixed the parser.")
    d = decide(msgs, b, S)
    # Index 18 is id 19, a user message; two exchanges from there means back to id 17.
    assert d.case == "truncate"
    assert d.covered_ids == tuple(range(1, 17))
    one = CompactionSettings(
        compaction_trigger_tokens=1_000, verbatim_window_tokens=300, min_verbatim_exchanges=1
    )
    d1 = decide(msgs, b, one)
    assert d1.case == "truncate" and d1.covered_ids == tuple(range(1, 19))
    assert "confidence 0.90: truncate" in d1.reason
    assert truncate_summary(d1) == (
        "Earlier topic (messages #1..#18, no longer shown): Fixed the parser.\n"
        "The conversation then moved on: switched to docs."
    )
    assert truncate_summary(d) != "" and truncate_summary(decide(msgs, SAFE_BOUNDARY, S)) == ""
    # A boundary on an answer snaps back to its user message.
    d2 = decide(msgs, TopicBoundary(19, "", 0.9, ""), one)
    assert d2.covered_ids == tuple(range(1, 19))
    # Exactly 0.5 is confident enough.
    assert decide(msgs, TopicBoundary(18, "", 0.5, ""), one).case == "truncate"


@pytest.mark.parametrize(
    ("boundary", "reason"),
    [
        (TopicBoundary(18, "x", 0.3, ""), "low confidence 0.30: summarize"),
        (
            TopicBoundary(4, "x", 0.95, ""),
            "is before the verbatim window (starts at 16): summarize",
        ),
        (TopicBoundary(99, "x", 0.95, ""), "boundary 99 is outside the 20 messages: summarize"),
        (SAFE_BOUNDARY, "no topic boundary: summarize"),
    ],
)
def test_otherwise_summarize(boundary: TopicBoundary, reason: str) -> None:
    d = decide(rows([100] * 20), boundary, S)
    assert d.case == "summarize" and d.covered_ids == tuple(range(1, 17))
    assert d.reason.endswith(reason)


def test_min_verbatim_exchanges_prepends_earlier_messages() -> None:
    msgs = rows([500] * 6)  # three exchanges of 1,000 tokens; window 300 keeps only the last
    d = decide(msgs, SAFE_BOUNDARY, S)
    kept = apply_compaction(msgs, d)
    assert sum(1 for m in kept if m.role == "user") == 2
    assert d.covered_ids == (1, 2)
    three = CompactionSettings(
        compaction_trigger_tokens=1_000, verbatim_window_tokens=300, min_verbatim_exchanges=3
    )
    assert decide(msgs, SAFE_BOUNDARY, three).case == "none"  # nothing left to compact


def test_tool_rows_are_never_split_from_their_call() -> None:
    msgs = [
        user(1, 1, "a" * 4000),
        openai_calls(2, 1, [("c1", "read_file", {})]),
        result(3, 1, "c1", "read_file", "r" * 4000),
        answer(4, 1, "b" * 4000),
        user(5, 2, "c" * 400),
        openai_calls(6, 2, [("c2", "read_file", {})]),
        result(7, 2, "c2", "read_file", "r" * 400),
        answer(8, 2, "done"),
    ]
    one = CompactionSettings(
        compaction_trigger_tokens=1_000, verbatim_window_tokens=150, min_verbatim_exchanges=1
    )
    d = decide(msgs, SAFE_BOUNDARY, one)
    assert d.case == "summarize" and d.covered_ids == (1, 2, 3, 4)
    assert apply_compaction(msgs, CompactionDecision("none")) == msgs


# --- topic detector: format and parse ------------------------------------------------------------


def test_format_messages_indexed_blocks() -> None:
    msgs = [
        user(1, 1, "hello"),
        openai_calls(2, 1, [("c1", "read_file", {})], text="let me look"),
        result(3, 1, "c1", "read_file", "x" * 30),
    ]
    text = format_messages(msgs, max_chars=20)
    assert text.split("\n\n") == [
        "[0] USER: hello",
        "[1] ASSISTANT: let me look\n[calls: read_file]",
        "[2] TOOL read_file: ### TOOL_RESULT: rea [...]",
    ]
    many = rows([1] * 60)
    blocks = format_messages(many).split("\n\n")
    assert len(blocks) == 50 and blocks[0] == "[10] USER: m11" and blocks[-1].startswith("[59] ")
    assert boundary_prompt(many).endswith("[59] ASSISTANT: m60\n")
    prompt_messages = [PromptMessage("user", "hi"), PromptMessage("assistant", "ok")]
    assert format_messages(prompt_messages) == "[0] USER: hi\n\n[1] ASSISTANT: ok"


def test_boundary_request_is_self_contained_and_redacted() -> None:
    msgs = [user(1, 1, "my key is sk-proj-abcdefghijklmnopqrstuvwxyz")]
    req = boundary_request(msgs, "gemini")
    assert req.tools == () and req.strategy == "gemini" and len(req.messages) == 1
    assert "sk-proj" not in req.messages[0].text and "[REDACTED]" in req.messages[0].text
    assert '"boundary_index"' in req.messages[0].text


CLEAN = {"boundary_index": 7, "boundary_reason": "new task", "confidence": 0.8, "summary": "s"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps(CLEAN), TopicBoundary(7, "new task", 0.8, "s")),
        (
            '{"boundary_index": null, "boundary_reason": "one topic", "confidence": 0.9, "summary": ""}',
            TopicBoundary(None, "one topic", 0.9, ""),
        ),
        ("```json\n" + json.dumps(CLEAN) + "\n```", TopicBoundary(7, "new task", 0.8, "s")),
        ("```\n" + json.dumps(CLEAN) + "\n```", TopicBoundary(7, "new task", 0.8, "s")),
        (
            "Sure! " + json.dumps(CLEAN) + " Hope that helps.",
            TopicBoundary(7, "new task", 0.8, "s"),
        ),
        (
            '{"boundary_index": 12, "boundary_reason": "moved to \\"docs\\"", "confidence": 0.75, "summ',
            TopicBoundary(12, 'moved to "docs"', 0.75, ""),
        ),
        ("boundary_index: 3\nconfidence: 0.6", TopicBoundary(3, "", 0.6, "")),
        ('{"boundary_index": "5", "confidence": "0.7"}', TopicBoundary(5, "", 0.7, "")),
        ('{"boundary_index": -2, "confidence": 3}', TopicBoundary(None, "", 1.0, "")),
        ('{"boundary_index": 4.0, "confidence": true}', TopicBoundary(4, "", 0.0, "")),
        ("I cannot determine that.", SAFE_BOUNDARY),
        ("{not json at all", SAFE_BOUNDARY),
        ('{"answer": 42}', SAFE_BOUNDARY),
        ("[1, 2, 3]", SAFE_BOUNDARY),
        ("", SAFE_BOUNDARY),
        (None, SAFE_BOUNDARY),
    ],
    ids=[
        "clean",
        "null-boundary",
        "fenced-json",
        "fenced-plain",
        "json-in-prose",
        "partial-regex",
        "yaml-ish-regex",
        "string-numbers",
        "negative-and-clamped",
        "float-index-bool-confidence",
        "invalid-prose",
        "invalid-brace",
        "unrelated-json",
        "json-list",
        "empty",
        "none",
    ],
)
def test_parse_boundary(text: str | None, expected: TopicBoundary) -> None:
    assert parse_boundary(text) == expected


def test_safe_boundary_is_null_and_zero() -> None:
    assert (SAFE_BOUNDARY.boundary_index, SAFE_BOUNDARY.confidence) == (None, 0.0)


# --- summaries -------------------------------------------------------------------------------


def test_summary_instruction_has_the_seven_sections() -> None:
    text = summary_instruction(400, keep_from="Now fix the tests\nmore")
    for i, title in enumerate(SECTIONS, start=1):
        assert f"{i}. **{title}**" in text
    assert 'before the one that begins "Now fix the tests"' in text
    assert "Stay under about 400 tokens." in text
    assert "Do not call tools." in text
    assert "Integrate this earlier summary" not in text
    assert "Integrate this earlier summary" in summary_instruction(previous_summary="old")


def test_summary_request_reuses_the_session_prefix() -> None:
    ledger = [user(1, 1, "first"), answer(2, 1, "one"), user(3, 2, "Second task please")]
    inputs = AssemblyInputs(
        Session("s"), ledger, "openai", tools=(ToolSpec("read_file", "Read.", {}),)
    )
    prompt = assemble(inputs)
    reply = PromptMessage("assistant", "done", message_id=4)
    req = summary_request(prompt, keep_ids=(3, 4), budget_tokens=300, extra=(reply,))
    assert req.system_text == prompt.system_text and req.tools == prompt.tools
    assert req.messages[: len(prompt.messages)] == prompt.messages
    assert req.messages[-2] == reply and req.messages[-1].role == "user"
    assert 'begins "Second task please"' in req.messages[-1].text
    assert longest_common_prefix(prompt, req) == len(serialize_request(prompt))
    assert "Integrate the existing" not in req.messages[-1].text
    summary = Summary(1, "s", "main", "compaction", 1, 1, "Earlier.", 1, 0.0)
    with_summary = assemble(replace(inputs, summaries=(summary,)))
    again = summary_request(with_summary, keep_ids=(3,))
    assert "Integrate the existing `## Summary of earlier conversation`" in again.messages[-1].text


def test_standalone_request_cuts_and_redacts() -> None:
    msgs = [user(1, 1, "a" * 2500), answer(2, 1, "password=hunter22 ok")]
    req = standalone_summary_request(msgs, "openai", budget_tokens=200, previous_summary="prev")
    text = req.messages[0].text
    assert "[user]: " + "a" * 2000 + "... [truncated]" in text
    assert "[assistant]: password=[REDACTED] ok" in text
    assert "Integrate this earlier summary" in text and req.tools == ()


def test_standalone_request_cuts_tool_results_like_an_older_group() -> None:
    log = "".join(f"line {i:04d}\n" for i in range(400)) + "ERROR: disk full at line 400"
    msgs = [
        user(1, 1, "check the log"),
        openai_calls(2, 1, [("a", "execute_bash", {"command": "cat app.log"})]),
        result(3, 1, "a", "execute_bash", log),
    ]
    previous = (
        "## User Intent\n- earlier work\n\n"
        "## Anchors kept verbatim\n- [constraint/0] Never deploy on Fridays.\n"
    )
    req = standalone_summary_request(msgs, "openai", previous_summary=previous, tool_limit=300)
    text = req.messages[0].text
    assert "[calls: execute_bash]" in text
    # The result as an older group's is sent: head, the query_db pointer, the tail.
    block = text[text.index("[tool]: ") :].split("\n\n[", 1)[0]
    assert 'query_db(sql="SELECT content FROM messages WHERE id=3")' in block
    assert "line 0000" in block and "ERROR: disk full at line 400" in block
    assert "line 0200" not in block and len(block) < 400
    # The summary it rolls over is integrated, its anchors without their tags.
    assert "- Never deploy on Fridays." in text and "[constraint/0]" not in text
    # Without a limit a tool result is cut at 2,000 characters, as any message.
    whole = standalone_summary_request(msgs, "openai").messages[0].text
    assert "line 0100" in whole and "ERROR: disk full" not in whole


def test_clean_summary() -> None:
    assert (
        clean_summary("<analysis>think</analysis>\n## User Intent\n- x\n") == "## User Intent\n- x"
    )
    assert clean_summary("<analysis>a</analysis><summary>\nS\n</summary>") == "S"
    assert clean_summary("<analysis>never closed") == ""
    assert clean_summary("plain") == "plain"


# --- anchors -----------------------------------------------------------------------------------

USER_TEXT = (
    "Please run the server on port 8080 and write logs to /var/log/app/server.log.\n"
    "Always use tabs in the Makefile. Never push to main!\n"
    "- don't touch src/legacy/old_api.py\n"
    "Docs: https://example.com/docs/api?x=1. We need under 5 ms per call and 2.5 GB of cache, "
    "with Python 3.11 and ruff v0.6.9. Use CompactionSettings from slop_tui.context.budget "
    "and keep max_history_tokens."
)
ASSISTANT_TEXT = "I decided to use WAL mode. See `ledger.window()` and localhost:5432, e.g. this."
TOOL_TEXT = (
    "Traceback (most recent call last):\n"
    '  File "x.py", line 3, in <module>\n'
    "    raise ValueError('boom')\n"
    "ValueError: boom\n"
    "except KeyError:\n"
    "tests/test_x.py::test_a FAILED\n"
    "error: could not compile"
)


def _span() -> list[Message]:
    return [
        user(1, 1, USER_TEXT),
        answer(2, 1, ASSISTANT_TEXT),
        openai_calls(3, 1, [("c1", "read_file", {"path": "docs/notes.md"})]),
        result(4, 1, "c1", "read_file", TOOL_TEXT),
    ]


def test_extract_anchors_exact() -> None:
    items = extract_anchor_items(_span())
    assert [(a.kind, a.text, a.priority) for a in items] == [
        ("constraint", "Always use tabs in the Makefile.", 0),
        ("constraint", "Never push to main!", 0),
        ("constraint", "don't touch src/legacy/old_api.py", 0),
        # A request keeps its values bare ("Please run ..."); the path inside the
        # constraint is not repeated.
        ("path", "/var/log/app/server.log", 1),  # absolute: stated even in a request
        ("path", "docs/notes.md", 3),  # a tool-call argument
        # A statement keeps its values with what they are about: one anchor each.
        ("number", "port 8080", 1),
        (
            "number",
            "We need under 5 ms per call and 2.5 GB of cache, with Python 3.11 and ruff v0.6.9.",
            1,
        ),
        ("number", "localhost:5432", 3),  # said by the assistant
        # "Label: value" is a value stated with its subject (constraints.value_span).
        ("value", "Docs: https://example.com/docs/api?x=1.", 1),
        (
            "identifier",
            "Use CompactionSettings from slop_tui.context.budget and keep max_history_tokens.",
            1,
        ),
        ("identifier", "ledger.window()", 3),
        # Errors with a message first; a bare `FAILED` status line is no anchor.
        ("error", "ValueError: boom", 2),
        ("error", "error: could not compile", 3),
    ]
    assert extract_anchors(_span()) == [a.text for a in items]


def test_anchors_from_prompt_messages_skip_engine_text() -> None:
    msgs = [
        PromptMessage("user", "## Begin Conversation History\nnever use port 22"),
        PromptMessage("user", "Always obey", kind="context"),
        PromptMessage(
            "tool",
            '[tool result elided to save context: use query_db(sql="SELECT content FROM messages '
            'WHERE id=3") to read it]',
        ),
    ]
    assert extract_anchors(msgs) == ["never use port 22"]  # the port is in the constraint


def test_constraints_only_from_the_user() -> None:
    assert extract_anchors([answer(1, 1, "You must always run tests.")]) == []


def test_complete_summary_lists_every_anchor_once() -> None:
    anchors = ["port 8080", "src/legacy/old_api.py", "Never push to main!", "5 ms", "5 ms"]
    # The prose, STATE and the scratchpad holding an anchor today do not leave it out:
    # they are rewritten later and the anchor would vanish with them.
    out = complete_summary(
        "## User Intent\n- run on PORT 8080",
        anchors,
        state="### STATE\nFiles: src/legacy/old_api.py",
        scratchpad="Never push to main!",
    )
    assert out == (
        "## User Intent\n- run on PORT 8080\n\n"
        f"{ANCHORS_HEADER}\n- port 8080\n- src/legacy/old_api.py\n- Never push to main!\n- 5 ms\n"
    )
    # Nothing to keep: no section; secrets redacted either way.
    assert complete_summary("use 5 ms; token=abc123xyz", []) == "use 5 ms; token=[REDACTED]\n"
    # The section is replaced, not stacked, and can be capped.
    again = complete_summary(out, ["Never push to main!", "5 ms", "b"], max_anchors=2)
    assert again.count(ANCHORS_HEADER) == 1
    assert again.endswith(f"{ANCHORS_HEADER}\n- Never push to main!\n- 5 ms\n")


def test_anchors_are_carried_across_rolling_summaries() -> None:
    first = complete_summary("## User Intent\n- generic", ["Never push to main!", "port 8080"])
    assert carried_anchors(first) == ["Never push to main!", "port 8080"]
    anchors = summary_anchors([user(9, 5, "use /srv/data")], previous_summary=first)
    assert anchors == ["Never push to main!", "port 8080", "use /srv/data"]
    second = complete_summary("## User Intent\n- still generic", anchors)
    assert missing_anchors(["Never push to main!", "port 8080", "use /srv/data"], second) == []


def test_extractive_summary_sections_and_content() -> None:
    msgs = [
        *_span(),
        answer(
            5, 1, "Decided to use sqlite instead of files.\n- [x] done\n- [ ] add tests\nTODO: docs"
        ),
        user(6, 2, "and my password=supersecret1"),
    ]
    text = extractive_summary(msgs)
    titles = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert titles == list(SECTIONS)
    assert text.startswith("(Extractive summary of messages #1..#6, made without a model;")
    assert "- Tools called: read_file x1" in text
    assert "Constraints stated by the user:\n- Always use tabs in the Makefile." in text
    assert "- /var/log/app/server.log" in text
    assert "- ValueError: boom" in text
    assert "- I decided to use WAL mode." in text
    assert "- Decided to use sqlite instead of files." in text
    assert "## Pending Tasks\n- add tests\n- docs" in text
    assert "- Last answer: Decided to use sqlite instead of files." in text
    assert "supersecret1" not in text and "password=[REDACTED]" in text
    assert extractive_summary(msgs) == text  # deterministic
    empty = extractive_summary([])
    assert "## Key Decisions\n- (none recorded)" in empty
