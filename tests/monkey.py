"""A seeded monkey for the whole workspace: random keys, clicks, sentences and commands.

`Monkey(project, server, seed).run(steps)` drives the real `SlopApp` (Pilot,
headless) over a real ledger, with the wire-format fake server as the model
(`tests/fakeserver.py`, OpenAI or Gemini). Each step is one action: a key, a
click anywhere on the screen, a typed sentence, a prompt sent to the model,
a paste, or a slash command with random (often wrong) arguments. The model's replies
are random too: text with STATE blocks, tool calls (some need approval),
errors, cut streams, slow streams that keys land in.

After every step the invariants are checked; each broken one is a violation:

- no exception: the app is still running;
- nothing is lost: every message id ever seen in the ledger is in `messages`
  or in the trash (`trash_messages`), except rows a confirmed `/trash empty`
  deleted (the one hard delete; its confirmation is a dialog the monkey can
  only reach by chance, and the ids it took are counted separately);
- no orphan: every grouped row's prompt is in its session;
- every request the server received is structurally valid for its provider
  (OpenAI: each tool call answered right after it, no result without its
  call, no two assistant turns in a row, the first turn a user's; Gemini:
  user and model alternate, each function call answered in the next turn);
- the UI still answers: the step (action and the frame after it) ends within
  `STEP_TIMEOUT`, a callback queued on the app runs, and every `PROBE_EVERY`
  steps a key (F7, twice) visibly toggles the left pane.

When the monkey quits the app (ctrl+q, `/exit`, the palette's Quit), it is
started again on the same ledger and the run goes on: a quit mid-turn and the
reopening are part of the test. Left out on purpose: `/trash empty --yes`
typed as a command (a deliberate hard delete; the confirmation dialog behind
a plain `/trash empty` is in); `$EDITOR`/`$VISUAL` are `true`, so a command
that opens an editor returns at once.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from textual import events
from textual.keys import _character_to_key

from tests.fakeserver import FakeLLMServer, FakeToolCall, RecordedRequest, Reply

STEP_TIMEOUT = 30.0  # seconds one step (action + settling) may take
PROBE_EVERY = 50
SIZE = (120, 40)

KEYS = (
    [*"abcdefghijklmnopqrstuvwxyz0123456789", "[", "]", "/", "!", "?", ",", "."]
    + ["space", "enter", "escape", "tab", "shift+tab", "backspace", "delete"]
    + ["up", "down", "left", "right", "home", "end", "pageup", "pagedown"]
    + ["ctrl+z", "ctrl+y", "ctrl+r", "ctrl+p", "ctrl+u", "ctrl+d", "ctrl+j", "ctrl+s"]
    + ["ctrl+n", "ctrl+l", "ctrl+t", "ctrl+c", "ctrl+v", "ctrl+k", "ctrl+q"]
    + [f"f{n}" for n in range(1, 10)]
)
# Keys a user presses most: weighted in on top of the uniform draw.
HOT_KEYS = ["d", "delete", "ctrl+z", "ctrl+y", "enter", "escape", "y", "r", "x", "u", "f3"]
SENTENCES = (
    "summarise the output",
    "ready",
    "yes",
    "drop it and undo",
    "delete everything, yes I am sure",
    "[x] ] [ ]]",
    "rrr ddd uuu xxx yyy",
    "naïve café ünïcode — ✓",
    "/",
    "/sess",
)
PROMPTS = (
    "what does the parser do?",
    "read the README",
    "run the tests",
    "write notes",
    "remember this",
    "query the history",
)


def _commands(rng: random.Random, gids: list[int], sessions: list[str], trash: list[int]) -> str:
    gid = rng.choice(gids) if gids and rng.random() < 0.8 else rng.randint(0, 99)
    name = (
        rng.choice(sessions)
        if sessions and rng.random() < 0.6
        else rng.choice(["work", "scratch", "other", "ready", "café"])
    )
    entry = rng.choice(trash) if trash and rng.random() < 0.8 else rng.randint(0, 50)
    return rng.choice(
        [
            "/undo",
            "/undo",
            "/redo",
            "/redo",
            f"/context drop {gid}",
            f"/context restore {gid}",
            f"/message remove {gid}",
            f"/message show {gid}",
            "/message list",
            "/session clear",
            f"/session remove {name}",
            f"/session activate {name}",
            f"/session clone {name}-{rng.randint(0, 9)}",
            "/session list",
            "/trash list",
            f"/trash restore {entry}",
            "/trash empty",
            "/retry",
            f"/retry {gid}",
            f"/context window {rng.randint(0, 6)}",
            "/context show",
            "/context budget",
            f"/reply {gid} and then?",
            "/lane new side",
            "/lane switch main",
            "/history search parser",
            "/handoff write",
            "/stats",
            "/help",
            "/nope",
            "/undo now",
            f"/state set Goal: monkey business {rng.randint(0, 9)}",
            f"/session scratchpad set - [ ] monkey step {rng.randint(0, 9)}",
            f"/context uncompact {rng.randint(1, 5)}",
            "/context unelide",
            f"/trash restore {rng.choice(['x', '-1', '99999999999999999999'])}",
        ]
    )


# -- the model ---------------------------------------------------------------------


def check_openai(messages: list[dict]) -> str | None:
    """Why a chat request is not valid (None: it is)."""
    pending: set[str] = set()
    previous = None
    seen_user = False
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                return f"message {i}: a tool result without its call"
            pending.discard(m["tool_call_id"])
            previous = role
            continue
        if pending:
            return f"message {i}: calls {sorted(pending)} were not answered"
        if role == "assistant":
            if not seen_user:
                return f"message {i}: an assistant turn before any user turn"
            calls = m.get("tool_calls") or []
            if previous == "assistant":
                return f"message {i}: two assistant turns in a row"
            if not calls and not (m.get("content") or "").strip():
                return f"message {i}: an empty assistant turn"
            pending = {c["id"] for c in calls}
        elif role == "user":
            seen_user = True
        elif role not in ("system", "developer"):
            return f"message {i}: unknown role {role!r}"
        previous = role
    if pending:
        return f"calls {sorted(pending)} were not answered"
    if previous not in ("user", "tool"):
        return f"the request ends with a {previous} turn"
    return None


def check_gemini(contents: list[dict]) -> str | None:
    for i, c in enumerate(contents):
        role = c.get("role")
        if role not in ("user", "model"):
            return f"content {i}: role {role!r}"
        if i == 0 and role != "user":
            return "the first content is not the user's"
        if i and contents[i - 1].get("role") == role:
            return f"content {i}: two {role} contents in a row"
        if not c.get("parts"):
            return f"content {i} has no parts"
        calls = sorted(p["functionCall"]["name"] for p in c["parts"] if "functionCall" in p)
        if calls:
            nxt = contents[i + 1] if i + 1 < len(contents) else None
            answers = sorted(
                p["functionResponse"]["name"]
                for p in (nxt or {}).get("parts", [])
                if "functionResponse" in p
            )
            if answers != calls:
                return f"content {i}: calls {calls} answered by {answers}"
    if contents and contents[-1].get("role") != "user":
        return "the request ends with a model turn"
    return None


class MonkeyModel:
    """The fake server's reply to every request: checks it, then answers at random."""

    def __init__(self, seed: int, provider: str) -> None:
        self.rng = random.Random(seed * 7919 + 1)
        self.provider = provider
        self.lock = threading.Lock()
        self.violations: list[str] = []
        self.bad_requests: list[object] = []  # the first few bodies, to look at
        self.requests = 0

    def __call__(self, req: RecordedRequest) -> Reply:
        with self.lock:
            self.requests += 1
            if self.provider == "openai":
                problem = check_openai(req.messages)
            else:
                problem = check_gemini(req.contents)
            if problem is not None:
                self.violations.append(f"invalid {self.provider} request: {problem}")
                self.bad_requests.append(req.body)
            return self._reply(req)

    def _reply(self, req: RecordedRequest) -> Reply:
        rng = self.rng
        body = req.body if isinstance(req.body, dict) else {}
        if not body.get("tools"):  # a summary request (compaction, lane summary)
            return Reply(text="<summary>The user poked at things.</summary>")
        delay = rng.choice([0.0, 0.0, 0.005, 0.02])
        roll = rng.random()
        if roll < 0.30:
            state = "\n### STATE\nGoal: keep going" if rng.random() < 0.5 else ""
            if rng.random() < 0.3:  # a scratchpad write by signal (journalled, undoable)
                state += f"\nSCRATCHPAD:\n- [ ] step {rng.randint(0, 9)}"
            return Reply(text=f"Here is an answer.{state}", delay=delay, chunk_size=6)
        if roll < 0.55:
            return Reply(tool_calls=[self._call() for _ in range(rng.randint(1, 2))])
        if roll < 0.65:
            return Reply(text="A long answer " * 30, delay=0.01, chunk_size=12)
        if roll < 0.72:
            return Reply(status=401, error_message="bad key")
        if roll < 0.76:
            return Reply(status=400, error_message="bad request")
        if roll < 0.80:
            return Reply(status=500, error_message="server down")
        if roll < 0.86:
            return Reply(text="cut off in the middle of", disconnect_after=3, chunk_size=4)
        return Reply(text="Short.", delay=delay)

    def _call(self) -> FakeToolCall:
        rng = self.rng
        name, args = rng.choice(
            [
                ("read_file", {"path": "README.md"}),
                ("list_directory", {"path": "."}),
                ("query_db", {"sql": "SELECT id, role FROM messages ORDER BY id DESC LIMIT 3"}),
                ("query_db", {"sql": "SELECT * FROM trash_messages"}),
                ("execute_bash", {"command": "echo monkey"}),
                ("write_file", {"path": "notes.txt", "content": "monkey was here"}),
                ("manage_scratchpad", {"action": "append", "content": "- [ ] a step"}),
                ("no_such_tool", {}),
            ]
        )
        return FakeToolCall(name, args)


# -- the driver ----------------------------------------------------------------------


@dataclass
class MonkeyResult:
    steps: int = 0
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)
    actions: Counter = field(default_factory=Counter)
    requests: int = 0
    messages_seen: int = 0
    messages_live: int = 0
    messages_trashed: int = 0
    emptied: int = 0  # message ids a confirmed /trash empty deleted
    turns: int = 0
    restarts: int = 0  # the monkey quit the app (/exit, the palette) and started it again

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


class Monkey:
    def __init__(
        self,
        project: Path,
        server: FakeLLMServer,
        seed: int,
        *,
        provider: str = "openai",
        size: tuple[int, int] = SIZE,
    ) -> None:
        self.project = project
        self.server = server
        self.seed = seed
        self.rng = random.Random(seed)
        self.provider = provider
        self.size = size
        self.model = MonkeyModel(seed, provider)
        self.seen: set[int] = set()
        self.emptied: set[int] = set()
        self._empties = 0
        self._trash_before: set[int] = set()

    def env(self) -> dict[str, str]:
        url = self.server.openai_base_url if self.provider == "openai" else None
        env = {"HOME": str(self.project), "EDITOR": "true", "VISUAL": "true"}
        if self.provider == "openai":
            env.update(OPENAI_API_KEY="x", OPENAI_BASE_URL=url or "", OPENAI_MODEL="fake-model")
        else:
            env.update(GEMINI_API_KEY="x", GEMINI_BASE_URL=self.server.gemini_base_url)
        return env

    async def run(
        self, steps: int, progress: Callable[[MonkeyResult], None] | None = None
    ) -> MonkeyResult:
        from slop_tui.ui.app import SlopApp

        (self.project / "README.md").write_text("# A project the monkey plays in\n")
        config = self.project / "config.toml"
        config.write_text("[context]\nwindow = 4\n")
        env = self.env() | {"SLOP_CONFIG": str(config)}
        self.server.default_reply = self.model
        result = MonkeyResult()
        start = time.monotonic()
        while result.steps < steps:
            app = SlopApp(
                db=str(self.project / ".slop" / "slop.db"),
                user_themes=False,
                blink=False,
                cwd=self.project,
                env=env,
            )
            try:
                async with app.run_test(size=self.size) as pilot:
                    await self._started(pilot)
                    while result.steps < steps and app.is_running:
                        kind = await self._step(pilot, app, result)
                        result.actions[kind] += 1
                        result.steps += 1
                        await self._check(pilot, app, result, result.steps - 1)
                        if progress is not None:
                            result.seconds = time.monotonic() - start
                            progress(result)
                        if len(self.server.requests) > 200:
                            self._forget_requests()
                    await self._wind_down(pilot, app, result)
            except Exception as exc:  # the app crashed: run_test raises what it raised
                result.violations.append(f"step {result.steps}: the app raised {exc!r}")
                break
            if result.steps < steps:
                # It quit (/exit, the palette's Quit): start it again on the same ledger,
                # as a user would; the reopened ledger is checked like any step.
                result.restarts += 1
        result.seconds = time.monotonic() - start
        result.requests = self.model.requests
        result.violations += self.model.violations
        result.messages_seen = len(self.seen)
        result.emptied = len(self.emptied)
        self._final_ledger_checks(result)
        return result

    def _forget_requests(self) -> None:
        # Every request was checked when it arrived; a long run need not keep them.
        with self.server._lock:
            self.server.requests.clear()

    async def _started(self, pilot) -> None:
        app = pilot.app
        deadline = time.monotonic() + 30
        while not (app.ready or app.startup_error):
            if time.monotonic() > deadline:
                raise TimeoutError("the workspace did not start")
            await pilot.pause(0.02)
        await pilot.pause()

    # -- actions -----------------------------------------------------------------

    async def _step(self, pilot, app, result: MonkeyResult) -> str:
        rng = self.rng
        roll = rng.random()
        try:
            async with asyncio.timeout(STEP_TIMEOUT):
                if roll < 0.43:
                    key = rng.choice(HOT_KEYS) if rng.random() < 0.3 else rng.choice(KEYS)
                    await pilot.press(key)
                    kind = "key"
                elif roll < 0.58:
                    width, height = self.size
                    await pilot.click(offset=(rng.randrange(width), rng.randrange(height)))
                    kind = "click"
                elif roll < 0.69:
                    await self._type(pilot, rng.choice(SENTENCES))
                    kind = "sentence"
                elif roll < 0.72:
                    lines = [rng.choice(SENTENCES) for _ in range(rng.choice([1, 3, 30]))]
                    paste = events.Paste("\n".join(lines))  # a terminal's bracketed paste
                    paste.set_sender(app)
                    app._driver.send_message(paste)
                    kind = "paste"
                elif roll < 0.82:
                    await self._send(pilot, app, rng.choice(PROMPTS))
                    result.turns += 1
                    kind = "prompt"
                else:
                    line = await self._command(app)
                    await self._send(pilot, app, line)
                    kind = "command"
                await pilot.pause()
        except TimeoutError:
            result.violations.append(f"step {result.steps + 1} ({roll:.2f}) hung")
            kind = "hung"
        return kind

    async def _type(self, pilot, text: str) -> None:
        """A sentence typed fast: its keys arrive one after another, as from a typist,
        without waiting for a frame between them (pilot.press waits after each key)."""
        driver = pilot.app._driver
        for char in text:
            key = char if char.isalnum() else _character_to_key(char)
            event = events.Key(key, char)
            event.set_sender(pilot.app)
            driver.send_message(event)
        await pilot.pause()

    async def _send(self, pilot, app, line: str) -> None:
        """Type a line into the prompt and press Enter (as a user would, from any pane)."""
        if app.screen is not app.screen_stack[0]:
            await pilot.press("escape")
            return
        prompt = app.query_one("#prompt")
        prompt.focus()
        prompt.text = line
        await pilot.press("enter")

    async def _command(self, app) -> str:
        ws = app.workspace
        if ws is None:
            return "/help"
        gids = [r[0] for r in await ws.ledger.group_rows(ws.session)]
        sessions = [s.name for s in await ws.ledger.list_sessions()]
        trash = [e.id for e in await ws.ledger.trash()]
        line = _commands(self.rng, gids, sessions, trash)
        return line

    # -- invariants ----------------------------------------------------------------

    async def _check(self, pilot, app, result: MonkeyResult, n: int) -> None:
        step = n + 1
        if not app.is_running:
            return  # it quit (or crashed: run_test raises that, see `run`)
        ws = app.workspace
        if ws is None:
            return
        live = {r[0] for r in await ws.ledger._tuples("SELECT id FROM messages")}
        trashed = set(await ws.ledger.trashed_message_ids())
        empties = (await ws.ledger._one("SELECT COUNT(*) FROM edits WHERE kind='empty'"))[0]
        if empties != self._empties:  # a confirmed /trash empty: those ids are gone for good
            self._empties = empties
            self.emptied |= self._trash_before - trashed - live
        self.seen |= live
        lost = self.seen - live - trashed - self.emptied
        if lost:
            result.violations.append(f"step {step}: messages {sorted(lost)[:10]} were lost")
            self.seen -= lost  # report each loss once
        self._trash_before = trashed
        orphans = await ws.ledger._tuples(
            "SELECT m.id FROM messages m WHERE m.group_id IS NOT NULL AND NOT EXISTS ("
            "SELECT 1 FROM messages u WHERE u.id = m.group_id AND u.session_id = m.session_id)"
        )
        if orphans:
            result.violations.append(f"step {step}: rows {[r[0] for r in orphans][:10]} orphaned")
        result.messages_live, result.messages_trashed = len(live), len(trashed)
        # The UI answers: a callback queued now runs within the step's time.
        ran = asyncio.Event()
        app.call_later(ran.set)
        try:
            async with asyncio.timeout(STEP_TIMEOUT):
                await ran.wait()
        except TimeoutError:
            result.violations.append(f"step {step}: the app stopped answering")
        if step % PROBE_EVERY == 0:
            await self._probe(pilot, app, result, step)

    async def _probe(self, pilot, app, result: MonkeyResult, step: int) -> None:
        """A key still works: back on the main screen, F7 twice toggles the left pane."""
        for _ in range(6):
            if app.screen is app.screen_stack[0]:
                break
            await pilot.press("escape")
            await pilot.pause()
        if app.screen is not app.screen_stack[0]:
            return  # a dialog that Escape does not close is a finding of its own
        left = app.query_one("#left")
        hidden = left.has_class("-hidden")
        await pilot.press("f7")
        await pilot.pause()
        if left.has_class("-hidden") == hidden:
            result.violations.append(f"step {step}: F7 did not toggle the left pane")
        await pilot.press("f7")
        await pilot.pause()

    async def _wind_down(self, pilot, app, result: MonkeyResult) -> None:
        """Let a running turn end (Esc), then check the ledger once more."""
        if not app.is_running:
            return
        for _ in range(6):
            if app.screen is app.screen_stack[0]:
                break
            await pilot.press("escape")
            await pilot.pause()
        if app.turns.busy:
            await pilot.press("escape")
        deadline = time.monotonic() + STEP_TIMEOUT
        while app.turns.busy and time.monotonic() < deadline:
            await pilot.pause(0.05)
        if app.turns.busy:
            result.violations.append("the last turn did not end after Esc")
        await self._check(pilot, app, result, result.steps)

    def _final_ledger_checks(self, result: MonkeyResult) -> None:
        con = sqlite3.connect(self.project / ".slop" / "slop.db")
        try:
            (check,) = con.execute("PRAGMA integrity_check").fetchone()
            if check != "ok":
                result.violations.append(f"integrity_check: {check}")
            bad = con.execute(
                "SELECT s.name FROM sessions s WHERE s.message_count != "
                "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.name) OR s.token_total != "
                "(SELECT COALESCE(SUM(tokens), 0) FROM messages m WHERE m.session_id = s.name)"
            ).fetchall()
            if bad:
                result.violations.append(f"session totals wrong: {bad}")
            self._value_edit_checks(con, result)
            left = con.execute("SELECT COUNT(*) FROM app_state WHERE key LIKE 'inflight/%'")
            if left.fetchone()[0]:
                result.violations.append("an in-flight record was left behind")
        finally:
            con.close()

    @staticmethod
    def _value_edit_checks(con: sqlite3.Connection, result: MonkeyResult) -> None:
        """Journalled edits of values agree with the ledger: a STATE set by hand that
        /undo took back is not current, one in effect is live (or in the trash with its
        session's history); a session's scratchpad is what its newest scratchpad edit
        still in effect wrote (or, all taken back, what the first one replaced)."""
        live = {r[0] for r in con.execute("SELECT id FROM state_versions")}
        for edit, state, version in con.execute(
            "SELECT id, state, row_id FROM edits WHERE kind='state_set'"
        ):
            if state == "reverted" and version in live:
                result.violations.append(f"edit {edit}: an undone STATE is still live")
        pads = dict(con.execute("SELECT name, scratchpad FROM sessions"))
        for name, pad in pads.items():
            edits = con.execute(
                "SELECT state, before_value, after_value FROM edits "
                "WHERE kind='scratchpad' AND session_id=? ORDER BY id",
                (name,),
            ).fetchall()
            if not edits:
                continue
            done = [after for state, _, after in edits if state == "done"]
            want = done[-1] if done else edits[0][1]
            if pad != want:
                result.violations.append(
                    f"session {name!r}: scratchpad {pad!r} is not its journal's {want!r}"
                )


__all__ = ["Monkey", "MonkeyResult", "check_gemini", "check_openai"]
