"""File tools: confinement to the project root, read ranges, writes and patches."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from slop_tui.tools import ToolContext, files, run_tool
from tests.test_tools_support import body, tool_context


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[ToolContext]:
    async with tool_context(tmp_path) as c:
        yield c


@pytest.fixture
def root(ctx: ToolContext) -> Path:
    return ctx.root


async def call(ctx: ToolContext, name: str, **args: object) -> tuple[bool, str]:
    result = await run_tool(name, args, ctx)
    return result.ok, body(result)


# --- confinement -------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("TOP SECRET\n")
    return secret


@pytest.mark.parametrize(
    "tool", ["read_file", "write_file", "apply_patch", "list_directory", "grep"]
)
async def test_dotdot_escape_refused(ctx: ToolContext, outside: Path, tool: str) -> None:
    args = _args(tool, "../secret/key.txt")
    ok, text = await call(ctx, tool, **args)
    assert not ok and "outside the project root" in text, text
    assert (outside / "key.txt").read_text() == "TOP SECRET\n"


async def test_absolute_paths(ctx: ToolContext, root: Path, outside: Path) -> None:
    ok, text = await call(ctx, "read_file", path=str(outside / "key.txt"))
    assert not ok and "outside the project root" in text
    ok, text = await call(ctx, "read_file", path="/etc/passwd")
    assert not ok and "outside the project root" in text
    (root / "in.txt").write_text("inside\n")
    ok, text = await call(ctx, "read_file", path=str(root / "in.txt"))
    assert ok and text.endswith("1: inside")
    ok, text = await call(ctx, "read_file", path="sub/../in.txt")  # `..` that stays inside
    assert ok, text


async def test_symlinked_file_escaping_is_refused(
    ctx: ToolContext, root: Path, outside: Path
) -> None:
    (root / "link.txt").symlink_to(outside / "key.txt")
    ok, text = await call(ctx, "read_file", path="link.txt")
    assert not ok and "a symlink leads outside" in text
    ok, text = await call(ctx, "write_file", path="link.txt", content="pwned")
    assert not ok and "outside the project root" in text
    assert (outside / "key.txt").read_text() == "TOP SECRET\n"


async def test_symlinked_directory_escaping_is_refused(
    ctx: ToolContext, root: Path, outside: Path
) -> None:
    (root / "docs").symlink_to(outside, target_is_directory=True)
    for tool in ("read_file", "write_file", "list_directory", "grep"):
        path = "docs" if tool in ("list_directory", "grep") else "docs/key.txt"
        ok, text = await call(ctx, tool, **_args(tool, path))
        assert not ok and "outside the project root" in text, (tool, text)
    ok, text = await call(ctx, "write_file", path="docs/new/evil.txt", content="x")
    assert not ok
    assert sorted(p.name for p in outside.iterdir()) == ["key.txt"]
    ok, text = await call(ctx, "list_directory")  # shown, not followed
    assert ok and "docs@ -> " in text and "key.txt" not in text


async def test_symlink_inside_root_is_followed(ctx: ToolContext, root: Path) -> None:
    (root / "real.txt").write_text("real\n")
    (root / "alias.txt").symlink_to(root / "real.txt")
    ok, text = await call(ctx, "read_file", path="alias.txt")
    assert ok and text.startswith("### FILE: real.txt |")
    ok, _ = await call(ctx, "write_file", path="alias.txt", content="changed\n")
    assert ok and (root / "real.txt").read_text() == "changed\n"
    assert (root / "alias.txt").is_symlink()


async def test_device_fifo_directory_and_binary_refused(ctx: ToolContext, root: Path) -> None:
    ok, text = await call(ctx, "read_file", path="/dev/zero")
    assert not ok and "outside the project root" in text
    (root / "zero").symlink_to("/dev/zero")
    ok, text = await call(ctx, "read_file", path="zero")
    assert not ok and "outside the project root" in text
    os.mkfifo(root / "pipe")
    ok, text = await call(ctx, "read_file", path="pipe")  # must not hang on open
    assert not ok and "is a FIFO" in text
    ok, text = await call(ctx, "write_file", path="pipe", content="x")
    assert not ok and "is a FIFO" in text
    (root / "dir").mkdir()
    ok, text = await call(ctx, "read_file", path="dir")
    assert not ok and "is a directory" in text
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    ok, text = await call(ctx, "read_file", path="img.png")  # read as an image: a broken one
    assert not ok and "img.png: not an image" in text
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    ok, text = await call(ctx, "read_file", path="latin1.txt")
    assert not ok and "binary file refused" in text
    ok, text = await call(
        ctx, "apply_patch", path="img.png", patches=[{"find": "P", "replace": "Q"}]
    )
    assert not ok and "binary file refused" in text
    ok, text = await call(ctx, "read_file", path="missing.txt")
    assert not ok and "does not exist" in text


async def test_device_inside_root_refused(ctx: ToolContext, root: Path) -> None:
    # A device node cannot be created unprivileged; a bind of /dev is not possible
    # either, so check the refusal on the resolved path directly.
    from slop_tui.tools.base import ToolError
    from slop_tui.tools.paths import require_regular

    with pytest.raises(ToolError, match="is a device file"):
        require_regular(Path("/dev/zero"), "zero", "read_file")


# --- read_file ---------------------------------------------------------------------------


async def test_read_ranges_and_paging_hint(ctx: ToolContext, root: Path) -> None:
    (root / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    ok, text = await call(ctx, "read_file", path="f.txt")
    assert ok
    lines = text.splitlines()
    assert lines[0] == "### FILE: f.txt | TOTAL_LINES: 10 | RANGE: 1-10"
    assert lines[1] == "1: line 1" and lines[-1] == "10: line 10"
    ok, text = await call(ctx, "read_file", path="f.txt", start_line=3, end_line=5)
    assert text.splitlines() == [
        "### FILE: f.txt | TOTAL_LINES: 10 | RANGE: 3-5",
        "3: line 3",
        "4: line 4",
        "5: line 5",
        "... [Truncated. Use read_file with start_line=6 to see more] ...",
    ]
    ok, text = await call(ctx, "read_file", path="f.txt", start_line=9)
    assert ok and text.splitlines()[0].endswith("RANGE: 9-10") and "Truncated" not in text
    ok, text = await call(ctx, "read_file", path="f.txt", end_line=2)
    assert ok and text.splitlines()[0].endswith("RANGE: 1-2")
    ok, text = await call(ctx, "read_file", path="f.txt", start_line=8, end_line=50)
    assert ok and text.splitlines()[0].endswith("RANGE: 8-10")
    ok, text = await call(ctx, "read_file", path="f.txt", start_line=11)
    assert not ok and "past the end" in text
    ok, text = await call(ctx, "read_file", path="f.txt", start_line=5, end_line=4)
    assert not ok and "before start_line" in text
    ok, text = await call(ctx, "read_file", path="f.txt", start_line=0)
    assert not ok and text == "Error: read_file: 'start_line' must be at least 1"
    ok, text = await call(ctx, "read_file", path="f.txt", start_line="two")
    assert not ok and text == "Error: read_file: 'start_line' must be an integer"
    ok, text = await call(ctx, "read_file", path="f.txt", start_line="2")  # models send these
    assert ok and text.splitlines()[0].endswith("RANGE: 2-10")


async def test_read_caps_lines_per_call_and_handles_crlf_and_empty(
    ctx: ToolContext, root: Path
) -> None:
    (root / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    ok, text = await call(ctx, "read_file", path="big.txt")
    lines = text.splitlines()
    assert lines[0] == "### FILE: big.txt | TOTAL_LINES: 2500 | RANGE: 1-2000"
    assert lines[-1] == "... [Truncated. Use read_file with start_line=2001 to see more] ..."
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\nno newline at end")
    ok, text = await call(ctx, "read_file", path="crlf.txt")
    assert text.splitlines()[1:] == ["1: a", "2: b", "3: no newline at end"]
    (root / "empty.txt").write_text("")
    ok, text = await call(ctx, "read_file", path="empty.txt")
    assert ok and text == "### FILE: empty.txt | TOTAL_LINES: 0 | RANGE: 0-0"


async def test_read_respects_the_output_budget(ctx: ToolContext, root: Path) -> None:
    ctx.max_output_chars = 5000
    (root / "wide.txt").write_text("".join("x" * 100 + "\n" for _ in range(500)))
    ok, text = await call(ctx, "read_file", path="wide.txt")
    assert ok and len(text) <= 5000
    hint = text.splitlines()[-1]
    assert hint.startswith("... [Truncated. Use read_file with start_line=")
    (root / "oneline.txt").write_text("y" * 50_000)
    ok, text = await call(ctx, "read_file", path="oneline.txt")
    assert ok and len(text) <= 5000 and "line cut: 50,000 characters" in text


# --- write_file / apply_patch --------------------------------------------------------------


async def test_write_file_creates_parents_and_reports(ctx: ToolContext, root: Path) -> None:
    ok, text = await call(ctx, "write_file", path="a/b/c.txt", content="one\ntwo\nthree\nfour\n")
    assert ok
    assert (root / "a/b/c.txt").read_text() == "one\ntwo\nthree\nfour\n"
    assert text.splitlines() == [
        "Wrote 19 bytes to a/b/c.txt (created, 4 lines).",
        "Preview:",
        "one",
        "two",
        "three",
        "...",
    ]
    (root / "a/b/c.txt").chmod(0o640)
    ok, text = await call(ctx, "write_file", path="a/b/c.txt", content="é")
    assert ok and "Wrote 2 bytes" in text and "(overwritten, 1 lines)" in text
    assert (root / "a/b/c.txt").stat().st_mode & 0o777 == 0o640  # mode kept
    assert [p.name for p in (root / "a/b").iterdir()] == ["c.txt"]  # no temp file left
    ok, text = await call(ctx, "write_file", path="a/b/c.txt/d.txt", content="x")
    assert not ok
    ok, text = await call(ctx, "write_file", path="a", content="x")
    assert not ok and "is a directory" in text
    ok, text = await call(ctx, "write_file", path="x.txt")
    assert not ok and text == "Error: write_file: 'content' is required"


async def test_apply_patch_success_in_order(ctx: ToolContext, root: Path) -> None:
    (root / "p.py").write_text("def f():\n    return 1\n\nvalue = f()\n")
    ok, text = await call(
        ctx,
        "apply_patch",
        path="p.py",
        patches=[
            {"find": "return 1", "replace": "return 2"},
            {"find": "return 2\n", "replace": "return 2  # changed\n"},  # sees patch 1's result
            {"find": "value = ", "replace": "result = "},
        ],
    )
    assert ok, text
    assert text.startswith("Applied 3 patches to p.py.")
    assert (root / "p.py").read_text() == "def f():\n    return 2  # changed\n\nresult = f()\n"
    (root / "w.txt").write_text("    indented\n")  # an exact substring, whitespace and all
    ok, text = await call(
        ctx, "apply_patch", path="w.txt", patches=[{"find": "indented", "replace": "  fixed"}]
    )
    assert ok and (root / "w.txt").read_text() == "      fixed\n"


async def test_apply_patch_not_found_ambiguous_empty_all_or_nothing(
    ctx: ToolContext, root: Path
) -> None:
    original = "alpha\nbeta\nbeta\ngamma\n"
    (root / "p.txt").write_text(original)
    before = (root / "p.txt").stat().st_mtime_ns

    ok, text = await call(
        ctx, "apply_patch", path="p.txt", patches=[{"find": "delta", "replace": "x"}]
    )
    assert not ok and "patch 1 of 1" in text and "not found" in text

    ok, text = await call(
        ctx,
        "apply_patch",
        path="p.txt",
        patches=[{"find": "alpha", "replace": "ALPHA"}, {"find": "beta", "replace": "B"}],
    )
    assert not ok and "patch 2 of 2 (patches[1])" in text and "ambiguous" in text
    assert "2 times" in text

    ok, text = await call(
        ctx,
        "apply_patch",
        path="p.txt",
        patches=[{"find": "alpha", "replace": "A"}, {"find": "", "replace": "x"}],
    )
    assert not ok and "patch 2 of 2" in text and "'find' is empty" in text

    ok, text = await call(
        ctx,
        "apply_patch",
        path="p.txt",
        patches=[{"find": "gamma", "replace": "G"}, {"find": "gamma", "replace": "again"}],
    )
    assert not ok and "patch 2 of 2" in text and "not found" in text  # evolving buffer

    ok, text = await call(ctx, "apply_patch", path="p.txt", patches=[{"find": "alpha"}])
    assert not ok and text == "Error: apply_patch: 'patches[0].replace' is required"
    ok, text = await call(ctx, "apply_patch", path="p.txt", patches=[])
    assert not ok and "empty" in text

    assert (root / "p.txt").read_text() == original
    assert (root / "p.txt").stat().st_mtime_ns == before


async def test_apply_patch_overlapping_is_ambiguous(ctx: ToolContext, root: Path) -> None:
    (root / "o.txt").write_text("aaa")
    ok, text = await call(
        ctx, "apply_patch", path="o.txt", patches=[{"find": "aa", "replace": "b"}]
    )
    assert not ok and "ambiguous" in text and "overlapping" in text


# --- list_directory ----------------------------------------------------------------------


async def test_list_directory(ctx: ToolContext, root: Path) -> None:
    for d in ("src/pkg", ".git/objects", ".venv/lib", "node_modules/x", "src/__pycache__"):
        (root / d).mkdir(parents=True)
    (root / "src/pkg/mod.py").write_text("")
    (root / "src/main.py").write_text("")
    (root / "README.md").write_text("")
    ok, text = await call(ctx, "list_directory")
    assert ok
    assert text.splitlines() == ["### DIRECTORY: . | DEPTH: 1 | ENTRIES: 2", "README.md", "src/"]
    ok, text = await call(ctx, "list_directory", path="src", depth=2)
    assert text.splitlines()[1:] == ["src/main.py", "src/pkg/", "src/pkg/mod.py"]
    ok, text = await call(ctx, "list_directory", path="README.md")
    assert not ok and "not a folder" in text
    ok, text = await call(ctx, "list_directory", depth=0)
    assert not ok and "'depth' must be at least 1" in text


async def test_list_directory_cap(
    ctx: ToolContext, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "MAX_LIST_ENTRIES", 30)
    many = root / "many"
    many.mkdir()
    for i in range(45):
        (many / f"f{i:04d}").touch()
    ok, text = await call(ctx, "list_directory", path="many")
    lines = text.splitlines()
    assert ok and len(lines) == 32 and "capped at 30 entries" in lines[-1]
    assert lines[0] == "### DIRECTORY: many | DEPTH: 1 | ENTRIES: 30"


def _args(tool: str, path: str) -> dict[str, object]:
    return {
        "read_file": {"path": path},
        "write_file": {"path": path, "content": "pwned"},
        "apply_patch": {"path": path, "patches": [{"find": "TOP", "replace": "pwned"}]},
        "list_directory": {"path": path},
        "grep": {"pattern": "SECRET", "path": path},
    }[tool]
