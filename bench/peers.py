"""The peers on the same clock: elia and oterm show the same conversation as slop-tui.

    python bench/peers.py [--runs N] [--sizes 2k[,20k]] [--timeout S] [--cache DIR]

Optional, and part of neither `make test` nor `make bench`: it installs the peers
from PyPI (once, into their own virtualenvs under `--cache`, default
`$XDG_CACHE_HOME/slop-tui-bench/peers`, outside the repository) and a start of
one of them can take minutes.

The conversation is bench/screen.py's (bench/tui.py's ledger: groups of a user
prompt, an assistant tool call, a tool result and a final answer, 300-1,500
characters each, a fenced code block in about a third of the answers, a marker
word at the end of the last answer). Each peer stores it through its own
storage code, run in its own virtualenv: elia's SQLModel DAOs (`ChatDao`,
`MessageDao`), oterm's `Store.save_chat` / `save_message`. The stores are
built once per size and kept in the cache; each start gets a copy. Neither has a tool
role: tool results are stored as user messages, so the message count and the
text are the same.

Measured exactly as bench/screen.py measures slop-tui (bench/_term.py: the real
console script in a 120x40 pty, read by pyte, wall time from just before the
spawn): until the marker is on screen and nothing changes for 0.6 s, and VmHWM
then. elia opens on its chat list: the bench clicks the chat's title and
presses Enter, as a user would (the time still runs from the spawn); oterm
opens its saved chats by itself. slop-tui starts in the same
run, interleaved. A start that has not shown the marker after `--timeout`
seconds (default 240) is reported as at least that long, with its memory then.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import _common as c
import screen
import tui
from _term import Term, click, environment, status_kb

# What a peer is: its package, its console script, the data folder variable its
# storage reads, and the loader run with its own interpreter (argv: the JSON file).
ELIA_LOADER = """
import asyncio, datetime, json, sys
from elia_chat.database.database import create_database, get_session
from elia_chat.database.models import ChatDao, MessageDao

async def main(path):
    messages = json.load(open(path))
    await create_database()
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    async with get_session() as session:
        chat = ChatDao(model="gpt-4o", title="bench conversation", started_at=t0)
        session.add(chat)
        await session.commit()
        for i, m in enumerate(messages):
            session.add(MessageDao(chat_id=chat.id, role=m["role"], content=m["content"],
                                   model="gpt-4o",
                                   timestamp=t0 + datetime.timedelta(seconds=i)))
        await session.commit()

asyncio.run(main(sys.argv[1]))
"""

OTERM_LOADER = """
import asyncio, json, sys
from oterm.store.store import Store
from oterm.types import ChatModel, MessageModel

async def main(path):
    messages = json.load(open(path))
    store = await Store.get_store()
    chat_id = await store.save_chat(ChatModel(name="bench conversation", model="llama3.1"))
    for m in messages:
        await store.save_message(MessageModel(chat_id=chat_id, role=m["role"], text=m["content"]))

asyncio.run(main(sys.argv[1]))
"""


@dataclass
class Peer:
    name: str
    package: str
    command: str
    data_var: str  # where its storage lives: the variable, set to a folder
    data_sub: str  # the folder its files are in, under that
    loader: str
    # From its first screen to the conversation: key names, or "click" (on first_screen)
    open_keys: tuple[str, ...] = ()
    first_screen: str = ""  # text that says the first screen is up


PEERS = [
    Peer(
        "elia",
        "elia-chat==1.10.0",
        "elia",
        "XDG_DATA_HOME",
        "elia",
        ELIA_LOADER,
        open_keys=("click", "enter"),
        first_screen="bench conversation",
    ),
    Peer("oterm", "oterm==0.26.1", "oterm", "OTERM_DATA_DIR", "", OTERM_LOADER),
]


def ensure_venv(cache: Path, peer: Peer) -> Path:
    """The peer's virtualenv (created and installed from PyPI on first use)."""
    venv = cache / peer.name
    if not (venv / "bin" / peer.command).exists():
        print(f"installing {peer.package} into {venv} …", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", peer.package],
            check=True,
        )
    return venv


def conversation(template: Path, session: str) -> list[dict[str, str]]:
    """The session's messages as (role, content), tool results as user messages."""
    db = sqlite3.connect(template)
    try:
        rows = db.execute(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (session,)
        ).fetchall()
    finally:
        db.close()
    return [{"role": "user" if r == "tool" else r, "content": text} for r, text in rows]


def build_store(venv: Path, peer: Peer, messages: list[dict], folder: Path) -> float:
    """The peer's own storage, filled with `messages` by its own code; seconds taken."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "conversation.json"
    data.write_text(json.dumps(messages))
    env = environment(**{peer.data_var: str(folder / "data")})
    t = time.perf_counter()
    subprocess.run(
        [str(venv / "bin" / "python"), "-c", peer.loader, str(data)],
        check=True,
        env=env,
        cwd=folder,
        timeout=3600,
    )
    return time.perf_counter() - t


@dataclass
class Start:
    shown: float | None  # s; None: not within the timeout
    rss_mb: float
    note: str = ""


def measure_peer(venv: Path, peer: Peer, store: Path, work: Path, marker: str, timeout: float):
    run_dir = work / f"{peer.name}-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.copytree(store / "data", run_dir / "data")
    env = environment(
        **{
            peer.data_var: str(run_dir / "data"),
            "XDG_CONFIG_HOME": str(run_dir / "config"),
            "HOME": str(run_dir),
        }
    )
    term = Term([str(venv / "bin" / peer.command)], env=env, cwd=str(run_dir))
    try:
        deadline = time.perf_counter() + timeout
        if peer.open_keys:
            if term.pump(lambda t: t.find(peer.first_screen) is not None, timeout) is None:
                return Start(None, (status_kb(term.pid, "VmHWM") or 0) / 1024, "no chat list")
            term.settle(0.3, max(1.0, deadline - time.perf_counter()))
            for key in peer.open_keys:
                if key == "click":  # on the chat's title in the list, as a user would
                    x, y = term.find(peer.first_screen) or (0, 0)
                    term.send(click(x + 2, y))
                    term.settle(0.3, max(1.0, deadline - time.perf_counter()))
                else:
                    term.send(key)
        left = max(1.0, deadline - time.perf_counter())
        if term.pump(lambda t: t.find(marker) is not None, left) is None:
            return Start(None, (status_kb(term.pid, "VmHWM") or 0) / 1024, "marker not shown")
        last = term.settle(screen.QUIET_S, max(1.0, deadline - time.perf_counter()))
        rss = (status_kb(term.pid, "VmHWM") or 0) / 1024
        if last is None:
            return Start(None, rss, "still changing at the timeout")
        return Start(last - term.t0, rss)
    finally:
        term.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="starts per app and size (5)")
    ap.add_argument("--sizes", default="2k", help="comma-separated: 2k, 20k (2k)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds a start may take")
    ap.add_argument("--peers", default="elia,oterm")
    ap.add_argument(
        "--cache",
        default=str(
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            / "slop-tui-bench"
            / "peers"
        ),
    )
    args = ap.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    peers = [p for p in PEERS if p.name in args.peers.split(",")]
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    started, load = time.perf_counter(), os.getloadavg()
    venvs = {p.name: ensure_venv(cache, p) for p in peers}

    work = Path(tempfile.mkdtemp(prefix="slop-tui-peers-"))
    try:
        template = work / "template.db"
        asyncio.run(tui.build(template, False))
        screen.mark_ledger(template)
        stores: dict[tuple[str, str], Path] = {}
        for size in sizes:
            messages = conversation(template, size)
            for p in peers:
                folder = cache / "stores" / f"{p.name}-{size}-v1"
                if not (folder / "data").exists():
                    took = build_store(venvs[p.name], p, messages, folder)
                    print(
                        f"{p.name}: {len(messages):,} messages stored in {took:.0f} s", flush=True
                    )
                stores[(p.name, size)] = folder
        config = work / "config.toml"
        config.write_text("")
        starter = screen.Starter(work, template, config)
        screen.measure_start(starter, "2k", "warmup", keys=0, timeout=60)
        results: dict[tuple[str, str], list[Start]] = {}
        for i in range(args.runs):
            for size in sizes:
                r = screen.measure_start(starter, size, f"{size}-{i}", keys=0, timeout=60)
                results.setdefault(("slop-tui", size), []).append(
                    Start(r.shown, r.rss_shown_mb or 0.0, r.note)
                )
                for p in peers:
                    start = measure_peer(
                        venvs[p.name],
                        p,
                        stores[(p.name, size)],
                        work,
                        screen.MARK[size],
                        args.timeout,
                    )
                    results.setdefault((p.name, size), []).append(start)
                    print(
                        f"run {i + 1} {p.name} {size}: "
                        f"{'≥ ' + str(args.timeout) if start.shown is None else f'{start.shown:.2f}'} s, "
                        f"{start.rss_mb:.0f} MB {start.note}",
                        flush=True,
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results, sizes, args, load)
    print(
        f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"whole bench {time.perf_counter() - started:.0f} s"
    )


def report(results, sizes, args, load) -> None:
    print(f"\n# bench/peers.py: {c.machine()}, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in load)}")
    print(
        f"{args.runs} start(s) per app and size, interleaved; median (min–max); a start "
        f"that did not settle with the marker on screen within {args.timeout:.0f} s counts "
        "as that long (≥).\n"
    )
    rows = []
    for size in sizes:
        ours = [s.shown for s in results[("slop-tui", size)] if s.shown is not None]
        base = statistics.median(ours) if ours else None
        for app in ["slop-tui", *(p.name for p in PEERS if (p.name, size) in results)]:
            starts = results[(app, size)]
            shown = [args.timeout if s.shown is None else s.shown for s in starts]
            capped = any(s.shown is None for s in starts)
            med = statistics.median(shown)
            rows.append(
                [
                    app,
                    screen.LABEL[size],
                    f"{'≥ ' if capped and med >= args.timeout else ''}{med:.2f} s",
                    f"{min(shown):.2f}–{max(shown):.2f}" if len(shown) > 1 else "",
                    f"{statistics.median(s.rss_mb for s in starts):.0f} MB",
                    f"{'≥ ' if capped and med >= args.timeout else ''}{med / base:.0f}×"
                    if base
                    else "",
                    "; ".join(sorted({s.note for s in starts if s.note})),
                ]
            )
    print(
        c.table(
            ["app", "session", "shown", "range", "VmHWM", "÷ slop-tui", "notes"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
