"""File tools: read_file, write_file, apply_patch, list_directory.

All paths go through `paths.resolve_for_tool`, so nothing outside the project
root is read or written, and neither are `.git/`, `.slop/` or the ledger.
Blocking file I/O runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from slop_tui.images import EXTENSIONS as IMAGE_EXTENSIONS
from slop_tui.safe_text import escape_json, has_unsafe
from slop_tui.tools.base import KIND_READ, KIND_WRITE, Reply, ToolContext, ToolError, tool
from slop_tui.tools.paths import (
    BINARY_SNIFF_BYTES,
    SKIP_DIRS,
    binary_refusal,
    display,
    open_regular,
    read_text,
    resolve_for_tool,
    write_text,
)

MAX_READ_LINES = 2000
MAX_LIST_ENTRIES = 2000
PREVIEW_LINES = 3


# --- read_file ---------------------------------------------------------------------------


def _read_range(
    path: Path, shown: str, start: int, end: int | None, budget: int
) -> tuple[int, list[str], int]:
    """(total lines, numbered lines shown, last line shown) for a 1-based range."""
    fd = open_regular(path, shown, "read_file")
    total = 0
    out: list[str] = []
    used = 0
    last = start - 1
    full = False  # the budget ran out: stop collecting, keep counting
    with os.fdopen(fd, "rb") as fh:
        if b"\x00" in fh.read(BINARY_SNIFF_BYTES):
            raise binary_refusal(shown, "read_file")
        fh.seek(0)
        for raw in fh:  # b"\n" never occurs inside a UTF-8 sequence: per-line decode is safe
            total += 1
            try:
                text = raw.decode("utf-8").rstrip("\n").removesuffix("\r")
            except UnicodeDecodeError:
                raise binary_refusal(shown, "read_file") from None
            if full or total < start or (end is not None and total > end):
                continue
            line = f"{total}: {text}"
            if used + len(line) + 1 > budget:
                if out:
                    full = True
                    continue
                # A single line bigger than the whole budget: show its start.
                line = line[: max(0, budget - 80)] + f" ... [line cut: {len(text):,} characters]"
                full = True
            out.append(line)
            used += len(line) + 1
            last = total
    return total, out, last


@tool(
    "read_file",
    "Read a UTF-8 text file inside the project, with line numbers (`n: line`). "
    f"Reads at most {MAX_READ_LINES} lines per call; use start_line/end_line to page.",
    KIND_READ,
    {
        "path": {"type": "string", "description": "File path, relative to the project root."},
        "start_line": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
        "end_line": {"type": "integer", "minimum": 1, "description": "Last line (inclusive)."},
    },
    ["path"],
)
async def read_file(args: dict[str, Any], ctx: ToolContext) -> str | Reply:
    root = ctx.root
    path = resolve_for_tool(root, args["path"], "read_file", ctx.ledger.path)
    shown = display(root, path)
    if path.suffix.lower() in IMAGE_EXTENSIONS:
        return await asyncio.to_thread(_read_image, root, path, shown)
    start = args.get("start_line", 1)
    end = args.get("end_line")
    if end is not None and end < start:
        raise ToolError(f"read_file: end_line ({end}) is before start_line ({start})")
    limit_end = start + MAX_READ_LINES - 1
    want_end = limit_end if end is None else min(end, limit_end)
    budget = max(1000, ctx.max_output_chars - 500)
    total, lines, last = await asyncio.to_thread(_read_range, path, shown, start, want_end, budget)
    if total and start > total:
        raise ToolError(
            f"read_file: start_line {start} is past the end of '{shown}' ({total} lines)"
        )
    first = start if lines else 0
    header = f"### FILE: {shown} | TOTAL_LINES: {total} | RANGE: {first}-{last if lines else 0}"
    parts = [header, *lines]
    if lines and last < total:
        parts.append(f"... [Truncated. Use read_file with start_line={last + 1} to see more] ...")
    return "\n".join(parts)


# --- write_file / apply_patch ------------------------------------------------------------


def _write_report(shown: str, text: str, created: bool) -> str:
    size = len(text.encode("utf-8"))
    lines = text.splitlines()
    what = "created" if created else "overwritten"
    preview = lines[:PREVIEW_LINES]
    more = "\n..." if len(lines) > PREVIEW_LINES else ""
    body = "\n".join(preview) if preview else "(empty file)"
    return f"Wrote {size} bytes to {shown} ({what}, {len(lines)} lines).\nPreview:\n{body}{more}"


def _read_image(root: Path, path: Path, shown: str) -> Reply:
    """An image read by read_file: checked, stored once under `.slop/images/`, and
    returned as an image the next request shows the model."""
    from slop_tui.images import ImageError, check_image, store_image

    try:
        info = check_image(path)
        store_image(root, info)
    except ImageError as exc:
        raise ToolError(f"read_file: {exc}") from None
    except OSError as exc:
        raise ToolError(
            f"read_file: {shown}: the image cannot be stored ({exc.strerror})"
        ) from None
    body = (
        f"[image {shown}: {info.mime}, {info.width}×{info.height}, {info.size:,} bytes; "
        "it follows as an image]"
    )
    return Reply(body, images=(info,))


@tool(
    "write_file",
    "Create or overwrite a UTF-8 text file inside the project with the given content. "
    "Missing parent folders are created.",
    KIND_WRITE,
    {
        "path": {"type": "string", "description": "File path, relative to the project root."},
        "content": {"type": "string", "description": "The complete new file content."},
    },
    ["path", "content"],
)
async def write_file(args: dict[str, Any], ctx: ToolContext) -> str:
    root = ctx.root
    path = resolve_for_tool(root, args["path"], "write_file", ctx.ledger.path)
    shown = display(root, path)
    content = args["content"]
    created = await asyncio.to_thread(write_text, root, path, shown, content, "write_file")
    return _write_report(shown, content, created)


def _apply(text: str, patches: list[dict[str, str]]) -> str:
    """Apply every patch to an evolving buffer, or raise naming the one that failed."""
    count = len(patches)
    for i, patch in enumerate(patches):
        which = f"patch {i + 1} of {count} (patches[{i}])"
        find, replace = patch["find"], patch["replace"]
        if not find:
            raise ToolError(f"apply_patch: {which}: 'find' is empty")
        at = text.find(find)
        if at < 0:
            raise ToolError(
                f"apply_patch: {which}: 'find' text not found: {_quote(find)}; "
                "read the file again and copy the exact text, whitespace included"
            )
        if text.find(find, at + 1) >= 0:
            times = text.count(find)
            seen = f"{times} times" if times > 1 else "more than once (overlapping)"
            raise ToolError(
                f"apply_patch: {which}: ambiguous: 'find' text occurs {seen}: {_quote(find)}; "
                "include more surrounding lines so it is unique"
            )
        text = text[:at] + replace + text[at + len(find) :]
    return text


def _quote(text: str, width: int = 60) -> str:
    flat = text.replace("\n", "\\n")
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


@tool(
    "apply_patch",
    "Edit a text file with exact find/replace pairs, applied in order. Each 'find' must "
    "occur exactly once in the file as it stands after the previous patches. All or "
    "nothing: if any patch fails, the file is left unchanged.",
    KIND_WRITE,
    {
        "path": {"type": "string", "description": "File path, relative to the project root."},
        "patches": {
            "type": "array",
            "description": "Ordered edits.",
            "items": {
                "type": "object",
                "properties": {
                    "find": {"type": "string", "description": "Exact text to replace."},
                    "replace": {"type": "string", "description": "Replacement text."},
                },
                "required": ["find", "replace"],
            },
        },
    },
    ["path", "patches"],
)
async def apply_patch(args: dict[str, Any], ctx: ToolContext) -> str:
    root = ctx.root
    path = resolve_for_tool(root, args["path"], "apply_patch", ctx.ledger.path)
    shown = display(root, path)
    patches = args["patches"]
    if not patches:
        raise ToolError("apply_patch: 'patches' is empty; give at least one {find, replace}")
    original = await asyncio.to_thread(read_text, path, shown, "apply_patch")
    updated = _apply(original, patches)
    n = len(patches)
    if updated == original:
        return f"Applied {n} patch{'es' if n > 1 else ''} to {shown}: no change to the file."
    await asyncio.to_thread(write_text, root, path, shown, updated, "apply_patch")
    head = f"Applied {n} patch{'es' if n > 1 else ''} to {shown}."
    return head + "\n" + _write_report(shown, updated, created=False)


# --- list_directory ----------------------------------------------------------------------

QUOTED_NOTE = (
    "(A name in double quotes is a JSON string: it holds a newline or another control "
    "character, written as an escape such as \\n; pass it to other tools with the same escapes.)"
)


def one_line(name: str) -> str:
    """A file name as one line of a listing: a name with a newline (which would read
    as a second, fake entry), a tab or another control character becomes a JSON
    string (`"a\\nb.txt"`); other names are shown as they are."""
    if "\n" in name or "\t" in name or has_unsafe(name) or name.startswith('"'):
        return escape_json(json.dumps(name, ensure_ascii=False))
    return name


def _walk(root: Path, start: Path, depth: int) -> tuple[list[str], bool]:
    out: list[str] = []

    def visit(folder: Path, level: int) -> bool:
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.append(f"{display(root, folder)}/  ({exc.strerror})")
            return len(out) < MAX_LIST_ENTRIES
        for entry in entries:
            if entry.name in SKIP_DIRS:
                continue
            if len(out) >= MAX_LIST_ENTRIES:
                return False
            rel = one_line(display(root, Path(entry.path)))
            if entry.is_symlink():  # shown, never followed: no way out of the root
                try:
                    out.append(f"{rel}@ -> {one_line(os.readlink(entry.path))}")
                except OSError:
                    out.append(f"{rel}@")
            elif entry.is_dir(follow_symlinks=False):
                out.append(f"{rel}/")
                if level < depth and not visit(Path(entry.path), level + 1):
                    return False
            else:
                out.append(rel)
        return True

    complete = visit(start, 1)
    return out, not complete


@tool(
    "list_directory",
    "List files and folders inside the project (folders end with '/', symlinks with '@'). "
    f"Skips {', '.join(sorted(SKIP_DIRS))}. At most {MAX_LIST_ENTRIES} entries.",
    KIND_READ,
    {
        "path": {"type": "string", "default": ".", "description": "Folder to list."},
        "depth": {
            "type": "integer",
            "default": 1,
            "minimum": 1,
            "maximum": 20,
            "description": "1 lists the folder itself; 2 also lists its subfolders; ...",
        },
    },
)
async def list_directory(args: dict[str, Any], ctx: ToolContext) -> str:
    root = ctx.root
    path = resolve_for_tool(root, args["path"], "list_directory", ctx.ledger.path)
    shown = display(root, path)
    if not path.exists():
        raise ToolError(f"list_directory: '{shown}' does not exist")
    if not path.is_dir():
        raise ToolError(f"list_directory: '{shown}' is not a folder; use read_file")
    entries, capped = await asyncio.to_thread(_walk, root, path, args["depth"])
    header = f"### DIRECTORY: {one_line(shown)} | DEPTH: {args['depth']} | ENTRIES: {len(entries)}"
    body = [header, *(entries or ["(empty)"])]
    if any(e.startswith('"') for e in entries):
        body.append(QUOTED_NOTE)
    if capped:
        body.append(
            f"... [capped at {MAX_LIST_ENTRIES} entries; list a subfolder or use a smaller depth] ..."
        )
    return "\n".join(body)


TOOLS = [read_file, write_file, apply_patch, list_directory]
