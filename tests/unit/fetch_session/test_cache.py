"""The fetch session cache (Kafka's FetchSessionCache): ids, epochs, room, and eviction in
Kafka's order (stale first, then unprivileged before privileged and fewer partitions first, a
young session kept from unprivileged newcomers)."""

from __future__ import annotations

import random
from types import SimpleNamespace

from dataplane.fetch_session import (
    FINAL_EPOCH,
    FetchSession,
    FetchSessionCache,
    next_epoch,
)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def cache(slots: int = 3, eviction_ms: int = 1000) -> tuple[FetchSessionCache, Clock]:
    clock = Clock()
    return FetchSessionCache(slots, eviction_ms, clock, random.Random(7)), clock


def fill(session: FetchSession, n: int) -> FetchSession:
    for i in range(n):
        session.add(("t", i), SimpleNamespace(fetch_offset=0, partition_max_bytes=100))
    return session


def create(c: FetchSessionCache, size: int, privileged: bool = False) -> FetchSession | None:
    session = c.maybe_create(privileged, size, False)
    if session is not None:
        fill(session, size)
        c.touch(session, c.clock())
    return session


def test_epochs_follow_kafka() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1  # wraps past 0 (INITIAL) to 1
    assert next_epoch(-1) == FINAL_EPOCH
    assert next_epoch(-7) == FINAL_EPOCH


def test_new_sessions_get_distinct_non_zero_ids_and_epoch_one() -> None:
    c, _ = cache(slots=100)
    sessions = [c.maybe_create(False, 1, False) for _ in range(100)]
    ids = {s.id for s in sessions if s is not None}
    assert len(ids) == 100
    assert 0 not in ids
    assert all(0 < i < 2**31 for i in ids)
    assert all(s is not None and s.epoch == 1 for s in sessions)
    assert len(c) == 100


def test_no_sessions_when_slots_is_zero() -> None:
    c, _ = cache(slots=0)
    assert c.maybe_create(False, 10, False) is None


def test_full_cache_keeps_young_sessions_from_an_unprivileged_newcomer() -> None:
    c, clock = cache(slots=2, eviction_ms=1000)
    a, b = create(c, 5), create(c, 5)
    clock.ms += 500  # used recently, and younger than eviction_ms
    assert create(c, 50) is None
    assert c.get(a.id) is a  # type: ignore[union-attr]
    assert c.get(b.id) is b  # type: ignore[union-attr]


def test_stale_session_is_evicted_first() -> None:
    c, clock = cache(slots=2, eviction_ms=1000)
    a, b = create(c, 50), create(c, 50)
    clock.ms += 600
    c.touch(b, clock())  # type: ignore[arg-type]
    clock.ms += 500  # a unused for 1,100 ms, b for 500
    new = create(c, 1)
    assert new is not None
    assert c.get(a.id) is None  # type: ignore[union-attr]
    assert c.get(b.id) is b  # type: ignore[union-attr]
    assert a.closed  # type: ignore[union-attr]
    assert c.evictions == 1


def test_settled_session_with_fewer_partitions_is_evicted_by_a_larger_one() -> None:
    c, clock = cache(slots=2, eviction_ms=1000)
    small, large = create(c, 3), create(c, 30)
    clock.ms += 1500
    c.touch(small, clock())  # type: ignore[arg-type]
    c.touch(large, clock())  # type: ignore[arg-type]  # neither stale, both settled
    assert create(c, 2) is None  # smaller than both
    newcomer = create(c, 10)
    assert newcomer is not None
    assert c.get(small.id) is None  # type: ignore[union-attr]
    assert c.get(large.id) is large  # type: ignore[union-attr]


def test_privileged_newcomer_evicts_a_young_unprivileged_session() -> None:
    c, clock = cache(slots=1, eviction_ms=1000)
    consumer = create(c, 100)
    clock.ms += 10
    follower = create(c, 1, privileged=True)
    assert follower is not None
    assert c.get(consumer.id) is None  # type: ignore[union-attr]
    clock.ms += 10
    assert create(c, 1000) is None  # an unprivileged one cannot evict it back


def test_touch_counts_partitions_and_orders_by_last_use() -> None:
    c, clock = cache(slots=3, eviction_ms=1000)
    a, b = create(c, 4), create(c, 6)
    assert c.num_partitions == 10
    fill(a, 8)  # type: ignore[arg-type]
    clock.ms += 1
    c.touch(a, clock())  # type: ignore[arg-type]
    assert c.num_partitions == 14
    clock.ms += 1500  # both stale now: the least recently used (b) goes first
    create(c, 1)
    create(c, 1)
    assert c.get(b.id) is None  # type: ignore[union-attr]
    assert c.get(a.id) is a  # type: ignore[union-attr]
    c.remove(a)  # type: ignore[arg-type]
    assert c.num_partitions == 2
    assert len(c) == 2


def test_session_marks_and_cleans_partitions() -> None:
    session = fill(FetchSession(5, False, False, 0), 3)
    assert list(session.dirty) == [("t", 0), ("t", 1), ("t", 2)]  # new: read next time
    partition = SimpleNamespace(watchers=set())
    partition.watch = partition.watchers.add
    partition.unwatch = partition.watchers.discard
    session.clean(("t", 1), partition)  # type: ignore[arg-type]
    cached = session.partitions[("t", 1)]
    assert ("t", 1) not in session.dirty
    assert partition.watchers == {cached}
    for watcher in list(partition.watchers):  # Partition._wake: set, then drop them all
        watcher.set()
    partition.watchers.clear()
    assert list(session.dirty) == [("t", 0), ("t", 2), ("t", 1)]
    assert cached.watched is None
    session.to_back(("t", 0))
    assert list(session.dirty) == [("t", 2), ("t", 1), ("t", 0)]
    session.clean(("t", 2), partition)  # type: ignore[arg-type]
    session.forget(("t", 2))
    assert partition.watchers == set()
    assert len(session) == 2
