"""The offline demo provider, and the lazy SDK imports of the whole package."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from slop_tui.context.anchors import extract_state
from slop_tui.context.prompt import PromptMessage, ToolSpec
from slop_tui.providers import TextDelta, create_provider
from slop_tui.providers.config import ProviderConfig
from slop_tui.providers.demo import DemoProvider
from slop_tui.providers.demo_script import HISTORY_SQL
from tests.test_providers_support import collect, prompt, user

TOOLS = tuple(
    ToolSpec(name, f"{name} tool", {"type": "object", "properties": {}})
    for name in ("list_directory", "read_file", "query_db", "manage_scratchpad", "grep")
)
LISTING = "### TOOL_RESULT: list_directory\nDirectory: src/\nFile: README.md\nFile: setup.py\n\n---"
RESULTS = {
    "list_directory": LISTING,
    "read_file": "### TOOL_RESULT: read_file\n1: # My project\n2: It does things.\n\n---",
    "query_db": '### TOOL_RESULT: query_db\n[{"id": 2, "role": "user", "preview": "hi"},'
    ' {"id": 1, "role": "user", "preview": "x"}]\n\n---',
    "manage_scratchpad": "### TOOL_RESULT: manage_scratchpad\nAppended.\n\n---",
}


@pytest.fixture
async def demo() -> AsyncIterator[DemoProvider]:
    provider = DemoProvider(delay=0)
    yield provider
    await provider.aclose()


async def _run_turn(
    provider: DemoProvider, request: str, results: dict[str, str], tools: tuple[ToolSpec, ...]
) -> tuple[list[tuple[str, dict]], str, int]:
    """Drive the demo like the orchestrator would; return the calls, the final text, deltas."""
    messages: list[PromptMessage] = [user(request)]
    calls: list[tuple[str, dict]] = []
    deltas = 0
    for _ in range(10):
        out = await collect(provider.stream(prompt(*messages, tools=tools)))
        reply = out.reply
        deltas += sum(isinstance(i, TextDelta) for i in out.items)
        if not reply.tool_calls:
            return calls, reply.text, deltas
        messages.append(
            PromptMessage(
                role="assistant",
                text=reply.text,
                tool_calls=reply.tool_calls,
                native=json.loads(reply.payload or ""),
            )
        )
        for call in reply.tool_calls:
            calls.append((call.name, call.arguments))
            messages.append(
                PromptMessage(
                    role="tool",
                    text=results.get(call.name, "ok"),
                    tool_call_id=call.id,
                    tool_name=call.name,
                )
            )
    raise AssertionError("the demo never finished its turn")


async def test_scripted_turn_uses_the_tools_and_ends_with_state(demo: DemoProvider) -> None:
    request = "Show me around this project please, I am new here"
    calls, final, deltas = await _run_turn(demo, request, RESULTS, TOOLS)
    note = "- demo turn: Show me around this project please, I am\n"  # first 40 characters
    assert calls == [
        ("list_directory", {"path": "."}),
        ("read_file", {"path": "README.md"}),
        ("query_db", {"sql": HISTORY_SQL}),
        ("manage_scratchpad", {"action": "append", "content": note}),
    ]
    assert deltas > 20  # streamed in small pieces
    assert "offline demo" in final.lower() or "demo provider" in final
    assert "`list_directory`: 3 lines; first: `Directory: src/`" in final
    assert "`read_file`: 2 lines; first: `1: # My project`" in final
    assert "`query_db`: 2 rows" in final
    state = extract_state(final)
    assert state is not None
    for field in (
        "Goal: Show me around",
        "Context:",
        "Resolved: list_directory",
        "Technical Anchors:",
    ):
        assert field in state


async def test_read_file_is_skipped_without_a_readme(demo: DemoProvider) -> None:
    results = dict(RESULTS, list_directory="### TOOL_RESULT: list_directory\nFile: a.py\n\n---")
    calls, final, _ = await _run_turn(demo, "hello", results, TOOLS)
    assert [name for name, _ in calls] == ["list_directory", "query_db", "manage_scratchpad"]
    assert extract_state(final) is not None


async def test_without_tools_the_demo_answers_directly(demo: DemoProvider) -> None:
    calls, final, _ = await _run_turn(demo, "hi", {}, ())
    assert calls == []
    assert "No tools were offered" in final and extract_state(final) is not None


async def test_each_turn_starts_fresh_and_payload_is_stored(demo: DemoProvider) -> None:
    first = (await collect(demo.stream(prompt(user("one"), tools=TOOLS)))).reply
    assert first.tool_calls[0].name == "list_directory"
    assert first.text.startswith("Hi! This is the **offline demo**")
    assert json.loads(first.payload or "")["tool_calls"][0]["function"]["name"] == "list_directory"
    assert first.prompt_tokens > 0 and first.complete
    # A later user prompt restarts the script, whatever came before it.
    later = prompt(
        user("one"),
        PromptMessage(role="assistant", text="done"),
        user("two"),
        tools=TOOLS,
    )
    assert (await collect(demo.stream(later))).reply.tool_calls[0].name == "list_directory"


async def test_demo_identity_and_models() -> None:
    provider = create_provider(
        ProviderConfig(name="demo", kind="demo", model="slop-demo", extra={"delay": 0})
    )
    try:
        assert isinstance(provider, DemoProvider) and provider.delay == 0
        assert (provider.strategy, provider.model) == ("openai", "slop-demo")
        assert provider.request_body(prompt(user("x")))["model"] == "slop-demo"
        assert "delay" not in provider.request_body(prompt(user("x")))
        assert await provider.list_models() == ["slop-demo"]
    finally:
        await provider.aclose()


def test_importing_providers_imports_no_sdk() -> None:
    code = (
        "import sys\n"
        "import slop_tui.providers as p\n"
        "from slop_tui.providers import config, retry, base, demo, demo_script\n"
        "from slop_tui.providers import openai_provider, gemini_provider, gemini_payload\n"
        "configs, _ = p.load_provider_configs({'OPENAI_API_KEY': 'k', 'GEMINI_API_KEY': 'g'})\n"
        "made = [p.create_provider(c) for c in configs.values()]\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in ('openai', 'httpx', 'httpx2', 'textual')\n"
        "             or m.startswith('google.genai'))\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
