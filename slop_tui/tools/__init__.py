"""The agent's tools: one declaration per tool gives its schema and its code.

Headless: nothing here imports Textual or a provider SDK. The orchestrator
asks `approval_decision` first, then awaits `run_tool`, which always returns
a framed `ToolResult` (`### TOOL_RESULT: <name>` ... `---`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slop_tui.lazy import lazy_exports

if TYPE_CHECKING:
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

# The names are resolved lazily (PEP 562): a tool's module (the sandbox, probed for
# the app's header before its first frame) is imported without every tool.
# public name -> the submodule that defines it
_SOURCES: dict[str, str] = {
    "DEFAULT_POLICY": "approval",
    "POLICIES": "approval",
    "Decision": "approval",
    "approval_decision": "approval",
    "needs_approval": "approval",
    "refused_result": "approval",
    "KIND_NETWORK": "base",
    "KIND_READ": "base",
    "KIND_SHELL": "base",
    "KIND_WRITE": "base",
    "KINDS": "base",
    "Tool": "base",
    "ToolContext": "base",
    "ToolError": "base",
    "ToolResult": "base",
    "frame": "base",
    "ACTIVE_SKILLS_KEY": "knowledge",
    "active_skills": "knowledge",
    "REGISTRY": "registry",
    "all_tools": "registry",
    "get_tool": "registry",
    "registry_rows": "registry",
    "run_tool": "registry",
    "tool_specs": "registry",
}


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())


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
