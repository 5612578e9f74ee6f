"""Coordinators that live on the leaders of an internal topic's partitions (Kafka's
CoordinatorRuntime): the group coordinator on `__consumer_offsets`, later the transaction
coordinator on `__transaction_state` and the share coordinator on `__share_group_state`, each
a kind of `Shard` on the same runtime.

A key (a group id) maps to one partition of the internal topic; whichever broker leads that
partition coordinates the key. Its state is a *shard* rebuilt from the partition's records
when the broker becomes leader (clients get COORDINATOR_LOAD_IN_PROGRESS meanwhile) and
dropped when leadership moves (clients get NOT_COORDINATOR and look the coordinator up
again). A broker whose lease with the meta service may have lapsed (replica/meta_lease.py)
answers NOT_COORDINATOR too, before the meta service can fence it and move its partitions, so
a broker cut off from the meta nodes never coordinates next to the new leader. Every change is
a record appended to the partition and replicated with acks=all semantics before the client
hears of it, so a new coordinator finds it after a failover.

The load survives whatever the partition holds (Kafka's CoordinatorLoaderImpl never takes the
broker down): records that cannot be decoded are logged and skipped, and any other error fails
that partition's load only (Kafka's FAILED state: its keys get NOT_COORDINATOR until a new
leader epoch loads it again), never the runtime's task group, so the broker serves on.

Transactional writes (TxnOffsetCommit's offsets) are appended as a transactional batch of the
producer, and a transaction marker written to the partition later ends them; a shard that
takes part in transactions (`TransactionalShard`) replays them through its own methods.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, runtime_checkable

import anyio

from dataplane.log.batch import (
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    BatchInfo,
    batch_size_at,
    header_at,
)
from dataplane.log.control import read_marker
from dataplane.log.records import Record, build_batch, decode_records
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.producer_state import increment_sequence
from dataplane.topic_admin import NewTopic

if TYPE_CHECKING:
    from dataplane.metadata_cache import MetadataCache
    from dataplane.replica.manager import ReplicaManager
    from dataplane.replica.partition import Partition
    from dataplane.replica.producer_state import VerificationGuard
    from proto.meta_pb2 import CreateTopicResult

CreateTopics = Callable[[Sequence[NewTopic]], Awaitable[Sequence["CreateTopicResult"]]]
"""Creates topics through the meta service (`topic_admin.create_topics` of this broker)."""

log = logging.getLogger("rafka.coordinator")

_LOAD_CHUNK_BYTES = 1 << 20
_WRITE_TIMEOUT_S = 30.0


def java_string_hash(text: str) -> int:
    """Java's String.hashCode, which Kafka uses to place a group on a partition."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's Utils.abs(key.hashCode) % partitions (abs(Integer.MIN_VALUE) is 0 there)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class Shard(Protocol):
    """The coordinator state of one internal partition: what the runtime needs of a shard,
    whatever its kind (groups, transactions, share-group state)."""

    def replay(self, record: Record) -> None:
        """Apply one record of the partition, at load time and after each write."""

    def on_loaded(self) -> None:
        """The partition has been replayed: the shard now serves clients (start its timers)."""

    def on_unloaded(self) -> None:
        """The shard is dropped (leadership moved, or a new leader epoch replaced it): answer
        parked requests, stop timers."""


@runtime_checkable
class TransactionalShard(Shard, Protocol):
    """A shard whose partition holds transactional batches and markers (the group shard:
    TxnOffsetCommit). Other shards replay those batches' records with `replay` and skip
    markers."""

    def replay_transactional(self, producer_id: int, producer_epoch: int, record: Record) -> None:
        """Apply a record of a producer's transactional batch: pending until its marker."""

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """A marker ended the producer's transaction in this partition."""


S = TypeVar("S", bound=Shard)


class _Loaded(Generic[S]):
    def __init__(self, shard: S, leader_epoch: int) -> None:
        self.shard = shard
        self.leader_epoch = leader_epoch
        self.ready = anyio.Event()
        self.failed = False  # the load failed: its keys are NOT_COORDINATOR, the shard unloaded

    @property
    def serving(self) -> bool:
        return self.ready.is_set() and not self.failed


# The settings of each internal topic (their prefix: <prefix>.num.partitions,
# <prefix>.replication.factor), named in what the operator is told to change.
_SETTINGS = {
    "__consumer_offsets": "offsets.topic",
    "__transaction_state": "transaction.state.log",
    "__share_group_state": "share.coordinator.state.topic",
}
_WARN_EVERY_S = 30.0  # clients retry FindCoordinator many times a second: say why once a while


class InternalTopic:
    """An internal topic whose partition leaders coordinate keys: placement and creation.

    As in Kafka, the topic is created on first use with its configured replication factor, once
    that many brokers are alive, never with fewer replicas (a single-broker cluster lowers the
    setting, as `rafka up --brokers 1` does); until then its coordinators are
    COORDINATOR_NOT_AVAILABLE, and the log says why and what to do."""

    def __init__(
        self,
        cache: MetadataCache,
        create_topics: CreateTopics,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str],
    ) -> None:
        self._cache = cache
        self._create_topics = create_topics
        self.name = name
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.configs = configs
        self._warned_at = -_WARN_EVERY_S

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    async def coordinator(self, key: str) -> int:
        """The broker id coordinating `key`, creating the topic on first use;
        COORDINATOR_NOT_AVAILABLE while it cannot be created or the key's partition has no
        live leader."""
        info = self._cache.topics.get(self.name)
        if info is None:
            await self.create()
            info = self._cache.topics.get(self.name)
        if info is None:
            raise KafkaError(ErrorCode.coordinator_not_available, f"{self.name} is being created")
        index = self.partition_for(key)
        if index >= len(info.partitions):  # Kafka finds no partition metadata: the same error
            raise self._unavailable(
                f"{self.name} has {len(info.partitions)} partition(s) but "
                f"{self._setting('num.partitions')} is {self.partitions}",
                "the keys placed on the missing partitions have no coordinator. The topic was "
                "created otherwise (by a client, or with another setting): set "
                f"{self._setting('num.partitions')}={len(info.partitions)} on every broker",
            )
        leader = info.partitions[index].leader
        broker = self._cache.brokers.get(leader)
        if leader < 0 or broker is None or broker.fenced:
            raise KafkaError(ErrorCode.coordinator_not_available)
        return leader

    async def create(self) -> None:
        """Create the topic if enough brokers are alive (Kafka's replica placement refuses a
        replication factor above them); COORDINATOR_NOT_AVAILABLE otherwise."""
        rf = self.replication_factor
        live = len(self._cache.live_brokers())
        if live < rf:
            setting = self._setting("replication.factor")
            raise self._unavailable(
                f"{setting}={rf} needs {rf} live brokers, {live} are up",
                f"{self.name} is not created until {rf} brokers are up: start more brokers, or "
                f"lower {setting} (to 1 for a single-broker cluster; `rafka up` sets "
                "min(3, brokers))",
            )
        configs = dict(self.configs)
        if "min.insync.replicas" in configs:
            # never above the replication factor: the coordinators could never write (Kafka
            # would create the topic so, a setting lowered alone breaking its coordinators)
            configs["min.insync.replicas"] = str(min(int(configs["min.insync.replicas"]), rf))
        topic = NewTopic(self.name, self.partitions, rf, configs=configs, internal=True)
        (result,) = await self._create_topics([topic])
        if result.error_code == ErrorCode.none:
            log.info(
                "created %s: %d partitions, replication factor %d", self.name, self.partitions, rf
            )
        elif result.error_code != ErrorCode.topic_already_exists:
            raise self._unavailable(
                f"creating {self.name} failed: {result.error_message}",
                "it is tried again at the clients' next request",
            )

    def _setting(self, suffix: str) -> str:
        prefix = _SETTINGS.get(self.name)
        return f"{prefix}.{suffix}" if prefix else f"the {suffix} of {self.name}"

    def _unavailable(self, why: str, what_to_do: str) -> KafkaError:
        """COORDINATOR_NOT_AVAILABLE for the client, `why` its message; a warning that says
        why and what to do (once in a while: clients retry all the time)."""
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning(
                "the coordinators of %s are not available (COORDINATOR_NOT_AVAILABLE): %s; %s",
                self.name,
                why,
                what_to_do,
            )
        return KafkaError(ErrorCode.coordinator_not_available, why)


class CoordinatorRuntime(Generic[S]):
    """Loads and writes the shards of one internal topic's partitions this broker leads."""

    def __init__(
        self, replicas: ReplicaManager, topic: InternalTopic, new_shard: Callable[[int], S]
    ) -> None:
        self._replicas = replicas
        self.topic = topic
        self._new_shard = new_shard
        self._shards: dict[int, _Loaded[S]] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        replicas.leadership_listeners.append(self._on_leadership)

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                for partition in list(self._replicas.partitions.values()):
                    self._on_leadership(partition)
                await anyio.sleep_forever()
        finally:
            # Stopped (the broker shuts down): its metadata watcher may still apply a change,
            # and a partition led then loads nothing, on a task group that has ended.
            self._task_group = None

    def loaded_shards(self) -> list[S]:
        """The shards this broker serves right now (loading ones excluded)."""
        return [loaded.shard for loaded in self._shards.values() if loaded.serving]

    def is_loading(self) -> bool:
        """Whether some partition this broker leads is still being loaded."""
        return any(
            not loaded.ready.is_set() and not loaded.failed for loaded in self._shards.values()
        )

    def shard(self, key: str) -> S:
        """The loaded shard that owns `key` on this broker, or the error the client expects."""
        loaded = self._shards.get(self.topic.partition_for(key))
        if loaded is None or loaded.failed or self._replicas.meta_lease.lapsed():
            raise KafkaError(ErrorCode.not_coordinator)
        if not loaded.ready.is_set():
            raise KafkaError(ErrorCode.coordinator_load_in_progress)
        return loaded.shard

    def partition(self, key: str) -> Partition | None:
        """This broker's replica of the key's partition, if it has one."""
        return self._replicas.partitions.get((self.topic.name, self.topic.partition_for(key)))

    # -- writing ---------------------------------------------------------------------------

    def append(
        self,
        key: str,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        replay: bool = True,
        producer: tuple[int, int] | None = None,
        verification_guard: VerificationGuard | None = None,
    ) -> Awaitable[None]:
        """Append `records` (key, value; None = tombstone) to the key's partition and apply
        them to its shard now, synchronously — raising NOT_COORDINATOR or the partition's
        replication error — and return an awaitable that completes once the records are
        replicated (it must be awaited: NOT_COORDINATOR if leadership moved, or the
        replication error). A shard whose in-memory state already reflects the records (a
        group state machine persisting its state) passes replay=False.

        `producer` (producer id, epoch): a transactional batch of that producer, which its
        transaction's marker commits or aborts later (raises INVALID_PRODUCER_EPOCH when the
        partition has seen a newer epoch of the producer); when it opens the transaction in the
        partition it needs the `verification_guard` the partition gave before the transaction
        coordinator was asked (raises INVALID_TXN_STATE otherwise, KIP-890)."""
        index = self.topic.partition_for(key)
        loaded = self._shards.get(index)
        partition = self._replicas.partitions.get((self.topic.name, index))
        if (
            loaded is None
            or loaded.failed
            or partition is None
            or not partition.is_leader
            or self._replicas.meta_lease.lapsed()
        ):
            raise KafkaError(ErrorCode.not_coordinator)
        epoch = partition.leader_epoch
        if (code := partition.replication_error()) != ErrorCode.none:
            raise KafkaError(code)
        now = time.time_ns() // 1_000_000
        if producer is None:
            batch = build_batch(records, now)
        else:
            batch = build_batch(
                records,
                now,
                producer_id=producer[0],
                producer_epoch=producer[1],
                base_sequence=next_sequence(partition, *producer),
                attributes=ATTR_TRANSACTIONAL,
            )
        result = partition.append(batch, now, verification_guard)
        if replay:
            shard = loaded.shard
            for i, (record_key, value) in enumerate(records):
                record = Record(result.base_offset + i, now, record_key, value, ())
                if producer is not None and isinstance(shard, TransactionalShard):
                    shard.replay_transactional(producer[0], producer[1], record)
                else:
                    shard.replay(record)
        return self._replicated(partition, result.last_offset + 1, epoch)

    async def _replicated(self, partition: Partition, end_offset: int, epoch: int) -> None:
        code = await partition.wait_for_replication(end_offset, epoch, _WRITE_TIMEOUT_S)
        if code == ErrorCode.not_leader_or_follower:
            raise KafkaError(ErrorCode.not_coordinator)
        if code != ErrorCode.none:
            raise KafkaError(code)

    # -- loading ---------------------------------------------------------------------------

    def _on_leadership(self, partition: Partition) -> None:
        if partition.topic != self.topic.name:
            return
        loaded = self._shards.get(partition.index)
        if partition.is_leader:
            if loaded is not None and loaded.leader_epoch == partition.leader_epoch:
                return
            if self._task_group is None:
                return  # run() takes every partition this broker leads when it starts
            if loaded is not None:
                _unload(loaded)
            loaded = self._shards[partition.index] = _Loaded(
                self._new_shard(partition.index), partition.leader_epoch
            )
            self._task_group.start_soon(self._load, partition, loaded)
        elif loaded is not None:
            log.info("no longer coordinator for %r", partition)
            del self._shards[partition.index]
            _unload(loaded)

    async def _load(self, partition: Partition, loaded: _Loaded[S]) -> None:
        """Replay the whole partition into the shard, a chunk at a time (others keep running),
        up to its end at the time the last chunk is read: a marker written meanwhile is
        replayed here, and its writer's `complete_transaction` finds the shard not loaded.
        Whatever goes wrong fails this partition's load only (`_load_failed`)."""
        start = time.monotonic()
        progress = _Progress(partition.log.log_start_offset)
        try:
            await self._replay_log(partition, loaded.shard, progress)
            if self._shards.get(partition.index) is not loaded:
                return  # leadership moved meanwhile: the shard was dropped
            loaded.ready.set()
            loaded.shard.on_loaded()
        except Exception as e:  # a bug, or bytes nothing here anticipated
            if self._shards.get(partition.index) is loaded:
                self._load_failed(partition, loaded, progress.offset, e)
            else:  # e.g. the log was closed: this broker no longer leads it at that epoch
                log.info("%r: stopped loading, no longer its leader (%s)", partition, e)
            return
        log.info(
            "loaded %r (%d records; %d batches with unreadable records) in %.2fs: "
            "coordinating its keys",
            partition,
            progress.records,
            progress.skipped,
            time.monotonic() - start,
        )

    async def _replay_log(self, partition: Partition, shard: S, progress: _Progress) -> None:
        while (start := progress.offset) < (end := partition.log.log_end_offset):
            data = partition.log.read(start, _LOAD_CHUNK_BYTES, end, True)
            if not data:
                break
            for batch in _split_batches(data):
                info = header_at(batch, 0)
                self._replay_batch(shard, partition, info, batch, progress)
                # past the batch's last offset: compaction may have removed its last records,
                # or all of them (Kafka keeps such a batch, empty, for its producer state)
                progress.offset = max(progress.offset, info.last_offset + 1)
            if progress.offset == start:  # damaged batch headers: never loop on the same read
                raise ValueError(f"the batches read at offset {start} end before it")
            await anyio.sleep(0)

    def _load_failed(
        self, partition: Partition, loaded: _Loaded[S], offset: int, error: Exception
    ) -> None:
        """Kafka's FAILED coordinator state: the shard is dropped, its keys answered
        NOT_COORDINATOR; a new leader epoch of the partition loads it again."""
        log.error(
            "loading the coordinator state of %r failed at offset %d: %s. The keys of this "
            "partition are unavailable (NOT_COORDINATOR) until it is loaded again, when its "
            "leadership moves or this broker restarts; every other partition is served. This "
            "is a bug or a damaged log: report it with this message and its traceback",
            partition,
            offset,
            f"{type(error).__name__}: {error}",
            exc_info=error,
        )
        if self._shards.get(partition.index) is loaded:
            _unload(loaded)
            loaded.failed = True

    @staticmethod
    def _replay_batch(
        shard: Shard, partition: Partition, info: BatchInfo, batch: bytes, progress: _Progress
    ) -> None:
        """Replay one batch (Kafka's CoordinatorLoaderImpl). Records that cannot be decoded are
        skipped with a warning; an error of the shard's replay is raised."""
        txn_shard = shard if isinstance(shard, TransactionalShard) else None
        if info.is_control:
            if txn_shard is None or not info.is_transactional or info.record_count == 0:
                return
            try:
                commit, _coordinator_epoch = read_marker(batch)
            except Exception as e:  # InvalidMarkerError, or bytes that do not decode
                _skipped(partition, info, info.base_offset, e, progress)
                return
            txn_shard.replay_end_transaction(info.producer_id, info.producer_epoch, commit)
            progress.records += 1
            return
        records = decode_records(batch)
        next_offset = info.base_offset
        while True:
            try:
                record = next(records, None)
            except Exception as e:  # a record that does not decode: the rest of the batch too
                _skipped(partition, info, next_offset, e, progress)
                return
            if record is None:
                return
            if txn_shard is not None and info.is_transactional:
                txn_shard.replay_transactional(info.producer_id, info.producer_epoch, record)
            else:
                shard.replay(record)
            progress.records += 1
            next_offset = record.offset + 1


class _Progress:
    """How far a load got: the offset it reads from, the records replayed, the batches whose
    unreadable records it skipped."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.records = 0
        self.skipped = 0


def _skipped(
    partition: Partition, info: BatchInfo, offset: int, error: Exception, progress: _Progress
) -> None:
    """Log the records of a batch the load cannot read, from `offset` to the batch's end."""
    progress.skipped += 1
    log.warning(
        "%r: skipped the unreadable records at offset %d to %d while loading the coordinator "
        "state (%s: %s); the state they held is lost, the rest of the partition is loaded. A "
        "damaged log or a writer that is not a coordinator: check the partition's log "
        "directory",
        partition,
        offset,
        info.last_offset,
        type(error).__name__,
        error,
    )


def _unload(loaded: _Loaded[S]) -> None:
    """Drop a shard, once (a failed load has dropped it already)."""
    if loaded.failed:
        return
    try:
        loaded.shard.on_unloaded()
    except Exception:
        log.exception("unloading a coordinator shard failed")


def next_sequence(partition: Partition, producer_id: int, producer_epoch: int) -> int:
    """The sequence of a coordinator's next batch for a producer: the coordinator is the only
    writer of the producer's batches in its partition (Kafka appends them as the coordinator,
    unchecked), so it continues the producer's last one there (0 in a new epoch)."""
    entry = partition.producers.last_entry(producer_id)
    if entry is None or entry.epoch != producer_epoch or entry.last_seq < 0:
        return 0
    return increment_sequence(entry.last_seq, 1)


def _split_batches(data: bytes) -> list[bytes]:
    """The whole batches of a log read; raises ValueError where the framing is broken (a
    damaged log: where the next batch starts is unknown)."""
    out, pos = [], 0
    while pos < len(data):
        size = batch_size_at(data, pos) if pos + HEADER_SIZE <= len(data) else 0
        if size < HEADER_SIZE or pos + size > len(data):
            raise ValueError(f"a batch at byte {pos} of a read has a broken length ({size})")
        out.append(data[pos : pos + size])
        pos += size
    return out
