"""The context engine: pure functions from ledger records to a `Prompt`.

No I/O, no SDK, no Textual. See docs/context.md. The names below are the
engine's public surface; the submodules hold the details.
"""

from slop_tui.context.anchors import extract_scratchpad_signal, extract_state
from slop_tui.context.assemble import AssemblyInputs, ContextSettings, assemble, focus_note
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
    lane_summary_due,
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
    "assemble",
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
    "lane_summary_due",
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
