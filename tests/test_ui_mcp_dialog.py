"""The palette's "MCP servers…" dialog: every configured server with its state, and
restart / enable / disable, each the `/mcp` command it stands for."""

from __future__ import annotations

from slop_tui.ui.screens.mcp import McpScreen
from tests import test_app
from tests.fakeserver import wait_for
from tests.test_app import started
from tests.test_app_actions import SIZE, make_app, palette
from tests.test_mcp import toy_table

project = test_app.project


async def test_the_mcp_dialog_lists_the_servers_and_disables_one(project, monkeypatch):
    config = project / "mcp-config.toml"
    config.write_text(toy_table() + toy_table(name="other"))
    monkeypatch.setenv("SLOP_CONFIG", str(config))
    monkeypatch.setenv("TOY_DESC", "Echo.")
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await palette(pilot, "MCP servers")
        await wait_for(pilot, lambda: isinstance(app.screen, McpScreen))
        dialog = app.screen
        assert [name for name, _state, _error in dialog.rows] == ["toy", "other"]
        await pilot.press("down", "ctrl+d")  # the second server
        await wait_for(pilot, lambda: not isinstance(app.screen, McpScreen))
        await wait_for(pilot, lambda: any("other" in n.message for n in app._notifications))
        listed = await app.turns.execute("/mcp list")
        row = next(line for line in listed.text.splitlines() if line.startswith("| other"))
        assert "disabled" in row, row
        # Escape closes it and runs nothing.
        await palette(pilot, "MCP servers")
        await wait_for(pilot, lambda: isinstance(app.screen, McpScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, McpScreen))


async def test_without_servers_the_palette_says_how_to_add_one(project):
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await palette(pilot, "MCP servers")
        await wait_for(pilot, lambda: any("[mcp.servers" in n.message for n in app._notifications))
        assert not isinstance(app.screen, McpScreen)
