"""slop_tui/tools/ has a clean dependency order: no module reaches itself through its
imports, counting those inside functions and under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "slop_tui" / "tools"


def _imports(path: Path, modules: set[str]) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("slop_tui.tools."):
                out.add(node.module.split(".")[2])
            elif node.module == "slop_tui.tools":
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(
                a.name.split(".")[2] for a in node.names if a.name.startswith("slop_tui.tools.")
            )
    return out & modules


def test_no_import_circle_in_tools() -> None:
    files = {p.stem: p for p in TOOLS.glob("*.py") if p.stem != "__init__"}
    graph = {m: _imports(p, set(files)) for m, p in files.items()}
    circles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                circles.append([*path[path.index(dep) :], module, dep])
            elif dep not in state:
                visit(dep, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert circles == []
    assert graph["errors"] == set() and "base" not in graph["paths"] | graph["gitdirs"]
