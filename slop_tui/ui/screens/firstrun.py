"""The first-run screen: how to configure a provider, or try the offline demo."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.widgets import Button, Markdown, Static

from slop_tui.ui.screens.base import DialogBox

FIRST_RUN = """\
# Welcome to slop-tui

No model is configured, so you are talking to the **offline demo**: a scripted
agent on 127.0.0.1 that streams text, calls real tools (lists this folder, reads
a file, queries its own history, updates the scratchpad) and ends with a STATE
block. Nothing leaves this machine.

To use a real model, quit (ctrl+q) and set one of:

| provider | environment |
|---|---|
| OpenAI | `OPENAI_API_KEY` (and optionally `OPENAI_MODEL`) |
| Ollama, vLLM, llama.cpp, OpenRouter | `OPENAI_BASE_URL` (+ `OPENAI_API_KEY`, `OPENAI_MODEL`) |
| Gemini | `GEMINI_API_KEY` or `GOOGLE_API_KEY` (and optionally `GEMINI_MODEL`) |

or add `[providers.NAME]` tables to `~/.config/slop-tui/config.toml`
(see docs/configuration.md). F1 lists every key; ctrl+p reaches every command.
"""


class FirstRunScreen(ModalScreen[None]):
    """Explains provider set-up and offers the demo."""

    HELP_TITLE = "First run"
    # Shown without being asked for: typing closes it and lands in the prompt behind
    # it, every key (ui/keyroute.py).
    CLOSES_ON_TYPING = True
    BINDINGS = [Binding("escape,enter", "dismiss_screen", "Try the demo", id="firstrun_close")]
    DEFAULT_CSS = """
    FirstRunScreen { align: center middle; }
    FirstRunScreen > DialogBox { width: 84; max-width: 95%; height: auto; max-height: 95%;
        border: thick $primary; background: $surface; padding: 0 2; }
    FirstRunScreen #firstrun-buttons { dock: bottom; height: auto; background: $surface;
        padding-top: 1; }
    FirstRunScreen #firstrun-hint { width: 1fr; color: $text-muted; padding-top: 1; }
    """

    def compose(self) -> ComposeResult:
        with DialogBox():  # the text scrolls when the screen is shorter than it
            # The button stays in sight at any height: docked under the text, with
            # a word on scrolling when the text does not fit.
            with Horizontal(id="firstrun-buttons"):
                yield Static("", id="firstrun-hint")
                yield Button("Try the demo", id="demo", variant="primary")
            yield Markdown(FIRST_RUN)

    def on_mount(self) -> None:
        # Focusing the button scrolled a short screen's box to its end: start at the top.
        box = self.query_one(DialogBox)
        self.call_after_refresh(box.scroll_home, animate=False)
        self.call_after_refresh(self._hint)

    def on_resize(self) -> None:
        self.call_after_refresh(self._hint)

    def _hint(self) -> None:
        box = self.query_one(DialogBox)
        more = box.max_scroll_y > 0
        self.query_one("#firstrun-hint", Static).update(
            "↓ / PgDn or the wheel: more below" if more else ""
        )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_dismiss_screen(self) -> None:
        self.dismiss(None)
