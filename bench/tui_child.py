"""One measured start of the workspace app, spawned by bench/tui.py (not run by hand).

    python bench/tui_child.py --db DB --session NAME --t0 PARENT_TIME [--latency] ...

The parent passes `time.time()` taken just before it spawned this process, so
interpreter start-up and every import count. The app runs headless at 120x40
with animations off through `App.run(headless=True)`, as a user would start it,
and these hooks time what a terminal would get:

- frames: `App._display` is wrapped. Each real frame (a compositor update for
  the top screen, outside a batch) is turned into the terminal byte string
  (`render_segments`, the work a real terminal write does and headless skips)
  and timestamped. No `pilot.pause()` / `wait_for_idle` anywhere: those post
  to every widget and grow with the widget count.
- "fully shown": the app is ready (ledger open, panes filled, conversation
  loaded) and no frame has been drawn for `--quiet` (0.6) seconds; the time is the
  last frame before that quiet period, i.e. the first frame after which the
  screen (transcript included) stops changing.
- key -> frame: keys enter through the driver (`Driver.process_message`, the
  path a terminal's input thread takes). Latency is the first frame that
  repaints the target widget (it is among the frame's dirty widgets, or the
  whole screen is repainted, or -- for ctrl+u, whose effect is new blocks -- a
  full reflow, or the widget drew itself at once after the key with
  `slop_tui.ui.echo.draw_now`: that update is written to the terminal like
  any frame) while the key's effect is visible in its state (prompt text
  grew / group highlight moved / older groups mounted). Before the first
  ctrl+u the conversation is focused and the screen left quiet for 0.1 s, as
  a click and then the key would be.

Cases, order and options: see bench/tui.py; `--cases palette` adds ctrl+p from the
prompt (idle and streaming; key -> the first frame that writes the palette's field).
A watchdog thread ends the run when the event loop holds one key longer than
`--key-cap` seconds (the key is then recorded as at least that long) or the turn's
background job still runs `--bg-wait` + `--key-cap` seconds after the reply. A 10 ms heartbeat task
records the longest event-loop stall per phase. `BENCH_DEBUG_FRAMES=1` adds the dirty widgets
of every frame (and the phase) and the timing of the start-up steps to the JSON.
`BENCH_STALL_TRACE=1` adds, for every stall above 40 ms (`BENCH_STALL_MS`), the garbage collections inside
it and the stacks a sampling thread saw (the main thread's and the others'), plus the
cost of every layout pass per phase: what to look at when a maximum is over target.

Prints one JSON object on stdout after the app has exited.
"""

from __future__ import annotations

import time

T_CHILD = time.time()  # as early as we can: the interpreter itself is already up

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

# BENCH_APP_ROOT: the app's code from another checkout (side by side with this one).
ROOT = os.environ.get("BENCH_APP_ROOT") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))
)
sys.path.insert(0, ROOT)

parser = argparse.ArgumentParser()
parser.add_argument("--db", required=True)
parser.add_argument("--session", required=True)
parser.add_argument("--cwd", required=True)
parser.add_argument("--config", default="", help="SLOP_CONFIG for the app (default: none)")
parser.add_argument("--t0", type=float, required=True, help="parent's time.time() at spawn")
parser.add_argument("--latency", action="store_true", help="also measure key -> frame")
parser.add_argument("--presses", type=int, default=40)
parser.add_argument("--rate", type=float, default=200.0, help="streamed deltas per second")
parser.add_argument("--page", type=int, default=0, help="ctrl+u pages to check the mount bound")
parser.add_argument("--profile", default="", help="write cProfile stats of start-up here")
parser.add_argument(
    "--profile-keys",
    default="",
    help="write cProfile stats of the key cases (streaming included) here",
)
parser.add_argument("--quiet", type=float, default=0.6)
parser.add_argument("--no-stream", action="store_true", help="only the idle key cases")
parser.add_argument(
    "--cases",
    default="",
    help="only the key cases whose name has one of these comma-separated words",
)
parser.add_argument(
    "--key-cap",
    type=float,
    default=10.0,
    help="a key without its frame after this many seconds ends the run (watchdog)",
)
parser.add_argument(
    "--bg-wait",
    type=float,
    default=20.0,
    help="type at most this long while the turn's background job runs",
)
ARGS = parser.parse_args()

PROFILER = None
if ARGS.profile:
    import cProfile

    PROFILER = cProfile.Profile()
    PROFILER.enable()

import asyncio  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
from pathlib import Path  # noqa: E402

from textual import events  # noqa: E402
from textual._compositor import CompositorUpdate  # noqa: E402
from textual.app import App  # noqa: E402

from slop_tui.ui.collector import hold_full_collections  # noqa: E402

hold_full_collections()  # as `slop-tui` does before the workspace's imports (cli._run_tui)
from slop_tui.ui.startup import defer_for_first_screen  # noqa: E402

defer_for_first_screen()  # as `slop-tui` does too: code coloured a second after the screen
from tui_palette import _frame_text  # noqa: E402 -- the palette's field in a frame

from slop_tui.ui import echo, textual_fixes  # noqa: E402
from slop_tui.ui.app import SlopApp  # noqa: E402
from slop_tui.ui.screens.workspace import WorkspaceScreen  # noqa: E402

T_IMPORTED = time.time()

STEPS: list[tuple[str, float, float]] = []  # (what, start, end) of start-up steps (debug)


def _time_steps() -> None:
    """Wrap the start-up steps of `SlopApp.open_workspace` to see where the time goes."""
    import functools

    from slop_tui.context import tokens
    from slop_tui.ui.widgets import conversation, gauge, groups, preview
    from slop_tui.workspace import Workspace

    def wrap(owner, name, label, is_async=True):
        fn = getattr(owner, name)
        if is_async:

            @functools.wraps(fn)
            async def timed(*a, **k):
                t = time.time()
                try:
                    return await fn(*a, **k)
                finally:
                    STEPS.append((label, t - ARGS.t0, time.time() - ARGS.t0))
        else:

            @functools.wraps(fn)
            def timed(*a, **k):
                t = time.time()
                try:
                    return fn(*a, **k)
                finally:
                    STEPS.append((label, t - ARGS.t0, time.time() - ARGS.t0))

        setattr(owner, name, timed if not isinstance(fn, classmethod) else classmethod(timed))

    Workspace.open = classmethod(_wrap_cls(Workspace.open.__func__, "Workspace.open"))
    wrap(groups.GroupList, "refresh_from", "GroupList.refresh_from")
    wrap(WorkspaceScreen, "refresh_context", "WorkspaceScreen.refresh_context (gauge, preview)")
    wrap(Workspace, "prompt", "Workspace.prompt")
    wrap(conversation.ConversationView, "load", "ConversationView.load")
    wrap(tokens, "_build_encoding", "tokenizer build (o200k)", is_async=False)
    wrap(gauge.TokenGauge, "update_from", "TokenGauge.update_from", is_async=False)
    wrap(preview.ContextPreview, "set_prompt", "ContextPreview.set_prompt", is_async=False)


def _wrap_cls(fn, label):
    async def timed(cls, *a, **k):
        t = time.time()
        try:
            return await fn(cls, *a, **k)
        finally:
            STEPS.append((label, t - ARGS.t0, time.time() - ARGS.t0))

    return timed


# Frames are stamped with perf_counter; this converts them to the parent's clock.
WALL = time.time() - time.perf_counter()

FRAMES: list[float] = []  # perf_counter of every frame
SIGS: list[tuple] = []  # what the screen showed, cheaply: see _signature
READY_FRAME: list[float] = []  # first frame drawn once app.ready
PENDING: dict | None = None  # the key waiting for its frame
DEBUG_FRAMES = bool(os.environ.get("BENCH_DEBUG_FRAMES"))
DIRTY: list = []
if DEBUG_FRAMES:
    _time_steps()


def _rss_mb() -> float:
    """Peak resident set of this process so far (VmHWM), MB.

    Not `getrusage().ru_maxrss`: on Linux a child's maxrss starts from its parent's
    peak at fork (exec keeps it), so it read the bench parent's memory (~105 MB)
    at every size, the empty session included."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return 0.0


class _Refs:
    conv = None
    groups = None
    area = None


def _signature(app: App) -> tuple | None:
    if _Refs.groups is None:  # the side panes are mounted after the first frame
        try:
            conv = app.query_one("#conversation")
            _Refs.groups = app.query_one("#group-list")
        except Exception:
            return None
        _Refs.conv = conv
    conv, groups = _Refs.conv, _Refs.groups
    return (
        app.ready,
        conv.mounted_blocks,
        conv._lo,
        conv._hi,
        conv.virtual_size.height,
        conv.scroll_y,
        groups.option_count,
        groups.scroll_y,
    )


_original_display = App._display
ECHO: list = [None]  # the widget slop_tui.ui.echo.draw_now is drawing, while it draws
_original_draw_now = echo.draw_now


def _draw_now(widget, *also) -> bool:
    ECHO[0] = widget
    try:
        return _original_draw_now(widget, *also)
    finally:
        ECHO[0] = None


echo.draw_now = _draw_now


def _display(self: App, screen, renderable) -> None:
    global PENDING
    if renderable is not None and not self._batch_count and self._running and screen is self.screen:
        t_frame = time.perf_counter()
        if isinstance(renderable, CompositorUpdate):
            renderable.render_segments(self.console)  # what writing to a terminal costs
        now = time.perf_counter()
        if KEY_TRACE:
            TIMELINE.append((t_frame, "frame", (now - t_frame) * 1e3, type(renderable).__name__))
        FRAMES.append(now)
        SIGS.append(_signature(self))
        if DEBUG_FRAMES:
            DIRTY.append(
                (
                    now,
                    IN_LAYOUT[0],
                    sorted({type(w).__name__ for w in screen._dirty_widgets}),
                    HEART["phase"],
                )
            )
        if not READY_FRAME and getattr(self, "ready", False):
            READY_FRAME.append(now)
        p = PENDING
        if p is not None and not p["fut"].done():
            if p["first"] is None:
                p["first"] = now
            dirty = screen._dirty_widgets
            repainted = (
                p["widget"] in dirty
                or screen in dirty
                or (p["layout"] and IN_LAYOUT[0])
                or (p["scroll"] and (IN_LAYOUT[0] or IN_SCROLL[0]))
                or p["widget"] is ECHO[0]  # drawn at once after the key (ui/echo.py)
                or (p["hint"] and p["hint"] in _frame_text(renderable))
            )
            if p["probe"]() and repainted:
                p["cpu_done"] = time.thread_time()
                p["fut"].set_result(now)
    _original_display(self, screen, renderable)


App._display = _display  # type: ignore[method-assign]

from textual.screen import Screen  # noqa: E402

_original_refresh_layout = Screen._refresh_layout
IN_LAYOUT = [False]  # a frame drawn by a full reflow repaints every widget whose region changed
IN_SCROLL = [False]  # a frame drawn by the layout of a scroll repaints what moved


FRAME_COST: dict[str, list[tuple[float, bool]]] = {}  # phase -> (ms, reflowed) (stall trace)


def _refresh_layout(self, size=None, scroll=False):
    IN_LAYOUT[0] = not scroll
    IN_SCROLL[0] = scroll
    t = time.perf_counter()
    try:
        return _original_refresh_layout(self, size, scroll)
    finally:
        IN_LAYOUT[0] = IN_SCROLL[0] = False
        if KEY_TRACE:
            TIMELINE.append(
                (t, "layout", (time.perf_counter() - t) * 1e3, "scroll" if scroll else "reflow")
            )
        if STALL_TRACE:
            ms = (time.perf_counter() - t) * 1e3
            FRAME_COST.setdefault(HEART["phase"], []).append((round(ms, 1), not scroll))


Screen._refresh_layout = _refresh_layout  # type: ignore[method-assign]
# The app's one-pass-reflow patch (ui/textual_fixes.py) replaces Screen._refresh_layout
# when the app is made and calls the method it kept: that one is timed.
textual_fixes._refresh_layout = _refresh_layout


# -- where each key's time went (BENCH_KEY_TRACE=1) ------------------------------------
#
# For every measured key: the collections, layout passes and frames between the key and
# its effect's frame (gc.callbacks, Screen._refresh_layout, App._display), and what the
# main thread was running, sampled every millisecond by a thread while the key waits.
# bench/tail.py sorts the slow keys by cause.

KEY_TRACE = bool(os.environ.get("BENCH_KEY_TRACE"))
TIMELINE: list[tuple[float, str, float, str]] = []  # (start, kind, ms, what) while a key waits
KEYS: list[dict] = []  # one record per measured key
_KEY_GC = {"t": 0.0}


def _key_gc(event: str, info: dict) -> None:
    if event == "start":
        _KEY_GC["t"] = time.perf_counter()
    elif PENDING is not None:
        t = _KEY_GC["t"]
        TIMELINE.append((t, "gc", (time.perf_counter() - t) * 1e3, str(info["generation"])))


def _key_sampler() -> None:
    import threading

    main = threading.main_thread().ident
    sys.setswitchinterval(0.001)
    while True:
        time.sleep(0.001)
        p = PENDING
        if p is None or p["fut"].done():
            continue
        frame = sys._current_frames().get(main)
        where = _where(frame) if frame is not None else "?"
        p["samples"][where] = p["samples"].get(where, 0) + 1


def _trace_key(p: dict, t: float, done: float) -> None:
    end = done if done != float("inf") else time.perf_counter()
    inside = [e for e in TIMELINE if t <= e[0] <= end]
    top = sorted(p["samples"].items(), key=lambda kv: -kv[1])[:4]
    KEYS.append(
        {
            "case": HEART.get("case", ""),
            "ms": round((end - t) * 1e3, 2),
            "cpu_ms": round((p.get("cpu_done", time.thread_time()) - p["cpu"]) * 1e3, 2),
            "gc": [(g, round(ms, 2)) for _t, k, ms, g in inside if k == "gc"],
            "layouts": [(w, round(ms, 2)) for _t, k, ms, w in inside if k == "layout"],
            "frames": [round(ms, 2) for _t, k, ms, _w in inside if k == "frame"],
            "first_frame_ms": round((inside_first(inside, "frame") - t) * 1e3, 2)
            if inside_first(inside, "frame") is not None
            else None,
            "samples": sum(p["samples"].values()),
            "where": top,
        }
    )


def inside_first(events: list, kind: str) -> float | None:
    return next((e[0] for e in events if e[1] == kind), None)


# -- a provider that streams at a fixed rate -------------------------------------------

from slop_tui.providers.base import Provider, ProviderReply, TextDelta  # noqa: E402

STREAM = {"stop": False, "count": 0, "t0": 0.0, "t1": 0.0}

_WORDS = (
    "the ledger window group session tool result assistant prompt parser index query "
    "sqlite token state anchor scratchpad stream render widget layout compositor frame"
).split()


def _delta(i: int, rnd: random.Random) -> str:
    """Markdown as a model streams it: words, paragraph breaks, a list, a code block."""
    k = i % 240
    if k == 0:
        return f"\n\n## Step {i // 240}\n\n"
    if k == 60:
        return "\n\n- first item with `code`\n- second item\n\n"
    if k == 120:
        return "\n\n```python\n"
    if 120 < k < 150:
        return ("    " if k % 5 else "") + rnd.choice(_WORDS) + (" = 1\n" if k % 3 == 0 else "(")
    if k == 150:
        return ")\n```\n\n"
    if k % 45 == 0:
        return ".\n\n"
    return rnd.choice(_WORDS) + " "


class PacedProvider(Provider):
    """In-memory provider (bench/turn.py's InstantProvider) paced at `rate` deltas/s until told to stop."""

    name, strategy, model = "bench", "openai", "bench"

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def request_body(self, prompt, model=None):
        return {}

    async def stream(self, prompt, model=None):
        rnd = random.Random(7)
        parts: list[str] = []
        t0 = STREAM["t0"] = time.perf_counter()
        i = 0
        while not STREAM["stop"] and i < 100_000:
            delay = t0 + i / self.rate - time.perf_counter()
            await asyncio.sleep(delay if delay > 0 else 0)  # late deltas come in a burst
            d = _delta(i, rnd)
            parts.append(d)
            i += 1
            STREAM["count"] = i
            yield TextDelta(d)
        STREAM["t1"] = time.perf_counter()
        tail = "\n\n### STATE\nGoal: bench\nTechnical Anchors: none\n"
        yield TextDelta(tail)
        parts.append(tail)
        yield ProviderReply(
            text="".join(parts),
            prompt_tokens=prompt.total_tokens,
            completion_tokens=i,
            finish_reason="stop",
        )

    async def list_models(self):
        return ["bench"]

    async def aclose(self):
        return None


# -- the measurement -------------------------------------------------------------------

RESULT: dict = {}


async def _wait(cond, timeout: float, step: float = 0.01) -> bool:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if cond():
            return True
        await asyncio.sleep(step)
    return cond()


async def _settle(app: SlopApp, quiet: float, timeout: float = 60.0) -> tuple[bool, float]:
    """Wait for ready and then `quiet` seconds without a frame; returns (ok, last frame)."""
    end = time.perf_counter() + timeout
    ok = await _wait(lambda: app.ready or app.startup_error is not None, timeout)
    if not ok or app.startup_error:
        return False, FRAMES[-1] if FRAMES else 0.0
    while time.perf_counter() < end:
        await asyncio.sleep(0.05)
        last = FRAMES[-1] if FRAMES else 0.0
        # Ready and quiet; a screen that needed no frame once ready (an empty session
        # whose side panes were drawn before it) is shown as of its last frame.
        if time.perf_counter() - last >= quiet:
            return True, last
        # Frames that keep coming without a change of the transcript do not count.
        if READY_FRAME and len(SIGS) > 1:
            j = len(SIGS) - 1
            while j > 0 and SIGS[j - 1] == SIGS[-1]:
                j -= 1
            if time.perf_counter() - FRAMES[j] >= 4 * quiet:
                return True, FRAMES[j]
    return False, FRAMES[-1] if FRAMES else 0.0


async def _press(
    app: SlopApp,
    key: str,
    char: str | None,
    probe,
    widget,
    timeout: float = 3.0,
    layout: bool = False,
    scroll: bool = False,
    hint: str = "",
) -> tuple[float, float]:
    """(key -> effect frame, key -> any next frame) in ms; inf when no frame came.

    `layout`: the effect is a change of layout (mounted blocks), so a frame drawn
    by a full reflow shows it even when `widget` itself was not repainted.
    `scroll`: the effect is a scroll of `widget`, which a frame drawn by a layout
    (of the scroll, or a full one) shows.
    `hint`: the effect is this text on screen (a frame that writes it shows it).
    """
    global PENDING
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    t = time.perf_counter()
    if KEY_TRACE:
        TIMELINE.clear()
    PENDING = {
        "cpu": time.thread_time(),  # the main thread's CPU time: less sensitive to load
        "samples": {},
        "probe": probe,
        "widget": widget,
        "fut": fut,
        "first": None,
        "layout": layout,
        "scroll": scroll,
        "hint": hint,
        "t": t,
    }
    app._driver.process_message(events.Key(key, char))
    try:
        done = await asyncio.wait_for(fut, timeout)
    except TimeoutError:
        done = float("inf")
    first = PENDING["first"]
    if KEY_TRACE:
        _trace_key(PENDING, t, done)
    PENDING = None
    return (done - t) * 1e3, ((first - t) * 1e3 if first is not None else float("inf"))


def _wanted(name: str) -> bool:
    """Whether the key case `name` is measured (`--cases`: one of its words is in it)."""
    words = [w.strip() for w in ARGS.cases.split(",") if w.strip()]
    return not words or any(w in name for w in words)


def _case(name: str) -> dict:
    """The raw latencies of one case, kept in RESULT as they come (the watchdog reads them)."""
    HEART["case"] = name
    case = {"effect": [], "next": []}
    RESULT.setdefault("latency", {})[name] = case
    return case


def _record(case: dict, effect: float, nxt: float) -> None:
    case["effect"].append(effect)
    case["next"].append(nxt)


async def _type_in_prompt(app: SlopApp, name: str, n: int, until=None, limit: float = 0.0) -> None:
    """Type `n` letters in the prompt; with `until`, go on typing while `until()` is
    false, for at most `limit` seconds."""
    prompt = app.query_one("#prompt")
    area = app.query_one("#prompt-area")
    if app.focused is not area:
        await _press(app, "f2", None, lambda: app.focused is area, area)
    rnd = random.Random(3)
    letters = "abcefghijklmnopqrstvwyz"  # no d/u/x: bound elsewhere; typed text only
    case = _case(name)
    deadline = time.perf_counter() + limit
    i = 0
    while i < n or (until is not None and not until() and time.perf_counter() < deadline):
        i += 1
        if len(area.text) > 400:
            prompt.clear()
        before = len(area.text)
        ch = letters[i % len(letters)]
        e, f = await _press(app, ch, ch, lambda b=before: len(area.text) > b, area, timeout=60.0)
        _record(case, e, f)
        await asyncio.sleep(rnd.uniform(0.03, 0.09))
    prompt.clear()


async def _move_in_groups(app: SlopApp, name: str, n: int) -> None:
    """`up` `n` times in the groups pane (focused with F3, as a user would)."""
    groups = app.query_one("#group-list")
    if groups.option_count < 2:
        return
    await _press(app, "f3", None, lambda: app.focused is groups, groups)
    await _wait(lambda: app.focused is groups, 2.0)
    rnd = random.Random(4)
    case = _case(name)
    for _ in range(n):
        before = groups.highlighted
        e, f = await _press(app, "up", None, lambda b=before: groups.highlighted != b, groups)
        _record(case, e, f)
        await asyncio.sleep(rnd.uniform(0.03, 0.09))


PALETTE_HINT = "Search for commands"  # the command palette's field is on screen


async def _open_palette(app: SlopApp, name: str, n: int) -> None:
    """ctrl+p from the prompt `n` times (bench/screen.py's palette case): key -> the
    first frame that writes the palette's field; Esc closes it, unmeasured."""
    from slop_tui.ui.palette import SlopPalette

    area = app.query_one("#prompt-area")
    if app.focused is not area:
        await _press(app, "f2", None, lambda: app.focused is area, area)
    rnd = random.Random(5)
    case = _case(name)
    for _ in range(n):
        e, f = await _press(
            app,
            "ctrl+p",
            None,
            lambda: isinstance(app.screen, SlopPalette),
            None,
            hint=PALETTE_HINT,
        )
        _record(case, e, f)
        await asyncio.sleep(0.1)  # the opening's later frames (bench/screen.py's rest)
        app._driver.process_message(events.Key("escape", None))
        await _wait(lambda: not isinstance(app.screen, SlopPalette), 5.0)
        await asyncio.sleep(0.2 + rnd.uniform(0.03, 0.09))


async def _page_up(app: SlopApp, name: str, pages: int, idle: bool = True) -> None:
    """ctrl+u in the conversation, `pages` times, six at a time and End after each six
    (as bench/screen.py presses them): key -> the first frame that shows older content
    (the pane scrolled up, or older groups mounted), and the most widgets / GroupBlocks
    mounted on the way (the bound)."""
    conv = app.query_one("#conversation")
    conv.focus()
    await _wait(lambda: app.focused is conv, 2.0)
    # As a user's ctrl+u comes after the pane shows it has the focus (a click, then
    # the key): the focus change's own frames are not the first page's.
    await _rest(app, idle, 0.3)
    most = _counts(app)
    case = _case(name)
    for i in range(pages):
        if i and i % 6 == 0 or conv._lo == 0:
            await conv.show_newest()
            await _rest(app, idle, 0.5 if idle else 1.0)
            if conv._lo == 0:
                break
        before, top = conv._lo, conv.scroll_y
        e, f = await _press(
            app,
            "ctrl+u",
            None,
            lambda b=before, y=top: conv._lo < b or conv.scroll_y < y,
            conv,
            timeout=10.0,
            layout=True,
            scroll=True,
        )
        _record(case, e, f)
        c = _counts(app)
        most = {k: max(most[k], c[k]) for k in c}
        await _rest(app, idle, 0.3)
        c = _counts(app)
        most = {k: max(most[k], c[k]) for k in c}
        RESULT["paging" if idle else "paging streaming"] = {
            "max_widgets": most["widgets"],
            "max_blocks": most["blocks"],
            "lo": conv._lo,
            "bound": conv.max_blocks,
        }
    await conv.show_newest()


async def _rest(app: SlopApp, idle: bool, seconds: float) -> None:
    """Idle: `seconds` without a frame (at most 5 s); while a reply streams (frames never
    stop): `seconds` plus a little, as bench/screen.py waits."""
    if idle:
        await _settle(app, seconds, timeout=5.0)
    else:
        await asyncio.sleep(seconds + random.uniform(0.03, 0.09))


async def _page_keys(app: SlopApp, name: str, n: int, idle: bool = False) -> None:
    """PageUp in the conversation, `n` times, six at a time and End after each six (or at
    its top): key -> the frame that shows the pane scrolled. Focused first, as a click on
    it would."""
    conv = app.query_one("#conversation")
    conv.focus()
    await _wait(lambda: app.focused is conv, 2.0)
    await asyncio.sleep(0.3)  # the focus change's frames are not the first key's
    case = _case(name)
    rnd = random.Random(6)
    for i in range(n):
        if i and i % 6 == 0 or conv.scroll_y <= 0:
            await conv.show_newest()
            await _rest(app, idle, 0.5 if idle else 1.0)
            if conv.scroll_y <= 0:
                break
        before = conv.scroll_y
        e, f = await _press(
            app, "pageup", None, lambda b=before: conv.scroll_y < b, conv, scroll=True
        )
        _record(case, e, f)
        await _rest(app, idle, rnd.uniform(0.2, 0.4))
    await conv.show_newest()


def _counts(app: SlopApp) -> dict:
    conv = app.query_one("#conversation")
    return {
        "widgets": len(list(app.query("*"))),
        "blocks": conv.mounted_blocks,
        "groups": _Refs.groups.option_count if _Refs.groups is not None else 0,
    }


PHASES: dict[str, float] = {}


def _phase(name: str) -> None:
    PHASES[name] = time.time() - ARGS.t0


async def bench(pilot) -> None:  # started by App.run(auto_pilot=...); uses no Pilot waits
    app: SlopApp = pilot.app
    try:
        ok, last = await _settle(app, ARGS.quiet)
        if PROFILER is not None:
            PROFILER.disable()
            PROFILER.dump_stats(ARGS.profile)
        RESULT.update(
            ok=ok,
            error=app.startup_error,
            t_child=T_CHILD - ARGS.t0,
            t_imported=T_IMPORTED - ARGS.t0,
            first_frame=(FRAMES[0] + WALL - ARGS.t0) if FRAMES else None,
            ready_frame=(READY_FRAME[0] + WALL - ARGS.t0) if READY_FRAME else None,
            shown=last + WALL - ARGS.t0,
            frames_to_shown=sum(1 for t in FRAMES if t <= last),
            rss_shown=_rss_mb(),
            cpu_shown=time.process_time(),  # CPU seconds: less sensitive to other load
            **_counts(app),
        )
        _phase("shown")
        if not ok or not (ARGS.latency or ARGS.page):
            return
        keys_profiler = None
        if ARGS.profile_keys:
            import cProfile

            keys_profiler = cProfile.Profile()
            keys_profiler.enable()
        _in_phase("idle")
        heartbeat = asyncio.create_task(_heartbeat())
        if ARGS.latency:
            if _wanted("prompt idle"):
                await _type_in_prompt(app, "prompt idle", ARGS.presses)
            if _wanted("groups idle"):
                await _move_in_groups(app, "groups idle", ARGS.presses)
            if ARGS.cases and _wanted("palette idle"):  # only when named
                await _open_palette(app, "palette idle", ARGS.presses)
            _phase("idle keys")
        if ARGS.page:
            _in_phase("paging")
            if _wanted("conversation ctrl+u"):
                await _page_up(app, "conversation ctrl+u", ARGS.page)
            if ARGS.latency and _wanted("conversation pageup"):
                await _page_keys(app, "conversation pageup", ARGS.presses, idle=True)
            RESULT["rss_after_paging"] = _rss_mb()
            _phase("paging")
        if ARGS.latency and not ARGS.no_stream:
            await _stream_cases(app)
        heartbeat.cancel()
        RESULT["stalls"] = STALLS
        if keys_profiler is not None:
            keys_profiler.disable()
            keys_profiler.dump_stats(ARGS.profile_keys)
        RESULT["rss_end"] = _rss_mb()
    except Exception as exc:  # reported, not swallowed
        import traceback

        RESULT["exception"] = "".join(traceback.format_exception(exc))
    finally:
        app.exit()


async def _stream_cases(app: SlopApp) -> None:
    """Keys while a reply streams at `--rate` deltas/s, then while the turn's
    background job (after-reply compaction, lane summary) runs."""
    # The first submit builds the tokenizer (tiktoken's Rust core holds the GIL for
    # ~0.2 s while it takes the 200k ranks) and imports the turn's modules: its
    # stall is reported on its own row.
    _in_phase("first submit")
    from slop_tui.orchestrator import Orchestrator

    ws = app.workspace
    orch = app.turns.orchestrator = Orchestrator(
        ws,
        approve=ws.config.approve,
        approver=app.turns.ask_approval,
        provider_factory=lambda cfg: PacedProvider(ARGS.rate),
    )
    conv = app.query_one("#conversation")
    app.turns.run_turn("bench: explain the compositor in detail")
    started = await _wait(
        lambda: (
            conv.live_block is not None
            and conv.live_block.live_answer is not None
            and STREAM["count"] > 50
        ),
        20.0,
    )
    if not started:
        RESULT["stream_error"] = "the streamed reply never showed"
        STREAM["stop"] = True
        return
    c0, t0 = STREAM["count"], time.perf_counter()
    _in_phase("streaming")
    if _wanted("prompt streaming"):
        await _type_in_prompt(app, "prompt streaming", ARGS.presses)
    if _wanted("groups streaming"):
        await _move_in_groups(app, "groups streaming", ARGS.presses)
    if ARGS.cases and _wanted("palette streaming"):  # only when named
        await _open_palette(app, "palette streaming", ARGS.presses)
    if _wanted("conversation pageup streaming"):
        await _page_keys(app, "conversation pageup streaming", ARGS.presses)
    if ARGS.page and _wanted("conversation ctrl+u streaming"):
        await _page_up(app, "conversation ctrl+u streaming", ARGS.page, idle=False)
    c1, t1 = STREAM["count"], time.perf_counter()
    RESULT["stream_rate"] = (c1 - c0) / (t1 - t0)
    RESULT["stream_deltas"] = c1
    RESULT["during_stream"] = _counts(app)
    RESULT["rss_streaming"] = _rss_mb()
    _phase("streaming keys")
    STREAM["stop"] = True
    t_stop = WATCH["t_stop"] = time.perf_counter()
    WATCH["deadline"] = t_stop + ARGS.bg_wait + ARGS.key_cap
    _in_phase("after turn")

    def background_done() -> bool:
        task = orch.compaction_task
        return not app.turns.busy and (task is None or task.done())

    # The reply ends; keep typing while the turn settles and its background job runs.
    if not _wanted("prompt after turn"):
        WATCH["deadline"] = None
        return
    await _type_in_prompt(
        app, "prompt after turn", ARGS.presses, until=background_done, limit=ARGS.bg_wait
    )
    RESULT["turn_finished"] = await _wait(background_done, 1.0)
    RESULT["after_turn_s"] = time.perf_counter() - t_stop
    WATCH["deadline"] = None
    RESULT["after_turn"] = _counts(app)
    RESULT["rss_after_turn"] = _rss_mb()
    _phase("after turn")


WATCH: dict = {"t_stop": None, "deadline": None}


def _emit() -> None:
    sys.stdout.write("\n" + json.dumps(RESULT, default=str) + "\n")
    sys.stdout.flush()


def _watchdog() -> None:
    """A thread: when the event loop holds one key longer than --key-cap, or the turn's
    background job is still running --bg-wait + --key-cap seconds after the reply ended,
    record what we have (the key as at least that long), print it and leave."""
    while True:
        time.sleep(0.2)
        now = time.perf_counter()
        p = PENDING
        waited = now - p["t"] if p is not None and not p["fut"].done() else 0.0
        deadline = WATCH.get("deadline")
        if waited < ARGS.key_cap and (deadline is None or now < deadline):
            continue
        cases = RESULT.get("latency") or {}
        if waited and cases:
            name, case = list(cases.items())[-1]
            case["effect"].append(waited * 1e3)
            case["next"].append(float("inf") if p["first"] is None else (p["first"] - p["t"]) * 1e3)
            case["gave_up"] = True
        _stall_note(now)
        if WATCH["t_stop"] is not None and "after_turn_s" not in RESULT:
            RESULT["after_turn_s"] = now - WATCH["t_stop"]
            RESULT["turn_finished"] = False
        RESULT["gave_up"] = (
            f"the event loop held a key for {waited:.1f} s; run ended there"
            if waited
            else f"the turn's background job still ran {now - WATCH['t_stop']:.0f} s after "
            "the reply; run ended there"
        )
        RESULT["rss_after_turn"] = _rss_mb()
        RESULT["rss_peak"] = _rss_mb()
        RESULT["phases"] = PHASES
        RESULT["stalls"] = STALLS
        if STALL_TRACE:
            RESULT["traced"] = TRACED
        _emit()
        os._exit(0)


# -- event-loop stalls: the longest time the loop ran nothing else, per phase ----------

STALLS: dict[str, float] = {}  # phase -> longest gap between two 10 ms heartbeats, ms
HEART = {"phase": "", "last": 0.0}


async def _heartbeat() -> None:
    HEART["last"] = time.perf_counter()
    while True:
        await asyncio.sleep(0.01)
        now = time.perf_counter()
        _stall(HEART["phase"], (now - HEART["last"] - 0.01) * 1e3)
        HEART["last"] = now


def _stall(phase: str, gap_ms: float) -> None:
    if phase and gap_ms > STALLS.get(phase, 0.0):
        STALLS[phase] = gap_ms


def _stall_note(now: float) -> None:
    """The gap still open when the watchdog gives up counts too."""
    _stall(HEART["phase"], (now - HEART["last"]) * 1e3)


def _in_phase(name: str) -> None:
    HEART["phase"] = name
    if PHASE_PROFILE:  # BENCH_PROFILE_PHASE=streaming: cProfile that phase only
        if name == PHASE_PROFILE[0]:
            PHASE_PROFILER.enable()
        else:
            PHASE_PROFILER.disable()


# `BENCH_PROFILE_PHASE=NAME` (with BENCH_PROFILE_OUT=FILE): a cProfile of one phase
# (idle, paging, first submit, streaming, after turn) written when the app exits.
PHASE_PROFILE = [p for p in [os.environ.get("BENCH_PROFILE_PHASE")] if p]
if PHASE_PROFILE:
    import cProfile

    PHASE_PROFILER = cProfile.Profile()


# -- stall tracing (BENCH_STALL_TRACE=1): what the loop ran during each long stall ----------

STALL_TRACE = bool(os.environ.get("BENCH_STALL_TRACE"))
STALL_MS = float(os.environ.get("BENCH_STALL_MS") or 40)
TRACED: list[dict] = []  # per stall > STALL_MS: phase, ms, gc pauses inside it, sampled stacks
GC_PAUSES: list[tuple[float, float, str]] = []  # (start, ms, "gen/collected") of those > 5 ms
_GC_START = {"t": 0.0}


def _gc_callback(event: str, info: dict) -> None:
    if event == "start":
        _GC_START["t"] = time.perf_counter()
    else:
        ms = (time.perf_counter() - _GC_START["t"]) * 1e3
        if ms > 5:
            GC_PAUSES.append((_GC_START["t"], ms, f"{info['generation']}/{info['collected']}"))


def _where(frame) -> str:
    """The innermost frames of the app, Textual or Rich, innermost last."""
    names = []
    while frame is not None and len(names) < 5:
        path = frame.f_code.co_filename
        if any(k in path for k in ("slop_tui", "textual", "rich", "markdown_it", "pygments")):
            short = path.rsplit("site-packages/", 1)[-1].rsplit("/main/", 1)[-1]
            names.append(f"{short}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return " <- ".join(names) or "(outside the app)"


def _stall_sampler() -> None:
    import collections
    import threading

    main = threading.main_thread().ident
    sys.setswitchinterval(0.001)  # the sampler gets the GIL often enough to see a stall
    current = None
    while True:
        time.sleep(0.004)
        last = HEART["last"]
        late = time.perf_counter() - last
        if current is not None and current["last"] != last:
            ms = (current["end"] - current["last"]) * 1e3
            if ms > STALL_MS:
                gcs = [
                    (round(p, 1), g)
                    for t, p, g in GC_PAUSES
                    if current["last"] <= t <= current["end"]
                ]
                TRACED.append(
                    {
                        "phase": current["phase"],
                        "ms": round(ms),
                        "gc": gcs,
                        "stacks": current["samples"].most_common(6),
                        "inclusive": current["inclusive"].most_common(12),
                    }
                )
            current = None
        if late > 0.02:
            if current is None:
                current = {
                    "last": last,
                    "phase": HEART["phase"],
                    "samples": collections.Counter(),
                    "inclusive": collections.Counter(),
                }
            current["end"] = time.perf_counter()
            frames = sys._current_frames()
            frame = frames.get(main)
            current["samples"][_where(frame)] += 1
            for ident, other in frames.items():
                if ident not in (main, threading.get_ident()):
                    where = _where(other)
                    if where != "(outside the app)":
                        current["samples"]["[thread] " + where] += 1
            seen = set()
            while frame is not None:
                code = frame.f_code
                key = f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}"
                if key not in seen:
                    seen.add(key)
                    current["inclusive"][key] += 1
                frame = frame.f_back


def main() -> None:
    import threading

    threading.Thread(target=_watchdog, daemon=True).start()
    if KEY_TRACE:
        import gc

        gc.callbacks.append(_key_gc)
        threading.Thread(target=_key_sampler, daemon=True).start()
    if STALL_TRACE:
        import gc

        gc.callbacks.append(_gc_callback)
        threading.Thread(target=_stall_sampler, daemon=True).start()
    app = SlopApp(
        db=ARGS.db,
        session=ARGS.session,
        user_themes=False,
        blink=False,
        cwd=Path(ARGS.cwd),
        env={"SLOP_CONFIG": ARGS.config or str(Path(ARGS.cwd) / "no-config.toml")},
    )
    app.run(headless=True, size=(120, 40), auto_pilot=bench)
    _phase("exited")
    if PHASE_PROFILE:
        PHASE_PROFILER.disable()
        PHASE_PROFILER.dump_stats(os.environ.get("BENCH_PROFILE_OUT") or "phase.prof")
    RESULT["phases"] = PHASES
    RESULT["rss_peak"] = _rss_mb()
    RESULT["frames"] = len(FRAMES)
    if DEBUG_FRAMES:
        RESULT["steps"] = [(n, round(a, 3), round(b, 3)) for n, a, b in STEPS]
        RESULT["dirty"] = [
            (round((t + WALL - ARGS.t0) * 1e3), lay, names, phase) for t, lay, names, phase in DIRTY
        ]
    if STALL_TRACE:
        RESULT["traced"] = TRACED
        RESULT["frame_cost"] = FRAME_COST
    if KEY_TRACE:
        RESULT["keys"] = KEYS
    _emit()


if __name__ == "__main__":
    main()
