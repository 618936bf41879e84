"""The trust boundary as the workspace shows it: the untrusted project config and its
trust action, and the header's warning when the shell has no sandbox."""

from __future__ import annotations

import json
import time

from textual.widgets import Static

from slop_tui.ui.app import SlopApp
from slop_tui.ui.screens.dialogs import ApprovalScreen, ConfirmScreen
from tests import test_app
from tests.fakeserver import FakeToolCall, Reply, click_when_shown, wait_for
from tests.test_app import started
from tests.test_app_actions import palette, seed

project = test_app.project  # a temporary project folder; SLOP_CONFIG in it, no keys
SIZE = (140, 44)


def make_app(root) -> SlopApp:
    return SlopApp(db=str(root / ".slop" / "slop.db"), user_themes=False, blink=False)


async def test_an_untrusted_project_config_is_shown_and_trusted_by_a_visible_action(project):
    (project / ".slop").mkdir()
    cfg = project / ".slop" / "config.toml"
    cfg.write_text(
        'approve = "all"\n[providers.local]\nkind = "openai"\nbase_url = "http://x/v1"\n'
    )
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        assert ws.config.approve == "reads" and ws.provider_configs()["local"].base_url is None
        banner = str(app.query_one("#banner", Static).render())
        assert 'approve = "all"' in banner and "Trust this folder's config" in banner
        await palette(pilot, "Trust this folder's config")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        dialog = " ".join(str(s.render()) for s in app.screen.query(Static))
        assert "[providers.local] base_url" in dialog and "keys" in dialog
        armed = app.screen.arming.at
        await wait_for(pilot, lambda: time.monotonic() >= armed)  # `y` works once readable
        await pilot.press("y")
        await wait_for(pilot, lambda: ws.config.approve == "all")
        assert ws.provider_configs()["local"].base_url == "http://x/v1"
        assert not app.query_one("#banner", Static).has_class("-shown")
    record = json.loads((project / "trusted.json").read_text())
    assert str(project.resolve()) in record["folders"]


async def test_the_header_says_when_the_shell_has_no_sandbox(project, monkeypatch):
    monkeypatch.setenv("SLOP_BWRAP", str(project / "no-bwrap"))
    await seed(project, [("question", "answer")], session="refactoring-the-payments-service")
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        assert "shell: NO SANDBOX" in app.sub_title
        assert not app.workspace.sandbox.available
        # At every size and after every resize the warning is whole on screen, and the
        # line fits: a narrow terminal shortens the rest, never the warning.
        for width, height in ((80, 24), (200, 50), (120, 40), (80, 24)):
            await pilot.resize_terminal(width, height)
            await wait_for(pilot, lambda w=width: app.size.width == w)
            await pilot.pause()
            await pilot.pause()
            title = app.query_one("HeaderTitle")
            shown = str(title.render())[: title.content_region.width]  # what is drawn
            assert "shell: NO SANDBOX" in shown, (width, shown)
            long = "window" in app.sub_title
            assert long == (width >= 120), (width, app.sub_title)  # the size's own form


async def test_the_approval_dialog_offers_no_always_for_the_shell_without_a_sandbox(
    project, monkeypatch, fake_llm
):
    """Without a sandbox every shell command asks, so "always this session" is not
    offered for it; a write tool's dialog still offers it."""
    monkeypatch.setenv("SLOP_BWRAP", str(project / "no-bwrap"))
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("write_file", {"path": "out.txt", "content": "ok"})]),
        Reply(tool_calls=[FakeToolCall("execute_bash", {"command": "echo x > ran.txt"})]),
        Reply(text="done"),
    )
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await pilot.press(*"go", "enter")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, ApprovalScreen) and bool(app.screen.query("#deny")),
            timeout=20,
        )
        assert app.screen.tool_name == "write_file" and app.screen.query("#allow_session")
        await click_when_shown(pilot, "#allow")
        await wait_for(
            pilot,
            lambda: (
                isinstance(app.screen, ApprovalScreen)
                and app.screen.tool_name != "write_file"
                and bool(app.screen.query("#deny"))
            ),
            timeout=20,
        )
        dialog = app.screen
        assert dialog.tool_name == "execute_bash" and not dialog.query("#allow_session")
        assert "not offered" in str(dialog.query_one("#approval-hint", Static).render())
        await pilot.press("s")  # the key does nothing either
        await pilot.pause()
        assert app.screen is dialog
        await pilot.press("d")
        await wait_for(
            pilot, lambda: app.turns.orchestrator is not None and not app.turns.busy, timeout=20
        )
    assert (project / "out.txt").read_text() == "ok" and not (project / "ran.txt").exists()


async def test_an_mcp_call_asks_with_server_tool_and_description_and_the_header_warns(
    project, monkeypatch, fake_llm
):
    """An MCP tool asks by default; the dialog names the server and the tool and shows
    the description; a server outside the sandbox is named in the header once started."""
    from tests.test_mcp import toy_table

    config = project / "mcp-config.toml"
    config.write_text(toy_table(extra="sandbox = false"))
    monkeypatch.setenv("SLOP_CONFIG", str(config))  # the fake_llm fixture cleared it
    monkeypatch.setenv("TOY_DESC", "Echo the text back.")
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("mcp__toy__echo", {"text": "from the ui"})]),
        Reply(text="done"),
    )
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        assert "mcp NO SANDBOX" not in app.sub_title  # nothing started before the turn
        await pilot.press(*"go", "enter")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, ApprovalScreen) and bool(app.screen.query("#deny")),
            timeout=120,
        )
        dialog = app.screen
        assert dialog.tool_name == "echo of MCP server 'toy'"
        assert dialog.arguments_text.startswith("[MCP server 'toy'] Echo the text back.")
        assert '"text": "from the ui"' in dialog.arguments_text
        assert "mcp NO SANDBOX: toy" in app.sub_title
        await click_when_shown(pilot, "#allow")
        await wait_for(
            pilot, lambda: app.turns.orchestrator is not None and not app.turns.busy, timeout=120
        )
    rows = json.dumps(fake_llm.last.body["messages"])
    assert "echo: from the ui" in rows
