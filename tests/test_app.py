"""The workspace app starts, runs a demo turn through the real orchestrator and quits."""

from __future__ import annotations

import pytest

from slop_tui.ui.app import ApprovalScreen, SlopApp
from tests.fakeserver import FakeToolCall, Reply, click_when_shown, wait_for


async def started(pilot) -> None:
    """Wait for the ledger, then close the first-run screen the demo set-up shows."""
    from slop_tui.ui.screens.firstrun import FirstRunScreen

    app = pilot.app
    # generous: a loaded CI machine can take seconds to open the ledger and mount
    await wait_for(pilot, lambda: app.ready or app.startup_error is not None, timeout=30)
    await pilot.pause()
    if isinstance(app.screen, FirstRunScreen):
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, FirstRunScreen), timeout=30)


@pytest.fixture
def project(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLOP_DB", "SLOP_SESSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLOP_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("# A project\n")
    return tmp_path


async def test_starts_and_quits_cleanly(project):
    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        assert "DEMO" in app.sub_title
        await pilot.press("ctrl+q")
    assert app.return_code in (0, None)


async def test_demo_turn_streams_and_updates_panes(project):
    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press(*"hello", "enter")
        await wait_for(
            pilot, lambda: app.turns.orchestrator is not None and not app.turns.busy, timeout=60
        )
        ws = app.workspace
        rows = await ws.ledger.session_messages(ws.session)
        assert rows[0].content == "hello" and rows[-1].role == "assistant"
        assert (await ws.ledger.current_state(ws.session)) is not None
        assert "demo turn" in (await ws.current()).scratchpad
        options = app.query_one("#group-list")
        assert options.option_count == 1


async def test_commands_run_from_the_prompt(project):
    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press(*"/session activate other", "enter")
        await wait_for(pilot, lambda: app.workspace.session == "other")
        await pilot.press(*"/nope", "enter")
        await pilot.pause()
        assert app.query_one("#prompt").text == ""


async def test_approval_dialog_allows_a_write(project, fake_llm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("write_file", {"path": "out.txt", "content": "ok"})]),
        Reply(text="written"),
    )
    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press(*"write it", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=10)
        await click_when_shown(pilot, "#allow")
        await wait_for(
            pilot, lambda: app.turns.orchestrator is not None and not app.turns.busy, timeout=10
        )
    assert (project / "out.txt").read_text() == "ok"
