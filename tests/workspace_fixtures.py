"""A real Workspace over a real ledger in a temporary project folder."""

from __future__ import annotations

from pathlib import Path

from slop_tui.config import load_config
from slop_tui.workspace import Workspace


def rough(text: str) -> int:
    return (len(text) + 3) // 4


async def open_workspace(tmp_path: Path, session: str | None = None, env=None) -> Workspace:
    config = load_config(db=str(tmp_path / ".slop" / "slop.db"), env=env or {}, cwd=tmp_path)
    return await Workspace.open(config, session, count_tokens=rough, env=dict(env or {}))
