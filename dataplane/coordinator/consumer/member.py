"""A KIP-848 consumer group's members as their records describe them (Kafka's
ConsumerGroupMember), the group's settings and states."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from dataplane.coordinator.assignors import ASSIGNORS
from dataplane.coordinator.consumer import records as rec

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
"""From ConsumerGroupHeartbeat v1 (KIP-1082) the client generates its member id; v0 lets the
coordinator generate it when the first heartbeat sends an empty one."""

TopicPartitionsMap = dict[bytes, frozenset[int]]
"""topic id -> partitions; never holds an empty set."""

NO_PARTITIONS: TopicPartitionsMap = {}

OwnedPartitions = Sequence[tuple[bytes, Sequence[int]]]
"""What a member's heartbeat says it owns: ((topic id, partitions), ...)."""


# -- configuration and enums -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """Kafka's `group.consumer.*` settings (per group overrides are the caller's business)."""

    session_timeout_ms: int = 45_000
    """group.consumer.session.timeout.ms"""
    heartbeat_interval_ms: int = 5_000
    """group.consumer.heartbeat.interval.ms"""
    max_size: int = 2**31 - 1
    """group.consumer.max.size"""
    assignors: tuple[str, ...] = ("uniform", "range")
    """group.consumer.assignors: names from `assignors.ASSIGNORS`, the first is the default."""
    regex_refresh_interval_ms: int = 10_000
    """How often subscribed regular expressions are re-resolved when topics change."""

    def __post_init__(self) -> None:
        unknown = [a for a in self.assignors if a not in ASSIGNORS]
        if unknown or not self.assignors:
            raise ValueError(f"unknown or no assignors: {self.assignors}")


class MemberState(IntEnum):
    """A member's reconciliation state; the values are the int8 of the records."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class GroupState(Enum):
    """Consumer group states; the value is what ListGroups and ConsumerGroupDescribe say."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


# -- members ---------------------------------------------------------------------------------


def freeze(assignment: Mapping[bytes, Iterable[int]]) -> TopicPartitionsMap:
    out = {}
    for topic_id, parts in assignment.items():
        frozen = frozenset(parts)
        if frozen:
            out[topic_id] = frozen
    return out


def from_records(
    tps: Iterable[rec.TopicPartitions | rec.TargetTopicPartition],
) -> TopicPartitionsMap:
    out: dict[bytes, set[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return freeze(out)


def record_key(kind: int, group_id: str, member_id: str | None = None) -> rec.Key:
    """The key of a group's record of type `kind` (of one member's if `member_id` is given)."""
    if member_id is None:
        return rec.GroupKey(kind, group_id)
    return rec.MemberKey(kind, group_id, member_id)


@dataclass(frozen=True, slots=True)
class Member:
    """A member of a consumer group, as its records describe it (defaults are those of a
    member about to join: Kafka's `ConsumerGroupMember.Builder`)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = ""
    server_assignor: str | None = None
    assigned_partitions: TopicPartitionsMap = field(default_factory=dict)
    partitions_pending_revocation: TopicPartitionsMap = field(default_factory=dict)
    classic_member_metadata: rec.ClassicMemberMetadata | None = None

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == assignment_epoch

    @property
    def regex(self) -> str | None:
        """The subscribed regular expression, None when there is none."""
        return self.subscribed_topic_regex or None

    def subscription_value(self) -> rec.MemberMetadataValue:
        return rec.MemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=tuple(sorted(self.subscribed_topic_names)),
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic_member_metadata,
        )

    def assignment_value(self) -> rec.CurrentMemberAssignmentValue:
        return rec.CurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            assigned_partitions=rec.topic_partitions(self.assigned_partitions),
            partitions_pending_revocation=rec.topic_partitions(self.partitions_pending_revocation),
        )

    def with_subscription(self, value: rec.MemberMetadataValue) -> Member:
        return dataclasses.replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=frozenset(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic_member_metadata=value.classic_member_metadata,
        )

    def with_assignment(self, value: rec.CurrentMemberAssignmentValue) -> Member:
        return dataclasses.replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.from_value(value.state),
            assigned_partitions=from_records(value.assigned_partitions),
            partitions_pending_revocation=from_records(value.partitions_pending_revocation),
        )

    def _next(
        self,
        state: MemberState,
        epoch: int,
        assigned: TopicPartitionsMap,
        pending: TopicPartitionsMap,
    ) -> Member:
        # Kafka's Builder.updateMemberEpoch: the previous epoch becomes the current one.
        return dataclasses.replace(
            self,
            state=state,
            member_epoch=epoch,
            previous_member_epoch=self.member_epoch,
            assigned_partitions=assigned,
            partitions_pending_revocation=pending,
        )


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """What a subscribed regular expression matched, against which topic-name set (`version`,
    a fingerprint of the names) and when."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int
