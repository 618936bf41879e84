"""The provider failing every way the providers' tests list, in sequence, in ONE
session: after each failure the session stays usable, the ledger stays
consistent (no orphan tool calls, the right statuses, a failed turn keeps only what
was shown, as `interrupted`) and every request sent is structurally valid.

Runs once per wire format (OpenAI chat completions, Gemini) through the real SDKs
against the fake server; retries wait on a recorded fake sleep, not the clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from slop_tui.orchestrator import ErrorEvent, Notice, Orchestrator, TextChunk
from slop_tui.providers.retry import RetryPolicy
from tests.fakeserver import FakeToolCall, Reply
from tests.fault_support import (
    check_gemini_request,
    check_openai_request,
    counters_match,
    integrity,
    orphan_calls,
)
from tests.workspace_fixtures import open_workspace

TIMEOUT = 0.5  # the provider's read timeout in this test's config


@dataclass
class Step:
    """One turn: what the server does, and what the turn must end with."""

    name: str
    replies: list[Reply]
    error: str | None = None  # a word the error must contain; None: the turn succeeds
    shown: str = ""  # text streamed before the failure (kept as `interrupted`)
    notice: str | None = None  # a word a Notice must contain
    answer: str | None = None  # the stored answer of a successful turn
    tool_rows: int = 0  # tool result rows the turn stores
    only: str | None = None  # run for this wire format only
    delays: list[float] = field(default_factory=list)  # retry waits the turn must take


def _steps() -> list[Step]:
    err = [Reply(status=500, error_message="boom") for _ in range(7)]
    return [
        Step("401", [Reply(status=401, error_message="bad key")], error="bad key"),
        Step("403", [Reply(status=403, error_message="not allowed")], error="not allowed"),
        Step("404", [Reply(status=404, error_message="no such model")], error="no such model"),
        Step(
            "429 with Retry-After, then fine",
            [
                Reply(status=429, error_message="slow down", headers={"retry-after": "3"}),
                Reply(text="after the wait"),
            ],
            notice="Retrying",
            answer="after the wait",
            delays=[3.0],
        ),
        Step(
            "429 without Retry-After until retries run out",
            [Reply(status=429, error_message="slow down") for _ in range(7)],
            error="slow down",
            notice="Retrying",
            delays=[2, 4, 8, 16, 32, 64],
        ),
        Step("500 then fine", [err[0], Reply(text="recovered")], answer="recovered", delays=[2]),
        Step(
            "503 until retries run out",
            [Reply(status=503, error_message="overloaded") for _ in range(7)],
            error="overloaded",
            delays=[2, 4, 8, 16, 32, 64],
        ),
        Step(
            "read timeout, then fine",
            [Reply(text="too late", delay=TIMEOUT * 3), Reply(text="in time")],
            notice="Retrying",
            answer="in time",
            delays=[2],
        ),
        Step(
            "disconnect mid-stream",
            [Reply(text="abcdefghijklmnop", chunk_size=4, disconnect_after=3)],
            error="",  # `shown` depends on the format: see _per_format
        ),
        Step(
            "malformed SSE line",
            [],  # the raw bytes depend on the format: see _per_format
            error="",
        ),
        Step(
            "200 that is not a stream",
            [Reply(raw=b'{"hello": 1}', content_type="application/json")],
            error="",
        ),
        Step(
            "stream without a finish",
            [Reply(text="half an answer", finish_reason="")],
            error="",
            shown="half an answer",
        ),
        Step(
            "error event in the stream",
            [Reply(text="Hi", in_stream_error="overloaded now")],
            error="overloaded now",
            shown="Hi",
        ),
        Step("empty reply", [Reply(text="")], answer=""),
        Step(
            "content filter",
            [Reply(text="I cannot finish", finish_reason="content_filter")],
            notice="stopped early",
            answer="I cannot finish",
        ),
        Step(
            "max tokens",
            [Reply(text="cut at the li", finish_reason="length")],
            notice="stopped early",
            answer="cut at the li",
        ),
        Step(
            "tool call with invalid JSON arguments",
            [
                Reply(tool_calls=[FakeToolCall("read_file", '{"path": "READ', id="bad1")]),
                Reply(text="I will fix the call"),
            ],
            answer="I will fix the call",
            tool_rows=1,
            only="openai",
        ),
        Step(
            "a good tool call",
            [
                Reply(tool_calls=[FakeToolCall("read_file", {"path": "README.md"}, id="ok1")]),
                Reply(text="read it"),
            ],
            answer="read it",
            tool_rows=1,
        ),
        Step(
            "400 on the tool history: dropped once and retried",
            [Reply(status=400, error_message="bad tool history"), Reply(text="fixed")],
            notice="dropped the most recent tool exchange",
            answer="fixed",
        ),
        Step("a plain turn at the end", [Reply(text="all good")], answer="all good"),
    ]


def _per_format(step: Step, fmt: str) -> Step:
    """The wire-level pieces that differ between the two formats."""
    if step.name == "disconnect mid-stream":
        # OpenAI's first event is the role chunk, Gemini's the first text piece.
        n = 3 if fmt == "openai" else 2
        step.shown = "abcdefgh"
        step.replies = [Reply(text="abcdefghijklmnop", chunk_size=4, disconnect_after=n)]
    if step.name == "malformed SSE line":
        if fmt == "openai":
            head = {
                "id": "x",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}],
            }
        else:
            head = {
                "candidates": [
                    {"content": {"parts": [{"text": "Hi"}], "role": "model"}, "index": 0}
                ]
            }
        raw = [f"data: {json.dumps(head)}\n\n".encode(), b"data: {not json\n\n"]
        step.replies = [Reply(raw=raw, content_type="text/event-stream")]
        step.shown = "Hi"
    return step


@pytest.mark.parametrize("fmt", ["openai", "gemini"])
async def test_every_provider_failure_in_one_session(tmp_path: Path, fake_llm, fmt: str) -> None:
    (tmp_path / "README.md").write_text("# project\n")
    (tmp_path / ".slop").mkdir()
    (tmp_path / ".slop" / "config.toml").write_text(
        f'default_provider = "{fmt}"\n[providers.{fmt}]\ntimeout = {TIMEOUT}\n'
    )
    env = {
        "OPENAI_API_KEY": "x",
        "OPENAI_BASE_URL": fake_llm.openai_base_url,
        "GEMINI_API_KEY": "x",
        "GEMINI_BASE_URL": fake_llm.gemini_base_url,
    }
    ws = await open_workspace(tmp_path, env=env)
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)

    orch = Orchestrator(ws, approve="reads", retry_policy=RetryPolicy(), sleep=fake_sleep)
    # The background job (lane summary) asks the model too, after each reply.
    fake_llm.default_reply = Reply(text="Summary: the user tried many failing requests.")
    checked = 0
    try:
        for n, step in enumerate(_per_format(s, fmt) for s in _steps()):
            if step.only not in (None, fmt):
                continue
            fake_llm.enqueue(*step.replies)
            delays.clear()
            events: list = []
            out = await orch.run_turn(f"step {n}: {step.name}", events.append)
            waited = list(delays)
            await orch.wait_background()  # its summary requests get the default reply
            what = f"[{fmt}] step {n} ({step.name})"
            errors = [e for e in events if isinstance(e, ErrorEvent)]
            shown = "".join(e.text for e in events if isinstance(e, TextChunk))
            assert fake_llm.pending == 0, f"{what}: replies left unused"
            if step.error is not None:
                assert out.error and len(errors) == 1, (what, out.error, errors)
                assert step.error in out.error and "\n" not in out.error, (what, out.error)
            else:
                assert out.error is None and not errors, (what, out.error)
                assert out.text == step.answer, (what, out.text)
            if step.notice:
                assert any(isinstance(e, Notice) and step.notice in e.text for e in events), what
            assert waited == step.delays, (what, waited)

            rows = await ws.ledger.group_messages(ws.session, out.group_id)
            # A prompt that got no answer at all has the error mark: never replayed.
            answered = any(m.role in ("assistant", "tool") for m in rows)
            mark = "completed" if answered or step.error is None else "error"
            assert rows[0].role == "user" and rows[0].status == mark, what
            answers = [m for m in rows if m.role == "assistant" and m.status != "tool_call"]
            if step.error is not None:
                assert shown == (step.shown or ""), (what, shown)
                kept = [(m.status, m.content) for m in answers]
                assert kept == ([("interrupted", shown)] if shown else []), (what, kept)
            else:
                status = "completed" if step.answer else "interrupted"
                assert [(m.status, m.content) for m in answers] == [(status, step.answer)], what
            tools = [m for m in rows if m.role == "tool"]
            if "400" not in step.name:
                assert len(tools) == step.tool_rows, (what, tools)
            all_rows = await ws.ledger.session_messages(ws.session)
            assert not orphan_calls(all_rows), what
            assert not await ws.ledger.inflight_records(), what

            for req in fake_llm.chat_requests[checked:]:
                if fmt == "openai":
                    check_openai_request(req.messages)
                else:
                    check_gemini_request(req.contents)
                # A failed turn's partial text is shown, never replayed as a message.
                # (The lane summary's transcript does quote it: see docs/reliability.md.)
                body = json.dumps(req.body)
                if "context compaction request" not in body:
                    for bad in ("abcdefgh", "half an answer"):
                        assert bad not in body, what
            checked = len(fake_llm.chat_requests)
            if step.name.startswith("tool call with invalid JSON"):
                # The adapter reads unparsable arguments as {}: the call fails
                # validation and the model gets an error result (see reliability.md).
                (result,) = [m for m in rows if m.role == "tool"]
                assert result.status == "error" and "Error" in result.content, result
        assert out.text == "all good"
        assert checked > 20
    finally:
        await orch.aclose()
        await ws.close()
    assert integrity(tmp_path / ".slop" / "slop.db") == "ok"
    counters_match(tmp_path / ".slop" / "slop.db")
