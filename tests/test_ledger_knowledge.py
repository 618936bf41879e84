"""Global knowledge: memos (with FTS5), skills, the tool registry, summaries, app state."""

from __future__ import annotations

from pathlib import Path

import pytest

from slop_tui.ledger import Ledger, LedgerError, normalise_tags
from slop_tui.records import EDIT_MEMO_REMOVE, EDIT_SKILL_REMOVE


@pytest.fixture
async def ledger(tmp_path: Path):
    led = await Ledger.open(tmp_path / "slop.db")
    yield led
    await led.close()


# --- memos ---------------------------------------------------------------------------


async def test_memo_add_update_remove(ledger: Ledger) -> None:
    memo = await ledger.add_memo("Use WAL for the ledger.", [" Arch-Decision ", "sqlite", "SQLite"])
    assert memo.tags == ("arch-decision", "sqlite")
    assert await ledger.get_memo(memo.id) == memo
    assert await ledger.list_memos() == [memo]

    updated = await ledger.update_memo(memo.id, "Use WAL; synchronous=NORMAL.", ["perf"])
    assert (updated.id, updated.content, updated.tags) == (
        memo.id,
        "Use WAL; synchronous=NORMAL.",
        ("perf",),
    )
    assert updated.created_at == memo.created_at

    assert await ledger.trash_knowledge(EDIT_MEMO_REMOVE, memo.id) is not None
    assert await ledger.get_memo(memo.id) is None
    assert await ledger.trash_knowledge(EDIT_MEMO_REMOVE, memo.id) is None
    with pytest.raises(LedgerError):
        await ledger.update_memo(memo.id, "gone", [])


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
async def test_memo_needs_content(ledger: Ledger, content: str) -> None:
    with pytest.raises(LedgerError):
        await ledger.add_memo(content, ["tag"])
    memo = await ledger.add_memo("real", [])
    with pytest.raises(LedgerError):
        await ledger.update_memo(memo.id, content, [])
    assert (await ledger.get_memo(memo.id)).content == "real"  # type: ignore[union-attr]


def test_normalise_tags() -> None:
    assert normalise_tags(["B", " a ", "b", "", "  ", "A"]) == ["b", "a"]


async def test_memo_candidates_by_content_and_tags(ledger: Ledger) -> None:
    wal = await ledger.add_memo("The ledger runs SQLite in WAL mode.", ["storage"])
    arch = await ledger.add_memo("Layers talk through records only.", ["arch-decision"])
    other = await ledger.add_memo("Themes live in themes/.", ["ui"])

    memos, scores = await ledger.memo_candidates(["sqlite"])
    assert [m.id for m in memos] == [wal.id]
    assert wal.id in scores
    memos, _ = await ledger.memo_candidates(["arch"])  # a hyphen part of a tag
    assert [m.id for m in memos] == [arch.id]
    memos, _ = await ledger.memo_candidates(["arch-decision"])
    assert [m.id for m in memos] == [arch.id]
    memos, scores = await ledger.memo_candidates(["ledger", "themes", "nothing"])
    assert {m.id for m in memos} == {wal.id, other.id}
    assert set(scores) == {wal.id, other.id}
    assert await ledger.memo_candidates([]) == ([], {})
    assert await ledger.memo_candidates(["zzzz"]) == ([], {})


async def test_memo_index_follows_updates_and_removal(ledger: Ledger) -> None:
    memo = await ledger.add_memo("about pineapples", ["fruit"])
    assert [m.id for m in (await ledger.memo_candidates(["pineapples"]))[0]] == [memo.id]
    await ledger.update_memo(memo.id, "about carrots", ["vegetable"])
    assert (await ledger.memo_candidates(["pineapples"]))[0] == []
    assert (await ledger.memo_candidates(["fruit"]))[0] == []
    assert [m.id for m in (await ledger.memo_candidates(["carrots"]))[0]] == [memo.id]
    assert [m.id for m in (await ledger.memo_candidates(["vegetable"]))[0]] == [memo.id]
    await ledger.trash_knowledge(EDIT_MEMO_REMOVE, memo.id)
    assert (await ledger.memo_candidates(["carrots"]))[0] == []
    row = await ledger._one("SELECT COUNT(*) FROM memos_fts WHERE memos_fts MATCH 'carrots'")
    assert row[0] == 0


@pytest.mark.parametrize(
    "keyword",
    [
        '"',
        '"unbalanced',
        "*",
        "wal*",
        "(",
        ")",
        "(sqlite",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(a b)",
        "-",
        "-sqlite",
        "content:sqlite",
        "^sqlite",
        "a+b",
        "{x}",
        "%",
        "_",
        "'",
        "\\",
        "ünïcødé",
    ],
)
async def test_fts_syntax_in_keywords_is_inert(ledger: Ledger, keyword: str) -> None:
    await ledger.add_memo("The ledger runs SQLite in WAL mode.", ["storage"])
    memos, scores = await ledger.memo_candidates([keyword, "sqlite"])
    assert [m.content for m in memos] == ["The ledger runs SQLite in WAL mode."]
    assert isinstance(scores, dict)
    await ledger.memo_candidates([keyword])  # alone, too


async def test_memo_content_with_fts_syntax_round_trips(ledger: Ledger) -> None:
    text = 'Use "quotes" AND (parens) * NEAR -minus: col:value'
    memo = await ledger.add_memo(text, ['tag "quoted"', "a*b"])
    assert (await ledger.get_memo(memo.id)).content == text  # type: ignore[union-attr]
    memos, _ = await ledger.memo_candidates(["parens"])
    assert [m.id for m in memos] == [memo.id]


# --- skills --------------------------------------------------------------------------


async def test_default_skills_and_lookup(ledger: Ledger) -> None:
    skills = await ledger.list_skills()
    names = [s.name for s in skills]
    assert names[:3] == ["planner", "code_reviewer", "dba"]
    for skill in skills:
        assert skill.prompt_patch and skill.description
        assert await ledger.get_skill(skill.id) == skill
        assert await ledger.get_skill(str(skill.id)) == skill
        assert await ledger.get_skill(skill.name) == skill
        assert await ledger.get_skill(f"  {skill.name} ") == skill
    assert await ledger.get_skill("nope") is None
    assert await ledger.get_skill(9999) is None


async def test_skill_add_rename_duplicate_delete(ledger: Ledger) -> None:
    added = await ledger.add_skill(" tester ", "writes tests", "Write the test first.")
    assert added.name == "tester" and added.activation_count == 0
    with pytest.raises(LedgerError, match="already exists"):
        await ledger.add_skill("tester", "again", "")
    with pytest.raises(LedgerError, match="already exists"):
        await ledger.add_skill("planner", "clash", "")
    for bad in ("", "  ", "123"):
        with pytest.raises(LedgerError):
            await ledger.add_skill(bad, "d", "p")

    renamed = await ledger.update_skill(
        added.id, name="test_writer", description="d2", prompt_patch="p2"
    )
    assert (renamed.id, renamed.name, renamed.prompt_patch) == (added.id, "test_writer", "p2")
    assert await ledger.get_skill("tester") is None
    assert await ledger.get_skill("test_writer") == renamed
    with pytest.raises(LedgerError, match="already exists"):
        await ledger.update_skill(added.id, name="planner", description="", prompt_patch="")
    with pytest.raises(LedgerError):
        await ledger.update_skill(99999, name="ghost", description="", prompt_patch="")
    assert (await ledger.get_skill(added.id)) == renamed

    await ledger.count_skill_activation(added.id)
    await ledger.count_skill_activation(added.id)
    assert (await ledger.get_skill(added.id)).activation_count == 2  # type: ignore[union-attr]

    assert await ledger.trash_knowledge(EDIT_SKILL_REMOVE, added.id) is not None
    assert await ledger.trash_knowledge(EDIT_SKILL_REMOVE, added.id) is None
    assert await ledger.get_skill(added.id) is None


@pytest.mark.parametrize("bad", ["", "   ", "42"])
async def test_skill_rename_to_an_unusable_name_is_refused(ledger: Ledger, bad: str) -> None:
    planner = await ledger.get_skill("planner")
    assert planner is not None
    with pytest.raises(LedgerError):
        await ledger.update_skill(planner.id, name=bad, description="", prompt_patch="")
    assert await ledger.get_skill(planner.id) == planner


async def test_deleted_default_skill_is_not_reseeded(tmp_path: Path) -> None:
    path = tmp_path / "slop.db"
    async with await Ledger.open(path) as led:
        planner = await led.get_skill("planner")
        assert planner is not None
        await led.trash_knowledge(EDIT_SKILL_REMOVE, planner.id)
        reviewer = await led.get_skill("code_reviewer")
        assert reviewer is not None
        await led.update_skill(
            reviewer.id, name="reviewer", description="mine", prompt_patch="mine"
        )
    for _ in range(2):
        async with await Ledger.open(path) as led:
            names = [s.name for s in await led.list_skills()]
            assert names == ["reviewer", "dba"]


# --- tool registry -------------------------------------------------------------------


async def test_tool_registry_upsert_keeps_enabled_and_call_count(ledger: Ledger) -> None:
    await ledger.register_tools(
        [("read_file", "Read a file.", '{"type":"object"}'), ("shell", "Run a command.", "{}")]
    )
    assert [t.name for t in await ledger.list_tools()] == ["read_file", "shell"]
    assert await ledger.set_tool_enabled("shell", False) is True
    await ledger.count_tool_call("read_file")
    await ledger.count_tool_call("read_file")
    await ledger.count_tool_call("unknown")  # no row, no error
    assert await ledger.set_tool_enabled("unknown", True) is False

    await ledger.register_tools(
        [("read_file", "Read a file, v2.", '{"v":2}'), ("query_db", "SQL.", "{}")]
    )
    read_file = await ledger.get_tool("read_file")
    shell = await ledger.get_tool("shell")
    assert read_file is not None and shell is not None
    assert (read_file.description, read_file.schema_json) == ("Read a file, v2.", '{"v":2}')
    assert (read_file.enabled, read_file.call_count) == (True, 2)
    assert (shell.enabled, shell.call_count) == (False, 0)
    assert [t.name for t in await ledger.list_tools()] == ["query_db", "read_file", "shell"]
    assert await ledger.get_tool("nope") is None


async def test_registering_the_same_tools_again_writes_nothing(ledger: Ledger) -> None:
    rows = [("read_file", "Read a file.", '{"type":"object"}'), ("shell", "Run.", "{}")]
    await ledger.register_tools(rows)
    writes: list[int] = []
    transaction = ledger.transaction

    def counting():  # type: ignore[no-untyped-def]
        writes.append(1)
        return transaction()

    ledger.transaction = counting  # type: ignore[method-assign]
    await ledger.register_tools(rows)  # every start does this
    assert writes == []
    await ledger.register_tools([rows[0], ("shell", "Run a command.", "{}")])
    assert writes == [1]  # only what changed is written
    shell = await ledger.get_tool("shell")
    assert shell is not None and shell.description == "Run a command."


# --- summaries and app state ---------------------------------------------------------


async def test_summaries_are_versioned_per_lane(ledger: Ledger) -> None:
    first = await ledger.add_summary("s", "main", "lane", [1, 10], "one")
    second = await ledger.add_summary("s", "main", "lane", [11, 20], "two", first)
    side = await ledger.add_summary("s", "side", "lane", [5, 6], "side")
    other = await ledger.add_summary("t", "main", "lane", [1, 2], "t")
    # A summary rolled over another covers the lane from the earlier one's first message.
    assert (second.first_message_id, second.last_message_id) == (1, 20)
    assert (first.version, second.version, side.version, other.version) == (1, 2, 1, 1)
    assert await ledger.summaries("s") == [first, second, side]
    assert await ledger.summaries("s", "side") == [side]


async def test_settings(ledger: Ledger) -> None:
    assert await ledger.get_setting("current_session") is None
    assert await ledger.get_setting("current_session", "default_session") == "default_session"
    await ledger.set_setting("current_session", "work")
    await ledger.set_setting("current_session", "x' OR '1'='1")
    assert await ledger.get_setting("current_session") == "x' OR '1'='1"
