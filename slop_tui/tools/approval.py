"""Which tool calls may run without asking the user.

Policies (`--approve`, default `reads`):
- `none`: nothing is approved automatically and nobody is asked: read tools
  run, every write and shell call is refused (headless, untrusted tasks);
- `reads`: read tools run freely; write and shell calls need the user's
  approval (the TUI asks; "allow for this session" adds the tool's name to
  `session_allowed`). Headless has nobody to ask, so it refuses them;
- `all`: everything runs.

A tool's kind is its approval class, not whether it writes somewhere: the
ledger-only tools (scratchpad, memos, skills) are "read" because they only
change the agent's own notes.

Without an OS sandbox for the shell (`sandbox.py`), every shell call asks,
whatever the policy and whatever was allowed for the session (`all` and
"allow for this session" do not lift it; `none` still refuses).
"""

from __future__ import annotations

from collections.abc import Set
from enum import StrEnum

from slop_tui.tools.base import KIND_READ, KIND_SHELL, Tool, ToolResult, error_result
from slop_tui.tools.registry import get_tool

POLICY_NONE = "none"
POLICY_READS = "reads"
POLICY_ALL = "all"
POLICIES = (POLICY_NONE, POLICY_READS, POLICY_ALL)
DEFAULT_POLICY = POLICY_READS


class Decision(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


def approval_decision(
    tool: Tool | str,
    policy: str,
    session_allowed: Set[str] = frozenset(),
    *,
    sandboxed: bool = True,
) -> Decision:
    """allow, ask or deny one call of `tool` under `policy`.

    An unknown tool name is allowed: it cannot do anything, and `run_tool`
    answers it with an "unknown tool" error the model can learn from.
    `sandboxed`: whether shell commands run in the OS sandbox.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown approval policy {policy!r}; use one of {', '.join(POLICIES)}")
    found = get_tool(tool) if isinstance(tool, str) else tool
    if found is None or found.kind == KIND_READ:
        return Decision.ALLOW
    if not session_allow_applies(found, sandboxed=sandboxed):
        return Decision.DENY if policy == POLICY_NONE else Decision.ASK
    if policy == POLICY_ALL:
        return Decision.ALLOW
    if policy == POLICY_NONE:
        return Decision.DENY
    return Decision.ALLOW if found.name in session_allowed else Decision.ASK


def session_allow_applies(tool: Tool | str, *, sandboxed: bool) -> bool:
    """Whether "always this session" (or `all`) can spare the user the question for
    `tool`: not for the shell without a sandbox, which asks before every command."""
    found = get_tool(tool) if isinstance(tool, str) else tool
    return found is None or found.kind != KIND_SHELL or sandboxed


def needs_approval(tool: Tool | str, policy: str) -> bool:
    """Whether a call cannot run without an explicit yes (ask) or cannot run at all (deny)."""
    return approval_decision(tool, policy) is not Decision.ALLOW


def refused_result(name: str, reason: str = "") -> ToolResult:
    """The result recorded and sent to the model when a call is not approved."""
    why = reason or "the user did not approve it"
    return error_result(
        name, f"{name} was not run: {why}. Do not retry it; ask the user or use another way."
    )
