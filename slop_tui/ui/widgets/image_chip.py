"""An image attached to a prompt, as its group shows it: a labelled chip (name, size in
pixels and bytes, the tokens the current provider bills for it) and, where the
terminal draws pixels, a thumbnail.

The thumbnail is textual-image's widget. It needs to know what the terminal can
draw, and the only way to know is to ask the terminal, which must happen before
Textual takes the terminal over. So `graphics()` decides once, at import (the
conversation imports this module with the app, before it runs): only when the
environment names a terminal known to draw pixels (kitty, WezTerm, iTerm2,
Ghostty, foot, Konsole, mlterm, contour) is textual-image asked, and only its
Sixel and Terminal Graphics Protocol renderers count; its half-cell and
Unicode fallbacks are a blur at thumbnail size, so every other terminal gets
the chip alone. `SLOP_TUI_IMAGES=off` turns the thumbnail off anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.containers import Horizontal
from textual.widgets import Static

from slop_tui.images import image_tokens, size_text
from slop_tui.records import ImageRef
from slop_tui.safe_text import neutralise

_PIXEL_TERMINALS = ("kitty", "wezterm", "iterm", "ghostty", "foot", "konsole", "mlterm", "contour")


def _named_pixel_terminal(env: os._Environ[str] | dict[str, str]) -> bool:
    if env.get("SLOP_TUI_IMAGES", "").lower() in ("off", "0", "no", "false"):
        return False
    if env.get("KITTY_WINDOW_ID") or env.get("KONSOLE_VERSION") or env.get("WEZTERM_PANE"):
        return True
    names = f"{env.get('TERM', '')} {env.get('TERM_PROGRAM', '')} {env.get('LC_TERMINAL', '')}"
    return any(t in names.lower() for t in _PIXEL_TERMINALS)


def _detect() -> type | None:
    """textual-image's widget class for this terminal, or None (see the docstring)."""
    if not _named_pixel_terminal(os.environ):
        return None
    try:
        from textual_image.renderable import Image as chosen
        from textual_image.renderable.sixel import Image as Sixel
        from textual_image.renderable.tgp import Image as Tgp
        from textual_image.widget import Image as Widget
    except Exception:  # noqa: BLE001 -- a terminal that cannot be asked draws no pixels
        return None
    return Widget if chosen in (Sixel, Tgp) else None


_THUMBNAIL = _detect()


def graphics() -> bool:
    """Whether this terminal shows thumbnails."""
    return _THUMBNAIL is not None


def chip_text(ref: ImageRef, strategy: str) -> str:
    """`▣ shot.png · 1024×768 · 240 KB · 765 tokens` (the tokens for `strategy`)."""
    tokens = image_tokens(ref.width, ref.height, strategy)
    return (
        f"▣ {neutralise(ref.name)} · {ref.width}×{ref.height} · {size_text(ref.size)}"
        f" · {tokens:,} tokens"
    )


class ImageChip(Horizontal):
    """One attached image: the thumbnail (where the terminal draws pixels), the label."""

    DEFAULT_CSS = """
    ImageChip { height: auto; width: auto; margin: 0 1; padding: 0 1; background: $boost; }
    ImageChip > .image-label { width: auto; color: $text-muted; }
    ImageChip > .image-thumb { width: 16; height: 5; margin-right: 1; }
    """

    def __init__(self, ref: ImageRef, file: Path | None, strategy: str) -> None:
        super().__init__(classes="image-chip")
        self.ref = ref
        self.file = file
        self.strategy = strategy
        self.label = Static(chip_text(ref, strategy), markup=False, classes="image-label")

    def compose(self):
        if _THUMBNAIL is not None and self.file is not None and self.file.is_file():
            yield _THUMBNAIL(self.file, classes="image-thumb")
        yield self.label

    def set_strategy(self, strategy: str) -> None:
        """Show the tokens another provider bills (after a provider switch)."""
        if strategy != self.strategy:
            self.strategy = strategy
            self.label.update(chip_text(self.ref, strategy))
