"""The dataclass code cache (slop_tui/codecache.py): a second process compiles none of
the methods the first one compiled, and the classes it makes behave the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A process as the `slop-tui` command starts it: the cache first, then the modules.
PROBE = """
import dataclasses, json, sys
from pathlib import Path
from slop_tui.codecache import EVAL_KEY, use_code_cache
cache = use_code_cache(Path(sys.argv[1]))
from slop_tui import events, records
import collections, typing
Point = collections.namedtuple("Point", "x y", defaults=[0])
class Pair(typing.NamedTuple):
    left: "int"
    right: "list[str]"
try:
    typing.ForwardRef("not an expression (")
    bad_ref = "accepted"
except SyntaxError as exc:
    bad_ref = str(exc)
other = typing.compile("1 + 1", "elsewhere.py", "eval")
state = records.StateVersion(1, "main", 2, "text", 3.0)
try:
    state.content = "changed"
    frozen = "not frozen"
except dataclasses.FrozenInstanceError as exc:
    frozen = str(exc)
print(json.dumps({
    "compiled": cache.compiled,
    "used": len(cache.used),
    "repr": repr(state),
    "equal": state == records.StateVersion(1, "main", 2, "text", 3.0),
    "unequal": state == records.StateVersion(1, "main", 2, "other", 3.0),
    "hash": hash(state) == hash(records.StateVersion(1, "main", 2, "text", 3.0)),
    "frozen": frozen,
    "init_code": records.StateVersion.__init__.__code__.co_code.hex(),
    "names": sorted(vars(records.StateVersion)),
    "named_tuples": [repr(Point(1)), repr(Pair(1, ["a"])), Point._fields, Pair._fields],
    "new_code": Point.__new__.__code__.co_code.hex(),
    "annotations": repr(typing.get_type_hints(Pair)),
    "ref_code": typing.ForwardRef("list[str]").__forward_code__.co_code.hex(),
    "bad_ref": bad_ref,
    "other": [other.co_filename, eval(other)],
    "expressions": sum(1 for key in cache.used if key.startswith(EVAL_KEY)),
}), flush=True)
if sys.argv[2:] == ["killed"]:  # saved as the app saves it, then no exit handler runs
    import os
    from slop_tui.codecache import save_code_cache
    save_code_cache()
    os._exit(0)
"""


def run_probe(folder: Path, *args: str, code: str = PROBE) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)


def cache_file(folder: Path) -> Path:
    (path,) = folder.glob("dataclass-code-*.marshal")
    return path


def test_a_second_process_compiles_no_method_the_first_one_compiled(tmp_path: Path) -> None:
    first = run_probe(tmp_path)
    assert first["compiled"] == first["used"] > 20  # every generated method, compiled
    written = cache_file(tmp_path).read_bytes()
    second = run_probe(tmp_path)
    assert second["compiled"] == 0
    assert second["used"] == first["used"]
    # The same methods, doing the same: nothing but the compile is saved.
    keys = ("repr", "equal", "unequal", "hash", "frozen", "init_code", "names")
    for key in (*keys, "named_tuples", "new_code", "annotations", "ref_code", "bad_ref"):
        assert second[key] == first[key], key
    assert first["equal"] and not first["unequal"] and first["hash"]
    assert "cannot assign to field 'content'" in first["frozen"]
    # Named tuples' lambdas and annotations' texts, from the table too; an annotation
    # that is no expression is still refused, and any other compile is the builtin's.
    assert first["named_tuples"][:2] == ["Point(x=1, y=0)", "Pair(left=1, right=['a'])"]
    assert first["annotations"] == "{'left': <class 'int'>, 'right': list[str]}"
    assert "Forward reference must be an expression" in first["bad_ref"]
    assert first["other"] == second["other"] == ["elsewhere.py", 2]
    assert first["expressions"] == second["expressions"] >= 4  # Point, Pair, their texts
    assert cache_file(tmp_path).read_bytes() == written  # nothing new: not written again


def test_a_damaged_cache_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    first = run_probe(tmp_path)
    path = cache_file(tmp_path)
    for damage in (b"", b"\x00not marshal", path.read_bytes()[:100]):
        path.write_bytes(damage)
        again = run_probe(tmp_path)
        assert again["compiled"] == first["compiled"]  # compiled as without a cache
        assert again["repr"] == first["repr"]
        assert run_probe(tmp_path)["compiled"] == 0  # and the file is whole again


def test_a_folder_that_cannot_be_written_costs_only_the_compiles(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    first = run_probe(blocker / "cache")  # mkdir fails: no file, no error
    assert first["compiled"] > 20
    assert run_probe(blocker / "cache")["compiled"] == first["compiled"]


def test_the_table_saved_before_a_kill_serves_the_next_process(tmp_path: Path) -> None:
    first = run_probe(tmp_path, "killed")
    assert first["compiled"] > 20
    assert run_probe(tmp_path)["compiled"] == 0


def test_a_process_killed_before_it_saved_leaves_no_table(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.replace("save_code_cache()", "pass"), str(tmp_path), "killed"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert proc.returncode == 0 and not list(tmp_path.glob("dataclass-code-*"))


def test_no_cache_is_loaded_from_inside_the_project(tmp_path: Path, monkeypatch) -> None:
    """The model's shell may write in the project: a user cache there (a project that
    is the home folder, or XDG_CACHE_HOME pointed into it) is not loaded at all."""
    from slop_tui.codecache import loaded_cache_dir

    project = tmp_path / "home"
    project.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(project / ".cache"))
    assert loaded_cache_dir(project) is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(project))
    assert loaded_cache_dir(project) is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert loaded_cache_dir(project) == (tmp_path / "cache" / "slop-tui").resolve()


def test_the_project_is_the_folder_the_command_starts_in(tmp_path: Path) -> None:
    """Without a project named, the folder a process starts in is the project: a
    process started in the folder that holds the user cache loads none of it."""
    import os

    project = tmp_path / "home"
    project.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(project / ".cache"), "SLOP_REPO_WATCHER": "off"}
    code = (
        "import sys; from slop_tui import cli; sys.argv = ['slop-tui', '--help'];"
        "cache = cli.loaded_cache_dir(); print('none' if cache is None else cache)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "none", out.stderr


def test_two_processes_saving_one_table_keep_each_others_entries(tmp_path: Path) -> None:
    """A table saved by another process since this one read the file is merged, not
    overwritten: the file keeps what each process added."""
    import marshal

    from slop_tui.codecache import CacheFile

    path = tmp_path / "table.marshal"
    first, second = CacheFile(path), CacheFile(path)
    first.put("one", b"1")
    second.put("two", b"2")
    first.save()
    second.save()
    assert marshal.loads(path.read_bytes()) == {"one": b"1", "two": b"2"}
    first.put("three", b"3")
    first.save()
    assert marshal.loads(path.read_bytes()) == {"one": b"1", "two": b"2", "three": b"3"}


def test_expressions_made_after_the_app_s_code_is_imported_are_not_kept(tmp_path: Path) -> None:
    """Named tuples and annotations compiled once `stop_keeping_expressions` has run (the
    app's code imported; later ones may be made from the user's or a server's text) go
    through the builtins and leave nothing in the table."""
    code = """
import collections, json, sys, typing
from pathlib import Path
from slop_tui.codecache import EVAL_KEY, save_code_cache, stop_keeping_expressions, use_code_cache
cache = use_code_cache(Path(sys.argv[1]))
collections.namedtuple("Before", "kept_field")
stop_keeping_expressions()
collections.namedtuple("After", "secret_field")
typing.ForwardRef("secret_annotation")
save_code_cache()
texts = [k for k in cache.used if k.startswith(EVAL_KEY)]
print(json.dumps({
    "texts": texts,
    "shadows": ["eval" in vars(collections), "compile" in vars(typing)],
}))
"""
    found = run_probe(tmp_path, code=code)
    assert found["shadows"] == [False, False]
    assert any("kept_field" in text for text in found["texts"])
    assert not any("secret" in text for text in found["texts"])
    assert b"secret" not in cache_file(tmp_path).read_bytes()
