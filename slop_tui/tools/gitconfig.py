"""The files a repository's git config makes git run or read as config.

git runs what its config names, not only what lies in `.git/`: `core.hooksPath`
(a tracked `.githooks/` folder, as Husky sets up), `core.fsmonitor`, filters'
`clean`/`smudge`/`process`, `core.sshCommand`, `diff.*.textconv`, `merge.*.driver`,
editors, pagers, `gpg.program`, `credential.helper`, and it reads the files
`include.path`/`includeIf.*.path` name as more config. When such a path lies in
the project, a command that rewrites it gets the user's next `git commit` or
`git status` to run it. `exec_paths` finds them; the sandbox binds each one
read-only (`gitdirs.GitScan.readonly`) and the file tools refuse them
(`paths.protected`).

The config is read here, not by running git (git reading a hostile config is what
this guards against): a small reader of git's format that understands sections,
`[section "sub"]`, quoting, escapes, comments and continued lines; what it cannot
read it skips.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

# Variables (section.name, or section.*.name for any subsection) whose value is a
# command git runs, or a folder of programs (hooksPath), or a config file it reads.
COMMAND_KEYS = frozenset(
    {
        "core.fsmonitor", "core.sshcommand", "core.editor", "core.pager", "core.askpass",
        "sequence.editor", "gpg.program", "gpg.*.program", "diff.external", "diff.*.textconv",
        "diff.*.command", "merge.*.driver", "filter.*.clean", "filter.*.smudge",
        "filter.*.process", "credential.helper", "credential.*.helper",
        "uploadpack.packobjectshook", "alias.*", "pager.*", "difftool.*.cmd", "mergetool.*.cmd",
        "web.browser", "browser.*.cmd", "browser.*.path", "man.*.cmd", "man.*.path",
    }
)  # fmt: skip
FOLDER_KEYS = frozenset({"core.hookspath"})
INCLUDE_KEYS = frozenset({"include.path", "includeif.*.path"})
MAX_INCLUDES = 10

_SECTION = re.compile(r'\[\s*([A-Za-z0-9.\-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')
_BOOL = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0", ""})


def read_config(path: Path) -> list[tuple[str, str]]:
    """(key, value) pairs of a git config file, in order; key as `section.name` or
    `section.*.name` (any subsection, for matching), lower-cased. [] when unreadable."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out: list[tuple[str, str]] = []
    section, sub = "", False
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.strip()
        while line.endswith("\\") and not line.endswith("\\\\"):
            line = line[:-1] + next(lines, "").rstrip()  # kept as git keeps it
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = _SECTION.match(line)
            if m is None:
                section = ""
                continue
            name = m.group(1).lower()
            if "." in name:  # [section.sub]: the old subsection syntax
                name, _, _ = name.partition(".")
                sub = True
            else:
                sub = m.group(2) is not None
            section = name
            line = line[m.end() :].strip()
            if not line or line[0] in "#;":
                continue
        if not section:
            continue
        key, eq, value = line.partition("=")
        key = key.strip().lower()
        if not re.fullmatch(r"[a-z][a-z0-9\-]*", key):
            continue
        value = _value(value) if eq else "true"
        out.append((f"{section}.*.{key}" if sub else f"{section}.{key}", value))
    return out


def _value(text: str) -> str:
    """A config value: quotes removed, escapes applied, a trailing comment dropped."""
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            quoted = not quoted
        elif c == "\\" and i + 1 < len(text):
            i += 1
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(text[i], text[i]))
        elif c in "#;" and not quoted:
            break
        elif c.isspace() and not quoted:
            out.append(" ")  # git keeps each blank outside quotes as a space
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _candidates(command: str, base: Path) -> list[Path]:
    """The paths a command line names: its program, and any word that looks like a path
    (holds a slash, or starts with a dot) — resolved against `base`."""
    words = _words(command.lstrip("!"))
    out: list[Path] = []
    for i, word in enumerate(words):
        if not word or word.startswith("-") or "=" in word and i > 0:
            continue
        if i == 0 or "/" in word or word.startswith("."):
            out.append(Path(os.path.expanduser(word)))
    return [p if p.is_absolute() else base / p for p in out]


def _matches(key: str, patterns: frozenset[str]) -> bool:
    """`section.name`, `section.*.name` (a subsection) or `section.*` (any name)."""
    return key in patterns or f"{key.split('.', 1)[0]}.*" in patterns


def exec_paths(config: Path, worktree: Path) -> list[Path]:
    """Every path `config` (and the files it includes) makes git run or read, resolved:
    commands and folders against `worktree` (where git runs them), includes against the
    including file's folder. Paths outside any project included; the caller filters."""
    out: list[Path] = []
    queue, seen = [config], set()
    while queue and len(seen) < MAX_INCLUDES:
        current = queue.pop(0)
        key_file = os.path.normpath(current)
        if key_file in seen:
            continue
        seen.add(key_file)
        for key, value in read_config(current):
            if not value:
                continue
            if _matches(key, INCLUDE_KEYS):
                target = Path(os.path.expanduser(value))
                target = target if target.is_absolute() else current.parent / target
                out.append(target)
                queue.append(target)
            elif _matches(key, FOLDER_KEYS):
                folder = Path(os.path.expanduser(value))
                out.append(folder if folder.is_absolute() else worktree / folder)
            elif _matches(key, COMMAND_KEYS):
                if key == "core.fsmonitor" and value.lower() in _BOOL:
                    continue  # the built-in daemon, no program
                if key.startswith("alias.") and not value.startswith("!"):
                    continue  # a git subcommand, not a shell command
                out += _candidates(value, worktree)
    return [_resolved(p) for p in out]


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.normpath(path))


def git_dir(entry: Path) -> Path | None:
    """The git directory a `.git` entry stands for: the folder itself, a symlink's
    target, or the folder a `gitdir: …` file names."""
    try:
        if entry.is_symlink():
            return _resolved(entry)
        if entry.is_dir():
            return entry  # under a resolved root already: no symlink to follow
        text = entry.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return _resolved(target if target.is_absolute() else entry.parent / target)


def config_files(gitdir: Path) -> list[Path]:
    """The config files of a git directory: its own, `config.worktree`, and the common
    directory's when it is a linked worktree's."""
    files = [gitdir / "config", gitdir / "config.worktree"]
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        common = ""
    if common:
        base = Path(common) if Path(common).is_absolute() else gitdir / common
        files.append(_resolved(base) / "config")
    return [f for f in files if f.is_file()]


# (git dir, worktree) -> (the config files' signatures, their exec_paths): a scan runs
# before and after every sandboxed command, and configs seldom change.
_SEEN: dict[tuple[Path, Path], tuple[tuple, list[Path]]] = {}
_SEEN_MAX = 512


def _signature(files: list[Path]) -> tuple:
    """What changes when a file is written, created or removed (a missing one counts)."""
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            out.append((str(f), None))
            continue
        out.append((str(f), st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


def repository_exec_paths(gitdir: Path, worktree: Path) -> list[Path]:
    """`exec_paths` of every config file of one repository (read again when one of its
    files, or a file one of them names, changed or appeared)."""
    files = config_files(gitdir)
    seen = _SEEN.get((gitdir, worktree))
    if seen is not None and seen[0] == _signature([*files, *seen[1]]):
        return seen[1]
    out: list[Path] = []
    for config in files:
        out += exec_paths(config, worktree)
    if len(_SEEN) >= _SEEN_MAX:
        _SEEN.clear()
    _SEEN[(gitdir, worktree)] = (_signature([*files, *out]), out)
    return out


def enclosing_git(root: Path) -> Path | None:
    """The `.git` entry of the repository `root` lies in (in it or above it), if any."""
    for folder in (root, *root.parents):
        entry = folder / ".git"
        if os.path.lexists(entry):
            return entry
    return None
