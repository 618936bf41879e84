"""`slop-tui exec` and the exit codes, run as a real subprocess."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from slop_tui.ledger.core import APPLICATION_ID


def run(args, cwd: Path, env_extra=None) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLOP_", "OPENAI_", "GEMINI_", "GOOGLE_"))
    }
    env["HOME"] = str(cwd)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "slop_tui.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_exec_runs_a_command_in_the_project_database(tmp_path):
    r = run(["exec", "/session scratchpad set hello"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / ".slop" / "slop.db").exists()
    r = run(["exec", "--session", "default_session", "/session scratchpad"], tmp_path)
    assert r.returncode == 0 and "hello" in r.stdout


def test_exit_codes(tmp_path):
    assert run(["exec", "/nope"], tmp_path).returncode == 2
    unknown = run(["exec", "/nope"], tmp_path)
    assert unknown.stderr.strip() == "slop-tui: Unknown command: /nope"
    assert run(["exec", "/context window x"], tmp_path).returncode == 2
    assert run(["exec", "/session remove ghost"], tmp_path).returncode == 1
    assert run(["exec", "not a command"], tmp_path).returncode == 2
    assert run(["--version"], tmp_path).returncode == 0


def test_db_option_and_env(tmp_path):
    r = run(["exec", "--db", "custom.db", "/session activate a"], tmp_path)
    assert r.returncode == 0 and (tmp_path / "custom.db").exists()
    r = run(["exec", "/session list"], tmp_path, {"SLOP_DB": str(tmp_path / "env.db")})
    assert r.returncode == 0 and (tmp_path / "env.db").exists()


def test_not_a_database_is_refused_and_untouched(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_bytes(b"these are my notes, not a database\n" * 10)
    before = bad.read_bytes()
    r = run(["exec", "--db", str(bad), "/session list"], tmp_path)
    assert r.returncode == 1
    assert "not a slop-tui database" in r.stderr and r.stderr.count("\n") == 1
    assert bad.read_bytes() == before


def test_newer_schema_is_refused_and_untouched(tmp_path):
    db = tmp_path / "future.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t(x)")
    con.execute(f"PRAGMA application_id={APPLICATION_ID}")
    con.execute("PRAGMA user_version=99")
    con.commit()
    con.close()
    before = db.read_bytes()
    r = run(["exec", "--db", str(db), "/session list"], tmp_path)
    assert r.returncode == 1 and "newer slop-tui" in r.stderr
    assert db.read_bytes() == before


def test_unwritable_location(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    r = run(["exec", "--db", str(blocker / "slop.db"), "/session list"], tmp_path)
    assert r.returncode == 1 and "cannot create the database folder" in r.stderr


@pytest.mark.parametrize("bad", ["[broken", "theme = 3\nwhat = 1\n"])
def test_broken_config_warns_and_uses_defaults(tmp_path, bad):
    (tmp_path / ".slop").mkdir()
    (tmp_path / ".slop" / "config.toml").write_text(bad)
    r = run(["exec", "/session list"], tmp_path)
    assert r.returncode == 0
    assert "warning" in r.stderr


def test_exec_context_rebuild_asks_the_configured_model(tmp_path, fake_llm):
    """`exec "/context rebuild"` with OpenAI configured asks that model (no turn has set
    one up in that process)."""
    from tests.fakeserver import Reply

    env = {
        "OPENAI_API_KEY": "x",
        "OPENAI_BASE_URL": fake_llm.openai_base_url,
        "OPENAI_MODEL": "fake-model",
        "GIT_CEILING_DIRECTORIES": str(tmp_path.parent),
    }
    fake_llm.enqueue(Reply(text="first answer"))
    assert run(["ask", "start"], tmp_path, env).returncode == 0
    fake_llm.enqueue(Reply(text="### STATE\nGoal: REBUILT-BY-MODEL"))
    r = run(["exec", "/context rebuild"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    assert "rebuilt by the model" in r.stdout and "REBUILT-BY-MODEL" in r.stdout
    last = fake_llm.chat_requests[-1]
    assert "write a fresh, accurate `### STATE` block" in str(last.body)
