"""Dialogs, F1 help and history search: each answer by button and by key, Escape cancels."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from rich.text import Text
from textual import events
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Button, Input, Static

from slop_tui.records import NewMessage, SessionSummary
from slop_tui.ui.screens.dialogs import (
    ApprovalScreen,
    ConfirmScreen,
    PickList,
    ProviderScreen,
    SessionScreen,
    hidden_notice,
    keyless_providers,
    neutralise,
    provider_dialog_args,
)
from slop_tui.ui.screens.help import HelpScreen, binding_rows, help_document
from slop_tui.ui.screens.search import SearchScreen
from tests.fakeserver import click_when_shown, wait_for
from tests.workspace_fixtures import open_workspace

SIZE = (120, 40)


class Host(App):
    """Pushes one screen on mount and records what it dismisses with."""

    BINDINGS = [
        Binding("f1", "help", "Help", id="help"),
        Binding("ctrl+q", "quit", "Quit", id="quit"),
    ]

    def __init__(self, make: Callable[[], Screen]) -> None:
        super().__init__()
        self.make = make
        self.results: list[object] = []

    def on_mount(self) -> None:
        self.push_screen(self.make(), self.results.append)


async def answer(make: Callable[[], Screen], *keys: str, click: str | None = None) -> list:
    app = Host(make)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
        if click:
            await pilot.click(click)
        await pilot.pause()
    return app.results


def text_of(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


# -- approval ---------------------------------------------------------------------


def approval() -> ApprovalScreen:
    return ApprovalScreen("write_file", '{"path": "a.txt"}', arm_delay=0)


@pytest.mark.parametrize(
    "key,expected", [("a", "allow"), ("s", "allow_session"), ("d", "deny"), ("escape", "deny")]
)
async def test_approval_keys(key, expected):
    assert await answer(approval, key) == [expected]


@pytest.mark.parametrize("button", ["allow", "allow_session", "deny"])
async def test_approval_buttons(button):
    assert await answer(approval, click=f"#{button}") == [button]


async def test_approval_ignores_allow_keys_typed_before_it_was_readable():
    app = Host(lambda: ApprovalScreen("bash", "rm -rf build", arm_delay=60))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("a", "s")
        await pilot.pause()
        assert app.results == [] and "ignored" in text_of(app.screen.query_one("#approval-hint"))
        await pilot.press("d")  # denying is never delayed
        await pilot.pause()
    assert app.results == ["deny"]


async def test_approval_buttons_work_at_once():
    app = Host(lambda: ApprovalScreen("bash", "ls", arm_delay=60))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await click_when_shown(pilot, "#allow_session")
        await pilot.pause()
    assert app.results == ["allow_session"]


async def test_approval_without_the_session_option_offers_no_always():
    """The shell without a sandbox asks every time: 'always this session' would do
    nothing, so neither its button nor its key is offered."""
    app = Host(lambda: ApprovalScreen("execute_bash", "ls", arm_delay=0, session_option=False))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not app.screen.query("#allow_session")
        assert [b.id for b in app.screen.query(Button)] == ["allow", "deny"]
        hint = text_of(app.screen.query_one("#approval-hint", Static))
        assert "every shell command asks" in hint and "not offered" in hint
        offered = {key for key, active in app.screen.active_bindings.items() if active.enabled}
        assert "s" not in offered and {"a", "d"} <= offered
        await pilot.press("s")
        await pilot.pause()
        assert app.results == [] and isinstance(app.screen, ApprovalScreen)
        await pilot.press("a")
        await pilot.pause()
    assert app.results == ["allow"]


async def test_approval_shows_arguments_as_inert_text():
    hostile = "rm -rf /tmp/x \x1b[2J\x1b]52;c;Zm9v\x07 [b]bold?[/b] \u202eevil\r\nnext\tline"
    app = Host(lambda: ApprovalScreen("bash[red]", hostile))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = text_of(app.screen.query_one("#arguments-text", Static))
        title = text_of(app.screen.query_one("#approval-title", Static))
        assert "\x1b" not in shown and "\r" not in shown and "\u202e" not in shown
        assert "␛[2J" in shown and "␛]52;c;Zm9v␇" in shown and "<U+202E>evil␍" in shown
        assert "[b]bold?[/b]" in shown and "\nnext\tline" in shown  # markup stays literal
        assert title.endswith("bash[red]")


def test_neutralise_keeps_printable_text():
    assert neutralise("héllo 会话 ✓\n\tx") == "héllo 会话 ✓\n\tx"
    assert neutralise("\x00\x7f\x85") == "␀␡<U+0085>"


# -- confirm ----------------------------------------------------------------------


def confirm(arm_delay: float = 0.0) -> ConfirmScreen:
    return ConfirmScreen(
        "Delete the trash for good?", "It cannot be restored.", arm_delay=arm_delay
    )


@pytest.mark.parametrize(
    "key,expected", [("y", True), ("n", False), ("escape", False), ("enter", False)]
)
async def test_confirm_keys(key, expected):
    # Enter presses the focused button, which is No: the safe default.
    assert await answer(confirm, key) == [expected]


async def test_a_y_typed_as_the_question_opens_does_not_answer_it():
    app = Host(lambda: confirm(arm_delay=30))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(*"ready")  # a word typed while the dialog appeared
        await pilot.pause()
        assert app.results == []
        assert "ignored" in text_of(app.screen.query_one("#confirm-hint", Static))
        await click_when_shown(pilot, "#yes")  # a deliberate click works at once
        await pilot.pause()
    assert app.results == [True]


@pytest.mark.parametrize("button,expected", [("#yes", True), ("#no", False)])
async def test_confirm_buttons(button, expected):
    assert await answer(confirm, click=button) == [expected]


# -- provider ---------------------------------------------------------------------

CHOICES = [
    ("openai", "openai", "gpt-4o-mini", "default"),
    ("gemini", "gemini", "gemini-2.5-flash", "default"),
    ("local", "openai", "qwen3", "http://127.0.0.1:11434/v1"),
]
HIDDEN = {"openai": 0, "gemini": 4, "local": 0}


def provider() -> ProviderScreen:
    return ProviderScreen(CHOICES, "openai", HIDDEN)


async def test_provider_notice_and_model_follow_the_highlight():
    app = Host(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        notice = screen.query_one("#notice", Static)
        model = screen.query_one("#model", Input)
        assert model.value == "gpt-4o-mini"
        assert text_of(notice) == hidden_notice("openai", 0)
        await pilot.press("down")
        await pilot.pause()
        assert model.value == "gemini-2.5-flash"
        assert text_of(notice).startswith(
            "4 tool messages in the window will not be sent to gemini"
        )
        await pilot.press("down")
        await pilot.pause()
        assert model.value == "qwen3" and "sent to local" in text_of(notice)
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [("local", "qwen3")]


async def test_a_provider_without_a_key_is_marked_and_the_dialog_says_so():
    app = Host(lambda: ProviderScreen(CHOICES, "openai", HIDDEN, keyless={"gemini"}))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        rows = screen.query_one("#providers")
        assert "no key" in str(rows.get_option_at_index(1).prompt)
        assert "no key" not in str(rows.get_option_at_index(0).prompt)
        await pilot.press("down")
        await pilot.pause()
        notice = text_of(screen.query_one("#notice", Static))
        assert notice.startswith("gemini has no API key") and "next send fails" in notice
        assert "4 tool messages in the window will not be sent to gemini" in notice


async def test_keyless_providers_are_the_configured_ones_without_a_key(tmp_path):
    ws = await open_workspace(tmp_path, env={"OPENAI_API_KEY": "k"})
    try:
        names = keyless_providers(ws)
    finally:
        await ws.close()
    assert "gemini" in names and "openai" not in names and "demo" not in names


def test_hidden_notice_wording():
    assert hidden_notice("x", 1).startswith("1 tool message in the window will not be sent to x")
    assert hidden_notice("x", 0) == "Every message in the window will be sent to x."


async def test_provider_model_can_be_edited():
    keys = ["down", "m", "ctrl+a", "ctrl+k", *"gemini-2.5-pro", "enter"]
    assert await answer(provider, *keys) == [("gemini", "gemini-2.5-pro")]


async def test_provider_click_highlights_and_switch_button_confirms():
    app = Host(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        picker = app.screen.query_one("#providers", PickList)
        await pilot.click(picker, offset=(4, 2))  # row 2 (under the border): one click highlights
        await pilot.pause()
        assert picker.highlighted == 1 and app.results == []
        await pilot.click("#switch")
        await pilot.pause()
    assert app.results == [("gemini", "gemini-2.5-flash")]


async def test_provider_double_click_switches():
    app = Host(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.click("#providers", offset=(4, 3), times=2)
        await pilot.pause()
    assert app.results == [("local", "qwen3")]


@pytest.mark.parametrize("how", ["escape", "#cancel"])
async def test_provider_cancel(how):
    if how.startswith("#"):
        assert await answer(provider, click=how) == [None]
    else:
        assert await answer(provider, how) == [None]


async def test_provider_dialog_args_count_tool_rows_per_family(tmp_path):
    ws = await open_workspace(tmp_path, env={"OPENAI_API_KEY": "k", "GEMINI_API_KEY": "k"})
    try:
        user = await ws.ledger.append_user(ws.session, "go")
        await ws.ledger.append(
            ws.session,
            user.group_id,
            [
                NewMessage(
                    role="assistant",
                    content="",
                    status="tool_call",
                    payload="{}",
                    tool_call_id="c1",
                    tool_name="read_file",
                    strategy="openai",
                ),
                NewMessage(
                    role="tool",
                    content="ok",
                    tool_call_id="c1",
                    tool_name="read_file",
                    strategy="openai",
                ),
                NewMessage(role="assistant", content="done", strategy="openai"),
            ],
        )
        choices, current, hidden = await provider_dialog_args(ws)
    finally:
        await ws.close()
    names = [c[0] for c in choices]
    assert {"openai", "gemini", "demo"} <= set(names) and current in names
    assert hidden["openai"] == 0 and hidden["demo"] == 0 and hidden["gemini"] == 2


# -- sessions ---------------------------------------------------------------------

SESSIONS = [
    SessionSummary("alpha", 3, 9, 900, 1_700_000_000.0, "first prompt"),
    SessionSummary("beta", 1, 2, 50, 1_600_000_000.0, "[b]not markup[/b]"),
]


def sessions() -> SessionScreen:
    return SessionScreen(SESSIONS, "alpha")


async def test_session_switch_by_enter_and_button():
    assert await answer(sessions, "down", "enter") == [("switch", "beta")]
    assert await answer(sessions, click="#switch") == [("switch", "alpha")]


@pytest.mark.parametrize("key,mode", [("ctrl+n", "new"), ("ctrl+l", "clone"), ("enter", "new")])
async def test_session_new_and_clone_by_key(key, mode):
    # The name field has the focus: the name is typed there, the key creates.
    assert await answer(sessions, *"gamma", key) == [(mode, "gamma")]


async def test_typing_in_the_session_dialog_only_types_the_name():
    app = Host(sessions)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", *"ready", "r", "y", "c", "n", "d")
        await pilot.pause()
        assert isinstance(app.screen, SessionScreen) and app.results == []
        assert app.screen.query_one("#name", Input).value == "readyrycnd"
        assert app.screen.highlighted_name == "beta"  # the arrows still move the list


@pytest.mark.parametrize("button,mode", [("#new", "new"), ("#clone", "clone")])
async def test_session_new_and_clone_by_button(button, mode):
    app = Host(sessions)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.screen.query_one("#name", Input).value = "delta"
        await pilot.click(button)
        await pilot.pause()
    assert app.results == [(mode, "delta")]


async def test_session_name_that_exists_is_refused():
    app = Host(sessions)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(*"beta", "ctrl+l")
        await pilot.pause()
        assert app.results == []
        assert "already exists" in text_of(app.screen.query_one("#error", Static))
        await pilot.press("enter")  # Enter on a name that exists switches to it
        await pilot.pause()
    assert app.results == [("switch", "beta")]


async def test_session_remove_asks_first():
    app = Host(sessions)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "ctrl+t")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "beta" in text_of(app.screen.query(Static).first())
        await pilot.press("n")  # keep it: back in the session dialog, nothing chosen
        await pilot.pause()
        assert isinstance(app.screen, SessionScreen) and app.results == []
        await pilot.click("#remove")
        await pilot.pause()
        await click_when_shown(pilot, "#yes")
        await pilot.pause()
    assert app.results == [("remove", "beta")]


async def test_session_dialog_lists_an_unwritten_current_session():
    app = Host(lambda: SessionScreen(SESSIONS, "fresh"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.names == ["fresh", "alpha", "beta"]
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [("switch", "fresh")]


async def test_session_escape_cancels():
    assert await answer(sessions, "escape") == [None]


# -- help -------------------------------------------------------------------------


async def test_help_lists_binding_ids_and_commands():
    app = Host(lambda: Screen())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.set_keymap({"help": "f2"})
        rows = binding_rows(app)
        assert rows["Everywhere"] == [("help", "f2", "Help"), ("quit", "^q", "Quit")]
        assert ("approval_allow", "a", "Allow once") in rows["Tool approval dialog"]
        assert [r[0] for r in rows["Sessions dialog (F5)"]][:3] == [
            "session_new",
            "session_clone",
            "session_remove",
        ]
        app.push_screen(HelpScreen(rows))
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        doc = help_screen.document
        for binding_id in ("help", "quit", "approval_deny", "provider_model", "search_cancel"):
            assert f"`{binding_id}`" in doc
        assert "# Slash commands" in doc and "/session activate NAME" in doc and "/export" in doc
        await pilot.press("f1")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        app.push_screen(HelpScreen(rows))
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


def test_help_screen_takes_a_flat_row_list():
    screen = HelpScreen([("x_id", "a", "Do X"), ("", "b", "No id")], "# Commands\n")
    assert "## Keys active now" in screen.document
    assert "| `a` | Do X | `x_id` |" in screen.document and "| `b` | No id |  |" in screen.document


def test_help_document_escapes_table_cells():
    doc = help_document({"Prompt": [("send", "|", "Send | now")]}, "# Commands\n\n## Core\n")
    assert "| `\\|` | Send \\| now | `send` |" in doc
    assert "# Slash commands\n\n## Core" in doc


# -- search -----------------------------------------------------------------------


@pytest.fixture
async def ws(tmp_path):
    w = await open_workspace(tmp_path)
    a = await w.ledger.append_user("alpha", "where is the Needle?")
    await w.ledger.append("alpha", a.group_id, [NewMessage(role="assistant", content="no idea")])
    b = await w.ledger.append_user("beta", "unrelated")
    await w.ledger.append(
        "beta", b.group_id, [NewMessage(role="assistant", content="found the needle here")]
    )
    w.groups = {"alpha": a.group_id, "beta": b.group_id}
    yield w
    await w.close()


async def test_search_finds_hits_across_sessions_and_jumps(ws):
    app = Host(lambda: SearchScreen(ws, debounce=0.01))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press(*"needle")
        await wait_for(pilot, lambda: screen.searched == "needle")
        assert [(h.session, h.group_id) for h in screen.hits] == [
            ("beta", ws.groups["beta"]),
            ("alpha", ws.groups["alpha"]),
        ]
        assert screen.query_one("#hits", PickList).option_count == 2
        assert "2 hits in 2 sessions" in text_of(screen.query_one("#search-status", Static))
        await pilot.press("down", "down", "enter")  # to the list, then the second hit
        await pilot.pause()
    assert app.results == [("alpha", ws.groups["alpha"])]


async def test_search_enter_searches_now_and_focuses_hits(ws):
    app = Host(lambda: SearchScreen(ws, debounce=60))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press(*"unrelated", "enter")
        await wait_for(pilot, lambda: screen.searched == "unrelated")
        assert screen.query_one("#hits", PickList).has_focus
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [("beta", ws.groups["beta"])]


async def test_search_without_hits_and_escape(ws):
    app = Host(lambda: SearchScreen(ws, query="zzz-not-there"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.screen.searched == "zzz-not-there")
        assert "No message contains" in text_of(app.screen.query_one("#search-status", Static))
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]


@pytest.mark.parametrize(
    ("make", "key", "hint", "answered"),
    [
        (lambda: confirm(arm_delay=0.2), "y", "#confirm-hint", True),
        (lambda: ApprovalScreen("bash", "ls", arm_delay=0.2), "a", "#approval-hint", "allow"),
    ],
)
async def test_an_answer_key_typed_before_it_was_readable_is_ignored_when_handled_later(
    make, key, hint, answered
):
    """A key typed as the dialog appeared and handled only after its delay (kept while
    the app was busy, then passed on: it keeps the time it was typed) does not answer;
    the same key typed now does."""
    app = Host(make)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        typed_early = events.Key(key, key)
        typed_early.time -= 5.0  # typed before the dialog could be read
        arming = app.screen.arming
        await wait_for(pilot, lambda: time.monotonic() >= arming.at + 0.05)
        app.post_message(typed_early)
        await pilot.pause()
        assert app.results == [] and "ignored" in text_of(app.screen.query_one(hint, Static))
        await pilot.press(key)
        await pilot.pause()
    assert app.results == [answered]


def test_a_kept_key_posted_again_keeps_the_time_it_was_typed():
    from slop_tui.ui.keyroute import _typed_again

    key = events.Key("y", "y")
    key.time -= 5.0
    paste = events.Paste("text")
    paste.time -= 5.0
    assert _typed_again(key).time == key.time and _typed_again(key) is not key
    assert _typed_again(paste).time == paste.time
