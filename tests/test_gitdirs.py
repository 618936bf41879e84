"""The git repositories of a project, as the shell sandbox sees them (`tools/gitdirs.py`):
what counts as one, what is bound read-only, what a sweep moves (and never deletes),
commands in parallel, and slop-tui's own git while a command runs. The attacks through
the real CLI are in test_security_boundary.py."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from slop_tui.continuity.handoff import capture_git
from slop_tui.tools import gitdirs, run_tool
from tests.test_tools_support import tool_context

GIT_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def bare(folder: Path) -> Path:
    """A folder git takes as a repository: HEAD, objects/, refs/ (text files only)."""
    (folder / "objects").mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "HEAD").write_text("ref: refs/heads/main\n")
    return folder


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}


def test_what_counts_as_a_repository_and_what_is_bound_read_only(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "mod").mkdir()
    (root / "mod" / ".git").write_text("gitdir: ../.git/modules/mod\n")
    (root / ".repo").mkdir()
    bare(root / ".repo" / "x")
    (root / "link").mkdir()
    (root / "link" / ".git").symlink_to(root / ".repo" / "x")
    bare(root / "backup.git")
    bare(root / "node_modules" / "dep")  # a heavy folder: not walked
    (root / "plain").mkdir()
    (root / "plain" / "HEAD").write_text("just a file named HEAD\n")  # no objects/refs
    found = gitdirs.scan(root)
    assert found.complete
    assert set(found.markers) == {
        root / ".git",
        root / "mod" / ".git",
        root / "link" / ".git",
        root / ".repo" / "x" / "HEAD",
        root / "backup.git" / "HEAD",
    }
    assert set(found.readonly) == {
        root / ".git",
        root / "mod" / ".git",
        root / ".repo" / "x",  # the symlink's target, and the folder itself
        root / "backup.git",
    }
    # The root itself a repository: its git entries, not the root, are bound.
    other = bare(tmp_path / "q")
    (other / "config").write_text("[core]\n")
    assert set(gitdirs.scan(other).readonly) == {
        other / n for n in ("HEAD", "objects", "refs", "config")
    }


def test_a_sweep_moves_what_is_new_or_replaced_and_deletes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("old\n")
    (root / "sub").mkdir()
    (root / "sub" / ".git").symlink_to("../.git")  # not bound itself: it can be replaced
    before = gitdirs.scan(root)
    # A command: points sub/.git elsewhere, adds a nested repository with a hook,
    # makes the root a repository, and leaves a file named HEAD alone in a plain folder.
    (root / "sub" / ".git").unlink()
    (root / "sub" / ".git").symlink_to("../evil")
    (root / "deep" / "er" / ".git" / "hooks").mkdir(parents=True)
    hook = root / "deep" / "er" / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\nid\n")
    hook.chmod(0o755)
    (root / "objects").mkdir()
    (root / "refs").mkdir()
    (root / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "notes").mkdir()
    (root / "notes" / "HEAD").write_text("a note\n")
    everything = files(root)
    moved = gitdirs.sweep(before, "run-1")
    assert sorted(m.path.as_posix() for m in moved) == ["HEAD", "deep/er/.git", "sub/.git"]
    assert all(m.to is not None and m.error == "" for m in moved)
    assert (root / ".git" / "config").read_text() == "old\n"  # the trusted one stays
    assert (root / "notes" / "HEAD").exists() and (root / "objects").is_dir()
    keep = root / ".slop" / "git-quarantine" / "run-1"
    assert os.readlink(keep / "sub" / ".git") == "../evil"
    assert os.access(keep / "deep/er/.git/hooks/post-checkout", os.X_OK)
    readme = (keep / "README.txt").read_text()
    assert "mv .slop/git-quarantine/run-1/deep/er/.git deep/er/.git" in readme
    # Nothing deleted: every file is still there, at its old path or in the quarantine.
    after = files(root)
    prefix = ".slop/git-quarantine/run-1/"
    kept = {f.removeprefix(prefix) for f in after if f != prefix + "README.txt"}
    assert kept == everything
    assert gitdirs.sweep(gitdirs.scan(root), "run-2") == []  # a second sweep: nothing new


def test_after_a_walk_that_stopped_short_an_old_repository_is_not_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk that stopped at its limit did not see every repository; if the walk after
    the command reaches further (it removed folders), an old repository there is not
    taken for a new one: only a marker changed since the first walk began moves."""
    root = tmp_path / "p"
    for i in range(6):
        (root / f"d{i}").mkdir(parents=True)
    (root / "d5" / ".git").mkdir()
    monkeypatch.setattr(gitdirs, "MAX_WALK_DIRS", 4)
    short = gitdirs.scan(root)
    assert not short.complete and root / "d5" / ".git" not in short.markers
    for i in range(3):
        (root / f"d{i}").rmdir()  # the command removed folders: the next walk gets to d5
    made = (root / "d5" / ".git").lstat().st_ctime
    later = gitdirs.GitScan(root, short.markers, complete=False, taken=made + 10)
    assert gitdirs.sweep(later, "r") == [] and (root / "d5" / ".git").is_dir()
    # (after a complete walk, the same marker counts as new)
    whole = gitdirs.GitScan(root, short.markers, complete=True, taken=made + 10)
    assert [m.path.as_posix() for m in gitdirs.sweep(whole, "r")] == ["d5/.git"]


def test_commands_in_parallel_trust_only_the_baseline(tmp_path: Path) -> None:
    root = (tmp_path / "p").resolve()
    (root / ".git").mkdir(parents=True)
    first = gitdirs.begin(gitdirs.scan(root))
    assert gitdirs.shell_running(root)
    (root / "made").mkdir()
    (root / "made" / ".git").mkdir()  # the first command makes a repository ...
    seen = gitdirs.scan(root)
    second = gitdirs.begin(seen)  # ... which a command starting now sees
    assert root / "made" / ".git" in seen.readonly  # bound read-only for it
    assert root / "made" / ".git" not in second.markers  # but not trusted
    assert root / ".git" in second.markers
    moved = gitdirs.sweep(second, "second")  # whichever sweep comes first moves it
    assert [m.path.as_posix() for m in moved] == ["made/.git"]
    assert gitdirs.sweep(first, "first") == []
    gitdirs.end(root)
    assert gitdirs.shell_running(root)
    gitdirs.end(root)
    assert not gitdirs.shell_running(root)


def test_a_sweep_whose_repository_a_parallel_sweep_took_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two commands end together and the other's sweep moved the repository first: this
    sweep moves nothing and leaves no quarantine folder (one without its README)."""
    root = (tmp_path / "p").resolve()
    root.mkdir()
    before = gitdirs.scan(root)
    (root / "made" / ".git").mkdir(parents=True)

    def taken(src, dst):  # type: ignore[no-untyped-def]
        raise FileNotFoundError(errno.ENOENT, "moved by another sweep", str(src))

    monkeypatch.setattr(gitdirs.os, "rename", taken)
    assert gitdirs.sweep(before, "late") == []
    assert not (root / gitdirs.QUARANTINE / "late").exists()


async def test_slop_tui_runs_no_git_in_the_project_while_a_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository being made with a `core.fsmonitor`: `git status` (handoffs) and
    `git grep` would run it outside the sandbox. While a sandboxed command runs, grep
    searches without git and a handoff records no git state."""
    root = (tmp_path / "p").resolve()
    root.mkdir()
    (root / "a.txt").write_text("needle\n")
    subprocess.run(["git", "init", "-q", "."], cwd=root, env=GIT_ENV, check=True)
    subprocess.run(["git", "add", "a.txt"], cwd=root, env=GIT_ENV, check=True)
    subprocess.run(
        ["git", "config", "core.fsmonitor", f"touch {tmp_path}/PWNED; false"],
        cwd=root,
        env=GIT_ENV,
        check=True,
    )
    # A `git` first on PATH that notes each call, then runs the real one.
    shims, calls = tmp_path / "bin", tmp_path / "git-calls"
    shims.mkdir()
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True)
    (shims / "git").write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\nexec {real.stdout.strip()} "$@"\n'
    )
    (shims / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    (tmp_path / "ledger").mkdir()
    async with tool_context(tmp_path / "ledger") as ctx:
        ctx.project_root = root
        gitdirs.begin(gitdirs.scan(root))
        try:
            result = await run_tool("grep", {"pattern": "needle", "path": "."}, ctx)
            assert result.ok and "a.txt:1:needle" in result.text
            assert capture_git(root).branch is None
            assert not calls.exists() and not (tmp_path / "PWNED").exists()
        finally:
            gitdirs.end(root)
        # With no command running, both use git (and `git status` runs the fsmonitor).
        await run_tool("grep", {"pattern": "needle", "path": "."}, ctx)
        assert "grep" in calls.read_text()
        assert capture_git(root).branch is not None and (tmp_path / "PWNED").exists()


def test_the_note_names_hostile_paths_inertly(tmp_path: Path) -> None:
    """The command chose the names; the note the user may `cat` shows them inert."""
    root = tmp_path / "p"
    root.mkdir()
    before = gitdirs.scan(root)
    hostile = "a\x1b]52;c;cm0gLXJm\x07b 'q'"
    (root / hostile / ".git").mkdir(parents=True)
    moved = gitdirs.sweep(before, "r")
    assert [m.path.as_posix() for m in moved] == [f"{hostile}/.git"]
    readme = (root / ".slop" / "git-quarantine" / "r" / "README.txt").read_text()
    assert "\x1b" not in readme and "\x07" not in readme and "␛]52;c;cm0gLXJm␇" in readme
    assert (root / ".slop" / "git-quarantine" / "r" / hostile / ".git").is_dir()
