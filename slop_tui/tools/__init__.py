"""The agent's tools: one declaration per tool gives its schema and its code.

Headless: nothing here imports Textual or a provider SDK. The orchestrator
asks `approval_decision` first, then awaits `run_tool`, which always returns
a framed `ToolResult` (`### TOOL_RESULT: <name>` ... `---`).
"""

from __future__ import annotations

from slop_tui.tools.approval import (
    DEFAULT_POLICY,
    POLICIES,
    Decision,
    approval_decision,
    needs_approval,
    refused_result,
)
from slop_tui.tools.base import (
    KIND_NETWORK,
    KIND_READ,
    KIND_SHELL,
    KIND_WRITE,
    KINDS,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    frame,
)
from slop_tui.tools.knowledge import ACTIVE_SKILLS_KEY, active_skills
from slop_tui.tools.registry import (
    REGISTRY,
    all_tools,
    get_tool,
    registry_rows,
    run_tool,
    tool_specs,
)

__all__ = [
    "ACTIVE_SKILLS_KEY",
    "DEFAULT_POLICY",
    "KINDS",
    "KIND_NETWORK",
    "KIND_READ",
    "KIND_SHELL",
    "KIND_WRITE",
    "POLICIES",
    "REGISTRY",
    "Decision",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "active_skills",
    "all_tools",
    "approval_decision",
    "frame",
    "get_tool",
    "needs_approval",
    "refused_result",
    "registry_rows",
    "run_tool",
    "tool_specs",
]
