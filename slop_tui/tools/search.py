"""grep: search file contents, with `git grep` inside a git work tree.

Arguments go to the child as an argv list (never through a shell), and the
pattern is always passed after `-e`, so a pattern such as `--help` or `-rf`
is a pattern. Both back ends use extended regular expressions (`-E`).
A path that is neither a folder nor a regular file (a FIFO, a device, a
socket) is refused before grep starts: grep named a FIFO waits for a writer
until the time limit.

While a sandboxed shell command runs in the project, grep does not run git: a
repository the command is creating (with a `core.fsmonitor` that `git grep`
would run, outside the sandbox) is only moved away once it ends
(`gitdirs.shell_running`).

Binary files give no matches. Both back ends call a file binary when it holds a
NUL byte, and GNU grep also when it is sparse (has holes), so a large sparse
log whose text is all at the start read as binary and gave "No matches". So
neither runs with `-I`: the files they report as "binary file matches" are
looked at again, and one whose data (holes and NUL bytes left out) is UTF-8
text is searched as text, with its line numbers intact (holes and NUL bytes
hold no line ends). Other binary files stay without matches.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from slop_tui.tools import gitdirs
from slop_tui.tools.base import KIND_READ, ToolContext, ToolError, tool
from slop_tui.tools.paths import (
    BINARY_SNIFF_BYTES,
    PROTECTED_DIRS,
    SKIP_DIRS,
    display,
    require_regular,
    resolve_for_tool,
)
from slop_tui.tools.procs import run_process
from slop_tui.tools.shell import shell_env

MAX_LINES = 200
MAX_LINE_CHARS = 500
GREP_TIMEOUT = 30.0
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")
# "binary file matches" files searched again as text: at most this many, and at
# most this many bytes of each one's data (holes are skipped, not read).
MAX_RESCUED_FILES = 20
MAX_RESCUED_BYTES = 64 * 1024 * 1024
# GNU grep >= 3.5 says so on stderr, older GNU grep and git grep on stdout.
_BINARY_MATCH = re.compile(
    r"^(?:grep: (?P<a>.+): binary file matches|Binary file (?P<b>.+) matches)$"
)


async def in_git_work_tree(root: Path, ctx: ToolContext) -> bool:
    try:
        outcome = await run_process(
            ["git", "rev-parse", "--is-inside-work-tree"],
            cwd=root,
            timeout=5.0,
            cancel_event=ctx.cancel_event,
            max_bytes=1000,
            env=_git_env(),
        )
    except ToolError:  # git is not installed
        return False
    return outcome.returncode == 0 and outcome.stdout.strip() == "true"


def _git_env() -> dict[str, str]:
    # A GIT_DIR inherited from a hook or a parent git would point the search elsewhere;
    # and git needs no credential to search.
    return {k: v for k, v in shell_env().items() if k not in _GIT_ENV_DROP}


def _argv(git: bool, pattern: str, rel: str, context: int) -> list[str]:
    ctx_args = [f"-C{context}"] if context else []
    if git:
        return [
            "git",
            "--no-pager",
            "grep",
            "-n",
            "-E",
            "--no-color",
            "--untracked",  # files the agent just wrote are not tracked yet
            *ctx_args,
            "-e",
            pattern,
            "--",
            rel,
            *(f":(exclude,glob)**/{d}/**" for d in PROTECTED_DIRS),
        ]
    excludes = [f"--exclude-dir={d}" for d in sorted(SKIP_DIRS)]
    return [
        "grep",
        "-r",
        "-n",
        "-E",
        "--color=never",
        *excludes,
        *ctx_args,
        "-e",
        pattern,
        "--",
        rel,
    ]


def _format(lines: list[str]) -> tuple[list[str], int]:
    # grep -r prints `./path` for the root; git grep prints `path`: show one form.
    lines = [line.removeprefix("./") for line in lines]
    shown = [
        line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " ...[line cut]"
        for line in lines[:MAX_LINES]
    ]
    return shown, len(lines)


def _binary_matches(text: str) -> tuple[list[str | int], list[str]]:
    """The lines of grep output, each "binary file matches" report replaced by its
    index in the list of their file names (which comes second)."""
    lines: list[str | int] = []
    names: list[str] = []
    for line in text.splitlines():
        m = _BINARY_MATCH.match(line)
        if m:
            lines.append(len(names))
            names.append(m.group("a") or m.group("b"))
        else:
            lines.append(line)
    return lines, names


def data_without_holes(path: Path, limit: int = MAX_RESCUED_BYTES) -> tuple[bytes, bool] | None:
    """The file's data with holes and NUL bytes left out, and whether it was cut
    (at most `limit` bytes are read); None when that data is not UTF-8 text (a real
    binary file).

    Holes are skipped with SEEK_DATA / SEEK_HOLE, so a file of gigabytes of holes
    costs what its data costs. Only NUL bytes are dropped, never a line end, so
    line numbers stay those of the file.
    """
    out = bytearray()
    read = 0
    with open(path, "rb", buffering=0) as fh:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size and read < limit:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
                end = os.lseek(fd, start, os.SEEK_HOLE)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole is left
                    break
                start, end = pos, size  # no SEEK_DATA on this file system: read on
            os.lseek(fd, start, os.SEEK_SET)
            while start < end and read < limit:
                chunk = os.read(fd, min(1 << 20, end - start, limit - read))
                if not chunk:
                    break
                start += len(chunk)
                read += len(chunk)
                out += chunk.replace(b"\0", b"")
                if len(out) >= BINARY_SNIFF_BYTES and not _texty(out[:BINARY_SNIFF_BYTES]):
                    return None
            pos = end
    if not _texty(bytes(out[:BINARY_SNIFF_BYTES])):
        return None
    return bytes(out), read >= limit and pos < size


def _texty(sample: bytes) -> bool:
    """UTF-8 text (a sequence cut at the end of the sample allowed), no control bytes
    but whitespace and ESC."""
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(sample) - 3 or exc.reason != "unexpected end of data":
            return False
    return not re.search(rb"[\x01-\x08\x0e-\x1a\x1c-\x1f\x7f]", sample)


_NUMBERED = re.compile(r"^(\d+)([:-])(.*)$", re.S)


async def _rescue(
    names: list[str], pattern: str, context: int, ctx: ToolContext
) -> tuple[list[list[str]], list[str]]:
    """For each "binary file matches" file, its matches if it is text with holes (see
    the module docstring), as `path:line:text` lines; and the files that were cut
    at MAX_RESCUED_BYTES."""
    found: list[list[str]] = [[] for _ in names]
    cut: list[str] = []
    ctx_args = [f"-C{context}"] if context else []
    for index, name in enumerate(names[:MAX_RESCUED_FILES]):
        try:
            path = resolve_for_tool(ctx.root, name, "grep", ctx.ledger.path)
            text = await asyncio.to_thread(data_without_holes, path)
        except (ToolError, OSError):
            continue
        if text is None:
            continue  # a binary file: no matches, as before
        data, was_cut = text
        rel = display(ctx.root, path)
        if was_cut:
            cut.append(rel)
        with tempfile.TemporaryDirectory(prefix="slop-grep-") as tmp:
            copy = Path(tmp) / "data"
            copy.write_bytes(data)
            argv = ["grep", "-a", "-n", "-h", "-E", "--color=never", *ctx_args]
            outcome = await run_process(
                [*argv, "-e", pattern, "--", str(copy)],
                cwd=ctx.root,
                timeout=GREP_TIMEOUT,
                cancel_event=ctx.cancel_event,
                max_bytes=min(ctx.max_output_chars, 2_000_000),
            )
        for line in outcome.stdout.splitlines():
            m = _NUMBERED.match(line)
            found[index].append(f"{rel}{m[2]}{m[1]}{m[2]}{m[3]}" if m else line)
    return found, cut


@tool(
    "grep",
    "Search file contents inside the project for an extended regular expression "
    "(grep -E syntax). Uses `git grep` in a git repository (tracked and untracked files, "
    ".gitignore respected), plain `grep -r` otherwise. Output lines are `path:line:text`; "
    f"at most {MAX_LINES} lines.",
    KIND_READ,
    {
        "pattern": {"type": "string", "description": "Extended regular expression."},
        "path": {"type": "string", "default": ".", "description": "File or folder to search."},
        "context": {
            "type": "integer",
            "default": 0,
            "minimum": 0,
            "maximum": 20,
            "description": "Lines of context around each match.",
        },
    },
    ["pattern"],
)
async def grep(args: dict[str, Any], ctx: ToolContext) -> str:
    pattern: str = args["pattern"]
    if not pattern:
        raise ToolError("grep: the pattern is empty")
    root = ctx.root
    target = resolve_for_tool(root, args["path"], "grep", ctx.ledger.path)
    rel = display(root, target)
    if not target.is_dir():
        require_regular(target, rel, "grep")  # missing, FIFO, device or socket: refused
    git = not gitdirs.shell_running(root) and await in_git_work_tree(root, ctx)
    outcome = await _search(git, pattern, rel, args["context"], ctx)
    if git and (outcome.returncode or 0) > 1:  # git refused (e.g. path outside the repo)
        git = False
        outcome = await _search(False, pattern, rel, args["context"], ctx)
    tool_name = "git grep" if git else "grep"
    code = outcome.returncode
    if outcome.timed_out:
        raise ToolError(f"grep: the search took over {GREP_TIMEOUT:g} s; narrow the path")
    marked, binaries = _binary_matches(outcome.stdout)
    problems, more = _binary_matches(outcome.stderr)
    if code not in (0, 1):
        errors = [p for p in problems if isinstance(p, str)]
        raise ToolError(f"grep: {tool_name} failed: {errors[-1] if errors else f'exit {code}'}")
    # Reports on stdout (git grep) keep their place; those on stderr come last.
    marked += [len(binaries) + i for i in range(len(more))]
    binaries += more
    rescued, cut = await _rescue(binaries, pattern, args["context"], ctx)
    lines: list[str] = []
    for item in marked:
        lines.extend(rescued[item] if isinstance(item, int) else [item])
    if not any(line.strip() for line in lines):
        return f"No matches for /{pattern}/ in {rel} ({tool_name})."
    shown, total = _format(lines)
    body = shown
    if total > MAX_LINES:
        body.append(
            f"... [TRUNCATED: {total - MAX_LINES} more lines; use a more specific pattern or path] ..."
        )
    for name in cut:
        body.append(
            f"[{name}: only its first {MAX_RESCUED_BYTES // (1024 * 1024)} MB of data were searched]"
        )
    return "\n".join(body)


async def _search(git: bool, pattern: str, rel: str, context: int, ctx: ToolContext):
    return await run_process(
        _argv(git, pattern, rel, context),
        cwd=ctx.root,
        timeout=GREP_TIMEOUT,
        cancel_event=ctx.cancel_event,
        max_bytes=min(ctx.max_output_chars, 2_000_000),
        env=_git_env(),
    )


TOOLS = [grep]
