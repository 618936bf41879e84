"""The context engine: pure functions from ledger records to a `Prompt`.

No I/O, no SDK, no Textual. See docs/context.md. The names below are the
engine's public surface; the submodules hold the details.
"""

from slop_tui.context.anchors import extract_scratchpad_signal, extract_state
from slop_tui.context.assemble import AssemblyInputs, ContextSettings, assemble
from slop_tui.context.isolation import isolate
from slop_tui.context.memos import extract_keywords, rank_memos, tag_matches
from slop_tui.context.render import render_prompt
from slop_tui.context.tiers import TruncationSettings, apply_tiers, truncate
from slop_tui.context.window import groups_in, select_window

__all__ = [
    "AssemblyInputs",
    "ContextSettings",
    "TruncationSettings",
    "apply_tiers",
    "assemble",
    "extract_keywords",
    "extract_scratchpad_signal",
    "extract_state",
    "groups_in",
    "isolate",
    "rank_memos",
    "render_prompt",
    "select_window",
    "tag_matches",
    "truncate",
]
