"""The context engine is pure: importing it pulls in no I/O layer, SDK or UI."""

from __future__ import annotations

import subprocess
import sys

MODULES = [
    "slop_tui.message_parser",
    "slop_tui.context.window",
    "slop_tui.context.tiers",
    "slop_tui.context.anchors",
    "slop_tui.context.memos",
    "slop_tui.context.isolation",
    "slop_tui.context.guidelines",
    "slop_tui.context.assemble",
    "slop_tui.context.render",
    "slop_tui.context.prompt",
    "slop_tui.context.layout",
    "slop_tui.context.budget",
    "slop_tui.context.guards",
    "slop_tui.context.compaction",
    "slop_tui.context.summaries",
    "slop_tui.context.redact",
    "slop_tui.context",
]
FORBIDDEN = ["textual", "sqlite3", "aiosqlite", "openai", "google", "tiktoken", "slop_tui.ledger"]


def test_engine_imports_no_io_sdk_or_ui() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in MODULES)
        + f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} "
        + f"or any(m.startswith(f + '.') or m == f for f in {FORBIDDEN!r}))\n"
        + "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# Headless, not pure: they use the ledger, git and (through the orchestrator) a
# provider, but never the UI, so `slop-tui ask` and the tests run them as is.
HEADLESS = [
    "slop_tui.continuity.compactor",
    "slop_tui.continuity.handoff",
    "slop_tui.workspace",
    "slop_tui.orchestrator",
]


def test_continuity_jobs_are_headless() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in HEADLESS)
        + "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
