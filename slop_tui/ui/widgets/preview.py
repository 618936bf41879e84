"""The context preview: the exact next request, layer by layer, or the provider's JSON.

A read-only `TextArea` renders only the visible lines, so a request of
100k tokens scrolls as smoothly as a short one. The text view is
`render_prompt(prompt)`, the same text `/context show` prints; the JSON view
is the body the provider adapter would send, which the app builds only when
someone asks for it (building it imports the provider's SDK).

`m`, `t`, `u` and `i` drop the repository map, the file tree, the URL pages or
the images from the requests, and bring them back: `/context drop|restore
LAYER`, run as if typed, so the panes and the gauge follow.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static, TextArea

from slop_tui.ui.text import neutralise
from slop_tui.ui.widgets.gauge import ESTIMATE_MARK

if TYPE_CHECKING:
    from slop_tui.context.prompt import Prompt

MODE_TEXT = "text"
MODE_JSON = "json"
# Soft-wrapping costs about 1.8 ms per 1,000 characters on every load (900 KB:
# 1.6 s, against 0.15 s unwrapped), so long requests start unwrapped; `w` toggles.
WRAP_LIMIT = 100_000


class _PreviewText(TextArea):
    """The preview's read-only text."""

    FOCUS_ON_CLICK = False  # a click selects or acts; the keyboard stays (ui/keyroute.py)


class ContextPreview(Widget):
    """What the model will see next; `j` switches to the provider JSON body and back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "toggle_json", "Text/JSON", id="preview_toggle_json"),
        Binding("w", "toggle_wrap", "Wrap", id="preview_toggle_wrap"),
        Binding(
            "m",
            "toggle_layer('repo_map')",
            "Drop/restore the map",
            id="preview_toggle_map",
            show=False,
        ),
        Binding(
            "t",
            "toggle_layer('file_tree')",
            "Drop/restore the tree",
            id="preview_toggle_tree",
            show=False,
        ),
        Binding(
            "u",
            "toggle_layer('urls')",
            "Drop/restore the pages",
            id="preview_toggle_urls",
            show=False,
        ),
        Binding(
            "i",
            "toggle_layer('images')",
            "Drop/restore the images",
            id="preview_toggle_images",
            show=False,
        ),
    ]

    DEFAULT_CSS = """
    ContextPreview { height: 1fr; }
    ContextPreview #preview-header { color: $text-muted; padding: 0 1; }
    ContextPreview #preview-text { height: 1fr; border: none; padding: 0 1; }
    """

    class JsonRequested(Message):
        """The JSON view is open and has no body for the current prompt: call `set_json`."""

        def __init__(self, preview: ContextPreview) -> None:
            super().__init__()
            self.preview = preview

        @property
        def control(self) -> ContextPreview:
            return self.preview

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.prompt: Prompt | None = None
        self.body: dict | None = None
        self.mode = MODE_TEXT
        self.estimated = False  # the prompt's counts are partly estimates (see the gauge)
        self.wrap: bool | None = None  # None: wrap texts up to WRAP_LIMIT characters
        self._shown = False
        self._stale = True

    def compose(self) -> ComposeResult:
        yield Static("", id="preview-header", markup=False)
        yield _PreviewText(
            "",
            id="preview-text",
            read_only=True,
            soft_wrap=False,
            show_line_numbers=False,
            highlight_cursor_line=False,
        )

    def on_mount(self) -> None:
        self._refresh_view(keep_scroll=False)

    # -- API ---------------------------------------------------------------

    def set_prompt(self, prompt: Prompt, *, estimated: bool = False) -> None:
        """Show a newly assembled request; a JSON body for the previous one is dropped.
        `estimated`: its counts are partly estimates (the header marks the total `≈`)."""
        self.prompt = prompt
        self.estimated = estimated
        self.body = None
        if self.mode == MODE_JSON:
            self.post_message(self.JsonRequested(self))
        self._refresh_view(keep_scroll=True)

    def set_json(self, body: dict) -> None:
        """The provider request body for the current prompt."""
        self.body = body
        if self.mode == MODE_JSON:
            self._refresh_view(keep_scroll=False)

    @property
    def text(self) -> str:
        """The text of the current view, even while hidden (for copying the whole context)."""
        return self._content()

    @property
    def soft_wrap(self) -> bool:
        return self.query_one(TextArea).soft_wrap

    def action_toggle_json(self) -> None:
        self.mode = MODE_JSON if self.mode == MODE_TEXT else MODE_TEXT
        if self.mode == MODE_JSON and self.body is None and self.prompt is not None:
            self.post_message(self.JsonRequested(self))
        self._refresh_view(keep_scroll=False)

    def dropped(self, layer: str) -> bool:
        """Whether the request shown left `layer` out by `/context drop LAYER`."""
        from slop_tui.workspace import dropped_note

        return self.prompt is not None and dropped_note(layer) in self.prompt.notes

    async def action_toggle_layer(self, layer: str) -> None:
        verb = "restore" if self.dropped(layer) else "drop"
        await self.app.run_command(f"/context {verb} {layer}")  # type: ignore[attr-defined]

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.soft_wrap
        self.query_one(TextArea).soft_wrap = self.wrap
        self._update_header()

    # -- drawing -----------------------------------------------------------

    def on_show(self) -> None:
        self._shown = True
        if self._stale:
            self._refresh_view(keep_scroll=True)

    def on_hide(self) -> None:
        self._shown = False

    def _refresh_view(self, *, keep_scroll: bool) -> None:
        # A hidden preview only remembers the prompt: loading a large request into
        # the TextArea costs far more than the key that changed it.
        if not self.is_mounted or not self._shown:
            self._stale = True
            return
        self._stale = False
        area = self.query_one(TextArea)
        text = neutralise(self._content(), crlf_as_newline=False)  # `.text` keeps the bytes
        if text != area.text:
            scroll = area.scroll_offset
            wrap = self.wrap if self.wrap is not None else len(text) <= WRAP_LIMIT
            if not wrap:
                area.soft_wrap = False  # before loading, so the old text is not re-wrapped
            elif area.size.height and text.count("\n") >= area.size.height:
                # More lines than rows: the scrollbar will show. Wrapped at the width it
                # leaves from the start, the request is not wrapped again when it shows.
                area.set_reactive(TextArea.show_vertical_scrollbar, True)
            area.load_text(text)
            area.soft_wrap = wrap
            if keep_scroll:
                area.call_after_refresh(area.scroll_to, scroll.x, scroll.y, animate=False)
            else:
                area.scroll_home(animate=False)
        self._update_header()

    def _content(self) -> str:
        prompt = self.prompt
        if self.mode == MODE_TEXT:
            from slop_tui.context.render import render_prompt

            return render_prompt(prompt) if prompt is not None else "(no request assembled yet)"
        if self.body is None:
            return "(building the provider request body…)"
        # Plain text on purpose: TextArea(language="json") segfaults the process with
        # tree-sitter 0.26.1 + tree-sitter-json 0.24.8 (javascript too).
        return json.dumps(self.body, indent=2, ensure_ascii=False) + "\n"

    def _update_header(self) -> None:
        prompt = self.prompt
        # The request's own count, as the gauge shows it: text and tool declarations.
        mark = ESTIMATE_MARK if self.estimated else ""
        tokens = f" · {mark}{prompt.request_tokens:,} tokens" if prompt is not None else ""
        view = "text · j JSON" if self.mode == MODE_TEXT else "JSON · j text"
        wrap = "w unwrap" if self.soft_wrap else "w wrap"
        self.query_one("#preview-header", Static).update(f"next request{tokens} · {view} · {wrap}")
