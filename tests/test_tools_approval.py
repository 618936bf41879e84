"""Tool declarations, approval decisions per policy, and the headless import rule."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slop_tui.context.prompt import ToolSpec
from slop_tui.tools import (
    DEFAULT_POLICY,
    KINDS,
    REGISTRY,
    Decision,
    all_tools,
    approval_decision,
    frame,
    get_tool,
    needs_approval,
    refused_result,
    registry_rows,
    tool_specs,
)
from tests.test_tools_support import EXPECTED

WRITES = {"write_file", "apply_patch"}
SHELL = {"execute_bash"}


def test_every_tool_declared_once_with_a_valid_schema() -> None:
    assert [t.name for t in all_tools()] == EXPECTED
    for t in all_tools():
        assert t.kind in KINDS and t.description
        assert t.parameters["type"] == "object"
        for req in t.parameters.get("required", []):
            assert req in t.parameters["properties"]
        for prop in t.parameters["properties"].values():
            assert prop["type"] in {"string", "integer", "number", "array", "object"}
    assert {t.name for t in all_tools() if t.kind == "write"} == WRITES
    assert {t.name for t in all_tools() if t.kind == "shell"} == SHELL
    assert get_tool("read_file") is REGISTRY["read_file"] and get_tool("nope") is None


def test_specs_and_registry_rows() -> None:
    specs = tool_specs()
    assert all(isinstance(s, ToolSpec) for s in specs)
    assert [s.name for s in specs] == EXPECTED
    assert [s.name for s in tool_specs({"grep", "read_file"})] == ["read_file", "grep"]
    rows = registry_rows()
    assert [r[0] for r in rows] == EXPECTED
    for name, desc, schema in rows:
        assert json.loads(schema) == REGISTRY[name].parameters and desc


def test_frame() -> None:
    assert frame("x", "body") == "### TOOL_RESULT: x\nbody\n\n---"


# --- approvals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "kind_decisions"),
    [
        ("none", {"read": "allow", "write": "deny", "shell": "deny", "network": "deny"}),
        ("reads", {"read": "allow", "write": "ask", "shell": "ask", "network": "ask"}),
        ("all", {"read": "allow", "write": "allow", "shell": "allow", "network": "allow"}),
    ],
)
def test_approval_decisions_per_policy(policy: str, kind_decisions: dict[str, str]) -> None:
    for t in all_tools():
        decision = approval_decision(t, policy, set())
        assert isinstance(decision, Decision)
        assert decision == kind_decisions[t.kind], (t.name, policy)
        assert approval_decision(t.name, policy) == decision
        assert needs_approval(t, policy) is (decision != "allow")


def test_session_allowance_only_answers_ask() -> None:
    assert approval_decision("write_file", "reads", {"write_file"}) is Decision.ALLOW
    assert approval_decision("execute_bash", "reads", {"write_file"}) is Decision.ASK
    assert approval_decision("write_file", "none", {"write_file"}) is Decision.DENY
    assert DEFAULT_POLICY == "reads"
    assert approval_decision("no_such_tool", "none") is Decision.ALLOW  # run_tool reports it
    with pytest.raises(ValueError, match="unknown approval policy"):
        approval_decision("read_file", "some")


def test_refused_result() -> None:
    result = refused_result("execute_bash", "--approve none runs only read tools")
    assert not result.ok
    assert result.text == (
        "### TOOL_RESULT: execute_bash\nError: execute_bash was not run: --approve none runs "
        "only read tools. Do not retry it; ask the user or use another way.\n\n---"
    )


def test_tools_are_headless() -> None:
    code = (
        "import sys, slop_tui.tools\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'openai', 'google')]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
