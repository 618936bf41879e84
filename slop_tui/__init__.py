"""slop-tui: a terminal workspace for long LLM tasks."""

__version__ = "0.1.0"
