"""When the garbage collector may pause the workspace: between the user's keys.

CPython's automatic full collection walks every tracked object that is not
frozen; in the workspace that took 50-140 ms at a random moment -- a key typed
while a reply streamed, a ctrl+u page -- and was most of the key -> frame
latency above 50 ms (bench/tui.py with BENCH_STALL_TRACE=1). `CollectorPacing`
switches the automatic full collection off (the young generations still run on
their own: they only scan recent objects) and does it itself:

- *young-full*: when the user has not typed or clicked for `IDLE_S` and no turn
  runs, or after `FORCE_AFTER` young collections even while keys come or a turn
  runs. It collects what is not frozen and then freezes the survivors, so the
  next one only walks what was made since. Each object is walked once by such a
  collection however often they come, so they come often, after `FORCE_AFTER`
  (two) young collections: each walks a few pages' worth of objects (2-15 ms), short
  enough for a key that comes meanwhile to wait for.
- *deep*: unfreeze everything and collect it all. Frozen objects that became
  cyclic garbage later (unmounted group blocks, a closed dialog) are only freed
  here. It runs after `DEEP_IDLE_S` without input once `DEEP_EVERY_S` have
  passed since the last one; after `DEEP_LATEST_S` a shorter pause (`IDLE_S`)
  will do, and after `DEEP_FORCE_S` it runs even while busy: a bound on what a
  day-long session holds on to. (`gc.get_freeze_count()` would measure the
  frozen set instead, but it walks it: 17 ms a call at 1M objects.)

A paced collection is not started within `KEY_FRAME_S` of a key or a click (`tick`
waits for the next time, unless twice as many are due): it would land between the
key and its frame. CPython's automatic young collections are
left alone: switched off from a key to its frame, they ran later as one larger pass
(tens of ms) that the next keys waited for.

The clock and the collector calls are injectable for tests.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

IDLE_S = 1.0
FORCE_AFTER = 2  # young (generation 1) collections since the last full one
DEEP_IDLE_S = 30.0
DEEP_EVERY_S = 600.0
DEEP_LATEST_S = 1800.0
DEEP_FORCE_S = 7200.0
NO_AUTOMATIC_FULL = 1 << 30  # a generation-2 threshold that is never reached
KEY_FRAME_S = 0.1  # how long after a key its frame may still be on its way

_held: tuple[int, int, int] | None = None  # the thresholds before hold_full_collections
_young_held = False  # hold_full_collections switched the collector off


def hold_full_collections() -> None:
    """No automatic collection from here to the first full screen (`start`).

    Called before the workspace's imports (`slop-tui`'s entry point): start-up
    builds ~1M objects that live as long as the app, and CPython walked them on
    the way: in full collections (two in a 2,000-message start, 32 ms together),
    and in ~140 young ones (15-30 ms until the first frame). The collector is
    off until `release_held_collections` freezes what start-up made and turns it
    back on; `CollectorPacing.start` paces the full collections from there."""
    global _held, _young_held
    if _held is None:
        _held = gc.get_threshold()
        young, middle, _full = _held
        gc.set_threshold(young, middle, NO_AUTOMATIC_FULL)
        if gc.isenabled():
            gc.disable()
            _young_held = True


def release_held_collections() -> None:
    """The automatic collections back after `hold_full_collections` (once the first
    full screen is up, or opening the workspace failed). What start-up made is frozen
    first: switched on over it, the first young collection would walk all of it (the
    generation the collector was off for). Its little cyclic garbage waits for the
    first deep collection, as `CollectorPacing.start` leaves it."""
    global _young_held
    if _young_held:
        _young_held = False
        gc.freeze()
        gc.enable()


class CollectorPacing:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.last_input = clock()
        self.last_deep = clock()
        self.saved_threshold: tuple[int, int, int] | None = None
        self.counts = {"young-full": 0, "deep": 0}

    def start(self) -> None:
        """After start-up: what start-up built lives as long as the app; freeze it.

        No collection first: walking the ~1M objects start-up made costs 0.1-0.3 s
        on the path to the first full screen; its little garbage waits for the
        first deep collection."""
        global _held
        gc.freeze()
        release_held_collections()
        self.last_deep = self._clock()
        self.saved_threshold, _held = _held or gc.get_threshold(), None
        young, middle, _full = self.saved_threshold
        gc.set_threshold(young, middle, NO_AUTOMATIC_FULL)

    def stop(self) -> None:
        """Give the collector back its own schedule and what was frozen (the app is
        closing; in a test process the next app starts afresh)."""
        if self.saved_threshold is not None:
            gc.set_threshold(*self.saved_threshold)
            gc.unfreeze()
            self.saved_threshold = None

    def note_input(self) -> None:
        self.last_input = self._clock()

    def input_within(self, seconds: float) -> bool:
        """Whether a key or a click came less than `seconds` ago."""
        return self._clock() - self.last_input < seconds

    def tick(self, busy: bool) -> str | None:
        """Called about twice a second; returns which collection ran, if any."""
        if self.saved_threshold is None:
            return None
        now = self._clock()
        quiet = now - self.last_input
        since_deep = now - self.last_deep
        if (
            since_deep >= DEEP_FORCE_S
            or (not busy and quiet >= DEEP_IDLE_S and since_deep >= DEEP_EVERY_S)
            or (not busy and quiet >= IDLE_S and since_deep >= DEEP_LATEST_S)
        ):
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.last_deep = now
            self.counts["deep"] += 1
            return "deep"
        pending = gc.get_count()[2]
        if quiet < KEY_FRAME_S and pending < 2 * FORCE_AFTER:
            return None  # a key's frame may be on its way: the next tick
        if pending >= FORCE_AFTER or (pending and not busy and quiet >= IDLE_S):
            gc.collect()
            gc.freeze()
            self.counts["young-full"] += 1
            return "young-full"
        return None
