"""The repository's own structure as context: a symbol map and a file tree.

`files` lists the project's files, `tags` parses one file with tree-sitter,
`cache` keeps the parsed tags under `.slop/`, `map` ranks and renders the map,
`tree` renders the file tree. Headless: no Textual, no ledger.
"""

from slop_tui.repomap.map import MAP_HEADER, MapText, RepoMap, default_budget
from slop_tui.repomap.tree import TREE_ACK, TREE_HEADER, TreeText, default_tree_budget, tree_text

__all__ = [
    "MAP_HEADER",
    "TREE_ACK",
    "TREE_HEADER",
    "MapText",
    "RepoMap",
    "TreeText",
    "default_budget",
    "default_tree_budget",
    "tree_text",
]
