"""The repository map: the project's definitions, ranked, fitted to a token budget.

`RepoMap(root)` lists the project's files (`files.list_files`), parses the
ones whose size or mtime changed since the last look (`tags.extract`, cached
in `.slop/repomap.db`), and keeps a graph of which file uses names another
file defines. `render(...)` ranks the files by relevance to the conversation
and renders as many as the budget holds:

- the graph: an edge from a file to each file defining a name it uses,
  weighted like aider's (√ of the uses; ×10 for a long snake_case or
  camelCase name, ×0.1 for a `_private` one or one defined in more than five
  files);
- the ranking: PageRank over that graph, personalized towards the files in
  context, files named in the recent conversation and files defining a name
  it mentions; with nothing to personalize, plain PageRank (the files most
  used by the rest come first);
- the fit: a binary search over how many of the ranked files are rendered,
  the largest count whose text is within the budget. Files in context are
  left out: the files layer carries them whole.

Headless and synchronous (the workspace runs it in a thread).
"""

from __future__ import annotations

import bisect
import functools
import math
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from slop_tui.repomap.cache import Stamp, TagCache, decode, encode
from slop_tui.repomap.files import list_files
from slop_tui.repomap.tags import (
    Definition,
    FileTags,
    UnsupportedLanguage,
    extract,
    language_of,
)

MAP_HEADER = "## Repository Structure\n"
MAP_INTRO = (
    "(Classes, functions and methods of the project's files, most relevant to the "
    "conversation first, as `line: signature`. Read a file before relying on it.)\n\n"
)
MAX_FILE_BYTES = 256 * 1024  # larger source files are not parsed
CACHE_NAME = "repomap.db"
# A file's strongest out-edges kept in the graph: enough to rank, and PageRank's cost
# stays proportional to the number of files.
MAX_OUT_EDGES = 12
MEMO_MAX = 64  # rankings and renders kept per state of the files
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_LONG_NAME = re.compile(
    r"^(?=.{8,})(?:[a-z0-9]+(?:_[a-z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]*)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)$"
)

CountTokens = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class MapText:
    """A rendered map: its text (empty: nothing to show), its tokens, what it left out."""

    text: str
    tokens: int
    files_shown: int
    files_ranked: int
    notes: tuple[str, ...] = ()


def _stamp(st: os.stat_result) -> Stamp:
    return (st.st_size, st.st_mtime_ns)


class RepoMap:
    """The map of one project (see the module docstring)."""

    def __init__(self, root: Path, cache_dir: Path | None = None) -> None:
        self.root = root
        self.cache = TagCache(cache_dir / CACHE_NAME if cache_dir is not None else None)
        self.tags: dict[str, FileTags] = {}
        self.stamps: dict[str, Stamp] = {}
        self.paths: list[str] = []  # every listed file (the file tree)
        self.notes: list[str] = []  # the last refresh's problems, one line each
        self.parsed = 0  # files parsed by the last refresh
        self._loaded = False
        self._edges: dict[str, dict[str, float]] = {}
        self._defined: dict[str, set[str]] = {}  # name -> files defining it
        self._used: dict[str, list[str]] = {}  # file -> the defined names it uses
        self._refreshed_at = 0.0
        # Held by whoever refreshes or renders: the workspace may build two plans at once
        # (the panes and a turn), each in its own thread.
        self.lock = threading.Lock()
        self._version = 0  # bumped whenever the graph may have changed
        self._memo: dict[tuple, object] = {}  # results for the current version
        self._previous: dict[tuple, object] = {}  # rankings of earlier versions

    # -- keeping up with the files ------------------------------------------------

    def refresh(self, min_interval: float = 0.0) -> list[str]:
        """Look at the files again; parse what changed. Returns the problems found,
        one line each (an unreadable file, one that cannot be parsed, ...)."""
        now = time.monotonic()
        if self._loaded and now - self._refreshed_at < min_interval:
            return self.notes
        self._refreshed_at = now
        listing = list_files(self.root)
        notes = list(listing.notes)
        self.paths = listing.paths
        stored = {} if self._loaded else self.cache.load()
        changed: list[tuple[str, Stamp, bytes]] = []
        seen: set[str] = set()
        self.parsed = 0
        root = str(self.root)
        for path in listing.paths:
            if language_of(path) is None:
                continue
            try:
                st = os.stat(os.path.join(root, path))
            except OSError as exc:
                notes.append(f"{path}: skipped ({exc.strerror})")
                continue
            if st.st_size > MAX_FILE_BYTES:
                continue
            stamp = _stamp(st)
            seen.add(path)
            if self.stamps.get(path) == stamp:
                continue
            row = stored.get(path)
            if row is not None and row[0] == stamp:
                self._set(path, decode(row[1]), stamp)
                continue
            tags, note = self._parse(path)
            if note:
                notes.append(note)
            self._set(path, tags, stamp)
            changed.append((path, stamp, encode(tags)))
        gone = [p for p in self.tags if p not in seen]
        for p in gone:
            self._unset(p)
        stale = [p for p in stored if p not in seen]
        self.cache.store(changed, gone if self._loaded else stale)
        self._loaded = True
        self.notes = notes
        return notes

    def _parse(self, path: str) -> tuple[FileTags, str]:
        try:
            with open(os.path.join(self.root, path), "rb") as fh:
                source = fh.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            return FileTags(error="unreadable"), f"{path}: unreadable ({exc.strerror}); not mapped"
        if b"\0" in source[:8192]:
            return FileTags(error="binary"), ""
        self.parsed += 1
        try:
            tags = extract(path, source)
        except UnsupportedLanguage:
            return FileTags(), ""
        except (ValueError, RuntimeError, RecursionError) as exc:
            return FileTags(error="unparsable"), f"{path}: cannot be parsed ({exc}); not mapped"
        if tags.error:
            return tags, f"{path}: {tags.error}; mapped as far as it parses"
        return tags, ""

    def _set(self, path: str, tags: FileTags, stamp: Stamp) -> None:
        old = self.tags.get(path)
        self.tags[path] = tags
        self.stamps[path] = stamp
        names_before = {d.name for d in old.definitions} if old else set()
        names_after = {d.name for d in tags.definitions}
        for n in names_before - names_after:
            holders = self._defined.get(n)
            if holders is not None:
                holders.discard(path)
                if not holders:
                    del self._defined[n]
        for n in names_after - names_before:
            self._defined.setdefault(n, set()).add(path)
        if old is not None and names_before == names_after and old.references == tags.references:
            # The same names defined and used: the graph and its ranking still hold, only
            # the rendered lines (line numbers, signatures) change.
            self._memo = {k: v for k, v in self._memo.items() if k[0] != "render"}
            return
        self._dirty(path, names_before ^ names_after)

    def _unset(self, path: str) -> None:
        old = self.tags.pop(path)
        self.stamps.pop(path, None)
        names = {d.name for d in old.definitions}
        for n in names:
            holders = self._defined.get(n)
            if holders is not None:
                holders.discard(path)
                if not holders:
                    del self._defined[n]
        self._edges.pop(path, None)
        self._used.pop(path, None)
        self._dirty(None, names)

    def _dirty(self, path: str | None, names: set[str]) -> None:
        """Forget the edges that changed: the file's own, and those of every file using
        a name whose definers changed (the weights depend on how many define it)."""
        self._version += 1
        # The last rankings stay as the starting point of the next PageRank run.
        self._previous.update({k[1:]: v for k, v in self._memo.items() if k[0] == "scores"})
        while len(self._previous) > 8:
            self._previous.pop(next(iter(self._previous)))
        self._memo.clear()
        if path is not None:
            self._edges.pop(path, None)
        if names and self._edges:
            for src in [s for s in self._edges if not self.tags[s].references.isdisjoint(names)]:
                del self._edges[src]

    # -- the graph and the ranking -------------------------------------------------

    def _out_edges(self, src: str) -> dict[str, float]:
        edges = self._edges.get(src)
        if edges is not None:
            return edges
        edges = {}
        defined = self._defined
        used = [n for n in self.tags[src].references if n in defined]
        self._used[src] = used
        for name in used:
            holders = defined[name]
            mul = _name_weight(name)
            if len(holders) > 5:
                mul *= 0.1
            for dst in holders:
                if dst != src:
                    edges[dst] = edges.get(dst, 0.0) + mul
        if len(edges) > MAX_OUT_EDGES:
            edges = dict(sorted(edges.items(), key=lambda x: (-x[1], x[0]))[:MAX_OUT_EDGES])
        self._edges[src] = edges
        return edges

    def rank(self, chat_files: Collection[str] = (), mentions: str = "") -> list[str]:
        """The mapped files, most relevant first (see the module docstring)."""
        return [p for p, _ in self.scores(chat_files, mentions)]

    def scores(
        self, chat_files: Collection[str] = (), mentions: str = ""
    ) -> list[tuple[str, float]]:
        """(file, PageRank score), most relevant first (kept until the files change)."""
        key = ("scores", frozenset(chat_files), mentions)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._scores(chat_files, mentions)
        return found  # type: ignore[return-value]

    def _scores(self, chat_files: Collection[str], mentions: str) -> list[tuple[str, float]]:
        nodes = [p for p, t in self.tags.items() if t.definitions or t.references]
        if not nodes:
            return []
        words = set(_WORD.findall(mentions)) if mentions else set()
        personal: dict[str, float] = {}
        for p in nodes:
            base = p.rsplit("/", 1)[-1]
            if p in chat_files or (
                mentions and (p in mentions or base in words or base in mentions)
            ):
                personal[p] = 1.0
        for name in words.intersection(self._defined):
            for p in self._defined[name]:
                personal[p] = personal.get(p, 0.0) + 0.5
        earlier = self._previous.get((frozenset(chat_files), mentions)) or next(
            iter(self._previous.values()), None
        )
        start = dict(earlier) if earlier else None  # type: ignore[call-overload]
        scores = pagerank({p: self._out_edges(p) for p in nodes}, personal, start=start)
        return sorted(((p, scores.get(p, 0.0)) for p in nodes), key=lambda x: (-x[1], x[0]))

    # -- rendering ---------------------------------------------------------------------

    def render(
        self,
        budget: int,
        count_tokens: CountTokens,
        chat_files: Collection[str] = (),
        mentions: str = "",
    ) -> MapText:
        """The map within `budget` tokens, `MAP_HEADER` first (empty text: nothing fits
        or nothing to map).

        Definitions are ranked, not whole files: a definition's score is its file's
        rank times how widely its name is used (1 + log of the files using it; ×0.1
        for a `_private` name), so a large file shows its most used parts and the
        budget reaches more files."""
        if budget <= 0:
            return MapText("", 0, 0, 0, tuple(self.notes))
        key = ("render", budget, count_tokens, frozenset(chat_files), mentions)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) > MEMO_MAX:
                self._memo.clear()
            found = self._memo[key] = self._render(budget, count_tokens, chat_files, mentions)
        return replace(found, notes=tuple(self.notes))  # type: ignore[arg-type]

    def _render(
        self, budget: int, count_tokens: CountTokens, chat_files: Collection[str], mentions: str
    ) -> MapText:
        ranked = self.scores(chat_files, mentions)
        users = self._users()
        n_files = len(ranked)
        scored: list[tuple[float, str, int]] = []
        # Only the best ranked files can fit: a line costs at least a few tokens.
        for path, base in ranked[: max(200, budget // 4)]:
            if path in chat_files:
                continue
            for i, d in enumerate(self.tags[path].definitions):
                w = 1.0 + math.log1p(users.get(d.name, 0))
                if d.name.startswith("_"):
                    w *= 0.1
                scored.append((base * w, path, i))
        if not scored:
            return MapText("", 0, 0, 0, tuple(self.notes))
        scored.sort(key=lambda x: (-x[0], x[1], x[2]))

        def text_for(n: int) -> tuple[str, int]:
            chosen: dict[str, list[int]] = {}
            for _score, path, i in scored[:n]:
                chosen.setdefault(path, []).append(i)
            body = "".join(file_outline(p, self.tags[p], sorted(chosen[p])) for p in sorted(chosen))
            more = n_files - len(chosen)
            tail = f"\n({more} more file(s) not listed)\n" if more else ""
            return MAP_HEADER + MAP_INTRO + body + tail, len(chosen)

        # The text's length for each count of definitions, then the largest count whose
        # estimate fits; then shrink until the exact count fits.
        length = len(MAP_HEADER) + len(MAP_INTRO) + 40
        lengths = [length]
        opened: set[str] = set()
        for _score, path, i in scored:
            length += len(_line(self.tags[path].definitions[i]))
            if path not in opened:
                opened.add(path)
                length += len(path) + 2
            lengths.append(length)
        lo = bisect.bisect_right(lengths, budget * 7 // 2) - 1
        while lo > 0:
            text, files = text_for(lo)
            tokens = count_tokens(text)
            if tokens <= budget:
                return MapText(text, tokens, files, n_files, tuple(self.notes))
            lo = lo * budget // tokens * 95 // 100 if tokens > budget else lo - 1
        return MapText("", 0, 0, n_files, tuple(self.notes))

    def _users(self) -> dict[str, int]:
        """How many files use each defined name (from the graph's edges)."""
        found = self._memo.get(("users",))
        if found is not None:
            return found  # type: ignore[return-value]
        users: dict[str, int] = {}
        self._memo[("users",)] = users
        for path in self._edges:
            for name in self._used[path]:
                users[name] = users.get(name, 0) + 1
        return users

    def close(self) -> None:
        self.cache.close()


def file_outline(path: str, tags: FileTags, which: Iterable[int] | None = None) -> str:
    """One file of the map: its path, then one line per definition (all, or the
    indices `which`), indented by nesting."""
    lines = [f"{path}:\n"]
    defs = tags.definitions
    for d in defs if which is None else (defs[i] for i in which):
        lines.append(_line(d))
    return "".join(lines)


@functools.lru_cache(maxsize=65536)
def _name_weight(name: str) -> float:
    """×10 for a long snake_case or camelCase name (specific), ×0.1 for a private one."""
    mul = 10.0 if _LONG_NAME.match(name) else 1.0
    return mul * 0.1 if name.startswith("_") else mul


def _line(d: Definition) -> str:
    return f"{'  ' * (d.depth + 1)}{d.line}: {d.signature}\n"


def pagerank(
    edges: dict[str, dict[str, float]],
    personal: dict[str, float] | None = None,
    damping: float = 0.85,
    iterations: int = 12,
    tolerance: float = 1e-4,
    start: dict[str, float] | None = None,
) -> dict[str, float]:
    """Personalized PageRank by power iteration over weighted out-edges; dangling
    nodes give their rank to the personalization (uniform without one)."""
    nodes = list(edges)
    n = len(nodes)
    if not n:
        return {}
    if personal:
        total = sum(personal.values())
        teleport = {p: w / total for p, w in personal.items() if p in edges}
    else:
        teleport = {}
    if not teleport:
        teleport = dict.fromkeys(nodes, 1.0 / n)
    norm = {}
    for src, out in edges.items():
        s = sum(out.values())
        if s:
            norm[src] = [(dst, w / s) for dst, w in out.items() if dst in edges]
    rank = dict.fromkeys(nodes, 1.0 / n)
    if start:
        # A warm start from the ranking before a small change converges in a step or two.
        known = {p: start.get(p, 1.0 / n) for p in nodes}
        total = sum(known.values())
        rank = {p: v / total for p, v in known.items()} if total > 0 else rank
    for _ in range(iterations):
        dangling = sum(rank[p] for p in nodes if p not in norm)
        new = dict.fromkeys(nodes, 0.0)
        for src, out in norm.items():
            r = damping * rank[src]
            for dst, w in out:
                new[dst] += r * w
        spread = damping * dangling + (1.0 - damping)
        for p, w in teleport.items():
            new[p] += spread * w
        delta = sum(abs(new[p] - rank[p]) for p in nodes)
        rank = new
        if delta < tolerance:
            break
    return rank


def mentioned_text(texts: Iterable[str], limit: int = 20_000) -> str:
    """The recent conversation's text the ranking reads (newest last, at most `limit`
    characters)."""
    joined = "\n".join(texts)
    return joined[-limit:]


def default_budget(max_input_tokens: int | None) -> int:
    """An eighth of the input budget, between 1,024 and 4,096 tokens (aider's rule)."""
    if not max_input_tokens:
        return 2048
    return max(1024, min(4096, max_input_tokens // 8))
