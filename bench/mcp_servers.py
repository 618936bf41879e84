"""What MCP servers cost: at start-up, on the first turn, per call (not named mcp.py: the
script's folder comes first on sys.path and would shadow the SDK's package).

    .venv/bin/python bench/mcp_servers.py [--runs 5] [--calls 30]

1. start-up: `load_config` + `Workspace.open` (all the app does with the config before
   its first frame) with three stdio servers configured against none, alternating in
   one process (20 opens each per run); how many server processes exist then (must be
   0) and which MCP modules were imported (must be none).
2. first turn: starting one stdio server (`McpManager.ensure_started`, what the first
   turn that needs its tools waits for) in a fresh process: the SDK's import (in a
   thread), the process start, initialize and tools/list. The reference server
   `mcp-server-time`, outside the sandbox and in bubblewrap. Then the same with the
   SDK preloaded as the app does it after its first screen (`Workspace.preload_mcp`),
   for a first prompt sent after the import finished: what the turn still waits for.
   And the SDK's import alone: a cold `python -c` importing what the client imports.
3. per call: one `get_current_time` of mcp-server-time against the built-in
   `read_file` of a small file, both through their whole call path (result framed).

Writes the table to bench/results/mcp.md. A figure is the median and range of the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BIN = Path(sys.executable).parent
SERVER = BIN / "mcp-server-time"


def config_text(servers: int, sandbox: bool) -> str:
    out = []
    for i in range(servers):
        out.append(
            f'[mcp.servers.time{i}]\ncommand = "{SERVER}"\nargs = ["--local-timezone", "UTC"]\n'
            f'sandbox = {"true" if sandbox else "false"}\nstart_timeout = 120\napprove = "all"\n'
        )
    return "\n".join(out)


def project(tmp: Path, servers: int, sandbox: bool = False) -> dict[str, str]:
    (tmp / ".slop").mkdir(parents=True, exist_ok=True)
    (tmp / "config.toml").write_text(config_text(servers, sandbox))
    (tmp / "small.txt").write_text("hello\n" * 20)
    env = dict(os.environ)
    env["SLOP_CONFIG"] = str(tmp / "config.toml")
    return env


async def _open(tmp: Path, env: dict[str, str]):
    from slop_tui.config import load_config
    from slop_tui.workspace import Workspace

    config = load_config(db=str(tmp / ".slop" / "slop.db"), env=env, cwd=tmp)
    return await Workspace.open(config, env=env)


def _servers_running() -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                    if str(SERVER).encode() in fh.read():
                        count += 1
            except OSError:
                pass
    return count


async def child_startup(base: Path, opens: int) -> dict:
    """Open the workspace of each project in turn (`opens` times each, after one warm-up
    open of both): the medians, and whether MCP code or the SDK was imported."""
    env = dict(os.environ)
    times: dict[str, list[float]] = {"none": [], "three": []}
    for i in range(opens + 1):
        for name in times:
            env["SLOP_CONFIG"] = str(base / name / "config.toml")
            started = time.perf_counter()
            ws = await _open(base / name, env)
            took = time.perf_counter() - started
            await ws.close()
            if i:
                times[name].append(took * 1000)
    imported = sorted(m for m in sys.modules if m.startswith(("slop_tui.mcpclient", "mcp")))
    return {
        "none": statistics.median(times["none"]),
        "three": statistics.median(times["three"]),
        "running": _servers_running(),
        "imported": imported,
    }


async def child_first_turn(tmp: Path) -> dict:
    ws = await _open(tmp, dict(os.environ))
    try:
        from slop_tui.mcpclient.sdk import sdk_ready

        started = time.perf_counter()
        await sdk_ready()  # what ensure_started does first
        sdk = time.perf_counter() - started
        await ws.mcp.ensure_started()
        took = time.perf_counter() - started
        server = next(iter(ws.mcp.servers.values()))
        assert server.status == "running", server.error
        again = time.perf_counter()
        await ws.mcp.restart(server.name)
        restart = time.perf_counter() - again
        return {"ms": took * 1000, "sdk_ms": sdk * 1000, "restart_ms": restart * 1000}
    finally:
        await ws.close()


async def child_preloaded(tmp: Path) -> dict:
    """The app's path: the SDK preloaded after the first screen; the first prompt comes
    once the import is done (the user typing); the turn waits for the server's start."""
    ws = await _open(tmp, dict(os.environ))
    try:
        from slop_tui.mcpclient import preload_sdk

        started = time.perf_counter()
        assert ws.preload_mcp()
        await asyncio.wrap_future(preload_sdk())
        sdk = time.perf_counter() - started
        started = time.perf_counter()
        await ws.mcp.ensure_started()
        took = time.perf_counter() - started
        server = next(iter(ws.mcp.servers.values()))
        assert server.status == "running", server.error
        return {"ms": took * 1000, "sdk_ms": sdk * 1000}
    finally:
        await ws.close()


IMPORT_LINE = (
    "import logging; logging.getLogger('mcp').addHandler(logging.NullHandler()); "
    "import httpx2, mcp.client.client, mcp.client.stdio, mcp.client.streamable_http"
)


def cold_import_ms() -> float:
    """A fresh interpreter importing what the client imports, less an empty one's start."""
    times = []
    for code in (IMPORT_LINE, "pass"):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - started)
    return (times[0] - times[1]) * 1000


async def child_calls(tmp: Path, calls: int) -> dict:
    from slop_tui.tools import ToolContext, run_tool

    ws = await _open(tmp, dict(os.environ))
    try:
        await ws.mcp.ensure_started()
        ctx = ToolContext(ledger=ws.ledger, session=ws.session, project_root=tmp)
        name = next(iter(ws.mcp.servers.values())).name
        mcp_times, builtin_times = [], []
        for _ in range(calls):
            t = time.perf_counter()
            res = await ws.mcp.call(f"mcp__{name}__get_current_time", {"timezone": "UTC"})
            mcp_times.append(time.perf_counter() - t)
            assert res.ok, res.text
            t = time.perf_counter()
            res = await run_tool("read_file", {"path": "small.txt"}, ctx)
            builtin_times.append(time.perf_counter() - t)
            assert res.ok, res.text
        return {
            "mcp_ms": statistics.median(mcp_times) * 1000,
            "builtin_ms": statistics.median(builtin_times) * 1000,
        }
    finally:
        await ws.close()


def run_child(kind: str, tmp: Path, env: dict[str, str], *extra: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(tmp), *extra],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        raise SystemExit(f"{kind} child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--child", nargs="+")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mcp.md"))
    args = parser.parse_args()
    if args.child:
        kind, tmp = args.child[0], Path(args.child[1])
        if kind == "startup":
            result = asyncio.run(child_startup(tmp, int(args.child[2])))
        elif kind == "first":
            result = asyncio.run(child_first_turn(tmp))
        elif kind == "preloaded":
            result = asyncio.run(child_preloaded(tmp))
        else:
            result = asyncio.run(child_calls(tmp, int(args.child[2])))
        print(json.dumps(result))
        return
    from slop_tui.tools.sandbox import detect

    rows = []
    with tempfile.TemporaryDirectory() as base:
        base_path = Path(base)
        project(base_path / "none", 0)
        env = project(base_path / "three", 3)
        none, three, running, imported = [], [], [], set()
        for _ in range(args.runs):
            got = run_child("startup", base_path, env, "20")
            none.append(got["none"])
            three.append(got["three"])
            running.append(got["running"])
            imported.update(got["imported"])
        added = [t - n for t, n in zip(three, none, strict=True)]
        rows.append(("open the workspace, no server configured (ms, median of 20)", fmt(none)))
        rows.append(("open the workspace, three stdio servers configured (ms)", fmt(three)))
        rows.append(("added before the first frame by three servers (ms)", fmt(added)))
        rows.append(("server processes running before the first turn", str(max(running))))
        rows.append(
            ("MCP modules imported before the first turn", ", ".join(sorted(imported)) or "none")
        )
        modes = [("outside the sandbox", False)]
        if detect().available:
            modes.append(("in bubblewrap", True))
        for label, sandbox in modes:
            env = project(base_path / f"one-{sandbox}", 1, sandbox)
            first, sdk, restart = [], [], []
            for _ in range(args.runs):
                got = run_child("first", base_path / f"one-{sandbox}", env)
                first.append(got["ms"])
                sdk.append(got["sdk_ms"])
                restart.append(got["restart_ms"])
            rows.append(
                (f"first turn: start mcp-server-time {label}, SDK import included (ms)", fmt(first))
            )
            rows.append(("  of which the SDK's import, in a thread (ms)", fmt(sdk)))
            rows.append((f"restart of the running server {label} (ms)", fmt(restart)))
            waits, loads = [], []
            for _ in range(args.runs):
                got = run_child("preloaded", base_path / f"one-{sandbox}", env)
                waits.append(got["ms"])
                loads.append(got["sdk_ms"])
            rows.append(
                (
                    f"first turn: start mcp-server-time {label}, SDK preloaded after the "
                    "first screen (ms)",
                    fmt(waits),
                )
            )
            rows.append(("  the preload, in the background while the user types (ms)", fmt(loads)))
        rows.append(
            (
                "SDK import alone: cold `python -c` of what the client imports, less an "
                "empty interpreter (ms)",
                fmt([cold_import_ms() for _ in range(args.runs)]),
            )
        )
        env = project(base_path / "calls", 1)
        mcp_ms, builtin_ms = [], []
        for _ in range(args.runs):
            got = run_child("calls", base_path / "calls", env, str(args.calls))
            mcp_ms.append(got["mcp_ms"])
            builtin_ms.append(got["builtin_ms"])
        rows.append((f"one MCP call, get_current_time (ms, median of {args.calls})", fmt(mcp_ms)))
        rows.append((f"one built-in call, read_file (ms, median of {args.calls})", fmt(builtin_ms)))
        overhead = [m - b for m, b in zip(mcp_ms, builtin_ms, strict=True)]
        rows.append(("per-call overhead of MCP over a built-in tool (ms)", fmt(overhead)))
    lines = [
        "# MCP servers: start-up, first turn, per call",
        "",
        f"`.venv/bin/python bench/mcp_servers.py --runs {args.runs} --calls {args.calls}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores "
        "(shared). Median (min-max) of the runs; each run a fresh process.",
        "",
        "| measure | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in rows],
        "",
        "Before and after the preload: without it the first turn waits for the SDK's import "
        'and the server\'s start ("SDK import included"); with the SDK imported in the '
        "background after the app's first screen it waits for the server's start only "
        '("SDK preloaded"). What remains is mostly the server\'s own start: '
        "mcp-server-time is a Python program importing the same SDK (compare the restart "
        "rows).",
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
