"""The git config reader (`tools/gitconfig.py`) against git's own reading of a config,
and the paths it finds for git to run or read."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from slop_tui.tools import gitconfig

CONFIG = r"""
# a comment
[core]
	hooksPath = .githooks ; trailing comment
	fsmonitor = "sh './tools/fs mon.sh'"
	editor = vim
[filter "lfs x"]
	clean = ./scripts/clean.sh %f
	smudge = "./scripts/smudge.sh" \
		--verbose
[alias]
	st = status
	boom = "!./bin/boom.sh --now"
[Include]
	path = ../extra.config
[includeIf "gitdir:~/work/"]
	path = /etc/elsewhere.config
[diff.old]
	textconv = ./conv.sh
"""


def test_the_reader_agrees_with_git(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    listed = subprocess.run(
        ["git", "config", "--file", str(config), "--list", "--no-includes"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.splitlines()  # fmt: skip
    theirs = []
    for line in listed:
        key, _, value = line.partition("=")
        section, _, rest = key.partition(".")
        sub, _, name = rest.rpartition(".")
        theirs.append((f"{section}.*.{name}" if sub else f"{section}.{name}", value))
    assert gitconfig.read_config(config) == theirs


def test_exec_paths_of_a_config(tmp_path: Path) -> None:
    gitdir = tmp_path / "w" / ".git"
    gitdir.mkdir(parents=True)
    (gitdir / "config").write_text(CONFIG)
    (tmp_path / "w" / "extra.config").write_text("[core]\n\tsshCommand = ./ssh.sh -v\n")
    work = (tmp_path / "w").resolve()
    found = set(gitconfig.repository_exec_paths(gitdir, work))
    assert found >= {
        work / ".githooks",
        work / "tools" / "fs mon.sh",
        work / "scripts" / "clean.sh",
        work / "scripts" / "smudge.sh",
        work / "bin" / "boom.sh",
        work / "extra.config",
        work / "ssh.sh",  # from the included file
        work / "conv.sh",
        Path("/etc/elsewhere.config"),
    }, found
    assert work / "status" not in found  # a plain alias runs git, not a program
    # The included file changes: read again.
    (tmp_path / "w" / "extra.config").write_text("[core]\n\tsshCommand = ./other.sh\n")
    assert work / "other.sh" in gitconfig.repository_exec_paths(gitdir, work)
