"""Handoffs: where work stood, for a human to review and for the model to resume.

A handoff is written at each compaction, session switch and exit, every
`CHECKPOINT_INTERVAL` tool-loop iterations, and on `/handoff write` (seed 004
layer 3). It holds the task (the STATE `Goal:` line, else the scratchpad's
first meaningful heading or line), the git branch, head commit, modified and
untracked files, the scratchpad checklist split into completed and remaining
items, the key decisions and a continuation prompt. Every text field goes
through `redact_secrets`, so no API key, token or password is stored.

On resume the newest unconsumed handoff is injected once, as the
`## Resuming` layer (`resume_text`), then marked consumed.

Headless: no Textual, no provider SDK. Git runs as `git` subprocesses with
argv lists and timeouts; outside a repository (or without git) the git
fields are None.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from slop_tui.context.redact import redact_secrets
from slop_tui.records import Handoff

if TYPE_CHECKING:
    from slop_tui.ledger import Ledger

CHECKPOINT_INTERVAL = 5  # tool-loop iterations between checkpoint handoffs (seed 004)
GIT_TIMEOUT = 5.0  # seconds per git command
MAX_FILES = 200  # per list; the rest is counted in a final "… and N more" entry
MAX_ITEM_CHARS = 300
RESUME_HEADER = "## Resuming\n"
NO_TASK = "(no task recorded)"
DEFAULT_NEXT_STEP = "Complete the task"

# -- git ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GitInfo:
    """Git context of the project root; every field None outside a repository."""

    branch: str | None = None
    head: str | None = None  # full commit id; None before the first commit
    modified: tuple[str, ...] | None = None  # changed, staged, deleted (repo-relative)
    untracked: tuple[str, ...] | None = None

    @property
    def in_repo(self) -> bool:
        return self.modified is not None


# Variables that would point git at another repository than the one at root.
_GIT_LOCATION_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
    # No index lock taken by `git status`, no prompts, stable messages.
    env.update({"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    return env


def _git(root: Path, args: list[str], timeout: float) -> str | None:
    """stdout of `git -C root ARGS`, or None when it fails, times out or git is missing."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            env=_git_env(),
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", errors="replace")


def _capped(items: list[str]) -> tuple[str, ...]:
    if len(items) <= MAX_FILES:
        return tuple(items)
    return (*items[:MAX_FILES], f"… and {len(items) - MAX_FILES} more")


PRIVATE_DIR = ".slop"  # the workspace's own folder: the ledger, its -wal/-shm, config.toml


def is_private(path: str) -> bool:
    """A path inside a `.slop/` folder: slop-tui's own files, not the user's work."""
    return PRIVATE_DIR in path.replace("\\", "/").split("/")


def parse_porcelain(out: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(modified, untracked) from `git status --porcelain=v1 -z --no-renames`, without
    slop-tui's own files (`is_private`)."""
    modified: list[str] = []
    untracked: list[str] = []
    for entry in out.split("\0"):
        if len(entry) < 4 or entry[2] != " ":
            continue
        code, path = entry[:2], entry[3:]
        if is_private(path):
            continue
        if code == "??":
            untracked.append(path)
        elif code != "!!":
            modified.append(path)
    return _capped(modified), _capped(untracked)


def capture_git(root: str | os.PathLike[str], timeout: float = GIT_TIMEOUT) -> GitInfo:
    """Branch, head commit, modified and untracked files of the repository at `root`.

    Nothing while a sandboxed shell command runs in the project: a repository it is
    creating would have git run its `core.fsmonitor` here, outside the sandbox.
    """
    from slop_tui.tools.gitdirs import shell_running

    where = Path(root)
    if shell_running(where):
        return GitInfo()
    inside = _git(where, ["rev-parse", "--is-inside-work-tree"], timeout)
    if inside is None or inside.strip() != "true":
        return GitInfo()
    branch = _git(where, ["symbolic-ref", "--short", "-q", "HEAD"], timeout)
    head = _git(where, ["rev-parse", "--verify", "-q", "HEAD^{commit}"], timeout)
    status = _git(
        where,
        ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"],
        timeout,
    )
    modified, untracked = parse_porcelain(status) if status is not None else ((), ())
    return GitInfo(
        branch=branch.strip() if branch and branch.strip() else "(detached HEAD)",
        head=head.strip() if head and head.strip() else None,
        modified=modified,
        untracked=untracked,
    )


async def capture_git_async(root: str | os.PathLike[str], timeout: float = GIT_TIMEOUT) -> GitInfo:
    """`capture_git` off the event loop."""
    return await asyncio.to_thread(capture_git, root, timeout)


# -- reading STATE and the scratchpad ------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_CHECK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[([ xX])\]\s+(.*\S)")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_GOAL = re.compile(r"(?:^|[\s*_])Goal[*_]*\s*:\s*(.*\S)", re.IGNORECASE)
_LABEL = re.compile(r"^\s*[*_]*([A-Za-z][A-Za-z ]{0,40}?)[*_]*\s*:\s*(.*)$")
_DECISIONS = re.compile(r"^(key\s+)?decisions?(\s+made)?$", re.IGNORECASE)
_TASK_HEADINGS = re.compile(r"^(task|goal|objective)$", re.IGNORECASE)
_GENERIC_HEADINGS = {
    "current understanding",
    "current plan",
    "plan",
    "key decisions",
    "decisions",
    "blockers",
    "last action",
    "notes",
    "progress",
    "todo",
    "state",
    "context",
    "compacted history",
}


def _lines(text: str) -> Iterator[str]:
    """Lines outside fenced code blocks."""
    fence: str | None = None
    for line in (text or "").splitlines():
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            continue
        if fence is not None:
            stripped = line.strip()
            if match and stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        yield line


def _clean(text: str) -> str:
    flat = " ".join(text.replace("**", "").split()).strip()
    if len(flat) > MAX_ITEM_CHARS:
        flat = flat[: MAX_ITEM_CHARS - 1] + "…"
    return flat


def _is_placeholder(text: str) -> bool:
    return text.startswith("[") and text.endswith("]")


def goal_from_state(state_text: str | None) -> str | None:
    for line in _lines(state_text or ""):
        match = _GOAL.search(line)
        if match:
            goal = _clean(match.group(1))
            if goal and not _is_placeholder(goal):
                return goal
    return None


def task_from_scratchpad(scratchpad: str | None) -> str | None:
    """A `Task`/`Goal` section's first line, else the first specific heading or line."""
    lines = list(_lines(scratchpad or ""))
    for i, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading and _TASK_HEADINGS.match(heading.group(2).strip()):
            for body in lines[i + 1 :]:
                if _HEADING.match(body):
                    break
                text = _clean(_BULLET.sub("", body))
                if text:
                    return text
    for line in lines:
        heading = _HEADING.match(line)
        if heading:
            text = _clean(heading.group(2))
            low = text.lower()
            if text and "scratchpad" not in low and low not in _GENERIC_HEADINGS:
                return text
            continue
        if _CHECK.match(line):
            continue
        text = _clean(_BULLET.sub("", line))
        if text:
            return text
    return None


def checklist(scratchpad: str | None) -> tuple[list[str], list[str]]:
    """(completed, remaining) from `- [x]` / `- [ ]` (or `1. [x]`) items."""
    done: list[str] = []
    todo: list[str] = []
    for line in _lines(scratchpad or ""):
        match = _CHECK.match(line)
        if match:
            item = _clean(match.group(2))
            (done if match.group(1) in "xX" else todo).append(item)
    return done, todo


def decisions(text: str | None) -> list[str]:
    """Items of a `Key Decisions`/`Decisions` heading section or `Key Decisions:` label."""
    out: list[str] = []
    collecting = False
    by_label = False
    for line in _lines(text or ""):
        heading = _HEADING.match(line)
        label = _LABEL.match(line) if not heading else None
        if heading:
            collecting = bool(_DECISIONS.match(heading.group(2).strip()))
            by_label = False
            continue
        if label and not _BULLET.match(line) and _DECISIONS.match(label.group(1).strip()):
            collecting, by_label = True, True
            inline = _clean(label.group(2))
            if inline and not _is_placeholder(inline):
                out.append(inline)
            continue
        if collecting and by_label and label and not _BULLET.match(line):
            collecting = False  # the next `Label:` line of a STATE block
            continue
        if collecting:
            item = _clean(_BULLET.sub("", _CHECK.sub(r"\2", line)))
            if item and item.lower() not in ("none", "none currently", "-"):
                out.append(item)
    return out


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


# -- building and rendering ----------------------------------------------------


def _redact_all(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(redact_secrets(i) for i in items)


def build_handoff(
    session: str,
    state_text: str | None,
    scratchpad: str | None,
    git: GitInfo | None,
    reason: str,
) -> Handoff:
    """A handoff (not yet stored: id 0) from STATE, the scratchpad and git."""
    git = git or GitInfo()
    task = goal_from_state(state_text) or task_from_scratchpad(scratchpad) or NO_TASK
    done, todo = checklist(scratchpad)
    decided = _unique([*decisions(scratchpad), *decisions(state_text)])
    task = redact_secrets(task)
    next_step = redact_secrets(todo[0]) if todo else DEFAULT_NEXT_STEP
    continuation = f"Continue working on: {task}\nNext step: {next_step}"
    return Handoff(
        session=session,
        reason=reason,
        task=task,
        branch=redact_secrets(git.branch) if git.branch else None,
        head_commit=git.head,
        modified_files=_redact_all(git.modified or ()),
        untracked_files=_redact_all(git.untracked or ()),
        completed=_redact_all(done),
        remaining=_redact_all(todo),
        decisions=_redact_all(decided),
        continuation=redact_secrets(continuation),
    )


def _when(h: Handoff) -> str:
    if not h.created_at:
        return "not yet stored"
    return datetime.fromtimestamp(h.created_at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _where(h: Handoff) -> str:
    if h.branch is None and h.head_commit is None:
        return "not a git repository"
    head = f" at {h.head_commit[:12]}" if h.head_commit else " (no commits yet)"
    return f"{h.branch or '(unknown branch)'}{head}"


def progress(h: Handoff) -> str:
    total = len(h.completed) + len(h.remaining)
    return f"{len(h.completed)}/{total} items completed"


def handoff_markdown(h: Handoff) -> str:
    """The handoff as a Markdown document (`/handoff show`, `/handoff export`)."""
    lines = [
        f"# Handoff: {h.task}",
        "",
        f"- Session: {h.session}",
        f"- Reason: {h.reason}",
        f"- Written: {_when(h)}" + (f" (handoff {h.id})" if h.id else ""),
        f"- Git: {_where(h)}",
        f"- Progress: {progress(h)}",
    ]

    def section(title: str, items: Iterable[str], fmt: str = "- {}") -> None:
        items = list(items)
        if items:
            lines.extend(["", f"## {title}", ""])
            lines.extend(fmt.format(i) for i in items)

    section("Completed", h.completed, "- [x] {}")
    section("Remaining", h.remaining, "- [ ] {}")
    section("Key decisions", h.decisions)
    section("Modified files", h.modified_files)
    section("Untracked files", h.untracked_files)
    lines.extend(["", "## Continue with", ""])
    lines.extend(f"> {line}" if line else ">" for line in h.continuation.splitlines())
    return "\n".join(lines) + "\n"


def resume_text(h: Handoff, *, header: bool = False) -> str:
    """The body of the `## Resuming` layer, injected once after a resume.

    The assembler adds the `## Resuming` heading itself (pass this as
    `AssemblyInputs.resume`); `header=True` includes it, for showing alone.
    """
    lines = [RESUME_HEADER.rstrip("\n")] if header else []
    lines += [
        f"This session is resumed from a handoff written at {h.reason.replace('_', ' ')} "
        f"({_when(h)}). Check it against the STATE and scratchpad; they are newer if they differ.",
        "",
        f"**Task**: {h.task}",
        f"**Branch**: {_where(h)}",
        f"**Progress**: {progress(h)}",
    ]
    if h.remaining:
        lines += ["", "**Remaining**:", *(f"- {i}" for i in h.remaining)]
    if h.decisions:
        lines += ["", "**Key decisions**:", *(f"- {i}" for i in h.decisions)]
    if h.modified_files or h.untracked_files:
        changed = [*h.modified_files, *(f"{p} (untracked)" for p in h.untracked_files)]
        shown = changed[:20]
        more = f" … and {len(changed) - 20} more" if len(changed) > 20 else ""
        lines += ["", "**Uncommitted changes**: " + ", ".join(shown) + more]
    lines += ["", f"**Continue with**: {h.continuation}"]
    return "\n".join(lines) + "\n"


def current_handoff(stored: Handoff, state_text: str | None, scratchpad: str | None) -> Handoff:
    """`stored` checked against the current ledger: its task, progress, decisions and
    continuation rebuilt from today's STATE and scratchpad (so a group undone,
    dropped or removed since it was written never comes back through it); its
    git context, reason and time kept, without slop-tui's own files."""
    git = GitInfo(
        branch=stored.branch,
        head=stored.head_commit,
        modified=tuple(p for p in stored.modified_files if not is_private(p)),
        untracked=tuple(p for p in stored.untracked_files if not is_private(p)),
    )
    fresh = build_handoff(stored.session, state_text, scratchpad, git, stored.reason)
    return replace(fresh, id=stored.id, created_at=stored.created_at, consumed=stored.consumed)


# -- recording and resuming ----------------------------------------------------


def should_checkpoint(iteration: int, interval: int = CHECKPOINT_INTERVAL) -> bool:
    """Whether tool-loop iteration `iteration` (1-based) writes a checkpoint handoff."""
    return interval > 0 and iteration > 0 and iteration % interval == 0


async def record_handoff(
    ledger: Ledger,
    session: str,
    reason: str,
    root: str | os.PathLike[str] | None,
    *,
    git: GitInfo | None = None,
    skip_empty: bool = False,
) -> Handoff | None:
    """Build a handoff from the session's STATE, scratchpad and git, and store it.

    `root` None (or `git` given) skips the git capture. With `skip_empty`, a
    session with no messages, STATE or scratchpad gets no handoff (None).
    """
    sess = await ledger.session_or_default(session)
    state = await ledger.current_state(session)
    if skip_empty and not (sess.message_count or state or sess.scratchpad.strip()):
        return None
    if git is None:
        git = await capture_git_async(root) if root is not None else GitInfo()
    h = build_handoff(session, state.content if state else None, sess.scratchpad, git, reason)
    return await ledger.add_handoff(h)


__all__ = [
    "CHECKPOINT_INTERVAL",
    "GitInfo",
    "RESUME_HEADER",
    "build_handoff",
    "capture_git",
    "capture_git_async",
    "checklist",
    "current_handoff",
    "decisions",
    "is_private",
    "goal_from_state",
    "handoff_markdown",
    "parse_porcelain",
    "record_handoff",
    "resume_text",
    "should_checkpoint",
    "task_from_scratchpad",
]
