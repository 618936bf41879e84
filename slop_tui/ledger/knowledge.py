"""Global knowledge in the ledger: memos, skills, the tool registry, summaries."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence

from slop_tui.ledger.core import LedgerBase, LedgerError, now
from slop_tui.records import MEMO_UNKNOWN, MEMO_USER, Memo, Skill, ToolInfo

# app_state key set once the memos saved before provenance was recorded were checked.
KEY_UNKNOWN_MEMOS_CHECKED = "memos/unknown_checked"


def _tags(raw: str) -> tuple[str, ...]:
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return ()
    return tuple(str(t) for t in value) if isinstance(value, list) else ()


def _memo(r: sqlite3.Row) -> Memo:
    return Memo(
        r["id"],
        r["content"],
        _tags(r["tags"]),
        r["created_at"],
        r["source"],
        bool(r["quarantined"]),
    )


def _skill(r: sqlite3.Row) -> Skill:
    return Skill(r["id"], r["name"], r["description"], r["prompt_patch"], r["activation_count"])


def _tool(r: sqlite3.Row) -> ToolInfo:
    return ToolInfo(
        r["name"], r["description"], r["schema_json"], bool(r["enabled"]), r["call_count"]
    )


def normalise_tags(tags: Iterable[str]) -> list[str]:
    out: list[str] = []
    for tag in tags:
        t = tag.strip().lower()
        if t and t not in out:
            out.append(t)
    return out


def _fts_query(words: Sequence[str]) -> str:
    # Quote every keyword so FTS5 syntax characters in user text are inert.
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words if w)


class KnowledgeMixin(LedgerBase):
    # -- memos -------------------------------------------------------------

    async def add_memo(
        self,
        content: str,
        tags: Iterable[str],
        *,
        source: str = MEMO_USER,
        quarantined: bool = False,
    ) -> Memo:
        """Store a memo; `source` is who wrote it, `quarantined` keeps it out of every
        request, retrieval and query until `confirm_memo`."""
        if not content.strip():
            raise LedgerError("a memo needs some content.")
        clean = normalise_tags(tags)
        t = now()
        async with self.transaction() as db:
            cur = await db.execute(
                "INSERT INTO memos(content, tags, created_at, source, quarantined) "
                "VALUES (?,?,?,?,?)",
                (content, json.dumps(clean), t, source, int(quarantined)),
            )
        return Memo(cur.lastrowid, content, tuple(clean), t, source, quarantined)

    async def confirm_memo(self, memo_id: int) -> bool:
        """Release a quarantined memo (the user read it); False when it was not quarantined."""
        async with self.transaction() as db:
            cur = await db.execute(
                "UPDATE memos SET quarantined = 0 WHERE id=? AND quarantined = 1", (memo_id,)
            )
            return cur.rowcount > 0

    async def quarantine_unknown_memos(
        self, shape: Callable[[str], str | None]
    ) -> list[tuple[int, str]]:
        """Check the memos of unknown author (saved before provenance was recorded) once,
        as a memo the model saves is checked: quarantine each one `shape` finds a
        phrase in. Returns (id, phrase) of the memos quarantined now; nothing after the
        first call, so a memo the user confirmed stays confirmed."""
        if await self.get_setting(KEY_UNKNOWN_MEMOS_CHECKED) is not None:
            return []  # the usual case: no write lock taken
        async with self.transaction() as db:
            cur = await db.execute(
                "SELECT 1 FROM app_state WHERE key = ?", (KEY_UNKNOWN_MEMOS_CHECKED,)
            )
            if await cur.fetchone() is not None:  # another process was first
                return []
            cur = await db.execute(
                "SELECT id, content FROM memos WHERE source = ? AND quarantined = 0 ORDER BY id",
                (MEMO_UNKNOWN,),
            )
            found = [(r[0], phrase) for r in await cur.fetchall() if (phrase := shape(r[1]))]
            await db.executemany(
                "UPDATE memos SET quarantined = 1 WHERE id = ?", [(i,) for i, _ in found]
            )
            await db.execute(
                "INSERT OR IGNORE INTO app_state(key, value) VALUES (?, '1')",
                (KEY_UNKNOWN_MEMOS_CHECKED,),
            )
        return found

    async def get_memo(self, memo_id: int) -> Memo | None:
        row = await self._one("SELECT * FROM memos WHERE id=?", (memo_id,))
        return _memo(row) if row else None

    async def list_memos(self) -> list[Memo]:
        return [_memo(r) for r in await self._all("SELECT * FROM memos ORDER BY id")]

    async def update_memo(self, memo_id: int, content: str, tags: Iterable[str]) -> Memo:
        if not content.strip():
            raise LedgerError("a memo needs some content.")
        clean = normalise_tags(tags)
        async with self.transaction() as db:
            cur = await db.execute(
                "UPDATE memos SET content=?, tags=? WHERE id=?",
                (content, json.dumps(clean), memo_id),
            )
            if cur.rowcount == 0:
                raise LedgerError(f"no memo with id {memo_id}.")
        memo = await self.get_memo(memo_id)
        assert memo is not None
        return memo

    async def memo_candidates(self, keywords: Sequence[str]) -> tuple[list[Memo], dict[int, float]]:
        """Memos whose tags or content match any keyword, with their BM25 scores.

        Quarantined memos are never candidates: they reach no request and no
        `retrieve_memos` answer until the user confirms them.

        Tag matching (exact or hyphen part) and ranking are the context
        engine's job; this only narrows the set with two index searches.
        """
        words = [k for k in keywords if k]
        if not words:
            return [], {}
        bm25: dict[int, float] = {}
        query = _fts_query(words)
        try:
            rows = await self._all(
                "SELECT rowid, bm25(memos_fts) AS score FROM memos_fts WHERE memos_fts MATCH ? "
                "ORDER BY score LIMIT 50",
                (query,),
            )
            bm25 = {r["rowid"]: r["score"] for r in rows}
        except sqlite3.OperationalError:
            bm25 = {}
        ids = set(bm25)
        # Tag hits that FTS tokenisation may miss (e.g. `arch` inside `arch-decision`
        # is found by FTS, but keep an explicit LIKE pass for robustness).
        clauses = " OR ".join(["tags LIKE ?"] * len(words))
        like = [f"%{w.replace('%', '').replace('_', '')}%" for w in words]
        for r in await self._all(f"SELECT id FROM memos WHERE {clauses} LIMIT 200", like):
            ids.add(r["id"])
        if not ids:
            return [], bm25
        marks = ",".join("?" * len(ids))
        memos = [
            _memo(r)
            for r in await self._all(
                f"SELECT * FROM memos WHERE id IN ({marks}) AND quarantined = 0 ORDER BY id",
                sorted(ids),
            )
        ]
        return memos, bm25

    # -- skills ------------------------------------------------------------

    async def list_skills(self) -> list[Skill]:
        return [_skill(r) for r in await self._all("SELECT * FROM skills ORDER BY id")]

    async def get_skill(self, ref: str | int) -> Skill | None:
        """By name, or by id when `ref` is all ASCII digits (an id past SQLite's
        INTEGER range names no skill: no name is all digits)."""
        ref_s = str(ref).strip()
        if ref_s.isascii() and ref_s.isdigit():
            if int(ref_s) > 2**63 - 1:
                return None
            row = await self._one("SELECT * FROM skills WHERE id=? OR name=?", (int(ref_s), ref_s))
        else:
            row = await self._one("SELECT * FROM skills WHERE name=?", (ref_s,))
        return _skill(row) if row else None

    async def add_skill(self, name: str, description: str, prompt_patch: str) -> Skill:
        name = name.strip()
        if not name or name.isdigit():
            raise LedgerError("a skill needs a name that is not only digits.")
        async with self.transaction() as db:
            try:
                cur = await db.execute(
                    "INSERT INTO skills(name, description, prompt_patch) VALUES (?,?,?)",
                    (name, description, prompt_patch),
                )
            except sqlite3.IntegrityError as exc:
                raise LedgerError(f"a skill named '{name}' already exists.") from exc
        return Skill(cur.lastrowid, name, description, prompt_patch, 0)

    async def update_skill(
        self, skill_id: int, *, name: str, description: str, prompt_patch: str
    ) -> Skill:
        """Keyed by id, so renaming works (the reference tool keyed by the new name)."""
        if not name.strip() or name.strip().isdigit():
            raise LedgerError("a skill needs a name that is not only digits.")
        async with self.transaction() as db:
            try:
                cur = await db.execute(
                    "UPDATE skills SET name=?, description=?, prompt_patch=? WHERE id=?",
                    (name.strip(), description, prompt_patch, skill_id),
                )
            except sqlite3.IntegrityError as exc:
                raise LedgerError(f"a skill named '{name}' already exists.") from exc
            if cur.rowcount == 0:
                raise LedgerError(f"no skill with id {skill_id}.")
        skill = await self.get_skill(skill_id)
        assert skill is not None
        return skill

    async def count_skill_activation(self, skill_id: int) -> None:
        async with self.transaction() as db:
            await db.execute(
                "UPDATE skills SET activation_count = activation_count + 1 WHERE id=?", (skill_id,)
            )

    # -- tool registry -----------------------------------------------------

    async def register_tools(self, tools: Iterable[tuple[str, str, str]]) -> None:
        """Upsert (name, description, schema JSON); keeps `enabled` and `call_count`.

        Rows stored exactly as given are not written again: every start registers
        the tools, and a write transaction costs more than the rest of opening the
        workspace."""
        stored = {
            (r["name"], r["description"], r["schema_json"])
            for r in await self._all("SELECT name, description, schema_json FROM tools")
        }
        changed = [row for row in tools if tuple(row) not in stored]
        if not changed:
            return
        async with self.transaction() as db:
            await db.executemany(
                """INSERT INTO tools(name, description, schema_json) VALUES (?,?,?)
                   ON CONFLICT(name) DO UPDATE SET description=excluded.description,
                       schema_json=excluded.schema_json""",
                changed,
            )

    async def list_tools(self) -> list[ToolInfo]:
        return [_tool(r) for r in await self._all("SELECT * FROM tools ORDER BY name")]

    async def get_tool(self, name: str) -> ToolInfo | None:
        row = await self._one("SELECT * FROM tools WHERE name=?", (name,))
        return _tool(row) if row else None

    async def set_tool_enabled(self, name: str, enabled: bool) -> bool:
        async with self.transaction() as db:
            cur = await db.execute("UPDATE tools SET enabled=? WHERE name=?", (int(enabled), name))
            return cur.rowcount > 0

    async def count_tool_call(self, name: str) -> None:
        async with self.transaction() as db:
            await db.execute("UPDATE tools SET call_count = call_count + 1 WHERE name=?", (name,))
