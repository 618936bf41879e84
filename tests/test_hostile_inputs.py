"""Hostile and malformed input: every surface refuses it in one line and
changes nothing, or shows it safely and stores it intact.

- slash commands: property-based fuzzing of the one dispatcher over a real ledger;
- file tools: FIFOs, sockets, device nodes, /dev/urandom, binary files, lone surrogates;
- config and theme files: syntax errors, wrong types, out-of-range values, not UTF-8;
- invalid UTF-8 and control sequences: how tools decode bytes, what the ledger keeps,
  what reaches the terminal (the whole app's screen is scanned);
- secrets: an API key in a tool output never reaches a memo, an export, a stored
  summary or a handoff.

`query_db`'s hostile statements live in tests/test_tools_db.py, the other file-tool
confinement tests in tests/test_tools_files.py. docs/reliability.md lists them all.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from slop_tui.commands import TABLE, dispatch, resolve
from slop_tui.config import load_config
from slop_tui.records import NewMessage
from slop_tui.tools import REGISTRY, ToolContext, run_tool
from slop_tui.ui.text import UNSAFE_CODEPOINTS, neutralise
from slop_tui.ui.themes import load_themes
from tests.fakeserver import FakeToolCall, Reply, wait_for
from tests.test_tools_support import body, db_checksum, tool_context
from tests.workspace_fixtures import open_workspace

SECRET = "sk-proj-Hostile0123456789abcdefGHIJKLmnopqrst"
# Everything a terminal could act on: C0 controls (ESC, BEL, CR, NUL), a one-byte CSI,
# an OSC title sequence, a bidi override, and Textual markup that does not parse.
NASTY = "X\x1b[2J\x1b]0;pwned\x07\x9b31m\u202eevil\r\x00[bold]b[/bold][/nope]"
SESSION_NAME = "S" + NASTY.replace("\x00", "")  # a name may hold anything but NUL


def call_payload(name: str, args: dict) -> str:
    """An OpenAI assistant message with one tool call `c1`, as the ledger stores it."""
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return json.dumps({"role": "assistant", "content": None, "tool_calls": [call]})


def unsafe(text: str) -> list[str]:
    """The code points of `text` that must never reach the terminal."""
    return sorted({f"U+{ord(c):04X}" for c in text if ord(c) in UNSAFE_CODEPOINTS})


# -- slash commands: property-based fuzzing of the dispatcher -----------------------------

LABELS = sorted({c.label for c in TABLE.commands} | {f"/{a}" for a in TABLE.command_aliases})
NAMES = sorted({c.name for c in TABLE.commands} | set(TABLE.command_aliases))
SUBS = sorted(
    {c.sub for c in TABLE.commands if c.sub} | {a for c in TABLE.commands for a in c.aliases}
)
# Argument words that reach every branch: ids in and out of range (SQLite's INTEGER
# ends at 2**63 - 1), options, lane names, paths that escape, quoting that does not
# close, FTS5 and LIKE syntax, controls, lone surrogates (argv's undecodable bytes).
NASTY_WORDS = [
    "nan", "\udcff", "\ud800", "\x00", "'", '"', "--force", "--limit", "../x.md", "\x1b[2J",
    "[/x]", "\u202e", "NEAR(", "%", ";DROP TABLE messages;--",
]  # fmt: skip
PLAIN_WORDS = [
    "1", "2", str(2**63 - 1), "3.5", "1e3", "inf", "abc", "--json", "--role", "--yaml", "user",
    "tool", "main", "topic:x", "topic:", "reply:1", "reply:x", "..", ".", "notes/", "x.md",
    "x.json", "'quoted name'", "\\", "*", "_", "AND", "ünï 会话", "|", "#", "\n", "\r", "\t",
    "demo", "openai", "slop-demo", "read_file", "execute_bash", "planner", "show", "list", "-",
    "x' OR '1'='1", "markdown", "json", "md",
]  # fmt: skip
# Ids and counts get their own class: most commands take one as the first argument.
NUMBERS = ["1", "0", "-1", str(2**63), "99999999999999999999999", "2"]
word = st.one_of(
    st.sampled_from(NUMBERS),
    st.sampled_from(NASTY_WORDS),
    st.sampled_from(PLAIN_WORDS),
    st.text(max_size=6),
)
LINES = st.one_of(
    # a real command or subcommand with hostile arguments (most examples)
    st.builds(lambda label, args: " ".join([label, *args]), st.sampled_from(LABELS),
              st.lists(word, min_size=1, max_size=3)),
    # a real command name with any subcommand word, or none
    st.builds(lambda name, sub, args: f"/{name} {sub} {' '.join(args)}",
              st.sampled_from(NAMES), st.one_of(st.sampled_from(SUBS), word),
              st.lists(word, max_size=2)),
    st.text(max_size=30).map(lambda t: "/" + t),  # anything after a slash
    st.text(max_size=20),  # plain text is sent to the model, or refused
)  # fmt: skip


def _writes_outside(line: str) -> bool:
    """`/export` writes where it is told; keep generated paths inside the test folder."""
    cmd, args, _ = resolve(line) if line.lstrip().startswith("/") else (None, "", None)
    if cmd is None or cmd.name != "export":
        return False
    try:
        tokens = shlex.split(args)
    except ValueError:
        return False
    return any(t.startswith(("/", "~")) or os.path.isabs(t) for t in tokens)


def test_fuzzed_command_lines_give_a_result_or_one_line_and_rejected_ones_change_nothing(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.md").write_text("# notes\n")
    (project / "x.md").write_text("x\n")
    loop = asyncio.new_event_loop()
    ws = loop.run_until_complete(open_workspace(project))
    ws.editor = lambda text, suffix: text + "\nedited\n"  # deterministic, never $EDITOR
    seen = {"rejected": 0, "ok": 0}
    state = {"dump": db_checksum(ws.ledger.path)}  # the ledger as the last example left it

    @settings(
        max_examples=500,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(line=LINES)
    def one_line(line: str) -> None:
        assume(not _writes_outside(line))
        memory = (ws.session, list(ws.active_skills), ws.throttle)
        result = loop.run_until_complete(dispatch(ws, line))  # must not raise
        after = db_checksum(ws.ledger.path)
        before, state["dump"] = state["dump"], after
        if result.ok:
            seen["ok"] += 1
            if result.send is not None:
                assert result.send == line
            return
        seen["rejected"] += 1
        assert result.text and "\n" not in result.text, repr(result.text)
        assert result.exit_code in (1, 2) and result.send is None
        assert after == before, line
        assert (ws.session, list(ws.active_skills), ws.throttle) == memory, line

    try:
        one_line()
    finally:
        loop.run_until_complete(ws.close())
        loop.close()
    # The generator reaches both outcomes often enough for the property to mean something.
    assert seen["rejected"] > 100 and seen["ok"] > 50, seen


@pytest.mark.parametrize(
    "line",
    [
        # Lone surrogates (undecodable argv bytes) used to escape as UnicodeEncodeError,
        # and `/session activate` left the workspace pointing at the unstorable name.
        "/session activate \udcff",
        "/memo add tag body \udcff",
        "/history search \ud800",
        "/session scratchpad set \udcff",
        "/model \udcff",
        "plain text to the model \udcff",
        # Ids past SQLite's INTEGER range used to escape as OverflowError.
        f"/memo show {2**63}",
        "/context uncompact 99999999999999999999999",
        f"/message show {2**64}",
        f"/context drop {2**63}",
    ],
)
async def test_inputs_that_used_to_escape_the_dispatcher_are_one_line_errors(tmp_path, line):
    ws = await open_workspace(tmp_path)
    try:
        before = db_checksum(ws.ledger.path)
        result = await dispatch(ws, line)
        assert not result.ok and result.error_kind == "usage", result.text
        assert "\n" not in result.text
        assert db_checksum(ws.ledger.path) == before
        assert ws.session == "default_session"
        assert (await dispatch(ws, "/session list")).ok  # the workspace still works
    finally:
        await ws.close()


BIG = str(2**63)  # one past SQLite's INTEGER range
_ID_WORDS = r"\b(NAME\|ID|SUMMARY_ID|ID|GID|N|ENTRY|SECONDS)\b"


def _with_big_ids(usage: str) -> str:
    """The command's usage line with every id, count or number argument 2**63 and the
    other arguments filled in."""
    line = re.sub(r" \[--role ROLE\]", "", usage)
    line = line.replace("[on|off|tokens N]", "tokens N").replace("[ID ...]", "ID")
    line = line.replace("GID|LAYER", "GID")
    line = re.sub(r"[\[\]]", "", line)
    return re.sub(_ID_WORDS, BIG, line).replace("TEXT", "hello")


ID_COMMANDS = sorted(
    _with_big_ids(c.usage) for c in TABLE.commands if re.search(_ID_WORDS, c.usage)
)


def test_every_id_taking_command_is_found() -> None:
    # The table is read, not listed by hand: a new command with an id is tested too.
    assert len(ID_COMMANDS) >= 25
    assert f"/skill activate {BIG}" in ID_COMMANDS and f"/reply {BIG} hello" in ID_COMMANDS


@pytest.mark.parametrize("line", [*ID_COMMANDS, f"/lane switch reply:{BIG}"])
async def test_every_id_argument_past_the_integer_range_is_a_one_line_usage_error(tmp_path, line):
    ws = await open_workspace(tmp_path)
    try:
        await ws.ledger.add_skill("helper", "helps", "Be helpful.")
        before = db_checksum(ws.ledger.path)
        result = await dispatch(ws, line)
        assert not result.ok and result.error_kind == "usage", (line, result.text)
        assert "\n" not in result.text and "Usage" in result.text, result.text
        assert db_checksum(ws.ledger.path) == before
        assert not ws.active_skills and ws.throttle == 0
    finally:
        await ws.close()


async def test_a_skill_id_past_the_integer_range_names_no_skill(tmp_path):
    """The model's skill tool and the ledger itself: no OverflowError either."""
    ws = await open_workspace(tmp_path)
    try:
        skill = await ws.ledger.add_skill("helper", "helps", "Be helpful.")
        assert await ws.ledger.get_skill(BIG) is None
        assert await ws.ledger.get_skill("²") is None  # a digit int() does not read
        assert (await ws.ledger.get_skill(str(skill.id))).name == "helper"
        r = await dispatch(ws, "/skill activate ²")
        assert not r.ok and "\n" not in r.text
    finally:
        await ws.close()


def test_exec_with_undecodable_argv_bytes_exits_2_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLOP_", "OPENAI_", "GEMINI_"))}
    env["HOME"] = str(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "slop_tui.cli", "exec", b"/memo add tag caf\xe9"],
        cwd=tmp_path, env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode("utf-8", "replace").strip()
    assert "U+DCE9" in err and "not valid Unicode" in err and len(err.splitlines()) == 1
    assert b"Traceback" not in r.stderr


# -- file tools: special files, binary files, undecodable arguments -----------------------


@pytest.fixture
async def ctx(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    async with tool_context(tmp_path) as c:
        yield c


async def call(ctx: ToolContext, name: str, **args: object) -> tuple[bool, str, float]:
    start = time.monotonic()
    result = await run_tool(name, args, ctx)
    return result.ok, body(result), time.monotonic() - start


@pytest.fixture
def special(ctx: ToolContext):
    """A FIFO, a listening UNIX socket and (when allowed) a character device in the root."""
    root = ctx.root
    os.mkfifo(root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    sock.listen()
    try:
        os.mknod(root / "zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    except (PermissionError, OSError):
        (root / "zero").symlink_to("/dev/zero")  # unprivileged: the next best thing
    (root / "urandom").symlink_to("/dev/urandom")
    yield root
    sock.close()


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("grep", {"pattern": "x", "path": "pipe"}, "is a FIFO"),  # used to wait 30 s for a writer
        ("grep", {"pattern": "x", "path": "sock"}, "is a socket"),
        ("read_file", {"path": "pipe"}, "is a FIFO"),
        ("read_file", {"path": "sock"}, "is a socket"),
        ("write_file", {"path": "pipe", "content": "x"}, "is a FIFO"),
        (
            "apply_patch",
            {"path": "sock", "patches": [{"find": "a", "replace": "b"}]},
            "is a socket",
        ),
        ("read_file", {"path": "/dev/urandom"}, "outside the project root"),
        ("read_file", {"path": "urandom"}, "outside the project root"),
        ("grep", {"pattern": "x", "path": "urandom"}, "outside the project root"),
        ("list_directory", {"path": "/dev"}, "outside the project root"),
    ],
)
async def test_special_files_are_refused_at_once(ctx, special, tool, args, expected):
    ok, text, elapsed = await call(ctx, tool, **args)
    assert not ok and expected in text, text
    assert "\n" not in text and elapsed < 2


async def test_device_nodes_inside_the_root_are_refused(ctx, special):
    if not (special / "zero").is_char_device() or (special / "zero").is_symlink():
        pytest.skip("creating a device node needs CAP_MKNOD")
    for tool, args in [("read_file", {"path": "zero"}), ("grep", {"pattern": "x", "path": "zero"}),
                       ("write_file", {"path": "zero", "content": "x"})]:  # fmt: skip
        ok, text, elapsed = await call(ctx, tool, **args)
        assert not ok and "is a device file" in text and elapsed < 2, (tool, text)


async def test_listing_and_searching_a_folder_with_special_files_does_not_hang(ctx, special):
    (special / "a.txt").write_text("needle\n")
    ok, text, elapsed = await call(ctx, "list_directory")
    assert ok and "pipe" in text and "sock" in text and elapsed < 2
    assert "urandom@ -> /dev/urandom" in text  # shown, never followed
    ok, text, elapsed = await call(ctx, "grep", pattern="needle")
    assert ok and text == "a.txt:1:needle" and elapsed < 5, text


@pytest.mark.parametrize("name", ["pipe", "sock", "urandom", "blob.bin"])
async def test_file_add_refuses_special_and_binary_files_at_once(tmp_path, name):
    ws = await open_workspace(tmp_path)
    try:
        os.mkfifo(tmp_path / "pipe")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(tmp_path / "sock"))
        (tmp_path / "urandom").symlink_to("/dev/urandom")
        (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x00\x01")
        before = db_checksum(ws.ledger.path)
        start = time.monotonic()
        result = await dispatch(ws, f"/file add {name}")
        assert time.monotonic() - start < 2
        assert not result.ok and result.error_kind == "failed" and "\n" not in result.text
        assert db_checksum(ws.ledger.path) == before
        sock.close()
    finally:
        await ws.close()


async def test_binary_files_are_skipped_by_grep_and_refused_by_read(ctx):
    (ctx.root / "blob.bin").write_bytes(b"needle\x00\xff\xfe" * 100)
    ok, text, _ = await call(ctx, "grep", pattern="needle")
    assert ok and text.startswith("No matches"), text
    ok, text, _ = await call(ctx, "read_file", path="blob.bin")
    assert not ok and "binary file refused" in text


@pytest.mark.parametrize(
    ("tool", "args", "where"),
    [
        ("write_file", {"path": "a.txt", "content": "x\ud800"}, "content"),
        ("write_file", {"path": "a\udcff.txt", "content": "x"}, "path"),
        ("read_file", {"path": "a\udcff.txt"}, "path"),
        ("execute_bash", {"command": "echo \ud800"}, "command"),
        ("grep", {"pattern": "\ud800"}, "pattern"),
        ("query_db", {"sql": "SELECT '\ud800'"}, "sql"),
        ("apply_patch", {"path": "a.txt", "patches": [{"find": "a", "replace": "\udfff"}]},
         "patches[0].replace"),
        ("save_memo", {"content": "ok", "tags": ["x\ud800"]}, "tags[0]"),
    ],
)  # fmt: skip
async def test_lone_surrogates_in_tool_arguments_are_one_clear_line(ctx, tool, args, where):
    """A model's JSON may hold `"\\ud800"`; such an argument is refused by name, before the
    tool runs (it used to end as 'failed unexpectedly: UnicodeEncodeError')."""
    before = db_checksum(ctx.ledger.path)
    ok, text, _ = await call(ctx, tool, **args)
    assert not ok and f"'{where}' contains U+" in text and "not valid Unicode" in text, text
    assert "unexpectedly" not in text and "\n" not in text
    text.encode("utf-8")  # the error itself can be stored and shown
    assert db_checksum(ctx.ledger.path) == before
    assert sorted(p.name for p in ctx.root.iterdir()) == []


def test_every_string_argument_of_every_tool_is_checked():
    """The check sits in the schema validator, so a new tool cannot forget it."""
    from slop_tui.tools.args import validate
    from slop_tui.tools.base import ToolError

    example = {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    checked = 0
    for tool in REGISTRY.values():
        props = tool.parameters.get("properties", {})
        for key, schema in props.items():
            if schema.get("type") != "string" or "enum" in schema:
                continue
            args = {
                k: props[k].get("enum", [example[props[k]["type"]]])[0]
                for k in tool.parameters.get("required", [])
            }
            args[key] = "bad\udcff"
            with pytest.raises(ToolError, match=f"'{key}' contains U\\+DCFF"):
                validate(tool, args)
            checked += 1
    assert checked >= 10


# -- config and theme files ---------------------------------------------------------------

BROKEN_CONFIG: dict[str, tuple[bytes, str]] = {
    "syntax": (b"[tools\nmax_iterations = 3\n", "TOML syntax error"),
    "not_utf8": (b'theme = "caf\xe9"\n', "not UTF-8 text"),
    "nul_byte": (b'theme = "a\x00b"\n', "TOML syntax error"),
    "unknown_key": (b"colour = 'red'\n", "unknown key 'colour' ignored"),
    "unknown_tools_key": (b"[tools]\nmax_iter = 3\n", "unknown key 'tools.max_iter' ignored"),
    "wrong_type_top": (b"theme = 3\n", "'theme' should be a str, not int"),
    "wrong_type_table": (b"tools = 5\n", "'tools' should be a dict, not int"),
    "wrong_type_bool": (b"[tools]\nparallel = true\n", "'tools.parallel' has the wrong type"),
    "zero_iterations": (b"[tools]\nmax_iterations = 0\n", "'tools.max_iterations' = 0 must be"),
    "negative_timeout": (b"[tools]\nbash_timeout = -5\n", "'tools.bash_timeout' = -5 must be"),
    "nan_timeout": (b"[tools]\nbash_timeout = nan\n", "'tools.bash_timeout' = nan must be"),
    "inf_limit": (b"[tools]\nquery_time_limit = inf\n", "'tools.query_time_limit' = inf must"),
    "negative_window": (b"[context]\nwindow = -3\n", "'context.window' = -3 must be"),
    "bad_approve": (b"approve = 'always'\n", "'approve' must be none, reads or all"),
    "keymap_number": (b"[keymap]\nquit = 3\n", "'keymap.quit' should be a key string"),
    "truncation": (b"[truncation]\nfull_fidelity_count = 'many'\n", "[truncation]"),
}


@pytest.mark.parametrize("case", list(BROKEN_CONFIG), ids=list(BROKEN_CONFIG))
def test_a_broken_config_file_gives_one_line_and_the_defaults(tmp_path, case):
    data, message = BROKEN_CONFIG[case]
    (tmp_path / ".slop").mkdir()
    (tmp_path / ".slop" / "config.toml").write_bytes(data)
    defaults = load_config(env={"SLOP_CONFIG": str(tmp_path / "none.toml")}, cwd=tmp_path / "x")
    config = load_config(env={"SLOP_CONFIG": str(tmp_path / "none.toml")}, cwd=tmp_path)
    assert len(config.warnings) == 1, config.warnings
    [warning] = config.warnings
    assert message in warning and "\n" not in warning and warning.startswith(str(tmp_path))
    for field in ("theme", "approve", "max_iterations", "parallel_tools", "bash_timeout"):
        assert getattr(config, field) == getattr(defaults, field), field
    assert config.context == {} and dict(config.keymap) == {}


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_config_path_that_is_a_folder_or_a_fifo_warns_and_does_not_hang(tmp_path, kind):
    path = tmp_path / "config.toml"
    path.mkdir() if kind == "folder" else os.mkfifo(path)  # opening a FIFO would block
    start = time.monotonic()
    config = load_config(env={"SLOP_CONFIG": str(path)}, cwd=tmp_path)
    assert time.monotonic() - start < 2
    assert len(config.warnings) == 1 and "not a regular file" in config.warnings[0]


async def test_broken_provider_tables_are_reported_not_dropped_silently(tmp_path):
    (tmp_path / ".slop").mkdir()
    (tmp_path / ".slop" / "config.toml").write_text(
        "[providers.local]\nkind = 'llama'\n[providers.slow]\nkind = 'openai'\ntimeout = 'x'\n"
    )
    ws = await open_workspace(tmp_path)
    try:
        configs = ws.provider_configs()
        assert "local" not in configs and "slow" not in configs and "demo" in configs
        warnings = ws.pop_warnings()
        assert any("[providers.local]" in w and "unknown kind 'llama'" in w for w in warnings)
        assert any("[providers.slow]" in w and "timeout" in w for w in warnings)
        assert all("\n" not in w for w in warnings)
    finally:
        await ws.close()


def test_theme_files_that_are_not_utf8_binary_or_special_are_skipped_in_one_line(tmp_path):
    (tmp_path / "latin1.toml").write_bytes(b'name = "caf\xe9"\nprimary = "#000000"\n')
    (tmp_path / "binary.toml").write_bytes(b"\x00\x01\x02\xff" * 64)
    (tmp_path / "types.toml").write_text('name = ["x"]\nprimary = 7\ndark = "yes"\n')
    (tmp_path / "huge-number.toml").write_text(
        'name = "n"\nprimary = "#000000"\ntext_alpha = 1e400\n'
    )
    (tmp_path / "dir.toml").mkdir()
    os.mkfifo(tmp_path / "fifo.toml")  # opening it would wait for a writer
    start = time.monotonic()
    result = load_themes(tmp_path)
    assert time.monotonic() - start < 2
    assert len(result.errors) == 4, result.errors
    assert all("\n" not in e and e.endswith("skipped.") for e in result.errors)
    joined = "\n".join(result.errors)
    assert "latin1.toml: not UTF-8 text" in joined
    assert "'name' should be a string, not a list" in joined
    assert "'text_alpha' = inf should be between 0 and 1" in joined
    assert {"slop-dark", "slop-light"} <= set(result.names)


async def test_the_app_shows_each_config_and_theme_problem_as_one_notification(
    tmp_path, monkeypatch
):
    from slop_tui.ui.app import SlopApp
    from tests.test_app import started

    home = tmp_path / "home"
    (home / "themes").mkdir(parents=True)
    (home / "config.toml").write_text("colour = 'red'\ntheme = 3\n")
    (home / "themes" / "bad.toml").write_text("[oops\n")
    monkeypatch.setenv("SLOP_CONFIG", str(home / "config.toml"))
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLOP_DB", "SLOP_SESSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    app = SlopApp(db=str(tmp_path / "slop.db"), user_themes=True, blink=False)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await started(pilot)
        messages = [n.message for n in app._notifications]
        assert len(messages) == 3, messages
        assert sum("unknown key 'colour'" in m for m in messages) == 1
        assert sum("'theme' should be a str" in m for m in messages) == 1
        assert sum("1 theme file was skipped" in m and "bad.toml" in m for m in messages) == 1
        assert app.theme == "slop-dark"


# -- invalid UTF-8 and control sequences ------------------------------------------------


async def test_shell_output_bytes_decode_to_replacement_characters_and_round_trip(ctx):
    """Decision: a tool's undecodable bytes become U+FFFD when the tool decodes them (the
    only lossy step); from then on the text is stored and read back exactly, controls
    included, and only the screen neutralises them."""
    ok, text, _ = await call(
        ctx, "execute_bash", command=r"printf 'ok \xff\xfe \033[2J \xe2\x82 \302\233 end'"
    )
    assert ok and text == "ok \ufffd\ufffd \x1b[2J \ufffd \x9b end", repr(text)
    user = await ctx.ledger.append_user(ctx.session, "run it")
    [row] = await ctx.ledger.append(
        ctx.session, user.group_id,
        [NewMessage("tool", text, tool_call_id="c1", tool_name="execute_bash")],
    )  # fmt: skip
    stored = await ctx.ledger.get_message(row.id)
    assert stored.content == text  # byte for byte, ESC and C1 CSI included
    assert neutralise(text) == "ok \ufffd\ufffd ␛[2J \ufffd <U+009B> end"


async def test_query_db_shows_invalid_utf8_in_the_ledger_with_replacement_characters(ctx):
    await ctx.ledger._db.execute(
        "INSERT INTO memos(content, tags, created_at) "
        "VALUES (CAST(x'6f6bff1b5b326a' AS TEXT), '[\"raw\"]', 0)"
    )
    await ctx.ledger._db.commit()
    ok, text, _ = await call(
        ctx, "query_db", sql="SELECT content AS value FROM memos WHERE tags = '[\"raw\"]'"
    )
    assert ok and json.loads(text) == [{"value": "ok\ufffd\x1b[2j"}]


def test_neutralise_makes_every_unsafe_code_point_visible():
    shown = neutralise(NASTY + "\ud800\udcff\u2066\u200f\x7f")
    assert unsafe(shown) == []
    assert "␛[2J" in shown and "<U+009B>" in shown and "<U+202E>" in shown
    assert "<U+D800><U+DCFF>" in shown and "[bold]b[/bold][/nope]" in shown


@pytest.mark.parametrize("strategy", ["openai", "gemini"])
async def test_a_lone_surrogate_in_model_text_does_not_end_the_turn(tmp_path, fake_llm, strategy):
    from slop_tui.orchestrator import Orchestrator
    from slop_tui.providers.retry import RetryPolicy
    from tests.test_orchestrator import env_for

    ws = await open_workspace(tmp_path, env=env_for(fake_llm))

    async def no_sleep(_s: float) -> None:
        return None

    orch = Orchestrator(ws, approve="reads", retry_policy=RetryPolicy(), sleep=no_sleep)
    try:
        await dispatch(ws, f"/provider {strategy}")
        fake_llm.enqueue(Reply(text="bad \ud800 text"))
        out = await orch.run_turn("hi", lambda _e: None)
        rows = await ws.ledger.session_messages(ws.session)
        assert out.error is None and rows[-1].content == "bad \ufffd text"
    finally:
        fake_llm.reset()
        await orch.aclose()
        await ws.close()


@pytest.fixture
def project(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLOP_DB", "SLOP_SESSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLOP_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def screen_leaks(app) -> list[tuple[str, str]]:
    """(code point, widget path) for every unsafe character the screen would draw.

    Segments are what the driver writes to the terminal. A modal screen draws the
    screen below it too; those cells are reported under the modal's name.
    """
    out = set()
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        x = 0
        for seg in strip:
            for ch in seg.text:
                if ord(ch) in UNSAFE_CODEPOINTS:
                    widget, _ = app.screen.get_widget_at(x, y)
                    path = "/".join(
                        f"{type(w).__name__}#{w.id}" for w in reversed(widget.ancestors_with_self)
                        if w is not app
                    )  # fmt: skip
                    out.add((f"U+{ord(ch):04X}", path))
            x += seg.cell_length
    return sorted(out)


def dialog_leaks(app) -> list[tuple[str, str]]:
    """Leaks inside the open dialog (its cells over the dimmed screen below are not)."""
    return [leak for leak in screen_leaks(app) if "/" in leak[1]]


def screen_text(app) -> str:
    return "".join(seg.text for strip in app.screen._compositor.render_strips() for seg in strip)


async def hostile_workspace(app) -> int:
    """Hostile text in the session name, a prompt, an answer, a tool call and its output,
    STATE and a memo (the scratchpad has its own test below)."""
    ws = app.workspace
    await app.run_command("/session activate " + SESSION_NAME)
    assert ws.session == SESSION_NAME
    led = ws.ledger
    user = await led.append_user(ws.session, "P" + NASTY, strategy="openai")
    payload = call_payload("execute_bash", {"command": NASTY})
    await led.append(ws.session, user.group_id, [
        NewMessage("assistant", "", status="tool_call", payload=payload, strategy="openai"),
        NewMessage("tool", "T" + NASTY, tool_call_id="c1", tool_name="execute_bash",
                   strategy="openai"),
        NewMessage("assistant", "A" + NASTY, strategy="openai"),
    ])  # fmt: skip
    await led.add_state(ws.session, user.group_id, "### STATE\nGoal: " + NASTY)
    await app.run_command("/memo add hostile M" + NASTY)
    await app.workspace_screen.refresh_all(reload_conversation=True)
    return user.group_id


async def test_hostile_text_never_reaches_the_terminal_and_stays_intact_in_the_ledger(project):
    from slop_tui.ui.app import SlopApp
    from slop_tui.ui.widgets.preview import ContextPreview
    from tests.test_app import started

    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await started(pilot)
        gid = await hostile_workspace(app)
        await pilot.pause()
        assert screen_leaks(app) == []  # header, session and group lists, STATE, conversation
        # A command echo in a notification (markup that does not parse used to crash the
        # app at render time), a command's output pane, the error banner.
        await app.run_command("/nope" + NASTY)
        await app.run_command(f"/message show {gid}")
        app.workspace_screen.show_banner("provider said: " + NASTY)
        await pilot.pause()
        assert any("Unknown command" in n.message for n in app._notifications)
        assert screen_leaks(app) == []
        # The context preview shows the whole request (scrolled to its end here).
        preview = app.query_one(ContextPreview)
        area = preview.query_one("TextArea")
        assert "␛[2J" in area.text and unsafe(area.text) == []
        assert NASTY in preview.text  # copying the context gives the exact bytes
        # Dialogs: the session picker and a history search hit.
        await pilot.press("f5")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SessionScreen")
        assert dialog_leaks(app) == []
        await pilot.press("escape")
        await pilot.press("f6")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SearchScreen")
        await pilot.press(*"evil", "enter")
        await pilot.pause(0.3)
        assert dialog_leaks(app) == []
        await pilot.press("escape")
        await pilot.pause()
        # The ledger kept every byte.
        ws = app.workspace
        rows = await ws.ledger.group_messages(ws.session, gid)
        assert [r.content for r in rows] == ["P" + NASTY, "", "T" + NASTY, "A" + NASTY]
        assert ws.session == SESSION_NAME
        assert (await ws.ledger.current_state(ws.session)).content.endswith(NASTY)


async def test_app_notifications_from_orchestrator_events_are_plain_text(
    project, fake_llm, monkeypatch
):
    """A provider's error body is untrusted: it reaches the banner and notifications."""
    from slop_tui.ui.app import SlopApp
    from tests.test_app import started

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    fake_llm.enqueue(Reply(status=401, error_message="invalid key " + NASTY))
    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await started(pilot)
        await pilot.press(*"hello", "enter")
        await wait_for(
            pilot, lambda: app.turns.orchestrator is not None and not app.turns.busy, timeout=10
        )
        await pilot.pause()
        shown = screen_text(app)
        assert "invalid key" in shown and "X␛[2J␛]0;pwned␇<U+009B>31m" in shown  # neutralised
        assert screen_leaks(app) == []


async def test_the_scratchpad_editor_does_not_draw_raw_controls(project):
    from slop_tui.ui.app import SlopApp
    from tests.test_app import started

    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await started(pilot)
        await app.workspace.ledger.set_scratchpad(app.workspace.session, "pad " + NASTY)
        await app.workspace_screen.refresh_all()
        await pilot.pause()
        assert screen_leaks(app) == []
        # Only the drawing changes: the stored scratchpad keeps every byte.
        await pilot.pause(0.6)  # past the editor's auto-save pause
        session = await app.workspace.ledger.get_session(app.workspace.session)
        assert session.scratchpad == "pad " + NASTY


# -- secrets ------------------------------------------------------------------------------


async def table_text(ledger, *tables: str) -> str:
    rows = []
    for table in tables:
        cur = await ledger._db.execute(f"SELECT * FROM {table}")
        rows += [repr(tuple(r)) for r in await cur.fetchall()]
    return "\n".join(rows)


async def test_a_key_from_a_tool_output_never_reaches_a_memo(ctx):
    (ctx.root / "creds.env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    ok, shown, _ = await call(ctx, "read_file", path="creds.env")
    assert ok and SECRET in shown  # the model sees the file as it is
    ok, text, _ = await call(ctx, "save_memo", content=f"deploy key: {SECRET}", tags=["deploy"])
    assert ok and "replaced by [REDACTED]" in text
    ok, text, _ = await call(ctx, "retrieve_memos", tags=["deploy"])
    assert ok and "deploy key: [REDACTED]" in text and SECRET not in text
    assert SECRET not in await table_text(ctx.ledger, "memos", "memos_fts")


async def test_memo_commands_never_store_a_key(tmp_path):
    ws = await open_workspace(tmp_path)
    try:
        added = await dispatch(ws, f"/memo add deploy use {SECRET} for prod")
        assert added.ok and "[REDACTED]" in added.text
        ws.editor = lambda text, suffix: text + f"\npassword=hunter2hunter2 and {SECRET}\n"
        edited = await dispatch(ws, "/memo edit 1")
        assert edited.ok and "[REDACTED]" in edited.text
        stored = await table_text(ws.ledger, "memos", "memos_fts")
        assert SECRET not in stored and "hunter2hunter2" not in stored
        assert SECRET not in (await dispatch(ws, "/memo show 1")).text
    finally:
        await ws.close()


async def test_exports_never_hold_a_key_and_json_stays_valid(tmp_path):
    ws = await open_workspace(tmp_path)
    try:
        user = await ws.ledger.append_user(ws.session, "read the creds")
        payload = call_payload("execute_bash", {"command": f"echo {SECRET}"})
        await ws.ledger.append(ws.session, user.group_id, [
            NewMessage("assistant", "", status="tool_call", payload=payload),
            NewMessage("tool", f"OPENAI_API_KEY={SECRET}\n", tool_call_id="c1",
                       tool_name="execute_bash"),
            NewMessage("assistant", f"The key is {SECRET}.\n### STATE\nGoal: rotate {SECRET}"),
        ])  # fmt: skip
        await ws.ledger.add_state(ws.session, user.group_id, f"### STATE\nGoal: rotate {SECRET}")
        await ws.ledger.set_scratchpad(ws.session, f"- [ ] revoke {SECRET}")
        assert (await dispatch(ws, "/export markdown out.md")).ok
        assert (await dispatch(ws, "/export json out.json")).ok
        md = (tmp_path / "out.md").read_text()
        raw = (tmp_path / "out.json").read_text()
        assert SECRET not in md and SECRET not in raw
        assert md.count("[REDACTED]") >= 5
        doc = json.loads(raw)  # still valid JSON, payloads still valid JSON
        call_row = next(m for m in doc["messages"] if m["status"] == "tool_call")
        assert json.loads(call_row["payload"])["tool_calls"][0]["id"] == "c1"
        # The ledger itself keeps the exact text (the model saw it; /message show shows it).
        assert SECRET in await table_text(ws.ledger, "messages")
    finally:
        await ws.close()


@pytest.fixture
def turns(tmp_path, fake_llm, monkeypatch):
    """make(**compaction) -> (ws, orch) with small limits, like tests/test_continuity_turns.py;
    each test closes what it opened."""
    import dataclasses

    from slop_tui.orchestrator import Orchestrator
    from slop_tui.providers.retry import RetryPolicy
    from slop_tui.workspace import Workspace
    from tests.test_continuity_turns import ROOMY, env_for, rough

    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))

    async def make(**compaction):
        env = env_for(fake_llm)
        config = load_config(db=str(tmp_path / ".slop" / "slop.db"), env=env, cwd=tmp_path)
        config = dataclasses.replace(config, models=ROOMY, compaction=compaction)
        ws = await Workspace.open(config, count_tokens=rough, env=env)

        async def no_sleep(_s: float) -> None:
            return None

        return ws, Orchestrator(ws, retry_policy=RetryPolicy(max_retries=0), sleep=no_sleep)

    yield make
    fake_llm.default_reply = None


async def _secret_turns(make, fake_llm, tmp_path, **compaction):
    """A tool reads a key and the model repeats it; later turns compact that span."""
    from tests.test_continuity_turns import history

    ws, orch = await make(compaction_trigger_tokens=800, verbatim_window_tokens=300, **compaction)
    await ws.ledger.set_window(ws.session, 0)  # the key stays in every request
    (tmp_path / "creds.env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("read_file", {"path": "creds.env"})]),
        Reply(text=f"The key is {SECRET}.\n### STATE\nGoal: rotate {SECRET}"),
    )
    await orch.run_turn("show me the credentials file")
    await orch.wait_background()
    await history(ws, 5, 100)
    fake_llm.default_reply = Reply(text=f"<summary>## User Intent\n- creds: {SECRET}</summary>")
    fake_llm.enqueue(Reply(text="ok"))
    await orch.run_turn("continue")
    await orch.wait_background()
    return ws, orch


def _summary_requests(fake_llm) -> list[str]:
    return [
        json.dumps(r.body, ensure_ascii=False)
        for r in fake_llm.chat_requests
        if "summary" in json.dumps(r.body["messages"][-1])
    ]


async def test_a_key_never_reaches_a_stored_summary_a_summary_model_or_a_handoff(
    turns, fake_llm, tmp_path
):
    ws, orch = await _secret_turns(turns, fake_llm, tmp_path, summary_model="fake-summarizer")
    try:
        sent = _summary_requests(fake_llm)
        assert sent and all(SECRET not in s for s in sent)  # a standalone request: redacted
        assert any("[REDACTED]" in s for s in sent)
        summaries = await ws.ledger.summaries(ws.session, "main")
        assert summaries and all(SECRET not in s.content for s in summaries)
        assert "[REDACTED]" in summaries[0].content  # the model's echo was redacted too
        assert (await dispatch(ws, "/handoff write")).ok
        stored = await table_text(ws.ledger, "summaries", "handoffs", "compaction_log")
        assert SECRET not in stored
    finally:
        await orch.aclose()
        await ws.close()


async def test_the_same_model_summary_request_is_redacted_too(turns, fake_llm, tmp_path):
    """Without `summary_model` the summary goes to the session's own model, and its
    request is still a standalone one over the rows it summarises, redacted like a
    request to another model (the key never goes out in a summary request); what the
    call produces is redacted before it is stored, even when the model echoes the key."""
    ws, orch = await _secret_turns(turns, fake_llm, tmp_path)
    try:
        sent = _summary_requests(fake_llm)
        assert sent and all(SECRET not in s for s in sent)
        assert any("[REDACTED]" in s for s in sent)
        stored = await table_text(ws.ledger, "summaries", "compaction_log")
        assert "creds" in stored and SECRET not in stored
    finally:
        await orch.aclose()
        await ws.close()
