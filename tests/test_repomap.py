"""The repository map and the file tree: parsing, listing, caching, ranking, budgets,
their layers in the plan, their shedding, and what the real SDKs send."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from slop_tui.commands import dispatch
from slop_tui.context.assemble import PAIR_ACK
from slop_tui.context.budget import CompactionSettings, ModelInfo
from slop_tui.context.guards import STEP_SHED, apply_plan, plan_reduction
from slop_tui.context.prompt import KIND_PAIR, LAYER_FILE_TREE, LAYER_REPO_MAP
from slop_tui.repomap import MAP_HEADER, TREE_HEADER, RepoMap, tree_text
from slop_tui.repomap.files import list_files
from slop_tui.repomap.tags import extract
from tests.test_cli import run
from tests.workspace_fixtures import open_workspace, rough

PY = b'''class Store:
    """Keeps things."""

    def put(self, key: str,
            value: int) -> None:
        pass

def helper_function(a, b=2):
    return a
'''


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


# -- parsing ------------------------------------------------------------------------------


def test_python_definitions_with_signatures_lines_and_methods() -> None:
    tags = extract("a.py", PY)
    got = [(d.kind, d.name, d.line, d.signature, d.depth) for d in tags.definitions]
    assert got == [
        ("class", "Store", 1, "class Store", 0),
        ("method", "put", 4, "def put(self, key: str, value: int) -> None", 1),
        ("function", "helper_function", 8, "def helper_function(a, b=2)", 0),
    ]
    assert {"Store", "helper_function", "value"} <= tags.references
    assert not tags.error


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        ("m.js", b"class A { run(x) { return 1 } }\nfunction go(y) {}\n", {"A", "run", "go"}),
        (
            "m.ts",
            b"interface Shape { area(): number }\nexport function make(n: number): Shape { return null }\n",
            {"Shape", "make"},
        ),
        ("m.go", b"package m\nfunc Add(a int) int { return a }\n", {"Add"}),
        ("m.rs", b"struct P;\nimpl P { fn new() -> P { P } }\nfn main() {}\n", {"new", "main"}),
        ("M.java", b"class M { void hi(int x) {} }\n", {"M", "hi"}),
        ("m.rb", b"class K\n  def go(a)\n  end\nend\n", {"K", "go"}),
        ("m.c", b"int add(int a, int b) { return a + b; }\n", {"add"}),
    ],
)
def test_common_languages_work_offline(path: str, source: bytes, expected: set[str]) -> None:
    names = {d.name for d in extract(path, source).definitions}
    assert expected <= names


# -- listing --------------------------------------------------------------------------------


def test_git_listing_respects_gitignore_and_skips_state_and_vendored(tmp_path: Path) -> None:
    git_init(tmp_path)
    write(
        tmp_path,
        {
            ".gitignore": "secret.py\n",
            "secret.py": "x = 1\n",
            "src/a.py": "def a(): pass\n",
            ".slop/notes.py": "def n(): pass\n",
            "node_modules/x/v.js": "function v() {}\n",
            "web/app.min.js": "function m() {}\n",
        },
    )
    listing = list_files(tmp_path)
    assert listing.source == "git"
    assert listing.paths == [".gitignore", "src/a.py"]


def test_walk_respects_nested_gitignore_and_survives_a_symlink_loop(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".gitignore": "*.log\n",
            "a.py": "def a(): pass\n",
            "run.log": "x",
            "sub/.gitignore": "gen/\n",
            "sub/b.py": "def b(): pass\n",
            "sub/gen/c.py": "def c(): pass\n",
        },
    )
    os.symlink(tmp_path, tmp_path / "sub" / "loop")  # a folder that contains itself
    os.symlink("self2", tmp_path / "self1")
    os.symlink("self1", tmp_path / "self2")  # a file symlink loop
    listing = list_files(tmp_path)
    assert listing.source == "walk"
    assert listing.paths == [".gitignore", "a.py", "sub/.gitignore", "sub/b.py"]
    assert any("self1" in n for n in listing.notes)
    rm = RepoMap(tmp_path)
    rm.refresh()
    assert set(rm.tags) == {"a.py", "sub/b.py"}


# -- the cache -----------------------------------------------------------------------------


def test_cache_on_disk_parses_only_what_changed(tmp_path: Path) -> None:
    write(tmp_path, {f"p/m{i}.py": f"def f{i}(): pass\n" for i in range(5)})
    cache = tmp_path / ".slop"
    cache.mkdir()
    first = RepoMap(tmp_path, cache)
    first.refresh()
    assert first.parsed == 5
    first.close()
    again = RepoMap(tmp_path, cache)  # a new process: read from .slop/repomap.db
    again.refresh()
    assert again.parsed == 0 and len(again.tags) == 5
    time.sleep(0.01)
    (tmp_path / "p/m2.py").write_text("def changed_name(): pass\n")
    (tmp_path / "p/m4.py").unlink()
    again.refresh()
    assert again.parsed == 1
    assert "p/m4.py" not in again.tags
    assert [d.name for d in again.tags["p/m2.py"].definitions] == ["changed_name"]
    again.close()
    third = RepoMap(tmp_path, cache)
    third.refresh()
    assert third.parsed == 0 and set(third.tags) == {f"p/m{i}.py" for i in (0, 1, 2, 3)}


def _web(root: Path, files: int = 40) -> None:
    """Files that use each other's names: every file a class and two functions."""
    write(
        root,
        {
            f"pkg/part{i % 4}/mod_{i}.py": (
                f"from pkg import helper_{(i * 7) % files}, Widget{(i * 3 + 1) % files}\n\n"
                f"class Widget{i}:\n    def run_{i}(self, config):\n"
                f"        return helper_{(i * 5 + 2) % files}(config)\n\n"
                f"def helper_{i}(value):\n    return Widget{(i + 9) % files}()\n\n"
                f"def _private_{i}():\n    return helper_{(i * 11) % files}(1)\n"
            )
            for i in range(files)
        },
    )


def _outputs(rm: RepoMap) -> tuple:
    """Everything the map gives: rankings and texts for a few inputs."""
    cases = [((), ""), ({"pkg/part1/mod_5.py"}, ""), ((), "fix helper_7 in mod_12.py please")]
    return tuple(
        (rm.scores(files, said), rm.render(budget, rough, files, said).text)
        for files, said in cases
        for budget in (120, 600, 4000)
    )


def _cold(root: Path) -> tuple:
    rm = RepoMap(root)  # no store: parses everything
    rm.refresh()
    return _outputs(rm)


@pytest.mark.parametrize("numpy_nodes", [1500, 0], ids=["python", "numpy"])
def test_warm_and_incremental_maps_equal_a_cold_build(
    tmp_path: Path, monkeypatch, numpy_nodes: int
) -> None:
    """After each kind of change, the map kept up to date file by file and a new map
    started from the store give exactly what a cold build of the same files gives
    (with a small graph's plain Python, and with numpy as a large graph is ranked)."""
    from slop_tui.repomap import map as repomap

    monkeypatch.setattr(repomap, "NUMPY_NODES", numpy_nodes)
    _web(tmp_path)
    cache = tmp_path / ".slop"
    cache.mkdir()
    live = RepoMap(tmp_path, cache)
    live.refresh()
    assert _outputs(live) == _cold(tmp_path)
    steps = [
        # a body changes: the same names, other line numbers
        lambda: (tmp_path / "pkg/part0/mod_0.py").write_text(
            "\n\n" + (tmp_path / "pkg/part0/mod_0.py").read_text()
        ),
        # a new definition that others already use, and a new use of it
        lambda: write(
            tmp_path,
            {
                "pkg/part1/mod_1.py": "def helper_3(value):\n    return value\n",
                "pkg/part2/mod_2.py": "def user(): return helper_3(helper_3(2))\n",
            },
        ),
        # a file goes, one comes in a new folder, a definition is renamed
        lambda: (
            (tmp_path / "pkg/part3/mod_3.py").unlink(),
            write(tmp_path, {"extra/new_mod.py": "class Widget12:\n    pass\n"}),
            write(tmp_path, {"pkg/part0/mod_4.py": "def renamed_helper(v): return Widget9()\n"}),
        ),
        # a file loses every name and every use
        lambda: write(tmp_path, {"pkg/part1/mod_9.py": "\n"}),
    ]
    for n, step in enumerate(steps):
        time.sleep(0.01)
        graph = live._graph
        step()
        live.refresh()
        if n == 0:
            assert live._graph is graph  # the same edges: the graph and its ranking stay
        warm = RepoMap(tmp_path, cache)
        warm.refresh()
        cold = _cold(tmp_path)
        assert _outputs(live) == cold
        assert _outputs(warm) == cold
        assert warm.parsed == 0
        warm.close()
    live.close()


@pytest.mark.parametrize("watch", [False, True], ids=["looking", "watching"])
def test_two_processes_on_one_store_stay_equal_to_a_cold_build(tmp_path: Path, watch) -> None:
    """A map whose store another process wrote since reads it again before it adds
    its own changes, so neither keeps a graph that misses the other's (and two
    watchers on one store tell their sync files apart)."""
    _web(tmp_path, 20)
    cache = tmp_path / ".slop"
    cache.mkdir()
    one, two = RepoMap(tmp_path, cache, watch=watch), RepoMap(tmp_path, cache, watch=watch)
    one.refresh()
    two.refresh()
    write(tmp_path, {"pkg/part1/mod_1.py": "def helper_3(value):\n    return value\n"})
    two.refresh()  # the other process sees the change first and writes it
    time.sleep(0.01)
    write(tmp_path, {"pkg/part2/mod_2.py": "def user(): return helper_3(Widget7())\n"})
    one.refresh()
    cold = _cold(tmp_path)
    assert _outputs(one) == cold
    two.refresh()
    assert _outputs(two) == cold
    three = RepoMap(tmp_path, cache)
    three.refresh()
    assert three.parsed == 0 and _outputs(three) == cold
    for rm in (one, two, three):
        rm.close()


def test_a_store_another_process_holds_is_tried_again_later(tmp_path: Path, monkeypatch) -> None:
    import sqlite3

    from slop_tui.repomap import cache as store

    monkeypatch.setattr(store, "BUSY_WAIT", 0.1)
    _web(tmp_path, 10)
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop")
    rm.refresh()
    write(tmp_path, {"pkg/part1/mod_1.py": "def fresh_name(v): return v\n"})
    other = sqlite3.connect(tmp_path / ".slop" / "repomap.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process is writing
    notes = rm.refresh()
    assert any("busy" in n for n in notes) and "\n" not in notes[-1]
    assert rm.cache.path is not None  # still the store on disk
    other.execute("ROLLBACK")
    other.close()
    rm.refresh()
    assert "fresh_name" in rm.render(4000, rough).text
    assert _outputs(rm) == _cold(tmp_path)
    rm.close()


def test_a_warm_start_reads_the_snapshot_not_every_file(tmp_path: Path) -> None:
    _web(tmp_path, 130)
    (tmp_path / ".slop").mkdir()
    first = RepoMap(tmp_path, tmp_path / ".slop")
    first.refresh()
    expected = first.render(600, rough).text
    first.close()
    warm = RepoMap(tmp_path, tmp_path / ".slop")
    warm.refresh()
    assert warm.parsed == 0
    assert warm.render(600, rough).text == expected
    # The render was stored with the snapshot: no definition was read for it.
    assert warm._defs == {}
    # A render not stored reads only the best ranked files' definitions.
    warm.render(700, rough)
    assert 0 < len(warm._defs) <= 100
    # A damaged snapshot is a rebuild from the stored tags, not an error.
    warm.cache.db.execute("UPDATE state SET data = x'00'")
    warm.close()
    again = RepoMap(tmp_path, tmp_path / ".slop")
    again.refresh()
    assert again.parsed == 0 and again.render(600, rough).text == expected
    again.close()


def _renders(monkeypatch) -> list[RepoMap]:
    """The map of each render made (not served from a kept render)."""
    made: list[RepoMap] = []
    real = RepoMap._render

    def counted(self, *args):
        made.append(self)
        return real(self, *args)

    monkeypatch.setattr(RepoMap, "_render", counted)
    return made


def _cold_render(root: Path, budget: int, count=rough, files=(), said="") -> str:
    rm = RepoMap(root)
    rm.refresh()
    return rm.render(budget, count, files, said).text


def test_a_kept_render_is_made_again_when_a_file_it_shows_the_budget_or_the_context_changes(
    tmp_path: Path, monkeypatch
) -> None:
    """A render is kept while nothing it depends on changed; a change to a file it
    ranks, another budget or other files in context render again, each equal to a
    cold build's."""
    made = _renders(monkeypatch)
    _web(tmp_path, 130)
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop", watch=True)
    rm.refresh()
    first = rm.render(600, rough).text
    assert rm.render(600, rough).text == first and made.count(rm) == 1
    ranked = rm.rank()
    outside, shown = ranked[-1], ranked[0]
    # A file the map does not rank high enough to consider: the render is kept.
    write(tmp_path, {outside: (tmp_path / outside).read_text() + "\n\n# a comment\n"})
    rm.refresh()
    assert rm.parsed == 1 and rm.render(600, rough).text == first and made.count(rm) == 1
    assert first == _cold_render(tmp_path, 600)
    # A file it shows: rendered again (its line numbers moved).
    write(tmp_path, {shown: "\n\n" + (tmp_path / shown).read_text()})
    rm.refresh()
    again = rm.render(600, rough).text
    assert made.count(rm) == 2 and again != first and again == _cold_render(tmp_path, 600)
    # Another budget, other files in context: rendered for them.
    assert rm.render(700, rough).text == _cold_render(tmp_path, 700) and made.count(rm) == 3
    files = {ranked[1]}
    assert rm.render(600, rough, files).text == _cold_render(tmp_path, 600, files=files)
    assert made.count(rm) == 4
    rm.close()


def test_a_kept_render_is_made_again_when_a_name_it_weighs_is_used_more(
    tmp_path: Path, monkeypatch
) -> None:
    """A change that moves no edge (a file keeping only its strongest one) but changes
    how many files use a name the map weighs renders again."""
    from slop_tui.repomap import map as repomap

    monkeypatch.setattr(repomap, "MAX_OUT_EDGES", 1)
    made = _renders(monkeypatch)
    write(
        tmp_path,
        {
            f"m/mod_{i}.py": f"class Thing{i}:\n    pass\n\ndef long_helper_name_{i}(v):\n"
            f"    return Thing{(i + 1) % 120}(long_helper_name_{(i * 7) % 120}(v))\n"
            for i in range(120)
        },
    )
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop")
    rm.refresh()
    rm.render(400, rough)
    ranked = rm.rank()
    top = ranked[0]

    def number(path: str) -> int:
        return int(path.rsplit("_", 1)[1][:-3])

    # Ranked last, its strongest edge (a long name) to a file other than itself and top.
    outside = next(
        p for p in reversed(ranked) if number(p) % 20 and f"m/mod_{number(p) * 7 % 120}.py" != top
    )
    graph = rm._graph
    top_class = next(d.name for d in rm.tags[top].definitions if d.kind == "class")
    write(tmp_path, {outside: (tmp_path / outside).read_text() + f"\nx = {top_class}\n"})
    rm.refresh()
    assert rm._graph is graph  # no edge moved
    assert rm.render(400, rough).text == _cold_render(tmp_path, 400) and made.count(rm) == 2
    rm.close()


def test_a_mentioned_name_defined_anew_moves_the_ranking_without_a_new_edge(
    tmp_path: Path,
) -> None:
    """A name the conversation mentions, newly defined in a file nobody uses: no edge
    moves, but the ranking (personalized towards files defining mentioned names)
    does."""
    _web(tmp_path, 40)
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop")
    rm.refresh()
    said = "please look at brand_new_function"
    before = rm.scores((), said)
    graph = rm._graph
    write(
        tmp_path,
        {
            "pkg/part3/mod_39.py": (tmp_path / "pkg/part3/mod_39.py").read_text()
            + "\n\ndef brand_new_function():\n    pass\n"
        },
    )
    rm.refresh()
    assert rm._graph is graph
    cold = RepoMap(tmp_path)
    cold.refresh()
    assert rm.scores((), said) == cold.scores((), said) != before
    assert rm.render(600, rough, (), said).text == cold.render(600, rough, (), said).text
    rm.close()


def test_a_render_made_with_another_count_is_kept_only_if_the_counts_agree(
    tmp_path: Path, monkeypatch
) -> None:
    made = _renders(monkeypatch)
    _web(tmp_path, 40)
    rm = RepoMap(tmp_path)
    rm.refresh()
    text = rm.render(600, rough).text
    assert rm.render(600, lambda t: rough(t)).text == text and made.count(rm) == 1

    def double(t: str) -> int:
        return rough(t) * 2

    halved = rm.render(600, double)
    assert made.count(rm) == 2 and halved.tokens <= 600 and halved.text != text
    assert halved.text == _cold_render(tmp_path, 600, double)
    # The two counts take turns (the panes' and a request's): each keeps its render.
    assert rm.render(600, rough).text == text and rm.render(600, double) == halved
    assert made.count(rm) == 2


def test_only_the_latest_contexts_keep_their_renders(tmp_path: Path, monkeypatch) -> None:
    """Each turn's mentions are a new context: the oldest renders go (each keeps the
    texts it counted), the latest stay."""
    from slop_tui.repomap import map as repomap

    monkeypatch.setattr(repomap, "RENDERS_MAX", 2)
    made = _renders(monkeypatch)
    _web(tmp_path, 20)
    rm = RepoMap(tmp_path)
    rm.refresh()
    for said in ("first turn", "second turn", "third turn"):
        rm.render(600, rough, (), said)
    assert made.count(rm) == 3
    rm.render(600, rough, (), "third turn")
    rm.render(600, rough, (), "second turn")
    assert made.count(rm) == 3
    rm.render(600, rough, (), "first turn")
    assert made.count(rm) == 4


def test_a_new_process_serves_the_stored_render_until_a_file_it_ranks_changes(
    tmp_path: Path, monkeypatch
) -> None:
    made = _renders(monkeypatch)
    _web(tmp_path, 40)
    (tmp_path / ".slop").mkdir()
    first = RepoMap(tmp_path, tmp_path / ".slop")
    first.refresh()
    text = first.render(600, rough).text
    first.close()
    assert made.count(first) == 1
    warm = RepoMap(tmp_path, tmp_path / ".slop")
    warm.refresh()
    assert warm.render(600, rough).text == text and made.count(warm) == 0
    shown = warm.rank()[0]
    warm.close()
    time.sleep(0.01)
    # Changed while no process ran: the stored render is not served.
    write(tmp_path, {shown: "\n\n" + (tmp_path / shown).read_text()})
    again = RepoMap(tmp_path, tmp_path / ".slop")
    again.refresh()
    assert again.parsed == 1
    assert again.render(600, rough).text == _cold_render(tmp_path, 600) != text
    assert made.count(again) == 1
    again.close()


@pytest.mark.parametrize("numpy_nodes", [1500, 0], ids=["python", "numpy"])
def test_a_warm_start_compares_the_stamps_in_bulk_and_sees_what_changed_while_closed(
    tmp_path: Path, monkeypatch, numpy_nodes: int
) -> None:
    """Nothing changed: no object per file is made. A file rewritten at the same size
    while no process ran, and one too large now, are each seen (the differing stamps
    found in plain Python, and with numpy as for a large project)."""
    from slop_tui.repomap import map as repomap

    monkeypatch.setattr(repomap, "NUMPY_NODES", numpy_nodes)
    _web(tmp_path, 30)
    (tmp_path / ".slop").mkdir()
    first = RepoMap(tmp_path, tmp_path / ".slop")
    first.refresh()
    first.close()
    quiet = RepoMap(tmp_path, tmp_path / ".slop")
    quiet.refresh()
    quiet.render(600, rough)
    assert quiet.parsed == 0 and quiet.looked == 30 and quiet._stamps is None
    quiet.close()
    time.sleep(0.01)
    same_size = tmp_path / "pkg/part0/mod_0.py"
    text = same_size.read_text()
    same_size.write_text(text.replace("Widget0", "Gadget0"))
    (tmp_path / "pkg/part1/mod_1.py").write_text("def big(): pass\n" + "#" * 300_000)
    again = RepoMap(tmp_path, tmp_path / ".slop")
    notes = again.refresh()
    assert again.parsed == 1 and not notes
    assert "pkg/part1/mod_1.py" not in again.tags
    assert _outputs(again) == _cold(tmp_path)
    again.close()
    third = RepoMap(tmp_path, tmp_path / ".slop")
    third.refresh()
    assert third.parsed == 0 and _outputs(third) == _cold(tmp_path)
    third.close()


_CRASH = """
import os, sys
from pathlib import Path
from slop_tui.repomap import RepoMap
from slop_tui.repomap.cache import TagCache
root = Path(sys.argv[1])
rm = RepoMap(root, root / ".slop")
rm.refresh()
(root / "pkg/part1/mod_1.py").write_text("def written_before_the_crash(v): return v\\n")
TagCache.commit_later = lambda self: os._exit(3)  # the process ends before the commit
rm.refresh()
"""


def test_a_change_whose_write_is_lost_costs_a_parse_not_a_wrong_map(
    tmp_path: Path, monkeypatch
) -> None:
    """A change's write is committed after the map is returned. A process that ends
    before that commit leaves the store as it was: the next start parses the file
    again. A commit that fails is seen at the next use of the map, which starts
    again from the store."""
    import sys

    from slop_tui.repomap.cache import TagCache

    _web(tmp_path, 20)
    (tmp_path / ".slop").mkdir()
    crashed = subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path)], check=False)
    assert crashed.returncode == 3
    after = RepoMap(tmp_path, tmp_path / ".slop")
    after.refresh()
    assert after.parsed == 1 and _outputs(after) == _cold(tmp_path)
    assert "written_before_the_crash" in after.render(4000, rough).text

    def failing(self, db) -> None:  # the commit fails: its transaction is undone
        db.execute("ROLLBACK")
        self._lost = True

    monkeypatch.setattr(TagCache, "_commit", failing)
    write(tmp_path, {"pkg/part2/mod_2.py": "def helper_3(v): return Widget5()\n"})
    after.refresh()
    monkeypatch.undo()
    assert _outputs(after) == _cold(tmp_path)
    fresh = RepoMap(tmp_path, tmp_path / ".slop")
    fresh.refresh()
    assert fresh.parsed == 0 and _outputs(fresh) == _cold(tmp_path)
    fresh.close()
    after.close()


def test_a_file_that_cannot_be_parsed_is_one_line_and_the_rest_is_mapped(tmp_path: Path) -> None:
    write(tmp_path, {"good.py": "def fine(): pass\n", "bad.py": "def broken(:\n  )))\n"})
    (tmp_path / "bin.py").write_bytes(b"\0\1\2def x(): pass")
    (tmp_path / "big.py").write_text("def big(): pass\n" + "#" * 300_000)
    rm = RepoMap(tmp_path)
    notes = rm.refresh()
    assert [n for n in notes if n.startswith("bad.py")] == [
        "bad.py: syntax errors; mapped as far as it parses"
    ]
    text = rm.render(1000, rough).text
    assert "def fine()" in text and "bin.py" not in text and "big.py" not in text


# -- ranking and budget --------------------------------------------------------------------


def _project(root: Path) -> None:
    write(
        root,
        {
            "core/models.py": "class UserAccount:\n    def save(self): pass\n",
            "core/util.py": "def slugify_title(t): return t\n",
            "app/views.py": "from core.models import UserAccount\n"
            "def show(): return UserAccount().save()\n",
            "app/admin.py": "from core.models import UserAccount\ndef admin(): UserAccount()\n",
            "misc/other.py": "def unrelated_thing(): pass\n",
        },
    )


def test_ranking_follows_references_mentions_and_files_in_context(tmp_path: Path) -> None:
    _project(tmp_path)
    rm = RepoMap(tmp_path)
    rm.refresh()
    assert rm.rank()[0] == "core/models.py"  # used by two files
    assert rm.rank(mentions="please fix slugify_title")[0] == "core/util.py"
    assert rm.rank(mentions="look at misc/other.py")[0] == "misc/other.py"
    text = rm.render(2000, rough, chat_files={"core/models.py"}).text
    assert "core/models.py" not in text  # the files layer carries it whole
    assert "app/views.py" in text


@pytest.mark.parametrize("budget", [90, 150, 400])
def test_the_map_fits_its_budget_and_says_what_it_left_out(tmp_path: Path, budget: int) -> None:
    write(tmp_path, {f"pkg/mod{i}.py": f"def function_{i}(a, b):\n    pass\n" for i in range(40)})
    rm = RepoMap(tmp_path)
    rm.refresh()
    out = rm.render(budget, rough)
    assert 0 < out.tokens <= budget and rough(out.text) == out.tokens
    assert out.text.startswith(MAP_HEADER)
    assert f"({40 - out.files_shown} more file(s) not listed)" in out.text
    assert rm.render(0, rough).text == ""


def test_file_tree_cut_to_budget_with_a_count_line() -> None:
    paths = ["README.md", *(f"src/deep/f{i}.py" for i in range(200))]
    out = tree_text(paths, 100, rough)
    assert out.text.startswith(TREE_HEADER) and rough(out.text) <= 100
    assert "README.md" in out.text  # shallowest first
    assert f"({201 - out.listed} more file(s) not listed)" in out.text
    assert tree_text(paths, 0, rough).text == ""


# -- layers in the plan ---------------------------------------------------------------------


async def test_plan_carries_map_in_system_and_tree_as_a_pair(tmp_path: Path) -> None:
    _project(tmp_path)
    ws = await open_workspace(tmp_path)
    try:
        await ws.ledger.append_user(ws.session, "the UserAccount save is slow")
        plan = await ws.plan(count_tokens=rough)
        req = plan.request
        names = [la.name for la in req.layers]
        assert names[:3] == ["system", LAYER_REPO_MAP, LAYER_FILE_TREE]
        system = req.system_text
        assert system.index(MAP_HEADER) > system.index("## Available Tools")
        assert "core/models.py:\n  1: class UserAccount" in system
        pair = [m for m in req.messages if m.kind == KIND_PAIR]
        assert [m.role for m in pair] == ["user", "assistant"]
        assert req.messages[0] is pair[0] and pair[1].text == PAIR_ACK
        assert pair[0].text.startswith(TREE_HEADER) and ".slop" not in pair[0].text
        counts = plan.layer_tokens()
        assert sum(counts.values()) == plan.request_tokens
        assert counts[LAYER_FILE_TREE] == pair[0].tokens + pair[1].tokens

        r = await dispatch(ws, "/repo map off")
        assert r.ok
        r = await dispatch(ws, "/repo tree tokens 0")
        assert r.ok
        plan = await ws.plan(count_tokens=rough)
        assert MAP_HEADER not in plan.request.system_text
        assert not [m for m in plan.request.messages if m.kind == KIND_PAIR]
        r = await dispatch(ws, "/repo map on")
        plan = await ws.plan(count_tokens=rough)
        assert MAP_HEADER in plan.request.system_text
        r = await dispatch(ws, "/repo map")
        assert r.ok and "core/models.py" in r.text and "of " in r.text
        r = await dispatch(ws, "/repo map tokens lots")
        assert not r.ok and "Usage" in r.text
    finally:
        await ws.close()


async def test_a_file_saved_between_two_requests_is_in_the_second(tmp_path: Path) -> None:
    """The workspace's map watches: a file changed right before a request is in that
    request's map (no interval during which the map would not look)."""
    _project(tmp_path)
    ws = await open_workspace(tmp_path)
    try:
        plan = await ws.plan(count_tokens=rough)
        assert "saved_just_now" not in plan.request.system_text
        assert ws.repo_map().watching
        write(tmp_path, {"core/models.py": "def saved_just_now(value):\n    return value\n"})
        plan = await ws.plan(count_tokens=rough)
        assert "core/models.py:\n  1: def saved_just_now(value)" in plan.request.system_text
        assert ws.repo_map().looked == 1
    finally:
        await ws.close()


async def test_sources_are_shed_before_files_largest_first(tmp_path: Path) -> None:
    _project(tmp_path)
    write(tmp_path, {"notes.txt": "word " * 300})
    write(
        tmp_path,
        {
            f"lib/module_{i}.py": "".join(
                f"def handler_{i}_{j}(request, options):\n    pass\n" for j in range(4)
            )
            for i in range(60)
        },
    )
    ws = await open_workspace(tmp_path)
    try:
        await dispatch(ws, "/file add notes.txt")
        await ws.ledger.append_user(ws.session, "hello")
        prompt = (await ws.plan(count_tokens=rough)).assembled
        layers = {la.name: la.tokens for la in prompt.layers}
        assert layers[LAYER_REPO_MAP] and layers[LAYER_FILE_TREE] and prompt.files
        # Room for the request without the map and the tree, but not with them.
        limit = prompt.request_tokens - layers[LAYER_REPO_MAP] - layers[LAYER_FILE_TREE]
        model = ModelInfo("m", context_window=limit * 100 // 71 + 100, max_output=100)
        assert prompt.request_tokens * 100 > 90 * model.max_input_tokens
        guard = plan_reduction(prompt, model, CompactionSettings(), rough)
        shed = [s for s in guard.steps if s.kind == STEP_SHED]
        assert len(shed) == 1 and shed[0].files == ()
        assert set(shed[0].layers) == {LAYER_REPO_MAP, LAYER_FILE_TREE}
        assert "left out" in shed[0].detail
        out = apply_plan(prompt, guard, rough)
        assert MAP_HEADER not in out.system_text and out.files
        assert not [m for m in out.messages if m.kind == KIND_PAIR]
    finally:
        await ws.close()


# -- what the real SDKs send ----------------------------------------------------------------


def _env(fake_llm, provider: str, root: Path) -> dict[str, str]:
    base = {"GIT_CEILING_DIRECTORIES": str(root.parent)}
    if provider == "openai":
        return base | {
            "OPENAI_API_KEY": "x",
            "OPENAI_BASE_URL": fake_llm.openai_base_url,
            "OPENAI_MODEL": "fake-model",
        }
    return base | {
        "GEMINI_API_KEY": "x",
        "GEMINI_BASE_URL": fake_llm.gemini_base_url,
        "GEMINI_MODEL": "gemini-2.5-flash",
    }


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_real_sdk_request_has_map_in_system_and_the_tree_pair_first(
    tmp_path: Path, fake_llm, provider: str
) -> None:
    from tests.fakeserver import Reply

    _project(tmp_path)
    fake_llm.enqueue(Reply(text="done"))
    r = run(["ask", "why is UserAccount slow?"], tmp_path, _env(fake_llm, provider, tmp_path))
    assert r.returncode == 0, r.stderr
    body = fake_llm.chat_requests[-1].body
    if provider == "openai":
        msgs = body["messages"]
        system, first, second, third = msgs[0], msgs[1], msgs[2], msgs[3]
        assert system["role"] == "system"
        text = system["content"]
        assert first["role"] == "user" and first["content"].startswith(TREE_HEADER)
        assert second == {"role": "assistant", "content": PAIR_ACK}
        assert third["role"] == "user" and "why is UserAccount slow?" in third["content"]
        tree = first["content"]
    else:
        text = "".join(p["text"] for p in body["systemInstruction"]["parts"])
        contents = body["contents"]
        assert contents[0]["role"] == "user"
        tree = contents[0]["parts"][0]["text"]
        assert tree.startswith(TREE_HEADER)
        assert contents[1] == {"role": "model", "parts": [{"text": PAIR_ACK}]}
        assert "why is UserAccount slow?" in contents[2]["parts"][-1]["text"]
    assert text.count(MAP_HEADER) == 1
    assert text.index(MAP_HEADER) > text.index("## Available Tools")
    assert "core/models.py:\n  1: class UserAccount\n    2: def save(self)" in text
    assert "app/views.py" in tree and ".slop" not in tree


async def test_map_and_tree_are_cut_alike_whatever_the_learned_correction(tmp_path: Path) -> None:
    """For a model whose counts are corrected from the provider's (not OpenAI), the
    correction moves after every call; the map and the tree are cut by the uncorrected
    count, so the same project gives the same texts: the same prompt prefix, which the
    provider's cache can serve."""
    from slop_tui.config import load_config
    from slop_tui.context.tokens import TokenCounter
    from slop_tui.workspace import Workspace

    write(tmp_path, {f"pkg/mod{i}.py": f"def function_{i}(a, b):\n    pass\n" for i in range(40)})
    (tmp_path / "user.toml").write_text("[context]\nrepo_map_tokens = 120\nfile_tree_tokens = 60\n")
    env = {"SLOP_CONFIG": str(tmp_path / "user.toml")}
    config = load_config(db=str(tmp_path / ".slop" / "slop.db"), env=env, cwd=tmp_path)
    ws = await Workspace.open(config, env=env)
    try:
        texts = []
        for factor in (1.0, 1.6, 0.7):
            ws.counter = TokenCounter("gemini-2.5-flash", factor=factor)
            map_text, tree, _ = await ws.repo_sources([], [], 1_000_000)
            assert "more file(s) not listed" in map_text and "more file(s) not listed" in tree
            texts.append((map_text, tree))
        assert texts[0] == texts[1] == texts[2]
    finally:
        await ws.close()


async def test_context_drop_and_restore_a_layer(tmp_path: Path) -> None:
    _project(tmp_path)
    ws = await open_workspace(tmp_path)
    try:
        await ws.ledger.append_user(ws.session, "the UserAccount save is slow")
        r = await dispatch(ws, "/context drop map")
        assert r.ok and r.revert == "/context restore repo_map", r.text
        assert r.announcement().count("/context restore") == 1, r.announcement()
        again = await dispatch(ws, "/context drop repo_map")
        assert again.ok and "already" in again.text
        plan = await ws.plan(count_tokens=rough)
        assert MAP_HEADER not in plan.request.system_text
        assert [m for m in plan.request.messages if m.kind == KIND_PAIR]  # the tree stays
        assert any("layer repo_map dropped" in n for n in plan.request.notes)
        await dispatch(ws, "/context drop tree")
        plan = await ws.plan(count_tokens=rough)
        assert not [m for m in plan.request.messages if m.kind == KIND_PAIR]
        # Per session: another session still has both.
        await dispatch(ws, "/session activate other")
        await ws.ledger.append_user(ws.session, "hello")
        assert MAP_HEADER in (await ws.plan(count_tokens=rough)).request.system_text
        await dispatch(ws, "/session activate default_session")
        for word in ("map", "tree"):
            assert (await dispatch(ws, f"/context restore {word}")).ok
        plan = await ws.plan(count_tokens=rough)
        assert MAP_HEADER in plan.request.system_text
        assert [m for m in plan.request.messages if m.kind == KIND_PAIR]
        bad = await dispatch(ws, "/context drop everything")
        assert not bad.ok and bad.error_kind == "usage" and "\n" not in bad.text
    finally:
        await ws.close()


def test_closing_while_a_refresh_runs_waits_for_it(tmp_path: Path) -> None:
    """The workspace may close while a plan's thread refreshes the map: the store is
    closed when that thread lets go, not under its running statement."""
    _web(tmp_path, 10)
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop")
    with rm.lock:  # a refresh in another thread
        rm.close()
        assert rm.cache._db is not None  # still open for the holder
        rm.refresh()  # a late caller gets the last notes, touches nothing
    assert rm.cache._db is None and rm.render(500, rough).text == ""


# -- change notifications -----------------------------------------------------------------


def _names(rm: RepoMap) -> dict[str, list[str]]:
    """Each mapped file's definition names, as the map holds them now."""
    return {p: [d.name for d in rm.tags[p].definitions] for p in sorted(rm.tags)}


def _cold_names(root: Path) -> dict[str, list[str]]:
    rm = RepoMap(root)
    rm.refresh()
    return _names(rm)


@pytest.mark.parametrize("repo", ["walk", "git"])
def test_watched_map_sees_every_kind_of_change_without_looking_at_every_file(
    tmp_path: Path, repo: str
) -> None:
    """Closed, then open: a file changed in between is seen by the first look. Open and
    watching: a change, an addition, a removal and a rename are each in the next map,
    and the next look reads only the files the notifications name."""
    if repo == "git":
        git_init(tmp_path)
    _web(tmp_path, 30)
    cache = tmp_path / ".slop"
    cache.mkdir()
    first = RepoMap(tmp_path, cache, watch=True)
    first.refresh()
    first.close()
    time.sleep(0.01)
    write(tmp_path, {"pkg/part0/mod_0.py": "def changed_while_closed(v): return v\n"})
    rm = RepoMap(tmp_path, cache, watch=True)
    rm.refresh()
    assert rm.watching and not rm.watch_error
    assert _names(rm)["pkg/part0/mod_0.py"] == ["changed_while_closed"]
    steps = {
        "changed": lambda: write(tmp_path, {"pkg/part1/mod_1.py": "def edited_now(v): pass\n"}),
        "added": lambda: write(tmp_path, {"pkg/part2/brand_new.py": "class AddedNow:\n  pass\n"}),
        "deleted": lambda: (tmp_path / "pkg/part3/mod_3.py").unlink(),
        "renamed": lambda: (tmp_path / "pkg/part2/mod_2.py").rename(
            tmp_path / "pkg/part2/moved_mod.py"
        ),
        "saved through a temporary file": lambda: (
            write(tmp_path, {"pkg/part0/.mod_4.py.tmp": "def saved_by_an_editor(): pass\n"}),
            os.replace(tmp_path / "pkg/part0/.mod_4.py.tmp", tmp_path / "pkg/part0/mod_4.py"),
        ),
        "added in a new folder": lambda: write(
            tmp_path, {"fresh/deeper/made.py": "def in_a_new_folder(): pass\n"}
        ),
        "changed in the new folder": lambda: write(
            tmp_path, {"fresh/deeper/made.py": "def edited_in_new_folder(): pass\n"}
        ),
    }
    for what, step in steps.items():
        step()  # no sleep: the next map must see it at once
        rm.refresh()
        assert _names(rm) == _cold_names(tmp_path), what
        assert rm.paths == list_files(tmp_path).paths, what
        if what in ("changed", "changed in the new folder"):
            assert rm.looked == 1 and rm.parsed == 1, what
        assert rm.watching, what
    assert "edited_in_new_folder" in rm.render(4000, rough).text
    rm.close()
    again = RepoMap(tmp_path, cache)
    again.refresh()
    assert again.parsed == 0 and _names(again) == _cold_names(tmp_path)
    again.close()


def test_watching_git_sees_the_index_change_the_listing(tmp_path: Path) -> None:
    """A file git ignores but is told to track (`git add -f`) joins the listing at the
    next look, and a change to it is seen after that."""
    git_init(tmp_path)
    write(
        tmp_path,
        {".gitignore": "secret/\n", "a.py": "def a(): pass\n", "secret/b.py": "def hid(): pass\n"},
    )
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop", watch=True)
    rm.refresh()
    assert "secret/b.py" not in rm.paths and rm.watching
    subprocess.run(["git", "-C", str(tmp_path), "add", "-f", "secret/b.py"], check=True)
    rm.refresh()
    assert "secret/b.py" in rm.paths and rm.paths == list_files(tmp_path).paths
    write(tmp_path, {"secret/b.py": "def tracked_now(): pass\n"})
    rm.refresh()
    assert _names(rm) == _cold_names(tmp_path) and rm.watching
    rm.close()


def test_a_notification_that_does_not_arrive_means_looking_at_every_file(
    tmp_path: Path, monkeypatch
) -> None:
    from slop_tui.repomap import watch

    _web(tmp_path, 10)
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop", watch=True)
    rm.refresh()
    assert rm.watching
    monkeypatch.setattr(watch.Watcher, "changed", lambda self, wait=0: None)
    write(tmp_path, {"pkg/part1/mod_1.py": "def seen_anyway(v): pass\n"})
    rm.refresh()
    assert rm.looked == 10 and _names(rm) == _cold_names(tmp_path)
    rm.close()


def test_without_notifications_the_map_looks_at_every_file(tmp_path: Path, monkeypatch) -> None:
    """A system that refuses the watches (no inotify left, ...): every look reads every
    file's stamp, and changes are still seen."""
    from slop_tui.repomap import map as repomap
    from slop_tui.repomap.watch import WatchUnavailable

    def refused(*args, **kwargs):
        raise WatchUnavailable("no watches left")

    monkeypatch.setattr(repomap, "Watcher", refused)
    _web(tmp_path, 10)
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop", watch=True)
    rm.refresh()
    assert not rm.watching and rm.watch_error == "no watches left"
    write(tmp_path, {"pkg/part1/mod_1.py": "def still_seen(v): pass\n"})
    rm.refresh()
    assert rm.looked == 10 and _names(rm) == _cold_names(tmp_path)
    rm.close()


def test_a_burst_of_notifications_means_looking_at_every_file(tmp_path: Path, monkeypatch) -> None:
    """So many paths notified at once that the system's queue may have overflowed (its
    signal is dropped by watchfiles): every file is looked at, and watching goes on."""
    from slop_tui.repomap import map as repomap

    monkeypatch.setattr(repomap, "NOTIFY_BURST", 3)
    _web(tmp_path, 10)
    (tmp_path / ".slop").mkdir()
    rm = RepoMap(tmp_path, tmp_path / ".slop", watch=True)
    rm.refresh()
    write(tmp_path, {f"pkg/part{i}/mod_{i}.py": f"def burst_{i}(v): pass\n" for i in range(4)})
    rm.refresh()
    assert rm.looked == 10 and rm.parsed == 4 and _names(rm) == _cold_names(tmp_path)
    assert rm.watching
    write(tmp_path, {"pkg/part1/mod_5.py": "def after_the_burst(v): pass\n"})
    rm.refresh()
    assert rm.looked == 1 and _names(rm) == _cold_names(tmp_path)
    rm.close()
