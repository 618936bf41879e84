"""Seeds 000, 001 and 003 details through the real CLI (`slop-tui ask` / `exec` as
subprocesses) and the loopback fake server: `/context show` in $EDITOR on a terminal,
the per-message token snapshot, `/session list`, backslash paths, and a start in a
subfolder of a repository that already has a ledger."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.fakeserver import FakeToolCall, Reply
from tests.test_cli import run

# An "editor" that copies the file it is given next to itself, to read back.
EDITOR = """import shutil, sys
shutil.copy(sys.argv[1], sys.argv[0] + ".seen")
"""


def env_for(fake_llm, tmp_path: Path) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "x",
        "OPENAI_BASE_URL": fake_llm.openai_base_url,
        "OPENAI_MODEL": "fake-model",
        "GIT_CEILING_DIRECTORIES": str(tmp_path.parent),
    }


def run_on_terminal(args, cwd: Path, env_extra: dict[str, str]) -> tuple[int, str]:
    """Run the CLI with stdout on a pseudo-terminal; (exit code, what it printed)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLOP_", "OPENAI_", "GEMINI_", "GOOGLE_"))
    }
    env.update({"HOME": str(cwd), **env_extra})
    main, child = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "slop_tui.cli", *args],
            cwd=cwd,
            env=env,
            stdout=child,
            stderr=subprocess.PIPE,
            timeout=60,
        )
        os.close(child)
        out = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        return proc.returncode, out.decode("utf-8", "replace")
    finally:
        os.close(main)


def test_context_show_opens_the_editor_when_taller_than_the_terminal(tmp_path, fake_llm):
    env = env_for(fake_llm, tmp_path)
    fake_llm.enqueue(Reply(text="the first answer"))
    assert run(["ask", "the first question"], tmp_path, env).returncode == 0
    sent = fake_llm.last.messages
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    seen = Path(str(editor) + ".seen")
    shown = {**env, "EDITOR": f"{sys.executable} {editor}", "LINES": "10", "COLUMNS": "80"}
    code, printed = run_on_terminal(["exec", "/context show"], tmp_path, shown)
    assert code == 0 and seen.exists()
    text = seen.read_text()
    # The editor got the whole readable context: what the model was sent, layer by layer.
    assert text.startswith("# Context for session 'default_session'")
    assert sent[0]["content"].splitlines()[0] in text
    assert "the first question" in text and "the first answer" in text
    assert "the first question" not in printed  # not printed as well
    # Taller terminal, or stdout not a terminal: printed as before, no editor.
    seen.unlink()
    code, printed = run_on_terminal(["exec", "/context show"], tmp_path, {**shown, "LINES": "9999"})
    assert code == 0 and not seen.exists() and "the first question" in printed
    piped = run(["exec", "/context show"], tmp_path, shown)
    assert piped.returncode == 0 and not seen.exists() and "the first question" in piped.stdout
    # `--editor` asks for it; a failing editor changes nothing and says so.
    assert run(["exec", "/context show --editor"], tmp_path, shown).returncode == 0
    assert seen.exists()
    bad = run(["exec", "/context show --editor"], tmp_path, {**shown, "EDITOR": "false"})
    assert bad.returncode == 1 and "the editor failed" in bad.stderr
    assert run(["exec", "/context show --nope"], tmp_path, shown).returncode == 2


def test_message_show_gives_the_snapshot_beside_the_message_size(tmp_path, fake_llm):
    env = env_for(fake_llm, tmp_path)
    fake_llm.enqueue(Reply(text="an answer", prompt_tokens=4321, completion_tokens=17))
    assert run(["ask", "a question"], tmp_path, env).returncode == 0
    r = run(["exec", "/message show 1"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    user, answer = r.stdout.split("#### ")[1:]
    # The answer: its own size, and beside it the call that produced it (seed 000).
    assert "· 4,338 tokens in context (prompt 4,321 + completion 17)" in answer
    assert "tokens in context" not in user
    # The group list gives each group's snapshot: the last call its turn made.
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("list_directory", {"path": "."})], prompt_tokens=5000),
        Reply(text="listed", prompt_tokens=5600, completion_tokens=9),
    )
    assert run(["ask", "list it"], tmp_path, env).returncode == 0
    listed = run(["exec", "/message list"], tmp_path, env)
    assert listed.returncode == 0, listed.stderr
    assert "| group | msgs | tokens | in context | status | prompt |" in listed.stdout
    rows = {line.split("|")[1].strip(): line for line in listed.stdout.splitlines()[2:]}
    assert "| 5,609 |" in rows["3"] and "| 4,338 |" in rows["1"]
    shown = run(["exec", "/message show 3"], tmp_path, env).stdout
    # Every message of one call shows that call's snapshot (the tool call and
    # its result alike); the answer shows the call that produced it.
    assert shown.count("tokens in context (prompt 5,000 + completion") == 2
    assert "· 5,609 tokens in context (prompt 5,600 + completion 9)" in shown


def test_session_list_shows_sessions_with_history_unless_all(tmp_path, fake_llm):
    env = env_for(fake_llm, tmp_path)
    fake_llm.enqueue(Reply(text="hi"))
    assert run(["ask", "--session", "busy", "hello"], tmp_path, env).returncode == 0
    assert (
        run(["exec", "--session", "empty", "/session scratchpad set x"], tmp_path).returncode == 0
    )
    listed = run(["exec", "--session", "busy", "/session list"], tmp_path)
    assert "| busy |" in listed.stdout and "| empty |" not in listed.stdout
    assert "1 session(s) without history not shown" in listed.stdout
    every = run(["exec", "--session", "busy", "/session list --all"], tmp_path)
    assert "| busy |" in every.stdout and "| empty |" in every.stdout
    assert run(["exec", "/session list --nope"], tmp_path).returncode == 2


def test_backslash_paths_are_normalised(tmp_path, fake_llm):
    env = env_for(fake_llm, tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("PORT = 8443\n")
    r = run(["exec", "/file add src\\app.py"], tmp_path, env)
    assert r.returncode == 0 and "Added src/app.py" in r.stdout, r.stdout + r.stderr
    fake_llm.enqueue(Reply(text="seen"))
    assert run(["ask", "what is in the file?"], tmp_path, env).returncode == 0
    assert "### src/app.py" in fake_llm.last.messages[0]["content"]
    assert "PORT = 8443" in fake_llm.last.messages[0]["content"]
    assert run(["exec", "/file remove src\\app.py"], tmp_path, env).returncode == 0


def test_a_subfolder_of_a_repository_uses_the_root_ledger(tmp_path, fake_llm):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "pkg" / "deep"
    sub.mkdir(parents=True)
    env = env_for(fake_llm, tmp_path)
    fake_llm.enqueue(Reply(text="root answer"))
    assert run(["ask", "asked at the root"], repo, env).returncode == 0
    fake_llm.enqueue(Reply(text="sub answer"))
    assert run(["ask", "asked in a subfolder"], sub, env).returncode == 0
    # One ledger: the subfolder's request carries the root's history.
    assert "asked at the root" in str(fake_llm.last.body)
    assert not (sub / ".slop").exists() and not (repo / "pkg" / ".slop").exists()
    # Without a ledger at the root, a subfolder is a project of its own.
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    (other / "sub").mkdir()
    fake_llm.enqueue(Reply(text="alone"))
    assert run(["ask", "asked alone"], other / "sub", env).returncode == 0
    assert (other / "sub" / ".slop" / "slop.db").exists()


def test_the_removed_unsummarized_key_is_one_warning_and_the_window_stays_strict(
    tmp_path, fake_llm
):
    env = env_for(fake_llm, tmp_path)
    (tmp_path / ".slop").mkdir(exist_ok=True)
    (tmp_path / ".slop" / "config.toml").write_text(
        '[compaction]\nunsummarized = "short"\nlane_max_messages = 100\n'
    )
    r = run(["exec", "/context window 1"], tmp_path, env)
    warned = [line for line in r.stderr.splitlines() if "unsummarized" in line]
    assert r.returncode == 0 and len(warned) == 1, r.stderr
    assert "[compaction] unsummarized is gone and ignored" in warned[0]
    for i in range(3):
        fake_llm.enqueue(Reply(text=f"answer {i}"))
        assert run(["ask", f"question {i}"], tmp_path, env).returncode == 0
    # The rest of the table is used (no summary below 100 messages), and the rows that
    # left the window are listed, not sent in a short form.
    body = json.dumps(fake_llm.last.body, ensure_ascii=False)
    assert "question 0" not in body and "answer 1" not in body and "question 2" in body
    assert "groups 1–3 (4 message(s)): not summarized yet" in body
