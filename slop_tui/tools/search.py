"""grep: search file contents, with `git grep` inside a git work tree.

Arguments go to the child as an argv list (never through a shell), and the
pattern is always passed after `-e`, so a pattern such as `--help` or `-rf`
is a pattern. Both back ends use extended regular expressions (`-E`).
A path that is neither a folder nor a regular file (a FIFO, a device, a
socket) is refused before grep starts: grep named a FIFO waits for a writer
until the time limit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slop_tui.tools.base import KIND_READ, ToolContext, ToolError, tool
from slop_tui.tools.files import SKIP_DIRS
from slop_tui.tools.paths import PROTECTED_DIRS, display, require_regular, resolve_for_tool
from slop_tui.tools.procs import run_process
from slop_tui.tools.shell import shell_env

MAX_LINES = 200
MAX_LINE_CHARS = 500
GREP_TIMEOUT = 30.0
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


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
            "-I",
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
        "-I",
        "-E",
        "--color=never",
        *excludes,
        *ctx_args,
        "-e",
        pattern,
        "--",
        rel,
    ]


def _format(stdout: str) -> tuple[list[str], int]:
    # grep -r prints `./path` for the root; git grep prints `path`: show one form.
    lines = [line.removeprefix("./") for line in stdout.splitlines()]
    shown = [
        line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " ...[line cut]"
        for line in lines[:MAX_LINES]
    ]
    return shown, len(lines)


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
    git = await in_git_work_tree(root, ctx)
    outcome = await _search(git, pattern, rel, args["context"], ctx)
    if git and (outcome.returncode or 0) > 1:  # git refused (e.g. path outside the repo)
        git = False
        outcome = await _search(False, pattern, rel, args["context"], ctx)
    tool_name = "git grep" if git else "grep"
    code = outcome.returncode
    if outcome.timed_out:
        raise ToolError(f"grep: the search took over {GREP_TIMEOUT:g} s; narrow the path")
    if code == 1 and not outcome.stdout.strip():
        return f"No matches for /{pattern}/ in {rel} ({tool_name})."
    if code not in (0, 1):
        message = outcome.stderr.strip().splitlines()
        raise ToolError(f"grep: {tool_name} failed: {message[-1] if message else f'exit {code}'}")
    shown, total = _format(outcome.stdout)
    body = shown
    if total > MAX_LINES:
        body.append(
            f"... [TRUNCATED: {total - MAX_LINES} more lines; use a more specific pattern or path] ..."
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
