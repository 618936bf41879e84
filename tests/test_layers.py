"""The layer rules of docs/architecture.md, enforced: an import that crosses them fails here.

The rules are read from the table between `<!-- layers:begin -->` and
`<!-- layers:end -->` in docs/architecture.md, so the document and the check
cannot drift apart. Every import counts (module level, inside a function, lazy)
except typing-only ones under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "slop_tui"
DOC = ROOT / "docs" / "architecture.md"


def layer_rules() -> dict[str, set[str]]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- layers:begin -->", 1)[1].split("<!-- layers:end -->", 1)[0]
    rules: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        rules[cells[0].strip("`")] = set(re.findall(r"`([^`]+)`", cells[1]))
    return rules


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    """`slop_tui.context.plan` -> `context`; the package itself has no layer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _typing_only(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


def _is_module(name: str) -> bool:
    return (PACKAGE / f"{name}.py").exists() or (PACKAGE / name / "__init__.py").exists()


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported slop_tui module) for every import in the file."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _typing_only(tree)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            # `from slop_tui import workspace` imports the module `slop_tui.workspace`.
            if name == "slop_tui":
                # A submodule (`from slop_tui import workspace`), or a name of the package.
                out += [
                    (node.lineno, f"slop_tui.{a.name}" if _is_module(a.name) else name)
                    for a in node.names
                ]
            else:
                out.append((node.lineno, name))
    return [(line, name) for line, name in out if name.split(".")[0] == "slop_tui"]


def violations() -> list[str]:
    rules = layer_rules()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = layer_of(module_name(path))
        if layer is None:
            continue
        allowed = rules.get(layer)
        where = path.relative_to(ROOT)
        if allowed is None:
            found.append(f"{where}: layer '{layer}' is not in the table of docs/architecture.md")
            continue
        for line, name in imports_of(path):
            target = layer_of(name)
            if target is None or target == layer or target in allowed:
                continue
            found.append(f"{where}:{line} ({layer}) imports {name} ({target})")
    return found


def test_the_rules_table_names_every_layer() -> None:
    rules = layer_rules()
    assert "context" in rules and "ui" in rules
    for layer, allowed in rules.items():
        assert allowed <= set(rules), f"{layer} may import unknown layer(s) {allowed - set(rules)}"


def test_no_import_crosses_the_layer_rules() -> None:
    assert violations() == []


def test_the_check_sees_a_crossing(tmp_path, monkeypatch) -> None:
    # The check itself must be able to fail: an upward import in a copy of one module.
    fake = tmp_path / "slop_tui" / "context" / "upward.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from slop_tui.ui.app import SlopApp\n"
        "def f():\n    from slop_tui import workspace\n    from ..ledger import core\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = imports_of(fake)
    assert [n for _, n in found] == ["slop_tui.workspace", "slop_tui.ledger"]
    assert layer_of(found[0][1]) not in layer_rules()["context"]
