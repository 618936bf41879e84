"""The TUI's view of the one neutraliser (`slop_tui/safe_text.py`, headless: the
command line uses it too)."""

from slop_tui.safe_text import UNSAFE_CODEPOINTS, has_unsafe, neutralise, neutralise_cells

__all__ = ["UNSAFE_CODEPOINTS", "has_unsafe", "neutralise", "neutralise_cells"]
