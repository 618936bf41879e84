"""Definitions and references of one source file, with tree-sitter.

Each language is a grammar wheel (`tree-sitter-python`, `-javascript`, ...)
that ships its compiled parser and its `tags.scm` query, so nothing is
downloaded at run time. The query's `@definition.*` captures give the
classes, functions, methods, interfaces and types with their line; the
signature is the definition's source up to its body, on one line. The
references are the file's identifiers (a regular expression over the text,
as aider backfills them with Pygments): the ranking only needs to know which
names a file uses.
"""

from __future__ import annotations

import importlib
import importlib.resources
import re
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

# Extension -> (grammar module, language function, extra tags modules).
_LANGS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    ".py": ("tree_sitter_python", "language", ()),
    ".pyi": ("tree_sitter_python", "language", ()),
    ".js": ("tree_sitter_javascript", "language", ()),
    ".jsx": ("tree_sitter_javascript", "language", ()),
    ".mjs": ("tree_sitter_javascript", "language", ()),
    ".cjs": ("tree_sitter_javascript", "language", ()),
    ".ts": ("tree_sitter_typescript", "language_typescript", ("tree_sitter_javascript",)),
    ".tsx": ("tree_sitter_typescript", "language_tsx", ("tree_sitter_javascript",)),
    ".go": ("tree_sitter_go", "language", ()),
    ".rs": ("tree_sitter_rust", "language", ()),
    ".java": ("tree_sitter_java", "language", ()),
    ".c": ("tree_sitter_c", "language", ()),
    ".h": ("tree_sitter_c", "language", ()),
    ".cc": ("tree_sitter_cpp", "language", ()),
    ".cpp": ("tree_sitter_cpp", "language", ()),
    ".cxx": ("tree_sitter_cpp", "language", ()),
    ".hpp": ("tree_sitter_cpp", "language", ()),
    ".hh": ("tree_sitter_cpp", "language", ()),
    ".rb": ("tree_sitter_ruby", "language", ()),
    ".cs": ("tree_sitter_c_sharp", "language", ()),
    ".php": ("tree_sitter_php", "language_php", ()),
}
# Definition kinds the map lists (tags.scm also tags constants, modules, macros ...).
KINDS = frozenset({"class", "function", "method", "interface", "type", "enum", "struct", "trait"})
_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{2,}")
SIGNATURE_MAX = 160
_OPEN_SPACE = re.compile(r"([(\[]) ")
_CLOSE_SPACE = re.compile(r",? \)")


class Definition(NamedTuple):
    """One definition: its name, kind, 1-based line, one-line signature, nesting depth.
    A named tuple: a warm start makes tens of thousands of them from the cache."""

    name: str
    kind: str
    line: int
    signature: str
    depth: int = 0


@dataclass(frozen=True, slots=True)
class FileTags:
    """What the map keeps of one file; `error` is set when it could not be parsed."""

    definitions: tuple[Definition, ...] = ()
    references: frozenset[str] = frozenset()
    error: str = ""


class UnsupportedLanguage(Exception):
    """No grammar for this file's extension."""


def language_of(path: str) -> str | None:
    """The grammar module for `path`, or None when no grammar covers it."""
    dot = path.rfind(".")
    if dot < 0:
        return None
    entry = _LANGS.get(path[dot:].lower())
    return entry[0] if entry else None


@cache
def _parser(ext: str):  # -> (Parser, Query)
    import tree_sitter as ts

    module, func, extra = _LANGS[ext]
    mod = importlib.import_module(module)
    language = ts.Language(getattr(mod, func)())
    query = "".join(_tags_query(m) for m in (*extra, module))
    return ts.Parser(language), ts.Query(language, query)


def _tags_query(module: str) -> str:
    mod = importlib.import_module(module)
    text = getattr(mod, "TAGS_QUERY", None)
    if text is None:
        text = (importlib.resources.files(module) / "queries" / "tags.scm").read_text("utf-8")
    return text + "\n"


def _signature(node, source: bytes) -> str:
    body = node.child_by_field_name("body")
    end = body.start_byte if body is not None else node.end_byte
    text = source[node.start_byte : end].decode("utf-8", "replace")
    if body is None:
        text = text.split("\n", 1)[0]
    text = " ".join(text.split()).rstrip(":{ ").rstrip()
    text = _OPEN_SPACE.sub(r"\1", _CLOSE_SPACE.sub(")", text))
    if len(text) > SIGNATURE_MAX:
        text = text[: SIGNATURE_MAX - 1] + "…"
    return text


def extract(path: str, source: bytes) -> FileTags:
    """The definitions and references of `source` (the text of `path`)."""
    from tree_sitter import QueryCursor

    ext = path[path.rfind(".") :].lower()
    if ext not in _LANGS:
        raise UnsupportedLanguage(path)
    parser, query = _parser(ext)
    tree = parser.parse(source)
    found: dict[tuple[int, int], tuple[str, str, object]] = {}
    for _index, caps in QueryCursor(query).matches(tree.root_node):
        names = caps.get("name")
        if not names:
            continue
        for key, nodes in caps.items():
            if not key.startswith("definition."):
                continue
            kind = key.split(".", 1)[1]
            if kind not in KINDS:
                continue
            node = nodes[0]
            name = names[0].text.decode("utf-8", "replace")
            found.setdefault((node.start_byte, node.end_byte), (name, kind, node))
    spans = sorted(found)
    defs = []
    open_spans: list[tuple[int, int, str]] = []  # enclosing definitions: (start, end, kind)
    for start, end in spans:
        name, kind, node = found[(start, end)]
        while open_spans and open_spans[-1][1] <= start:
            open_spans.pop()
        depth = len(open_spans)
        if kind == "function" and open_spans and open_spans[-1][2] in ("class", "interface"):
            kind = "method"
        defs.append(
            Definition(name, kind, node.start_point[0] + 1, _signature(node, source), depth)
        )
        open_spans.append((start, end, kind))
    error = "syntax errors" if tree.root_node.has_error else ""
    refs = frozenset(m.decode("ascii") for m in set(_IDENT.findall(source)))
    return FileTags(tuple(defs), refs, error)
