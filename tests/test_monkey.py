"""A short seeded monkey run (tests/monkey.py): random keys, clicks, sentences and
commands against the real workspace and the wire-format fake server, with every
invariant checked after every step. `bench/monkey.py --steps N` runs it long."""

from __future__ import annotations

from tests.monkey import Monkey, check_gemini, check_openai

STEPS = 100
# Its 100 steps sent 10 prompts, moved 10 messages to the trash and quit once when
# chosen; the counts depend on timing (a key may land before or after a reply).
SEED = 8


async def test_a_short_monkey_run_breaks_no_invariant(tmp_path, fake_llm):
    monkey = Monkey(tmp_path, fake_llm, SEED)
    result = await monkey.run(STEPS)
    assert result.violations == []
    assert result.steps == STEPS
    assert set(result.actions) >= {"key", "click", "sentence", "prompt", "command"}
    assert result.requests >= 3 and result.messages_seen >= 6


def test_the_request_checks_catch_what_they_must():
    ok_openai = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": {}}]},
        {"role": "tool", "tool_call_id": "a", "content": "r"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    assert check_openai(ok_openai) is None
    orphan_answer = [*ok_openai[:5], {"role": "assistant", "content": "late"}, ok_openai[5]]
    assert "two assistant turns" in check_openai(orphan_answer)
    assert "not answered" in check_openai([*ok_openai[:3], ok_openai[5]])
    assert "without its call" in check_openai([ok_openai[1], ok_openai[3]])
    ok_gemini = [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f"}}]},
    ]
    assert check_gemini(ok_gemini) is None
    answer = {"role": "model", "parts": [{"text": "a"}]}
    assert "two model contents" in check_gemini([ok_gemini[0], answer, answer, ok_gemini[0]])
    assert "ends with a model turn" in check_gemini([ok_gemini[0], answer])
    assert "answered by []" in check_gemini([ok_gemini[0], ok_gemini[1], ok_gemini[0]])
