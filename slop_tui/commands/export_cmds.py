"""`/export`: write the current session to a Markdown or JSON file.

Without a PATH the file goes to a folder of its own, `.slop/exports/` in the
project, never next to the project's files (a session named `README` or
`package` would otherwise meet `README.md` or `package.json`). A PATH stays
inside the project (no `..` out of it, no symlink leading out). An existing file
is never overwritten without `--force`; the TUI asks before it adds it.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
import time
from pathlib import Path

from slop_tui.commands.base import CommandError, CommandResult, UsageError, command, ok, plural
from slop_tui.tools.base import ToolError
from slop_tui.tools.paths import resolve_inside

CAT = "Sessions"
USAGE = "/export markdown|json [PATH] [--force]"
FORMATS = {"markdown": "md", "md": "md", "json": "json"}

# Characters that are unsafe or awkward in a file name on some system.
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]')


def safe_filename(name: str) -> str:
    """A session name as a file name: path separators and control characters become `_`."""
    cleaned = _UNSAFE.sub("_", name).strip().lstrip(".")
    return cleaned[:120] or "session"


def _parse(args: str) -> tuple[str, str | None, bool]:
    try:
        tokens = shlex.split(args)
    except ValueError as exc:
        raise UsageError(f"{exc}. Usage: {USAGE}") from None
    force = "--force" in tokens
    tokens = [t for t in tokens if t != "--force"]
    unknown = [t for t in tokens if t.startswith("--")]
    if unknown:
        raise UsageError(f"unknown option {unknown[0]}. Usage: {USAGE}")
    if not tokens:
        raise UsageError(f"say which format. Usage: {USAGE}")
    fmt = tokens[0].lower()
    if fmt not in FORMATS:
        raise UsageError(f"the format is markdown or json, not '{tokens[0]}'. Usage: {USAGE}")
    if len(tokens) > 2:
        raise UsageError(f"one PATH at most (quote a path with spaces). Usage: {USAGE}")
    return FORMATS[fmt], tokens[1] if len(tokens) == 2 else None, force


EXPORTS_DIR = Path(".slop") / "exports"


def export_path(project_root: Path, session: str, ext: str, path: str | None) -> Path:
    """Where the export goes: PATH (relative to the project root; a folder gets the
    default name inside it) or <root>/.slop/exports/<session>.<ext>.

    PATH must stay inside the project once `..` and symlinks are resolved (a link the
    model planted must not carry the session's text elsewhere), as `/handoff export`."""
    default = f"{safe_filename(session)}.{ext}"
    root = Path(project_root).resolve()
    if path is None:
        return root / EXPORTS_DIR / default
    try:
        target = resolve_inside(root, path, "/export")
    except ToolError as exc:
        raise CommandError(exc.message.removeprefix("/export: ")) from None
    return target / default if target.is_dir() else target


def write_new_file(path: Path, text: str, *, force: bool) -> None:
    """Write `text` to `path`; refuse an existing file unless `force` (then replace it atomically)."""
    if path.is_dir():
        raise CommandError(f"{path} is a folder; give another PATH.")
    if not path.parent.is_dir():
        raise CommandError(f"the folder {path.parent} does not exist.")
    try:
        if not force:
            with open(path, "x", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except FileExistsError:
        raise CommandError(
            f"{path} already exists; add --force to overwrite it.", kind="exists", data=str(path)
        ) from None
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}.") from None


@command(
    "export",
    None,
    USAGE,
    "Write this session (groups, tool calls, STATE, scratchpad) to a Markdown or JSON "
    "file; PATH defaults to .slop/exports/SESSION.md or .json. An existing file is "
    "kept unless --force is given (the TUI asks).",
    CAT,
)
async def export(ws, args: str) -> CommandResult:
    from slop_tui.export import dumps_json, session_json, session_markdown

    ext, raw_path, force = _parse(args)
    path = export_path(ws.config.project_root, ws.session, ext, raw_path)
    if raw_path is None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(f"cannot create {path.parent}: {exc.strerror or exc}.") from None
    messages = await ws.ledger.session_messages(ws.session)
    versions = await ws.ledger.state_versions(ws.session)
    sess = await ws.current()
    usage = await ws.ledger.recent_usage(ws.session, limit=-1)
    attached = await ws.ledger.message_images([m.id for m in messages])
    images = [i for rows in attached.values() for i in rows]
    build = session_markdown if ext == "md" else session_json
    doc = build(
        messages,
        ws.session,
        versions,
        sess.scratchpad,
        session=sess,
        exported_at=time.time(),
        usage=usage,
        images=images,
    )
    text = doc if isinstance(doc, str) else dumps_json(doc)
    write_new_file(path, text, force=force)
    kind = "Markdown" if ext == "md" else "JSON"
    return ok(
        f"Exported session '{ws.session}' ({plural(len(messages), 'message')}) as {kind} to {path}.",
        data=str(path),
    )
