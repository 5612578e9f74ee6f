"""Coordinators that live on the leaders of an internal topic's partitions (Kafka's
CoordinatorRuntime): the group coordinator on `__consumer_offsets`, later the transaction
coordinator on `__transaction_state` and the share coordinator on `__share_group_state`, each
a kind of `Shard` on the same runtime.

A key (a group id) maps to one partition of the internal topic; whichever broker leads that
partition coordinates the key. Its state is a *shard* rebuilt from the partition's records
when the broker becomes leader (clients get COORDINATOR_LOAD_IN_PROGRESS meanwhile) and
dropped when leadership moves (clients get NOT_COORDINATOR and look the coordinator up
again). Every change is a record appended to the partition and replicated with acks=all
semantics before the client hears of it, so a new coordinator finds it after a failover.

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

from dataplane.log.batch import ATTR_TRANSACTIONAL, BatchInfo, batch_size_at, header_at
from dataplane.log.control import InvalidMarkerError, read_marker
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


class InternalTopic:
    """An internal topic whose partition leaders coordinate keys: placement and creation."""

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

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    async def coordinator(self, key: str) -> int:
        """The broker id coordinating `key`, creating the topic on first use (with
        min(replication factor, live brokers) replicas); COORDINATOR_NOT_AVAILABLE while the
        partition has no live leader."""
        info = self._cache.topics.get(self.name)
        if info is None:
            await self._create()
            info = self._cache.topics.get(self.name)
        if info is None:
            raise KafkaError(ErrorCode.coordinator_not_available, f"{self.name} is being created")
        leader = info.partitions[self.partition_for(key)].leader
        broker = self._cache.brokers.get(leader)
        if leader < 0 or broker is None or broker.fenced:
            raise KafkaError(ErrorCode.coordinator_not_available)
        return leader

    async def _create(self) -> None:
        rf = max(1, min(self.replication_factor, len(self._cache.live_brokers())))
        configs = dict(self.configs)
        if "min.insync.replicas" in configs:
            # a small cluster gets fewer replicas than asked for: its coordinators must still
            # be able to write (Kafka refuses to create the topic instead)
            configs["min.insync.replicas"] = str(min(int(configs["min.insync.replicas"]), rf))
        topic = NewTopic(self.name, self.partitions, rf, configs=configs, internal=True)
        (result,) = await self._create_topics([topic])
        if result.error_code == ErrorCode.none:
            log.info(
                "created %s: %d partitions, replication factor %d", self.name, self.partitions, rf
            )
        elif result.error_code != ErrorCode.topic_already_exists:
            log.warning("creating %s failed: %s", self.name, result.error_message)


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
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            for partition in list(self._replicas.partitions.values()):
                self._on_leadership(partition)
            await anyio.sleep_forever()

    def loaded_shards(self) -> list[S]:
        """The shards this broker serves right now (loading ones excluded)."""
        return [loaded.shard for loaded in self._shards.values() if loaded.ready.is_set()]

    def is_loading(self) -> bool:
        """Whether some partition this broker leads is still being loaded."""
        return any(not loaded.ready.is_set() for loaded in self._shards.values())

    def shard(self, key: str) -> S:
        """The loaded shard that owns `key` on this broker, or the error the client expects."""
        loaded = self._shards.get(self.topic.partition_for(key))
        if loaded is None:
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
        if loaded is None or partition is None or not partition.is_leader:
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
                _unload(loaded.shard)
            loaded = self._shards[partition.index] = _Loaded(
                self._new_shard(partition.index), partition.leader_epoch
            )
            self._task_group.start_soon(self._load, partition, loaded)
        elif loaded is not None:
            log.info("no longer coordinator for %r", partition)
            del self._shards[partition.index]
            _unload(loaded.shard)

    async def _load(self, partition: Partition, loaded: _Loaded[S]) -> None:
        """Replay the whole partition into the shard, a chunk at a time (others keep running),
        up to its end at the time the last chunk is read: a marker written meanwhile is
        replayed here, and its writer's `complete_transaction` finds the shard not loaded."""
        start = time.monotonic()
        offset = partition.log.log_start_offset
        count = 0
        while offset < (end := partition.log.log_end_offset):
            data = partition.log.read(offset, _LOAD_CHUNK_BYTES, end, True)
            if not data:
                break
            for batch in _split_batches(data):
                info = header_at(batch, 0)
                count += self._replay_batch(loaded.shard, partition, info, batch)
                # past the batch's last offset: compaction may have removed its last records,
                # or all of them (Kafka keeps such a batch, empty, for its producer state)
                offset = info.last_offset + 1
            await anyio.sleep(0)
        if self._shards.get(partition.index) is loaded:
            loaded.ready.set()
            loaded.shard.on_loaded()
            log.info(
                "loaded %r (%d records) in %.2fs: coordinating its keys",
                partition,
                count,
                time.monotonic() - start,
            )

    @staticmethod
    def _replay_batch(shard: Shard, partition: Partition, info: BatchInfo, batch: bytes) -> int:
        """Replay one batch (Kafka's CoordinatorLoaderImpl); returns its record count."""
        txn_shard = shard if isinstance(shard, TransactionalShard) else None
        if info.is_control:
            if txn_shard is None or not info.is_transactional or info.record_count == 0:
                return 0
            try:
                commit, _coordinator_epoch = read_marker(batch)
            except InvalidMarkerError as e:
                log.warning("%r: skipped a control batch: %s", partition, e)
                return 0
            txn_shard.replay_end_transaction(info.producer_id, info.producer_epoch, commit)
            return 1
        count = 0
        for record in decode_records(batch):
            if txn_shard is not None and info.is_transactional:
                txn_shard.replay_transactional(info.producer_id, info.producer_epoch, record)
            else:
                shard.replay(record)
            count += 1
        return count


def _unload(shard: Shard) -> None:
    try:
        shard.on_unloaded()
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
    out, pos = [], 0
    while pos < len(data):
        size = batch_size_at(data, pos)
        out.append(data[pos : pos + size])
        pos += size
    return out
