"""Handoffs (seed 004 layer 3): git capture, building, rendering, resume, secrets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slop_tui.continuity import handoff as ho
from slop_tui.continuity.handoff import (
    GitInfo,
    build_handoff,
    capture_git,
    checklist,
    current_handoff,
    decisions,
    goal_from_state,
    handoff_markdown,
    parse_porcelain,
    record_handoff,
    resume_text,
    should_checkpoint,
    task_from_scratchpad,
)
from slop_tui.ledger import Ledger
from slop_tui.records import Handoff, NewMessage

SCRATCHPAD = """# Task Scratchpad

## Current Understanding
- A Python project; entry point slop_tui/cli.py

## Current Plan
1. [x] Explore codebase structure
2. [X] Identify files to modify
3. [ ] Implement the lanes in slop_tui/ledger/
- [ ] Add tests
* [ ] Run quality gates

```markdown
- [ ] an example inside a fence is not an item
## Key Decisions
- not this one either
```

## Key Decisions
- Store lanes as a column, not a table
- Keep summaries forever

## Blockers
- None currently
"""

STATE = """### STATE
Goal: Add lanes and handoffs to slop-tui
Context: slop_tui/ledger/continuity.py
Resolved: schema v2
Key Decisions: reply lanes are named reply:<gid>
Technical Anchors: port 8080
"""

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


# -- reading STATE and the scratchpad --------------------------------------------


def test_the_task_comes_from_the_state_goal_line() -> None:
    assert goal_from_state(STATE) == "Add lanes and handoffs to slop-tui"
    assert goal_from_state("### STATE: Goal: one line") == "one line"
    assert goal_from_state("**Goal**: bold label") == "bold label"
    assert goal_from_state("Goal: [Short description of current task]") is None
    assert goal_from_state("") is None and goal_from_state(None) is None


def test_without_a_goal_the_task_comes_from_the_scratchpad() -> None:
    assert task_from_scratchpad("## Task\nMigrate the ledger\n## Plan\n- [ ] x") == (
        "Migrate the ledger"
    )
    assert task_from_scratchpad("# Port the CLI to Typer\n- [ ] step") == "Port the CLI to Typer"
    # generic headings are skipped; then the first plain line
    assert task_from_scratchpad(SCRATCHPAD) == "A Python project; entry point slop_tui/cli.py"
    assert task_from_scratchpad("- [ ] only a checklist\nfix the bug") == "fix the bug"
    assert task_from_scratchpad("") is None


def test_checklist_items_split_into_completed_and_remaining() -> None:
    done, todo = checklist(SCRATCHPAD)
    assert done == ["Explore codebase structure", "Identify files to modify"]
    assert todo == ["Implement the lanes in slop_tui/ledger/", "Add tests", "Run quality gates"]


def test_key_decisions_come_from_a_section_or_a_label() -> None:
    assert decisions(SCRATCHPAD) == [
        "Store lanes as a column, not a table",
        "Keep summaries forever",
    ]
    assert decisions(STATE) == ["reply lanes are named reply:<gid>"]
    assert decisions("Decisions:\n- use WAL\n- no ORM\nResolved: x\n- not a decision") == [
        "use WAL",
        "no ORM",
    ]
    assert decisions("# Plan\n- [ ] a") == []


def test_build_handoff_collects_everything() -> None:
    git = GitInfo(branch="feature", head="a" * 40, modified=("a.py",), untracked=("b.txt",))
    h = build_handoff("work", STATE, SCRATCHPAD, git, "compaction")
    assert (h.session, h.reason, h.id, h.task) == (
        "work",
        "compaction",
        0,
        "Add lanes and handoffs to slop-tui",
    )
    assert (h.branch, h.head_commit) == ("feature", "a" * 40)
    assert (h.modified_files, h.untracked_files) == (("a.py",), ("b.txt",))
    assert len(h.completed) == 2 and len(h.remaining) == 3
    assert h.decisions == (
        "Store lanes as a column, not a table",
        "Keep summaries forever",
        "reply lanes are named reply:<gid>",
    )
    assert h.continuation == (
        "Continue working on: Add lanes and handoffs to slop-tui\n"
        "Next step: Implement the lanes in slop_tui/ledger/"
    )


def test_an_empty_session_still_gives_a_usable_handoff() -> None:
    h = build_handoff("empty", None, "", None, "exit")
    assert h.task == ho.NO_TASK
    assert (h.branch, h.head_commit, h.modified_files, h.completed) == (None, None, (), ())
    assert h.continuation.endswith("Next step: Complete the task")
    assert "not a git repository" in handoff_markdown(h)
    assert "0/0 items completed" in resume_text(h)


# -- rendering ---------------------------------------------------------------------


def test_markdown_and_resume_text() -> None:
    git = GitInfo(branch="main", head="0123456789abcdef" * 2, modified=("a.py",), untracked=())
    h = build_handoff("work", STATE, SCRATCHPAD, git, "session_switch")
    md = handoff_markdown(h)
    assert md.startswith("# Handoff: Add lanes and handoffs to slop-tui\n")
    assert "- Git: main at 0123456789ab" in md
    assert "- Progress: 2/5 items completed" in md
    assert "- [x] Explore codebase structure" in md and "- [ ] Add tests" in md
    assert "## Key decisions\n\n- Store lanes as a column, not a table" in md
    assert "## Modified files\n\n- a.py" in md and "Untracked" not in md
    assert "> Continue working on: Add lanes and handoffs to slop-tui\n> Next step:" in md

    text = resume_text(h)
    assert "## Resuming" not in text  # the assembler adds the layer's heading
    assert resume_text(h, header=True) == "## Resuming\n" + text
    assert text.startswith("This session is resumed from a handoff written at session switch")
    assert "**Task**: Add lanes and handoffs to slop-tui" in text
    assert "**Branch**: main at 0123456789ab" in text
    assert "**Progress**: 2/5 items completed" in text
    assert "**Remaining**:\n- Implement the lanes in slop_tui/ledger/\n- Add tests" in text
    assert "**Uncommitted changes**: a.py" in text
    assert text.rstrip().endswith("Next step: Implement the lanes in slop_tui/ledger/")


def test_checkpoints_every_interval() -> None:
    assert [i for i in range(0, 16) if should_checkpoint(i)] == [5, 10, 15]
    assert [i for i in range(0, 7) if should_checkpoint(i, 3)] == [3, 6]
    assert not any(should_checkpoint(i, 0) for i in range(10))


# -- secrets -----------------------------------------------------------------------


def test_secrets_never_reach_a_handoff() -> None:
    state = f"### STATE\nGoal: deploy with key {SECRET}\nKey Decisions: token {SECRET}"
    pad = f"## Plan\n- [x] set OPENAI_API_KEY={SECRET}\n- [ ] rotate {SECRET}\n"
    git = GitInfo(branch="main", head=None, modified=(f"notes-{SECRET}.txt",), untracked=())
    h = build_handoff("work", state, pad, git, "exit")
    for value in (repr(h), handoff_markdown(h), resume_text(h)):
        assert SECRET not in value
        assert "abcdefghijklmnopqrstuvwxyz0123456789" not in value
    assert "deploy with key" in h.task  # the rest of the text stays


# -- git ---------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd), GIT_CONFIG_GLOBAL=os.devnull)
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def test_parse_porcelain() -> None:
    out = " M a.py\0M  b.py\0D  gone.py\0?? new dir/ü.txt\0!! ignored\0A  added.py\0"
    assert parse_porcelain(out) == (("a.py", "b.py", "gone.py", "added.py"), ("new dir/ü.txt",))
    assert parse_porcelain("") == ((), ())


@needs_git
def test_capture_git_in_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "trunk")
    info = capture_git(repo)  # before the first commit
    assert (info.branch, info.head, info.modified, info.untracked) == ("trunk", None, (), ())
    (repo / "a.py").write_text("print(1)\n")
    (repo / "b.py").write_text("print(2)\n")
    _git(repo, "add", "a.py", "b.py")
    _git(repo, "commit", "-q", "-m", "first")
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "a.py").write_text("print(3)\n")
    (repo / "b.py").unlink()
    (repo / "sub").mkdir()
    (repo / "sub" / "new file.txt").write_text("x")
    info = capture_git(repo)
    assert info.in_repo
    assert (info.branch, info.head) == ("trunk", head)
    assert sorted(info.modified) == ["a.py", "b.py"]
    assert info.untracked == ("sub/new file.txt",)
    # a subfolder of the repository works too
    assert capture_git(repo / "sub").head == head
    _git(repo, "checkout", "-q", "--detach")
    assert capture_git(repo).branch == "(detached HEAD)"


@needs_git
def test_the_workspaces_own_files_are_not_uncommitted_work(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".slop").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "trunk")
    for name in ("slop.db", "slop.db-wal", "slop.db-shm", "config.toml"):
        (repo / ".slop" / name).write_text("x")
    (repo / "sub" / ".slop").mkdir(parents=True)
    (repo / "sub" / ".slop" / "slop.db").write_text("x")
    (repo / "work.py").write_text("x")
    info = capture_git(repo)
    assert info.untracked == ("work.py",)
    # A handoff stored before this rule is cleaned when it is used on resume.
    stored = Handoff(
        session="s",
        reason="exit",
        task="t",
        branch="trunk",
        untracked_files=(".slop/slop.db", ".slop/slop.db-wal", "work.py"),
        modified_files=(".slop/config.toml",),
        id=3,
        created_at=5.0,
    )
    fresh = current_handoff(stored, "### STATE\nGoal: today's goal", "- [ ] next")
    assert (fresh.untracked_files, fresh.modified_files) == (("work.py",), ())
    assert (fresh.task, fresh.remaining, fresh.id, fresh.created_at) == (
        "today's goal",
        ("next",),
        3,
        5.0,
    )
    assert ".slop" not in resume_text(fresh)


@needs_git
def test_capture_git_outside_a_repository(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    assert capture_git(plain) == GitInfo()
    assert not capture_git(plain).in_repo
    assert capture_git(tmp_path / "missing") == GitInfo()


def test_capture_git_without_git(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert capture_git(tmp_path) == GitInfo()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell script")
def test_a_hanging_git_times_out(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "git"
    fake.write_text("#!/bin/sh\nsleep 5\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert capture_git(tmp_path, timeout=0.2) == GitInfo()


# -- recording and resuming ----------------------------------------------------------


@needs_git
async def test_record_handoff_and_resume_once(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "x.py").write_text("x = 1\n")
    _git(repo, "add", "x.py")
    _git(repo, "commit", "-q", "-m", "x")
    (repo / "y.py").write_text("y = 2\n")
    led = await Ledger.open(tmp_path / "slop.db", count_tokens=len)
    try:
        assert await record_handoff(led, "s", "exit", repo, skip_empty=True) is None
        assert await led.latest_handoff("s") is None
        user = await led.append_user("s", "go")
        await led.append("s", user.id, [NewMessage("assistant", "ok\n" + STATE)])
        await led.add_state("s", user.id, STATE)
        await led.set_scratchpad("s", SCRATCHPAD)

        h = await record_handoff(led, "s", "exit", repo, skip_empty=True)
        assert h is not None and h.id > 0
        assert (h.reason, h.branch, h.untracked_files) == ("exit", "main", ("y.py",))
        assert h.task == "Add lanes and handoffs to slop-tui"
        assert await led.latest_handoff("s", unconsumed_only=True) == h
        assert "**Task**: Add lanes and handoffs to slop-tui" in resume_text(h)
        await led.mark_handoff_consumed(h.id)
        assert await led.latest_handoff("s", unconsumed_only=True) is None

        no_git = await record_handoff(led, "s", "checkpoint", None)
        assert no_git is not None and no_git.branch is None
        assert await led.latest_handoff("s", unconsumed_only=True) == no_git
    finally:
        await led.close()


def test_handoff_is_headless() -> None:
    code = (
        "import sys, slop_tui.continuity.handoff, slop_tui.ledger.continuity; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'openai', 'google'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
