"""The context engine: pure functions from ledger records to a `Prompt`.

No I/O, no SDK, no Textual. See docs/context.md. The names below are the
engine's public surface; the submodules hold the details.

The names are resolved lazily (PEP 562): importing one submodule (the UI
needs `context.tiers` to label a tool block) must not import the whole
engine, which costs about 0.1 s on the app's start path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slop_tui.lazy import lazy_exports

# `assemble` is both a submodule and its main function; importing the submodule
# binds the package attribute `assemble` to the module, so the package does not
# re-export the function (that would import the whole engine here): it is
# `slop_tui.context.assemble.assemble`.

# public name -> the submodule that defines it
_SOURCES: dict[str, str] = {
    "extract_scratchpad_signal": "anchors",
    "extract_state": "anchors",
    "AssemblyInputs": "assemble",
    "ContextSettings": "assemble",
    "focus_note": "assemble",
    "BudgetReport": "budget",
    "CompactionSettings": "budget",
    "ModelInfo": "budget",
    "budget_report": "budget",
    "model_info": "budget",
    "SAFE_BOUNDARY": "compaction",
    "CompactionDecision": "compaction",
    "TopicBoundary": "compaction",
    "boundary_request": "compaction",
    "decide": "compaction",
    "parse_boundary": "compaction",
    "should_compact": "compaction",
    "truncate_summary": "compaction",
    "GuardPlan": "guards",
    "GuardStep": "guards",
    "apply_plan": "guards",
    "plan_reduction": "guards",
    "isolate": "isolation",
    "LAYOUTS": "layout",
    "longest_common_prefix": "layout",
    "serialize_request": "layout",
    "extract_keywords": "memos",
    "rank_memos": "memos",
    "tag_matches": "memos",
    "contains_secret": "redact",
    "redact_secrets": "redact",
    "render_prompt": "render",
    "clean_summary": "summaries",
    "complete_summary": "summaries",
    "extract_anchors": "summaries",
    "extractive_summary": "summaries",
    "standalone_summary_request": "summaries",
    "summary_anchors": "summaries",
    "summary_request": "summaries",
    "TruncationSettings": "tiers",
    "apply_tiers": "tiers",
    "truncate": "tiers",
    "groups_in": "window",
    "select_window": "window",
}


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())


if TYPE_CHECKING:
    from slop_tui.context.anchors import extract_scratchpad_signal, extract_state
    from slop_tui.context.assemble import AssemblyInputs, ContextSettings, focus_note
    from slop_tui.context.budget import (
        BudgetReport,
        CompactionSettings,
        ModelInfo,
        budget_report,
        model_info,
    )
    from slop_tui.context.compaction import (
        SAFE_BOUNDARY,
        CompactionDecision,
        TopicBoundary,
        boundary_request,
        decide,
        parse_boundary,
        should_compact,
        truncate_summary,
    )
    from slop_tui.context.guards import GuardPlan, GuardStep, apply_plan, plan_reduction
    from slop_tui.context.isolation import isolate
    from slop_tui.context.layout import LAYOUTS, longest_common_prefix, serialize_request
    from slop_tui.context.memos import extract_keywords, rank_memos, tag_matches
    from slop_tui.context.redact import contains_secret, redact_secrets
    from slop_tui.context.render import render_prompt
    from slop_tui.context.summaries import (
        clean_summary,
        complete_summary,
        extract_anchors,
        extractive_summary,
        standalone_summary_request,
        summary_anchors,
        summary_request,
    )
    from slop_tui.context.tiers import TruncationSettings, apply_tiers, truncate
    from slop_tui.context.window import groups_in, select_window

__all__ = [
    "LAYOUTS",
    "SAFE_BOUNDARY",
    "AssemblyInputs",
    "BudgetReport",
    "CompactionDecision",
    "CompactionSettings",
    "ContextSettings",
    "GuardPlan",
    "GuardStep",
    "ModelInfo",
    "TopicBoundary",
    "TruncationSettings",
    "apply_plan",
    "apply_tiers",
    "boundary_request",
    "budget_report",
    "clean_summary",
    "complete_summary",
    "contains_secret",
    "decide",
    "extract_anchors",
    "extract_keywords",
    "extract_scratchpad_signal",
    "extract_state",
    "extractive_summary",
    "focus_note",
    "groups_in",
    "isolate",
    "longest_common_prefix",
    "model_info",
    "parse_boundary",
    "plan_reduction",
    "rank_memos",
    "redact_secrets",
    "render_prompt",
    "select_window",
    "serialize_request",
    "should_compact",
    "standalone_summary_request",
    "summary_anchors",
    "summary_request",
    "tag_matches",
    "truncate",
    "truncate_summary",
]
