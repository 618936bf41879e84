"""When the garbage collector may pause the workspace: between the user's keys.

CPython's automatic full collection walks every tracked object that is not
frozen; in the workspace that took 50-140 ms at a random moment -- a key typed
while a reply streamed, a ctrl+u page -- and was most of the key -> frame
latency above 50 ms (bench/tui.py with BENCH_STALL_TRACE=1). `CollectorPacing`
switches the automatic full collection off (the young generations still run on
their own: they only scan recent objects) and does it itself:

- *young-full*: when the user has not typed or clicked for `IDLE_S` and no turn
  runs, or -- a bound on memory -- after `FORCE_AFTER` young collections even
  while busy. It collects what is not frozen and then freezes the survivors, so
  the next one only walks what was made since: a few ms.
- *deep*: unfreeze everything and collect it all. Frozen objects that became
  cyclic garbage later (unmounted group blocks, a closed dialog) are only freed
  here. It runs after `DEEP_IDLE_S` without input once `DEEP_EVERY_S` have
  passed since the last one; after `DEEP_LATEST_S` a shorter pause (`IDLE_S`)
  will do, and after `DEEP_FORCE_S` it runs even while busy: a bound on what a
  day-long session holds on to. (`gc.get_freeze_count()` would measure the
  frozen set instead, but it walks it: 17 ms a call at 1M objects.)

From a key's (or a click's) arrival to the frame that shows it, no automatic
collection runs at all (`note_input` with the app's `call_after_refresh`): a
young pass that lands there (1-10 ms, up to 20 ms for generation 1 while a reply
streams) is paid by that key alone. The collector is switched back on two
refreshes later, or by `tick` once held `KEY_HOLD_S` (no frame came, or keys
keep coming faster than frames); `tick` starts none of its own meanwhile. The
collections it owes then run at the next allocations, between keys.

The clock and the collector calls are injectable for tests.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

IDLE_S = 1.0
FORCE_AFTER = 10  # young (generation 1) collections since the last full one
DEEP_IDLE_S = 30.0
DEEP_EVERY_S = 600.0
DEEP_LATEST_S = 1800.0
DEEP_FORCE_S = 7200.0
NO_AUTOMATIC_FULL = 1 << 30  # a generation-2 threshold that is never reached
KEY_HOLD_S = 0.25  # at most this long without automatic collections after a key

_held: tuple[int, int, int] | None = None  # the thresholds before hold_full_collections


def hold_full_collections() -> None:
    """No automatic full collection from here to the first full screen (`start`).

    Called before the workspace's imports (`slop-tui`'s entry point): start-up
    builds ~1M objects that live as long as the app, and CPython walked them in
    full collections on the way (two in a 2,000-message start, 32 ms together;
    12 ms with this). `CollectorPacing.start` freezes them instead."""
    global _held
    if _held is None:
        _held = gc.get_threshold()
        young, middle, _full = _held
        gc.set_threshold(young, middle, NO_AUTOMATIC_FULL)


class CollectorPacing:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.last_input = clock()
        self.last_deep = clock()
        self.saved_threshold: tuple[int, int, int] | None = None
        self.counts = {"young-full": 0, "deep": 0, "key-holds": 0}
        self.key_since: float | None = None  # the last key whose frame is owed came then
        self.held_at = 0.0  # when the automatic collections were held for keys
        self._held_enabled = False  # the automatic collections were on when held

    def start(self) -> None:
        """After start-up: what start-up built lives as long as the app; freeze it.

        No collection first: walking the ~1M objects start-up made costs 0.1-0.3 s
        on the path to the first full screen; its little garbage waits for the
        first deep collection."""
        global _held
        gc.freeze()
        self.last_deep = self._clock()
        self.saved_threshold, _held = _held or gc.get_threshold(), None
        young, middle, _full = self.saved_threshold
        gc.set_threshold(young, middle, NO_AUTOMATIC_FULL)

    def stop(self) -> None:
        """Give the collector back its own schedule and what was frozen (the app is
        closing; in a test process the next app starts afresh)."""
        self.key_drawn()
        if self.saved_threshold is not None:
            gc.set_threshold(*self.saved_threshold)
            gc.unfreeze()
            self.saved_threshold = None

    def note_input(self, after_refresh: Callable[..., object] | None = None) -> None:
        """A key or a click arrived. With `after_refresh` (the app's
        `call_after_refresh`), no automatic collection runs until the screen has been
        refreshed twice after it (the key's frame is out), or `KEY_HOLD_S` passed."""
        self.last_input = self._clock()
        if after_refresh is None or self.saved_threshold is None:
            return
        if self.key_since is None:
            self.held_at = self.last_input
            self._held_enabled = gc.isenabled()
            if self._held_enabled:
                gc.disable()
                self.counts["key-holds"] += 1
        self.key_since = self.last_input
        since = self.key_since
        # Twice: the first refresh can come before the key's handler has run.
        after_refresh(after_refresh, self.key_drawn, since)

    def key_drawn(self, since: float | None = None) -> None:
        """The frame of the key noted at `since` is out (None: whatever key): the
        automatic collections come back, unless a later key is still owed its frame."""
        if self.key_since is None or (since is not None and since != self.key_since):
            return
        self.key_since = None
        if self._held_enabled:
            self._held_enabled = False
            gc.enable()

    def tick(self, busy: bool) -> str | None:
        """Called about twice a second; returns which collection ran, if any."""
        if self.saved_threshold is None:
            return None
        now = self._clock()
        if self.key_since is not None:
            if now - self.held_at < KEY_HOLD_S:
                return None  # a key waits for its frame: the next tick will do
            # No frame came, or keys keep coming faster than frames: they come back.
            self.key_drawn()
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
        if pending >= FORCE_AFTER or (pending and not busy and quiet >= IDLE_S):
            gc.collect()
            gc.freeze()
            self.counts["young-full"] += 1
            return "young-full"
        return None
