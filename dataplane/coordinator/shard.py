"""The group coordinator state of one `__consumer_offsets` partition.

A `GroupShard` holds the committed offsets and the groups whose ids hash to its partition. It is
rebuilt by replaying the partition (`replay`, dispatched by record type) and changed by the
group APIs, whose records the broker appends to the partition. Group types plug in through
`base.Group` (the group-agnostic APIs below call its hooks) and `register_replayer` (their
record types).

Nothing here awaits: the `ShardServices` given at construction append records and run the
asynchronous tails (waiting for replication), and the shard's `Timer` is fired by its owner.
`LocalServices` (in-memory, manual clock) lets unit tests drive a shard synchronously.

A commit's offsets are *pending* until its records are replicated (`store_offsets`):
OffsetFetch answers the last replicated offsets meanwhile (UNSTABLE_OFFSET_COMMIT with
require_stable), and a failed write drops them, as Kafka's GroupMetadataManager does.

Group types: classic groups (`group.ClassicGroup`, record types 0-2) and KIP-848 consumer
groups (`consumer_group_adapter.ConsumerGroupAdapter`, record types 3-8 and 16) share
`groups`, one group per id; the committed offsets are the shard's whatever the group's type.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from dataplane.coordinator import consumer_group_adapter
from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.base import (
    DescribedGroup,
    Group,
    GroupConfig,
    ListedGroup,
    OffsetAndMetadata,
    Records,
    Reply,
)
from dataplane.coordinator.consumer_group import DescribedGroup as ConsumerDescribedGroup
from dataplane.coordinator.consumer_group import HeartbeatRequest, HeartbeatResponse
from dataplane.coordinator.consumer_group_records import CONSUMER_GROUP_RECORD_TYPES
from dataplane.coordinator.group import (
    ClassicGroup,
    JoinRequest,
    JoinResult,
    SyncResult,
    map_append_error,
)
from dataplane.coordinator.records import (
    GROUP_METADATA,
    OFFSET_COMMIT,
    CorruptRecord,
    GroupMetadataValue,
    OffsetCommitValue,
    decode_record,
    group_metadata_record,
    offset_commit_key,
    offset_commit_record,
)
from dataplane.coordinator.timer import ManualClock, Timer
from dataplane.log.records import Record
from dataplane.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("rafka.coordinator.shard")

_TYPE = struct.Struct(">h")


class ShardServices(Protocol):
    """What a shard needs from its broker (or from a test)."""

    config: GroupConfig

    def clock_ms(self) -> int:
        """Monotonic milliseconds, for timers."""

    def now_ms(self) -> int:
        """Wall-clock milliseconds, for commit and state timestamps."""

    def new_member_id(self, prefix: str) -> str: ...

    def topics(self) -> Mapping[str, TopicMetadata]:
        """The cluster's topics by name (see `base.GroupContext.topics`)."""

    def append(self, group_id: str, records: Records, replay: bool) -> Awaitable[None]:
        """Append to the group's partition now (raise KafkaError if that is not possible);
        the awaitable completes once the records are replicated (raises KafkaError)."""

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run `fn()` in the background."""

    def timer_changed(self) -> None:
        """A timer deadline was scheduled (wake whoever fires the timer)."""

    def group_created(self, group_id: str) -> None: ...

    def loaded(self, shard: GroupShard) -> None: ...

    def unloaded(self, shard: GroupShard) -> None: ...


ReplayFn = Callable[["GroupShard", Record], None]
_REPLAYERS: dict[int, ReplayFn] = {}


def register_replayer(type_ids: Iterable[int], fn: ReplayFn) -> None:
    """Route records whose key starts with one of these record types to `fn(shard, record)`
    (a group type's records; `record.value` None is a tombstone). Types nobody registered
    are skipped."""
    for type_id in type_ids:
        _REPLAYERS[type_id] = fn


@dataclass(frozen=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int  # -1: none
    metadata: str | None
    commit_timestamp: int = -1  # OffsetCommit v1's; -1: now


class FetchedPartition(NamedTuple):
    partition: int
    offset: OffsetAndMetadata | None  # None: no committed offset
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True)
class FetchedTopic:
    topic: str
    partitions: tuple[FetchedPartition, ...]


class GroupShard:
    def __init__(self, partition_index: int, services: ShardServices | None = None) -> None:
        self.partition_index = partition_index
        self.services: ShardServices = services or LocalServices()
        self.config = self.services.config
        self.timer = Timer(self.services.clock_ms, self.services.timer_changed)
        self.groups: dict[str, Group] = {}
        # group -> topic -> partition -> committed offset
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # group -> record key -> commits appended but not yet replicated, oldest first
        self.pending_offsets: dict[str, dict[bytes, list[tuple[bytes, bytes | None]]]] = {}
        self.extensions: dict[str, object] = {}  # per-shard state of other group types
        self.loaded = False
        self.unloaded = False
        self.skipped_records = 0

    # ==================================================================== GroupContext

    def now_ms(self) -> int:
        return self.services.now_ms()

    def new_member_id(self, prefix: str) -> str:
        return self.services.new_member_id(prefix)

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self.services.topics()

    def write(
        self,
        group_id: str,
        records: Records,
        *,
        replay: bool,
        done: Callable[[ErrorCode], None] | None = None,
    ) -> ErrorCode | None:
        if self.unloaded:
            error: ErrorCode | None = ErrorCode.not_coordinator
            waiter = None
        else:
            try:
                waiter, error = self.services.append(group_id, records, replay), None
            except KafkaError as e:
                waiter, error = None, e.code

        async def finish() -> None:
            code = error
            if waiter is not None:
                try:
                    await waiter
                    code = ErrorCode.none
                except KafkaError as e:
                    code = e.code
                    log.warning("writing records of group %s failed: %s", group_id, e)
            if done is not None and code is not None:
                done(code)

        self.services.spawn(finish)
        return error

    # ==================================================================== loading

    def replay(self, record: Record) -> None:
        if record.key is None or len(record.key) < 2:
            self.skipped_records += 1
            return
        (type_id,) = _TYPE.unpack_from(record.key, 0)
        fn = _REPLAYERS.get(type_id)
        if fn is None:
            self.skipped_records += 1  # a group type this broker does not know
            return
        try:
            fn(self, record)
        except (CorruptRecord, ValueError) as e:
            self.skipped_records += 1
            log.warning(
                "partition %d: skipped the record at offset %d: %s",
                self.partition_index,
                record.offset,
                e,
            )

    def on_loaded(self) -> None:
        self.loaded = True
        for group in self.groups.values():
            group.on_loaded()
        self.services.loaded(self)

    def on_unloaded(self) -> None:
        self.unloaded = True
        for group in self.groups.values():
            group.unload()
        self.timer.cancel_all()
        self.services.unloaded(self)

    def _replay_offset_commit(self, record: Record) -> None:
        assert record.key is not None
        self._apply_offset_commit(record.key, record.value)

    def _apply_offset_commit(self, record_key: bytes, record_value: bytes | None) -> None:
        decoded = decode_record(record_key, record_value)
        assert decoded is not None
        key = decoded.key
        if decoded.value is None:
            # a deletion also cancels the commits in flight (Kafka's removeOffsets)
            pending = self.pending_offsets.get(key.group)
            if pending is not None and pending.pop(record_key, None) and not pending:
                del self.pending_offsets[key.group]
            topics = self.offsets.get(key.group)
            if topics is not None and key.topic in topics:
                topics[key.topic].pop(key.partition, None)
                if not topics[key.topic]:
                    del topics[key.topic]
                if not topics:
                    del self.offsets[key.group]
            return
        value: OffsetCommitValue = decoded.value
        if key.group not in self.groups:
            # offsets of a group nobody joined (assign() consumers, admin tools): Kafka keeps a
            # "simple" classic group for them
            self.groups[key.group] = ClassicGroup(key.group, self)
        self.offsets.setdefault(key.group, {}).setdefault(key.topic, {})[key.partition] = (
            OffsetAndMetadata(
                value.offset,
                value.leader_epoch,
                value.metadata,
                value.commit_timestamp,
                value.expire_timestamp,
            )
        )

    def _replay_group_metadata(self, record: Record) -> None:
        decoded = decode_record(record.key, record.value)
        assert decoded is not None
        group_id = decoded.key.group
        if decoded.value is None:
            group = self.groups.get(group_id)
            if group is None or isinstance(group, ClassicGroup):
                self.groups.pop(group_id, None)
            return
        self.groups[group_id] = ClassicGroup.from_record(group_id, decoded.value, self)

    # ==================================================================== classic group APIs

    def add_group(self, group: Group) -> None:
        """A group created by a request (not by a replay): it enters the meta service's
        registry."""
        self.groups[group.group_id] = group
        self.services.group_created(group.group_id)

    def _new_classic_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self)
        self.add_group(group)
        return group

    def join_group(self, req: JoinRequest) -> Reply[JoinResult]:
        reply: Reply[JoinResult] = Reply()
        group = self.groups.get(req.group_id)
        if group is not None and not isinstance(group, ClassicGroup) and group.is_empty():
            # an empty group of another type becomes a classic group (Kafka's
            # maybeDeleteEmptyConsumerGroup): its records go, its offsets stay
            error = self.write(group.group_id, group.tombstones(), replay=True)
            if error is not None:
                reply.complete(JoinResult(map_append_error(error), req.member_id))
                return reply
            if self.groups.get(group.group_id) is group:  # a type whose replay keeps it
                self.groups.pop(group.group_id)
                group.unload()
            group = None
        created = False
        if group is None:
            if req.member_id:
                reply.complete(JoinResult(ErrorCode.unknown_member_id, req.member_id))
                return reply
            group, created = self._new_classic_group(req.group_id), True
        group.classic_join(req, reply)
        if created:
            # persist the new group, as Kafka does, so it survives a coordinator failover
            def done(error: ErrorCode) -> None:
                if error != ErrorCode.none:
                    reply.complete(JoinResult(map_append_error(error), ""))

            # Kafka's newEmptyGroupMetadataRecord: no members (whoever joined is still parked)
            empty = GroupMetadataValue("", 0, None, None, -1, ())
            record = group_metadata_record(req.group_id, empty)
            self.write(req.group_id, [record], replay=False, done=done)
        return reply

    def sync_group(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> Reply[SyncResult]:
        reply: Reply[SyncResult] = Reply()
        group = self.groups.get(group_id)
        if group is None or group.is_empty():
            reply.complete(SyncResult(ErrorCode.unknown_member_id))
        else:
            group.classic_sync(
                member_id,
                instance_id,
                generation,
                protocol_type,
                protocol_name,
                assignments,
                reply,
            )
        return reply

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return group.classic_heartbeat(member_id, instance_id, generation)

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(request-level error, one error per member)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id, []
        return group.classic_leave(members)

    # ==================================================================== consumer group APIs

    def consumer_group_heartbeat(
        self, req: HeartbeatRequest, api_version: int, client_id: str, client_host: str
    ) -> Reply[HeartbeatResponse]:
        """ConsumerGroupHeartbeat (KIP-848): completes once the records it wrote are
        replicated."""
        return consumer_group_adapter.heartbeat(
            self, req, api_version=api_version, client_id=client_id, client_host=client_host
        )

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[ConsumerDescribedGroup]:
        return consumer_group_adapter.describe(self, group_ids)

    # ==================================================================== offsets

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        api_version: int,
        partitions: Sequence[CommitPartition],
        expire_timestamp: int = -1,
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode], list[tuple[bytes, bytes | None]]]:
        """Validate a commit: (group-level error, per-partition errors, records to write)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # a member of a generation of a group that does not exist
                code = (
                    ErrorCode.group_id_not_found
                    if api_version >= 9
                    else ErrorCode.illegal_generation
                )
                return code, {}, []
            group = self._new_classic_group(group_id)
        error = group.validate_offset_commit(member_id, instance_id, generation, api_version)
        if error != ErrorCode.none:
            return error, {}, []
        now = self.now_ms()
        errors: dict[tuple[str, int], ErrorCode] = {}
        records = []
        for p in partitions:
            metadata = p.metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                errors[p.topic, p.partition] = ErrorCode.offset_metadata_too_large
                continue
            committed_at = now if p.commit_timestamp == -1 else p.commit_timestamp
            value = OffsetCommitValue(
                p.offset, p.leader_epoch, metadata, committed_at, expire_timestamp
            )
            records.append(offset_commit_record(group_id, p.topic, p.partition, value))
            errors[p.topic, p.partition] = ErrorCode.none
        return ErrorCode.none, errors, records

    def store_offsets(self, group_id: str, records: Records) -> Reply[ErrorCode]:
        """Write the records of a validated commit (`commit_offsets`). Until they are
        replicated they are pending: OffsetFetch still answers the previous offsets; once
        replicated they replace them, and a failed write drops them (Kafka's
        prepareOffsetCommit / onOffsetCommitAppend / failPendingOffsetWrite). The reply
        completes with the write's error (NONE: replicated)."""
        reply: Reply[ErrorCode] = Reply()
        if not records:
            reply.complete(ErrorCode.none)
            return reply
        pending = self.pending_offsets.setdefault(group_id, {})
        for record in records:
            pending.setdefault(record[0], []).append(record)

        def done(error: ErrorCode) -> None:
            self._settle_offsets(group_id, records, replicated=error == ErrorCode.none)
            reply.complete(error)

        refused = self.write(group_id, records, replay=False, done=done)
        if refused is not None:  # not even appended (a replication failure is logged by write)
            log.info(
                "offset commit of group %s not written: %s; clients retry", group_id, refused.name
            )
            self._settle_offsets(group_id, records, replicated=False)
        return reply

    def _settle_offsets(self, group_id: str, records: Records, *, replicated: bool) -> None:
        """End the pending state of these commit records: replicated ones become the committed
        offsets (and older commits of the same partitions still in flight can no longer
        replace them); failed ones are dropped. Records no longer pending (a deletion, or a
        newer commit already applied) are left alone."""
        pending = self.pending_offsets.get(group_id, {})
        for record in records:
            queue = pending.get(record[0], [])
            index = next((i for i, r in enumerate(queue) if r is record), None)
            if index is None:
                continue
            if replicated:
                del queue[: index + 1]
                self._apply_offset_commit(*record)
            else:
                del queue[index]
            if not queue:
                del pending[record[0]]
        if not pending:
            self.pending_offsets.pop(group_id, None)

    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, list[FetchedTopic]]:
        """Committed offsets of `topics` (None: every committed partition). With
        require_stable, a partition with a commit in flight answers UNSTABLE_OFFSET_COMMIT
        (the client retries) instead of the offset that commit is replacing."""
        group = self.groups.get(group_id)
        offsets = self.offsets.get(group_id, {})
        if group is not None:
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error == ErrorCode.group_id_not_found:
                offsets = {}
            elif error != ErrorCode.none:
                return error, []
        if topics is None:  # Kafka checks no pending commits here
            return ErrorCode.none, [
                FetchedTopic(
                    topic, tuple(FetchedPartition(*item) for item in sorted(parts.items()))
                )
                for topic, parts in offsets.items()
            ]
        pending = self.pending_offsets.get(group_id) if require_stable else None
        return ErrorCode.none, [
            FetchedTopic(
                topic,
                tuple(
                    FetchedPartition(p, None, ErrorCode.unstable_offset_commit)
                    if pending and offset_commit_key(group_id, topic, p) in pending
                    else FetchedPartition(p, offsets.get(topic, {}).get(p))
                    for p in partitions
                ),
            )
            for topic, partitions in topics
        ]

    def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode], list[tuple[bytes, bytes | None]]]:
        """OffsetDelete: (group error, per-partition errors, tombstones)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, {}, []
        error = group.validate_offset_delete()
        if error != ErrorCode.none:
            return error, {}, []
        offsets = self.offsets.get(group_id, {})
        pending = self.pending_offsets.get(group_id, {})
        errors: dict[tuple[str, int], ErrorCode] = {}
        records = []
        for topic, partitions in topics:
            subscribed = group.is_subscribed_to_topic(topic)
            for p in partitions:
                if subscribed:
                    errors[topic, p] = ErrorCode.group_subscribed_to_topic
                    continue
                tombstone = offset_commit_record(group_id, topic, p, None)
                if p in offsets.get(topic, {}) or tombstone[0] in pending:
                    records.append(tombstone)  # a commit in flight is deleted too
                errors[topic, p] = ErrorCode.none
        return ErrorCode.none, errors, records

    # ==================================================================== admin APIs

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        return [
            listed
            for listed in (g.listed() for g in self.groups.values())
            if (not wanted_states or listed.state.lower() in wanted_states)
            and (not wanted_types or listed.type.lower() in wanted_types)
        ]

    def describe_group(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id, "Dead", "", "")
        return group.describe()

    def delete_groups(
        self, group_ids: Sequence[str]
    ) -> tuple[dict[str, ErrorCode], list[tuple[bytes, bytes | None]]]:
        """DeleteGroups of the groups of this shard: (errors, tombstones of the deletable ones:
        their offsets, then the group)."""
        errors: dict[str, ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        for group_id in dict.fromkeys(group_ids):
            group = self.groups.get(group_id)
            if group is None:
                errors[group_id] = ErrorCode.group_id_not_found
                continue
            error = group.validate_delete()
            errors[group_id] = error
            if error == ErrorCode.none:
                records += self._group_tombstones(group)
        return errors, records

    def _group_tombstones(self, group: Group) -> list[tuple[bytes, bytes | None]]:
        """The group's records and all its offsets', those of commits in flight included."""
        group_id = group.group_id
        keys = dict.fromkeys(
            offset_commit_key(group_id, topic, p)
            for topic, parts in self.offsets.get(group_id, {}).items()
            for p in parts
        )
        keys |= dict.fromkeys(self.pending_offsets.get(group_id, {}))
        return [(key, None) for key in keys] + group.tombstones()

    def expire_offsets(self) -> tuple[dict[str, list[tuple[bytes, bytes | None]]], list[str]]:
        """Kafka's offsets retention: tombstones of the offsets past offsets.retention.ms (per
        group), and the empty groups left without offsets (deleted too)."""
        now = self.now_ms()
        retention = self.config.offsets_retention_ms
        by_group: dict[str, list[tuple[bytes, bytes | None]]] = {}
        deleted: list[str] = []
        for group_id, group in list(self.groups.items()):
            records = []
            all_expired = group_id not in self.pending_offsets  # Kafka's hasOffsets
            for topic, parts in self.offsets.get(group_id, {}).items():
                if group.is_subscribed_to_topic(topic):
                    all_expired = False
                    continue
                for p, offset in parts.items():
                    base = group.offsets_expire_from(offset)
                    if base is not None and (
                        now >= offset.expire_timestamp
                        if offset.expire_timestamp >= 0
                        else now - base >= retention
                    ):
                        records.append(offset_commit_record(group_id, topic, p, None))
                    else:
                        all_expired = False
            if all_expired and group.is_empty():
                records += group.tombstones()
                deleted.append(group_id)
            if records:
                by_group[group_id] = records
        return by_group, deleted


register_replayer((0, OFFSET_COMMIT), GroupShard._replay_offset_commit)
register_replayer((GROUP_METADATA,), GroupShard._replay_group_metadata)
register_replayer(CONSUMER_GROUP_RECORD_TYPES, consumer_group_adapter.replay_record)


class LocalServices:
    """Services for a shard outside a broker: a manual clock, writes kept in memory (replayed
    like the broker does), background work queued until `run_pending()`. Writes are replicated
    at once, or with `hold_replication` when `replicate()` says (or fails them). For unit
    tests."""

    def __init__(self, config: GroupConfig | None = None, clock: ManualClock | None = None):
        self.config = config or GroupConfig()
        self.clock = clock or ManualClock()
        self.shard: GroupShard | None = None  # set by attach()
        self.log: list[tuple[bytes, bytes | None]] = []  # everything appended, in order
        self.pending: list[Callable[[], Awaitable[None]]] = []
        self.fail_with: ErrorCode | None = None  # make the next appends fail
        self.hold_replication = False  # appends wait for replicate()
        self.held: list[_Replication] = []
        self._parked: list[Coroutine[object, None, None]] = []  # work awaiting a held write
        self.created: list[str] = []
        self.topic_metadata: dict[str, TopicMetadata] = {}  # what topics() answers
        self._ids = 0

    def attach(self, shard: GroupShard) -> GroupShard:
        self.shard = shard
        return shard

    def clock_ms(self) -> int:
        return self.clock.now()

    def now_ms(self) -> int:
        return self.clock.now()

    def new_member_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{uuid.UUID(int=self._ids)}"

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self.topic_metadata

    def append(self, group_id: str, records: Records, replay: bool) -> Awaitable[None]:
        if self.fail_with is not None:
            raise KafkaError(self.fail_with)
        base = len(self.log)
        self.log += records
        if replay and self.shard is not None:
            for i, (key, value) in enumerate(records):
                self.shard.replay(Record(base + i, self.clock.now(), key, value, ()))
        replication = _Replication()
        if self.hold_replication:
            self.held.append(replication)
        else:
            replication.done = True
        return replication

    def replicate(self, error: ErrorCode | None = None, count: int | None = None) -> None:
        """End the replication of the oldest `count` held writes (all by default), as a high
        watermark moves: done, or failed with `error`. Their waiters resume at the next
        `run_pending()`."""
        ended = self.held[:count]
        del self.held[:count]
        for replication in ended:
            replication.done, replication.error = True, error

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        self.pending.append(fn)

    def run_pending(self) -> int:
        """Run the queued background work (and whatever it queues) until all of it is done or
        waits for a held write; returns how many finished."""
        finished = 0
        progress = True
        while progress:
            progress = False
            while self.pending:
                self._parked.append(self.pending.pop(0)())  # type: ignore[arg-type]
            for coro in list(self._parked):
                try:
                    waits_for = coro.send(None)
                except StopIteration:
                    self._parked.remove(coro)
                    finished += 1
                    progress = True
                    continue
                if not isinstance(waits_for, _Replication):
                    raise RuntimeError("LocalServices cannot run work that really waits")
        return finished

    def timer_changed(self) -> None:
        pass

    def group_created(self, group_id: str) -> None:
        self.created.append(group_id)

    def loaded(self, shard: GroupShard) -> None:
        pass

    def unloaded(self, shard: GroupShard) -> None:
        pass


class _Replication:
    """The replication of a LocalServices write: awaiting it yields it while not done, then
    raises the error it failed with."""

    def __init__(self) -> None:
        self.done = False
        self.error: ErrorCode | None = None

    def __await__(self) -> Generator[_Replication, None, None]:
        while not self.done:
            yield self
        if self.error is not None:
            raise KafkaError(self.error)
