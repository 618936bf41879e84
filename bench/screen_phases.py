"""Where a start's time goes, phase by phase, in the real process on the user's terminal.

    python bench/screen_phases.py [--runs N] [--sizes empty,2k,20k] [--bin VENV_BIN]
    python bench/screen_phases.py --bin base=../base/.venv/bin --bin new=.venv/bin

bench/screen.py's set-up (the installed `slop-tui` in a 120x40 pty read by pyte, its
ledger, its fake provider's config), with the app started through a wrapper that
stamps, at each phase's end, the wall clock since just before the spawn and the
process's CPU time: the interpreter, the imports (Textual's, then slop-tui's),
the app made, the first screen composed and styled, the configuration and the
workspace's modules, the ledger opened, the conversation loaded, its first frame
written (the first write of a screenful to the terminal), the side panes'
widgets imported and mounted, the plan of the next request read for them (with
the repository map and file tree), and the panes' frame. Beside the phases, the CPU time spent inside a few calls
wherever they ran (CSS parsed, CSS applied, layouts, the tokenizer built, the
prices and MCP start paths, every import, dataclass and regular expression made,
the ledger's reads that grow with the session, the garbage collector's passes), summed until the first frame and over the whole start, and the wall time the main thread's event loop waited with nothing to run until the first frame and between it and the panes' frame (for a read on the ledger's thread, or a timer). The hello-world app
(bench/screen_hello.py) is stamped the same way up to its first frame. With two
builds (`--bin NAME=BIN_DIR` twice), their starts are interleaved, beside the
same hello-world starts.

The wrapper wraps functions of the running app (a timing layer, nothing else).
Every program this bench starts ends with it: closed by the process group it was
started in (`_term.Term.close`) when its start ends or fails, when the bench is
stopped by a signal (SIGTERM, SIGHUP, SIGINT: `end_on_signals`), and, with the
bench killed outright, by the kernel (`GUARD`: the program asks for SIGKILL when
its parent dies; left on a closed terminal, it spun at most of a CPU for hours);
each figure is the median of `--runs` starts (default 5), interleaved with the
hello-world app's. CPU times are the process's own and move much less than the
wall clock when the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import tempfile
import time
from pathlib import Path

import _common as c
import screen
import tui

from tests.fakeserver import FakeLLMServer

# First in every program this bench starts: killed by the kernel when the bench's
# process dies (prctl PR_SET_PDEATHSIG), and gone at once if it died already.
GUARD = r"""
import ctypes, os, signal
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
if os.getppid() != int(os.environ["PHASES_PARENT"]):
    os._exit(1)
"""

# Runs in the app's process: argv = [log, program, *args]; program is the console
# script (or the hello-world app's file). Each stamp is one JSON line.
WRAPPER = (
    GUARD
    + r"""
import functools, json, os, sys, time
T0 = float(os.environ["PHASES_T0"])
log = open(sys.argv[1], "w", buffering=1)
FILLED = [False]  # the side panes' fill has ended: its frame is the next one written
def stamp(name):
    log.write(json.dumps([name, time.time() - T0, time.process_time()]) + "\n")
    if name == "side panes filled":
        FILLED[0] = True
stamp("interpreter and site")
spent = {}
import gc
def collected(phase, info, started=[0.0]):
    # The garbage collector's own passes, wherever an allocation set one off.
    if phase == "start":
        started[0] = time.process_time()
    else:
        label = "the garbage collector (every pass, summed)"
        spent[label] = spent.get(label, 0.0) + time.process_time() - started[0]
gc.callbacks.append(collected)
def count(owner, name, label):
    f = getattr(owner, name, None)
    if f is None:
        return  # not in this build
    depth = [0]
    def add(t):
        spent[label] = spent.get(label, 0.0) + time.process_time() - t
    if hasattr(f, "__code__") and f.__code__.co_flags & 0x80:  # a coroutine function
        @functools.wraps(f)
        async def g(*a, **k):
            t = time.process_time()
            try:
                return await f(*a, **k)
            finally:
                add(t)
    else:
        @functools.wraps(f)
        def g(*a, **k):
            depth[0] += 1
            t = time.process_time()
            try:
                return f(*a, **k)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    add(t)
    setattr(owner, name, g)
import importlib._bootstrap
count(importlib._bootstrap, "_find_and_load", "imports (every module, summed)")
program, sys.argv = sys.argv[2], sys.argv[2:]
if not program.endswith(".py"):
    # What `slop-tui` does first (cli.main, cli._run_tui), in a build that has it: the
    # collector held, the dataclass code cache read (and the regular expressions' code),
    # the sandbox's probe started.
    try:
        from slop_tui.ui.collector import hold_full_collections
    except ImportError:
        pass
    else:
        hold_full_collections()
    try:
        from slop_tui.codecache import use_code_cache
    except ImportError:
        pass
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        from pathlib import Path
        use_code_cache(Path(cache) / "slop-tui")
        try:
            from slop_tui.cli import keep_compiled_patterns
        except ImportError:
            pass
        else:
            keep_compiled_patterns(Path(cache) / "slop-tui")
        stamp("dataclass code cache read")
    try:
        from slop_tui.tools import bwrap_probe
    except ImportError:
        pass
    else:
        import shutil
        wanted = os.environ.get("SLOP_BWRAP") or "bwrap"
        bwrap_probe.start_early(shutil.which(wanted, path=os.environ.get("PATH")))
if not program.endswith(".py"):
    # As `cli._run_app`: Textual imported through slop-tui's module of its internals,
    # whose first patch (class-setup-kept, in a build that has it) precedes Textual's
    # widget classes.
    import slop_tui.ui.textual_fixes
import textual.app
stamp("import textual.app")
from textual.drivers.linux_driver import LinuxDriver
_write = LinuxDriver.write
BETWEEN = [False]  # from the first frame written to the side panes' frame written
def write(self, data, _seen=[0]):
    # The first screenful; a second one before the side panes are filled (a build that
    # drew the first frame twice); the first one after they are filled.
    if len(data) > 2000 and FILLED[0]:
        FILLED[0] = False
        BETWEEN[0] = False
        r = _write(self, data)
        stamp("side panes' frame written")
        return r
    if len(data) > 2000 and _seen[0] < 2:
        _seen[0] += 1
        stamp("frame %d written" % _seen[0])
        if _seen[0] == 1:
            BETWEEN[0] = True
            log.write(json.dumps(["spent at frame 1", dict(spent)]) + "\n")
    return _write(self, data)
LinuxDriver.write = write
FRAMES_SEEN = write.__defaults__[0]  # the screenfuls `write` has seen
import selectors, threading
_select = selectors.EpollSelector.select
IDLE = "the main thread idle from the first frame to the panes' (wall ms, not CPU)"
IDLE_FIRST = "the main thread idle until the first frame (wall ms, not CPU)"
def select(self, timeout=None):
    # The event loop's waits until the first frame and between the two frames: for the
    # ledger's thread, a timer.
    if threading.current_thread() is not threading.main_thread():
        return _select(self, timeout)
    label = IDLE if BETWEEN[0] else IDLE_FIRST if not FRAMES_SEEN[0] else None
    if label is None:
        return _select(self, timeout)
    t = time.time()
    try:
        return _select(self, timeout)
    finally:
        spent[label] = spent.get(label, 0.0) + time.time() - t
selectors.EpollSelector.select = select
def at_start(owner, name, label):
    f = getattr(owner, name)
    @functools.wraps(f)
    async def g(*a, **k):
        stamp(label)
        return await f(*a, **k)
    setattr(owner, name, g)
def at_end(owner, name, label, coroutine=False):
    f = getattr(owner, name, None)
    if f is None:
        return  # not in this build
    if coroutine:
        @functools.wraps(f)
        async def g(*a, **k):
            r = await f(*a, **k)
            stamp(label)
            return r
    else:
        @functools.wraps(f)
        def g(*a, **k):
            r = f(*a, **k)
            stamp(label)
            return r
    setattr(owner, name, g)
import dataclasses, re
count(dataclasses, "_process_class", "dataclasses made")
count(re, "_compile", "regular expressions compiled")
from textual.css.stylesheet import Stylesheet
count(Stylesheet, "parse", "CSS parsed")
count(Stylesheet, "apply", "CSS applied to widgets")
import atexit
atexit.register(lambda: log.write(json.dumps(["spent", spent]) + "\n"))
if program.endswith(".py"):
    import runpy
    runpy.run_path(program, run_name="__main__")
    sys.exit(0)
import slop_tui.ui.app as app_module
stamp("import slop_tui.ui.app")
# As `cli._run_app` once the app's code is imported: later patterns and expressions
# are compiled, not kept (in a build that has these).
try:
    from slop_tui.context.regex import stop_keeping_every_pattern
    stop_keeping_every_pattern()
    from slop_tui.codecache import stop_keeping_expressions
    stop_keeping_expressions()
except ImportError:
    pass
from slop_tui.ui import textual_fixes
from slop_tui.ui.screens import workspace as ws_screen
count(textual_fixes, "_refresh_layout", "layouts (arrange and render)")
_release = textual_fixes.release_frames
def release_frames(app):
    # The first frame's hold ends (the conversation is in its pane): from here, the
    # wait for the screen's update timer and the frame's own layout and paint.
    if app.__dict__.get("_slop_frames_held"):
        stamp("first frame released")
        app.__dict__["_slop_released"] = True
    return _release(app)
textual_fixes.release_frames = release_frames
from textual.screen import Screen
_timer_update = Screen._on_timer_update
def on_timer_update(self, _seen=[False]):  # the frame timer, or a frame run at once
    if not _seen[0] and not self.app._batch_count and self.app.__dict__.get("_slop_released"):
        _seen[0] = True
        stamp("the release's frame begun")
    return _timer_update(self)
Screen._on_timer_update = on_timer_update
at_end(app_module.SlopApp, "__init__", "app made (themes, key router)")
at_end(app_module.SlopApp, "on_mount", "app mounted (CSS parsed)")
at_end(ws_screen.WorkspacePanes, "on_mount", "workspace screen composed and styled")
import slop_tui.config as config_module
count(config_module, "load_config", "configuration read")
import slop_tui.workspace as W
stamp("import slop_tui.workspace (config, context, ledger)")
at_start(W.Workspace, "open", "configuration read")
at_end(W.Workspace, "open", "ledger opened (Workspace.open)", coroutine=True)
at_end(ws_screen.WorkspacePanes, "show_conversation", "conversation loaded", coroutine=True)
if hasattr(ws_screen.WorkspacePanes, "mount_side_panes"):  # a build before `SidePanes`
    at_end(ws_screen.WorkspacePanes, "mount_side_panes", "side panes mounted", coroutine=True)
else:  # imported by the screen already (there it imports none of the panes' widgets)
    from slop_tui.ui.screens import workspace_sides as sides_module
    at_end(sides_module.SidePanes, "mount", "side panes mounted", coroutine=True)
at_end(ws_screen.WorkspacePanes, "show_side_panes", "side panes filled", coroutine=True)
count(W.Workspace, "display_plan", "plan of the next request (display_plan)")
count(W.Workspace, "repo_sources", "  of which repository map and file tree")
count(W.Workspace, "cost_label", "prices (the header's cost)")
count(W.Workspace, "preload_mcp", "MCP start path")
# The ledger's reads whose cost grows with the session (each over every call, group or
# prompt of it): what a 20,000-message start pays beyond a 2,000-message one.
from slop_tui.ledger import Ledger
count(Ledger, "spend", "ledger: the session's spend (every call summed)")
count(Ledger, "group_ids", "ledger: every group id (the conversation)")
count(Ledger, "group_rows", "ledger: every group's row (the group list)")
count(Ledger, "group_prompts", "ledger: the older groups' prompts (the group list)")
count(Ledger, "group_snapshots", "ledger: the shown groups' token snapshots")
from slop_tui.context import tokens
count(tokens, "_load_encoding", "tokenizer built")
count(W.Workspace, "check_settings", "settings checked (the context engine's modules)")
from textual._compositor import Compositor
count(Compositor, "render_update", "frames painted (the compositor's update)")
def side_counts():
    # After the first frame, the side panes' own parts (each imported here only if this
    # build has it): imported before the app is made, the context engine's plan (~65 ms)
    # was counted in "app made" and taken off the side panes' fill.
    from slop_tui.context import plan as plan_module
    count(plan_module, "state_corrections", "  of which STATE's corrections (the first plan's regexes)")
    from slop_tui.ui.widgets import anchors, conversation, gauge, groups, preview
    count(groups.GroupList, "load_rows", "group list: rows loaded")
    count(groups.GroupLines, "fill_prompts", "group list: older prompts read")
    count(groups.GroupLines, "render_lines", "group list: lines drawn")
    count(groups.SessionList, "load", "session list loaded")
    count(gauge.TokenGauge, "update_from", "gauge set")
    count(preview.ContextPreview, "set_prompt", "context preview set")
    count(anchors.StatePane, "set_state", "STATE set")
    count(conversation.ConversationView, "set_plan", "conversation's tier labels set")
    from textual._text_area_theme import TextAreaTheme
    count(TextAreaTheme, "apply_css", "text areas' themes styled (each render)")
    from textual.widgets import TextArea
    count(TextArea, "render_lines", "text areas drawn")
if "sides_module" in globals():  # a build with `SidePanes`
    _mount = sides_module.SidePanes.mount
    @functools.wraps(_mount)
    async def mount_counted(self, *a, **k):
        if not getattr(side_counts, "done", False):
            side_counts.done = True
            side_counts()
        return await _mount(self, *a, **k)
    # Wrapped under the stamp's wrapper: the counts go in before the widgets' first use.
    sides_module.SidePanes.mount = mount_counted
from slop_tui.cli import main
sys.exit(main(sys.argv[1:]))
"""
)

ORDER = [
    "interpreter and site",
    "dataclass code cache read",
    "import textual.app",
    "import slop_tui.ui.app",
    "import slop_tui.workspace (config, context, ledger)",
    "app made (themes, key router)",
    "app mounted (CSS parsed)",
    "workspace screen composed and styled",
    "configuration read",
    "ledger opened (Workspace.open)",
    "conversation loaded",
    "first frame released",
    "the release's frame begun",
    "frame 1 written",
    "side panes mounted",
    "side panes filled",
    "frame 2 written",  # a second screenful before the panes are filled (the first, again)
    "side panes' frame written",
]


def one_start(starter: screen.Starter, app: str, work: Path, i: int) -> dict:
    log = work / f"phases-{app}-{i}.jsonl"
    # The build's own interpreter (its slop_tui), then the program and its arguments.
    prefix = (str(screen.SLOP.parent / "python"), "-c", WRAPPER, str(log))
    db = None
    if app == "hello":
        argv = [*prefix, str(screen.HELLO)]
    else:  # as `Starter.start`, with the ledger copied before the clock starts
        db = work / f"run-phases-{i}.db"
        shutil.copyfile(starter.template, db)
        argv = [*prefix, str(screen.SLOP), "--db", str(db), "--session", app]
    env = dict(starter.env, PHASES_T0=repr(time.time()), PHASES_PARENT=str(os.getpid()))
    term = screen.Term(argv, cwd=str(starter.project), env=env)
    try:
        marker = starter.marker(app)
        term.pump(lambda t: t.find(marker) is not None, 60)
        if app != "hello":
            term.pump(lambda t: t.find(screen.LAST_PANE) is not None, 60)
        term.settle(screen.QUIET_S, 30)
        term.send("ctrl+q")
        term.proc.wait(30)
    finally:
        term.close()
        if db is not None:
            for p in db.parent.glob(db.name + "*"):
                p.unlink()
    stamps: dict = {}
    for line in log.read_text().splitlines():
        name, *values = json.loads(line)
        stamps.setdefault(name, values[0] if name.startswith("spent") else values)
    return stamps


def end_on_signals() -> None:
    """SIGTERM and SIGHUP (a `timeout`, a closed terminal) end the bench as ctrl+c does:
    by an exception, so each start's `finally` and `_term`'s exit handler kill the
    process groups it started."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def main() -> None:
    end_on_signals()
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="empty,2k,20k")
    ap.add_argument(
        "--bin",
        action="append",
        default=[],
        metavar="[NAME=]BIN_DIR",
        help="the bin folder of another build's virtualenv (default: this one); given "
        "more than once, NAME=BIN_DIR each, the builds' starts are interleaved",
    )
    args = ap.parse_args()
    sizes = args.sizes.split(",")
    builds = [b.split("=", 1) if "=" in b else ["", b] for b in args.bin] or [["", ""]]
    slop = {name: Path(d).resolve() / "slop-tui" if d else screen.SLOP for name, d in builds}
    load = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="slop-tui-phases-"))
    template = work / "template.db"
    asyncio.run(tui.build(template, False))
    screen.mark_ledger(template)
    fake = FakeLLMServer().start()
    config = work / "config.toml"
    screen.write_config(config, fake.openai_base_url)
    starter = screen.Starter(work, template, config)
    # (column, app, build): the hello-world app, then each session with each build. The
    # builds open this checkout's ledger: they must share its schema.
    columns = [("hello", "hello", "")] + [
        (f"{size} {name}".strip(), size, name) for size in sizes for name, _ in builds
    ]
    results: dict[str, list[dict]] = {col: [] for col, _, _ in columns}
    try:
        for i in range(-1, args.runs):  # the first round (-1): bytecode and page cache
            for col, app, name in columns:
                screen.SLOP = slop[name] if app != "hello" else slop[builds[0][0]]
                stamps = one_start(starter, app, work, i)
                if i >= 0:
                    results[col].append(stamps)
    finally:
        fake.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"# bench/screen_phases.py: {c.machine()}")
    print(
        f"load average at start {' '.join(f'{x:.2f}' for x in load)}, at end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.runs} start(s) each, "
        "interleaved; each phase: median wall ms (median CPU ms) from the phase before\n"
    )
    apps = list(results)
    rows = []
    for phase in ORDER:
        row = [phase]
        for app in apps:
            deltas = []
            for stamps in results[app]:
                if phase not in stamps:
                    continue
                wall, cpu = stamps[phase]
                # From the stamp before it in time (a build without a phase skips it).
                earlier = [
                    v for k, v in stamps.items() if not k.startswith("spent") and v[0] < wall
                ]
                wall0, cpu0 = max(earlier) if earlier else (0.0, 0.0)
                deltas.append(((wall - wall0) * 1e3, (cpu - cpu0) * 1e3))
            row.append(
                f"{statistics.median(d[0] for d in deltas):.0f} "
                f"({statistics.median(d[1] for d in deltas):.0f})"
                if deltas and not (app == "hello" and phase == "frame 2 written")
                else ""
            )
        rows.append(row)
    for label, key in (
        ("first frame, from the spawn", "frame 1 written"),
        ("side panes' frame, from the spawn", "side panes' frame written"),
    ):
        cells = []
        for a in apps:
            got = [s[key] for s in results[a] if key in s]
            cells.append(
                f"**{statistics.median(g[0] for g in got) * 1e3:.0f}"
                f" ({statistics.median(g[1] for g in got) * 1e3:.0f})**"
                + (f" [CPU {min(g[1] for g in got) * 1e3:.0f}–{max(g[1] for g in got) * 1e3:.0f}]")
                if got
                else ""
            )
        rows.append([f"**{label}**", *cells])
    label = {col: f"{screen.LABEL[app]} {name}".strip() for col, app, name in columns}
    print(c.table(["phase", *[label[a] for a in apps]], rows))
    for key, title in (
        ("spent at frame 1", "CPU ms inside these calls until the first frame (median):"),
        ("spent", "CPU ms inside these calls over the whole start (median):"),
    ):
        labels = sorted({k for a in apps for s in results[a] for k in s.get(key, {})})
        rows = [
            [label]
            + [
                f"{statistics.median(s.get(key, {}).get(label, 0.0) for s in results[a]) * 1e3:.0f}"
                for a in apps
            ]
            for label in labels
        ]
        print(f"\n{title}\n")
        print(c.table(["calls", *[label[a] for a in apps]], rows))


if __name__ == "__main__":
    main()
