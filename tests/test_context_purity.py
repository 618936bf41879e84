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
