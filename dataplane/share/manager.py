"""The share-partitions this broker leads (Kafka's SharePartitionManager): loading, fetching,
acknowledging, lock expiry and persistence around `SharePartitionState`.

A share-partition (group, topic id, partition) is loaded on its first ShareFetch from the
persister, which records the user partition's leader epoch; a partition never initialised
starts where share.auto.offset.reset says (earliest: the log start; latest: the high watermark
or, read_committed, the last stable offset; by_duration: the first record at or after now minus
the duration, as ListOffsets finds it, else latest). It is dropped when this broker stops
leading the partition or its leader epoch changes (the new leader loads it from the persister),
and when a write is fenced (a newer leader, or AlterShareGroupOffsets re-initialised it).

Every durable change (acknowledgement, release, lock expiry) is written with the whole window
before the client hears of it; writes of one share-partition are serialised and a write covers
every change made before it began, so acknowledgements arriving together share one write.
Acquisition is not written, as in Kafka. A write that fails is not rolled back: the next write
carries the change (the client has been told the error).

Lock expiry runs on one timer: a heap of (deadline, share-partition), one entry per ShareFetch
that acquired something; the share-partition releases what expired by then.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from dataplane.config_resources import by_duration_ms
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.offset_lookup import EARLIEST, LATEST
from dataplane.replica.offset_lookup import lookup as lookup_offset
from dataplane.share.acquire import FetchedPart, read_and_acquire
from dataplane.share.model import (
    AcknowledgeType,
    GroupSettings,
    Persister,
    ShareGroupSettings,
    SharePartitionKey,
    ShareState,
)
from dataplane.share.partition_state import AckBatch, Outcome, SharePartitionState
from dataplane.share.sessions import ShareSessionCache

if TYPE_CHECKING:
    from dataplane.replica.manager import ReplicaManager
    from dataplane.replica.partition import Partition

log = logging.getLogger("rafka.share")

_FENCED = (
    ErrorCode.fenced_leader_epoch,
    ErrorCode.fenced_state_epoch,
    ErrorCode.not_leader_or_follower,
)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class SharePartition:
    """One loaded share-partition: its state, the leader epoch it was loaded at, its writes."""

    def __init__(
        self,
        key: SharePartitionKey,
        partition: Partition,
        loaded: ShareState,
        settings: ShareGroupSettings,
    ) -> None:
        self.key = key
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        self.state_epoch = loaded.state_epoch
        self.state = SharePartitionState.from_share_state(
            loaded, settings.delivery_count_limit, settings.partition_max_record_locks
        )
        self.dropped = False
        self.version = 0  # durable changes made
        self.persisted = 0  # durable changes written
        self.write_lock = anyio.Lock()
        self._waiters: set[anyio.Event] = set()

    def __repr__(self) -> str:
        return f"share-partition {self.key.group_id}/{self.partition!r}"

    def configure(self, settings: ShareGroupSettings) -> None:
        """Group configs may change at any time; they apply from the next operation."""
        self.state.delivery_count_limit = settings.delivery_count_limit
        self.state.max_record_locks = settings.partition_max_record_locks

    def watch(self, event: anyio.Event) -> None:
        """Set `event` when records become available again (or the partition is dropped)."""
        self._waiters.add(event)

    def unwatch(self, event: anyio.Event) -> None:
        self._waiters.discard(event)

    def wake(self) -> None:
        for event in self._waiters:
            event.set()
        self._waiters.clear()


class SharePartitionManager:
    """The share-partitions led here, the share sessions, the lock-expiry timer."""

    def __init__(
        self,
        replicas: ReplicaManager,
        persister: Persister,
        settings: GroupSettings,
        max_sessions: int,
        session_idle_ms: int,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self._replicas = replicas
        self._persister = persister
        self._settings = settings
        self._clock = clock
        self.sessions = ShareSessionCache(max_sessions, session_idle_ms)
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        self._loading: dict[SharePartitionKey, anyio.Event] = {}
        self._by_partition: dict[tuple[str, int], set[SharePartitionKey]] = {}
        self._timers: list[tuple[int, int, SharePartitionKey]] = []
        self._timer_seq = 0
        self._timer_changed = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None
        replicas.leadership_listeners.append(self._on_leadership)

    def settings(self, group_id: str) -> ShareGroupSettings:
        return self._settings.share(group_id)

    def now(self) -> int:
        return self._clock()

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """The lock-expiry timer and background writes (expiry releases)."""
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            while True:
                now = self._clock()
                while self._timers and self._timers[0][0] <= now:
                    _, _, key = heapq.heappop(self._timers)
                    sp = self._partitions.get(key)
                    if sp is not None:
                        self._changed(sp, sp.state.expire_locks(now))
                self._timer_changed = anyio.Event()
                delay = (self._timers[0][0] - now) / 1000 if self._timers else None
                with anyio.move_on_after(delay):
                    await self._timer_changed.wait()

    def _on_leadership(self, partition: Partition) -> None:
        """Drop the share-partitions of a partition this broker no longer leads at the epoch
        they were loaded at."""
        keys = self._by_partition.get((partition.topic, partition.index))
        if not keys:
            return
        for key in list(keys):
            sp = self._partitions.get(key)
            if sp is not None and (
                not partition.is_leader or partition.leader_epoch != sp.leader_epoch
            ):
                self._drop(sp, f"leadership of {partition!r} moved")

    def _drop(self, sp: SharePartition, why: str) -> None:
        if sp.dropped:
            return
        sp.dropped = True
        if self._partitions.get(sp.key) is sp:
            del self._partitions[sp.key]
            keys = self._by_partition.get((sp.partition.topic, sp.partition.index))
            if keys is not None:
                keys.discard(sp.key)
                if not keys:
                    del self._by_partition[(sp.partition.topic, sp.partition.index)]
        sp.wake()
        log.info("%r unloaded: %s", sp, why)

    # -- loading -----------------------------------------------------------------------------

    async def share_partition(
        self, group_id: str, topic: str, topic_id: bytes, index: int
    ) -> SharePartition:
        """The loaded share-partition, loading it if needed. Raises the partition's error
        (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION...) or the persister's; a share
        group needs an id (Kafka fails the partition with UNKNOWN_SERVER_ERROR)."""
        if not group_id.strip():
            log.info("ShareFetch of %s-%d refused: the group id is empty", topic, index)
            raise KafkaError(ErrorCode.unknown_server_error, "GroupId must not be empty")
        key = SharePartitionKey(group_id, uuid.UUID(bytes=topic_id), index)
        while True:
            partition = self._replicas.leader_partition(topic, index)
            sp = self._partitions.get(key)
            if sp is not None and sp.leader_epoch == partition.leader_epoch:
                return sp
            if sp is not None:
                self._drop(sp, "a newer leader epoch")
            loading = self._loading.get(key)
            if loading is None:
                break
            await loading.wait()
        done = self._loading[key] = anyio.Event()
        try:
            return await self._load(key, partition)
        finally:
            del self._loading[key]
            done.set()

    def loaded(self, group_id: str, topic: str, topic_id: bytes, index: int) -> SharePartition:
        """The share-partition if it is loaded (acknowledgements never load one: a partition
        not loaded here has no records acquired here; Kafka answers
        UNKNOWN_TOPIC_OR_PARTITION)."""
        partition = self._replicas.leader_partition(topic, index)
        sp = self._partitions.get(SharePartitionKey(group_id, uuid.UUID(bytes=topic_id), index))
        if sp is None or sp.leader_epoch != partition.leader_epoch:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                f"the share-partition of group {group_id} on {topic}-{index} is not loaded here",
            )
        return sp

    async def _load(self, key: SharePartitionKey, partition: Partition) -> SharePartition:
        epoch = partition.leader_epoch
        settings = self.settings(key.group_id)
        state = await self._persister.read(key, epoch)
        if state is None:
            start = self._initial_offset(partition, settings)
            state = await self._persister.initialize(key, start)
            log.info(
                "share group %s starts on %r at offset %d (share.auto.offset.reset=%s)",
                key.group_id,
                partition,
                start,
                settings.auto_offset_reset,
            )
        if not partition.is_leader or partition.leader_epoch != epoch:
            raise KafkaError(ErrorCode.not_leader_or_follower, "leadership moved while loading")
        sp = SharePartition(key, partition, state, settings)
        self._partitions[key] = sp
        self._by_partition.setdefault((partition.topic, partition.index), set()).add(key)
        log.info(
            "%r loaded at leader epoch %d: start offset %d, %d offsets in flight",
            sp,
            epoch,
            sp.state.start_offset,
            sp.state.in_flight(),
        )
        return sp

    def _initial_offset(self, partition: Partition, settings: ShareGroupSettings) -> int:
        """Where a share group starts reading a partition (share.auto.offset.reset)."""
        strategy = settings.auto_offset_reset
        isolation = settings.isolation_level
        if strategy == "earliest":
            return lookup_offset(partition, EARLIEST, isolation)[0]
        if strategy.startswith("by_duration:"):
            duration = by_duration_ms(strategy[len("by_duration:") :])
            if duration is not None:
                offset, _ = lookup_offset(partition, max(0, self._clock() - duration), isolation)
                if offset >= 0:
                    return offset
        return lookup_offset(partition, LATEST, isolation)[0]

    # -- fetching ----------------------------------------------------------------------------

    def acquire(
        self,
        sp: SharePartition,
        member: str,
        settings: ShareGroupSettings,
        max_bytes: int,
        min_one_batch: bool,
        max_records: int,
        strict: bool,
    ) -> FetchedPart:
        """Acquire for `member` what the share-partition has (raises `LogError`)."""
        sp.configure(settings)
        now = self._clock()
        self._changed(sp, sp.state.expire_locks(now))
        deadline = now + settings.record_lock_duration_ms
        part = read_and_acquire(
            sp.state,
            sp.partition,
            member,
            settings.isolation_level,
            max_bytes,
            min_one_batch,
            max_records,
            deadline,
            strict,
        )
        if part.acquired:
            self._schedule(deadline, sp.key)
        return part

    def _schedule(self, deadline: int, key: SharePartitionKey) -> None:
        self._timer_seq += 1
        first = self._timers[0][0] if self._timers else None
        heapq.heappush(self._timers, (deadline, self._timer_seq, key))
        if first is None or deadline < first:
            self._timer_changed.set()

    # -- acknowledging -----------------------------------------------------------------------

    async def acknowledge(
        self, sp: SharePartition, member: str, batches: list[AckBatch]
    ) -> tuple[ErrorCode, str | None]:
        """Apply and persist `member`'s acknowledgements: (error, message) for the
        partition."""
        if sp.dropped:
            return ErrorCode.not_leader_or_follower, None
        settings = self.settings(sp.key.group_id)
        sp.configure(settings)
        now = self._clock()
        self._changed(sp, sp.state.expire_locks(now), persist=False)
        outcome = sp.state.acknowledge(member, batches, now + settings.record_lock_duration_ms)
        if outcome.error != ErrorCode.none:
            return outcome.error, outcome.message
        if any(AcknowledgeType.RENEW in b.types for b in batches):
            self._schedule(now + settings.record_lock_duration_ms, sp.key)
        self._changed(sp, outcome, persist=False)
        try:
            await self.persist(sp)
        except KafkaError as e:
            return e.code, e.message
        return ErrorCode.none, None

    def connection_closed(self, connection: object, keys: Iterable[tuple[str, str]]) -> None:
        """A client connection closed: the share sessions it opened end and their members'
        acquired records are released now, not at lock expiry (Kafka's ShareSessionCache
        disconnect listener)."""
        for session in self.sessions.close_connection(connection, keys):
            log.info(
                "share session of member %s of group %s ended with its connection; "
                "releasing its acquired records",
                session.member_id,
                session.group_id,
            )
            if self._task_group is not None:
                self._task_group.start_soon(
                    self.release_member, session.group_id, session.member_id, session.partitions
                )

    async def release_member(
        self, group_id: str, member: str, keys: Iterable[tuple[bytes, int]]
    ) -> None:
        """A share session closed: release what `member` holds in its partitions here, and
        persist (Kafka completes the closing ShareFetch once released)."""
        for topic_id, index in keys:
            key = SharePartitionKey(group_id, uuid.UUID(bytes=topic_id), index)
            sp = self._partitions.get(key)
            if sp is None:
                continue
            outcome = sp.state.release_member(member)
            self._changed(sp, outcome, persist=False)
            if outcome.durable:
                try:
                    await self.persist(sp)
                except KafkaError as e:
                    log.warning("%r: releasing member %s's records: %s", sp, member, e)

    # -- persistence -------------------------------------------------------------------------

    def _changed(self, sp: SharePartition, outcome: Outcome, persist: bool = True) -> None:
        """Count a durable change (written by the next write; in the background when
        `persist`), wake fetches waiting for records when the change lets them acquire:
        released records, or room in a full in-flight window. Any other acknowledgement
        leaves them waiting for new records, which the log wakes them for."""
        if outcome.durable:
            sp.version += 1
            if persist and self._task_group is not None:
                self._task_group.start_soon(self._persist_quietly, sp)
        if outcome.released or outcome.room:
            sp.wake()

    async def persist(self, sp: SharePartition) -> None:
        """Write the state once every change made so far is in it (raises KafkaError)."""
        target = sp.version
        async with sp.write_lock:
            if sp.persisted >= target:
                return  # a write that began after our change carried it
            if sp.dropped:
                raise KafkaError(ErrorCode.not_leader_or_follower, f"{sp!r} was unloaded")
            version = sp.version
            state = sp.state.to_share_state(sp.state_epoch, sp.leader_epoch)
            try:
                await self._persister.write(sp.key, state)
            except KafkaError as e:
                if e.code in _FENCED:
                    self._drop(sp, f"its state write was fenced ({e.code.name})")
                else:
                    log.warning(
                        "%r: writing its state failed (%s); the next write retries it — check "
                        "the leaders of __share_group_state",
                        sp,
                        e,
                    )
                raise
            sp.persisted = max(sp.persisted, version)

    async def _persist_quietly(self, sp: SharePartition) -> None:
        with contextlib.suppress(KafkaError):  # logged by persist; the next write retries
            await self.persist(sp)
