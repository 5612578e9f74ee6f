"""Keyed expirations for the coordinator's state machines (Kafka's CoordinatorTimer).

A `Timer` holds callbacks by key; scheduling a key again replaces its previous deadline (a
heartbeat pushes its member's session expiration back), cancelling forgets it. Nothing here
sleeps: whoever owns the timer calls `fire_due()` when `next_deadline()` has passed — the
broker's coordinator loop in production, the test itself (with a manual clock) in unit tests,
so the state machines are tested without waiting.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable

Clock = Callable[[], int]  # milliseconds


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Timer:
    def __init__(self, clock: Clock = monotonic_ms, on_schedule: Callable[[], None] | None = None):
        """`on_schedule` is called when a `schedule` makes its entry the earliest, so a driver
        sleeping until the previous earliest deadline can wake up and look again."""
        self.clock = clock
        self._on_schedule = on_schedule
        self._entries: dict[str, tuple[int, int, Callable[[], object]]] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()

    def schedule(self, key: str, delay_ms: int, callback: Callable[[], object]) -> None:
        deadline = self.clock() + max(0, delay_ms)
        seq = next(self._seq)
        self._entries[key] = (deadline, seq, callback)
        heapq.heappush(self._heap, (deadline, seq, key))
        if self._on_schedule is not None and self._heap[0][1] == seq:
            self._on_schedule()  # the earliest deadline moved closer (not for most heartbeats)

    def cancel(self, key: str) -> None:
        self._entries.pop(key, None)

    def cancel_all(self) -> None:
        self._entries.clear()
        self._heap.clear()

    def is_scheduled(self, key: str) -> bool:
        return key in self._entries

    def deadline(self, key: str) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def fire_due(self) -> int:
        """Run every callback whose deadline has passed, earliest first; returns how many.
        A callback may schedule or cancel keys (including its own)."""
        fired = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > self.clock():
                return fired
            _, _, key = heapq.heappop(self._heap)
            _, _, callback = self._entries.pop(key)
            callback()
            fired += 1

    def __len__(self) -> int:
        return len(self._entries)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            _, seq, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)
