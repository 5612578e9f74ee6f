"""The broker's group coordinator: shards on `__consumer_offsets`, their timers, offsets expiry
and the group registry of the meta service.

`CoordinatorRuntime` (runtime.py) loads and drops the shards as leadership moves; this module
gives each shard its services (appends through the runtime, background work in its own task
group, the cluster's topics for consumer groups' assignments), fires the shards' timers
(session, rebalance and sync expirations), expires offsets every
offsets.retention.check.interval.ms, and keeps the meta service's group registry in step with
the groups the shards create and delete. Handlers reach it as `broker.group_coordinator`.

Transactional offsets: `txn_offset_commit` appends a TxnOffsetCommit's offsets as a
transactional batch of the producer (pending in the shard), and `complete_transaction` ends
them once the transaction's marker is written to the partition this broker leads.

It is given only what it uses: its settings, the metadata cache (the cluster's topics), the
replica manager (through its runtime), the internal topic and the meta service client.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import anyio

from dataplane.coordinator.assignors import ASSIGNORS, TopicMetadata
from dataplane.coordinator.base import GroupConfig, Records, ShardServices, map_append_error
from dataplane.coordinator.consumer.group import ConsumerGroupConfig
from dataplane.coordinator.offsets import CommitPartition
from dataplane.coordinator.runtime import CoordinatorRuntime, InternalTopic, next_sequence
from dataplane.coordinator.shard import GroupShard
from dataplane.coordinator.share.group import ShareGroupConfig
from dataplane.coordinator.streams.state import StreamsGroupConfig
from dataplane.coordinator.timer import monotonic_ms, wall_ms
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.client import MetaError

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.metadata_cache import MetadataCache, TopicInfo
    from dataplane.replica.manager import ReplicaManager
    from dataplane.share.group_settings import GroupConfigs
    from meta.client import MetaClient

log = logging.getLogger("rafka.coordinator")

_REGISTRY_FLUSH_S = 0.2
_REGISTRY_RETRY_S = 2.0


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        max_size=config.group_max_size,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
        offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
        offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
        consumer=ConsumerGroupConfig(
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            max_size=config.group_consumer_max_size,
            assignors=consumer_assignors(config.group_consumer_assignors),
        ),
        share=ShareGroupConfig(
            session_timeout_ms=config.group_share_session_timeout_ms,
            heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
            max_size=config.group_share_max_size,
        ),
        streams=StreamsGroupConfig(
            session_timeout_ms=config.group_streams_session_timeout_ms,
            heartbeat_interval_ms=config.group_streams_heartbeat_interval_ms,
            max_size=config.group_streams_max_size,
            num_standby_replicas=config.group_streams_num_standby_replicas,
            initial_rebalance_delay_ms=config.group_streams_initial_rebalance_delay_ms,
        ),
    )


def consumer_assignors(setting: str) -> tuple[str, ...]:
    """group.consumer.assignors: Kafka's names ("uniform", "range") or its class names
    (org.apache.kafka.coordinator.group.assignor.UniformAssignor, ...), the first the
    default."""
    names = []
    for item in setting.split(","):
        name = item.strip().rsplit(".", 1)[-1]
        if name.endswith("Assignor"):
            name = name[: -len("Assignor")].lower()
        if name not in ASSIGNORS:
            raise ValueError(
                f"group.consumer.assignors: unknown assignor {item.strip()!r} "
                f"(known: {', '.join(sorted(ASSIGNORS))})"
            )
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("group.consumer.assignors: no assignor")
    return tuple(names)


class ClusterTopics:
    """The cluster's topics as consumer groups assign them (name -> `TopicMetadata`), kept in
    step with the metadata cache. An entry is replaced only when the topic's id or partition
    count changes, so the groups' cached metadata hashes survive leader and ISR changes."""

    def __init__(self, cache: MetadataCache) -> None:
        self.by_name: dict[str, TopicMetadata] = {}
        for topic in cache.topics.values():
            self._changed(None, topic)
        cache.topic_listeners.append(self._changed)

    def _changed(self, old: TopicInfo | None, new: TopicInfo | None) -> None:
        if new is None:
            if old is not None:
                self.by_name.pop(old.name, None)
            return
        current = self.by_name.get(new.name)
        if (
            current is None
            or current.topic_id != new.topic_id
            or current.num_partitions != len(new.partitions)
        ):
            self.by_name[new.name] = TopicMetadata(new.topic_id, new.name, len(new.partitions))


class _Services(ShardServices):
    """The services of one shard, backed by the broker."""

    def __init__(self, coordinator: GroupCoordinator, index: int) -> None:
        self._coordinator = coordinator
        super().__init__(coordinator.config)
        self.group_settings = coordinator.group_settings
        self.shard = GroupShard(index, self)

    def clock_ms(self) -> int:
        return monotonic_ms()

    def now_ms(self) -> int:
        return wall_ms()

    def new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4()}"

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._coordinator.topics.by_name

    def append(self, group_id: str, records: Records, replay: bool) -> Awaitable[None]:
        return self._coordinator.runtime.append(group_id, records, replay=replay)

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._coordinator.spawn(fn)

    def timer_changed(self) -> None:
        self._coordinator.wake()

    def group_created(self, group_id: str) -> None:
        self._coordinator.registry.add(group_id)

    def loaded(self) -> None:
        self._coordinator.registry.reconcile(self.shard)
        self._coordinator.wake()

    def unloaded(self) -> None:
        self._coordinator.forget(self.shard)


class GroupRegistry:
    """Keeps the meta service's group registry in step, in the background and in batches:
    additions and removals are idempotent, so the last one asked for a group wins."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator
        self._pending: dict[str, bool] = {}  # group id -> registered (True) or removed
        self._reconcile: list[GroupShard] = []
        self._event: anyio.Event | None = None

    def add(self, group_id: str) -> None:
        self._pending[group_id] = True
        self._kick()

    def remove(self, group_ids: Sequence[str]) -> None:
        for group_id in group_ids:
            self._pending[group_id] = False
        self._kick()

    def reconcile(self, shard: GroupShard) -> None:
        """A shard finished loading: register its groups the registry misses and drop entries
        of its partition whose group it does not have (lost updates, crashes in between)."""
        self._reconcile.append(shard)
        self._kick()

    def _kick(self) -> None:
        if self._event is not None:
            self._event.set()

    async def run(self) -> None:
        meta = self._coordinator.meta
        topic = self._coordinator.runtime.topic
        while True:
            self._event = anyio.Event()
            if not self._pending and not self._reconcile:
                await self._event.wait()
            await anyio.sleep(_REGISTRY_FLUSH_S)  # batch what arrives meanwhile
            pending, self._pending = self._pending, {}
            shards, self._reconcile = self._reconcile, []
            try:
                for shard in shards:
                    if shard.unloaded:
                        continue
                    registered = dict(await meta.list_groups([shard.partition_index]))
                    for group_id in shard.groups:
                        if group_id not in registered:
                            pending.setdefault(group_id, True)
                    for group_id in registered:
                        if group_id not in shard.groups and not shard.unloaded:
                            pending.setdefault(group_id, False)
                added = [(g, topic.partition_for(g)) for g, keep in pending.items() if keep]
                removed = [g for g, keep in pending.items() if not keep]
                if added:
                    await meta.register_groups(added)
                if removed:
                    await meta.unregister_groups(removed)
                if added or removed:
                    log.debug("group registry: +%d -%d", len(added), len(removed))
            except Exception as e:  # MetaError: meta nodes unreachable; anything else: a bug
                if isinstance(e, MetaError):
                    log.warning("updating the group registry failed (%s); retrying", e)
                else:
                    log.exception("updating the group registry failed; retrying")
                for group_id, keep in pending.items():
                    self._pending.setdefault(group_id, keep)
                self._reconcile = shards + self._reconcile
                await anyio.sleep(_REGISTRY_RETRY_S)


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        cache: MetadataCache,
        replicas: ReplicaManager,
        topic: InternalTopic,
        meta: MetaClient,
        *,
        group_settings: GroupConfigs | None = None,
    ) -> None:
        self.config = config
        self.meta = meta
        self.group_settings = group_settings
        self.topics = ClusterTopics(cache)
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            replicas, topic, self.new_shard
        )
        self.registry = GroupRegistry(self)
        self._shards: dict[int, GroupShard] = {}  # every live shard (loading or loaded)
        self._task_group: anyio.abc.TaskGroup | None = None
        self._queued: list[Callable[[], Awaitable[None]]] = []
        self._wake: anyio.Event | None = None

    def new_shard(self, index: int) -> GroupShard:
        shard = _Services(self, index).shard
        self._shards[index] = shard
        return shard

    def forget(self, shard: GroupShard) -> None:
        if self._shards.get(shard.partition_index) is shard:
            del self._shards[shard.partition_index]

    # -- what handlers use ------------------------------------------------------------------

    def shard(self, group_id: str) -> GroupShard:
        """The loaded shard coordinating `group_id` here; KafkaError NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS otherwise."""
        return self.runtime.shard(group_id)

    def append(self, group_id: str, records: Records, replay: bool = True) -> Awaitable[None]:
        return self.runtime.append(group_id, records, replay=replay)

    def loaded_shards(self) -> list[GroupShard]:
        return self.runtime.loaded_shards()

    # -- transactional offsets ----------------------------------------------------------------

    async def txn_offset_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        instance_id: str | None,
        generation: int,
        partitions: Sequence[CommitPartition],
        verify: Callable[[str, int], Awaitable[ErrorCode]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit (Kafka's commitTransactionalOffset): each partition's error. The
        offsets are appended to the group's partition as a transactional batch of the
        producer and stay pending until the transaction's marker (`complete_transaction`).

        `verify(topic, partition)` asks the transaction coordinator whether the group's
        partition is in the producer's transaction (KIP-890; it adds it for transaction
        version 2); it is skipped when the partition already has the transaction open. The
        partition's verification guard, taken before, goes with the append: a marker written
        meanwhile voids it (INVALID_TXN_STATE, not a hanging transaction)."""
        every = [(p.topic, p.partition) for p in partitions]
        guard = None
        try:
            self.shard(group_id)
            partition = self.runtime.partition(group_id)
            if partition is not None:
                code, guard = await partition.verify_transaction(
                    producer_id,
                    next_sequence(partition, producer_id, producer_epoch),
                    producer_epoch,
                    functools.partial(verify, partition.topic, partition.index),
                )
                if code != ErrorCode.none:
                    return dict.fromkeys(every, map_append_error(code))
            shard = self.shard(group_id)  # again: it may have moved meanwhile
        except KafkaError as e:
            return dict.fromkeys(every, e.code)
        error = shard.validate_txn_offset_commit(
            group_id,
            member_id,
            instance_id,
            generation,
            shard.offsets.validated_partitions(partitions),
        )
        if error != ErrorCode.none:
            return dict.fromkeys(every, error)
        errors, records = shard.offsets.records(group_id, partitions)
        if not records:
            return errors
        try:
            waiter = self.runtime.append(
                group_id,
                records,
                replay=False,
                producer=(producer_id, producer_epoch),
                verification_guard=guard,
            )
        except KafkaError as e:
            return self._txn_commit_failed(group_id, producer_id, errors, e)
        entries = shard.offsets.add_transactional(producer_id, records)
        try:
            await waiter
        except KafkaError as e:
            shard.offsets.drop_transactional(producer_id, entries)
            return self._txn_commit_failed(group_id, producer_id, errors, e)
        return errors

    @staticmethod
    def _txn_commit_failed(
        group_id: str,
        producer_id: int,
        errors: dict[tuple[str, int], ErrorCode],
        error: KafkaError,
    ) -> dict[tuple[str, int], ErrorCode]:
        code = map_append_error(error.code)
        log.info(
            "transactional offset commit of group %s by producer %d failed: %s (answered %s)",
            group_id,
            producer_id,
            error,
            code.name,
        )
        return {tp: code if e == ErrorCode.none else e for tp, e in errors.items()}

    def complete_transaction(self, partition_index: int, producer_id: int, commit: bool) -> None:
        """The producer's transaction marker is written (and replicated) on this partition,
        which this broker leads: its transactional offsets become visible, or are dropped. A
        shard still loading replays the marker itself."""
        shard = self._shards.get(partition_index)
        if shard is None or not shard.loaded or shard.unloaded:
            return
        count = shard.offsets.end_transaction(producer_id, commit)
        if count:
            log.debug(
                "partition %d: %d transactional offsets of producer %d committed",
                partition_index,
                count,
                producer_id,
            )

    def is_loading(self) -> bool:
        return self.runtime.is_loading()

    # -- background work --------------------------------------------------------------------

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        if self._task_group is None:
            self._queued.append(fn)
        else:
            self._task_group.start_soon(_guarded, fn)

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            for fn in self._queued:
                tg.start_soon(_guarded, fn)
            self._queued.clear()
            tg.start_soon(self._fire_timers)
            tg.start_soon(self._expire_offsets)
            tg.start_soon(self.registry.run)
            await self.runtime.run()

    async def _fire_timers(self) -> None:
        while True:
            next_deadline = None
            for shard in list(self._shards.values()):
                if not shard.loaded or shard.unloaded:
                    continue
                try:
                    shard.timer.fire_due()
                except Exception:
                    log.exception("a group timer of partition %d failed", shard.partition_index)
                deadline = shard.timer.next_deadline()
                if deadline is not None and (next_deadline is None or deadline < next_deadline):
                    next_deadline = deadline
            self._wake = anyio.Event()
            delay = None if next_deadline is None else max(0, next_deadline - monotonic_ms())
            with anyio.move_on_after(3600 if delay is None else delay / 1000 + 0.001):
                await self._wake.wait()

    async def _expire_offsets(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000
        while True:
            await anyio.sleep(interval)
            for shard in self.loaded_shards():
                try:
                    by_group, deleted = shard.expire_offsets()
                except Exception:
                    log.exception("offsets expiry of partition %d failed", shard.partition_index)
                    continue
                if not by_group:
                    continue
                count = sum(len(r) for r in by_group.values())
                log.info(
                    "partition %d: expiring %d records (%d groups deleted)",
                    shard.partition_index,
                    count,
                    len(deleted),
                )
                for group_id, records in by_group.items():
                    try:
                        waiter = self.append(group_id, records)
                    except KafkaError as e:
                        log.info("offsets expiry of group %s postponed: %s", group_id, e)
                        continue
                    gone = [group_id] if group_id in deleted else []
                    self.spawn(functools.partial(self._after_expiry, waiter, gone))

    async def _after_expiry(self, waiter: Awaitable[None], deleted: list[str]) -> None:
        try:
            await waiter
        except KafkaError as e:
            log.info("offsets expiry not replicated: %s", e)
            return
        if deleted:
            self.registry.remove(deleted)


async def _guarded(fn: Callable[[], Awaitable[None]]) -> None:
    try:
        await fn()
    except Exception:
        log.exception("group coordinator background work failed")
