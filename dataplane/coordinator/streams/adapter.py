"""Streams groups in the group coordinator: a `StreamsGroup` (the pure logic of
`group.py`) as a `base.Group` of its `GroupShard`, with its member deadlines on the
shard's timer (shared with consumer and share groups: `ModernGroupAdapter`).

- `heartbeat` (StreamsGroupHeartbeat): finds or creates the group (a joining member takes over
  the id of an empty classic group, as Kafka's getOrCreateStreamsGroup; any other group type
  answers GROUP_ID_NOT_FOUND "Group X is not a streams group."), runs the group's initial
  rebalance delay (group.streams.initial.rebalance.delay.ms) on the shard's timer, writes the
  records; the internal topics the topology lacks come back for the handler to create.
- `describe` (StreamsGroupDescribe), `replay_record` for record types 17 and 19-23.
- Offsets: streams members commit with their member epoch (OffsetCommit v9+, TxnOffsetCommit);
  an older epoch is taken for the tasks assigned at or before it (Kafka's per-task assignment
  epochs).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from dataplane.coordinator.base import DescribedGroup as ClassicDescribedGroup
from dataplane.coordinator.base import OffsetAndMetadata, Reply, map_append_error
from dataplane.coordinator.classic.group import ClassicGroup
from dataplane.coordinator.modern_group import ModernGroupAdapter
from dataplane.coordinator.records import CorruptRecord
from dataplane.coordinator.streams import records as rec
from dataplane.coordinator.streams.group import StreamsGroup
from dataplane.coordinator.streams.requests import (
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResult,
)
from dataplane.coordinator.streams.state import GroupState, Settings
from dataplane.coordinator.streams.target_assignment import delayed_assignment
from dataplane.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from dataplane.coordinator.base import ShardServices
    from dataplane.coordinator.shard import GroupShard
    from dataplane.log.records import Record

log = logging.getLogger("rafka.coordinator.streams_group")

PROTOCOL_TYPE = "streams"


class StreamsGroupAdapter(ModernGroupAdapter):
    TYPE = "streams"
    EXPIRY_TIMER = "streams-expiry"
    DELAY_TIMER = "streams-initial-rebalance"

    def __init__(self, group: StreamsGroup, ctx: ShardServices) -> None:
        super().__init__(group, ctx)
        self.group = group
        self.delay_key = f"{self.DELAY_TIMER}-{group.group_id}"

    @property
    def protocol_type_name(self) -> str:
        return PROTOCOL_TYPE

    @property
    def state_filter_name(self) -> str:
        # Kafka's StreamsGroupState.toLowerCaseString: "NotReady" is "not_ready"
        return (
            "not_ready" if self.group.state == GroupState.NOT_READY else super().state_filter_name
        )

    def describe(self) -> ClassicDescribedGroup:
        # DescribeGroups describes classic groups only: "Dead", as for a consumer group
        return ClassicDescribedGroup(self.group_id, "Dead", "", "")

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode:
        try:
            self.group.validate_offset_commit(
                member_id, instance_id, generation, api_version=api_version
            )
        except KafkaError as e:
            return e.code
        return ErrorCode.none

    def validate_commit_partitions(
        self, member_id: str, generation: int, partitions: Iterable[tuple[str, int]]
    ) -> ErrorCode:
        topics: dict[str, set[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, set()).add(partition)
        try:
            self.group.validate_commit_tasks(member_id, generation, topics)
        except KafkaError as e:
            log.info(
                "streams group %s: commit of member %s refused: %s", self.group_id, member_id, e
            )
            return e.code
        return ErrorCode.none

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        try:
            self.group.validate_offset_fetch(member_id, member_epoch)
        except KafkaError as e:
            return e.code
        return ErrorCode.none

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.group.is_subscribed_to_topic(topic)

    def offsets_expire_from(self, offset: OffsetAndMetadata) -> int | None:
        return offset.commit_timestamp

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.none  # topics of the topology are refused per partition by the shard

    def unload(self) -> None:
        super().unload()
        self.ctx.timer.cancel(self.delay_key)

    # -- the initial rebalance delay ------------------------------------------------------------

    def settings(self) -> Settings:
        """The group's GROUP configs (streams.*) over the broker's group.streams.*."""
        gid, own = self.group_id, self.ctx.group_settings
        if own is None:
            return self.group.config.settings()
        return Settings(
            own.streams_session_timeout_ms(gid),
            own.streams_heartbeat_interval_ms(gid),
            own.streams_num_standby_replicas(gid),
            own.streams_initial_rebalance_delay_ms(gid),
        )

    def start_initial_delay(self, delay_ms: int) -> None:
        """Start the initial rebalance delay of a group that has no member yet (Kafka's
        timer.scheduleIfAbsent on the streams initial rebalance key)."""
        timer = self.ctx.timer
        if delay_ms > 0 and self.group.is_empty and not timer.is_scheduled(self.delay_key):
            timer.schedule(self.delay_key, delay_ms, self._delayed_assignment)

    def _delayed_assignment(self) -> None:
        if self.group.deleted:
            return
        records = delayed_assignment(self.group, self.settings(), self.ctx.now_ms())
        if records:
            log.info(
                "streams group %s: initial rebalance delay over, target assignment of epoch %d",
                self.group_id,
                self.group.group_epoch,
            )
            error = self.ctx.write(self.group_id, records, replay=True)
            if error is not None:
                log.warning(
                    "streams group %s: writing the delayed target assignment failed (%s); the "
                    "next heartbeat computes it",
                    self.group_id,
                    error,
                )


# ---------------------------------------------------------------- StreamsGroupHeartbeat


def heartbeat(
    shard: GroupShard, req: HeartbeatRequest, *, client_id: str, client_host: str
) -> tuple[Reply[HeartbeatResponse], HeartbeatResult | None]:
    """A StreamsGroupHeartbeat for a group of this shard (validated by the handler): the reply,
    completed once the records it caused are replicated, and the result (its internal topics
    to create), None on an error."""
    reply: Reply[HeartbeatResponse] = Reply()
    services = shard.services
    existing = shard.groups.get(req.group_id)
    replaced = None
    try:
        if isinstance(existing, StreamsGroupAdapter):
            adapter = existing
        elif existing is None or (
            req.member_epoch == 0 and isinstance(existing, ClassicGroup) and existing.is_empty()
        ):
            group = StreamsGroup(req.group_id, services.config.streams)
            adapter = StreamsGroupAdapter(group, services)
            replaced = existing
        else:
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Group {req.group_id} is not a streams group."
            )
        settings = adapter.settings()
        if req.member_epoch == 0:
            adapter.start_initial_delay(settings.initial_rebalance_delay_ms)
        delayed = services.timer.is_scheduled(adapter.delay_key)
        result = adapter.group.heartbeat(
            req,
            services.now_ms(),
            services.topics(),
            settings,
            assignment_delayed=delayed,
            client_id=client_id,
            client_host=client_host,
        )
    except KafkaError as e:
        reply.complete(HeartbeatResponse.error(e))
        return reply, None
    records = (replaced.tombstones() if replaced is not None else []) + result.records
    if not records:
        reply.complete(result.response)
        adapter.schedule_expiry()
        return reply, result

    def done(error: ErrorCode) -> None:
        if error == ErrorCode.none:
            reply.complete(result.response)
        else:
            reply.complete(HeartbeatResponse.error(KafkaError(map_append_error(error))))

    creating = adapter is not existing
    if creating:
        shard.groups[req.group_id] = adapter  # the records' replay applies to it
    refused = services.write(req.group_id, records, replay=True, done=done)
    if creating and refused is not None:
        if replaced is not None:
            shard.groups[req.group_id] = replaced
        else:
            shard.groups.pop(req.group_id, None)
        adapter.unload()
    elif creating and shard.groups.get(req.group_id) is adapter:
        shard.add_group(adapter)
        if replaced is not None:
            replaced.unload()
        log.info("streams group %s created by member %s", req.group_id, req.member_id)
    adapter.schedule_expiry()
    return reply, result


# ---------------------------------------------------------------- StreamsGroupDescribe


def describe(shard: GroupShard, group_ids: Sequence[str]) -> list[StreamsGroup | KafkaError]:
    """StreamsGroupDescribe of groups of this shard: each group, or the error it answers."""
    out: list[StreamsGroup | KafkaError] = []
    for group_id in group_ids:
        group = shard.groups.get(group_id)
        if isinstance(group, StreamsGroupAdapter):
            out.append(group.group)
        elif group is None:
            out.append(KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} not found."))
        else:
            out.append(
                KafkaError(
                    ErrorCode.group_id_not_found, f"Group {group_id} is not a streams group."
                )
            )
    return out


# ---------------------------------------------------------------- replay


def replay_record(shard: GroupShard, record: Record) -> None:
    """Apply a streams group record (types 17, 19-23) of the shard's partition."""
    decoded = rec.decode(record.key or b"", record.value)
    if decoded is None:
        raise CorruptRecord(f"not a streams group record: {record.key!r}")
    key, value = decoded
    group = shard.groups.get(key.group_id)
    if not isinstance(group, StreamsGroupAdapter):
        if value is None:
            return
        if group is not None and not (isinstance(group, ClassicGroup) and group.is_empty()):
            raise CorruptRecord(f"Group {key.group_id} is not a streams group")
        config = shard.config.streams
        group = StreamsGroupAdapter(StreamsGroup(key.group_id, config), shard.services)
        shard.groups[key.group_id] = group
    group.group.replay(key, value)
    if group.group.deleted:
        if shard.groups.get(key.group_id) is group:
            del shard.groups[key.group_id]
        group.unload()
