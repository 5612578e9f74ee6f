"""The group coordinator state of one `__consumer_offsets` partition (Kafka's
GroupCoordinatorShard).

A `GroupShard` holds the groups whose ids hash to its partition and, apart from them, their
committed offsets (`offsets.OffsetStore`). It is rebuilt by replaying the partition (`replay`,
dispatched by record type through the shard's own `replayers` table) and changed by the group
APIs, whose records the broker appends to the partition. Group types plug in through
`base.Group` (the group-agnostic APIs below call its hooks) and an entry of `replayers` for
their record types.

Nothing here awaits: the `ShardServices` given at construction append records and run the
asynchronous tails (waiting for replication), and the shard's `Timer` is fired by its owner.

Transactional offsets (TxnOffsetCommit) arrive in transactional batches and are ended by
transaction markers: the runtime hands those to `replay_transactional` and
`replay_end_transaction` (a `runtime.TransactionalShard`).

Group types: classic groups (`classic.group.ClassicGroup`, record types 0-2), KIP-848
consumer groups (`consumer.adapter.ConsumerGroupAdapter`, record types 3-8 and 16),
KIP-932 share groups (`share.adapter.ShareGroupAdapter`, record types 10-15) and KIP-1071
streams groups (`streams.adapter.StreamsGroupAdapter`, record types 17, 19-23) share
`groups`, one group per id; the committed offsets are the shard's whatever the group's type.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from dataplane.coordinator.base import (
    DescribedGroup,
    Group,
    JoinRequest,
    JoinResult,
    ListedGroup,
    Records,
    Reply,
    ShardServices,
    SyncResult,
    map_append_error,
    unknown_members,
)
from dataplane.coordinator.classic.group import ClassicGroup
from dataplane.coordinator.classic.membership import GroupState
from dataplane.coordinator.consumer import adapter as consumer_adapter
from dataplane.coordinator.consumer.group import DescribedGroup as ConsumerDescribedGroup
from dataplane.coordinator.consumer.group import HeartbeatRequest, HeartbeatResponse
from dataplane.coordinator.offsets import CommitPartition, FetchedTopic, OffsetStore
from dataplane.coordinator.records import (
    CONSUMER_GROUP_RECORD_TYPES,
    GROUP_METADATA,
    LEGACY_OFFSET_COMMIT,
    OFFSET_COMMIT,
    CorruptRecord,
    GroupMetadataValue,
    decode_record,
    group_metadata_record,
)
from dataplane.coordinator.share import adapter as share_adapter
from dataplane.coordinator.share.group import DescribedGroup as ShareDescribedGroup
from dataplane.coordinator.share.group import HeartbeatRequest as ShareHeartbeatRequest
from dataplane.coordinator.share.group import HeartbeatResponse as ShareHeartbeatResponse
from dataplane.coordinator.share.records import SHARE_GROUP_RECORD_TYPES
from dataplane.coordinator.streams import adapter as streams_adapter
from dataplane.coordinator.streams.group import StreamsGroup
from dataplane.coordinator.streams.records import STREAMS_GROUP_RECORD_TYPES
from dataplane.coordinator.streams.requests import HeartbeatRequest as StreamsHeartbeatRequest
from dataplane.coordinator.streams.requests import (
    HeartbeatResponse as StreamsHeartbeatResponse,
)
from dataplane.coordinator.streams.requests import HeartbeatResult as StreamsHeartbeatResult
from dataplane.log.records import Record
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.message_codec import record_type

log = logging.getLogger("rafka.coordinator.shard")

KeyValue = tuple[bytes, bytes | None]

# The OffsetCommit version a transactional commit is checked as: the newest, so no group
# refuses it for its version (Kafka skips the version check for transactional commits).
_ANY_VERSION = 9


class GroupShard:
    def __init__(self, partition_index: int, services: ShardServices) -> None:
        self.partition_index = partition_index
        self.services = services
        self.config = services.config
        self.timer = services.timer
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore(services, self.groups, self._classic_group)
        # record type -> what applies a record of it (types absent here are skipped)
        self.replayers: dict[int, Callable[[Record], None]] = {
            LEGACY_OFFSET_COMMIT: self.offsets.replay,
            OFFSET_COMMIT: self.offsets.replay,
            GROUP_METADATA: self._replay_group_metadata,
        }
        for type_id in CONSUMER_GROUP_RECORD_TYPES:
            self.replayers[type_id] = self._replay_consumer_group
        for type_id in SHARE_GROUP_RECORD_TYPES:
            self.replayers[type_id] = self._replay_share_group
        for type_id in STREAMS_GROUP_RECORD_TYPES:
            self.replayers[type_id] = self._replay_streams_group
        self.loaded = False
        self.unloaded = False
        self.skipped_records = 0

    # ==================================================================== loading

    def replay(self, record: Record) -> None:
        try:
            type_id = record_type(record.key)
        except CorruptRecord as e:
            self._skip(record, str(e))
            return
        fn = self.replayers.get(type_id)
        if fn is None:  # Kafka's UnknownRecordTypeException: warned about and skipped
            self._skip(
                record,
                f"unknown record type {type_id} (a leftover of an aborted upgrade, or a "
                "newer broker's)",
            )
            return
        try:
            fn(record)
        except (CorruptRecord, ValueError) as e:
            self._skip(record, str(e))

    def _skip(self, record: Record, why: str, kind: str = "record") -> None:
        self.skipped_records += 1
        log.warning(
            "__consumer_offsets-%d: skipped the %s at offset %d: %s",
            self.partition_index,
            kind,
            record.offset,
            why,
        )

    def replay_transactional(self, producer_id: int, producer_epoch: int, record: Record) -> None:
        """A record of a producer's transactional batch: OffsetCommit records are pending
        until the transaction ends; anything else (never written so) replays as usual."""
        try:
            if record_type(record.key) not in (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT):
                self.replay(record)
                return
            self.offsets.replay_transactional(producer_id, record)
        except (CorruptRecord, ValueError) as e:
            self._skip(record, str(e), "transactional record")

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """A marker of the producer's transaction (see `OffsetStore.end_transaction`)."""
        self.offsets.end_transaction(producer_id, commit)

    def on_loaded(self) -> None:
        self.loaded = True
        for group in self.groups.values():
            group.on_loaded()
        self.services.loaded()

    def on_unloaded(self) -> None:
        self.unloaded = True
        self.services.closed = True
        for group in self.groups.values():
            group.unload()
        self.timer.cancel_all()
        self.services.unloaded()

    def _replay_group_metadata(self, record: Record) -> None:
        decoded = decode_record(record.key, record.value)
        assert decoded is not None
        group_id = decoded.key.group
        if decoded.value is None:
            group = self.groups.get(group_id)
            if group is None or isinstance(group, ClassicGroup):
                self.groups.pop(group_id, None)
            return
        self.groups[group_id] = ClassicGroup.from_record(group_id, decoded.value, self.services)

    def _replay_consumer_group(self, record: Record) -> None:
        consumer_adapter.replay_record(self, record)

    def _replay_share_group(self, record: Record) -> None:
        share_adapter.replay_record(self, record)

    def _replay_streams_group(self, record: Record) -> None:
        streams_adapter.replay_record(self, record)

    # ==================================================================== classic group APIs

    def add_group(self, group: Group) -> None:
        """A group created by a request (not by a replay): it enters the meta service's
        registry."""
        self.groups[group.group_id] = group
        self.services.group_created(group.group_id)

    def _classic_group(self, group_id: str, created_by_request: bool) -> ClassicGroup:
        group = ClassicGroup(group_id, self.services)
        if created_by_request:
            self.add_group(group)
        else:
            self.groups[group_id] = group
        return group

    def join_group(self, req: JoinRequest) -> Reply[JoinResult]:
        reply: Reply[JoinResult] = Reply()
        group = self.groups.get(req.group_id)
        if (
            group is not None
            and not isinstance(group, ClassicGroup | share_adapter.ShareGroupAdapter)
            and group.is_empty()
        ):
            # an empty group of another type becomes a classic group (Kafka's
            # maybeDeleteEmptyConsumerGroup): its records go, its offsets stay
            error = self.services.write(group.group_id, group.tombstones(), replay=True)
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
            group, created = self._classic_group(req.group_id, True), True
        group.classic_join(req, reply)
        if created:
            # persist the new group, as Kafka does, so it survives a coordinator failover
            def done(error: ErrorCode) -> None:
                if error != ErrorCode.none:
                    reply.complete(JoinResult(map_append_error(error), ""))

            # Kafka's newEmptyGroupMetadataRecord: no members (whoever joined is still parked)
            empty = GroupMetadataValue("", 0, None, None, -1, ())
            record = group_metadata_record(req.group_id, empty)
            self.services.write(req.group_id, [record], replay=False, done=done)
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
            return unknown_members(members)
        return group.classic_leave(members)

    # ==================================================================== consumer group APIs

    def consumer_group_heartbeat(
        self, req: HeartbeatRequest, api_version: int, client_id: str, client_host: str
    ) -> Reply[HeartbeatResponse]:
        """ConsumerGroupHeartbeat (KIP-848): completes once the records it wrote are
        replicated."""
        return consumer_adapter.heartbeat(
            self, req, api_version=api_version, client_id=client_id, client_host=client_host
        )

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[ConsumerDescribedGroup]:
        return consumer_adapter.describe(self, group_ids)

    # ==================================================================== share group APIs

    def share_group_heartbeat(
        self, req: ShareHeartbeatRequest, client_id: str, client_host: str
    ) -> Reply[ShareHeartbeatResponse]:
        """ShareGroupHeartbeat (KIP-932): completes once its records are replicated."""
        return share_adapter.heartbeat(self, req, client_id=client_id, client_host=client_host)

    def share_group_describe(
        self, group_ids: Sequence[str]
    ) -> list[ShareDescribedGroup | KafkaError]:
        return share_adapter.describe(self, group_ids)

    # ==================================================================== streams group APIs

    def streams_group_heartbeat(
        self, req: StreamsHeartbeatRequest, client_id: str, client_host: str
    ) -> tuple[Reply[StreamsHeartbeatResponse], StreamsHeartbeatResult | None]:
        """StreamsGroupHeartbeat (KIP-1071): completes once its records are replicated; the
        result names the internal topics to create."""
        return streams_adapter.heartbeat(self, req, client_id=client_id, client_host=client_host)

    def streams_group_describe(self, group_ids: Sequence[str]) -> list[StreamsGroup | KafkaError]:
        return streams_adapter.describe(self, group_ids)

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
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode], list[KeyValue]]:
        """OffsetCommit's validation: see `OffsetStore.commit`."""
        return self.offsets.commit(
            group_id, member_id, instance_id, generation, api_version, partitions, expire_timestamp
        )

    def validate_txn_offset_commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        partitions: Iterable[tuple[str, int]] = (),
    ) -> ErrorCode:
        """TxnOffsetCommit's group checks (Kafka's validateTransactionalOffsetCommit): a group
        that does not exist is created (simple group) for a generation < 0, else
        ILLEGAL_GENERATION; otherwise the group's OffsetCommit checks apply, except that a
        classic group takes a commit without member id and generation (TxnOffsetCommit v0-v2,
        the producer's sendOffsetsToTransaction with a group id only) whatever its state, and
        in CompletingRebalance too; a consumer group's stale member epoch answers
        ILLEGAL_GENERATION. `partitions` (the committed ones) go to the group's per-partition
        check (a streams member at an older epoch)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return ErrorCode.illegal_generation
            self._classic_group(group_id, True)
            return ErrorCode.none
        if isinstance(group, ClassicGroup):
            if group.state is GroupState.DEAD:
                return ErrorCode.coordinator_not_available
            if generation < 0 and not member_id and instance_id is None:
                return ErrorCode.none
        # transactional commits are taken from every OffsetCommit version's members
        error = group.validate_offset_commit(member_id, instance_id, generation, _ANY_VERSION)
        if error == ErrorCode.none:
            error = group.validate_commit_partitions(member_id, generation, partitions)
        if error == ErrorCode.stale_member_epoch:
            return ErrorCode.illegal_generation
        if error == ErrorCode.rebalance_in_progress and isinstance(group, ClassicGroup):
            return ErrorCode.none  # the group's state is not enforced for transactional commits
        return error

    def store_offsets(self, group_id: str, records: Records) -> Reply[ErrorCode]:
        """OffsetCommit's write: see `OffsetStore.store`."""
        return self.offsets.store(group_id, records)

    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, list[FetchedTopic]]:
        """OffsetFetch: see `OffsetStore.fetch`."""
        return self.offsets.fetch(group_id, topics, member_id, member_epoch, require_stable)

    def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode], list[KeyValue]]:
        """OffsetDelete: see `OffsetStore.delete`."""
        return self.offsets.delete(group_id, topics)

    def expire_offsets(self) -> tuple[dict[str, list[KeyValue]], list[str]]:
        """Offsets retention: see `OffsetStore.expire`."""
        return self.offsets.expire()

    # ==================================================================== admin APIs

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        return [
            g.listed()
            for g in self.groups.values()
            if (not wanted_states or g.state_filter_name in wanted_states)
            and (not wanted_types or g.TYPE.lower() in wanted_types)
        ]

    def describe_group(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id, "Dead", "", "")
        return group.describe()

    def delete_groups(
        self, group_ids: Sequence[str]
    ) -> tuple[dict[str, ErrorCode], list[KeyValue]]:
        """DeleteGroups of the groups of this shard: (errors, tombstones of the deletable ones:
        their offsets, then the group)."""
        errors: dict[str, ErrorCode] = {}
        records: list[KeyValue] = []
        for group_id in dict.fromkeys(group_ids):
            group = self.groups.get(group_id)
            if group is None:
                errors[group_id] = ErrorCode.group_id_not_found
                continue
            error = group.validate_delete()
            errors[group_id] = error
            if error == ErrorCode.none:
                records += self.offsets.tombstones(group_id) + group.tombstones()
        return errors, records
