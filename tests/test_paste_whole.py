"""A bracketed paste reaches the app whole, whatever it holds (`paste-kept-whole` in
slop_tui/ui/textual_fixes.py): an ESC inside it (a coloured log) is text, and its line
breaks are never Enter."""

from __future__ import annotations

import sqlite3

import pytest
from textual import events
from textual._parser import ParseTimeout
from textual._xterm_parser import XTermParser

from slop_tui.ui import textual_fixes
from tests import pty_app

START, END = "\x1b[200~", "\x1b[201~"
# A coloured log line, a carriage return (what a terminal sends for a pasted line
# break), a lone ESC, and a NUL: all of it is the pasted text (the NUL excepted).
PASTED = "first \x1b[31mred\x1b[0m line\rsecond line \x1b\x1b\x00end"
STREAM = f"a{START}{PASTED}{END}b"


def tokens(chunks: list[str]) -> list[object]:
    textual_fixes.install()
    parser = XTermParser()
    out: list[object] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    return out


def described(found: list[object]) -> list[tuple[str, str]]:
    return [
        ("paste", t.text) if isinstance(t, events.Paste) else ("key", t.key)  # type: ignore[attr-defined]
        for t in found
    ]


WANTED = [("key", "a"), ("paste", PASTED.replace("\x00", "")), ("key", "b")]


@pytest.mark.parametrize("cut", [None, 1, 3, 8, 9, len(STREAM) - 4, len(STREAM) - 1])
def test_a_paste_holding_escape_codes_and_line_breaks_is_one_paste(cut):
    """Read whole, or in two reads cut anywhere (inside either marker too)."""
    chunks = [STREAM] if cut is None else [STREAM[:cut], STREAM[cut:]]
    assert described(tokens(chunks)) == WANTED


def test_a_paste_read_one_character_at_a_time_is_one_paste():
    assert described(tokens(list(STREAM))) == WANTED


def test_keys_around_pastes_keep_their_meaning():
    """An Escape key just before a paste, arrows, a second paste, a plain one."""
    stream = f"\x1b{START}one\x1b[A{END}\x1b[A{START}two{END}\r"
    assert described(tokens([stream])) == [
        ("key", "escape"),
        ("paste", "one\x1b[A"),
        ("key", "up"),
        ("paste", "two"),
        ("key", "enter"),
    ]


def test_an_escape_key_alone_still_comes_after_its_wait():
    textual_fixes.install()
    parser = XTermParser()
    assert list(parser.feed("\x1b")) == []  # an ESC sequence may follow
    parser._awaiting = parser._gen.throw(ParseTimeout())  # what `tick` does once it is due
    assert [t.key for t in parser._tokens] == ["escape"]  # type: ignore[attr-defined]


def test_a_paste_cut_by_the_end_of_the_input_is_given_as_far_as_it_came():
    assert described(tokens([f"{START}half a li", ""])) == [("paste", "half a li")]


# The real command on a terminal: a user pastes a coloured log with line breaks into
# the prompt. Nothing is sent: no request, no message in the ledger; the text is in
# the prompt, line by line.


def test_a_pasted_coloured_log_lands_in_the_prompt_and_sends_nothing(tmp_path, fake_llm):
    term = pty_app.start(tmp_path, fake_llm.base_url)
    try:
        log = "build \x1b[31mFAILED\x1b[0m at step 3\rnext: \x1b[1mretry\x1b[0m\r"
        term.send(f"{START}{log}{END}")
        assert term.pump(lambda t: t.find("next:") is not None, 20.0) is not None
        term.settle(0.5, 10.0)
        screen = [term.text(y) for y in range(30)]
        first = next(y for y, line in enumerate(screen) if "build" in line)
        assert "FAILED" in screen[first] and "at step 3" in screen[first]
        assert "next:" in screen[first + 1] and "retry" in screen[first + 1]
        term.send("\x11")  # ctrl+q
        assert pty_app.wait_for_exit(term) is not None, "the app did not quit"
    finally:
        term.close()
    assert fake_llm.requests == []  # nothing reached the model
    with sqlite3.connect(tmp_path / "project" / ".slop" / "slop.db") as db:
        assert db.execute("SELECT COUNT(*) FROM messages").fetchone() == (0,)


async def test_a_paste_into_a_dialog_s_field_never_draws_its_terminal_codes(tmp_path, monkeypatch):
    """Textual's `Input` draws its value as it is: a pasted ESC is kept there as ␛."""
    from textual.widgets import Input

    from tests.fakeserver import wait_for
    from tests.test_app import started
    from tests.test_app_actions import make_app

    monkeypatch.setenv("SLOP_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.chdir(tmp_path)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        app.action_search()  # a worker: the search screen opens
        await wait_for(pilot, lambda: isinstance(app.focused, Input))
        field = app.focused
        app.post_message(events.Paste("deploy \x1b[31mFAILED\x1b[0m\rnext line"))
        await wait_for(pilot, lambda: "deploy" in field.value)
        assert field.value == "deploy ␛[31mFAILED␛[0m"  # the first line, its codes inert
        assert not any("\x1b" in segment.text for segment in field.render_line(0))
