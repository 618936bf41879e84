"""The workspace app: start-up to a fully shown conversation, key -> frame latency, RSS, widgets.

    python bench/tui.py [--quick] [--runs N] [--presses N] [--profile] [--profile-keys] [--keep DIR]
    python bench/tui.py --palette [--runs N]   # the command palette at 200 commands

Sessions (built once per run in a temporary folder, one ledger, reused by every
size): an empty session, 2,000 messages (500 groups) and 20,000 messages
(5,000 groups). Groups come from `_common.fill` (the ledger benches' realistic
shape), made four messages long -- user prompt, assistant tool call, tool
result, final answer -- with 300-1,500 characters per content and a fenced
code block in about a third of the answers.

Every start-up is a fresh child process (`bench/tui_child.py`) on a private
copy of the ledger, so the interpreter, every import and the first ledger
read count. The parent stamps `time.time()` just before spawning; the child
times rendered frames against it (headless, 120x40, TEXTUAL_ANIMATIONS=none,
no `pilot.pause()`): see the child's docstring for what a frame, "fully
shown" and key -> frame mean exactly. One warm-up start (not counted) first
compiles bytecode and warms the page cache. The CPU time the child used until
fully shown is printed too: it moves much less than wall time when other work
shares the machine.

The first start of each size also measures key -> frame, >= 30 keys per case:
typing in the prompt and `up` in the groups pane, idle; ctrl+u (a page of
older groups) in the conversation, six presses and then End, as bench/screen.py
presses them (its effect: the first frame showing older content, the pane
scrolled up or a group mounted), which also checks that the mounted groups
stay bounded, and PageUp there; the prompt, the groups pane, PageUp and ctrl+u
again while a reply streams at 200 deltas/s through the real orchestrator (an
in-memory provider paced like bench/turn.py's); and typing while that turn ends
and its background job (after-reply compaction, lane summary) runs.
`BENCH_KEY_TRACE=1` makes the child record what each key waited for; bench/tail.py
sorts the slow keys by cause (bench/results/2026-11-29-tail.md). A key whose frame has not come
after 10 s ends that child (a watchdog thread): the row then shows a lower
bound (">=").

`--quick`: one start per size, 10 keys per case, and the app's compaction
switched off in its config so the background job cannot hold the run.

Memory is the child's own peak resident set (VmHWM in /proc/self/status), not
`ru_maxrss`, which a child inherits from its parent at fork. bench/screen.py
measures the same app from outside (a pty and a terminal emulator); `make
bench` prints the two side by side.

Targets: 2,000 messages fully shown <= 1.0 s, 20,000 <= 1.5 s; no
key -> frame above 50 ms at any history length, streaming or not; <= 200 MB
RSS at 20,000 messages; mounted widgets bounded by what is visible.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c

from slop_tui.ledger import Ledger
from slop_tui.tools import registry_rows

CHILD = Path(__file__).resolve().parent / "tui_child.py"
SIZES = [("empty", 0), ("2k", 2_000), ("20k", 20_000)]
LABEL = {"empty": "empty", "2k": "2,000 msgs", "20k": "20,000 msgs"}
SHOWN_TARGET = {"2k": 1.0, "20k": 1.5}
KEY_TARGET_MS = 50.0
RSS_TARGET_MB = 200.0
GROUP = 4  # messages per group in these sessions

_CODE = [
    "def load(path):\n    with open(path) as f:\n        return json.load(f)\n",
    "async def window(ledger, session, n=5):\n    rows = await ledger.window(session, n)\n"
    "    return [r for r in rows if r.status != 'dropped']\n",
    "SELECT group_id, COUNT(*) AS n\n  FROM messages\n WHERE session_id = ?\n"
    " GROUP BY group_id\n ORDER BY group_id DESC\n LIMIT 5;\n",
    "for i, block in enumerate(blocks):\n    if block.dirty:\n        block.refresh()\n"
    "    total += len(block.lines)\n",
]


async def build(path: Path, quick: bool) -> dict[str, int]:
    """One ledger with the three sessions; returns messages per session."""
    ledger = await Ledger.open(path)
    out = {"empty": 0}
    db = ledger._db
    await db.execute(
        "INSERT INTO sessions(name, created_at, updated_at) VALUES ('empty', ?, ?)", (c.T0, c.T0)
    )
    await db.commit()
    for seed, (name, messages) in enumerate(SIZES[1:], start=1):
        groups = messages // GROUP
        await c.fill(
            ledger, groups * c.GROUP_SIZE, [name], seed=seed, min_chars=300, max_chars=1500
        )
        await _reshape(ledger, name, seed)
        out[name] = messages
    row = await (await db.execute("SELECT name, message_count FROM sessions")).fetchall()
    counts = dict(row)
    for name, messages in out.items():
        assert counts[name] == messages, (name, counts[name], messages)
    # The tools as the app's first start registers them: a session this long is in a
    # ledger the app has opened before.
    await ledger.register_tools(registry_rows())
    await db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    await ledger.close()
    return out


async def _reshape(ledger: Ledger, session: str, seed: int) -> None:
    """`fill` writes five-message groups with two tool calls; keep one call (four messages)
    and put a fenced code block in about a third of the final answers."""
    db = ledger._db
    rnd = random.Random(seed)
    await db.execute("BEGIN IMMEDIATE")
    await db.execute(
        "DELETE FROM messages WHERE session_id = ? AND role = 'tool' AND tool_name = 'query_db'",
        (session,),
    )
    rows = await (
        await db.execute(
            "SELECT id, payload FROM messages WHERE session_id = ? AND status = 'tool_call'",
            (session,),
        )
    ).fetchall()
    updates = []
    for mid, payload in rows:
        data = json.loads(payload)
        data["tool_calls"] = data["tool_calls"][:1]
        updates.append((json.dumps(data), mid))
    await db.executemany("UPDATE messages SET payload = ? WHERE id = ?", updates)
    rows = await (
        await db.execute(
            "SELECT id, content FROM messages WHERE session_id = ? AND role = 'assistant' "
            "AND status = 'completed'",
            (session,),
        )
    ).fetchall()
    updates = []
    for mid, content in rows:
        if rnd.random() < 0.35:
            code = rnd.choice(_CODE)
            body, sep, state = content.partition("\n\n### STATE")
            cut = rnd.randint(len(body) // 3, max(len(body) // 3, len(body) - len(code)))
            fence = "python" if "def " in code or "for " in code else "sql"
            body = (
                body[: max(0, cut - len(code))].rstrip()
                + f"\n\n```{fence}\n{code}```\n\n"
                + body[cut:].lstrip()
            )
            new = body + sep + state
            updates.append((new, c.tokens_of(new), mid))
    await db.executemany("UPDATE messages SET content = ?, tokens = ? WHERE id = ?", updates)
    await db.execute("COMMIT")


def spawn(
    template: Path,
    work: Path,
    session: str,
    tag: str,
    *,
    latency: bool = False,
    presses: int = 30,
    page: int = 0,
    bg_wait: float = 15.0,
    profile: str = "",
    profile_keys: str = "",
    config: Path | None = None,
) -> dict:
    """One child start on a private copy of the ledger; returns its JSON."""
    db = work / f"run-{tag}.db"
    shutil.copyfile(template, db)
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none", SLOP_CONFIG=str(work / "no-config.toml"))
    # The warm-up start compiles bytecode for the measured ones (as an installed app
    # has it): with PYTHONDONTWRITEBYTECODE set nothing was kept and every start
    # compiled the app from source (0.2-0.4 s). The bytecode goes to the bench folder.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    for var in (
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "SLOP_DB",
        "SLOP_SESSION",
        "TEXTUAL",
    ):
        env.pop(var, None)
    cmd = [sys.executable, str(CHILD), "--db", str(db), "--session", session, "--cwd", str(work)]
    if config is not None:
        cmd += ["--config", str(config)]
        env["SLOP_CONFIG"] = str(config)
    if latency:
        cmd += ["--latency", "--presses", str(presses), "--bg-wait", str(bg_wait)]
    if page:
        cmd += ["--page", str(page)]
    if profile:
        cmd += ["--profile", profile]
    if profile_keys:
        cmd += ["--profile-keys", profile_keys]
    t0 = time.time()
    proc = subprocess.run(
        [*cmd, "--t0", repr(t0)], capture_output=True, text=True, cwd=work, env=env, timeout=300
    )
    for p in work.glob(f"run-{tag}.db*"):
        p.unlink()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"child failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    out = json.loads(lines[-1])
    if out.get("exception") or not out.get("ok"):
        raise RuntimeError(f"child for {session} did not finish: {json.dumps(out)[:3000]}")
    return out


def stats(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "n": len(values),
        "median": c.median(values) if values else None,
        "p95": c.p95(values) if values else None,
        "max": ordered[-1] if values else None,
        "timeouts": sum(1 for v in values if v == float("inf")),
    }


def fmt_s(v: float) -> str:
    return f"{v:.2f} s"


def fmt_ms(v: float | None) -> str:
    if v is None:
        return "–"
    return "timeout" if v == float("inf") else f"{v:.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1 start per size, 12 keys per case")
    ap.add_argument("--runs", type=int, default=None, help="start-ups per size (default 3)")
    ap.add_argument("--presses", type=int, default=None, help="keys per latency case (30)")
    ap.add_argument(
        "--profile", action="store_true", help="profile the 20k start-up even when the targets pass"
    )
    ap.add_argument(
        "--profile-keys",
        action="store_true",
        help="also profile the key cases of a 2,000-message session (slow)",
    )
    ap.add_argument("--keep", default="", help="build the ledger in this folder and keep it")
    ap.add_argument(
        "--palette", action="store_true", help="only the palette's key -> list (tui_palette.py)"
    )
    args = ap.parse_args()
    if args.palette:
        import tui_palette

        sys.exit(tui_palette.main(args.runs or 5))
    runs = args.runs or (1 if args.quick else 3)
    presses = args.presses or (10 if args.quick else 30)
    pages = 4 if args.quick else 8
    bg_wait = 5.0 if args.quick else 15.0
    started = time.perf_counter()
    load = os.getloadavg()

    work = Path(args.keep or tempfile.mkdtemp(prefix="slop-tui-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "README.md").write_text("# bench project\n")
    template = work / "template.db"
    for p in work.glob("template.db*"):
        p.unlink()
    t = time.perf_counter()
    counts = asyncio.run(build(template, args.quick))
    build_s = time.perf_counter() - t

    config = None
    if args.quick:
        # A smoke run: without the after-reply compaction and lane summary, whose
        # synchronous work can hold the event loop for a minute at 20,000 messages.
        config = work / "quick-config.toml"
        config.write_text("[compaction]\nenabled = false\n")
    try:
        spawn(template, work, "empty", "warmup")  # bytecode and page cache; not counted
        results: dict[str, list[dict]] = {name: [] for name, _ in SIZES}
        for i in range(runs):
            for name, _ in SIZES:  # interleaved, so load spikes spread over the sizes
                first = i == 0
                results[name].append(
                    spawn(
                        template,
                        work,
                        name,
                        f"{name}-{i}",
                        latency=first,
                        presses=presses,
                        page=pages if first and name != "empty" else 0,
                        bg_wait=bg_wait,
                        config=config,
                    )
                )
        profile_text = ""
        failing = [
            n for n, lim in SHOWN_TARGET.items() if c.median([r["shown"] for r in results[n]]) > lim
        ]
        if failing or args.profile:
            name = failing[-1] if failing else "20k"
            prof = work / "startup.prof"
            spawn(template, work, name, "profile", profile=str(prof))
            profile_text = profile_report(prof, name)
        if args.profile_keys:
            prof = work / "keys.prof"
            spawn(
                template,
                work,
                "2k",
                "profile-keys",
                latency=True,
                presses=10,
                bg_wait=5.0,
                profile_keys=str(prof),
            )
            profile_text += profile_report(
                prof, "2k", what="key cases (idle, streaming, after the turn)"
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print_report(results, counts, runs, presses, load, build_s, args.quick)
    if profile_text:
        print(profile_text)
    print(
        f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"whole bench {time.perf_counter() - started:.0f} s"
    )


CASES = [
    ("prompt idle", "key → frame, typing in the prompt, idle"),
    ("groups idle", "key → frame, up in the groups pane, idle"),
    ("conversation ctrl+u", "key → frame, ctrl+u (older page) in the conversation"),
    ("conversation pageup", "key → frame, PageUp in the conversation, idle"),
    ("prompt streaming", "key → frame, typing in the prompt, reply streaming"),
    ("groups streaming", "key → frame, up in the groups pane, reply streaming"),
    ("conversation pageup streaming", "key → frame, PageUp in the conversation, reply streaming"),
    (
        "conversation ctrl+u streaming",
        "key → frame, ctrl+u (older page) in the conversation, reply streaming",
    ),
    ("prompt after turn", "key → frame, typing while the turn's background job runs"),
]


STALL_PHASES = [
    ("idle", "idle keys"),
    ("paging", "ctrl+u paging"),
    ("first submit", "first submit until the reply streams (builds the tokenizer, once)"),
    ("streaming", "reply streaming"),
    ("after turn", "after the reply (turn end, background job)"),
]


def print_report(results, counts, runs, presses, load, build_s, quick) -> None:
    print(f"# bench/tui.py ({'quick' if quick else 'full'}): {c.machine()}")
    print(
        f"load average at start: {' '.join(f'{x:.2f}' for x in load)} "
        f"(other work on this machine makes the numbers noisy)"
    )
    print(
        f"sessions: empty, {counts['2k']:,} messages ({counts['2k'] // GROUP:,} groups), "
        f"{counts['20k']:,} messages ({counts['20k'] // GROUP:,} groups); ledger built in "
        f"{build_s:.1f} s. Headless 120x40, animations off. Start-up: median of {runs} "
        f"fresh process(es) per size (min–max). Keys: ≥ {presses} per case, median "
        f"(p95 / max); the reply streams at a requested 200 deltas/s.\n"
    )
    rows = []

    def startup_row(label: str, key: str, targets: dict | None = None, unit: str = "s") -> None:
        for name, _ in SIZES:
            vals = [r[key] for r in results[name] if r.get(key) is not None]
            if not vals:
                continue
            med = c.median(vals)
            lim = (targets or {}).get(name)
            rows.append(
                [
                    label,
                    LABEL[name],
                    f"{med:.2f} {unit}",
                    f"{min(vals):.2f}–{max(vals):.2f}" if len(vals) > 1 else "",
                    f"≤ {lim:.1f} s" if lim else "",
                    c.verdict(med, lim) if lim else "",
                ]
            )

    startup_row("process start → imports done", "t_imported")
    startup_row("process start → first frame", "first_frame")
    startup_row("process start → first frame once the panes are loaded (app.ready)", "ready_frame")
    startup_row("**process start → conversation fully shown**", "shown", SHOWN_TARGET)
    startup_row("CPU time used until fully shown (less load-sensitive)", "cpu_shown", unit="s CPU")

    for case, label in CASES:
        for name, _ in SIZES:
            lat = (results[name][0].get("latency") or {}).get(case)
            if not lat or not lat["effect"]:
                continue
            eff = stats(lat["effect"])
            n = f" (n={eff['n']})" if eff["n"] != presses else ""
            cap = "≥ " if lat.get("gave_up") else ""
            rows.append(
                [
                    label,
                    LABEL[name],
                    fmt_ms(eff["median"]),
                    f"{fmt_ms(eff['p95'])} / {cap}{fmt_ms(eff['max'])}{n}",
                    f"≤ {KEY_TARGET_MS:.0f} ms each",
                    c.verdict(eff["max"], KEY_TARGET_MS),
                ]
            )
    for phase, label in STALL_PHASES:
        for name, _ in SIZES:
            gap = (results[name][0].get("stalls") or {}).get(phase)
            if gap is None:
                continue
            gave_up = results[name][0].get("gave_up") and phase == "after turn"
            # The first submit waits for its reply anyway: reported, not held to 50 ms.
            judged = phase != "first submit"
            rows.append(
                [
                    f"longest event-loop stall, {label}",
                    LABEL[name],
                    f"{'≥ ' if gave_up else ''}{gap:.0f} ms",
                    "",
                    f"≤ {KEY_TARGET_MS:.0f} ms" if judged else "",
                    c.verdict(gap, KEY_TARGET_MS) if judged else "",
                ]
            )
    for name, _ in SIZES:
        r0 = results[name][0]
        if "stream_rate" in r0:
            rows.append(
                [
                    "deltas/s the app took while keys were measured",
                    LABEL[name],
                    f"{r0['stream_rate']:.0f} /s",
                    f"{r0['stream_deltas']} deltas",
                    "200 /s offered",
                    c.verdict(-r0["stream_rate"], -190),
                ]
            )
    for name, _ in SIZES:
        r0 = results[name][0]
        if "after_turn_s" in r0:
            done = r0.get("turn_finished")
            rows.append(
                [
                    "reply end → turn and background job (compaction, lane summary) done",
                    LABEL[name],
                    f"{'' if done else '≥ '}{r0['after_turn_s']:.1f} s",
                    "" if done else "still running: stopped waiting",
                    "",
                    "",
                ]
            )
    for name, _ in SIZES:
        shown = c.median([r["rss_shown"] for r in results[name]])
        r0 = results[name][0]
        peak = max(r["rss_peak"] for r in results[name])
        lim = RSS_TARGET_MB if name == "20k" else None
        parts = [
            f"streaming {r0['rss_streaming']:.0f}" if "rss_streaming" in r0 else "",
            f"after turn {r0['rss_after_turn']:.0f}" if "rss_after_turn" in r0 else "",
        ]
        rows.append(
            [
                "peak RSS (VmHWM) when shown",
                LABEL[name],
                f"{shown:.0f} MB",
                f"max {peak:.0f} MB ({', '.join(p for p in parts if p)})",
                f"≤ {lim:.0f} MB" if lim else "",
                c.verdict(peak, lim) if lim else "",
            ]
        )
    bound = None
    widgets_2k = None
    for name, _ in SIZES:
        r0 = results[name][0]
        widgets = c.median([r["widgets"] for r in results[name]])
        page = r0.get("paging")
        seen = [
            r0,
            page and {"widgets": page["max_widgets"], "blocks": page["max_blocks"]},
            r0.get("during_stream"),
            r0.get("after_turn"),
        ]
        most_w = max(x["widgets"] for x in seen if x)
        most_b = max(x["blocks"] for x in seen if x)
        if page:
            bound = page["bound"]
        if name == "2k":
            widgets_2k = most_w
        target, verdict = "", ""
        if name == "20k" and widgets_2k:
            target = "as at 2,000; groups ≤ bound + live"
            ok = most_w <= widgets_2k * 1.25 and (bound is None or most_b <= bound + 1)
            verdict = "PASS" if ok else "FAIL"
        rows.append(
            [
                "widgets in the DOM (GroupBlocks mounted) when shown",
                LABEL[name],
                f"{widgets:.0f} ({r0['blocks']})",
                f"max {most_w} ({most_b}) paging, streaming",
                target,
                verdict,
            ]
        )
    print(c.table(["measure", "session", "median", "spread", "target", "result"], rows))
    notes = []
    for name, _ in SIZES:
        r0 = results[name][0]
        for case, _label in CASES:
            lat = (r0.get("latency") or {}).get(case)
            if lat and stats(lat["effect"])["timeouts"]:
                notes.append(
                    f"{LABEL[name]} {case}: {stats(lat['effect'])['timeouts']} keys got no "
                    "frame within the timeout"
                )
        if r0.get("gave_up"):
            notes.append(f"{LABEL[name]}: {r0['gave_up']} (≥ marks a lower bound)")
    if bound is not None:
        notes.append(
            f"the conversation mounts at most {bound} groups (max_blocks); the live turn adds one"
        )
    for n in notes:
        print(f"- {n}")


PROFILE_FILTER = (
    r"slop_tui/(?!.*bench)|screen\.py:\d+\((_refresh_layout|_compositor_refresh)\)"
    r"|stylesheet\.py:\d+\(apply\)|_compositor\.py:\d+\((reflow|render_update)\)"
    r"|_bootstrap>:\d+\(_find_and_load\)|widget\.py:\d+\(_get_box_model\)"
)


def profile_report(
    path: Path, name: str, what: str = "start-up, process start → fully shown"
) -> str:
    """Where the time goes (cProfile inside the child; it slows everything ~2x): the app's
    own functions and the big Textual / import steps, by cumulative time."""
    import io

    buf = io.StringIO()
    stats = pstats.Stats(str(path), stream=buf)
    total = stats.total_tt  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(PROFILE_FILTER, 30)
    text = buf.getvalue()
    cut = text.find("   ncalls")
    return (
        f"\n## cProfile of one {LABEL[name]} {what}: {total:.2f} s of wall time under the profiler; the app's "
        "functions and the big Textual / import steps, by cumulative time (top 30)\n\n"
        + text[cut:].rstrip()
    )


if __name__ == "__main__":
    main()
