"""The context preview: the rendered request, and the provider JSON behind `j`."""

from __future__ import annotations

import json

from textual.app import App, ComposeResult
from textual.widgets import Static, TextArea

from slop_tui.context.prompt import Layer, Prompt, PromptMessage
from slop_tui.context.render import render_prompt
from slop_tui.context.tokens import get_encoding
from slop_tui.ui.widgets.preview import MODE_JSON, MODE_TEXT, WRAP_LIMIT, ContextPreview

PROMPT = Prompt(
    layers=(Layer("system", "You help.\n", 12), Layer("state", "### STATE\ngoal: ship\n", 7)),
    messages=(
        PromptMessage("user", "read the file", 4, message_id=1, group_id=1),
        PromptMessage(
            "tool",
            "x" * 40,
            10,
            message_id=3,
            group_id=1,
            tool_name="read_file",
            tool_call_id="c1",
            tier="degraded",
            truncated=True,
        ),
    ),
)
BODY = {"model": "demo", "messages": [{"role": "system", "content": "You help."}]}


class PreviewApp(App):
    def __init__(self) -> None:
        super().__init__()
        self.json_requests = 0

    def compose(self) -> ComposeResult:
        yield ContextPreview()

    def on_context_preview_json_requested(self, message: ContextPreview.JsonRequested) -> None:
        self.json_requests += 1
        message.preview.set_json(BODY)


async def test_shows_the_rendered_prompt_layer_by_layer():
    # A layer's figure is exact once the o200k encoding is built (≈ before): build it
    # here, so the figure does not depend on which test ran before in this process.
    assert get_encoding() is not None
    app = PreviewApp()
    async with app.run_test(size=(80, 30)) as pilot:
        preview = app.query_one(ContextPreview)
        preview.set_prompt(PROMPT)
        await pilot.pause()
        area = app.query_one(TextArea)
        assert area.read_only and area.text == render_prompt(PROMPT)
        assert "--- layer: state · 7 tokens ---" in area.text
        assert "tier degraded, truncated" in area.text
        assert "33 tokens" in str(app.query_one("#preview-header", Static).render())


async def test_j_toggles_the_provider_json_and_back():
    app = PreviewApp()
    async with app.run_test(size=(80, 30)) as pilot:
        preview = app.query_one(ContextPreview)
        preview.set_prompt(PROMPT)
        app.query_one(TextArea).focus()  # the key works from inside the text view
        await pilot.press("j")
        await pilot.pause()
        area = app.query_one(TextArea)
        assert preview.mode == MODE_JSON and app.json_requests == 1
        assert json.loads(area.text) == BODY
        # A new prompt makes the body stale: the preview asks for a fresh one.
        preview.set_prompt(PROMPT)
        await pilot.pause()
        assert app.json_requests == 2 and json.loads(area.text) == BODY
        await pilot.press("j")
        assert preview.mode == MODE_TEXT and area.text == render_prompt(PROMPT)
        # Back to JSON with a body already loaded: nothing to request.
        await pilot.press("j")
        assert app.json_requests == 2 and json.loads(preview.text) == BODY


async def test_binding_has_an_id_for_the_keymap():
    ids = {b.id for b in ContextPreview.BINDINGS}
    assert {"preview_toggle_json", "preview_toggle_wrap"} <= ids


async def test_long_requests_start_unwrapped_and_w_toggles_wrapping():
    big = Prompt(
        layers=(Layer("system", "s\n", 1),),
        messages=(PromptMessage("user", "word " * (WRAP_LIMIT // 5 + 10), 9, message_id=1),),
    )
    app = PreviewApp()
    async with app.run_test(size=(80, 30)) as pilot:
        preview = app.query_one(ContextPreview)
        preview.set_prompt(PROMPT)
        await pilot.pause()
        assert preview.soft_wrap
        preview.set_prompt(big)
        await pilot.pause()
        assert not preview.soft_wrap
        preview.focus()
        await pilot.press("w")
        assert preview.soft_wrap and preview.wrap is True
        assert "w unwrap" in str(app.query_one("#preview-header", Static).render())


async def test_a_hidden_preview_loads_the_prompt_when_shown():
    app = PreviewApp()
    async with app.run_test(size=(80, 30)) as pilot:
        preview = app.query_one(ContextPreview)
        await pilot.pause()
        preview.display = False
        await pilot.pause()
        preview.set_prompt(PROMPT)
        await pilot.pause()
        area = app.query_one(TextArea)
        assert area.text != render_prompt(PROMPT)  # not loaded while hidden
        assert preview.text == render_prompt(PROMPT)  # but copying gets it
        preview.display = True
        await pilot.pause()
        await pilot.pause()
        assert area.text == render_prompt(PROMPT)


class WrapApp(App):
    def compose(self) -> ComposeResult:
        yield TextArea(("word " * 400 + "\n") * 50, soft_wrap=True, read_only=True)


async def test_a_height_change_keeps_the_wrap_a_width_change_rewraps():
    from slop_tui.ui import textual_fixes

    textual_fixes.install()
    app = WrapApp()
    async with app.run_test(size=(80, 30)) as pilot:
        area = app.query_one(TextArea)
        area.styles.width = 60
        area.styles.height = 20
        await pilot.pause()
        wrapped = area.wrapped_document
        calls: list[int] = []
        original = wrapped.wrap

        def counting(width, tab_width=None):
            calls.append(width)
            original(width, tab_width)

        wrapped.wrap = counting
        tall = wrapped.height
        area.styles.height = 10  # the viewport only: the wrap stays
        await pilot.pause()
        assert calls == [] and wrapped.height == tall
        assert area.virtual_size.height == tall
        area.styles.width = 40  # narrower: wrapped again, into more lines
        await pilot.pause()
        assert calls and calls[-1] == area.wrap_width
        assert wrapped.height > tall and area.virtual_size.height == wrapped.height


async def test_a_request_longer_than_the_pane_is_wrapped_once():
    """More lines than rows: wrapped at the width the scrollbar leaves from the start,
    not first at the whole width and again when the scrollbar shows."""
    from textual.document._wrapped_document import WrappedDocument

    long = Prompt(
        layers=(Layer("system", "s\n", 1),),
        messages=tuple(
            PromptMessage("user", f"line {i} " + "word " * 30, 9, message_id=i) for i in range(80)
        ),
    )
    widths: list[int] = []
    wrap = WrappedDocument.wrap

    def recording(self, width, tab_width=4):  # type: ignore[no-untyped-def]
        if self.document.line_count > 100:
            widths.append(width)
        return wrap(self, width, tab_width)

    app = PreviewApp()
    async with app.run_test(size=(60, 20)) as pilot:
        preview = app.query_one(ContextPreview)
        await pilot.pause()
        WrappedDocument.wrap = recording  # type: ignore[method-assign]
        try:
            preview.set_prompt(long)
            await pilot.pause(0.2)
        finally:
            WrappedDocument.wrap = wrap  # type: ignore[method-assign]
        area = app.query_one(TextArea)
        assert area.show_vertical_scrollbar and area.text == render_prompt(long)
        assert [w for w in widths if w] == [area.wrap_width]
