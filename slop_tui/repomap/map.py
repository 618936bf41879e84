"""The repository map: the project's definitions, ranked, fitted to a token budget.

`RepoMap(root)` lists the project's files (`files.list_files`), parses the
ones whose size or mtime changed since the last look (`tags.extract`), and
keeps a graph of which file uses names another file defines. `render(...)`
ranks the files by relevance to the conversation and renders as many as the
budget holds:

- the graph: an edge from a file to each file defining a name it uses,
  weighted like aider's (√ of the uses; ×10 for a long snake_case or
  camelCase name, ×0.1 for a `_private` one or one defined in more than five
  files);
- the ranking: PageRank over that graph (numpy for a large one), personalized
  towards the files in context, files named in the recent conversation and
  files defining a name it mentions; with nothing to personalize, plain PageRank (the files
  most used by the rest come first);
- the fit: a binary search over how many of the ranked definitions are
  rendered, the largest count whose text is within the budget. Files in
  context are left out: the files layer carries them whole.

What a start needs is kept in `.slop/repomap.db` (`cache`): each file's tags
and stamp, who defines and who uses each name, the listing (with its folders'
times), the graph, and the last renders. A warm start reads the listing, the
stamps (one array) and the graph, checks the folders' times, stats every
source file into one array compared with the stamps at once, and reads the
definitions of the files it renders, or none when a stored render holds. A
changed file moves only its own edges and those of the files using a name it
stopped or started defining; the ranking is run again only when an edge
changed, the graph is written back only then, and a render is made again
only when the change touches what it depends on (`_Keeps`). The write is
committed after the map is returned (`TagCache.commit_later`). The graph and
the ranking are pure functions of the files, so the map after any series of
changes is the map a cold build of the same files gives.

Headless and synchronous (the workspace runs it in a thread; the store's
commits run in a thread of their own).
"""

from __future__ import annotations

import bisect
import functools
import math
import os
import re
import sqlite3
import threading
import time
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from slop_tui.repomap.cache import Stamp, TagCache
from slop_tui.repomap.files import (
    SKIP_DIRS,
    Listing,
    list_files,
    stamp_array,
    stat_files,
    unchanged,
)
from slop_tui.repomap.tags import (
    Definition,
    FileTags,
    UnsupportedLanguage,
    extract,
    language_of,
)
from slop_tui.repomap.watch import Watcher, WatchUnavailable

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
SNAPSHOT_VERSION = 1
STAMPS_VERSION = 4  # the stamps row: one array in the order of the listing's sources
RENDERS_VERSION = 1
RENDERS_KEPT = 4  # renders stored for the next start (the most recent ones)
RENDER_VARIANTS = 4  # renders kept for one budget and context, one per count that differs
RENDERS_MAX = 16  # budgets and contexts whose renders are kept (the conversation moves on)
# The store's state rows: a count of the writes (another process may write the same
# store), the listing, the graph, the files' stamps, the last renders.
STATE_WRITES, STATE_LISTING, STATE_GRAPH, STATE_STAMPS, STATE_RENDERS = 0, 1, 2, 3, 4
_UNMAPPED = (-1, -1)  # a source file's place in the stamp arrays when it is not mapped
NUMPY_NODES = 1500  # graphs with more files are ranked and updated with numpy
# More notified paths than this in one look and every file is looked at instead: the
# system's queue of notifications may have overflowed in such a burst (a checkout, a
# build), and watchfiles drops the overflow signal (an event without a path).
NOTIFY_BURST = 1000
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_PATHLIKE = re.compile(r"[\w./-]+")
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


@dataclass(slots=True)
class _Rendered:
    """A render and what it depends on besides the ranking: the texts it counted with
    their counts (another count that agrees on each of them renders the same map), the
    files whose definitions it ranked and those definitions' names (whose use counts
    weigh them)."""

    out: MapText
    tried: tuple[tuple[str, int], ...]
    top: frozenset[str]
    names: frozenset[str]
    counter: CountTokens | None = None  # the count it was last checked against

    def holds(self, count_tokens: CountTokens) -> bool:
        # `==`: a bound method made again at each call (`counter.base_count`) is equal.
        if self.counter != count_tokens:
            if any(count_tokens(text) != tokens for text, tokens in self.tried):
                return False
            self.counter = count_tokens
        return True

    def state(self, key: tuple) -> tuple:
        _kind, budget, chat_files, mentions = key
        out = self.out
        return (
            budget,
            sorted(chat_files),
            mentions,
            (out.text, out.tokens, out.files_shown, out.files_ranked),
            list(self.tried),
            sorted(self.top),
            sorted(self.names),
        )

    @classmethod
    def from_state(cls, row: tuple) -> tuple[tuple, _Rendered]:
        budget, chat_files, mentions, (text, tokens, shown, ranked), tried, top, names = row
        key = ("render", budget, frozenset(chat_files), mentions)
        out = MapText(text, tokens, shown, ranked)
        tried_pairs = tuple((t, n) for t, n in tried)
        return key, cls(out, tried_pairs, frozenset(top), frozenset(names))


class _Sorted(Collection[str]):
    """A sorted list of paths asked for membership and position by bisection (no set or
    dict built over 10,000 paths for a look at one file)."""

    def __init__(self, items: list[str]) -> None:
        self.items = items

    def position(self, item: str) -> int | None:
        i = bisect.bisect_left(self.items, item)
        return i if i < len(self.items) and self.items[i] == item else None

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and self.position(item) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


class _Keeps:
    """Whether a ranking or a render (a memo entry) still holds after `changed` files,
    `before` holding their earlier tags, when the graph did not change."""

    def __init__(
        self, changed: Mapping[str, tuple[Stamp, FileTags] | None], before: Mapping[str, FileTags]
    ) -> None:
        self.touched = frozenset(changed)
        self.recounted: set[str] = set()  # names whose use count changed
        self.renamed: set[str] = set()  # names defined in other files than before
        empty = FileTags()
        for path, row in changed.items():
            old, new = before.get(path, empty), row[1] if row is not None else empty
            self.recounted |= old.references ^ new.references
            self.renamed |= {d.name for d in old.definitions} ^ {d.name for d in new.definitions}

    def __call__(self, key: tuple, value: object) -> bool:
        mentions = key[-1]
        if mentions and self.renamed and not self.renamed.isdisjoint(_WORD.findall(mentions)):
            return False
        if isinstance(value, _Rendered):
            return self.touched.isdisjoint(value.top) and self.recounted.isdisjoint(value.names)
        return True


class _Tags(Mapping[str, FileTags]):
    """The mapped files' tags, read from the store on first use (a warm start reads only
    those it renders)."""

    def __init__(self, owner: RepoMap) -> None:
        self._owner = owner

    def __getitem__(self, path: str) -> FileTags:
        if path not in self._owner.stamps:
            raise KeyError(path)
        return self._owner._full_tags([path])[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner.stamps)

    def __len__(self) -> int:
        return len(self._owner.stamps)

    def __contains__(self, path: object) -> bool:
        return path in self._owner.stamps


class RepoMap:
    """The map of one project (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        cache_dir: Path | None = None,
        watch: bool = False,
        keeper: bool = False,
    ) -> None:
        self.root = root
        self.cache = TagCache(cache_dir / CACHE_NAME if cache_dir is not None else None)
        self.tags: Mapping[str, FileTags] = _Tags(self)
        # Every mapped file's (size, mtime_ns): a dict, or, as read from the store, one
        # array in the order of `_sources`, each file's size then its mtime (the dict is
        # made from it on first use).
        self._stamps: dict[str, Stamp] | None = {}
        self._stamp_array: array | None = None
        self.paths: list[str] = []  # every listed file (the file tree)
        self.notes: list[str] = []  # the last refresh's problems, one line each
        self.parsed = 0  # files parsed by the last refresh
        self.looked = 0  # files whose stamp the last refresh read
        # Of the last refresh: milliseconds spent listing and stat'ing the files (not
        # parsing them), the cost a refresh has even when nothing changed.
        self.scan_ms = 0.0
        self._listing: Listing | None = None
        # The listing's files that have a grammar.
        self._sources: list[str] = []
        self._loaded = False
        self._writes = 0  # the store's write count this map's state is from
        self._graph = _Graph.empty()
        self._defs: dict[str, FileTags] = {}  # definitions read so far (no references)
        self._lines: dict[str, tuple[str, ...]] = {}  # each file's rendered lines
        self._uses: dict[str, int] = {}  # how many files use a name, read so far
        self._refreshed_at = 0.0
        # Held by whoever refreshes or renders: the workspace may build two plans at once
        # (the panes and a turn), each in its own thread.
        self.lock = _Guard(self._close_now)
        self.closed = False
        self._memo: dict[tuple, object] = {}  # rankings and renders of the current graph
        # Change notifications (`watch`): only with a store on disk, whose folder holds
        # the watcher's own sync files. Trusted once every file was looked at after the
        # watcher began; a failure to start one turns watching off for this map.
        self._watch = watch and cache_dir is not None
        self._sync_dir = cache_dir
        self._watcher: Watcher | None = None
        self._trusted = False
        self.watch_error = ""
        # The store's write count the stored stamps row is of (-1: none): the row is
        # written when the map closes, and trusted only while no write came since.
        self._stamps_saved = -1
        self._renders_saved = True  # no render made since the store's row was written
        # The project's watcher process (`keeper`, `watcher_client`): a look that is not
        # a trusted watcher's asks it what changed since `_token`, the token it gave
        # before the stamps were last true (stored with them), and `stat`s only those.
        self._keeper = keeper and cache_dir is not None
        self._token: str | None = None
        self._token_saved: str | None = None  # the token of the stored stamps row
        # How the last refresh learned what changed: "all" (every file stat'ed),
        # "watcher" (this process's notifications), "keeper" (the watcher process).
        self.told = ""

    @property
    def stamps(self) -> dict[str, Stamp]:
        """Every mapped file's (size, mtime_ns)."""
        if self._stamps is None:
            stamps = self._stamp_array
            assert stamps is not None
            self._stamps = {
                p: (size, mtime)
                for p, size, mtime in zip(self._sources, stamps[::2], stamps[1::2], strict=True)
                if size >= 0
            }
        return self._stamps

    @stamps.setter
    def stamps(self, value: dict[str, Stamp]) -> None:
        self._stamps, self._stamp_array = value, None

    def _array(self) -> array:
        """The stamps as one array in the order of `_sources`, each file's size then its
        mtime (`_UNMAPPED` for a source file that is not mapped)."""
        if self._stamp_array is None:
            stamps = self.stamps
            out = array("q")
            for p in self._sources:
                out.extend(stamps.get(p, _UNMAPPED))
            self._stamp_array = out
        return self._stamp_array

    def _differing(self) -> set[str]:
        """Stat every source file and compare with the stamps in bulk: the files whose
        stamp differs (changed, unreadable, or not mapped)."""
        base = os.path.join(str(self.root), "")
        now, before = stamp_array([base + p for p in self._sources]), self._array()
        if now == before:
            return set()
        sources = self._sources
        if len(sources) > NUMPY_NODES:
            import numpy as np

            pairs = (np.frombuffer(now, np.int64) != np.frombuffer(before, np.int64)).reshape(-1, 2)
            return {sources[i] for i in np.flatnonzero(pairs.any(axis=1)).tolist()}
        return {sources[i // 2] for i, (a, b) in enumerate(zip(now, before, strict=True)) if a != b}

    # -- keeping up with the files ------------------------------------------------

    def refresh(self, min_interval: float = 0.0, _again: int = 0) -> list[str]:
        """Look at the files again; parse what changed. Returns the problems found,
        one line each (an unreadable file, one that cannot be parsed, ...).

        Watching (`watch=True`), the first look starts the watcher and stats every
        file; a later look takes the watcher's notifications and stats only the
        files they name (`min_interval` is then ignored: a look costs little)."""
        now = time.monotonic()
        if self.closed:
            return self.notes
        self._settle()
        watched = self._watcher is not None and self._trusted
        if not watched and self._loaded and now - self._refreshed_at < min_interval:
            return self.notes
        self._refreshed_at = now
        started = time.perf_counter()
        snapshot_ok = self._loaded or self._load_snapshot()
        self._loaded = True
        old_listing = self._listing
        told = self._ask_keeper(watched, snapshot_ok)
        events = self._watcher.changed() if watched and self._watcher is not None else None
        check: set[str] | None = None  # the files to look at; None: every file
        listing = old_listing
        self.told = "watcher"
        if events is None and told is not None:
            events, self.told = told, "keeper"
        if events is not None and _burst(events) <= NOTIFY_BURST:
            listing, check = self._notified(events)
        if check is None:
            self.told = "all"
            if watched and events is None:
                self._stop_watcher()  # it failed: a new one, then every file is looked at
            self._trusted = False
            listing = self._look(listing)
        listed_again = listing is not old_listing
        if listed_again:
            self._listing = listing
            self.paths = listing.paths
            self._stamps = self.stamps if self._stamps is None else self._stamps
            self._stamp_array = None
            self._sources = [p for p in listing.paths if language_of(p) is not None]
        notes = list(listing.notes)
        self.parsed = 0
        every = check is None  # every file is looked at
        if every and snapshot_ok and not listed_again:
            # The same files as the stamps: stat them all, compare in bulk, and go on with
            # those that differ only.
            check = self._differing()
            self.looked = len(self._sources)
            if not check:
                if self._watcher is not None:
                    self._trusted = True
                self.notes = notes
                self.scan_ms = (time.perf_counter() - started) * 1000
                return notes
        changed: dict[str, tuple[Stamp, FileTags] | None] = {}
        from_store: list[str] = []
        # `stored`: the stamps before of the files looked at; `stamps`: their stamps now
        # (every mapped file's, when every file is looked at).
        stamps: dict[str, Stamp] = {}
        if check is None:
            stored = self.stamps if snapshot_ok else self.cache.stamps()
            targets = self._sources
        else:
            if listed_again and old_listing is not None:
                check |= set(old_listing.paths).symmetric_difference(listing.paths)
            stored = self._stamps_of(check)
            sources = _Sorted(self._sources)
            targets = sorted(p for p in check if p in sources)
        gone = list(stored)
        found: Mapping[str, object] = listing.stamps if listing.stamps else {}
        missing = [p for p in targets if p not in found]
        if check is None or not every:
            self.looked = len(targets)
        looked = stat_files(self.root, missing) if missing else {}
        for path in targets:
            st = found.get(path) or looked.get(path)
            if isinstance(st, OSError):
                if every or not isinstance(st, FileNotFoundError):
                    notes.append(f"{path}: skipped ({st.strerror})")
                continue
            stamp = (st.st_size, st.st_mtime_ns) if isinstance(st, os.stat_result) else st
            if stamp[0] > MAX_FILE_BYTES:
                continue
            stamps[path] = stamp
            if stored.get(path) == stamp:
                if not snapshot_ok:
                    from_store.append(path)
                continue
            parse_started = time.perf_counter()
            tags, note = self._parse(path)
            started += time.perf_counter() - parse_started
            if note:
                notes.append(note)
            changed[path] = (stamp, tags)
        listing.stamps = {}  # what a listing saw is true only now
        for path in gone:
            if path not in stamps:
                changed[path] = None
        if self._watcher is not None and (every or self.told == "keeper"):
            # Every file was looked at after the watcher began, or the watcher process
            # told every change made until after it began.
            self._trusted = True
        self.notes = notes
        self.scan_ms = (time.perf_counter() - started) * 1000
        if snapshot_ok and not changed and not listed_again:
            return notes
        try:
            self.cache.begin()
            if snapshot_ok and (self.cache.state(STATE_WRITES) or 0) != self._writes:
                # Another process wrote the store since: start from what it holds now.
                if _again > 2:
                    raise sqlite3.OperationalError("the store keeps changing under the map")
                self.cache.rollback()
                self._forget()
                return self.refresh(_again=_again + 1)
            # The tags `changed` replaces, as the store has them before this write.
            before = self.cache.tags([p for p in changed if p in stored]) if snapshot_ok else {}
            self.cache.put(changed)
            if not snapshot_ok:
                every = self.cache.tags(from_store)
                every.update({p: row[1] for p, row in changed.items() if row is not None})
                self._defs = {p: _no_refs(t) for p, t in every.items()}
                graph = _Graph.build(every)
            elif changed:
                graph = self._graph.updated(changed, before, self.cache)
            else:
                graph = self._graph
            if listed_again or not snapshot_ok:
                self.cache.put_state(STATE_LISTING, self._listing_state())
            if graph is not self._graph or not snapshot_ok:
                self.cache.put_state(STATE_GRAPH, (SNAPSHOT_VERSION, graph.parts()))
            self.cache.put_state(STATE_WRITES, self._writes + 1)
            # Committed after the map is returned: one that fails is seen by `_settle`.
            self.cache.commit_later()
        except sqlite3.Error as exc:
            self.cache.rollback()
            self._forget()
            if not snapshot_ok or not _busy(exc):
                # A store that cannot be written: keep going in memory; the next start
                # rebuilds it. (A busy one is tried again at the next look.)
                self.cache.close()
                self.cache = TagCache(None)
                return self.refresh()
            self.notes = [*notes, f"repo map: the store is busy ({exc}); looked again later"]
            return self.notes
        except BaseException:
            self.cache.rollback()
            raise
        self._writes += 1
        if check is None:
            self.stamps = stamps
        else:
            self._update_stamps(check, stamps)
        for path, row in changed.items():
            self._lines.pop(path, None)
            old = before.get(path)
            for name in old.references if old else ():
                self._uses.pop(name, None)
            if row is None:
                self._defs.pop(path, None)
            else:
                self._defs[path] = _no_refs(row[1])
                for name in row[1].references:
                    self._uses.pop(name, None)
        if graph is not self._graph:
            self._memo.clear()
        else:
            # The same edges: the rankings hold, unless a name the conversation mentions
            # is now defined elsewhere; a render holds unless it shows a changed file or
            # weighs a name whose use count changed.
            keeps = _Keeps(changed, before)
            memo: dict[tuple, object] = {}
            for key, value in self._memo.items():
                if isinstance(value, list):  # a render's variants, one per count
                    value = [r for r in value if keeps(key, r)]
                    if value:
                        memo[key] = value
                elif keeps(key, value):
                    memo[key] = value
            self._memo = memo
        self._graph = graph
        return notes

    def _ask_keeper(self, watched: bool, snapshot_ok: bool) -> set[str] | None:
        """Ask the project's watcher process before this look (see `__init__`): the paths
        it tells changed since the stamps' token, or None (the look goes on without
        it). A trusted watcher's look asks only for a token when it has none: the
        stamps after that look are true as of it."""
        if not self._keeper or (watched and self._token is not None):
            return None
        from slop_tui.repomap import watcher_client

        if not watched and self._watch and self._listing is not None:
            # This process's watcher begins before the question, so a change made after
            # the answer is its to tell.
            self._watch_folders(self._listing.folders)
        token = self._token if snapshot_ok else None
        answer = watcher_client.ask(self.root, token)
        self._token = answer.token if answer is not None else None
        if answer is None or answer.changed is None or watched or token is None:
            return None
        return set(answer.changed)

    def _notified(self, events: set[str]) -> tuple[Listing, set[str] | None]:
        """The listing after the notified `events` and the files to look at (None:
        every file, after a new folder or one gone: the watcher must change)."""
        listing = self._listing
        assert listing is not None
        paths = _Sorted(self.paths)
        check: set[str] = set()
        moved = False  # a file made, removed or renamed; an ignore file changed
        root = os.path.join(str(self.root), "")
        for rel in events:
            parts = rel.split("/")
            if rel in paths:
                check.add(rel)
                if parts[-1] == ".gitignore" or not os.path.isfile(root + rel):
                    moved = True
            elif parts[0] == ".git":
                if listing.source == "git" and rel in (".git/index", ".git/info/exclude"):
                    moved = True
            elif any(p in SKIP_DIRS for p in parts):
                continue
            elif rel in listing.folders or os.path.lexists(root + rel):
                moved = True
            # else: a file that came and went (an editor's temporary file)
        if not moved or (listing.source == "walk" and unchanged(self.root, listing)):
            return listing, check
        fresh = list_files(self.root)
        watcher = self._watcher
        if watcher is None or watcher.folders != frozenset(fresh.folders):
            return fresh, None
        return fresh, check

    def _look(self, listing: Listing | None) -> Listing:
        """The listing as the files are now. Watching, the watcher is started (or moved)
        first on the listing's folders, and the listing is then checked or made
        again, so nothing changed between the two goes unnoticed."""
        for _ in range(3 if self._watch else 0):
            if listing is not None:
                self._watch_folders(listing.folders)
                if self._watcher is None:
                    break
                if listing.source == "walk" and unchanged(self.root, listing):
                    return listing
            listing = list_files(self.root)
            watcher = self._watcher
            if watcher is not None and watcher.folders == frozenset(listing.folders):
                return listing
        self._stop_watcher()
        if listing is None or not unchanged(self.root, listing):
            listing = list_files(self.root)
        return listing

    def _watch_folders(self, folders: Collection[str]) -> None:
        if self._watcher is not None and self._watcher.folders == frozenset(folders):
            return
        assert self._sync_dir is not None
        try:
            watcher = Watcher(self.root, folders, self._sync_dir)
        except WatchUnavailable as exc:
            self._watch, self.watch_error = False, str(exc)
            self._stop_watcher()
            return
        self._stop_watcher()
        self._watcher = watcher

    def _stop_watcher(self) -> None:
        self._trusted = False
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None

    def _stamps_of(self, paths: Iterable[str]) -> dict[str, Stamp]:
        """The stamps of those of `paths` that are mapped."""
        if self._stamps is not None:
            stamps = self._stamps
            return {p: stamps[p] for p in paths if p in stamps}
        stamps = self._stamp_array
        assert stamps is not None
        sources = _Sorted(self._sources)
        out = {}
        for p in paths:
            i = sources.position(p)
            if i is not None and stamps[2 * i] >= 0:
                out[p] = (stamps[2 * i], stamps[2 * i + 1])
        return out

    def _update_stamps(self, checked: Iterable[str], now: dict[str, Stamp]) -> None:
        """The `checked` files' stamps are now `now` (not there: not mapped)."""
        if self._stamps is not None:
            for p in checked:
                self._stamps.pop(p, None)
            self._stamps.update(now)
            self._stamp_array = None
            return
        stamps = self._stamp_array
        assert stamps is not None
        sources = _Sorted(self._sources)
        for p in checked:
            i = sources.position(p)
            if i is not None:
                stamps[2 * i], stamps[2 * i + 1] = now.get(p, _UNMAPPED)

    @property
    def watching(self) -> bool:
        """Whether the next refresh takes the watcher's notifications instead of looking
        at every file."""
        return self._watcher is not None and self._trusted

    def _settle(self) -> bool:
        """After a change's commit that failed, the store lacks it: start again from what
        the store holds (the next refresh parses the changed files again)."""
        if self.cache.settle():
            self._forget()
            return True
        return False

    def _forget(self) -> None:
        """Drop what this map holds in memory: the next refresh reads the store again."""
        self._loaded = False
        self._trusted = False
        self._listing, self._sources, self.stamps = None, [], {}
        self._graph = _Graph.empty()
        self._defs, self._lines, self._uses = {}, {}, {}
        self._memo.clear()

    def _load_snapshot(self) -> bool:
        """Take the stored listing, stamps and graph as the state of the files; False
        without them."""
        writes = self.cache.state(STATE_WRITES)
        self._writes = writes if isinstance(writes, int) else 0
        listing, graph = self.cache.state(STATE_LISTING), self.cache.state(STATE_GRAPH)
        try:
            version, paths, notes, source, folders, ignores, sources = listing  # type: ignore[misc]
            graph_version, parts = graph  # type: ignore[misc]
            if version != SNAPSHOT_VERSION or graph_version != SNAPSHOT_VERSION:
                return False
            self._listing = Listing(paths, notes, source, folders, ignores)
            self._sources = list(sources)
            self._graph = _Graph.from_parts(parts)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError):
            self._listing, self._sources, self._graph = None, [], _Graph.empty()
            return False
        stored, self._token = _stamps_from(
            self.cache.state(STATE_STAMPS), self._writes, len(self._sources)
        )
        self._token_saved = self._token
        self._stamps_saved = self._writes if stored is not None else -1
        if stored is not None:
            self._stamps, self._stamp_array = None, stored
        else:
            self.stamps = self.cache.stamps()
        self.paths = self._listing.paths
        for key, rendered in _renders_from(self.cache.state(STATE_RENDERS), self._writes):
            self._memo.setdefault(key, []).append(rendered)  # type: ignore[union-attr]
        self._renders_saved = True
        return True

    def _listing_state(self) -> tuple:
        lst = self._listing
        assert lst is not None
        sources = self._sources
        return (
            SNAPSHOT_VERSION,
            lst.paths,
            lst.notes,
            lst.source,
            lst.folders,
            lst.ignores,
            sources,
        )

    def _definitions(self, paths: Collection[str]) -> dict[str, FileTags]:
        """The definitions of `paths` (no references), read from the store once."""
        missing = [p for p in paths if p not in self._defs]
        if missing:
            self._defs.update(self.cache.tags(missing, references=False))
        return {p: self._defs[p] for p in paths if p in self._defs}

    def _full_tags(self, paths: list[str]) -> dict[str, FileTags]:
        return self.cache.tags(paths)

    def _use_counts(self, names: set[str]) -> dict[str, int]:
        """How many files use each of `names`, read from the store once."""
        missing = sorted(n for n in names if n not in self._uses)
        if missing:
            found = self.cache.use_counts(missing)
            self._uses.update({n: found.get(n, 0) for n in missing})
        return self._uses

    def _file_lines(self, path: str, tags: FileTags) -> tuple[str, ...]:
        lines = self._lines.get(path)
        if lines is None:
            lines = self._lines[path] = tuple(_line(d) for d in tags.definitions)
        return lines

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

    # -- the ranking ---------------------------------------------------------------------

    def rank(self, chat_files: Collection[str] = (), mentions: str = "") -> list[str]:
        """The mapped files, most relevant first (see the module docstring)."""
        return [p for p, _ in self.scores(chat_files, mentions)]

    def scores(
        self, chat_files: Collection[str] = (), mentions: str = ""
    ) -> list[tuple[str, float]]:
        """(file, PageRank score), most relevant first (kept until the graph changes)."""
        key = ("scores", frozenset(chat_files), mentions)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) > MEMO_MAX:
                self._memo.clear()
            found = self._memo[key] = self._scores(chat_files, mentions)
        return found  # type: ignore[return-value]

    def _scores(self, chat_files: Collection[str], mentions: str) -> list[tuple[str, float]]:
        graph = self._graph
        nodes = graph.nodes
        if not nodes:
            return []
        index = graph.index() if chat_files or mentions else {}
        personal = [0.0] * len(nodes)
        for p in chat_files:
            i = index.get(p)
            if i is not None:
                personal[i] = 1.0
        if mentions:
            by_name = graph.by_basename()
            for token in _mention_tokens(mentions):
                i = index.get(token)
                if i is not None:
                    personal[i] = 1.0
                for i in by_name.get(token.rsplit("/", 1)[-1], ()):
                    personal[i] = 1.0
            words = sorted(set(_WORD.findall(mentions)))
            for holders in self.cache.definers(words).values():
                for p in holders:
                    i = index.get(p)
                    if i is not None:
                        personal[i] += 0.5
        rank = pagerank(graph, personal)
        if graph.large:
            import numpy as np

            order = np.lexsort((np.arange(len(nodes)), -np.array(rank))).tolist()
        else:
            order = sorted(range(len(nodes)), key=lambda i: (-rank[i], i))
        return [(nodes[i], rank[i]) for i in order]

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
        if budget <= 0 or self.closed:
            return MapText("", 0, 0, 0, tuple(self.notes))
        # Kept until a change touches what it depends on (see `_Keeps`), and for any
        # count that agrees with the one it was made with on the texts it counted. A kept
        # render needs no store: a change's commit may still be running.
        key = ("render", budget, frozenset(chat_files), mentions)
        found = self._kept(key, count_tokens)
        if found is None:
            if self._settle():
                self.refresh()
            found = self._kept(key, count_tokens)
        if found is None:
            if len(self._memo) > MEMO_MAX:
                self._memo.clear()
            renders = [k for k in self._memo if k[0] == "render"]
            for old in renders[: max(0, len(renders) - RENDERS_MAX + 1)]:
                del self._memo[old]  # the oldest: a render keeps the texts it counted
            found = self._render(budget, count_tokens, chat_files, mentions)
            found.counter = count_tokens
            # One variant per count that renders differently (the panes' estimate and a
            # request's exact count take turns without rendering each time).
            variants = self._memo.setdefault(key, [])
            assert isinstance(variants, list)
            variants.append(found)
            del variants[:-RENDER_VARIANTS]
            self._renders_saved = False
        return replace(found.out, notes=tuple(self.notes))

    def _kept(self, key: tuple, count_tokens: CountTokens) -> _Rendered | None:
        """A kept render of `key` that holds for `count_tokens` (the one made with it
        first: no counting)."""
        variants = self._memo.get(key)
        if not isinstance(variants, list):
            return None
        for rendered in sorted(variants, key=lambda r: r.counter != count_tokens):
            if rendered.holds(count_tokens):
                return rendered
        return None

    def _render(
        self, budget: int, count_tokens: CountTokens, chat_files: Collection[str], mentions: str
    ) -> _Rendered:
        ranked = self.scores(chat_files, mentions)
        n_files = len(ranked)
        # Only the best ranked files can fit: a file costs at least a dozen tokens.
        top = [(p, base) for p, base in ranked[: max(100, budget // 12)] if p not in chat_files]
        tags = self._definitions([p for p, _ in top])
        names = frozenset(d.name for t in tags.values() for d in t.definitions)
        users = self._use_counts(names)
        tried: list[tuple[str, int]] = []

        def done(out: MapText) -> _Rendered:
            return _Rendered(out, tuple(tried), frozenset(p for p, _ in top), names)

        scored: list[tuple[float, str, int]] = []  # (-score, path, index), best first
        for path, base in top:
            for i, d in enumerate(tags[path].definitions):
                w = 1.0 + math.log1p(users.get(d.name, 0))
                if d.name.startswith("_"):
                    w *= 0.1
                scored.append((-base * w, path, i))
        if not scored:
            return done(MapText("", 0, 0, 0))
        scored.sort()

        lines = {p: self._file_lines(p, tags[p]) for p, _ in top}

        def text_for(n: int) -> tuple[str, int]:
            chosen: dict[str, list[int]] = {}
            for _score, path, i in scored[:n]:
                chosen.setdefault(path, []).append(i)
            body = "".join(
                f"{p}:\n" + "".join(lines[p][i] for i in sorted(chosen[p])) for p in sorted(chosen)
            )
            more = n_files - len(chosen)
            tail = f"\n({more} more file(s) not listed)\n" if more else ""
            return MAP_HEADER + MAP_INTRO + body + tail, len(chosen)

        # The text's length for each count of definitions, then the largest count whose
        # estimate fits; then shrink until the exact count fits.
        length = len(MAP_HEADER) + len(MAP_INTRO) + 40
        lengths = [length]
        opened: set[str] = set()
        for _score, path, i in scored:
            length += len(lines[path][i])
            if path not in opened:
                opened.add(path)
                length += len(path) + 2
            lengths.append(length)
        lo = bisect.bisect_right(lengths, budget * 7 // 2) - 1
        while lo > 0:
            text, files = text_for(lo)
            tokens = count_tokens(text)
            tried.append((text, tokens))
            if tokens <= budget:
                return done(MapText(text, tokens, files, n_files))
            lo = lo * budget // tokens * 95 // 100 if tokens > budget else lo - 1
        return done(MapText("", 0, 0, n_files))

    def close(self) -> None:
        """Close the store now, or, while a thread holds `lock` (a refresh or a render in
        progress), when it lets go: a connection closed under a running statement
        crashes the process."""
        self.closed = True
        if self.lock.acquire(blocking=False):
            self.lock.release()

    def _close_now(self) -> None:
        if self.closed:
            self._stop_watcher()
            if self.cache.is_open:
                self._save_stamps()
            self.cache.close()

    def _save_stamps(self) -> None:
        """Store the files' stamps as one row, and the last renders, for the next start
        to read at once (not at each change: a turn's write stays small). Only if no
        other process wrote the store since this map's last write; a start without the
        stamps row reads the stamps from the files' rows, one without the renders row
        renders again."""
        stamps = self._stamps_saved != self._writes or self._token != self._token_saved
        if not self._loaded or not (stamps or not self._renders_saved) or self.cache.path is None:
            return
        try:
            self.cache.begin()
            if (self.cache.state(STATE_WRITES) or 0) == self._writes:
                if stamps:
                    stamps_now = self._array()
                    self.cache.put_state(
                        STATE_STAMPS,
                        (
                            STAMPS_VERSION,
                            self._writes,
                            len(self._sources),
                            stamps_now.tobytes(),
                            self._token,
                        ),
                    )
                    self._stamps_saved, self._token_saved = self._writes, self._token
                renders = [
                    rendered.state(key)
                    for key, value in self._memo.items()
                    if key[0] == "render" and isinstance(value, list)
                    for rendered in value
                ]
                self.cache.put_state(
                    STATE_RENDERS, (RENDERS_VERSION, self._writes, renders[-RENDERS_KEPT:])
                )
                self._renders_saved = True
            self.cache.commit()
        except sqlite3.Error:
            self.cache.rollback()


class _Guard:
    """A lock that calls `on_release` each time it is let go (to close the store once
    the last holder is done)."""

    def __init__(self, on_release: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._on_release = on_release

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        try:
            self._on_release()
        finally:
            self._lock.release()

    def __enter__(self) -> _Guard:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


Row = tuple[tuple[str, ...], tuple[float, ...]]  # a file's edges: targets, weights


@dataclass
class _Graph:
    """Which file uses names another file defines: `nodes` (the files that define or use
    a name, sorted), and the edges as arrays sorted by (source, target), each source's
    weights adding up to one. One order for every way of building it, so a graph
    updated file by file is the same, to the bit, as one built from scratch."""

    nodes: list[str]
    src: array  # int64 ("q") and float64 ("d") arrays, numpy's view of them when large
    dst: array
    w: array
    _index: dict[str, int] | None = None
    _by_basename: dict[str, list[int]] | None = None

    @classmethod
    def empty(cls) -> _Graph:
        return cls([], array("q"), array("q"), array("d"))

    @property
    def large(self) -> bool:
        """Ranked and updated with numpy (a small graph is quicker in plain Python than
        importing numpy, which a one-shot `slop-tui ask` would pay every time)."""
        return len(self.nodes) > NUMPY_NODES

    @classmethod
    def build(cls, tags: dict[str, FileTags]) -> _Graph:
        nodes = sorted(p for p, t in tags.items() if t.definitions or t.references)
        defined: dict[str, list[str]] = {}
        for p in nodes:
            for n in {d.name for d in tags[p].definitions}:
                defined.setdefault(n, []).append(p)
        return cls.from_rows(nodes, {p: _row(p, tags[p].references, defined) for p in nodes})

    @classmethod
    def from_rows(cls, nodes: list[str], rows: Mapping[str, Row]) -> _Graph:
        index = {p: i for i, p in enumerate(nodes)}
        src: list[int] = []
        dst: list[int] = []
        w: list[float] = []
        for i, p in enumerate(nodes):
            targets, weights = rows.get(p, ((), ()))
            src.extend([i] * len(targets))
            dst.extend(index[t] for t in targets)
            w.extend(weights)
        graph = cls(nodes, array("q", src), array("q", dst), array("d", w))
        graph._index = index
        return graph

    def parts(self) -> tuple:
        return (self.nodes, self.src.tobytes(), self.dst.tobytes(), self.w.tobytes())

    @classmethod
    def from_parts(cls, parts: tuple) -> _Graph:
        nodes, src, dst, w = parts
        graph = cls(list(nodes), array("q"), array("q"), array("d"))
        graph.src.frombytes(src)
        graph.dst.frombytes(dst)
        graph.w.frombytes(w)
        if not (len(graph.src) == len(graph.dst) == len(graph.w)):
            raise ValueError("a damaged graph")
        return graph

    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self.nodes)}
        return self._index

    def by_basename(self) -> dict[str, list[int]]:
        if self._by_basename is None:
            found: dict[str, list[int]] = {}
            for i, p in enumerate(self.nodes):
                found.setdefault(p.rsplit("/", 1)[-1], []).append(i)
            self._by_basename = found
        return self._by_basename

    def row(self, path: str) -> Row:
        i = _Sorted(self.nodes).position(path)
        if i is None:
            raise KeyError(path)
        a, b = bisect.bisect_left(self.src, i), bisect.bisect_left(self.src, i + 1)
        return (tuple(self.nodes[j] for j in self.dst[a:b]), tuple(self.w[a:b]))

    def updated(
        self,
        changed: dict[str, tuple[Stamp, FileTags] | None],
        before: dict[str, FileTags],
        store: TagCache,
    ) -> _Graph:
        """The graph after `changed` (None: gone), `before` holding their earlier tags and
        `store` the files as they are now: only the edges of the changed files and of
        the files using a name whose definers changed are computed again."""
        now = {p: row[1] for p, row in changed.items() if row is not None}
        moved: set[str] = set()  # names defined in other files than before
        index = _Sorted(self.nodes)
        added, removed = set(), set()  # files that become or stop being nodes
        for p in changed:
            old, new = before.get(p), now.get(p)
            names_before = {d.name for d in old.definitions} if old else set()
            moved |= names_before ^ ({d.name for d in new.definitions} if new else set())
            if new is not None and (new.definitions or new.references):
                if p not in index:
                    added.add(p)
            elif p in index:
                removed.add(p)
        if added or removed:
            node_set = (set(self.nodes) | added) - removed
            nodes = sorted(node_set)
        else:
            node_set, nodes = index, self.nodes
        affected = {p for p in changed if p in node_set}
        if moved:
            affected |= {p for p in store.users(sorted(moved)) if p in node_set}
        refs = {p: now[p].references for p in affected if p in now}
        rest = sorted(affected - refs.keys())
        refs.update({p: t.references for p, t in store.tags(rest).items()})
        defined = store.definers(sorted(set().union(*refs.values())) if refs else [])
        rows = {p: _row(p, refs[p], defined) for p in sorted(affected)}
        if nodes is self.nodes:
            rows = {p: r for p, r in rows.items() if r != self.row(p)}
            if not rows:
                return self
        if self.large or len(nodes) > NUMPY_NODES:
            return self._with_rows_numpy(nodes, rows)
        # A small graph: the kept rows as they are, the new ones, built again.
        keep = set(nodes)
        kept: dict[str, tuple[list[str], list[float]]] = {}
        for s, d, x in zip(self.src, self.dst, self.w, strict=True):
            p, q = self.nodes[s], self.nodes[d]
            if p in rows or p not in keep or q not in keep:
                continue
            entry = kept.setdefault(p, ([], []))
            entry[0].append(q)
            entry[1].append(x)
        merged: dict[str, Row] = {p: (tuple(t), tuple(w)) for p, (t, w) in kept.items()}
        merged.update(rows)
        return _Graph.from_rows(nodes, merged)

    def _with_rows_numpy(self, nodes: list[str], rows: dict[str, Row]) -> _Graph:
        """The graph on `nodes` with `rows` replacing (or adding) those files' edges."""
        import numpy as np

        src0 = np.frombuffer(self.src, np.int64)
        dst0 = np.frombuffer(self.dst, np.int64)
        w0 = np.frombuffer(self.w, np.float64)
        if nodes == self.nodes:
            remap = np.arange(len(nodes), dtype=np.int64)
        else:
            new_index = {p: i for i, p in enumerate(nodes)}
            remap = np.array([new_index.get(p, -1) for p in self.nodes], np.int64)
        old_index = self.index()
        redone = np.zeros(len(self.nodes), bool)
        for p in rows:
            if p in old_index:
                redone[old_index[p]] = True
        if len(src0):
            keep = ~redone[src0] & (remap[src0] >= 0) & (remap[dst0] >= 0)
            kept = (remap[src0[keep]], remap[dst0[keep]], w0[keep])
        else:
            kept = (src0, dst0, w0)
        index = {p: i for i, p in enumerate(nodes)}
        add_src: list[int] = []
        add_dst: list[int] = []
        add_w: list[float] = []
        for p, (targets, weights) in rows.items():
            add_src.extend([index[p]] * len(targets))
            add_dst.extend(index[t] for t in targets)
            add_w.extend(weights)
        src = np.concatenate([kept[0], np.array(add_src, np.int64)])
        dst = np.concatenate([kept[1], np.array(add_dst, np.int64)])
        w = np.concatenate([kept[2], np.array(add_w, np.float64)])
        order = np.lexsort((dst, src))
        graph = _Graph(nodes, array("q"), array("q"), array("d"))
        graph.src.frombytes(src[order].tobytes())
        graph.dst.frombytes(dst[order].tobytes())
        graph.w.frombytes(w[order].tobytes())
        graph._index = index
        return graph


def _row(path: str, references: Collection[str], defined: Mapping[str, list[str]]) -> Row:
    """A file's out-edges: to each file defining a name it uses, weighted like aider's
    (see the module docstring), the strongest `MAX_OUT_EDGES` kept, normalised. Names
    and targets are taken in sorted order, so the float sums never depend on how a set
    happened to iterate."""
    edges: dict[str, float] = {}
    for name in sorted(references):
        holders = defined.get(name)
        if not holders:
            continue
        mul = _name_weight(name)
        if len(holders) > 5:
            mul *= 0.1
        for dst in holders:
            if dst != path:
                edges[dst] = edges.get(dst, 0.0) + mul
    if len(edges) > MAX_OUT_EDGES:
        edges = dict(sorted(edges.items(), key=lambda x: (-x[1], x[0]))[:MAX_OUT_EDGES])
    targets = sorted(edges)
    total = 0.0
    for t in targets:
        total += edges[t]
    if not total:
        return ((), ())
    return (tuple(targets), tuple(edges[t] / total for t in targets))


def _stamps_from(state: object, writes: int, sources: int) -> tuple[array | None, str | None]:
    """The stored stamps (one array in the order of the listing's `sources` files, each
    file's size then its mtime) and the watcher process's token they are true as of,
    if the row is of the store's current write count."""
    try:
        version, of_writes, count, data, token = state  # type: ignore[misc]
        if version != STAMPS_VERSION or of_writes != writes or count != sources:
            return None, None
        stamps = array("q")
        stamps.frombytes(data)
    except (TypeError, ValueError):
        return None, None
    if len(stamps) != 2 * sources:
        return None, None
    return stamps, token if isinstance(token, str) else None


def _renders_from(state: object, writes: int) -> list[tuple[tuple, _Rendered]]:
    """The stored renders, if the row is of the store's current write count."""
    try:
        version, of_writes, rows = state  # type: ignore[misc]
        if version != RENDERS_VERSION or of_writes != writes:
            return []
        return [_Rendered.from_state(row) for row in rows]
    except (TypeError, ValueError):
        return []


def _burst(events: Iterable[str]) -> int:
    """How many notified paths are outside the folders the map skips (the store's own
    writes and sync files are not counted)."""
    return sum(1 for e in events if e.partition("/")[0] not in SKIP_DIRS)


def _busy(exc: sqlite3.Error) -> bool:
    """A store another process holds locked (past the connection's wait)."""
    return "locked" in str(exc) or "busy" in str(exc)


def _no_refs(tags: FileTags) -> FileTags:
    return FileTags(tags.definitions, frozenset(), tags.error) if tags.references else tags


def _mention_tokens(mentions: str) -> set[str]:
    """Path-like words of the conversation: `misc/other.py`, `./a.py` and `a.py.` all
    name `misc/other.py` or `a.py`."""
    out: set[str] = set()
    for token in _PATHLIKE.findall(mentions):
        token = token.strip(".-/")
        if token:
            out.add(token)
    return out


def pagerank(
    graph: _Graph,
    personal: list[float] | None = None,
    damping: float = 0.85,
    iterations: int = 12,
    tolerance: float = 1e-4,
) -> list[float]:
    """Personalized PageRank by power iteration over the graph's weighted edges
    (numpy for a large graph, plain Python for a small one); dangling files give
    their rank to the personalization (uniform without one). A pure function of its
    inputs: the same graph ranks the same, to the bit."""
    n = len(graph.nodes)
    if not n:
        return []
    total = sum(personal) if personal else 0.0
    teleport = [x / total for x in personal] if personal and total > 0 else [1.0 / n] * n
    if graph.large:
        return _pagerank_numpy(graph, teleport, damping, iterations, tolerance)
    has_out = [False] * n
    for s in graph.src:
        has_out[s] = True
    dangling = [i for i in range(n) if not has_out[i]]
    edges = list(zip(graph.src, graph.dst, graph.w, strict=True))
    rank = [1.0 / n] * n
    for _ in range(iterations):
        new = [0.0] * n
        for s, d, x in edges:
            new[d] += damping * rank[s] * x
        spread = damping * sum(rank[i] for i in dangling) + (1.0 - damping)
        new = [v + spread * t for v, t in zip(new, teleport, strict=True)]
        delta = sum(abs(a - b) for a, b in zip(new, rank, strict=True))
        rank = new
        if delta < tolerance:
            break
    return rank


def _pagerank_numpy(
    graph: _Graph, teleport_list: list[float], damping: float, iterations: int, tolerance: float
) -> list[float]:
    import numpy as np

    n = len(graph.nodes)
    src = np.frombuffer(graph.src, np.int64)
    dst = np.frombuffer(graph.dst, np.int64)
    w = np.frombuffer(graph.w, np.float64)
    teleport = np.array(teleport_list)
    dangling = np.bincount(src, minlength=n) == 0
    rank = np.full(n, 1.0 / n)
    for _ in range(iterations):
        flow = damping * rank[src] * w
        new = np.bincount(dst, weights=flow, minlength=n).astype(np.float64)
        new += (damping * rank[dangling].sum() + (1.0 - damping)) * teleport
        delta = np.abs(new - rank).sum()
        rank = new
        if delta < tolerance:
            break
    return rank.tolist()


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
