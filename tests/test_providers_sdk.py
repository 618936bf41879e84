"""The providers' SDKs imported off the event loop (slop_tui/providers/sdk.py,
slop_tui/lazy.py): the first reply no longer stops the app for the SDK's import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from slop_tui import lazy
from tests.fakeserver import FakeLLMServer, Reply

ROOT = Path(__file__).resolve().parent.parent

# A fresh process (no SDK imported yet): an event loop that ticks every 5 ms while an
# OpenAI provider streams its first reply; the longest the loop stood still.
FIRST_REPLY = """
import asyncio, json, sys, time
from slop_tui.providers.openai_provider import OpenAIProvider
from tests.test_providers_support import collect, openai_config, prompt, user

async def main():
    assert "openai" not in sys.modules
    gaps, stop = [], False
    async def ticker():
        last = time.perf_counter()
        while not stop:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.05)
    provider = OpenAIProvider(openai_config(sys.argv[1]))
    start = time.perf_counter()
    out = await collect(provider.stream(prompt(user("hi"))))
    took = time.perf_counter() - start
    stop = True
    await tick
    await provider.aclose()
    print(json.dumps({"text": out.text, "took": took, "gap": max(gaps)}))

asyncio.run(main())
"""


def test_the_first_reply_imports_the_sdk_while_the_event_loop_goes_on(
    fake_llm: FakeLLMServer,
) -> None:
    """The import (most of a first reply's time in a fresh process) no longer holds
    the event loop: its longest stall is a small part of the reply's time, where the
    import on the loop made it nearly all of it."""
    fake_llm.enqueue(Reply(text="Hello from the first reply."))
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_REPLY, fake_llm.openai_base_url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["text"] == "Hello from the first reply."
    assert seen["took"] > 0.2  # the SDK's import was part of it
    assert seen["gap"] < 0.35 * seen["took"], seen


def test_a_background_import_runs_once_and_reports_what_it_raised() -> None:
    runs: list[str] = []
    gate = threading.Event()

    def loader() -> None:
        runs.append(threading.current_thread().name)
        gate.wait(10)

    first = lazy.import_in_background("test-once", loader)
    assert lazy.import_in_background("test-once", loader) is first
    time.sleep(0.05)
    assert not first.done()  # it runs in its own thread
    gate.set()
    first.result(timeout=10)
    assert runs == ["test-once-import"]

    def broken() -> None:
        raise ImportError("no module named 'nothing_here'")

    failed = lazy.import_in_background("test-broken", broken)
    with pytest.raises(ImportError, match="nothing_here"):
        failed.result(timeout=10)


async def test_the_app_preloads_the_next_requests_sdk_and_the_demo_has_none(tmp_path) -> None:
    from slop_tui.providers import sdk
    from tests.workspace_fixtures import open_workspace

    ws = await open_workspace(tmp_path)
    try:
        kind = ws.provider_configs()[(await ws.provider_choice()).name].kind
        assert await ws.preload_provider() is (kind in sdk.LOADERS)
    finally:
        await ws.close()
    assert sdk.preload_sdk("demo") is None
    assert sdk.preload_sdk("openai").result(timeout=300) is None
    assert "openai" in sys.modules
