"""Child programs of the fault tests (tests/test_faults_*.py); not a test module.

python tests/fault_child.py hold-commit DB PROMPT
    One real turn (`run_headless_turn`, provider from the environment) whose
    final answer's transaction is held open just before COMMIT: prints
    `holding <wal bytes>` and waits to be killed. The page cache is made
    tiny so the uncommitted rows spill into the WAL file first.

python tests/fault_child.py write-loop DB
    Ledger writes without end, like the app's turns: a prompt, a tool-call
    row, its result and an answer per group, each its own transaction, the
    contents large enough to take several pages. Prints `group <n>` after
    each group; killed by the parent at some point.

python tests/fault_child.py turns NAME DB GO DONE OTHER_DONE TURNS
    One workspace process of two on one database: after GO exists, TURNS
    real turns (prompt "NAME turn i") with pruning through the command
    dispatcher (every 3rd turn drops the previous own group, every 4th
    removes one), then DONE is written; after OTHER_DONE exists, a refresh
    (`/message list`) of what both wrote. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path


async def _wait_file(path: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"no {path} within {timeout} s")
        await asyncio.sleep(0.005)


async def _workspace(db: str):
    from slop_tui.config import load_config
    from slop_tui.workspace import Workspace

    return await Workspace.open(load_config(db=db))


async def hold_commit(db: str, prompt: str) -> None:
    from slop_tui.ledger.core import LedgerBase
    from slop_tui.orchestrator import run_headless_turn

    original = LedgerBase.transaction

    @contextlib.asynccontextmanager
    async def transaction(self):
        async with original(self) as conn:
            yield conn
            cur = await conn.execute(
                "SELECT COUNT(*) FROM messages WHERE role='assistant' AND status='completed'"
            )
            if (await cur.fetchone())[0]:  # the final answer is written, not committed
                wal = Path(f"{db}-wal")
                print(f"holding {wal.stat().st_size if wal.exists() else 0}", flush=True)
                await asyncio.sleep(600)

    LedgerBase.transaction = transaction
    ws = await _workspace(db)
    await ws.ledger._db.execute("PRAGMA cache_size=20")  # 80 KB: big writes spill to the WAL
    await run_headless_turn(ws, prompt)
    print("finished without holding", flush=True)


async def write_loop(db: str) -> None:
    from slop_tui.ledger import Ledger
    from slop_tui.records import NewMessage

    ledger = await Ledger.open(db)
    body = "".join(f"line {i} of a long tool result\n" for i in range(600))  # ~18 KB
    n = len(await ledger.list_groups("loop"))  # numbering goes on after an earlier kill
    while True:
        user = await ledger.append_user("loop", f"prompt {n}")
        payload = json.dumps(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                    }
                ],
            }
        )
        await ledger.append(
            "loop",
            user.id,
            [
                NewMessage(
                    "assistant",
                    "",
                    status="tool_call",
                    payload=payload,
                    tool_call_id=f"c{n}",
                    tool_name="read_file",
                    strategy="openai",
                )
            ],
        )
        await ledger.append(
            "loop",
            user.id,
            [
                NewMessage(
                    "tool",
                    f"{n}:{body}",
                    tool_call_id=f"c{n}",
                    tool_name="read_file",
                    strategy="openai",
                ),
                NewMessage("assistant", f"answer {n}: " + body[: 4000 + n % 3000]),
            ],
        )
        print(f"group {n}", flush=True)
        n += 1


async def turns(name: str, db: str, go: str, done: str, other: str, count: int) -> None:
    from slop_tui.commands import dispatch
    from slop_tui.orchestrator import Orchestrator

    ws = await _workspace(db)
    orch = Orchestrator(ws, approve="reads")
    out: dict = {"name": name, "groups": [], "dropped": [], "removed": [], "errors": []}
    try:
        # Imports and the tokenizer load before the start, so the turns overlap.
        provider, _ = await orch.provider()
        provider._get_client()
        ws.ledger.count_tokens("warm up")
        print("ready", flush=True)
        await _wait_file(go)
        started = time.monotonic()
        for i in range(count):
            outcome = await orch.run_turn(f"{name} turn {i}")
            await orch.wait_background()
            if outcome.error:
                out["errors"].append(outcome.error)
            out["groups"].append(outcome.group_id)
            if i % 3 == 2:
                gid = out["groups"][-2]
                res = await dispatch(ws, f"/context drop {gid}")
                (out["dropped"] if res.ok else out["errors"]).append(gid if res.ok else res.text)
            if i % 4 == 3:
                gid = out["groups"][-4]
                res = await dispatch(ws, f"/message remove {gid}")
                (out["removed"] if res.ok else out["errors"]).append(gid if res.ok else res.text)
        out["seconds"] = round(time.monotonic() - started, 2)
        Path(done).write_text("done")
        await _wait_file(other)
        listed = await dispatch(ws, "/message list 1000")  # the refresh: read the ledger again
        out["seen"] = {g.group_id: [g.prompt, g.status] for g in listed.data}
    finally:
        await orch.aclose()
        await ws.close()
    print(json.dumps(out), flush=True)


def main(argv: list[str]) -> None:
    mode, rest = argv[0], argv[1:]
    if mode == "hold-commit":
        asyncio.run(hold_commit(*rest))
    elif mode == "write-loop":
        asyncio.run(write_loop(*rest))
    elif mode == "turns":
        asyncio.run(turns(*rest[:5], int(rest[5])))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
