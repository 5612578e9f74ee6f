"""Share groups in the group coordinator: a `ShareGroup` (the pure logic of `group.py`)
as a `base.Group` of its `GroupShard`, with its member deadlines on the shard's timer (shared
with consumer groups: `modern_group.ModernGroupAdapter`).

- `heartbeat` (ShareGroupHeartbeat): finds or creates the group and writes its records. A
  group id is one type (Kafka's getOrMaybeCreatePersistedShareGroup): a heartbeat for a classic
  or consumer group gets GROUP_ID_NOT_FOUND "Group X is not a share group.", JoinGroup and
  ConsumerGroupHeartbeat for a share group get INCONSISTENT_GROUP_PROTOCOL / GROUP_ID_NOT_FOUND.
  The session timeout and heartbeat interval are the group's (share.session.timeout.ms,
  share.heartbeat.interval.ms GROUP configs) over group.share.*.
- `describe` (ShareGroupDescribe), `replay_record` for record types 10-15.
- Share groups commit no offsets (OffsetCommit/OffsetFetch: GROUP_ID_NOT_FOUND, as Kafka); their
  progress is the share-partition state of the share coordinator.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dataplane.coordinator.base import DescribedGroup as ClassicDescribedGroup
from dataplane.coordinator.base import OffsetAndMetadata, Reply, map_append_error
from dataplane.coordinator.modern_group import ModernGroupAdapter
from dataplane.coordinator.records import CorruptRecord
from dataplane.coordinator.share import records as rec
from dataplane.coordinator.share.group import (
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    ShareGroup,
    validate_heartbeat,
)
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.share.model import SharePartitionKey

if TYPE_CHECKING:
    from dataplane.coordinator.base import ShardServices
    from dataplane.coordinator.shard import GroupShard
    from dataplane.log.records import Record

log = logging.getLogger("rafka.coordinator.share_group")

PROTOCOL_TYPE = "share"


class ShareGroupAdapter(ModernGroupAdapter):
    TYPE = "share"
    EXPIRY_TIMER = "share-expiry"

    def __init__(self, group: ShareGroup, ctx: ShardServices) -> None:
        super().__init__(group, ctx)
        self.group = group

    @property
    def protocol_type_name(self) -> str:
        return PROTOCOL_TYPE

    def describe(self) -> ClassicDescribedGroup:
        # DescribeGroups describes classic groups only: "Dead", as for a consumer group
        return ClassicDescribedGroup(self.group_id, "Dead", "", "")

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode:
        return ErrorCode.group_id_not_found

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        return ErrorCode.group_id_not_found

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.group.subscribed_topic_names()

    def offsets_expire_from(self, offset: OffsetAndMetadata) -> int | None:
        return offset.commit_timestamp

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.group_id_not_found

    def state_keys(self) -> list[SharePartitionKey]:
        """The share-partitions whose state the group may have (to delete with it)."""
        return [
            SharePartitionKey(self.group_id, uuid.UUID(bytes=topic_id), p)
            for topic_id, (_, parts) in sorted(self.group.state_partitions.items())
            for p in sorted(parts)
        ]


def heartbeat(
    shard: GroupShard, req: HeartbeatRequest, *, client_id: str, client_host: str
) -> Reply[HeartbeatResponse]:
    """A ShareGroupHeartbeat for a group of this shard; completes once its records are
    replicated (at once when there are none)."""
    reply: Reply[HeartbeatResponse] = Reply()
    services = shard.services
    existing = shard.groups.get(req.group_id)
    settings = services.group_settings
    try:
        validate_heartbeat(req)
        if isinstance(existing, ShareGroupAdapter):
            adapter = existing
        elif existing is None:
            group = ShareGroup(req.group_id, services.config.share)
            adapter = ShareGroupAdapter(group, services)
        else:
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Group {req.group_id} is not a share group."
            )
        response, records = adapter.group.heartbeat(
            req,
            services.now_ms(),
            services.topics(),
            session_timeout_ms=(
                settings.share_session_timeout_ms(req.group_id) if settings else None
            ),
            heartbeat_interval_ms=(
                settings.share_heartbeat_interval_ms(req.group_id) if settings else None
            ),
            client_id=client_id,
            client_host=client_host,
        )
    except KafkaError as e:
        reply.complete(HeartbeatResponse.error(e))
        return reply
    if not records:
        reply.complete(response)
        adapter.schedule_expiry()
        return reply

    def done(error: ErrorCode) -> None:
        if error == ErrorCode.none:
            reply.complete(response)
        else:
            reply.complete(HeartbeatResponse.error(KafkaError(map_append_error(error))))

    creating = adapter is not existing
    if creating:
        shard.groups[req.group_id] = adapter  # the records' replay applies to it
    refused = services.write(req.group_id, records, replay=True, done=done)
    if creating and refused is not None:
        shard.groups.pop(req.group_id, None)
    elif creating and shard.groups.get(req.group_id) is adapter:
        shard.add_group(adapter)
        log.info("share group %s created by member %s", req.group_id, req.member_id)
    adapter.schedule_expiry()
    return reply


def describe(shard: GroupShard, group_ids: Sequence[str]) -> list[DescribedGroup | KafkaError]:
    """ShareGroupDescribe of groups of this shard: each group, or the error it answers."""
    topics = shard.services.topics()
    out: list[DescribedGroup | KafkaError] = []
    for group_id in group_ids:
        group = shard.groups.get(group_id)
        if isinstance(group, ShareGroupAdapter):
            out.append(group.group.describe(topics))
        elif group is None:
            out.append(KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} not found."))
        else:
            out.append(
                KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
            )
    return out


def share_group(shard: GroupShard, group_id: str) -> ShareGroupAdapter:
    """The share group `group_id` of this shard; GROUP_ID_NOT_FOUND otherwise."""
    group = shard.groups.get(group_id)
    if isinstance(group, ShareGroupAdapter):
        return group
    message = f"Group {group_id} not found." if group is None else None
    raise KafkaError(
        ErrorCode.group_id_not_found, message or f"Group {group_id} is not a share group."
    )


def replay_record(shard: GroupShard, record: Record) -> None:
    """Apply a share group record (types 10-15) of the shard's partition."""
    decoded = rec.decode(record.key or b"", record.value)
    if decoded is None:
        raise CorruptRecord(f"not a share group record: {record.key!r}")
    key, value = decoded
    group = shard.groups.get(key.group_id)
    if not isinstance(group, ShareGroupAdapter):
        if value is None:
            return
        if group is not None:
            raise CorruptRecord(f"Group {key.group_id} is not a share group")
        group = ShareGroupAdapter(ShareGroup(key.group_id, shard.config.share), shard.services)
        shard.groups[key.group_id] = group
    group.group.replay(key, value)
    if group.group.deleted:
        if shard.groups.get(key.group_id) is group:
            del shard.groups[key.group_id]
        group.unload()
