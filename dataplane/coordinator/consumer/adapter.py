"""KIP-848 consumer groups in the group coordinator: a `ConsumerGroup` (the pure logic of
`group.py`) as a `base.Group` of its `GroupShard`.

`ConsumerGroupAdapter` is what `shard.groups` holds for a consumer group, next to the classic
groups, so the group-agnostic APIs (OffsetCommit/OffsetFetch with member epochs, ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete, offsets expiry, loading and unloading) treat both
alike. The consumer group's own APIs are here:

- `heartbeat` (ConsumerGroupHeartbeat): finds or creates the group under Kafka's rules
  (`GroupMetadataManager.getOrMaybeCreateConsumerGroup`), computes the response and records,
  writes them (the write replays them into the group) and answers once they are replicated.
- `describe` (ConsumerGroupDescribe).
- `replay_record`, registered by the shard for record types 3-8 and 16: routes a record to its
  group, creating the group on its first record and dropping it on its deletion tombstone.
- the session and rebalance deadlines: one shard timer per group, at the group's earliest
  deadline; expired members are fenced one at a time (each fencing bumps the group epoch).

Between a group id's types, as Kafka with `group.consumer.migration.policy=disabled` (no online
migration): a joining heartbeat (member epoch 0) takes over the id of an *empty* classic group
(its GroupMetadata is tombstoned, its committed offsets stay); any other heartbeat to a classic
group gets GROUP_ID_NOT_FOUND with Kafka's reason (`_not_a_consumer_group`); the other way, a
JoinGroup takes over an empty consumer group (`GroupShard.join_group`) and gets
INCONSISTENT_GROUP_PROTOCOL from a non-empty one (`base.Group.classic_join`). LeaveGroup removes
members of a consumer group whatever their protocol, as Kafka's admin removal does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dataplane.coordinator.base import DescribedGroup as ClassicDescribedGroup
from dataplane.coordinator.base import (
    Group,
    OffsetAndMetadata,
    Reply,
    ShardServices,
    map_append_error,
)
from dataplane.coordinator.classic.group import ClassicGroup
from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.consumer.group import (
    ConsumerGroup,
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    validate_heartbeat_request,
)
from dataplane.coordinator.consumer.state import IllegalStateError
from dataplane.coordinator.modern_group import ModernGroupAdapter
from dataplane.coordinator.records import CorruptRecord
from dataplane.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from dataplane.coordinator.shard import GroupShard
    from dataplane.log.records import Record

__all__ = [
    "ConsumerGroupAdapter",
    "describe",
    "heartbeat",
    "replay_record",
]

log = logging.getLogger("rafka.coordinator.consumer_group")

PROTOCOL_TYPE = "consumer"


class ConsumerGroupAdapter(ModernGroupAdapter):
    """A KIP-848 consumer group in a shard: the shard's hooks answered by the `ConsumerGroup`
    (`self.group`), plus its deadlines on the shard's timer."""

    TYPE = "consumer"
    EXPIRY_TIMER = "consumer-expiry"

    def __init__(self, group: ConsumerGroup, ctx: ShardServices) -> None:
        super().__init__(group, ctx)
        self.group = group

    # -- identity and listing ---------------------------------------------------------------

    @property
    def protocol_type_name(self) -> str:
        return PROTOCOL_TYPE

    def describe(self) -> ClassicDescribedGroup:
        # DescribeGroups (v0-v5) describes classic groups only: Kafka answers "Dead" for a
        # consumer group (admin clients then use ConsumerGroupDescribe).
        return ClassicDescribedGroup(self.group_id, "Dead", "", "")

    # -- offsets ----------------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode:
        try:
            self.group.validate_offset_commit(member_id, generation, api_version=api_version)
        except KafkaError as e:
            return e.code
        return ErrorCode.none

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        try:
            self.group.validate_offset_fetch(member_id, member_epoch)
        except KafkaError as e:
            return e.code
        return ErrorCode.none

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.group.subscribed_topic_names()

    def offsets_expire_from(self, offset: OffsetAndMetadata) -> int | None:
        # Kafka's ConsumerGroup: an offset of a topic nobody subscribes to expires from its
        # commit (the shard asks only for those).
        return offset.commit_timestamp

    # -- deletion ---------------------------------------------------------------------------

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.none  # subscribed topics are refused per partition by the shard

    # -- LeaveGroup ---------------------------------------------------------------------------

    def classic_leave(
        self, members: Sequence[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup removes members of a consumer group too, whatever protocol they use (the
        admin's removeMembersFromConsumerGroup): by member id, or by instance id with the
        member id it must have (empty: any). Kafka's classicGroupLeaveToConsumerGroup: each
        member's error, then one fencing of the valid ones."""
        group = self.group
        errors: list[ErrorCode] = []
        leaving: list[str] = []
        for member_id, instance_id, reason in members:
            if instance_id is None:
                found = group.members.get(member_id)
                error = ErrorCode.none if found else ErrorCode.unknown_member_id
            else:
                static = group.static_members.get(instance_id)
                found = group.members.get(static) if static is not None else None
                if found is None:
                    error = ErrorCode.unknown_member_id
                elif member_id and member_id != found.member_id:
                    error = ErrorCode.fenced_instance_id
                else:
                    error = ErrorCode.none
            errors.append(error)
            if error == ErrorCode.none and found is not None:
                log.info(
                    "group %s: member %s left through LeaveGroup; client reason: %s",
                    self.group_id,
                    found.member_id,
                    reason or "not provided",
                )
                leaving.append(found.member_id)
        if leaving:
            records = group.fence_members(leaving, self.ctx.now_ms(), self.ctx.topics())
            failed = self.ctx.write(self.group_id, records, replay=True)
            if failed is not None:
                return map_append_error(failed), []
            self.schedule_expiry()
        return ErrorCode.none, errors


# ---------------------------------------------------------------- ConsumerGroupHeartbeat


def heartbeat(
    shard: GroupShard,
    req: HeartbeatRequest,
    *,
    api_version: int,
    client_id: str,
    client_host: str,
) -> Reply[HeartbeatResponse]:
    """A ConsumerGroupHeartbeat for a group of this shard; the reply completes once the
    records it caused are replicated (at once when there are none)."""
    reply: Reply[HeartbeatResponse] = Reply()
    services = shard.services
    config = services.config.consumer
    existing = shard.groups.get(req.group_id)
    replaced: Group | None = None
    try:
        validate_heartbeat_request(req, api_version, config.assignors)
        if isinstance(existing, ConsumerGroupAdapter):
            adapter = existing
        elif existing is None or (
            req.member_epoch == 0 and isinstance(existing, ClassicGroup) and existing.is_empty()
        ):
            # A new group, possibly taking over the id of an empty classic group (Kafka's
            # maybeDeleteEmptyClassicGroup); it exists once its records are replayed.
            adapter = ConsumerGroupAdapter(ConsumerGroup(req.group_id, config), services)
            replaced = existing
        else:
            raise KafkaError(ErrorCode.group_id_not_found, _not_a_consumer_group(req, existing))
        result = adapter.group.heartbeat(
            req,
            services.now_ms(),
            services.topics(),
            api_version=api_version,
            client_id=client_id,
            client_host=client_host,
        )
    except KafkaError as e:
        reply.complete(HeartbeatResponse.error(e))
        return reply
    records = (replaced.tombstones() if replaced is not None else []) + result.records
    if not records:
        reply.complete(result.response)
        adapter.schedule_expiry()
        return reply

    def done(error: ErrorCode) -> None:
        if error == ErrorCode.none:
            reply.complete(result.response)
        else:
            reply.complete(HeartbeatResponse.error(KafkaError(map_append_error(error))))

    creating = adapter is not existing
    if creating:
        # the records' replay applies to the new group (as Kafka's replay materializes it)
        shard.groups[req.group_id] = adapter
    refused = services.write(req.group_id, records, replay=True, done=done)
    if creating and refused is not None:  # nothing appended: the id keeps its old group
        if replaced is not None:
            shard.groups[req.group_id] = replaced
        else:
            shard.groups.pop(req.group_id, None)
    elif creating and shard.groups.get(req.group_id) is adapter:
        shard.add_group(adapter)  # a new group of the registry
        if replaced is not None:
            replaced.unload()  # the classic group's timers go with it
            log.info("group %s: the empty classic group became a consumer group", req.group_id)
    adapter.schedule_expiry()
    return reply


# ---------------------------------------------------------------- ConsumerGroupDescribe


def _not_a_consumer_group(req: HeartbeatRequest, existing: Group) -> str:
    """Why a heartbeat cannot use a group of another type, in Kafka's words: a joining one
    would upgrade a live classic group online, which Kafka does only for groups of the
    consumer protocol type and Rafka never does (as Kafka with
    group.consumer.migration.policy=disabled)."""
    if req.member_epoch != 0 or not isinstance(existing, ClassicGroup):
        return f"Group {req.group_id} is not a consumer group."
    if not existing.uses_consumer_protocol():
        return (
            f"Cannot upgrade classic group {req.group_id} to consumer group because the group "
            "does not use the consumer embedded protocol."
        )
    log.info(
        "group %s: a member of the consumer protocol cannot join while the group has members "
        "of the classic protocol (no online upgrade: stop the classic consumers first)",
        req.group_id,
    )
    return (
        f"Cannot upgrade classic group {req.group_id} to consumer group because online upgrade "
        "is disabled."
    )


def describe(shard: GroupShard, group_ids: Sequence[str]) -> list[DescribedGroup]:
    """ConsumerGroupDescribe of groups of this shard (Kafka's `consumerGroupDescribe`)."""
    out = []
    topics = shard.services.topics()
    for group_id in group_ids:
        group = shard.groups.get(group_id)
        if isinstance(group, ConsumerGroupAdapter):
            out.append(group.group.describe(topics))
            continue
        message = (
            f"Group {group_id} not found."
            if group is None
            else f"Group {group_id} is not a consumer group."
        )
        out.append(
            DescribedGroup(
                group_id,
                "",
                0,
                0,
                "",
                (),
                error_code=ErrorCode.group_id_not_found,
                error_message=message,
            )
        )
    return out


# ---------------------------------------------------------------- replay


def replay_record(shard: GroupShard, record: Record) -> None:
    """Apply a consumer group record (types 3-8, 16) of the shard's partition."""
    decoded = rec.decode(record.key or b"", record.value)
    if decoded is None:
        raise CorruptRecord(f"not a consumer group record: {record.key!r}")
    key, value = decoded
    group = shard.groups.get(key.group_id)
    if not isinstance(group, ConsumerGroupAdapter):
        if value is None:
            return  # a tombstone of a group that is not there
        if group is not None and not (isinstance(group, ClassicGroup) and group.is_empty()):
            # Kafka replaces only a "simple" classic group (offsets, no records) here; a
            # classic group with members means the log lacks the group's tombstone
            raise CorruptRecord(f"Group {key.group_id} is not a consumer group")
        config = shard.config.consumer
        group = ConsumerGroupAdapter(ConsumerGroup(key.group_id, config), shard.services)
        shard.groups[key.group_id] = group
    try:
        group.group.replay(key, value)
    except IllegalStateError as e:
        raise CorruptRecord(str(e)) from None
    if group.group.deleted:
        if shard.groups.get(key.group_id) is group:
            del shard.groups[key.group_id]
        group.unload()
