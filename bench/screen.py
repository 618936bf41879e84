"""The user's clock: the real `slop-tui` in a pseudo-terminal, read by a terminal emulator.

    python bench/screen.py [--quick] [--runs N] [--presses N] [--no-keys] [--keep DIR]
                           [--apps hello,empty,2k,20k] [--cases WORD,...] [--log FILE]
                           [--env VAR=VALUE ...] [--profile]
    python bench/screen.py --report LOG [LOG ...]

bench/tui.py times frames from inside the process; this one stands where the
user sits. Every start is the installed console script (`slop-tui` beside the
bench's Python) in a fresh 120x40 pty, its output fed to `pyte` (bench/_term.py:
chunks stamped when read, a blinking cursor is not a change), nothing of the
app patched. Its ledger is bench/tui.py's (empty, 2,000 and 20,000 messages),
with a marker word put at the end of each session's last answer.

- **first useful frame**: process start (just before the spawn) → the first
  chunk after which the marker and the prompt (its placeholder) are both on
  screen: what a user can read and type into. The empty session's marker is its
  name in the header, which the app writes once the ledger is open.
- **shown** (settled): from there, every pane drawn (the side panes' last
  title, "Context preview", on screen) and nothing changes for 0.6 s: the time
  of the last change before that quiet.
- **hello-world**: bench/screen_hello.py (Header, one Static, Footer), started
  the same way in the same run, interleaved with the sessions; ratios are
  slop-tui's median over its median (and the range of the per-run ratios). Its
  first useful frame is its marker on screen, its settled time as slop-tui's.
- **key → screen**: a key written to the pty → the first chunk after which the
  screen shows its effect: the prompt holds the text typed so far (typing and
  backspace), the groups pane's highlighted row is another one (`up` after F3),
  the conversation's lines moved down or were replaced (PageUp, ctrl+u, after a
  click on a line of text in the conversation; `end` goes back between the
  two, after every six), the command palette's field is on screen (ctrl+p; Esc
  closes it, unmeasured). Idle keys wait for 50 ms of quiet first (conversation
  keys 0.3 s: their effect can take several frames); all keys are 30-90 ms apart.
  While keys are timed this process runs no automatic garbage collection and
  switches threads every 0.5 ms (`stamping`), so that its own pauses (a collection
  of the emulator's cells, its feeding of a chunk) do not delay the stamp of the
  next chunk. Then the same five
  while a reply streams: the app's provider is an OpenAI-compatible one pointed
  at tests/fakeserver.py on 127.0.0.1, sending 200 deltas/s of markdown.
- **memory**: VmHWM (peak resident set) from /proc/PID/status when shown, and
  at the end of the key cases.

`--profile`: instead of the measure, where one 2,000-message start spends its
time, from outside: a start with `-X importtime` (its report to a file; the
hello-world app too; imports made before the script runs, `site` and the
codecs, are left out) gives the import time per package, and a start
under `python -m cProfile` (ended with ctrl+q once settled) the start-up's
phases. cProfile roughly doubles every time; read its shares, not its ms.

Every start is measured `--runs` times (default 5); keys are measured in every
run and pooled: median, p99 and max. While a reply streams, the keys that set a
case up (focus, Esc, End) wait a fixed time, not for a quiet screen (there is
none); a streamed key is only sent while the reply (STREAM_S long) still flows.

Each finished start and each finished key case is appended to a JSON-lines log
as it ends (`--log FILE`; with `--keep DIR` by default DIR/screen-log.jsonl)
and a line on stderr says where the run is; the table is made from those
records. `--report LOG ...` prints the table of one or several logs pooled, so
a long run can be split over several invocations (`--apps`, `--cases`) and an
interrupted one keeps what it measured. `kill -USR1 PID` prints where a running
bench is. `--quick` (under 3 minutes, to run on every
change that touches the screen): every target still measured, on fewer samples:
2 starts of each app (start-up, settled, memory) and the key cases in one start,
of the 20,000-message session (the slowest for keys), 10 keys per case.

Targets (black-box clock), at 2,000 and 20,000 messages: the first useful
frame <= 1.5x the hello-world app's, settled <= 2x its settled time (and
<= 0.6 s); every key <= 16 ms at p99 idle and <= 33 ms while a reply streams;
<= 100 MB VmHWM at 20,000 messages when shown.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import _common as c
import tui
from _term import Term, click, cpu_seconds, environment, stamping, status_kb
from screen_hello import MARKER as HELLO_MARKER

from tests.fakeserver import FakeLLMServer, Reply

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
SLOP = BIN / "slop-tui"
HELLO = HERE / "screen_hello.py"

SIZES = [("empty", 0), ("2k", 2_000), ("20k", 20_000)]
APPS = ["hello", "empty", "2k", "20k"]
LABEL = {
    "hello": "hello-world app",
    "empty": "empty",
    "2k": "2,000 msgs",
    "20k": "20,000 msgs",
}
MARK = {"2k": "endmark2k", "20k": "endmark20k"}
SHOWN_TARGET_S = 0.6
FIRST_RATIO_TARGET = 1.5  # first useful frame ÷ the hello-world app's
RATIO_TARGET = 2.0  # settled ÷ the hello-world app's
KEY_TARGET_MS = 16.0
KEY_STREAMING_TARGET_MS = 33.0  # two frames, while a reply streams
PROMPT_HINT = "Type a prompt"  # the prompt's placeholder: the prompt is on screen
LAST_PANE = "Context preview"  # the last side pane's title: every pane is drawn
PALETTE_HINT = "Search for commands"  # the command palette's field is on screen
RSS_TARGET_MB = 100.0
QUIET_S = 0.6
STREAM_MARK = "streamstart"
STREAM_RATE = 200.0
STREAM_S = 120.0  # how long the streamed reply lasts


# -- the ledger and the configuration -------------------------------------------------


def mark_ledger(path: Path) -> None:
    """Put the marker word at the end of each session's last answer (before its STATE)."""
    db = sqlite3.connect(path)
    try:
        for name, word in MARK.items():
            mid, content = db.execute(
                "SELECT id, content FROM messages WHERE session_id = ? AND role = 'assistant' "
                "AND status = 'completed' ORDER BY id DESC LIMIT 1",
                (name,),
            ).fetchone()
            body, sep, state = content.partition("\n\n### STATE")
            db.execute(
                "UPDATE messages SET content = ? WHERE id = ?",
                (f"{body.rstrip()} {word}{sep}{state}", mid),
            )
        db.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def stream_deltas(n: int) -> list[str]:
    """Markdown as a model streams it: words, headings, a list, a code block."""
    rnd = random.Random(7)
    words = (
        "the ledger window group session tool result assistant prompt parser index "
        "query sqlite token state anchor scratchpad stream render widget layout frame"
    ).split()
    out = [f"{STREAM_MARK} "]
    for i in range(1, n):
        k = i % 240
        if k == 0:
            out.append(f"\n\n## Step {i // 240}\n\n")
        elif k == 60:
            out.append("\n\n- first item with `code`\n- second item\n\n")
        elif k == 120:
            out.append("\n\n```python\n")
        elif 120 < k < 150:
            out.append(
                ("    " if k % 5 else "") + rnd.choice(words) + (" = 1\n" if k % 3 == 0 else "(")
            )
        elif k == 150:
            out.append(")\n```\n\n")
        elif k % 45 == 0:
            out.append(".\n\n")
        else:
            out.append(rnd.choice(words) + " ")
    return out


def streaming_provider(work: Path) -> tuple[FakeLLMServer, Path]:
    """The fake provider every app of a run talks to (a reply streamed at STREAM_RATE
    deltas a second for STREAM_S seconds) and the config file in `work` that points
    the apps at it; the caller stops the server."""
    fake = FakeLLMServer().start()
    fake.default_reply = Reply(
        text=stream_deltas(int(STREAM_RATE * STREAM_S)), delay=1 / STREAM_RATE, prompt_tokens=5000
    )
    config = work / "config.toml"
    write_config(config, fake.openai_base_url)
    return fake, config


def write_config(path: Path, base_url: str) -> None:
    path.write_text(
        'default_provider = "bench"\n\n'
        "[providers.bench]\n"
        'kind = "openai"\n'
        f'base_url = "{base_url}"\n'
        'model = "fake-model"\n'
        'api_key = "sk-bench"\n'
    )


# -- where things are on the screen ---------------------------------------------------


@dataclass
class Layout:
    """Screen regions as (x0, x1, y0, y1), read from the settled workspace."""

    prompt: tuple[int, int, int, int]
    conversation: tuple[int, int, int, int]
    groups: tuple[int, int, int, int] | None


def find_layout(term: Term) -> Layout | None:
    cols, rows = term.cols, term.rows
    seps = [
        x
        for x in range(cols)
        if sum(term.lines[y][x].data == "│" for y in range(1, rows - 1)) > rows // 2
    ]
    if len(seps) < 2:
        return None
    c1, c2 = seps[0], seps[1]
    prompt_y = next((y for y in range(rows) if "Type a prompt" in term.text(y, c1 + 1, c2)), None)
    if prompt_y is None:
        return None
    groups = None
    title = next((y for y in range(rows) if term.text(y, 0, c1).startswith(" Groups")), None)
    if title is not None:
        top = next((y for y in range(title, rows) if "▔" in term.text(y, 0, c1)), None)
        bottom = next(
            (y for y in range((top or rows) + 1, rows) if "▁▁▁" in term.text(y, 0, c1)), None
        )
        if top is not None and bottom is not None:
            groups = (0, c1, top + 1, bottom)
    return Layout(
        prompt=(c1 + 1, c2, prompt_y, rows - 1),
        conversation=(c1 + 1, c2 - 3, 1, prompt_y - 1),  # not its scrollbar
        groups=groups,
    )


def region(term: Term, box: tuple[int, int, int, int]) -> list[str]:
    x0, x1, y0, y1 = box
    return term.region(x0, x1, y0, y1)


def highlighted(term: Term, box: tuple[int, int, int, int]) -> str | None:
    """The text of the groups pane's highlighted row: the one whose background differs."""
    x0, x1, y0, y1 = box
    bgs = [term.lines[y][x0 + 5].bg for y in range(y0, y1)]
    common = statistics.mode(bgs)
    odd = [y for y, bg in zip(range(y0, y1), bgs, strict=True) if bg != common]
    return term.text(odd[0], x0, x1) if len(odd) == 1 else None


def older_in_view(old: list[str], new: list[str]) -> bool:
    """True when older content came into view: the new top line was not on screen
    before, or the old lines moved down (or were all replaced: a page jumped). A
    streamed reply that the view follows moves lines up, and its new top line was on
    screen before."""
    top = next((line for line in new if _content(line)), None)
    if top is not None and top not in old:
        return True
    return moved_down(old, new)


def _content(line: str) -> str:
    """A line without its margins: spaces and a block's left bar are not content."""
    return line.strip(" █▌▐▎▏│┃")


AGREE = 3  # lines that must move by the same amount for a move (not a replacement)


def moved_down(old: list[str], new: list[str]) -> bool:
    """True when the lines of `old` moved down in `new` or were all replaced.

    The move is the one most of `old`'s lines (those shown once) agree on in `new`;
    fewer than AGREE lines agreeing is a replacement. A reply's repeated lines (a
    list's items, say) found elsewhere on a new page are not a move."""
    first: dict[str, int] = {}
    seen_twice: set[str] = set()
    for i, line in enumerate(old):
        if _content(line):
            if line in first:
                seen_twice.add(line)
            first.setdefault(line, i)
    unique = {line: i for line, i in first.items() if line not in seen_twice}
    if not unique:
        return old != new
    shifts = Counter(j - unique[line] for j, line in enumerate(new) if line in unique)
    if not shifts:
        return True
    shift, agreeing = shifts.most_common(1)[0]
    if agreeing < min(AGREE, len(unique)):
        return True
    return shift > 0


# -- one start --------------------------------------------------------------------------


@dataclass
class Run:
    app: str
    shown: float | None = None  # s from process start to settled
    first: float | None = None  # s from process start to the first useful frame
    first_output: float | None = None
    rss_shown_mb: float | None = None
    cpu_shown: float | None = None
    rss_end_mb: float | None = None
    keys: dict[str, list[float]] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)
    ended: dict[str, int] = field(default_factory=dict)  # not sent: the reply had ended
    note: str = ""
    start: str = ""  # which invocation and run: pairs a start with its hello-world app's


class Starter:
    def __init__(self, work: Path, template: Path, config: Path) -> None:
        self.work = work
        # The app starts in a folder of its own: its user cache (work/cache) outside
        # the project, as on a user's machine (a cache inside the project is not loaded).
        self.project = work / "project"
        self.project.mkdir(exist_ok=True)
        self.template = template
        self.env = environment(
            SLOP_CONFIG=str(config),
            XDG_CONFIG_HOME=str(work / "config"),
            XDG_CACHE_HOME=str(work / "cache"),
            # Bytecode as an installed app has it: the warm-up start writes it here.
            PYTHONPYCACHEPREFIX=str(work / "pycache"),
        )

    def start(
        self, app: str, tag: str, *, prefix: tuple[str, ...] = (), **term
    ) -> tuple[Term, Path | None]:
        """Start `app` in a new terminal; `prefix` goes before the program (e.g. an
        interpreter with options), `term` to `Term` (env, stderr)."""
        term.setdefault("env", self.env)
        if app == "hello":
            argv = [*(prefix or (sys.executable,)), str(HELLO)]
            return Term(argv, cwd=str(self.project), **term), None
        db = self.work / f"run-{tag}.db"
        shutil.copyfile(self.template, db)
        argv = [*prefix, str(SLOP), "--db", str(db), "--session", app]
        return Term(argv, cwd=str(self.project), **term), db

    def marker(self, app: str) -> str:
        if app == "hello":
            return HELLO_MARKER
        if app == "empty":
            return "· empty ·"  # the header: "slop-tui — idle · empty · …"
        return MARK[app]


def measure_start(
    starter: Starter,
    app: str,
    tag: str,
    *,
    keys: int,
    timeout: float,
    on_case: Callable[[Run, str], None] | None = None,
    only: tuple[str, ...] = (),
) -> Run:
    """One start of `app`: its first useful frame, settled, memory, and with `keys` that
    many presses of each key case (`on_case(run, case)` after each case)."""
    run = Run(app)
    term, db = starter.start(app, tag)
    try:
        marker = starter.marker(app)
        seen = term.pump(lambda t: t.find(marker) is not None and useful(app, t), timeout)
        if seen is None:
            run.note = f"the marker never showed in {timeout:.0f} s"
            return run
        run.first = seen - term.t0
        if app != "hello" and term.pump(lambda t: t.find(LAST_PANE) is not None, timeout) is None:
            run.note = f"the side panes never showed in {timeout:.0f} s"
        last = term.settle(QUIET_S, timeout)
        if last is None:
            run.note = "the screen never settled"
            last = term.last_change
        run.shown = last - term.t0
        run.rss_shown_mb = (status_kb(term.pid, "VmHWM") or 0) / 1024
        run.cpu_shown = cpu_seconds(term.pid)
        if keys and app != "hello":
            with stamping():
                KeyCases(term, run, keys, on_case, only).all()
            run.rss_end_mb = (status_kb(term.pid, "VmHWM") or 0) / 1024
    finally:
        term.close()
        if db is not None:
            for p in db.parent.glob(db.name + "*"):
                p.unlink()
    return run


def useful(app: str, term: Term) -> bool:
    """Whether the screen can be read and typed into: slop-tui's prompt is drawn."""
    return app == "hello" or term.find(PROMPT_HINT) is not None


class KeyCases:
    """The key cases of one start, idle and while a reply streams."""

    def __init__(
        self,
        term: Term,
        run: Run,
        presses: int,
        on_case: Callable[[Run, str], None] | None = None,
        only: tuple[str, ...] = (),
    ) -> None:
        self.term = term
        self.only = only
        self.run = run
        self.presses = presses
        self.on_case = on_case
        self.stream_ends = 0.0  # perf_counter time the streamed reply ends at
        self.rnd = random.Random(3)
        layout = find_layout(term)
        if layout is None:
            raise RuntimeError("could not find the workspace's panes:\n" + term.dump())
        self.layout = layout
        self.typed = ""

    def all(self) -> None:
        has_groups = self.run.app != "empty"
        for when, idle in (("idle", True), ("reply streaming", False)):
            cases = [
                (f"typing in the prompt, {when}", self.typing, ()),
                (f"ctrl+p (the command palette), {when}", self.palette, ()),
            ]
            if has_groups:
                cases += [
                    (f"up in the groups pane, {when}", self.groups, ()),
                    (f"PageUp in the conversation, {when}", self.conversation, ("pageup",)),
                    (
                        f"ctrl+u (older groups) in the conversation, {when}",
                        self.conversation,
                        ("ctrl+u",),
                    ),
                ]
            cases = [case for case in cases if self.wanted(case[0])]
            if cases and not idle and not self.start_stream():
                return
            for name, fn, args in cases:
                self.case(name, fn, *args, idle=idle)

    def wanted(self, name: str) -> bool:
        """Whether case `name` is measured: `only` is empty or names it (a word of it)."""
        return not self.only or any(word.lower() in name.lower() for word in self.only)

    def case(self, name: str, fn: Callable[..., None], *args: str, idle: bool) -> None:
        """One key case; its samples go to `on_case` as soon as it is done."""
        fn(*args, name, idle=idle)
        if self.on_case is not None:
            self.on_case(self.run, name)

    # -- one key ----------------------------------------------------------------------

    def press(
        self,
        case: str,
        key: str,
        probe_for: Callable[[], Callable[[Term], bool]],
        idle: bool,
        rest: float = 0.05,
    ) -> None:
        """One measured key. Idle: after `rest` seconds without a change. Streaming: after
        `rest` seconds (a key whose effect comes in several frames, as ctrl+u's does,
        must not have its later frames taken for the next key's). `probe_for` makes the
        key's probe from the screen just before the key is sent: while a reply streams
        the screen changes during the rest, and a probe comparing with the screen from
        before it took the stream's own moves for the key's (or against it)."""
        term = self.term
        if idle:
            term.settle(rest, 2.0)
        else:
            self.gap(rest)
            if time.perf_counter() > self.stream_ends:
                self.run.ended[case] = self.run.ended.get(case, 0) + 1
                return
        term.drain()
        probe = probe_for()
        t = term.send(key)
        got = term.pump(probe, 5.0, after=t)
        if got is None:
            self.run.missed[case] = self.run.missed.get(case, 0) + 1
        else:
            self.run.keys.setdefault(case, []).append((got - t) * 1e3)
        self.gap()

    def gap(self, at_least: float = 0.0) -> None:
        end = time.perf_counter() + max(at_least, self.rnd.uniform(0.03, 0.09))
        while time.perf_counter() < end:
            self.term.drain()
            time.sleep(0.005)

    def quiet(self, key: str, idle: bool, wait: float = 0.3) -> None:
        """A key that sets a case up (focus, back to the newest): not measured. Idle:
        then `wait` seconds without a change. While a reply streams the screen never
        rests: `wait` seconds."""
        self.term.send(key)
        if idle:
            self.term.settle(wait, 5.0)
        else:
            self.gap(wait)

    def until(self, probe: Callable[[Term], bool], idle: bool, wait: float) -> None:
        """Until the screen shows `probe` (at most 5 s), then as `quiet`."""
        self.term.pump(probe, 5.0)
        if idle:
            self.term.settle(wait, 5.0)
        else:
            self.gap(wait)

    # -- the cases ----------------------------------------------------------------------

    def typing(self, case: str, idle: bool) -> None:
        self.quiet("f2", idle)
        box = self.layout.prompt
        letters = "abcdefghijkl"
        for i in range(self.presses):
            if i % (2 * len(letters)) < len(letters):
                self.typed += letters[len(self.typed) % len(letters)]
                key = self.typed[-1]
            else:
                self.typed = self.typed[:-1]
                key = "backspace"
            want = self.typed

            def probe(t: Term, want: str = want) -> bool:
                text = "".join(region(t, box)).replace(" ", "")
                return text.startswith("Typeaprompt") if not want else text == want

            self.press(case, key, lambda probe=probe: probe, idle)
        while self.typed:  # leave the prompt empty
            self.typed = self.typed[:-1]
            self.term.send("backspace")
        self.until(lambda t: t.find(PROMPT_HINT) is not None, idle, 0.1)

    def groups(self, case: str, idle: bool) -> None:
        box = self.layout.groups
        if box is None:
            return
        self.quiet("f3", idle)

        def probe_for() -> Callable[[Term], bool]:
            before = highlighted(self.term, box)
            return lambda t: (now := highlighted(t, box)) is not None and now != before

        for _ in range(self.presses):
            self.press(case, "up", probe_for, idle)

    def conversation(self, key: str, case: str, idle: bool) -> None:
        box = self.layout.conversation
        self.quiet(click(*self.text_line(box)), idle)

        def probe_for() -> Callable[[Term], bool]:
            before = region(self.term, box)
            return lambda t: older_in_view(before, region(t, box))

        # Six at a time (older pages come into view), then back to the newest.
        for first in range(0, self.presses, 6):
            for _ in range(min(6, self.presses - first)):
                self.press(case, key, probe_for, idle, rest=0.3)
            # While a reply streams, long enough for the view to reach the bottom
            # and follow the reply again.
            self.quiet("end", idle, 0.5 if idle else 1.0)

    def palette(self, case: str, idle: bool) -> None:
        """ctrl+p opens the command palette (its field shows); Esc closes it, unmeasured."""
        self.quiet("f2", idle)

        def probe_for() -> Callable[[Term], bool]:
            return lambda t: t.find(PALETTE_HINT) is not None

        for _ in range(self.presses):
            self.press(case, "ctrl+p", probe_for, idle, rest=0.1)
            self.term.send("escape")
            self.until(lambda t: t.find(PALETTE_HINT) is None, idle, 0.2)

    def text_line(self, box: tuple[int, int, int, int]) -> tuple[int, int]:
        """Where a click focuses the conversation and does nothing else: a line of
        message text (not a tool title, which opens its block, nor the "older
        groups" line, which loads them), nearest the middle of the pane."""
        x0, x1, y0, y1 = box
        lines = region(self.term, box)
        plain = [
            y0 + i
            for i, line in enumerate(lines)
            if line[:3] == "   " and line[3:4].isalpha() and not line.strip().startswith("#")
        ]
        middle = (y0 + y1) // 2
        y = min(plain, key=lambda v: abs(v - middle)) if plain else middle
        return x0 + 4, y

    def start_stream(self) -> bool:
        self.quiet("f2", True)
        self.term.send("stream a long answer")
        box = self.layout.prompt
        typed = self.term.pump(
            lambda t: "streamalonganswer" in "".join(region(t, box)).replace(" ", ""), 10.0
        )
        self.term.settle(0.1, 2.0)
        self.term.send("enter")
        shown = typed and self.term.pump(lambda t: t.find(STREAM_MARK) is not None, 60.0)
        if not shown:
            what = "the streamed reply never showed" if typed else "the prompt never showed it"
            self.run.note = f"{what}; the screen:\n{self.term.dump()}"
            return False
        # The streamed cases are measured while the reply flows: from a second after
        # its first words until a little before its last (STREAM_S).
        self.stream_ends = shown + STREAM_S - 5.0
        self.gap(1.0)
        return True


# -- where the time goes (--profile) ---------------------------------------------------

# (phase, file suffix, function names): the start-up's phases in a cProfile, by
# cumulative time; the first match of each row is printed.
PHASES = [
    ("whole process (cli.main)", "slop_tui/cli.py", ("main",)),
    ("import of the workspace app (slop_tui.ui.app)", "slop_tui/ui/app.py", ("<module>",)),
    (
        "layout and render passes (Screen._refresh_layout)",
        "textual/screen.py",
        ("_refresh_layout",),
    ),
    (
        "  the conversation's arrange (Markdown of the answers)",
        "widgets/conversation.py",
        ("arrange",),
    ),
    (
        "    Rich Markdown of the answers (blocks.markdown_lines)",
        "widgets/blocks.py",
        ("markdown_lines",),
    ),
    ("      Pygments lexers built (regexes compiled)", "pygments/lexer.py", ("process_tokendef",)),
    ("CSS applied to the widgets (Stylesheet.apply)", "css/stylesheet.py", ("apply",)),
    ("CSS parsed (Stylesheet.parse)", "css/stylesheet.py", ("parse",)),
    (
        "opening the workspace (SlopApp.open_workspace worker)",
        "slop_tui/ui/app.py",
        ("open_workspace",),
    ),
    ("  Workspace.open (ledger, config, session)", "slop_tui/workspace.py", ("open",)),
    ("  panes filled (SlopApp.refresh_all)", "slop_tui/ui/app.py", ("refresh_all",)),
    ("waiting in the event loop (epoll)", "~", ("<method 'poll' of 'select.epoll' objects>",)),
]


# Runs a script (argv[2:]) with `-X importtime`'s report going to a file (argv[1]).
# The report goes to file descriptor 2, where Textual draws too (`sys.__stderr__`):
# descriptor 2 becomes the file, Python's stderr objects a copy of the terminal's.
IMPORTTIME_WRAPPER = """
import os, runpy, sys
terminal = os.dup(2)
os.dup2(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
sys.__stderr__ = sys.stderr = open(terminal, "w", buffering=1, encoding="utf-8")
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def profile(starter: Starter, work: Path, runs: int) -> None:
    import pstats

    print(
        "# bench/screen.py --profile: where a 2,000-message start spends its time, "
        f"from outside (load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})\n"
    )
    logs: dict[str, list[str]] = {"hello": [], "2k": []}
    for i in range(runs):
        for app in ("hello", "2k"):
            log = work / f"importtime-{app}-{i}.txt"
            prefix = (sys.executable, "-X", "importtime", "-c", IMPORTTIME_WRAPPER, str(log))
            term, db = starter.start(app, "importtime", prefix=prefix)
            try:
                marker = starter.marker(app)
                term.pump(lambda t, m=marker: t.find(m) is not None, 60)
                term.settle(QUIET_S, 30)
            finally:
                term.close()
                if db is not None:
                    for p in db.parent.glob(db.name + "*"):
                        p.unlink()
            logs[app].append(log.read_text())

    def medians(texts: list[str], package: str = "") -> dict[str, float]:
        each = [import_shares(t, package) for t in texts]
        keys = {k for d in each for k in d}
        return {k: statistics.median(d.get(k, 0.0) for d in each) for k in keys}

    imports = {app: medians(texts) for app, texts in logs.items()}
    modules = medians(logs["2k"], package="slop_tui")
    rows = []
    ranked = sorted(imports["2k"], key=lambda k: -imports["2k"][k])
    for pkg in ranked[:12]:
        rows.append([pkg, f"{imports['2k'][pkg]:.0f} ms", f"{imports['hello'].get(pkg, 0):.0f} ms"])
    rest = ranked[12:]
    rows.append(
        [
            f"the {len(rest)} others",
            f"{sum(imports['2k'][k] for k in rest):.0f} ms",
            f"{sum(imports['hello'].get(k, 0) for k in rest):.0f} ms",
        ]
    )
    rows.append(
        [
            "**all imports**",
            f"{sum(imports['2k'].values()):.0f} ms",
            f"{sum(imports['hello'].values()):.0f} ms",
        ]
    )
    print(
        f"Imports (-X importtime, {runs} start(s) each: self time summed per top-level "
        "package, median):\n"
    )
    print(c.table(["package", "slop-tui", "hello-world app"], rows))
    own = sorted(modules.items(), key=lambda kv: -kv[1])[:10]
    print("\nslop-tui's own modules, self time: " + ", ".join(f"{m} {ms:.1f} ms" for m, ms in own))

    prof = work / "start.prof"
    term, db = starter.start(
        "2k", "cprofile", prefix=(sys.executable, "-m", "cProfile", "-o", str(prof))
    )
    try:
        term.pump(lambda t: t.find(MARK["2k"]) is not None, 120)
        last = term.settle(QUIET_S, 60) or term.t0
        term.send("ctrl+q")
        term.proc.wait(30)
    finally:
        term.close()
        if db is not None:
            for p in db.parent.glob(db.name + "*"):
                p.unlink()
    stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    total = next(
        (v[3] for f, v in stats.items() if f[0].endswith("slop_tui/cli.py") and f[2] == "main"),
        0.0,
    )
    rows = []
    for label, suffix, names in PHASES:
        best = max(
            (v[3] for f, v in stats.items() if f[0].endswith(suffix) and f[2] in names),
            default=None,
        )
        if best is not None:
            rows.append([label, f"{best * 1e3:.0f} ms", f"{best / total * 100:.0f} %"])
    print(
        f"\ncProfile of the real process (shown at {last - term.t0:.2f} s under the profiler, "
        "then ctrl+q):\n"
    )
    print(c.table(["phase", "cumulative", "share"], rows))


def import_shares(log: str, package: str = "") -> dict[str, float]:
    """`-X importtime` lines summed by top-level package: self time, ms. With
    `package`: that package's modules, each on its own."""
    out: dict[str, float] = {}
    for line in log.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line.split("|")
        try:
            us = int(parts[0].split(":")[1])
        except ValueError:
            continue  # the header line
        name = parts[2].strip()
        if package and name.split(".")[0] != package:
            continue
        pkg = name if package else name.split(".")[0]
        out[pkg] = out.get(pkg, 0.0) + us / 1e3
    return out


# -- the run ------------------------------------------------------------------------------


def pctl(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class Log:
    """What a run measured, as it is measured: one JSON line per finished start
    (`kind: start`) and per finished key case (`kind: keys`, its samples), each with
    the load average and the time. Written to `path` (appended, flushed) when given,
    so an interrupted run keeps what it measured and a long run can be split over
    several invocations; the report is always made from these records."""

    FIELDS = ("first", "shown", "first_output", "rss_shown_mb", "cpu_shown", "rss_end_mb")

    def __init__(self, path: Path | None, argv: list[str]) -> None:
        self.path = path
        self.records: list[dict] = []
        self.invocation = f"{time.strftime('%Y-%m-%dT%H:%M:%S')}-{uuid.uuid4().hex[:8]}"
        self.write("invocation", argv=argv, machine=c.machine())

    def write(self, kind: str, **fields) -> dict:
        record = {
            "kind": kind,
            "invocation": self.invocation,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "load": [round(x, 2) for x in os.getloadavg()],
            **fields,
        }
        self.records.append(record)
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(record) + "\n")
        return record

    def case(self, i: int, run: Run, case: str) -> None:
        ms = run.keys.get(case, [])
        r = self.write(
            "keys",
            run=i,
            app=run.app,
            case=case,
            ms=[round(v, 3) for v in ms],
            missed=run.missed.get(case, 0),
            ended=run.ended.get(case, 0),
        )
        if ms:
            detail = f"n={len(ms)} p99 {pctl(ms, 0.99):.1f} median {c.median(ms):.1f} ms"
        else:
            detail = "n=0"
        progress(r, f"{LABEL[run.app]}, run {i + 1}: {case}: {detail}")

    def start(self, i: int, run: Run) -> None:
        r = self.write(
            "start", run=i, app=run.app, note=run.note, **{k: getattr(run, k) for k in self.FIELDS}
        )
        shown = f"{run.shown:.2f} s" if run.shown is not None else "not shown"
        progress(r, f"{LABEL[run.app]}, run {i + 1}: settled {shown}")


def progress(record: dict, text: str) -> None:
    """A line on stderr as each piece finishes: a long run shows where it is."""
    load = record["load"][0]
    print(f"[{record['time'][11:]} load {load:.1f}] {text}", file=sys.stderr, flush=True)


def read_logs(paths: list[str]) -> list[dict]:
    records = []
    for path in paths:
        with open(path) as f:
            records += [json.loads(line) for line in f if line.strip()]
    return records


def runs_from(records: list[dict]) -> dict[str, list[Run]]:
    """The starts in `records` (of one or several invocations), per app, in the order
    they were measured. A start interrupted during its key cases keeps the cases
    that finished."""
    runs: dict[tuple[str, int, str], Run] = {}
    for r in records:
        if r["kind"] not in ("start", "keys"):
            continue
        run = runs.setdefault(
            (r["invocation"], r["run"], r["app"]),
            Run(r["app"], start=f"{r['invocation']}/{r['run']}"),
        )
        if r["kind"] == "start":
            run.note = r.get("note", "")
            for k in Log.FIELDS:
                setattr(run, k, r.get(k))
        else:
            run.keys[r["case"]] = r["ms"]
            for counts, n in ((run.missed, r.get("missed", 0)), (run.ended, r.get("ended", 0))):
                if n:
                    counts[r["case"]] = n
    results: dict[str, list[Run]] = {a: [] for a in APPS}
    for run in runs.values():
        results[run.app].append(run)
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--quick",
        action="store_true",
        help="2 runs; the keys (10 per case) in one start of the 20,000-message session",
    )
    ap.add_argument("--runs", type=int, default=None, help="starts per app (default 5)")
    ap.add_argument("--presses", type=int, default=None, help="keys per case and run (30)")
    ap.add_argument("--no-keys", action="store_true", help="start-up and memory only")
    ap.add_argument(
        "--apps",
        default=",".join(APPS),
        help=f"which of {','.join(APPS)} to start (default all; keys in all but hello)",
    )
    ap.add_argument(
        "--cases",
        default="",
        help="only the key cases whose name has one of these comma-separated words "
        "(e.g. palette,pageup or idle)",
    )
    ap.add_argument("--keep", default="", help="work in this folder and keep it")
    ap.add_argument(
        "--log",
        default="",
        help="append each finished start and key case to this JSON-lines file "
        "(default with --keep: KEEP/screen-log.jsonl)",
    )
    ap.add_argument(
        "--report",
        nargs="+",
        metavar="LOG",
        help="measure nothing: print the table of these logs, their runs pooled",
    )
    ap.add_argument(
        "--profile", action="store_true", help="where a 2,000-message start spends its time"
    )
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="set in every app's environment (e.g. TEXTUAL_ANIMATIONS=none); repeatable",
    )
    args = ap.parse_args()
    # `kill -USR1 PID` prints where the bench is (every thread's stack) to stderr.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if args.report:
        records = read_logs(args.report)
        print_report(records, f"Keys pooled from {len(args.report)} log(s)")
        return
    apps = [a for a in APPS if a in args.apps.split(",")]
    only = tuple(w for w in args.cases.split(",") if w)
    runs = args.runs or (2 if args.quick else 5)
    presses = 0 if args.no_keys else (args.presses or (10 if args.quick else 30))
    # The key cases take most of a start's time: the quick mode measures them in
    # the first run's 20,000-message start only.
    keyed = ("20k",) if args.quick else tuple(APPS[1:])
    keys_note = (
        f"Keys: {presses} per case, in one start of the 20,000-message session"
        if args.quick
        else f"Keys: {presses} per case and run, pooled over the runs"
    )
    started = time.perf_counter()

    work = Path(args.keep or tempfile.mkdtemp(prefix="slop-tui-screen-"))
    work.mkdir(parents=True, exist_ok=True)
    log_path = Path(args.log) if args.log else (work / "screen-log.jsonl" if args.keep else None)
    log = Log(log_path, sys.argv[1:])
    if log_path is not None:
        print(f"logging to {log_path}", file=sys.stderr)
    template = work / "template.db"
    for p in work.glob("template.db*"):
        p.unlink()
    asyncio.run(tui.build(template, False))
    mark_ledger(template)
    fake, config = streaming_provider(work)
    starter = Starter(work, template, config)
    starter.env.update(v.split("=", 1) for v in args.env)
    try:
        for app in apps:  # bytecode and page cache; not counted
            measure_start(starter, app, f"warmup-{app}", keys=0, timeout=60)
        if args.profile:
            profile(starter, work, runs)
            return
        for i in range(runs):
            order = apps[i % len(apps) :] + apps[: i % len(apps)]  # each app in every slot
            for app in order:
                keys = presses if app in keyed and (i == 0 or not args.quick) else 0
                run = measure_start(
                    starter,
                    app,
                    f"{app}-{i}",
                    keys=keys,
                    timeout=60,
                    on_case=lambda run, case, i=i: log.case(i, run, case),
                    only=only,
                )
                log.start(i, run)
    finally:
        fake.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.env:
        print(f"environment of every app: {' '.join(args.env)}")
    print_report(log.records, keys_note)
    print(f"\nwhole bench {time.perf_counter() - started:.0f} s")


def ratio_rows(
    results: dict[str, list[Run]], key: str, label: str, target: float
) -> list[list[str]]:
    """slop-tui's median of `key` over the hello-world app's, per session, with the
    range of the per-run ratios (each run's start against the same run's hello)."""
    rows = []
    hello = [getattr(r, key) for r in results["hello"] if getattr(r, key)]
    for app in APPS[1:]:
        v = [getattr(r, key) for r in results[app] if getattr(r, key)]
        if not v or not hello:
            continue
        hello_of = {r.start: getattr(r, key) for r in results["hello"] if getattr(r, key)}
        pairs = [
            getattr(a, key) / hello_of[a.start]
            for a in results[app]
            if getattr(a, key) and a.start in hello_of
        ]
        ratio = c.median(v) / c.median(hello)
        lim = target if app in ("2k", "20k") else None
        rows.append(
            [
                label,
                LABEL[app],
                f"{ratio:.2f}×",
                f"{min(pairs):.2f}–{max(pairs):.2f} per run" if len(pairs) > 1 else "",
                f"≤ {lim}×" if lim else "",
                c.verdict(ratio, lim) if lim else "",
            ]
        )
    return rows


def print_report(records: list[dict], keys_note: str) -> None:
    """The table of what `records` (a `Log`'s, of one or several invocations) hold."""
    results = runs_from(records)
    runs = max((sum(r.first is not None for r in v) for v in results.values()), default=0)
    loads = [r["load"][0] for r in records]
    times = [r["time"] for r in records]
    print(f"# bench/screen.py: {c.machine()}")
    print(
        f"{times[0]} – {times[-1]}; load average (1 min) during the run(s): "
        f"{min(loads):.2f}–{max(loads):.2f}, median {c.median(loads):.2f} "
        "(other work on this machine makes the numbers noisy)"
    )
    print(
        f"`slop-tui` ({SLOP}) and bench/screen_hello.py in a 120x40 pty read by pyte; "
        f"up to {runs} start(s) per app, interleaved; median (min–max). {keys_note}: "
        "p99 (median / max, n).\n"
    )
    rows: list[list[str]] = []

    def vals(app: str, key: str) -> list[float]:
        return [getattr(r, key) for r in results[app] if getattr(r, key) is not None]

    def spread(v: list[float], fmt: str) -> str:
        return f"{min(v):{fmt}}–{max(v):{fmt}}" if len(v) > 1 else ""

    for app in APPS:
        v = vals(app, "first")
        if v:
            rows.append(
                [
                    "process start → first useful frame (last message and prompt)",
                    LABEL[app],
                    f"{c.median(v):.2f} s",
                    spread(v, ".2f"),
                    "",
                    "",
                ]
            )
    for app in APPS:
        v = vals(app, "shown")
        if not v:
            continue
        lim = SHOWN_TARGET_S if app in ("2k", "20k") else None
        rows.append(
            [
                "process start → last message on screen, settled",
                LABEL[app],
                f"{c.median(v):.2f} s",
                spread(v, ".2f"),
                f"≤ {lim} s" if lim else "",
                c.verdict(c.median(v), lim) if lim else "",
            ]
        )
    for key, label, target in (
        ("first", "first useful frame ÷ hello-world app's", FIRST_RATIO_TARGET),
        ("shown", "shown ÷ hello-world app shown", RATIO_TARGET),
    ):
        rows += ratio_rows(results, key, label, target)
    for app in APPS:
        v = vals(app, "cpu_shown")
        if v:
            rows.append(
                [
                    "CPU time of the process when settled",
                    LABEL[app],
                    f"{c.median(v):.2f} s CPU",
                    spread(v, ".2f"),
                    "",
                    "",
                ]
            )
    cases: dict[str, None] = {}  # in the order they ran
    for app in APPS:
        for r in results[app]:
            cases.update(dict.fromkeys([*r.keys, *r.missed]))
    for case in cases:
        for app in APPS[1:]:
            pooled = [ms for r in results[app] for ms in r.keys.get(case, [])]
            missed = sum(r.missed.get(case, 0) for r in results[app])
            ended = sum(r.ended.get(case, 0) for r in results[app])
            if not pooled and not missed:
                continue
            note = f", {missed} without effect in 5 s" if missed else ""
            note += f", {ended} not sent: the reply had ended" if ended else ""
            p99 = pctl(pooled, 0.99) if pooled else float("inf")
            target = KEY_STREAMING_TARGET_MS if "streaming" in case else KEY_TARGET_MS
            rows.append(
                [
                    f"key → screen, {case}",
                    LABEL[app],
                    f"{p99:.1f} ms",
                    f"median {c.median(pooled):.1f} / max {max(pooled):.1f} ms (n={len(pooled)}{note})"
                    if pooled
                    else f"n=0{note}",
                    f"≤ {target:.0f} ms at p99",
                    c.verdict(p99, target) if not missed else "FAIL",
                ]
            )
    for app in APPS:
        v = vals(app, "rss_shown_mb")
        if not v:
            continue
        lim = RSS_TARGET_MB if app == "20k" else None
        rows.append(
            [
                "peak memory (VmHWM) when shown",
                LABEL[app],
                f"{c.median(v):.0f} MB",
                spread(v, ".0f"),
                f"≤ {lim:.0f} MB" if lim else "",
                c.verdict(c.median(v), lim) if lim else "",
            ]
        )
    for app in APPS[1:]:
        v = vals(app, "rss_end_mb")
        if v:
            rows.append(
                [
                    "peak memory (VmHWM) after the key cases (reply streamed, tokenizer built)",
                    LABEL[app],
                    f"{c.median(v):.0f} MB",
                    spread(v, ".0f"),
                    "",
                    "",
                ]
            )
    print(c.table(["measure", "session", "value", "spread", "target", "result"], rows))
    for app in APPS:
        for i, r in enumerate(results[app]):
            if r.note:
                print(f"- {LABEL[app]}, run {i + 1}: {r.note}")


if __name__ == "__main__":
    main()
