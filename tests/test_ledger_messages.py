"""Messages, groups, the window, STATE versions, token totals, history search, usage."""

from __future__ import annotations

import random
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest

from slop_tui.context.window import groups_in, select_window
from slop_tui.ledger import Ledger
from slop_tui.records import GroupSummary, Message, NewMessage, Spend, UsageCost


@pytest.fixture
async def ledger(tmp_path: Path):
    led = await Ledger.open(tmp_path / "slop.db", count_tokens=len)
    yield led
    await led.close()


async def _group(
    led: Ledger,
    session: str,
    prompt: str = "q",
    *,
    lane: str | None = None,
    tail: tuple[tuple[str, str], ...] = (("tool_call", "assistant"), ("completed", "tool")),
    answer: str | None = "done",
) -> int:
    """A user prompt, then `tail` (status, role) rows, then an optional final answer."""
    user = await led.append_user(session, prompt, lane=lane)
    rows = [
        NewMessage(role, f"{role} {status} of {prompt}", status=status, tool_call_id="c")
        for status, role in tail
    ]
    if answer is not None:
        rows.append(NewMessage("assistant", answer))
    await led.append(session, user.id, rows)
    return user.id


async def _totals_consistent(led: Ledger) -> None:
    rows = await led._all(
        """SELECT s.name, s.message_count, s.token_total,
                  (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.name) AS n,
                  (SELECT COALESCE(SUM(tokens), 0) FROM messages m WHERE m.session_id = s.name)
                      AS t
           FROM sessions s"""
    )
    for r in rows:
        assert (r["message_count"], r["token_total"]) == (r["n"], r["t"]), r["name"]


def _gids(messages: list[Message]) -> list[int | None]:
    out: list[int | None] = []
    for m in messages:
        if m.group_id not in out:
            out.append(m.group_id)
    return out


# --- appending -----------------------------------------------------------------------


async def test_append_user_opens_a_group_named_by_its_own_id(ledger: Ledger) -> None:
    first = await ledger.append_user("s", "hello world", strategy="openai")
    second = await ledger.append_user("s", "again")
    assert first.group_id == first.id and second.group_id == second.id
    assert second.id > first.id
    assert (first.role, first.content, first.status, first.lane) == (
        "user",
        "hello world",
        "completed",
        "main",
    )
    assert first.strategy == "openai"
    assert first.tokens == len("hello world")
    assert isinstance(first.created_at, float) and first.created_at <= second.created_at
    assert await ledger.get_message(first.id) == first
    assert await ledger.last_group_id("s") == second.id


async def test_append_batch_is_one_group_in_order(ledger: Ledger) -> None:
    user = await ledger.append_user("s", "go")
    batch = [
        NewMessage("assistant", "", status="tool_call", payload='{"x":1}', strategy="openai"),
        NewMessage("tool", "out 1", tool_call_id="c1", tool_name="shell", tokens=7),
        NewMessage("tool", "out 2", tool_call_id="c2", tool_name="shell", status="error"),
        NewMessage("assistant", "final", strategy="openai"),
    ]
    stored = await ledger.append("s", user.id, batch)
    assert [m.id for m in stored] == sorted(m.id for m in stored)
    assert {m.group_id for m in stored} == {user.id}
    assert [(m.role, m.content, m.status) for m in stored] == [
        ("assistant", "", "tool_call"),
        ("tool", "out 1", "completed"),
        ("tool", "out 2", "error"),
        ("assistant", "final", "completed"),
    ]
    assert stored[0].payload == '{"x":1}'
    assert (stored[1].tool_call_id, stored[1].tool_name) == ("c1", "shell")
    assert stored[1].tokens == 7  # explicit count wins
    assert stored[2].tokens == len("out 2")  # counted by the ledger
    assert await ledger.group_messages("s", user.id) == [
        await ledger.get_message(user.id),
        *stored,
    ]
    await _totals_consistent(ledger)


async def test_append_batch_is_atomic(ledger: Ledger) -> None:
    user = await ledger.append_user("s", "go")
    with pytest.raises(sqlite3.IntegrityError):
        await ledger.append(
            "s",
            user.id,
            [NewMessage("assistant", "ok"), NewMessage("robot", "not a role")],
        )
    assert [m.id for m in await ledger.session_messages("s")] == [user.id]
    await _totals_consistent(ledger)
    # The connection is not left inside a transaction.
    assert len(await ledger.append("s", user.id, [NewMessage("assistant", "ok")])) == 1


async def test_messages_inherit_the_lane_of_their_group(ledger: Ledger) -> None:
    await ledger.set_lane("s", "side")
    user = await ledger.append_user("s", "in side lane")
    assert user.lane == "side"
    await ledger.set_lane("s", "main")
    (answer,) = await ledger.append("s", user.id, [NewMessage("assistant", "a")])
    assert answer.lane == "side"
    explicit = await ledger.append_user("s", "explicit", lane="research")
    assert explicit.lane == "research"


async def test_update_message_recounts_tokens(ledger: Ledger) -> None:
    user = await ledger.append_user("s", "abc")
    updated = await ledger.update_message(user.id, content="abcdefgh")
    assert updated is not None and updated.tokens == 8
    updated = await ledger.update_message(user.id, tokens=3)
    assert updated is not None and (updated.content, updated.tokens) == ("abcdefgh", 3)
    session = await ledger.get_session("s")
    assert session is not None and session.token_total == 3
    assert await ledger.update_message(999_999, content="x") is None


# --- the window ----------------------------------------------------------------------


async def test_window_selects_the_last_n_groups(ledger: Ledger) -> None:
    gids = [await _group(ledger, "s", f"p{i}") for i in range(4)]
    assert _gids(await ledger.window("s", 1)) == gids[-1:]
    assert _gids(await ledger.window("s", 2)) == gids[-2:]
    assert _gids(await ledger.window("s", 0)) == gids
    assert _gids(await ledger.window("s", 10)) == gids
    rows = await ledger.window("s", 2)
    assert len(rows) == 8
    assert [m.id for m in rows] == sorted(m.id for m in rows)  # strictly chronological
    assert [m.role for m in rows[:4]] == ["user", "assistant", "tool", "assistant"]


async def test_window_of_an_unknown_session_is_empty(ledger: Ledger) -> None:
    await _group(ledger, "s")
    assert await ledger.window("nobody", 5) == []
    assert await ledger.window("nobody", 0) == []


async def test_dropped_groups_neither_appear_nor_count(ledger: Ledger) -> None:
    g = [await _group(ledger, "s", f"p{i}") for i in range(4)]
    await ledger.set_group_dropped("s", g[3], True)
    await ledger.set_group_dropped("s", g[1], True)
    assert _gids(await ledger.window("s", 1)) == [g[2]]
    assert _gids(await ledger.window("s", 2)) == [g[0], g[2]]
    assert _gids(await ledger.window("s", 0)) == [g[0], g[2]]
    await ledger.set_group_dropped("s", g[3], False)
    assert _gids(await ledger.window("s", 1)) == [g[3]]


async def test_partly_hidden_groups(ledger: Ledger) -> None:
    """Hidden rows inside a group vanish; the group still counts through its other rows."""
    g0 = await _group(ledger, "s", "p0")
    g1 = await _group(ledger, "s", "p1")
    rows = await ledger.group_messages("s", g1)
    await ledger.set_message_status(rows[1].id, "dropped")
    await ledger.set_message_status(rows[2].id, "summarized")
    window = await ledger.window("s", 1)
    assert _gids(window) == [g1]
    assert [m.id for m in window] == [rows[0].id, rows[3].id]
    assert _gids(await ledger.window("s", 2)) == [g0, g1]


async def test_ungrouped_rows_never_appear(ledger: Ledger) -> None:
    await ledger.append("s", None, [NewMessage("system", "early note")])
    g0 = await _group(ledger, "s", "p0")
    await ledger.append("s", None, [NewMessage("assistant", "stray"), NewMessage("tool", "x")])
    g1 = await _group(ledger, "s", "p1")
    await ledger.append("s", None, [NewMessage("user", "late stray")])
    for n in (0, 1, 2, 5):
        window = await ledger.window("s", n)
        assert all(m.group_id is not None for m in window), n
    assert _gids(await ledger.window("s", 1)) == [g1]
    assert _gids(await ledger.window("s", 2)) == [g0, g1]
    assert len(await ledger.session_messages("s")) == 4 + 4 + 4  # the raw rows are kept
    assert [g.group_id for g in await ledger.list_groups("s")] == [g1, g0]


async def test_window_lane_filter(ledger: Ledger) -> None:
    m0 = await _group(ledger, "s", "main 0")
    s0 = await _group(ledger, "s", "side 0", lane="side")
    m1 = await _group(ledger, "s", "main 1")
    s1 = await _group(ledger, "s", "side 1", lane="side")
    assert _gids(await ledger.window("s", 1, lane="main")) == [m1]
    assert _gids(await ledger.window("s", 2, lane="main")) == [m0, m1]
    assert _gids(await ledger.window("s", 0, lane="main")) == [m0, m1]
    assert _gids(await ledger.window("s", 1, lane="side")) == [s1]
    assert _gids(await ledger.window("s", 0, lane="side")) == [s0, s1]
    assert _gids(await ledger.window("s", 2)) == [m1, s1]  # no lane: every lane
    assert {m.lane for m in await ledger.window("s", 0, lane="side")} == {"side"}
    assert await ledger.window("s", 3, lane="nowhere") == []
    assert [g.group_id for g in await ledger.list_groups("s", lane="side")] == [s1, s0]


async def test_window_agrees_with_the_context_engine(ledger: Ledger) -> None:
    """The SQL window and the pure `select_window` pick the same rows on a messy history."""
    rnd = random.Random(7)
    for i in range(40):
        lane = rnd.choice(["main", "main", "main", "side"])
        gid = await _group(ledger, "s", f"p{i}", lane=lane, answer=rnd.choice(["a", None]))
        roll = rnd.random()
        if roll < 0.15:
            await ledger.set_group_dropped("s", gid, True)
        elif roll < 0.25:
            rows = await ledger.group_messages("s", gid)
            await ledger.set_message_status(rnd.choice(rows).id, "dropped")
        elif roll < 0.3:
            await ledger.append("s", None, [NewMessage("assistant", "stray")])
    every = await ledger.session_messages("s")
    for n in (0, 1, 2, 3, 5, 8, 100):
        for lane in (None, "main", "side"):
            got = await ledger.window("s", n, lane=lane)
            want = select_window(every, n, lane=lane)
            assert [m.id for m in got] == [m.id for m in want], (n, lane)
            if n:
                assert len(groups_in(got)) == min(n, len(groups_in(every, lane)))


async def test_window_keeps_each_group_together_when_ids_interleave(ledger: Ledger) -> None:
    """Rows come back group by group (each in id order) even where ids interleave."""
    g0 = await ledger.append_user("s", "first")
    g1 = await ledger.append_user("s", "second")
    late = await ledger.append("s", g0.id, [NewMessage("assistant", "late answer to the first")])
    await ledger.append("s", g1.id, [NewMessage("assistant", "answer to the second")])
    for n in (0, 1, 2):
        rows = await ledger.window("s", n)
        keys = [(m.group_id, m.id) for m in rows]
        assert keys == sorted(keys), n
    every = await ledger.window("s", 0)
    assert [m.group_id for m in every] == [g0.id, g0.id, g1.id, g1.id]
    assert every[1].id == late[0].id and every[1].content == "late answer to the first"
    assert [m.id for m in every] == [m.id for m in select_window(every, 0)]


# --- groups: list, drop, restore, remove ---------------------------------------------


async def test_list_groups_marks_statuses(ledger: Ledger) -> None:
    ok = await _group(ledger, "s", "fine")
    err = await _group(ledger, "s", "broken", tail=(("error", "tool"),))
    cut = await _group(ledger, "s", "stopped", answer=None)
    rows = await ledger.group_messages("s", cut)
    await ledger.set_message_status(rows[-1].id, "interrupted")
    gone = await _group(ledger, "s", "unwanted", tail=(("error", "tool"),))
    await ledger.set_group_dropped("s", gone, True)
    groups = await ledger.list_groups("s")
    assert [(g.group_id, g.status) for g in groups] == [
        (gone, "dropped"),
        (cut, "interrupted"),
        (err, "error"),
        (ok, "completed"),
    ]
    fine = groups[-1]
    assert (fine.prompt, fine.messages, fine.lane) == ("fine", 4, "main")
    assert fine.tokens == sum(m.tokens for m in await ledger.group_messages("s", ok))
    assert [g.group_id for g in await ledger.list_groups("s", limit=2)] == [gone, cut]
    assert await ledger.list_groups("other") == []


async def test_drop_restore_round_trip_keeps_original_statuses(ledger: Ledger) -> None:
    gid = await _group(
        ledger,
        "s",
        "mixed",
        tail=(("tool_call", "assistant"), ("error", "tool"), ("completed", "tool")),
    )
    rows = await ledger.group_messages("s", gid)
    await ledger.set_message_status(rows[-1].id, "interrupted")
    before = [m.status for m in await ledger.group_messages("s", gid)]
    assert before == ["completed", "tool_call", "error", "completed", "interrupted"]

    assert await ledger.set_group_dropped("s", gid, True) == 5
    assert {m.status for m in await ledger.group_messages("s", gid)} == {"dropped"}
    assert await ledger.set_group_dropped("s", gid, True) == 0  # idempotent
    assert await ledger.set_group_dropped("s", gid, False) == 5
    assert [m.status for m in await ledger.group_messages("s", gid)] == before
    assert await ledger.set_group_dropped("s", gid, False) == 0
    # A second round trip still restores the same statuses.
    await ledger.set_group_dropped("s", gid, True)
    await ledger.set_group_dropped("s", gid, False)
    assert [m.status for m in await ledger.group_messages("s", gid)] == before


async def test_drop_is_scoped_to_the_session(ledger: Ledger) -> None:
    gid = await _group(ledger, "s")
    assert await ledger.set_group_dropped("other", gid, True) == 0
    assert await ledger.remove_group("other", gid) == 0
    assert len(await ledger.window("s", 1)) == 4


async def test_remove_group_deletes_rows_and_its_state(ledger: Ledger) -> None:
    g1 = await _group(ledger, "s", "one")
    g2 = await _group(ledger, "s", "two")
    await ledger.add_state("s", g1, "STATE one")
    await ledger.add_state("s", g2, "STATE two")
    await ledger.add_state("s", g2, "STATE two, revised")
    assert await ledger.remove_group("s", g2) == 4
    assert await ledger.group_messages("s", g2) == []
    assert [v.content for v in await ledger.state_versions("s")] == ["STATE one"]
    assert (await ledger.current_state("s")).content == "STATE one"  # type: ignore[union-attr]
    assert _gids(await ledger.window("s", 5)) == [g1]
    await _totals_consistent(ledger)


async def test_current_state_follows_drop_restore_and_remove(ledger: Ledger) -> None:
    assert await ledger.current_state("s") is None
    g1 = await _group(ledger, "s", "one")
    v1 = await ledger.add_state("s", g1, "STATE 1")
    g2 = await _group(ledger, "s", "two")
    v2 = await ledger.add_state("s", g2, "STATE 2")
    assert v1.id < v2.id and (v1.group_id, v2.group_id) == (g1, g2)
    assert await ledger.current_state("s") == v2

    await ledger.set_group_dropped("s", g2, True)
    assert await ledger.current_state("s") == v1
    await ledger.set_group_dropped("s", g2, False)
    assert await ledger.current_state("s") == v2

    await ledger.set_group_dropped("s", g1, True)  # an older group does not matter
    assert await ledger.current_state("s") == v2
    await ledger.set_group_dropped("s", g2, True)
    assert await ledger.current_state("s") is None  # both producers hidden
    await ledger.set_group_dropped("s", g1, False)
    assert await ledger.current_state("s") == v1

    await ledger.set_group_dropped("s", g2, False)
    await ledger.remove_group("s", g2)
    assert await ledger.current_state("s") == v1
    await ledger.remove_group("s", g1)
    assert await ledger.current_state("s") is None


async def test_state_without_group_and_stored_record(ledger: Ledger) -> None:
    version = await ledger.add_state("s", None, "STATE by rebuild")
    assert await ledger.current_state("s") == version  # the returned record is what is stored
    assert await ledger.state_versions("s") == [version]
    gid = await _group(ledger, "s")
    await ledger.add_state("s", gid, "STATE by group")
    await ledger.set_group_dropped("s", gid, True)
    assert await ledger.current_state("s") == version
    assert await ledger.current_state("other") is None


# --- per-session token totals --------------------------------------------------------


async def test_token_totals_follow_every_change(ledger: Ledger) -> None:
    rnd = random.Random(3)
    groups: dict[str, list[int]] = {"a": [], "b": []}
    for step in range(120):
        session = rnd.choice(["a", "b"])
        op = rnd.random()
        if op < 0.35 or not groups[session]:
            user = await ledger.append_user(session, "u" * rnd.randint(0, 50))
            groups[session].append(user.id)
        elif op < 0.55:
            gid = rnd.choice(groups[session])
            await ledger.append(
                session,
                gid,
                [
                    NewMessage("assistant", "x" * rnd.randint(0, 80))
                    for _ in range(rnd.randint(1, 3))
                ],
            )
        elif op < 0.65:
            rows = await ledger.session_messages(session)
            await ledger.update_message(rnd.choice(rows).id, tokens=rnd.randint(0, 500))
        elif op < 0.72:
            rows = await ledger.session_messages(session)
            await ledger.update_message(rnd.choice(rows).id, content="y" * rnd.randint(0, 90))
        elif op < 0.82:
            await ledger.set_group_dropped(session, rnd.choice(groups[session]), rnd.random() < 0.5)
        elif op < 0.9:
            gid = groups[session].pop(rnd.randrange(len(groups[session])))
            await ledger.remove_group(session, gid)
        elif op < 0.93:
            await ledger.append(session, None, [NewMessage("system", "note", tokens=11)])
        elif op < 0.95:
            await ledger.clear_session(session)
            groups[session].clear()
        elif op < 0.97 and not await ledger.get_session(f"{session}-{step}"):
            await ledger.clone_session(session, f"{session}-{step}")
        await _totals_consistent(ledger)
    listed = {s.name: s.tokens for s in await ledger.list_sessions()}
    for name, tokens in listed.items():
        assert tokens == sum(m.tokens for m in await ledger.session_messages(name))
    assert await ledger._all("PRAGMA foreign_key_check") == []


# --- history search ------------------------------------------------------------------


async def test_search_history_across_sessions_case_insensitive(ledger: Ledger) -> None:
    a = await ledger.append_user("alpha", "How do I Configure the Parser?")
    b = await ledger.append_user("beta", "the parser config lives in parser.toml")
    (c,) = await ledger.append("beta", b.id, [NewMessage("assistant", "PARSER settings: none")])
    await ledger.append_user("gamma", "unrelated")
    hits = await ledger.search_history("parser")
    assert [h.message_id for h in hits] == [c.id, b.id, a.id]  # newest first
    assert [(h.session, h.group_id) for h in hits] == [
        ("beta", b.id),
        ("beta", b.id),
        ("alpha", a.id),
    ]
    assert hits[0].role == "assistant" and "PARSER" in hits[0].snippet
    assert [h.message_id for h in await ledger.search_history("PaRsEr", role="user")] == [
        b.id,
        a.id,
    ]
    assert [h.message_id for h in await ledger.search_history("parser", limit=1)] == [c.id]
    assert await ledger.search_history("nothing like this") == []
    assert await ledger.search_history("") == []


async def test_search_history_snippet_shows_the_hit(ledger: Ledger) -> None:
    text = "x" * 500 + " the needle is here " + "y" * 500
    await ledger.append_user("s", text)
    (hit,) = await ledger.search_history("NEEDLE")
    assert "needle" in hit.snippet and len(hit.snippet) <= 80


async def test_search_history_snippet_starts_at_a_word(ledger: Ledger) -> None:
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
    await ledger.append_user("s", f"{words} the needle is here")
    (hit,) = await ledger.search_history("needle")
    # 30 characters before the hit fall inside "hotel": the snippet starts at "hotel".
    assert hit.snippet.startswith("…hotel india") and "needle" in hit.snippet
    # One unbroken run longer than the reach: the snippet starts after it.
    await ledger.append_user("t", "z" * 80 + " pin here")
    (hit,) = await ledger.search_history("pin")
    assert hit.snippet == "…pin here"


async def test_search_history_skips_dropped_rows(ledger: Ledger) -> None:
    gid = await _group(ledger, "s", "secret plan")
    await ledger.set_group_dropped("s", gid, True)
    assert await ledger.search_history("secret") == []
    await ledger.set_group_dropped("s", gid, False)
    assert len(await ledger.search_history("secret")) == 3  # prompt, call and result


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("100%", ["100% done"]),
        ("%", ["100% done"]),
        ("a_b", ["a_b"]),
        ("_", ["a_b"]),
        ("\\", ["back\\slash"]),
        ("'", ["it's"]),
        ('"', ['say "x"']),
        ("[1]", ["list[1]"]),
    ],
)
async def test_search_history_wildcards_are_literal(
    ledger: Ledger, query: str, expected: list[str]
) -> None:
    for text in ("100% done", "1000 done", "a_b", "axb", "back\\slash", "it's", 'say "x"'):
        await ledger.append_user("s", text)
    await ledger.append_user("s", "list[1]")
    await ledger.append_user("s", "list1")
    assert [h.snippet for h in await ledger.search_history(query)] == expected


async def test_search_history_unicode_case(ledger: Ledger) -> None:
    await ledger.append_user("s", "Ärger über die Straße")
    await ledger.append_user("t", "ΣΟΦΊΑ and ascii Text")
    (hit,) = await ledger.search_history("ärger")
    assert hit.session == "s" and hit.snippet.startswith("Ärger")
    assert [h.session for h in await ledger.search_history("STRAßE")] == ["s"]
    assert [h.session for h in await ledger.search_history("σοφία")] == ["t"]
    assert [h.session for h in await ledger.search_history("TEXT")] == ["t"]  # ASCII: LIKE
    assert await ledger.search_history("ärger", role="assistant") == []
    assert await ledger.search_history("öl") == []


# --- usage ---------------------------------------------------------------------------


async def test_usage_totals(ledger: Ledger) -> None:
    gid = await _group(ledger, "a")
    first = await ledger.record_usage("a", gid, "openai", "gpt-4o", 100, 10, 50)
    assert (first.session, first.group_id, first.prompt_tokens) == ("a", gid, 100)
    await ledger.record_usage("a", gid, "openai", "gpt-4o", 200, 20)
    await ledger.record_usage("a", None, "gemini", "gemini-2.5-flash", 7, 3, 1)
    await ledger.record_usage("b", None, "openai", "gpt-4o", 1000, 100, 0)
    a = await ledger.usage_totals("a")
    assert [(t.provider, t.model, t.calls, t.prompt_tokens, t.completion_tokens) for t in a] == [
        ("gemini", "gemini-2.5-flash", 1, 7, 3),
        ("openai", "gpt-4o", 2, 300, 30),
    ]
    assert [t.cached_tokens for t in a] == [1, 50]
    everywhere = {(t.provider, t.model): t for t in await ledger.usage_totals()}
    assert everywhere[("openai", "gpt-4o")].calls == 3
    assert everywhere[("openai", "gpt-4o")].prompt_tokens == 1300
    assert await ledger.usage_totals("nobody") == []
    assert await ledger.prompt_token_series("a") == [100, 200, 7]
    assert await ledger.prompt_token_series("a", limit=2) == [200, 7]


async def test_long_texts_are_counted_off_the_event_loop(tmp_path: Path):
    """A 10 MB paste or a 5 MB tool output must not hold the UI while it is counted."""
    import asyncio

    from slop_tui.ledger.history import THREAD_COUNT_CHARS

    seen: list[tuple[int, bool]] = []

    def count(text: str) -> int:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        seen.append((len(text), on_loop))
        return len(text) // 4

    ledger = await Ledger.open(tmp_path / "l.db", count_tokens=count)
    try:
        big = "x" * (THREAD_COUNT_CHARS + 1)
        user = await ledger.append_user("s", big)
        rows = await ledger.append(
            "s",
            user.group_id,
            [
                NewMessage(role="tool", content=big + "y", tool_call_id="c1", tool_name="t"),
                NewMessage(role="assistant", content="short answer"),
            ],
        )
        assert dict(seen) == {len(big): False, len(big) + 1: False, len("short answer"): True}
        assert user.tokens == len(big) // 4 and rows[0].tokens == (len(big) + 1) // 4
    finally:
        await ledger.close()


async def test_a_write_cancelled_while_begin_is_queued_leaves_no_open_transaction(ledger):
    """Esc or quitting can cancel a write at any await; the next write must still work."""
    import asyncio

    async def write() -> None:
        await ledger.set_scratchpad("s", "never")

    for _ in range(3):
        task = asyncio.create_task(write())
        # Run the task up to its first suspension: BEGIN IMMEDIATE is queued on the
        # connection's thread, and the task is waiting for it.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await ledger.set_scratchpad("s", "kept")
    session = await ledger.get_session("s")
    assert session is not None and session.scratchpad == "kept"


async def test_group_rows_read_the_newest_prompts_and_the_rest_on_demand(ledger):
    """`prompts_for_newest` leaves the older groups' prompts out (None); `group_prompts`
    reads them; together they are the full read. Other sessions stay out."""
    gids = [await _group(ledger, "s", f"prompt {i} " + "x" * 300) for i in range(6)]
    await _group(ledger, "other", "not this session")
    full = await ledger.group_rows("s", 20)
    part = await ledger.group_rows("s", 20, prompts_for_newest=2)
    assert [r[0] for r in part] == [r[0] for r in full] == gids
    assert [r[2] for r in part] == [None] * 4 + ["prompt 4 " + "x" * 11, "prompt 5 " + "x" * 11]
    assert [r[3:] for r in part] == [r[3:] for r in full]  # counts, tokens, status, time
    rest = await ledger.group_prompts("s", below=gids[4], prompt_chars=20)
    assert rest == {gid: f"prompt {i} " + "x" * 11 for i, gid in enumerate(gids[:4])}
    merged = [(r[0], r[1], rest.get(r[0], r[2]), *r[3:]) for r in part]
    assert merged == full
    assert await ledger.group_rows("s", 20, prompts_for_newest=50) == full


async def test_group_ids_are_the_group_rows_ids_read_from_an_index(ledger):
    """The conversation's first screen reads only the ids: those of `group_rows`, oldest
    first, this session's only, read from an index without the table's rows."""
    gids = [await _group(ledger, "s", f"prompt {i}") for i in range(4)]
    await _group(ledger, "other", "not this session")
    assert await ledger.group_ids("s") == [r[0] for r in await ledger.group_rows("s")] == gids
    assert await ledger.group_ids("nobody") == []
    plan = await ledger._all(
        "EXPLAIN QUERY PLAN SELECT DISTINCT group_id FROM messages "
        "WHERE session_id = 's' AND group_id IS NOT NULL ORDER BY group_id"
    )
    assert any("COVERING INDEX" in row["detail"] for row in plan)


# Prompts JSON text cannot carry as they are: quotes, backslashes, every control
# character, the line and paragraph separators, JSON written out, emoji (a joined one
# too), a combining mark, the last plane's characters.
AWKWARD_PROMPTS = [
    'say "hi" \\ and \\"quoted\\" \\u0041 \\n',
    "lines\nand\ttabs\r\n" + "".join(map(chr, range(1, 32))) + "\x7f",
    "\u2028\u2029 \ufeff \U0010fffd",
    "\U0001f642\U0001f469\u200d\U0001f4bb e\u0301",
    '[1, 2] {"a": null} null',
]
# Times whose float needs all 17 digits (JSON's own numbers in SQLite keep 15).
AWKWARD_TIMES = [1764514621.1234567, 0.1, 1e-7, 123456789012.34567, 1764514621.0 + 2**-20]


async def test_the_group_reads_give_back_awkward_prompts_and_times_exactly(ledger):
    """The group list's reads come as one row of JSON arrays: each prompt reads back as
    stored (its first `prompt_chars` characters), each time to the float's last bit,
    the rows as `list_groups` reads them one by one."""
    gids = [await _group(ledger, "s", text) for text in AWKWARD_PROMPTS]
    for gid, t in zip(gids, AWKWARD_TIMES, strict=True):
        await ledger._db.execute("UPDATE messages SET created_at = ? WHERE group_id = ?", (t, gid))
    await ledger._db.commit()
    rows = await ledger.group_rows("s", 500)
    assert [r[2] for r in rows] == AWKWARD_PROMPTS
    assert [r[6] for r in rows] == AWKWARD_TIMES
    assert [GroupSummary(*r) for r in rows] == (await ledger.list_groups("s"))[::-1]
    assert all(type(v) is type(w) for r in rows for v, w in zip(r, rows[0], strict=True))
    short = await ledger.group_rows("s", 3, prompts_for_newest=2)
    assert [r[2] for r in short] == [None] * 3 + [t[:3] for t in AWKWARD_PROMPTS[3:]]
    prompts = await ledger.group_prompts("s", below=gids[-1] + 1, prompt_chars=500)
    assert prompts == dict(zip(gids, AWKWARD_PROMPTS, strict=True))
    assert await ledger.group_prompts("s", below=gids[0]) == {}
    assert await ledger.group_rows("nobody") == []


async def test_the_spend_is_every_call_and_its_background_calls_apart(ledger):
    """The session's spend and the day's: known cost and saving summed, the calls with
    no price and those with no usage counted, each for every call and for the
    background calls apart; another session's calls stay out of the session's."""

    def cost(total: float, saved: float) -> UsageCost:
        return UsageCost(total / 2, 0.0, total / 2, 0.0, saved, "test")

    calls = [  # (session, purpose, reported, cost): sums exact in binary
        ("s", "turn", True, cost(0.25, 0.125)),
        ("s", "turn", True, None),  # no price
        ("s", "turn", False, None),  # no usage reported
        ("s", "summary", True, cost(0.5, 0.0)),
        ("s", "compaction", True, None),
        ("s", "boundary", False, None),
        ("s", "rebuild", False, cost(0.0625, 0.03125)),  # no usage, priced all the same
        ("other", "turn", True, cost(4.0, 1.0)),
    ]
    for session, purpose, reported, c in calls:
        await ledger.record_usage(
            session, None, "openai", "m", 10, 5, purpose=purpose, reported=reported, cost=c
        )

    def spend(rows: list) -> Spend:
        return Spend(
            len(rows),
            sum(c.total for *_, c in rows if c is not None),
            sum(c.saved for *_, c in rows if c is not None),
            sum(1 for *_, reported, c in rows if reported and c is None),
            sum(1 for *_, reported, _c in rows if not reported),
        )

    def expected(rows: list) -> Spend:
        return replace(spend(rows), background=spend([r for r in rows if r[1] != "turn"]))

    assert await ledger.spend("s") == expected(calls[:-1])
    assert await ledger.spend_since(0) == expected(calls)
    assert await ledger.spend("nobody") == Spend(background=Spend())
    assert await ledger.spend_since(time.time() + 60) == Spend(background=Spend())


async def test_the_group_list_read_never_reads_the_message_rows(ledger):
    """The group list's columns come from `ix_messages_group_list` alone (the prompt is
    read per group, by id): a long session's contents are not walked."""
    plan = await ledger._all(
        "EXPLAIN QUERY PLAN SELECT m.group_id, MIN(m.lane), COUNT(*), SUM(m.tokens), "
        "MAX(m.status), MIN(m.created_at) FROM messages m WHERE m.session_id = 's' "
        "AND m.group_id IS NOT NULL GROUP BY m.group_id ORDER BY m.group_id"
    )
    assert any("COVERING INDEX ix_messages_group_list" in row[3] for row in plan)


async def test_the_shown_groups_snapshots_are_found_by_group(ledger, monkeypatch):
    """The conversation reads the token snapshot of the groups it shows: the last turn
    call of each, this session's only, found through an index on the session and the
    group, not by reading every call of the session (10,000 at 20,000 messages)."""
    gids = [await _group(ledger, "s", f"prompt {i}") for i in range(3)]
    other = await _group(ledger, "other", "not this session")
    for i, gid in enumerate(gids):
        await ledger.record_usage("s", gid, "openai", "m", 100 + i, 10)
        await ledger.record_usage("s", gid, "openai", "m", 200 + i, 20)  # the group's last
    await ledger.record_usage("s", gids[0], "openai", "m", 999, 99, purpose="summary")
    await ledger.record_usage("other", other, "openai", "m", 5, 5)
    reads: list[tuple[str, tuple]] = []
    real = ledger._tuples

    async def tuples(sql, params=()):
        reads.append((sql, tuple(params)))
        return await real(sql, params)

    monkeypatch.setattr(ledger, "_tuples", tuples)
    shown = await ledger.group_snapshots("s", [gids[1], gids[2], other])
    assert shown == {gids[1]: (201, 20), gids[2]: (202, 20)}
    [(sql, params)] = reads
    plan = [row[3] for row in await ledger._all(f"EXPLAIN QUERY PLAN {sql}", params)]
    assert any("INDEX ix_usage_session_group (session_id=? AND group_id=?" in p for p in plan)
    assert not any("ix_usage_session (session_id=?)" in p for p in plan)
