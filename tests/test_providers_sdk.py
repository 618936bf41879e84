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

# A fresh process (no SDK imported yet): an event loop that ticks every 5 ms while
# `ACTION` runs (it sets `out`, and `done` once it is over); the longest the loop
# stood still, how long the action took, and the thread that imported MODULE.
STALL_PROBE = """
import asyncio, json, sys, threading, time
SETUP

imported_on = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == MODULE and not imported_on:
            imported_on.append(threading.current_thread().name)
        return None

sys.meta_path.insert(0, Watch())

async def main():
    assert MODULE not in sys.modules
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
    start = time.perf_counter()
    ACTION
    took = time.perf_counter() - start
    stop = True
    await tick
    print(json.dumps({"out": out, "took": took, "gap": max(gaps), "on": imported_on}))

asyncio.run(main())
"""


def _stall(module: str, setup: str, action: str, *args: str) -> dict:
    """Run `action` under the stall probe in a fresh process; what it printed."""
    script = (
        STALL_PROBE.replace("MODULE", repr(module))
        .replace("SETUP", setup)
        .replace("ACTION", action.strip().replace("\n", "\n    "))
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_first_reply_imports_the_sdk_while_the_event_loop_goes_on(
    fake_llm: FakeLLMServer,
) -> None:
    """The import (most of a first reply's time in a fresh process) no longer holds
    the event loop: its longest stall is a small part of the reply's time, where the
    import on the loop made it nearly all of it."""
    fake_llm.enqueue(Reply(text="Hello from the first reply."))
    seen = _stall(
        "openai",
        "from slop_tui.providers.openai_provider import OpenAIProvider\n"
        "from tests.test_providers_support import collect, openai_config, prompt, user",
        """
provider = OpenAIProvider(openai_config(sys.argv[1]))
out = (await collect(provider.stream(prompt(user("hi"))))).text
await provider.aclose()
""",
        fake_llm.openai_base_url,
    )
    assert seen["out"] == "Hello from the first reply."
    assert seen["took"] > 0.2  # the SDK's import was part of it
    assert seen["on"] and seen["on"] != ["MainThread"], seen  # imported beside the loop
    # and the loop went on meanwhile: on it, the import stopped it for nearly all of it
    # (a loaded machine can pause the loop's thread for a while: not for half of it)
    assert seen["gap"] < 0.5 * seen["took"], seen


def test_gemini_s_request_body_shown_first_imports_its_sdk_off_the_event_loop(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """`/context show --json` for Gemini builds the body with the SDK's own converter:
    the first one in a process loads the SDK, and the loop goes on meanwhile."""
    seen = _stall(
        "google.genai",
        "from slop_tui.commands import dispatch\n"
        "from tests.workspace_fixtures import open_workspace\n"
        "from pathlib import Path",
        """
env = {"GEMINI_API_KEY": "x", "GEMINI_BASE_URL": sys.argv[1]}
ws = await open_workspace(Path(sys.argv[2]), env=env)
assert (await dispatch(ws, "/provider gemini")).ok
start = time.perf_counter()  # what is timed, and the stalls watched, from here on
gaps.clear()
shown = await dispatch(ws, "/context show --json")
out = sorted(shown.data)
await ws.close()
""",
        fake_llm.gemini_base_url,
        str(tmp_path),
    )
    assert "contents" in seen["out"], seen
    assert seen["took"] > 0.2  # the SDK's import was part of it
    assert seen["on"] and seen["on"] != ["MainThread"], seen  # imported beside the loop
    # and the loop went on meanwhile: on it, the import stopped it for nearly all of it
    # (a loaded machine can pause the loop's thread for a while: not for half of it)
    assert seen["gap"] < 0.5 * seen["took"], seen


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
