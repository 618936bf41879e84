"""Session export: Markdown for people, JSON with every field, and /export's file handling."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slop_tui.commands import dispatch
from slop_tui.commands.export_cmds import safe_filename
from slop_tui.export import fenced, session_json, session_markdown
from slop_tui.records import (
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    STATUS_TOOL_CALL,
    Message,
    NewMessage,
    StateVersion,
)
from tests.workspace_fixtures import open_workspace

CALL_PAYLOAD = json.dumps(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "write_file",
                    "arguments": json.dumps({"path": "a.txt", "content": "hi"}),
                },
            }
        ],
    }
)


def rows() -> list[Message]:
    def m(i, gid, role, content, **kw):
        return Message(
            id=i,
            session="s",
            group_id=gid,
            lane="main",
            role=role,
            content=content,
            tokens=3,
            created_at=1_700_000_000.0 + i,
            **kw,
        )

    return [
        m(1, 1, "user", "Write a file"),
        m(
            2,
            1,
            "assistant",
            "",
            status=STATUS_TOOL_CALL,
            payload=CALL_PAYLOAD,
            tool_call_id="call_1",
            tool_name="write_file",
            strategy="openai",
        ),
        m(
            3,
            1,
            "tool",
            "wrote 2 bytes\n```\nfence inside\n```",
            tool_call_id="call_1",
            tool_name="write_file",
            strategy="openai",
        ),
        m(4, 1, "assistant", "Done.\n\n### STATE\n- wrote a.txt", strategy="openai"),
        m(5, 5, "user", "Now break"),
        m(6, 5, "assistant", "half an ans", status=STATUS_INTERRUPTED),
        m(7, 7, "user", "Dropped question", status="dropped"),
        m(8, 7, "tool", "boom", status=STATUS_ERROR, tool_name="bash"),
    ]


STATES = [
    StateVersion(1, "s", 1, "- wrote a.txt", 1_700_000_004.0),
    StateVersion(2, "s", 7, "- from a dropped group", 1_700_000_008.0),
]


def test_markdown_groups_tool_blocks_and_statuses():
    md = session_markdown(rows(), "s", STATES, "plan: ship")
    assert md.startswith("# Session: s\n")
    assert "## Group 1 ·" in md and "## Group 5 ·" in md and "## Group 7 ·" in md
    # Group headings carry the worst status; rows carry their own.
    assert "## Group 5 · 2023-11-14 22:13:25 UTC · **interrupted**" in md
    assert "**dropped**" in md.split("## Group 7", 1)[1].splitlines()[0]
    assert "*interrupted*" in md and "*error*" in md and "*dropped: not sent to the model*" in md
    # The tool call's arguments and the tool result are fenced; a fence inside survives.
    assert '`write_file` (call_1)\n\n```json\n{\n  "path": "a.txt",' in md
    assert "**Tool result** · `write_file` (call_1) · #3\n\n````text\nwrote 2 bytes\n```\n" in md
    # The current STATE skips the version made by the dropped group.
    state = md.split("## STATE", 1)[1].split("## Scratchpad", 1)[0]
    assert "- wrote a.txt" in state and "dropped group" not in state
    assert "```markdown\nplan: ship\n```" in md
    assert "- Groups: 3 · messages: 8 · tokens: 24" in md


def test_markdown_of_an_empty_session():
    md = session_markdown([], "empty", None, "")
    assert "*(no STATE)*" in md and "*(empty)*" in md and "*(no messages)*" in md


def test_json_keeps_every_field_payload_state_and_scratchpad():
    data = session_json(rows(), "s", STATES, "plan: ship", exported_at=1_700_000_100.0)
    assert data["format"] == "slop-tui.session" and data["version"] == 1
    assert data["session"] == "s" and data["scratchpad"] == "plan: ship"
    assert data["exported_at"].startswith("2023-11-14T22:15:00")
    assert [v["content"] for v in data["state_versions"]] == [s.content for s in STATES]
    assert len(data["messages"]) == 8
    call = data["messages"][1]
    assert call["payload"] == CALL_PAYLOAD  # the exact stored string
    assert set(call) == {
        "id",
        "session",
        "group_id",
        "lane",
        "role",
        "content",
        "status",
        "payload",
        "tool_call_id",
        "tool_name",
        "strategy",
        "tokens",
        "created_at",
    }
    assert data["messages"][6]["status"] == "dropped"
    json.dumps(data)  # serialisable as is


def test_fenced_picks_a_longer_fence():
    assert fenced("a ````` b", "text").startswith("``````text\n")
    assert fenced("plain") == "```\nplain\n```"


@pytest.mark.parametrize(
    "name,expected",
    [
        ("a/b", "a_b"),
        ("..hidden", "hidden"),
        ("x' OR '1'='1", "x' OR '1'='1"),
        ("", "session"),
        ("c:\\d*e?", "c__d_e_"),
        ("会话", "会话"),
    ],
)
def test_safe_filename(name, expected):
    assert safe_filename(name) == expected


def test_export_module_is_headless():
    code = (
        "import sys, slop_tui.export; print(any(m.split('.')[0] == 'textual' for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture
async def ws(tmp_path):
    w = await open_workspace(tmp_path, session="my/session")
    user = await w.ledger.append_user(w.session, "hello")
    await w.ledger.append(
        w.session,
        user.group_id,
        [NewMessage(role="assistant", content="### STATE\n- greeted", strategy="openai")],
    )
    await w.ledger.add_state(w.session, user.group_id, "- greeted")
    await w.ledger.set_scratchpad(w.session, "notes")
    yield w
    await w.close()


async def test_export_writes_default_paths_and_refuses_to_overwrite(ws, tmp_path):
    result = await dispatch(ws, "/export markdown")
    assert result.ok, result.text
    path = tmp_path / ".slop" / "exports" / "my_session.md"  # a folder of its own
    assert result.data == str(path) and str(path) in result.text
    text = path.read_text(encoding="utf-8")
    assert "# Session: my/session" in text and "hello" in text and "notes" in text

    again = await dispatch(ws, "/export md")
    assert not again.ok and again.error_kind == "exists" and again.data == str(path)
    assert "already exists" in again.text and "--force" in again.text and "\n" not in again.text
    assert path.read_text(encoding="utf-8") == text

    path.write_text("old", encoding="utf-8")
    forced = await dispatch(ws, "/export markdown --force")
    assert forced.ok and path.read_text(encoding="utf-8").startswith("# Session: my/session")

    js = await dispatch(ws, "/export json")
    data = json.loads((path.parent / "my_session.json").read_text(encoding="utf-8"))
    assert js.ok and data["messages"][0]["content"] == "hello"
    assert (
        data["settings"]["window_size"] == 5 and data["state_versions"][0]["content"] == "- greeted"
    )


async def test_export_to_a_given_path(ws, tmp_path):
    (tmp_path / "out dir").mkdir()
    result = await dispatch(ws, '/export json "out dir/s.json"')
    assert result.ok and (tmp_path / "out dir" / "s.json").is_file()
    absolute = tmp_path.resolve() / "abs.md"
    assert (await dispatch(ws, f"/export markdown {absolute}")).ok and absolute.is_file()
    into_folder = await dispatch(ws, "/export json 'out dir'")  # a folder: default name inside
    assert into_folder.data == str(tmp_path / "out dir" / "my_session.json")


@pytest.mark.parametrize(
    "line,kind",
    [
        ("/export", "usage"),
        ("/export pdf", "usage"),
        ("/export json a b", "usage"),
        ("/export json --zip", "usage"),
        ("/export markdown --force", "failed"),
        ("/export json missing/dir/x.json", "failed"),
    ],
)
async def test_export_errors_are_one_line(ws, line, kind, tmp_path):
    (tmp_path / ".slop" / "exports" / "my_session.md").mkdir(parents=True)  # a folder: refused
    result = await dispatch(ws, line)
    assert not result.ok and result.error_kind == kind
    assert result.text and "\n" not in result.text
