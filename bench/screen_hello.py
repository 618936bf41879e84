"""The floor any Textual app pays: a Header, one Static and a Footer.

bench/screen.py starts this beside `slop-tui`, the same way and in the same run,
and divides by its start-up time.
"""

from textual.app import App, ComposeResult
from textual.widgets import Footer, Header, Static

MARKER = "hello-world-marker"


class Hello(App):
    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"Hello, world. {MARKER}")
        yield Footer()


if __name__ == "__main__":
    Hello().run()
