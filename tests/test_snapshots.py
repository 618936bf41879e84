"""Snapshot tests: the workspace, its dialogs, marks, gauge states, preview and themes.

Each test builds a project in `tmp_path` with a ledger written *before* the app
starts (a fixed clock, TZ=UTC, no provider keys, so the demo provider is used),
then lets `snap_compare` run the app to a settled state: the ledger open, the
first-run screen closed (unless it is the subject), workers finished, cursors
not blinking, animations off. The SVGs live in `snapshots/test_snapshots/`;
`docs/images/` holds PNGs rendered from some of them (see docs/usage.md).

These are sync tests: `snap_compare` runs `App.run()` in its own event loop.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, TextArea
from textual.worker import WorkerCancelled

from slop_tui.context.tokens import get_encoding
from slop_tui.ledger import Ledger
from slop_tui.records import (
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    STATUS_TOOL_CALL,
    NewMessage,
    UsageCost,
)
from slop_tui.ui.app import SlopApp
from tests.fakeserver import wait_for

WIDE = (120, 40)
NARROW = (80, 24)
# The main screen, the first-run panel and every dialog are shot at each of these.
SIZES = {"80x24": NARROW, "120x40": WIDE, "200x50": (200, 50)}
at_every_size = pytest.mark.parametrize("size", list(SIZES))
SESSION = "parser-refactor"
# 2026-01-15 09:00:00 UTC; the fake clock steps a minute per write while preparing.
EPOCH = 1_768_467_600.0

# Anything that could pick a real provider, a real user file or another session.
_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "OPENAI_MODEL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_MODEL",
    "GEMINI_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "SLOP_DB",
    "SLOP_SESSION",
    "SLOP_CONFIG",
    "EDITOR",
    "VISUAL",
)


class FakeClock:
    """`slop_tui.ledger` timestamps: EPOCH, then a minute later per call while `step` is set."""

    def __init__(self) -> None:
        self.t = EPOCH
        self.step = 60.0

    def __call__(self) -> float:
        self.t += self.step
        return self.t


@dataclass
class Project:
    root: Path
    clock: FakeClock

    @property
    def db(self) -> str:
        return str(self.root / ".slop" / "slop.db")

    def config(self, text: str) -> None:
        path = self.root / ".slop" / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def app(self) -> SlopApp:
        self.clock.step = 0.0  # nothing the app writes may move a timestamp on screen
        # The app builds the tokenizer at the first submit and shows estimates (≈)
        # until then; build it so every shot counts exactly, whatever ran before.
        get_encoding()
        app = SlopApp(db=self.db, user_themes=False, blink=False)
        app.animation_level = "none"
        return app


@pytest.fixture
def project(tmp_path, monkeypatch) -> Iterator[Project]:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    # The repository map and file tree would follow whatever the folder holds; the
    # shots are of the layout (tests/test_repomap.py covers those layers).
    user_config = tmp_path / "user-config.toml"
    user_config.write_text("[context]\nrepo_map_tokens = 0\nfile_tree_tokens = 0\n")
    monkeypatch.setenv("SLOP_CONFIG", str(user_config))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.chdir(tmp_path)
    clock = FakeClock()
    # `now` is imported by name into each ledger module, so patch every copy.
    for module in ("core", "history", "knowledge", "continuity", "edits"):
        monkeypatch.setattr(f"slop_tui.ledger.{module}.now", clock)
    monkeypatch.setattr("slop_tui.ui.screens.dialogs._now", lambda: EPOCH + 3600)
    (tmp_path / "README.md").write_text("# calc\nA small expression calculator.\n")
    yield Project(tmp_path, clock)
    monkeypatch.undo()
    time.tzset()


# -- the ledger ---------------------------------------------------------------------


def _call(call_id: str, name: str, arguments: dict, text: str = "") -> NewMessage:
    payload = {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }
    return NewMessage(
        role="assistant",
        content=text,
        status=STATUS_TOOL_CALL,
        payload=json.dumps(payload),
        tool_call_id=call_id,
        tool_name=name,
        strategy="openai",
    )


def _result(call_id: str, name: str, text: str, status: str = "completed") -> NewMessage:
    return NewMessage(
        role="tool",
        content=text,
        status=status,
        tool_call_id=call_id,
        tool_name=name,
        strategy="openai",
    )


def _answer(text: str, status: str = "completed") -> NewMessage:
    return NewMessage(role="assistant", content=text, status=status, strategy="openai")


TOKENIZER_SRC = """\
def tokenize(text: str) -> list[Token]:
    \"\"\"Split an expression into numbers, names, operators and parentheses.\"\"\"
    ...

def peek(tokens: list[Token]) -> Token | None: ...
def expect(tokens: list[Token], kind: str) -> Token: ...
"""

PYTEST_OUT = """\
============================= test session starts ==============================
collected 42 items

tests/test_tokenize.py ..........                                        [ 23%]
tests/test_parser.py ...................F..                              [ 76%]
tests/test_eval.py ..........                                            [100%]

=================================== FAILURES ===================================
______________________ test_unary_minus_binds_tighter ______________________
    assert parse("-2^2") == Neg(Pow(2, 2))
E   AssertionError: Pow(Neg(2), 2) != Neg(Pow(2, 2))
========================= 1 failed, 41 passed in 0.31s =========================
"""

STATE = """\
## Goal
Replace the recursive-descent parser in `src/parser.py` with a Pratt parser.

## Done
- tokenizer reviewed (public API: tokenize, peek, expect)
- new parser written; 41 of 42 tests pass

## Next
- unary minus must bind looser than `^`
- update CHANGELOG.md
"""

SCRATCHPAD = """\
# Plan
1. binding powers: + - 10, * / 20, ^ 30 (right), unary - 25
2. fix test_unary_minus_binds_tighter
3. changelog entry

# Notes
- `expect()` raises ParseError with the column
"""

# What the offline demo's calls cost (slop_tui.pricing prices the demo at $0).
DEMO_COST = UsageCost(0.0, 0.0, 0.0, 0.0, 0.0, "demo")


async def _write_history(db: str, *, theme: str | None = None) -> None:
    """Three sessions; the current one has dropped, outside-window and in-window groups."""
    ledger = await Ledger.open(db)
    try:
        # Other sessions first, so the current one is the most recently used.
        g = await ledger.append_user("docs-pass", "Proofread docs/usage.md and fix typos")
        await ledger.append("docs-pass", g.id, [_answer("Fixed 7 typos in docs/usage.md.")])
        g = await ledger.append_user("docs-pass", "Add a section on the new parser")
        await ledger.append("docs-pass", g.id, [_answer("Added a *Parser* section.")])
        g = await ledger.append_user("gemini-spike", "Does Gemini accept our tool schema as is?")
        await ledger.append("gemini-spike", g.id, [_answer("Yes, after dropping `$schema`.")])

        s = SESSION
        await ledger.ensure_session(s)
        g1 = await ledger.append_user(s, "Read the tokenizer and list its public functions")
        await ledger.append(
            s,
            g1.id,
            [
                _call("call_1", "read_file", {"path": "src/tokenizer.py"}),
                _result("call_1", "read_file", TOKENIZER_SRC),
                _answer("Public API: `tokenize`, `peek` and `expect`."),
            ],
        )
        await ledger.record_usage(s, g1.id, "demo", "slop-demo", 900, 60, cost=DEMO_COST)
        g2 = await ledger.append_user(s, "Why does parse_expr recurse twice on unary minus?")
        await ledger.append(
            s, g2.id, [_answer("Because `parse_unary` calls `parse_expr` for its operand.")]
        )
        await ledger.record_usage(s, g2.id, "demo", "slop-demo", 1100, 40, cost=DEMO_COST)
        g3 = await ledger.append_user(s, "Sketch a Pratt parser for the expression grammar")
        await ledger.append(
            s,
            g3.id,
            [_answer("Provider error: 429 Too Many Requests (retried 3 times)", STATUS_ERROR)],
        )
        await ledger.record_usage(s, g3.id, "demo", "slop-demo", 1250, 0, cost=DEMO_COST)
        g4 = await ledger.append_user(s, "Write the new parser to src/parser.py")
        await ledger.append(
            s,
            g4.id,
            [
                _call(
                    "call_2",
                    "write_file",
                    {"path": "src/parser.py", "content": "class Parser:\n    ...\n"},
                    "Writing the Pratt parser now.",
                ),
                _result("call_2", "write_file", "wrote 2,314 bytes to src/parser.py"),
                _answer("The parser is in `src/parser.py`; binding powers are in `BP`."),
            ],
        )
        await ledger.record_usage(
            s, g4.id, "demo", "slop-demo", 1600, 700, cached_tokens=900, cost=DEMO_COST
        )
        g5 = await ledger.append_user(s, "Run the test suite")
        await ledger.append(
            s,
            g5.id,
            [
                _call("call_3", "execute_bash", {"command": "pytest -q"}),
                _result("call_3", "execute_bash", PYTEST_OUT),
                _answer(
                    "41 passed, 1 failed: `-2^2` parses as `(-2)^2`. "
                    "Unary minus binds tighter than `^`."
                ),
            ],
        )
        await ledger.record_usage(
            s, g5.id, "demo", "slop-demo", 2100, 90, cached_tokens=1500, cost=DEMO_COST
        )
        g6 = await ledger.append_user(s, "Fix the failing precedence test")
        await ledger.append(
            s,
            g6.id,
            [_answer("Lowering the unary binding power to 25 so that", STATUS_INTERRUPTED)],
        )
        await ledger.record_usage(
            s, g6.id, "demo", "slop-demo", 2300, 12, cached_tokens=2000, cost=DEMO_COST
        )
        g7 = await ledger.append_user(s, "Summarize what changed for the changelog")
        await ledger.append(
            s,
            g7.id,
            [
                _answer(
                    "**Changed**\n\n- Pratt parser replaces recursive descent\n"
                    "- `^` is right-associative\n\n**Fixed**\n\n- unary minus precedence"
                )
            ],
        )
        await ledger.record_usage(
            s, g7.id, "demo", "slop-demo", 2400, 80, cached_tokens=2200, cost=DEMO_COST
        )
        await ledger.set_group_dropped(s, g2.id, True)
        # groups 1 and 3 fall outside the window: sent until a summary covers them
        await ledger.set_window(s, 4)
        await ledger.add_state(s, g7.id, STATE)
        await ledger.set_scratchpad(s, SCRATCHPAD)
        await ledger.set_setting("current_session", s)
        if theme:
            await ledger.set_setting("theme", theme)
    finally:
        await ledger.close()


def prepare(project: Project, *, theme: str | None = None) -> None:
    asyncio.run(_write_history(project.db, theme=theme))
    project.clock.step = 0.0  # later writes (the app's included) keep one fixed time


_prompt_total: list[int] = []  # the same history gives the same total: assemble it once


def prompt_tokens(project: Project) -> int:
    """What the gauge will show for the prepared ledger (the app's own assembly)."""
    if _prompt_total:
        return _prompt_total[0]
    from slop_tui.config import load_config
    from slop_tui.workspace import Workspace

    async def total() -> int:
        ws = await Workspace.open(load_config(db=project.db, cwd=project.root, env={}), env={})
        try:
            return (await ws.plan()).request_tokens
        finally:
            await ws.close()

    _prompt_total.append(asyncio.run(total()))
    return _prompt_total[0]


def set_window_for(project: Project, percent: float) -> None:
    """A project config whose demo model window puts the next request at ~`percent` %."""
    window = math.ceil(prompt_tokens(project) * 100 / percent)
    project.config(f"[models.slop-demo]\ncontext_window = {window}\n")


# -- driving the app ----------------------------------------------------------------

Step = Callable[[Pilot], Awaitable[None]]


def no_blink(app: SlopApp) -> None:
    """Every cursor on every screen stops blinking (dialog inputs are created late)."""
    for screen in app.screen_stack:
        for widget in screen.query(Input):
            widget.cursor_blink = False
        for widget in screen.query(TextArea):
            widget.cursor_blink = False


async def settle(pilot: Pilot) -> None:
    """Workers done (not the ones waiting on an open dialog), cursors still, one refresh.

    `snap_compare` itself pauses twice more and waits for animations before the shot.
    """
    app = pilot.app
    for worker in [w for w in app.workers if w.group != "dialogs"]:
        try:
            await worker.wait()
        except WorkerCancelled:
            pass  # replaced by a newer one of its group (an exclusive worker): done too
    no_blink(app)
    await pilot.pause()


async def started(pilot: Pilot, *, keep_first_run: bool = False) -> None:
    """The ledger is open and shown; the first-run screen is closed unless asked for."""
    from slop_tui.ui.screens.firstrun import FirstRunScreen

    app = pilot.app
    await pilot.pause()
    await wait_for(pilot, lambda: app.ready or app.startup_error is not None, timeout=15)
    assert app.startup_error is None, app.startup_error
    await settle(pilot)
    if isinstance(app.screen, FirstRunScreen) and not keep_first_run:
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, FirstRunScreen))
    await settle(pilot)


async def screen_at_rest(pilot: Pilot, timeout: float = 20.0) -> None:
    """Until two screenshots 0.3 s apart agree: on a loaded machine a timer or a
    refresh a step started can still be drawing when its workers are done."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    shot = app.export_screenshot()
    while time.monotonic() < deadline:
        await pilot.pause(0.3)
        again = app.export_screenshot()
        if again == shot:
            return
        shot = again


def run(*steps: Step, keep_first_run: bool = False) -> Step:
    async def run_before(pilot: Pilot) -> None:
        await started(pilot, keep_first_run=keep_first_run)
        for step in steps:
            await step(pilot)
            await settle(pilot)
        await screen_at_rest(pilot)

    return run_before


def press(*keys: str) -> Step:
    async def step(pilot: Pilot) -> None:
        await pilot.press(*keys)

    return step


def focus_group(group_index: int) -> Step:
    """Focus the group list and highlight the group at `group_index` (oldest first)."""

    async def step(pilot: Pilot) -> None:
        await pilot.press("f3")
        groups = pilot.app.query_one("#group-list")
        groups.highlighted = group_index
        # The gauge projects the saving once the highlight rests (PROJECTION_REST).
        gauge = pilot.app.query_one("#gauge")
        await wait_for(pilot, lambda: gauge.projection is not None)
        await pilot.pause()

    return step


def screen_is(name: str) -> Step:
    async def step(pilot: Pilot) -> None:
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == name)

    return step


# -- the main layout ------------------------------------------------------------------


@at_every_size
def test_main_layout(project, snap_compare, size):
    """Below 110 columns the side panes start hidden and the footer names f7/f8 first."""
    prepare(project)
    assert snap_compare(project.app(), terminal_size=SIZES[size], run_before=run())


def test_main_layout_narrow_right_pane(project, snap_compare):
    """f8 at 80x24: the right pane opens (a share of the width, the conversation keeps
    its minimum), its STATE, scratchpad and preview each scrollable."""
    prepare(project)
    assert snap_compare(project.app(), terminal_size=NARROW, run_before=run(press("f8")))


def test_empty_session_after_first_run(project, snap_compare):
    assert snap_compare(project.app(), terminal_size=WIDE, run_before=run())


@at_every_size
def test_first_run_screen(project, snap_compare, size):
    assert snap_compare(
        project.app(), terminal_size=SIZES[size], run_before=run(keep_first_run=True)
    )


# -- group marks ----------------------------------------------------------------------


def test_group_marks_dropped_selected(project, snap_compare):
    """Group 2 (dropped, ×) highlighted: the gauge projects what restoring it adds."""
    prepare(project)
    assert snap_compare(project.app(), terminal_size=WIDE, run_before=run(focus_group(1)))


def test_group_marks_in_window_selected(project, snap_compare):
    """A group in the window (●) highlighted: the gauge projects what dropping it saves."""
    prepare(project)
    assert snap_compare(project.app(), terminal_size=WIDE, run_before=run(focus_group(4)))


def test_group_marks_outside_window_selected(project, snap_compare):
    """Group 1 (outside the window, ○) highlighted and shown in the conversation."""
    prepare(project)
    assert snap_compare(
        project.app(), terminal_size=WIDE, run_before=run(focus_group(0), press("enter"))
    )


# -- the gauge ----------------------------------------------------------------------


def test_gauge_warning(project, snap_compare):
    prepare(project)
    set_window_for(project, 85)
    assert snap_compare(project.app(), terminal_size=WIDE, run_before=run())


def test_gauge_critical(project, snap_compare):
    prepare(project)
    set_window_for(project, 95)
    assert snap_compare(project.app(), terminal_size=WIDE, run_before=run())


# -- the context preview --------------------------------------------------------------
# At 120x40 the right pane leaves the preview three rows (see the main layout), so
# these run taller, with the side pane one step wider (ctrl+right).

PREVIEW_SIZE = (120, 60)


async def _focus_preview(pilot: Pilot) -> None:
    pilot.app.workspace_screen.action_side_wider()  # ctrl+right would move the prompt's cursor instead
    pilot.app.query_one("#preview-text").focus()
    await pilot.pause()


def test_context_preview_text(project, snap_compare):
    prepare(project)
    assert snap_compare(project.app(), terminal_size=PREVIEW_SIZE, run_before=run(_focus_preview))


async def _json_shown(pilot: Pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.query_one("#preview").body is not None)


def test_context_preview_json(project, snap_compare):
    prepare(project)
    assert snap_compare(
        project.app(),
        terminal_size=PREVIEW_SIZE,
        run_before=run(_focus_preview, press("j"), _json_shown),
    )


# -- themes ---------------------------------------------------------------------------
# The gauge at its warning level and a group highlighted, so each theme shows its
# warning colour, the highlight bar and every group mark.


@pytest.mark.parametrize("theme", ["slop-dark", "slop-light", "slop-high-contrast"])
def test_theme(project, snap_compare, theme):
    prepare(project, theme=theme)
    set_window_for(project, 85)
    assert snap_compare(project.app(), terminal_size=WIDE, run_before=run(focus_group(4)))


# -- dialogs ------------------------------------------------------------------------


async def _approval(pilot: Pilot) -> None:
    from slop_tui.ui.screens.dialogs import ApprovalScreen

    # The text SlopApp.ask_approval shows for an execute_bash call.
    call = {"command": "pytest -q tests/test_parser.py -k unary", "timeout_seconds": 120}
    args = json.dumps(call, indent=2, ensure_ascii=False)
    pilot.app.push_screen(ApprovalScreen("execute_bash", args, arm_delay=0))
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ApprovalScreen))


@at_every_size
def test_dialog_approval(project, snap_compare, size):
    prepare(project)
    assert snap_compare(project.app(), terminal_size=SIZES[size], run_before=run(_approval))


async def _no_notices(pilot: Pilot) -> None:
    """The edit's notice times out after 10 s: whether it is still up when the shot is
    taken depends on the machine's load, so it is cleared before the dialog opens (a
    dialog's screen shows the toasts of the screen below as they were)."""
    pilot.app.clear_notifications()
    await pilot.pause()


@at_every_size
def test_dialog_confirm_empty_trash(project, snap_compare, size):
    """The one hard delete asks first: a group moved to the trash (Delete), then
    `/trash empty` typed in the prompt."""
    prepare(project)
    assert snap_compare(
        project.app(),
        terminal_size=SIZES[size],
        run_before=run(
            focus_group(4),
            press("delete"),
            _no_notices,
            press("f2", *"/trash empty", "enter"),
            screen_is("ConfirmScreen"),
        ),
    )


@at_every_size
def test_dialog_provider(project, snap_compare, size):
    prepare(project)
    assert snap_compare(
        project.app(),
        terminal_size=SIZES[size],
        # gemini highlighted: the notice counts the tool messages it would not see
        run_before=run(press("f4"), screen_is("ProviderScreen"), press("up")),
    )


@at_every_size
def test_dialog_sessions(project, snap_compare, size):
    prepare(project)
    assert snap_compare(
        project.app(),
        terminal_size=SIZES[size],
        run_before=run(press("f5"), screen_is("SessionScreen")),
    )


async def _search_finished(pilot: Pilot) -> None:
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "searched", None) == "parser")


@at_every_size
def test_dialog_search(project, snap_compare, size):
    prepare(project)
    assert snap_compare(
        project.app(),
        terminal_size=SIZES[size],
        run_before=run(
            press("f6"), screen_is("SearchScreen"), press(*"parser", "enter"), _search_finished
        ),
    )


@at_every_size
def test_dialog_help(project, snap_compare, size):
    prepare(project)
    assert snap_compare(
        project.app(),
        terminal_size=SIZES[size],
        run_before=run(press("f1"), screen_is("HelpScreen")),
    )


# -- the error banner -----------------------------------------------------------------


async def _banner(pilot: Pilot) -> None:
    pilot.app.workspace_screen.show_banner(
        "openai: 401 Unauthorized: the API key was rejected; check OPENAI_API_KEY."
    )


def test_error_banner(project, snap_compare):
    prepare(project)
    assert snap_compare(project.app(), terminal_size=WIDE, run_before=run(_banner))


# -- each pane with the keyboard in it ----------------------------------------------
# At 120x40 and 200x50 the right pane shows STATE, the scratchpad and the preview at
# once (test_main_layout); at 80x24 it shows one part under the switch, so each is shot.


@at_every_size
def test_groups_focused(project, snap_compare, size):
    prepare(project)
    assert snap_compare(project.app(), terminal_size=SIZES[size], run_before=run(press("f3")))


def _side_part(name: str) -> Step:
    async def step(pilot: Pilot) -> None:
        screen = pilot.app.workspace_screen
        if not screen.layout_state.shown["right"]:
            await pilot.press("f8")
        screen.sides.show_part(name)
        pilot.app.query_one(f"#{name}").focus()
        await pilot.pause()

    return step


@pytest.mark.parametrize("part", ["state", "scratchpad", "preview"])
def test_side_part_at_80x24(project, snap_compare, part):
    """The right pane at 80x24: one part under the switch, which names all three."""
    prepare(project)
    assert snap_compare(project.app(), terminal_size=NARROW, run_before=run(_side_part(part)))


# -- the output panel ----------------------------------------------------------------


async def _wide_table(pilot: Pilot) -> None:
    await pilot.app.run_command("/session list --all")
    await wait_for(pilot, lambda: pilot.app.query_one("#output").has_class("-shown"))


@at_every_size
def test_output_wide_table(project, snap_compare, size):
    """`/session list --all`: a grid when the pane has room, records when it has not;
    every short cell whole (tests/test_output_tables.py)."""
    prepare(project)
    assert snap_compare(project.app(), terminal_size=SIZES[size], run_before=run(_wide_table))


# -- more dialogs ----------------------------------------------------------------------


@at_every_size
def test_dialog_palette(project, snap_compare, size):
    prepare(project)
    assert snap_compare(
        project.app(),
        terminal_size=SIZES[size],
        run_before=run(press("ctrl+p"), screen_is("SlopPalette"), press(*"session")),
    )


@at_every_size
def test_dialog_mcp(project, snap_compare, size):
    """The MCP servers dialog with one configured server that has not started."""
    prepare(project)
    config = Path(project.root / "user-config.toml")
    config.write_text(
        config.read_text()
        + '\n[mcp.servers.docs]\ncommand = "docs-mcp-server"\nargs = ["--stdio"]\n'
    )
    assert snap_compare(
        project.app(),
        terminal_size=SIZES[size],
        run_before=run(_open_mcp, screen_is("McpScreen")),
    )


async def _open_mcp(pilot: Pilot) -> None:
    pilot.app.action_mcp()
