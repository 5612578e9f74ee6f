"""Incremental fetch sessions (KIP-227): what the broker remembers of a consumer's fetches.

A full fetch (session epoch 0) lists every partition; the broker answers it and keeps a session:
each partition's fetch offset, max bytes and leader epoch as the client sent them, and the high
watermark, last stable offset and log start it last answered. Incremental fetches (epoch 1, 2,
...) then list only the partitions whose request data changed (and the ones to forget); the
response carries only the partitions with records, an error, a preferred read replica or a
changed high watermark / last stable offset / log start (Kafka's FetchSession.update and
CachedPartition.maybeUpdateResponseData).

Cost: an unchanged partition must cost nothing. Each cached partition is its own watcher on the
replica's high watermark (`Partition.watch`, one-shot): when the high watermark or the log start
moves (new data, a marker, a leadership change, retention, DeleteRecords, the replica closing)
it puts itself in the session's `dirty` set and wakes the session's long poll. A fetch reads
only the dirty partitions and those the request lists; a partition with records not yet sent, an
error or a preferred read replica stays dirty.

The cache (Kafka's FetchSessionCache / FetchSessionCacheShard) holds at most
max.incremental.fetch.session.cache.slots sessions; a new session may evict one that was unused
for min.incremental.fetch.session.eviction.ms, else the least valuable of those older than that
(unprivileged before privileged, fewer partitions first) if it has at least as many partitions.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from prometheus_client import Counter, Gauge

if TYPE_CHECKING:
    from dataplane.protocol.encoders import FetchPartition
    from dataplane.replica.partition import Partition

log = logging.getLogger("rafka.fetch_session")

INVALID_SESSION_ID = 0  # a sessionless fetch, or "no session was created"
INITIAL_EPOCH = 0  # a full fetch that asks for a new session
FINAL_EPOCH = -1  # a full fetch that wants no session
_MAX_EPOCH = 2**31 - 1
_EVICTION_LOG_INTERVAL_S = 60.0

_CACHE = "kafka_server_fetch_session_cache"
SESSIONS = Gauge(
    f"{_CACHE}_num_incremental_fetch_sessions",
    "Incremental fetch sessions cached (NumIncrementalFetchSessions)",
)
PARTITIONS_CACHED = Gauge(
    f"{_CACHE}_num_incremental_fetch_partitions_cached",
    "Partitions in the cached fetch sessions (NumIncrementalFetchPartitionsCached)",
)
EVICTIONS = Counter(
    f"{_CACHE}_incremental_fetch_sessions_evictions",
    "Fetch sessions evicted to make room for new ones (IncrementalFetchSessionEvictionsPerSec)",
)

Key = tuple[Any, int]
"""(topic id bytes from Fetch v13, else the topic name; partition index)."""


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: after a negative epoch comes FINAL; wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class PartitionParams(Protocol):
    """What a Fetch request says of a partition in every version (current_leader_epoch, v9+,
    and last_fetched_epoch, v12+, are read where the version has them)."""

    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...


class CachedPartition:
    """One partition of a session: the client's request data (under the kio request
    partition's attribute names, so the read path takes either) and what was last answered.
    It is also the partition's high-watermark watcher (`set`, called by `Partition._wake`)."""

    __slots__ = (
        "current_leader_epoch",
        "fetch_offset",
        "high_watermark",
        "key",
        "last_fetched_epoch",
        "last_stable_offset",
        "local_log_start",
        "partition",
        "partition_max_bytes",
        "session",
        "watched",
    )

    def __init__(self, session: FetchSession, key: Key, p: PartitionParams) -> None:
        self.session = session
        self.key = key
        self.partition: int = key[1]
        self.high_watermark = -1  # nothing answered yet: the first answer always includes it
        self.last_stable_offset = -1
        self.local_log_start = -1
        self.watched: Partition | None = None
        self.update_request(p)

    def update_request(self, p: PartitionParams) -> None:
        """Kafka's updateRequestParams: what the client sent for this partition now."""
        self.fetch_offset: int = p.fetch_offset
        self.partition_max_bytes: int = p.partition_max_bytes
        self.current_leader_epoch: int = getattr(p, "current_leader_epoch", -1)
        self.last_fetched_epoch: int = getattr(p, "last_fetched_epoch", -1)

    def must_respond(self, data: FetchPartition) -> bool:
        """Whether an incremental response includes this partition's `data`."""
        return bool(
            data.records
            or data.error_code
            or data.preferred_read_replica >= 0
            or data.high_watermark != self.high_watermark
            or data.last_stable_offset != self.last_stable_offset
            or data.log_start_offset != self.local_log_start
            or (data.diverging_epoch is not None and data.diverging_epoch.epoch >= 0)
        )

    def remember(self, data: FetchPartition) -> None:
        """What the client now knows (an error: the high watermark unknown, so the partition
        is sent again once the error is gone, as Kafka does)."""
        self.high_watermark = -1 if data.error_code else data.high_watermark
        self.last_stable_offset = data.last_stable_offset
        self.local_log_start = data.log_start_offset

    def watch(self, partition: Partition) -> None:
        """Be told (`set`) the next time `partition`'s high watermark moves."""
        partition.watch(self)  # type: ignore[arg-type]  # Partition._wake only calls set()
        self.watched = partition

    def unwatch(self) -> None:
        if self.watched is not None:
            self.watched.unwatch(self)  # type: ignore[arg-type]
            self.watched = None

    def set(self) -> None:
        """The high watermark moved (or the replica changed role or closed)."""
        self.watched = None  # the replica dropped this watcher when it woke it
        self.session.mark(self.key)


class FetchSession:
    """Kafka's FetchSession: a consumer's partitions on this broker, in fetch order."""

    def __init__(self, session_id: int, privileged: bool, uses_topic_ids: bool, now: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1  # the size the cache counts (-1: not in the cache)
        self.partitions: dict[Key, CachedPartition] = {}
        self.dirty: dict[Key, None] = {}  # to read at the next fetch, in fetch order
        self.waiter: anyio.Event | None = None  # a long poll of this session
        self.closed = False

    def __repr__(self) -> str:
        return f"FetchSession(id={self.id}, epoch={self.epoch}, partitions={len(self)})"

    def __len__(self) -> int:
        return len(self.partitions)

    def add(self, key: Key, p: PartitionParams) -> CachedPartition:
        """Add (or update) a partition from the request; it is read at the next fetch."""
        cached = self.partitions.get(key)
        if cached is None:
            cached = self.partitions[key] = CachedPartition(self, key, p)
        else:
            cached.update_request(p)
        self.dirty[key] = None
        return cached

    def forget(self, key: Key) -> None:
        cached = self.partitions.pop(key, None)
        if cached is not None:
            cached.unwatch()
            self.dirty.pop(key, None)

    def mark(self, key: Key) -> None:
        """A partition changed: read it at the next fetch, and wake a waiting one."""
        if key in self.partitions:
            self.dirty[key] = None
            if self.waiter is not None:
                self.waiter.set()

    def clean(self, key: Key, partition: Partition) -> None:
        """Nothing left to tell about this partition until its high watermark moves."""
        self.dirty.pop(key, None)
        cached = self.partitions.get(key)
        if cached is not None and cached.watched is None:
            cached.watch(partition)

    def to_back(self, key: Key) -> None:
        """A partition that returned records goes last in the next fetch's order (Kafka moves
        it to the end of the session's partition map), so a small max_bytes serves all in turn."""
        self.dirty.pop(key, None)
        self.dirty[key] = None

    def close(self) -> None:
        """Out of the cache: stop watching its replicas."""
        self.closed = True
        for cached in self.partitions.values():
            cached.unwatch()
        if self.waiter is not None:
            self.waiter.set()


class FetchSessionCache:
    """Kafka's FetchSessionCache (one shard): sessions by id, least recently used first."""

    def __init__(
        self,
        max_entries: int,
        eviction_ms: int,
        clock: Callable[[], int] = now_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.clock = clock
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}  # in last-used order (oldest first)
        self.num_partitions = 0
        self.evictions = 0
        self._evictions_logged = 0
        self._eviction_logged_at = -_EVICTION_LOG_INTERVAL_S

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def _new_session_id(self) -> int:
        """A random positive int32 no session here has (never 0, INVALID_SESSION_ID)."""
        while True:
            session_id = self._rng.randint(1, _MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id

    def maybe_create(
        self, privileged: bool, size: int, uses_topic_ids: bool
    ) -> FetchSession | None:
        """Kafka's maybeCreateSession: a new session for a full fetch of `size` partitions if
        there is room or one can be evicted; None: the fetch stays sessionless."""
        now = self.clock()
        if self.max_entries <= 0:
            return None
        if len(self._sessions) >= self.max_entries and not self._try_evict(privileged, size, now):
            log.debug("no fetch session created for %d partitions: the cache is full", size)
            return None
        session = FetchSession(self._new_session_id(), privileged, uses_topic_ids, now)
        self._sessions[session.id] = session
        self.touch(session, now)
        log.debug("created %r", session)
        return session

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Kafka's tryEvict: the least recently used session if stale, else the least
        valuable evictable one if the new session is worth at least as much."""
        oldest = next(iter(self._sessions.values()), None)
        if oldest is None:
            return False
        if now - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest, f"unused for {now - oldest.last_used_ms} ms")
            return True
        settled = now - self.eviction_ms
        candidates = [
            s
            for s in self._sessions.values()
            if s.creation_ms < settled or (privileged and not s.privileged)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        # Kafka's EvictableKey order; the new session's id counts as 0
        if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
            return False
        self._evict(victim, f"it has {victim.cached_size} partitions, the new one {size}")
        return True

    def _evict(self, session: FetchSession, why: str) -> None:
        log.debug("evicting fetch session %d: %s", session.id, why)
        self.remove(session)
        self.evictions += 1
        EVICTIONS.inc()
        now = time.monotonic()
        if now - self._eviction_logged_at >= _EVICTION_LOG_INTERVAL_S:
            log.info(
                "evicted %d fetch session(s) since the last report to make room for new ones: "
                "the cache of max.incremental.fetch.session.cache.slots=%d is full; their "
                "consumers fall back to a full fetch (raise the setting if this keeps happening)",
                self.evictions - self._evictions_logged,
                self.max_entries,
            )
            self._evictions_logged, self._eviction_logged_at = self.evictions, now

    def remove(self, session: FetchSession) -> None:
        if self._sessions.pop(session.id, None) is not None:
            self.num_partitions -= max(session.cached_size, 0)
            session.cached_size = -1
            session.close()
            self._gauges()

    def touch(self, session: FetchSession, now: int) -> None:
        """Kafka's touch: the session was used now; its size may have changed."""
        if self._sessions.pop(session.id, None) is None:
            return  # evicted meanwhile (a long poll outlived it)
        self._sessions[session.id] = session  # most recently used last
        session.last_used_ms = now
        self.num_partitions += len(session) - max(session.cached_size, 0)
        session.cached_size = len(session)
        self._gauges()

    def _gauges(self) -> None:
        SESSIONS.set(len(self._sessions))
        PARTITIONS_CACHED.set(self.num_partitions)
