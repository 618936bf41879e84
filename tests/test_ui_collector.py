"""The workspace's garbage-collector pacing: full collections between keys, not during."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from slop_tui.ui import collector
from slop_tui.ui.collector import CollectorPacing
from tests import test_app

project = test_app.project  # a temporary project folder, no provider keys


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Node:
    """A reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def pacing():
    threshold = gc.get_threshold()
    clock = Clock()
    pace = CollectorPacing(clock)
    try:
        yield pace, clock
    finally:
        pace.stop()
        gc.unfreeze()
        gc.set_threshold(*threshold)


def orphan_cycle() -> weakref.ref:
    """A cycle that lived long enough to reach the old generation, then became garbage."""
    node = Node()
    ref = weakref.ref(node)
    gc.collect(1)  # it survives: moved to generation 2
    del node
    return ref


def pend_young_collections(n: int) -> None:
    """Make gen-1 collections happen until `n` are pending for the full one."""
    while gc.get_count()[2] < n:
        gc.collect(1)


def test_start_turns_the_automatic_full_collection_off_and_stop_gives_it_back(pacing) -> None:
    pace, _ = pacing
    before = gc.get_threshold()
    pace.start()
    young, middle, full = gc.get_threshold()
    assert (young, middle) == before[:2]
    assert full == collector.NO_AUTOMATIC_FULL
    assert gc.get_freeze_count() > 0  # what start-up built is frozen
    pace.stop()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert pace.tick(busy=False) is None  # stopped: nothing runs


def test_an_idle_pause_collects_and_a_busy_one_waits(pacing) -> None:
    pace, clock = pacing
    pace.start()
    ref = orphan_cycle()
    pend_young_collections(1)
    assert ref() is not None  # in generation 2: only a full collection frees it
    clock.now += 5
    assert pace.tick(busy=True) is None  # a turn runs: not now
    assert ref() is not None
    pace.note_input()
    clock.now += collector.IDLE_S / 2
    assert pace.tick(busy=False) is None  # the user typed just now
    clock.now += collector.IDLE_S
    assert pace.tick(busy=False) == "young-full"
    assert ref() is None
    assert pace.counts["young-full"] == 1
    assert pace.tick(busy=False) is None  # nothing pending any more


@pytest.mark.parametrize("busy", [True, False], ids=["a turn running", "keys coming"])
def test_a_couple_of_pending_collections_collect_between_keys(pacing, busy) -> None:
    """Paging makes many objects: the collection that walks them comes after a couple
    of young collections, between keys, a turn running or not, each walking only what
    those made (one walk of many pages' objects is what a key coming meanwhile waits
    for)."""
    pace, clock = pacing
    pace.start()
    ref = orphan_cycle()
    pend_young_collections(2)
    pace.note_input()
    clock.now += collector.KEY_FRAME_S  # keys 0.1-0.4 s apart: never an idle pause
    assert pace.tick(busy=busy) == "young-full"
    assert ref() is None


def test_a_frozen_cycle_is_only_freed_by_the_deep_collection(pacing) -> None:
    pace, clock = pacing
    pace.start()
    node = Node()
    ref = weakref.ref(node)
    pend_young_collections(1)
    clock.now += collector.IDLE_S
    assert pace.tick(busy=False) == "young-full"  # it survives, and is frozen
    del node
    pend_young_collections(1)
    clock.now += collector.IDLE_S
    assert pace.tick(busy=False) == "young-full"
    assert ref() is not None  # frozen: the young-full collection does not walk it
    # Long quiet, long since the last deep collection: everything is walked.
    clock.now += collector.DEEP_EVERY_S + collector.DEEP_IDLE_S
    assert pace.tick(busy=True) is None  # never while a turn runs, before the hard bound
    assert pace.tick(busy=False) == "deep"
    assert ref() is None
    assert gc.get_freeze_count() > 0  # the survivors are frozen again
    assert pace.tick(busy=False) is None


def test_the_deep_collection_comes_at_the_latest_after_its_bounds(pacing) -> None:
    pace, clock = pacing
    pace.start()
    clock.now += collector.DEEP_LATEST_S
    pace.note_input()
    clock.now += collector.IDLE_S  # a short pause is enough by now
    assert pace.tick(busy=False) == "deep"
    clock.now += collector.DEEP_FORCE_S
    pace.note_input()
    assert pace.tick(busy=True) == "deep"  # busy for hours: collected anyway
    assert pace.counts["deep"] == 2


def test_a_paced_collection_waits_for_a_keys_frame_while_busy(pacing) -> None:
    pace, clock = pacing
    pace.start()
    ref = orphan_cycle()
    pend_young_collections(collector.FORCE_AFTER)  # due even while busy
    pace.note_input()
    assert pace.input_within(collector.KEY_FRAME_S)
    assert pace.tick(busy=True) is None  # the key's frame may be on its way
    assert ref() is not None
    clock.now += collector.KEY_FRAME_S
    assert not pace.input_within(collector.KEY_FRAME_S)
    assert pace.tick(busy=True) == "young-full"  # right after it
    assert ref() is None
    # Keys that never stop do not put it off for good: twice as many due, it runs.
    ref = orphan_cycle()
    pend_young_collections(2 * collector.FORCE_AFTER)
    pace.note_input()
    assert pace.tick(busy=True) == "young-full"
    assert ref() is None


async def test_the_workspace_paces_the_collector_from_ready_to_exit(project) -> None:
    """Started once the panes are filled; every key counts as input; given back at exit."""
    from tests.test_app import started
    from tests.test_ui_startup import app_for, seed

    threshold = gc.get_threshold()
    await seed(project, n=2)
    app = app_for(project)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await started(pilot)
            assert gc.get_threshold()[2] == collector.NO_AUTOMATIC_FULL
            before = app.collector.last_input
            await pilot.press("a")
            assert app.collector.last_input > before
        assert gc.get_threshold() == threshold
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_start_up_holds_full_collections_and_the_app_gives_the_original_back(pacing) -> None:
    pace, _ = pacing
    original = gc.get_threshold()
    collector.hold_full_collections()
    assert gc.get_threshold()[2] == collector.NO_AUTOMATIC_FULL
    assert not gc.isenabled()  # the young collections too, until the first full screen
    collector.hold_full_collections()  # twice is once: the original is kept
    pace.start()
    assert gc.isenabled() and gc.get_freeze_count() > 0  # on again, over what was frozen
    assert gc.get_threshold()[2] == collector.NO_AUTOMATIC_FULL
    pace.stop()
    assert gc.get_threshold() == original  # not the held one


def test_the_command_line_holds_full_collections_before_the_workspace_imports(
    monkeypatch,
) -> None:
    from slop_tui import cli, codecache
    from slop_tui.ui import app as ui_app
    from slop_tui.ui import textual_fixes
    from slop_tui.ui.widgets import blocks

    seen: list[int] = []
    enabled: list[bool] = []
    held: list[bool] = []
    cached: list[Path] = []  # the dataclass code cache, installed first (not in this process)
    monkeypatch.setattr(codecache, "use_code_cache", cached.append)
    kept: list[Path] = []  # Textual's parsed CSS, kept in the same folder
    monkeypatch.setattr(textual_fixes, "keep_parsed_css", kept.append)
    monkeypatch.setattr(blocks, "keep_answer_lines", kept.append)  # and the answers' lines

    def run_app(**kw) -> int:
        seen.append(gc.get_threshold()[2])
        enabled.append(gc.isenabled())  # no young collection either, until the screen is up
        held.append(blocks.code_highlighting_held())  # ui/startup.py's deferral too
        return 0

    monkeypatch.setattr(ui_app, "run_app", run_app)
    original = gc.get_threshold()
    try:
        assert cli.main(["--db", "unused.db"]) == 0
        assert cached == [codecache.user_cache_dir()]
        assert kept == [codecache.user_cache_dir()] * 2
        assert seen == [collector.NO_AUTOMATIC_FULL]
        assert enabled == [False]
        assert held == [True]
    finally:
        collector._held, collector._young_held = None, False
        gc.enable()
        gc.set_threshold(*original)
        blocks.release_code_highlighting()  # process-wide: the next tests highlight


async def test_a_workspace_that_fails_to_open_gives_the_collector_back(tmp_path) -> None:
    """The collector is off from the command's start to the first full screen; a start
    that never gets there (the ledger refused) turns it back on all the same."""
    from slop_tui.ui.app import SlopApp

    threshold = gc.get_threshold()
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    collector.hold_full_collections()
    try:
        assert not gc.isenabled()
        app = SlopApp(db=":memory:", cwd=tmp_path, env=env, user_themes=False, blink=False)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                if app.startup_error is not None:
                    break
                await pilot.pause(0.05)
            assert app.startup_error is not None
            for _ in range(100):  # once the refusal's banner and panes are shown
                if gc.isenabled():
                    break
                await pilot.pause(0.05)
            assert gc.isenabled()
    finally:
        collector._held, collector._young_held = None, False
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_a_paced_collection_waits_for_a_keys_frame_when_idle_too(pacing) -> None:
    pace, clock = pacing
    pace.start()
    ref = orphan_cycle()
    pend_young_collections(collector.FORCE_AFTER)
    pace.note_input()  # a key: its frame may be on its way
    assert pace.tick(busy=False) is None
    assert ref() is not None
    clock.now += collector.KEY_FRAME_S
    assert pace.tick(busy=False) == "young-full"
    assert ref() is None
