"""The token gauge: layer split, thresholds, sparkline, projection and cached tokens."""

from __future__ import annotations

from textual import events
from textual.app import App, ComposeResult
from textual.widgets import Sparkline, Static

from slop_tui.context.plan import ContextPlan
from slop_tui.context.prompt import Layer, Prompt, PromptMessage, ToolSpec
from slop_tui.ui.widgets.gauge import (
    FILL,
    FREE,
    GaugeBar,
    TokenGauge,
    bar_cells,
    read_plan,
)

TOOL = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {}}})


def prompt_of(history: int, system: int = 1000, tools: tuple[ToolSpec, ...] = ()) -> ContextPlan:
    """A plan that sends this request (the gauge draws a plan's counts)."""
    prompt = Prompt(
        layers=(
            Layer("system", "You help.\n", system),
            Layer("guidelines", "g\n", 100),
            Layer("state", "### STATE\n", 200),
            Layer("scratchpad", "- todo\n", 300),
            Layer("memos", "m\n", 400),
        ),
        messages=(
            PromptMessage("user", "hi", history // 2, message_id=1, group_id=1),
            PromptMessage("assistant", "hello", history - history // 2, message_id=2, group_id=1),
        ),
        tools=tools,
        tool_tokens=90 * len(tools),
    )
    return ContextPlan(
        request=prompt,
        assembled=prompt,
        guard=None,
        lane="main",
        window_size=5,
        window_groups=frozenset({1}),
        window_start=1,
        head=None,
        compaction_enabled=True,
        waiting=False,
        summary_due=False,
        due_reason="",
        pending_tokens=0,
        pending_messages=0,
    )


class GaugeApp(App):
    def compose(self) -> ComposeResult:
        yield TokenGauge()


def test_layer_split_is_the_plans_and_sums_to_the_request():
    plan = prompt_of(5000, tools=(TOOL,))
    reading = read_plan(plan, 100_000)
    names = [name for name, _ in reading.layers]
    assert names == ["system", "guidelines", "state", "scratchpad", "memos", "history", "tools"]
    layers = dict(reading.layers)
    assert layers["history"] == 5000
    assert layers["tools"] == plan.request.tool_tokens == 90  # the engine's count, not a guess
    assert reading.total == sum(layers.values()) == plan.request_tokens


def test_bar_cells_add_up_and_keep_small_layers_visible():
    layers = [("system", 1000), ("state", 10), ("history", 60_000), ("tools", 0)]
    cells = bar_cells(layers, 100_000, 40)
    assert sum(c for _, c in cells) == round(61_010 * 40 / 100_000)
    assert dict(cells)["state"] == 1 and dict(cells)["tools"] == 0
    # Over the window: the bar is full, scaled to the total.
    assert sum(c for _, c in bar_cells(layers, 61_010, 40)) == 40


async def test_threshold_classes_at_79_80_and_90_percent():
    app = GaugeApp()
    async with app.run_test(size=(50, 20)) as pilot:
        gauge = app.query_one(TokenGauge)
        base = prompt_of(0).request_tokens
        expected = {79: (False, False), 80: (True, False), 89: (True, False), 90: (False, True)}
        for percent, (warning, critical) in expected.items():
            gauge.update_from(prompt_of(percent * 1000 - base), 100_000)
            await pilot.pause()
            assert gauge.reading.total == percent * 1000
            assert gauge.has_class("-warning") is warning, percent
            assert gauge.has_class("-critical") is critical, percent
        total = str(app.query_one("#gauge-total", Static).render())
        assert "90,000 / 100,000 tokens · 90.0 %" in total


async def test_bar_legend_sparkline_and_cached_line():
    app = GaugeApp()
    async with app.run_test(size=(50, 20)) as pilot:
        gauge = app.query_one(TokenGauge)
        gauge.update_from(prompt_of(20_000, tools=(TOOL,)), 50_000, [100, 900, 400], cached=300)
        await pilot.pause()
        bar = app.query_one(GaugeBar)
        lines = str(bar.render()).splitlines()
        assert len(lines[0]) == bar.size.width
        used = lines[0].count(FILL)
        assert used == round(gauge.reading.total * bar.size.width / 50_000)
        assert lines[0].count(FREE) == bar.size.width - used
        legend = " ".join(lines[1:])
        for label in (
            "system 1.0k",
            "STATE 200",
            "scratchpad 300",
            "memos 400",
            "history 20k",
            "tools",
        ):
            assert label in legend
        assert app.query_one(Sparkline).data == [100, 900, 400]
        assert "last 400 · max 900" in str(app.query_one("#gauge-series", Static).render())
        cached = app.query_one("#gauge-cached", Static)
        # The share is of the last call's prompt (the series' last value); at 50 columns
        # the line takes its short form rather than wrap.
        assert str(cached.render()) == "cached last call: 300 (75 %)"
        await pilot.resize_terminal(80, 20)
        await pilot.pause()
        assert str(cached.render()) == "cached in the last call: 300 tokens (75 % of its prompt)"
        background = app.query_one("#gauge-background", Static)
        assert not background.display  # no background call yet
        gauge.update_from(prompt_of(20_000), 50_000, [], background=(3, 4_200))
        await pilot.pause()
        assert not cached.display
        assert background.display and "3 · 4.2k tokens" in str(background.render())
        assert "no calls yet" in str(app.query_one("#gauge-series", Static).render())


async def test_projection_line():
    app = GaugeApp()
    async with app.run_test(size=(60, 20)) as pilot:
        gauge = app.query_one(TokenGauge)
        gauge.update_from(prompt_of(48_000), 100_000)  # 50,000 tokens
        line = app.query_one("#gauge-projection", Static)
        assert str(line.render()) == ""
        gauge.set_projection(10_000, "drop")
        await pilot.pause()
        assert line.display and str(line.render()) == "drop: −10,000 tokens → 40.0 %"
        gauge.set_projection(-5_000, "restore")
        assert str(line.render()) == "restore: +5,000 tokens → 55.0 %"
        # The verb is what the key does, whatever the sign: a drop that lets a larger
        # group slide into the window adds tokens.
        gauge.set_projection(-700, "drop")
        assert str(line.render()) == "drop: +700 tokens → 50.7 %"
        gauge.set_projection(0, "restore")
        assert str(line.render()) == "restore: no change to the next request"
        gauge.set_projection(None)
        assert str(line.render()) == ""


async def test_an_estimated_total_is_marked_until_it_is_exact():
    app = GaugeApp()
    async with app.run_test(size=(60, 20)) as pilot:
        gauge = app.query_one(TokenGauge)
        total = app.query_one("#gauge-total", Static)
        gauge.update_from(prompt_of(48_000), 100_000, estimated=True)
        await pilot.pause()
        assert str(total.render()) == "≈50,000 / 100,000 tokens · 50.0 %"
        assert total.tooltip and "first submit" in str(total.tooltip)
        gauge.update_from(prompt_of(48_000), 100_000)
        await pilot.pause()
        assert str(total.render()) == "50,000 / 100,000 tokens · 50.0 %"
        assert total.tooltip is None


async def test_a_resize_that_keeps_the_width_draws_nothing_again():
    """The side panes are laid out before they are filled, and that layout's resize
    reaches the gauge after the fill: it must not draw (and lay the screen out) again
    for the same lines. A new width fits the lines again."""
    app = GaugeApp()
    async with app.run_test(size=(50, 20)) as pilot:
        gauge = app.query_one(TokenGauge)
        gauge.update_from(prompt_of(20_000), 50_000, [100, 300], cached=300)
        await pilot.pause()
        shown: list[object] = []
        bar = app.query_one(GaugeBar)
        real_show = bar.show
        bar.show = lambda reading: (shown.append(reading), real_show(reading))[1]
        gauge.post_message(events.Resize(gauge.size, gauge.size))
        await pilot.pause()
        assert shown == []
        cached = app.query_one("#gauge-cached", Static)
        assert str(cached.render()) == "cached last call: 300 (100 %)"
        await pilot.resize_terminal(80, 20)
        await pilot.pause()
        assert shown  # drawn again at its new width
        assert str(cached.render()) == "cached in the last call: 300 tokens (100 % of its prompt)"
