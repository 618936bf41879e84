"""Two workspace processes on one project database, both running real turns
and pruning (soft drop, hard remove) at the same time: no "database is locked"
reaches either user, no row is lost, and each sees the other's work after a refresh.

The children are tests/fault_child.py `turns`: a real Workspace and Orchestrator
each, talking to the fake server of this process; they start together on a file
marker so their writes really interleave.
"""

from __future__ import annotations

import json
from pathlib import Path

from slop_tui.ledger import Ledger
from tests.fakeserver import Reply
from tests.fault_support import (
    CHILD,
    child_env,
    counters_match,
    integrity,
    openai_env,
    orphan_calls,
    query,
    spawn,
)
from tests.workspace_fixtures import open_workspace

TURNS = 6


def _answer(req) -> Reply:
    """Every request gets an answer naming its prompt (compaction calls included)."""
    users = [m for m in req.messages if m["role"] == "user"]
    last = users[-1]["content"].splitlines()[-1] if users else "?"
    return Reply(text=f"answer to {last}")


async def test_two_workspaces_turn_and_prune_on_one_database(tmp_path: Path, fake_llm) -> None:
    db = tmp_path / ".slop" / "slop.db"
    async with await Ledger.open(db):  # created before, so neither child migrates
        pass
    fake_llm.default_reply = _answer
    env = child_env(tmp_path, openai_env(fake_llm))
    go = tmp_path / "go"
    names = ["alpha", "bravo"]
    done = {n: tmp_path / f"{n}.done" for n in names}
    procs = {}
    try:
        for me, other in (names, names[::-1]):
            procs[me] = spawn(
                [
                    str(CHILD),
                    "turns",
                    me,
                    str(db),
                    str(go),
                    str(done[me]),
                    str(done[other]),
                    str(TURNS),
                ],
                cwd=tmp_path,
                env=env,
            )
        for name, proc in procs.items():
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == "ready", f"{name}: {line!r} {proc.stderr.read()}"
        go.touch()
        results = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"{name} exit {proc.returncode}: {err}"
            assert "locked" not in err and "Traceback" not in err, err
            results[name] = json.loads(out.strip().splitlines()[-1])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()  # closes its pipes

    for name, r in results.items():
        assert r["errors"] == [], (name, r["errors"])
        assert len(r["groups"]) == TURNS and len(r["dropped"]) == TURNS // 3
        assert len(r["removed"]) == TURNS // 4

    # The writers overlapped: their groups interleave in id order.
    owner = {g: n for n, r in results.items() for g in r["groups"]}
    order = [owner[g] for g in sorted(owner)]
    assert sum(a != b for a, b in zip(order, order[1:], strict=False)) >= 2, order

    assert integrity(db) == "ok"
    counters_match(db)
    removed = {g for r in results.values() for g in r["removed"]}
    dropped = {g for r in results.values() for g in r["dropped"]} - removed
    kept = set(owner) - removed
    async with await Ledger.open(db) as led:
        rows = await led.session_messages("default_session")
    by_group: dict[int, list] = {}
    for m in rows:
        by_group.setdefault(m.group_id, []).append(m)
    assert set(by_group) == kept  # no row lost, nothing removed came back
    for gid, msgs in by_group.items():
        prompt = msgs[0].content
        assert [m.role for m in msgs] == ["user", "assistant"], (gid, msgs)
        assert prompt.startswith(owner[gid]) and msgs[1].content == f"answer to {prompt}"
        # Rows that left the window may be folded into the lane summary meanwhile.
        want = {"dropped"} if gid in dropped else {"completed", "summarized"}
        assert {m.status for m in msgs} <= want, (gid, want, msgs)
    assert not orphan_calls(rows)
    assert not query(db, "SELECT key FROM app_state WHERE key LIKE 'inflight/%'")

    # After a refresh each process lists the other's groups too, with their status
    # (the other's drops included).
    for r in results.values():
        seen = {int(k): v for k, v in r["seen"].items()}
        assert set(seen) == kept
        for gid in kept:
            assert seen[gid][0].startswith(owner[gid])
            assert (seen[gid][1] == "dropped") == (gid in dropped)


async def test_a_turn_request_ends_with_its_own_prompt_when_another_workspace_wrote_since(
    tmp_path: Path,
) -> None:
    """The bug the test above found: process B opened a group after A's turn began, and
    A's request ended with B's prompt as the current request."""
    a = await open_workspace(tmp_path)
    b = await open_workspace(tmp_path)
    try:
        await a.ledger.set_window(a.session, 2)
        old = [(await a.ledger.append_user(a.session, f"old {i}")).id for i in range(3)]
        mine = await a.ledger.append_user(a.session, "A asks")
        await b.ledger.append_user(b.session, "B asks")  # B's turn starts meanwhile
        await b.ledger.append_user(b.session, "B asks again")
        plan = await a.plan(upto=mine.id)
        users = [m.text for m in plan.request.messages if m.role == "user"]
        assert users[-1].endswith("A asks") and "B asks" not in "".join(users)
        # still two groups in the window, the older one; the two before it left the
        # strict window: not sent, listed until a summary covers them
        assert plan.window_groups == {old[2], mine.id}
        assert plan.waiting
        assert set(plan.unsent_backlog) == {old[0], old[1]}
        # Without the turn's group (e.g. /context show) the newest groups are shown.
        users = [m.text for m in (await a.prompt()).messages if m.role == "user"]
        assert users[-1].endswith("B asks again")
    finally:
        await a.close()
        await b.close()
