"""A streams group's state as its records build it (Kafka's StreamsGroup): changed only by
`replay`, as written or read back on load, so a group rebuilt from its records equals the
original. Also what the shard's group-agnostic APIs ask of it: its state, whether a member's
OffsetCommit or OffsetFetch is valid, the records deleting it. `group.StreamsGroup` computes the
records a heartbeat or a fenced member writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from dataplane.coordinator.member_epoch import check_member_epoch
from dataplane.coordinator.streams import records as rec
from dataplane.coordinator.streams.internal_topics import ConfiguredTopology
from dataplane.coordinator.streams.member import Member, MemberState, TasksTuple
from dataplane.coordinator.streams.topology import source_topic_subtopologies
from dataplane.protocol.errors import ErrorCode, KafkaError

_CONFIG = rec.GroupMetadataValue.LastAssignmentConfig
# a member's records, in the order its removal writes their tombstones
MEMBER_RECORDS = (rec.CURRENT_MEMBER_ASSIGNMENT, rec.TARGET_ASSIGNMENT_MEMBER, rec.MEMBER_METADATA)


class GroupState(Enum):
    """Streams group states as ListGroups and StreamsGroupDescribe show them."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class Settings:
    """The settings one heartbeat runs with (the group's configs over the broker's)."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    num_standby_replicas: int
    initial_rebalance_delay_ms: int


@dataclass(frozen=True, slots=True)
class StreamsGroupConfig:
    """Kafka's group.streams.* broker settings (a group's GROUP configs override some)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    num_standby_replicas: int = 0
    initial_rebalance_delay_ms: int = 3_000

    def settings(self) -> Settings:
        """The settings of a group with no GROUP configs of its own."""
        return Settings(
            self.session_timeout_ms,
            self.heartbeat_interval_ms,
            self.num_standby_replicas,
            self.initial_rebalance_delay_ms,
        )


def metadata_value(
    epoch: int, hash_: int, validated: int, configs: Mapping[str, str]
) -> rec.GroupMetadataValue:
    """The StreamsGroupMetadata record's value (the configs sorted, as written)."""
    return rec.GroupMetadataValue(
        epoch,
        hash_,
        validated,
        tuple(_CONFIG(k, v) for k, v in sorted(configs.items())),
    )


class StreamsGroupState:
    """One streams group's hard state (from records), and its topology as last configured
    against the cluster's topics (dropped when a record changes the topology)."""

    def __init__(self, group_id: str, config: StreamsGroupConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.last_assignment_configs: dict[str, str] = {}
        self.topology: rec.TopologyValue | None = None
        self.members: dict[str, Member] = {}
        self.target: dict[str, TasksTuple] = {}
        self.assignment_epoch = 0
        self.has_records = False
        self.deleted = False
        self.configured: ConfiguredTopology | None = None

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        """Kafka's StreamsGroup.maybeUpdateGroupState."""
        if self.deleted:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return GroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def is_empty(self) -> bool:
        return not self.members

    def _holders(self) -> dict[tuple[str, int], tuple[str | None, set[str], set[str]]]:
        """Who holds each task now (assigned or pending revocation), by process id."""
        out: dict[tuple[str, int], tuple[str | None, set[str], set[str]]] = {}

        def entry(s: str, p: int) -> tuple[str | None, set[str], set[str]]:
            return out.setdefault((s, p), (None, set(), set()))

        for m in self.members.values():
            for tasks in (m.assigned, m.pending_revocation):
                for s, parts in tasks.active.items():
                    for p in parts:
                        _, standby, warmup = entry(s, p)
                        out[(s, p)] = (m.process_id, standby, warmup)
                for s, ps in tasks.standby.items():
                    for p in ps:
                        entry(s, p)[1].add(m.process_id)
                for s, ps in tasks.warmup.items():
                    for p in ps:
                        entry(s, p)[2].add(m.process_id)
        return out

    # -- replay -------------------------------------------------------------------------------

    def replay(self, key: rec.Key, value: rec.Value | None) -> None:
        """Apply one of the group's records (as written, or read back on load)."""
        self.has_records = True
        kind, member_id = key.type, key.member_id
        if kind == rec.GROUP_METADATA:
            if value is None:
                self.deleted = True
                return
            assert isinstance(value, rec.GroupMetadataValue)
            self.group_epoch = value.epoch
            self.metadata_hash = value.metadata_hash
            self.validated_topology_epoch = value.validated_topology_epoch
            self.last_assignment_configs = {
                c.key: c.value for c in value.last_assignment_configs or ()
            }
        elif kind == rec.TOPOLOGY:
            assert value is None or isinstance(value, rec.TopologyValue)
            self.topology = value
            self.configured = None
        elif kind == rec.MEMBER_METADATA:
            if value is None:
                self.members.pop(member_id, None)
                return
            assert isinstance(value, rec.MemberMetadataValue)
            member = self.members.get(member_id) or Member(member_id)
            self.members[member_id] = member.with_metadata(value)
        elif kind == rec.TARGET_ASSIGNMENT_METADATA:
            assert value is None or isinstance(value, rec.TargetAssignmentMetadataValue)
            self.assignment_epoch = 0 if value is None else value.assignment_epoch
        elif kind == rec.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                assert isinstance(value, rec.TargetAssignmentMemberValue)
                self.target[member_id] = TasksTuple.from_value(value)
        elif kind == rec.CURRENT_MEMBER_ASSIGNMENT:
            current = self.members.get(member_id)
            if value is None:
                if current is not None:
                    self.members[member_id] = dataclasses.replace(
                        current,
                        member_epoch=0,
                        previous_member_epoch=0,
                        state=MemberState.STABLE,
                        assigned=Member("").assigned,
                        pending_revocation=Member("").pending_revocation,
                    )
                return
            assert isinstance(value, rec.CurrentMemberAssignmentValue)
            self.members[member_id] = (current or Member(member_id)).with_assignment(value)

    def tombstones(self) -> list[rec.Record]:
        """The records deleting the whole group (Kafka's createGroupTombstoneRecords)."""
        gid, out = self.group_id, []
        for kind in (rec.CURRENT_MEMBER_ASSIGNMENT, rec.TARGET_ASSIGNMENT_MEMBER):
            out += [rec.encode(rec.Key(kind, gid, m), None) for m in sorted(self.members)]
        out.append(rec.encode(rec.Key(rec.TARGET_ASSIGNMENT_METADATA, gid), None))
        out += [
            rec.encode(rec.Key(rec.MEMBER_METADATA, gid, m), None) for m in sorted(self.members)
        ]
        out.append(rec.encode(rec.Key(rec.GROUP_METADATA, gid), None))
        out.append(rec.encode(rec.Key(rec.TOPOLOGY, gid), None))
        return out

    def validate_delete(self) -> None:
        if self.state not in (GroupState.EMPTY, GroupState.DEAD):
            raise KafkaError(ErrorCode.non_empty_group)

    # -- offsets ------------------------------------------------------------------------------

    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        *,
        is_transactional: bool = False,
        api_version: int = 9,
    ) -> None:
        """Kafka's StreamsGroup.validateOffsetCommit: a commit from outside the group (epoch
        < 0, the group empty), or from a member at its epoch, or at an older one that
        `validate_commit_tasks` then checks per task."""
        if member_epoch < 0 and not self.members:
            return
        if is_transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return
        member = self._member(member_id)
        if not is_transactional and api_version < 9:
            raise KafkaError(
                ErrorCode.unsupported_version,
                "OffsetCommit version 9 or above must be used by members using the streams "
                "group protocol",
            )
        if member_epoch > member.member_epoch:
            raise KafkaError(
                ErrorCode.stale_member_epoch,
                f"Received member epoch {member_epoch} is newer than current member epoch "
                f"{member.member_epoch}.",
            )

    def validate_commit_tasks(
        self, member_id: str, member_epoch: int, topics: Mapping[str, set[int]]
    ) -> None:
        """Kafka's assignment epoch validator: a member committing at an older epoch than its
        own may commit the partitions of the active tasks it had at that epoch (assigned, or
        being revoked, at or before it)."""
        member = self.members.get(member_id)
        if member is None or member_epoch >= member.member_epoch or member_epoch < 0:
            return
        if self.topology is None:
            raise KafkaError(
                ErrorCode.stale_member_epoch,
                "Topology is not available for offset commit validation.",
            )
        subtopology_of = source_topic_subtopologies(self.topology)
        for topic, partitions in sorted(topics.items()):
            sub = subtopology_of.get(topic)
            if sub is None:
                raise KafkaError(
                    ErrorCode.stale_member_epoch, f"Topic {topic} is not in the topology."
                )
            for p in sorted(partitions):
                epoch = member.assigned.active.get(sub, {}).get(p)
                if epoch is None:
                    epoch = member.pending_revocation.active.get(sub, {}).get(p)
                if epoch is None:
                    raise KafkaError(
                        ErrorCode.stale_member_epoch,
                        f"Task {sub}-{p} is not assigned or pending revocation for member.",
                    )
                if member_epoch < epoch:
                    raise KafkaError(
                        ErrorCode.stale_member_epoch,
                        f"Received member epoch {member_epoch} is older than assignment epoch "
                        f"{epoch} for task {sub}-{p}.",
                    )

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_id is None and member_epoch < 0:
            return
        member = self._member(member_id or "")
        check_member_epoch(member_epoch, member.member_epoch)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if not self.members or self.topology is None:
            return False
        return topic in source_topic_subtopologies(self.topology)

    # -- members ------------------------------------------------------------------------------

    def _member(self, member_id: str) -> Member:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.unknown_member_id,
                f"Member {member_id} is not a member of group {self.group_id}.",
            )
        return member

    def _static_owner(self, instance_id: str | None) -> Member | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)
