"""A real Workspace over a real ledger in a temporary project folder."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from slop_tui.config import load_config
from slop_tui.workspace import Workspace


def rough(text: str) -> int:
    return (len(text) + 3) // 4


async def open_workspace(tmp_path: Path, session: str | None = None, env=None) -> Workspace:
    config = load_config(db=str(tmp_path / ".slop" / "slop.db"), env=env or {}, cwd=tmp_path)
    return await Workspace.open(config, session, count_tokens=rough, env=dict(env or {}))


def migrate_to(con: sqlite3.Connection, version: int) -> None:
    """Apply the ledger's migrations up to `version` on a plain sqlite3 connection, as
    `Ledger.open` does (a ledger left by an older slop-tui, or another process)."""
    from slop_tui.ledger.schema import DEFAULT_SKILLS, MIGRATIONS

    for target, migration in enumerate(MIGRATIONS[:version], start=1):
        for stmt in migration:
            con.execute(stmt)
        if target == 1:
            con.executemany(
                "INSERT INTO skills(name, description, prompt_patch) VALUES (?,?,?)",
                DEFAULT_SKILLS,
            )
    con.execute(f"PRAGMA user_version={version}")
