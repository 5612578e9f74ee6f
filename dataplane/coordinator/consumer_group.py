"""Consumer groups of the new consumer protocol (KIP-848): state, heartbeat and reconciliation.

Pure logic, no I/O, no clock of its own: callers pass `now_ms`. It follows Kafka 4.x's group
coordinator (`GroupMetadataManager.consumerGroupHeartbeat`, `ConsumerGroup`,
`CurrentAssignmentBuilder`, `TargetAssignmentBuilder`) and its records (see
`consumer_group_records`).

How the group coordinator drives it
-----------------------------------
State lives in records: an operation *computes* `(response, records)` without changing the
group; the caller appends the records to the group's `__consumer_offsets` partition and applies
them with `replay`, exactly as on load. Nothing else changes the hard state, so a group rebuilt
from its records equals the original. Between computing records and replaying them there must
be no other operation on the same group (the shard's `write` appends and replays at once, with
no `await` in between). `consumer_group_adapter.ConsumerGroupAdapter` is that caller: it makes
a `ConsumerGroup` a `base.Group` of its `GroupShard`, routes the records of types 3-8 and 16 to
it, runs the heartbeat and fences expired members on the shard's timer:

    group = ConsumerGroup(group_id, config)         # or the shard's existing one
    response, records = group.heartbeat(HeartbeatRequest.from_kio(req), now_ms, topics,
                                        api_version=v, client_id=..., client_host=...)
    shard.write(group_id, records, replay=True)     # appends; replay -> group.replay(...)
    return response.to_kio(ResponseBuilder(68, v))  # once the records are replicated

    group.on_loaded(now_ms)                         # after the partition is replayed
    # at group.next_deadline_ms(): one member at a time (fence, write and replay, next)
    for member_id in group.expired_members(now_ms):
        shard.write(group_id, group.fence_member(member_id, now_ms, topics), replay=True)

Errors are raised as `KafkaError(code, message)` with Kafka's codes and messages;
`HeartbeatResponse.error(exc)` turns one into a response.

`topics` is the cluster's topics by name (`TopicMetadata`): the subscribed topics' partition
counts and ids drive the assignment, and a change of them (KIP-1101's metadata hash) bumps the
group epoch; regular-expression subscriptions are resolved against all the names in it, minus
internal topics. Reuse the same `TopicMetadata` objects between calls (hashes are cached).

The protocol in brief
---------------------
Every change of membership, subscriptions or subscribed topics' metadata bumps the *group epoch*
(ConsumerGroupMetadata record). A heartbeat that sees group epoch > *assignment epoch* runs the
assignor and writes the new *target assignment* (TargetAssignmentMember per changed member, then
TargetAssignmentMetadata with the epoch). Each member then *reconciles* towards its target, one
heartbeat at a time (CurrentMemberAssignment record): it first gives up the partitions it must
revoke (UNREVOKED_PARTITIONS, staying at its epoch until its heartbeat no longer lists them),
then moves to the target epoch and gets the target partitions that nobody owns any more; those
still owned by another member (being revoked) come on a later heartbeat (UNRELEASED_PARTITIONS).
A partition is therefore never owned by two members at once. A heartbeat with a wrong member
epoch is FENCED_MEMBER_EPOCH; a member that misses its session timeout, or does not revoke
within its rebalance timeout, is removed (`expired` + `fence_member`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum, IntEnum
from functools import lru_cache
from typing import Any, NamedTuple

from dataplane.coordinator import consumer_group_records as rec
from dataplane.coordinator.assignors import (
    ASSIGNORS,
    AssignorError,
    MemberSubscription,
    TopicMetadata,
)
from dataplane.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "DescribedGroup",
    "DescribedMember",
    "DescribedTopicPartitions",
    "GroupState",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "HeartbeatResult",
    "Member",
    "MemberState",
    "ResolvedRegex",
    "TopicMetadata",
    "metadata_hash",
    "reconcile",
    "validate_heartbeat_request",
]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
"""From ConsumerGroupHeartbeat v1 (KIP-1082) the client generates its member id; v0 lets the
coordinator generate it when the first heartbeat sends an empty one."""

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Never matched by a subscribed regular expression."""

TopicPartitionsMap = dict[bytes, frozenset[int]]
"""topic id -> partitions; never holds an empty set."""

_NO_PARTITIONS: TopicPartitionsMap = {}


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


def _freeze(assignment: Mapping[bytes, Iterable[int]]) -> TopicPartitionsMap:
    out = {}
    for topic_id, parts in assignment.items():
        frozen = frozenset(parts)
        if frozen:
            out[topic_id] = frozen
    return out


def _from_records(tps: Iterable[rec.TopicPartitions]) -> TopicPartitionsMap:
    out: dict[bytes, set[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return _freeze(out)


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
    classic_member_metadata: bytes | None = None

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
            assigned_partitions=_from_records(value.assigned_partitions),
            partitions_pending_revocation=_from_records(value.partitions_pending_revocation),
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


# -- requests and responses ------------------------------------------------------------------

OwnedPartitions = Sequence[tuple[bytes, Sequence[int]]]


def _ms(value: Any) -> int:
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    return int(value)


def _topic_id(value: Any) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    if value is None:
        return bytes(16)
    return bytes(value)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat v0-v1 request fields, as plain values (topic ids are 16 bytes;
    None = "not sent / unchanged", as in the schema)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: OwnedPartitions | None = None

    @classmethod
    def from_kio(cls, req: Any) -> HeartbeatRequest:
        """From kio's ConsumerGroupHeartbeatRequest (v0 has no subscribed_topic_regex)."""
        owned = req.topic_partitions
        return cls(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=int(req.member_epoch),
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=_ms(req.rebalance_timeout),
            subscribed_topic_names=(
                None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names)
            ),
            subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
            server_assignor=req.server_assignor,
            topic_partitions=(
                None
                if owned is None
                else tuple((_topic_id(tp.topic_id), tuple(tp.partitions)) for tp in owned)
            ),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """ConsumerGroupHeartbeat response fields. `assignment` is None when not sent (the member
    keeps its last one), else ((topic id, partitions), ...)."""

    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: tuple[tuple[bytes, tuple[int, ...]], ...] | None = None
    error_code: int = 0
    error_message: str | None = None

    @classmethod
    def error(cls, exc: KafkaError) -> HeartbeatResponse:
        """The response Kafka sends for a failed heartbeat."""
        return cls(None, 0, 0, None, int(exc.code), exc.message)

    def to_kio(self, b: Any) -> Any:
        """The kio response, built with `dataplane.protocol.codec.ResponseBuilder(68, v)`."""
        assignment = None
        if self.assignment is not None:
            assignment = b.Assignment(
                topic_partitions=tuple(
                    b.TopicPartitions(topic_id=t, partitions=p) for t, p in self.assignment
                )
            )
        return b.ConsumerGroupHeartbeatResponse(
            throttle_time=0,
            error_code=self.error_code,
            error_message=self.error_message,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            heartbeat_interval=self.heartbeat_interval_ms,
            assignment=assignment,
        )


Record = tuple[bytes, bytes | None]


class HeartbeatResult(NamedTuple):
    response: HeartbeatResponse
    records: list[Record]


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: bytes
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = 1
    """v1+: 1 = consumer protocol member (0 classic, -1 unknown)."""


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """One ConsumerGroupDescribe v0-v1 `DescribedGroup`."""

    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedMember, ...]
    authorized_operations: int = -(2**31)
    error_code: int = 0
    error_message: str | None = None

    def to_kio(self, b: Any) -> Any:
        """The kio DescribedGroup, built with `ResponseBuilder(69, v)` (v0 drops member_type)."""

        def assignment(tps: tuple[DescribedTopicPartitions, ...]) -> Any:
            return b.Assignment(
                topic_partitions=tuple(
                    b.TopicPartitions(
                        topic_id=tp.topic_id, topic_name=tp.topic_name, partitions=tp.partitions
                    )
                    for tp in tps
                )
            )

        return b.DescribedGroup(
            error_code=self.error_code,
            error_message=self.error_message,
            group_id=self.group_id,
            group_state=self.group_state,
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor_name=self.assignor_name,
            members=tuple(
                b.Member(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=assignment(m.assignment),
                    target_assignment=assignment(m.target_assignment),
                    member_type=m.member_type,
                )
                for m in self.members
            ),
            authorized_operations=self.authorized_operations,
        )


# -- validation ------------------------------------------------------------------------------


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_heartbeat_request(
    req: HeartbeatRequest,
    api_version: int,
    assignors: Sequence[str] = ("uniform", "range"),
) -> None:
    """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` (done by `heartbeat` too; the
    coordinator service runs it before routing the request)."""
    if (
        api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
        or req.member_epoch > 0
        or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
    ) and (req.member_id is None or not req.member_id.strip()):
        raise _invalid("MemberId can't be empty.")
    if req.group_id is None or not req.group_id.strip():
        raise _invalid("GroupId can't be empty.")
    if _blank(req.instance_id):
        raise _invalid("InstanceId can't be empty.")
    if _blank(req.rack_id):
        raise _invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or len(req.topic_partitions) > 0:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise _invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining."
            )
    elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise KafkaError(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.",
        )


@lru_cache(maxsize=1024)
def _compile(regex: str) -> re.Pattern[str] | None:
    try:
        return re.compile(regex)
    except re.error:
        return None


def _check_regex(regex: str) -> None:
    try:
        re.compile(regex)
    except re.error as e:
        raise KafkaError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.",
        ) from None


# -- metadata hash ---------------------------------------------------------------------------

_I64 = struct.Struct(">q")


@lru_cache(maxsize=65536)
def _topic_digest(topic: TopicMetadata) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(topic.topic_id)
    name = topic.name.encode()
    h.update(len(name).to_bytes(4, "big") + name)
    h.update(topic.num_partitions.to_bytes(4, "big", signed=True))
    if topic.partition_racks is not None:
        for p, racks in enumerate(topic.partition_racks):
            for rack in sorted(racks):
                data = rack.encode()
                h.update(p.to_bytes(4, "big") + len(data).to_bytes(4, "big") + data)
    return h.digest()


def metadata_hash(names: Iterable[str], topics: Mapping[str, TopicMetadata]) -> int:
    """A 64-bit hash of the subscribed topics' metadata (id, name, partitions, racks): the
    group epoch is bumped when it changes (KIP-1101). 0 when no subscribed topic exists. Only
    compared with itself, so it need not be Kafka's value."""
    h = hashlib.blake2b(digest_size=8)
    found = False
    for name in sorted(names):
        topic = topics.get(name)
        if topic is not None:
            h.update(_topic_digest(topic))
            found = True
    return _I64.unpack(h.digest())[0] if found else 0


def _names_version(names: Sequence[str]) -> int:
    h = hashlib.blake2b(digest_size=8)
    for name in names:
        data = name.encode()
        h.update(len(data).to_bytes(4, "big") + data)
    return _I64.unpack(h.digest())[0]


# -- reconciliation (CurrentAssignmentBuilder) -------------------------------------------------


def _owns_any(owned: OwnedPartitions | None, partitions: TopicPartitionsMap) -> bool:
    """Whether the member still reports owning one of `partitions` (unknown = yes)."""
    if owned is None:
        return True
    for topic_id, parts in owned:
        pending = partitions.get(topic_id)
        if pending is not None and any(p in pending for p in parts):
            return True
    return False


def reconcile(
    member: Member,
    target_epoch: int,
    target: Mapping[bytes, frozenset[int]],
    owned: OwnedPartitions | None,
    is_owned_by_other: Callable[[bytes, int], bool],
) -> Member:
    """One step of Kafka's `CurrentAssignmentBuilder`: the member's next state towards its
    target assignment. `owned` is what the member's heartbeat says it owns (None: not sent);
    `is_owned_by_other(topic id, partition)` whether another member still owns a partition
    (assigned to it or pending its revocation)."""
    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(
                member, member.member_epoch, target_epoch, target, owned, is_owned_by_other
            )
        return member
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next_assignment(
            member, member.member_epoch, target_epoch, target, owned, is_owned_by_other
        )
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(
            member, member.member_epoch, target_epoch, target, owned, is_owned_by_other
        )
    # UNKNOWN: a state from a newer version; start over from no partitions.
    if owned is None or len(owned) > 0:
        raise KafkaError(
            ErrorCode.fenced_member_epoch,
            "The consumer group member is in a unknown state. The member must abandon all its "
            "partitions and rejoin.",
        )
    return _next_assignment(member, target_epoch, target_epoch, target, owned, is_owned_by_other)


def _next_assignment(
    member: Member,
    member_epoch: int,
    target_epoch: int,
    target: Mapping[bytes, frozenset[int]],
    owned: OwnedPartitions | None,
    is_owned_by_other: Callable[[bytes, int], bool],
) -> Member:
    assigned: TopicPartitionsMap = {}
    revoking: TopicPartitionsMap = {}
    to_assign: dict[bytes, set[int]] = {}
    unreleased = False
    current = member.assigned_partitions
    for topic_id in sorted(set(target) | set(current)):
        want = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & want
        revoke = have - keep
        pending_mine = member.partitions_pending_revocation.get(topic_id, frozenset())
        new = set()
        for p in want - keep:
            if p not in pending_mine and is_owned_by_other(topic_id, p):
                unreleased = True
            else:
                new.add(p)
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if new:
            to_assign[topic_id] = new

    if revoking and _owns_any(owned, revoking):
        # Revoke first, staying at the current epoch until the member confirms.
        return member._next(MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    if to_assign:
        merged = {
            t: assigned.get(t, frozenset()) | to_assign.get(t, set())
            for t in set(assigned) | set(to_assign)
        }
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return member._next(state, target_epoch, _freeze(merged), {})
    if unreleased:
        return member._next(MemberState.UNRELEASED_PARTITIONS, target_epoch, assigned, {})
    return member._next(MemberState.STABLE, target_epoch, assigned, {})


# -- the group -------------------------------------------------------------------------------


def _default_member_id() -> str:
    """Like Kafka's `Uuid.randomUuid().toString()`: URL-safe base64 of 16 random bytes."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _key(kind: int, group_id: str, member_id: str | None = None) -> rec.Key:
    if member_id is None:
        return rec.GroupKey(kind, group_id)
    return rec.MemberKey(kind, group_id, member_id)


class ConsumerGroup:
    """One consumer group. Hard state changes only through `replay`; `heartbeat`,
    `fence_member` and `tombstones` compute records; deadlines are soft state."""

    def __init__(
        self,
        group_id: str,
        config: ConsumerGroupConfig | None = None,
        member_id_factory: Callable[[], str] = _default_member_id,
    ) -> None:
        self.group_id = group_id
        self.config = config or ConsumerGroupConfig()
        self._new_member_id = member_id_factory
        # hard state (from records)
        self.exists = False
        """Whether a record has created the group (and no tombstone deleted it since)."""
        self.deleted = False
        self.group_epoch = 0
        self.metadata_hash = 0
        self.creation_time_ms = -1
        self.assignment_epoch = 0
        self.members: dict[str, Member] = {}
        self.target: dict[str, TopicPartitionsMap] = {}
        self.static_members: dict[str, str] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.legacy_partition_metadata: rec.PartitionMetadataValue | None = None
        # derived from the hard state
        self._owners: dict[tuple[bytes, int], tuple[str, int]] = {}
        self._names: Counter[str] = Counter()
        self._regexes: Counter[str] = Counter()
        self._assignors: Counter[str] = Counter()
        # soft state
        self._session_deadlines: dict[str, int] = {}
        self._rebalance_deadlines: dict[str, tuple[int, int]] = {}
        self._regex_checked_ms: int | None = None

    # -- queries --------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        if self.deleted:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return GroupState.RECONCILING
        return GroupState.STABLE

    @property
    def state_name(self) -> str:
        """For ListGroups (group type "consumer", protocol type "consumer")."""
        return self.state.value

    @property
    def is_empty(self) -> bool:
        return self.state in (GroupState.EMPTY, GroupState.DEAD)

    def subscribed_topic_names(self) -> frozenset[str]:
        """Every topic some member subscribes to, by name or through a resolved regex."""
        names = set(self._names)
        for regex in self._regexes:
            resolved = self.resolved_regexes.get(regex)
            if resolved is not None:
                names |= resolved.topics
        return frozenset(names)

    def preferred_assignor(self) -> str:
        return self._pick_assignor(self._assignors)

    def owner(self, topic_id: bytes, partition: int) -> tuple[str, int] | None:
        """(member id, member epoch) owning a partition (assigned or being revoked), or None."""
        return self._owners.get((topic_id, partition))

    def snapshot(self) -> dict[str, Any]:
        """The hard state, comparable between a group and one rebuilt from its records."""
        return {
            "exists": self.exists,
            "group_epoch": self.group_epoch,
            "metadata_hash": self.metadata_hash,
            "creation_time_ms": self.creation_time_ms,
            "assignment_epoch": self.assignment_epoch,
            "members": dict(self.members),
            "target": dict(self.target),
            "static_members": dict(self.static_members),
            "resolved_regexes": dict(self.resolved_regexes),
            "legacy_partition_metadata": self.legacy_partition_metadata,
            "owners": dict(self._owners),
            "state": self.state,
        }

    # -- OffsetCommit / OffsetFetch / DeleteGroups ------------------------------------------

    def validate_offset_commit(
        self,
        member_id: str | None,
        member_epoch: int,
        *,
        is_transactional: bool = False,
        api_version: int = 9,
    ) -> None:
        """Kafka's `ConsumerGroup.validateOffsetCommit`: OffsetCommit's generation id is the
        member epoch. Epoch < 0 on an empty group = a commit from outside the group (admin)."""
        if member_epoch < 0 and not self.members:
            return
        member = self._member(member_id or "")
        if not is_transactional and api_version < 9:
            raise KafkaError(
                ErrorCode.unsupported_version,
                "OffsetCommit version 9 or above must be used by members using the modern group "
                "protocol",
            )
        if member_epoch != member.member_epoch:
            raise KafkaError(
                ErrorCode.stale_member_epoch,
                f"The received member epoch {member_epoch} does not match the expected member "
                f"epoch {member.member_epoch}.",
            )

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka's `ConsumerGroup.validateOffsetFetch` (OffsetFetch v9+ sends member id/epoch;
        no member id and epoch < 0 = not from a member)."""
        if member_id is None and member_epoch < 0:
            return
        member = self._member(member_id or "")
        if member_epoch != member.member_epoch:
            raise KafkaError(
                ErrorCode.stale_member_epoch,
                f"The received member epoch {member_epoch} does not match the expected member "
                f"epoch {member.member_epoch}.",
            )

    def validate_delete(self) -> None:
        if self.state not in (GroupState.EMPTY, GroupState.DEAD):
            raise KafkaError(ErrorCode.non_empty_group)

    def tombstones(self) -> list[Record]:
        """The records deleting the whole group (Kafka's `createGroupTombstoneRecords`)."""
        gid = self.group_id
        out: list[Record] = []
        for m in sorted(self.members):
            out.append(rec.encode(_key(rec.CURRENT_MEMBER_ASSIGNMENT, gid, m), None))
        for m in sorted(set(self.members) | set(self.target)):
            out.append(rec.encode(_key(rec.TARGET_ASSIGNMENT_MEMBER, gid, m), None))
        out.append(rec.encode(_key(rec.TARGET_ASSIGNMENT_METADATA, gid), None))
        for m in sorted(self.members):
            out.append(rec.encode(_key(rec.MEMBER_METADATA, gid, m), None))
        for regex in sorted(self.resolved_regexes):
            out.append(rec.encode(rec.RegexKey(gid, regex), None))
        out.append(rec.encode(_key(rec.PARTITION_METADATA, gid), None))
        out.append(rec.encode(_key(rec.GROUP_METADATA, gid), None))
        return out

    # -- describe ---------------------------------------------------------------------------

    def describe(self, topics: Mapping[str, TopicMetadata]) -> DescribedGroup:
        """ConsumerGroupDescribe's DescribedGroup (authorized operations are the caller's: it
        sets `authorized_operations` with `dataclasses.replace` if asked to)."""
        if not self.exists:
            return DescribedGroup(
                self.group_id, "", 0, 0, "", (), error_code=int(ErrorCode.group_id_not_found)
            )
        names = {t.topic_id: t.name for t in topics.values()}

        def described(assignment: TopicPartitionsMap) -> tuple[DescribedTopicPartitions, ...]:
            return tuple(
                DescribedTopicPartitions(t, names[t], tuple(sorted(assignment[t])))
                for t in sorted(assignment, key=lambda t: names.get(t, ""))
                if t in names
            )

        members = tuple(
            DescribedMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=described(m.assigned_partitions),
                target_assignment=described(self.target.get(m.member_id, _NO_PARTITIONS)),
            )
            for m in sorted(self.members.values(), key=lambda m: m.member_id)
        )
        return DescribedGroup(
            group_id=self.group_id,
            group_state=self.state.value,
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor_name=self.preferred_assignor(),
            members=members,
        )

    # -- deadlines (soft state) -------------------------------------------------------------

    def on_loaded(self, now_ms: int) -> None:
        """After loading: every member gets a full session timeout, and members revoking
        partitions a full rebalance timeout (Kafka's `onLoaded`)."""
        for m in self.members.values():
            self._session_deadlines[m.member_id] = now_ms + self.config.session_timeout_ms
            if m.state == MemberState.UNREVOKED_PARTITIONS:
                self._rebalance_deadlines[m.member_id] = (
                    m.member_epoch,
                    now_ms + m.rebalance_timeout_ms,
                )

    def _prune_deadlines(self) -> None:
        for m in [m for m in self._session_deadlines if m not in self.members]:
            del self._session_deadlines[m]
        for m, (epoch, _) in list(self._rebalance_deadlines.items()):
            member = self.members.get(m)
            if member is None or member.member_epoch != epoch:
                del self._rebalance_deadlines[m]

    def next_deadline_ms(self) -> int | None:
        """The earliest session or rebalance deadline of a member, if any."""
        self._prune_deadlines()
        times = [*self._session_deadlines.values()]
        times += [d for _, d in self._rebalance_deadlines.values()]
        return min(times, default=None)

    def expired_members(self, now_ms: int) -> list[str]:
        """Members whose session expired (no heartbeat for the session timeout) or who did not
        revoke partitions within their rebalance timeout: fence each with `fence_member`."""
        self._prune_deadlines()
        out = {m for m, d in self._session_deadlines.items() if d <= now_ms}
        out |= {m for m, (_, d) in self._rebalance_deadlines.items() if d <= now_ms}
        return sorted(out)

    def postpone_expiry(self, member_id: str, deadline_ms: int) -> None:
        """Try to fence `member_id` again at `deadline_ms` (its fencing records could not be
        written; `fence_member` already dropped its deadlines)."""
        if member_id in self.members:
            self._session_deadlines[member_id] = deadline_ms

    def session_deadline_ms(self, member_id: str) -> int | None:
        return self._session_deadlines.get(member_id)

    def rebalance_deadline_ms(self, member_id: str) -> int | None:
        entry = self._rebalance_deadlines.get(member_id)
        return None if entry is None else entry[1]

    # -- heartbeat --------------------------------------------------------------------------

    def heartbeat(
        self,
        req: HeartbeatRequest,
        now_ms: int,
        topics: Mapping[str, TopicMetadata],
        *,
        api_version: int = 1,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        """Handle a ConsumerGroupHeartbeat: (response, records to write and replay). Raises
        KafkaError for an error response (and then nothing needs writing)."""
        validate_heartbeat_request(req, api_version, self.config.assignors)
        if req.group_id != self.group_id:
            raise _invalid(f"heartbeat for group {req.group_id} sent to group {self.group_id}")
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req, now_ms, topics)

        records: list[Record] = []
        joining = req.member_epoch == 0
        if not self.exists and not joining:
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Consumer group {self.group_id} not found."
            )
        if len(self.members) >= self.config.max_size and (
            not req.member_id or req.member_id not in self.members
        ):
            raise KafkaError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.max_size} members.",
            )
        member_id = req.member_id or self._new_member_id()
        owned = req.topic_partitions

        replaced: Member | None = None
        if req.instance_id is None:
            member = self._dynamic_member(member_id, req.member_epoch, owned, joining)
        else:
            member, replaced = self._static_member(
                member_id, req.member_epoch, req.instance_id, owned, joining, records
            )

        # 1. The member's subscription (and a group epoch bump if it changed).
        updated = dataclasses.replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=(
                req.server_assignor if req.server_assignor is not None else member.server_assignor
            ),
            subscribed_topic_names=(
                frozenset(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                req.subscribed_topic_regex
                if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=client_id,
            client_host=client_host,
            classic_member_metadata=None,
        )
        bump = self.group_epoch == 0
        if updated != member:
            records.append(
                rec.encode(
                    _key(rec.MEMBER_METADATA, self.group_id, member_id),
                    updated.subscription_value(),
                )
            )
            bump |= updated.subscribed_topic_names != member.subscribed_topic_names

        # The member whose subscription the group's current counts include.
        previous = replaced if replaced is not None else self.members.get(member_id)
        regexes, resolved, regex_bump = self._update_regexes(
            previous, updated, now_ms, topics, records
        )
        bump |= regex_bump

        names = Counter(self._names)
        if previous is not None:
            names.subtract(previous.subscribed_topic_names)
        names.update(updated.subscribed_topic_names)
        subscribed = {n for n, c in names.items() if c > 0}
        for regex in regexes:
            if regex in resolved:
                subscribed |= resolved[regex].topics
        new_hash = metadata_hash(subscribed, topics)
        bump |= new_hash != self.metadata_hash

        group_epoch = self.group_epoch
        if bump:
            group_epoch += 1
            records.append(
                rec.encode(
                    _key(rec.GROUP_METADATA, self.group_id),
                    rec.ConsumerGroupMetadataValue(
                        group_epoch,
                        new_hash,
                        self.creation_time_ms if self.exists else now_ms,
                    ),
                )
            )
            if self.legacy_partition_metadata is not None:
                records.append(rec.encode(_key(rec.PARTITION_METADATA, self.group_id), None))

        # 2. A new target assignment if the group epoch moved past the assignment epoch.
        if group_epoch > self.assignment_epoch:
            target_epoch = group_epoch
            member_target = self._update_target(
                group_epoch, previous, replaced, updated, resolved, topics, now_ms, records
            )
        else:
            target_epoch = self.assignment_epoch
            member_target = self.target.get(member_id)
            if member_target is None and replaced is not None:
                member_target = self.target.get(replaced.member_id)
            member_target = member_target or _NO_PARTITIONS

        # 3. Reconcile the member towards its target.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = reconcile(
                updated, target_epoch, member_target, owned, self._owned_by_other(member_id)
            )
            if reconciled != updated:
                records.append(
                    rec.encode(
                        _key(rec.CURRENT_MEMBER_ASSIGNMENT, self.group_id, member_id),
                        reconciled.assignment_value(),
                    )
                )
                if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
                    self._rebalance_deadlines[member_id] = (
                        reconciled.member_epoch,
                        now_ms + reconciled.rebalance_timeout_ms,
                    )
                else:
                    self._rebalance_deadlines.pop(member_id, None)
        self._session_deadlines[member_id] = now_ms + self.config.session_timeout_ms

        full = joining or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.topic_partitions is not None
        )
        assignment = None
        if full or reconciled.assigned_partitions != member.assigned_partitions:
            assignment = tuple(
                (t, tuple(sorted(ps))) for t, ps in sorted(reconciled.assigned_partitions.items())
            )
        response = HeartbeatResponse(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=assignment,
        )
        return HeartbeatResult(response, records)

    def _member(self, member_id: str) -> Member:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.unknown_member_id,
                f"Member {member_id} is not a member of group {self.group_id}.",
            )
        return member

    @staticmethod
    def _check_epoch(member: Member, received: int, owned: OwnedPartitions | None) -> None:
        """Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`."""
        if received > member.member_epoch:
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )
        # The previous epoch with a subset of the assignment is fine: the response that
        # bumped the epoch was lost.
        if received < member.member_epoch and (
            received != member.previous_member_epoch
            or not _is_subset(owned, member.assigned_partitions)
        ):
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({received}) than "
                f"the one known by the group coordinator ({member.member_epoch}). The "
                "member must abandon all its partitions and rejoin.",
            )

    def _dynamic_member(
        self, member_id: str, epoch: int, owned: OwnedPartitions | None, joining: bool
    ) -> Member:
        member = self.members.get(member_id)
        if member is None:
            if not joining:
                raise KafkaError(
                    ErrorCode.unknown_member_id,
                    f"Member {member_id} is not a member of group {self.group_id}.",
                )
            member = Member(member_id)
        self._check_epoch(member, epoch, owned)
        return member

    def _static_member(
        self,
        member_id: str,
        epoch: int,
        instance_id: str,
        owned: OwnedPartitions | None,
        joining: bool,
        records: list[Record],
    ) -> tuple[Member, Member | None]:
        existing_id = self.static_members.get(instance_id)
        existing = None if existing_id is None else self.members.get(existing_id)
        if joining:
            if existing is None:
                return self.members.get(member_id) or Member(member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise KafkaError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {instance_id} cannot join the "
                    f"group because the instance id is owned by {existing.member_id} member.",
                )
            # The instance comes back: a new member id takes over the old member's state.
            new = dataclasses.replace(
                existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
            )
            self._remove_member_records(existing.member_id, records)
            gid = self.group_id
            records.append(
                rec.encode(_key(rec.MEMBER_METADATA, gid, member_id), new.subscription_value())
            )
            old_target = self.target.get(existing.member_id, _NO_PARTITIONS)
            records.append(
                rec.encode(
                    _key(rec.TARGET_ASSIGNMENT_MEMBER, gid, member_id),
                    rec.TargetAssignmentMemberValue(rec.topic_partitions(old_target)),
                )
            )
            records.append(
                rec.encode(
                    _key(rec.CURRENT_MEMBER_ASSIGNMENT, gid, member_id), new.assignment_value()
                )
            )
            return new, existing
        if existing is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise KafkaError(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{existing.member_id}.",
            )
        self._check_epoch(existing, epoch, owned)
        return existing, None

    def _owned_by_other(self, member_id: str) -> Callable[[bytes, int], bool]:
        owners = self._owners

        def check(topic_id: bytes, partition: int) -> bool:
            owner = owners.get((topic_id, partition))
            return owner is not None and owner[0] != member_id

        return check

    def _update_regexes(
        self,
        previous: Member | None,
        updated: Member,
        now_ms: int,
        topics: Mapping[str, TopicMetadata],
        records: list[Record],
    ) -> tuple[set[str], dict[str, ResolvedRegex], bool]:
        """The regexes in use once `updated` replaces `previous`, their resolutions (new ones
        included) and whether that changes subscriptions (bump). Adds the regex records."""
        regexes = Counter(self._regexes)
        old = previous.regex if previous is not None else None
        new = updated.regex
        if old:
            regexes[old] -= 1
        if new:
            regexes[new] += 1
        in_use = {r for r, c in regexes.items() if c > 0}
        resolved = dict(self.resolved_regexes)
        bump = False
        if old != new:
            if old and old not in in_use and old in resolved:
                records.append(rec.encode(rec.RegexKey(self.group_id, old), None))
                del resolved[old]
            if new:
                _check_regex(new)
                # A regex already resolved for others changes this member's topics now.
                bump = new in resolved
        if not in_use:
            return in_use, resolved, bump
        due = (
            self._regex_checked_ms is None
            or now_ms - self._regex_checked_ms >= self.config.regex_refresh_interval_ms
        )
        if not due and all(r in resolved for r in in_use):
            return in_use, resolved, bump
        self._regex_checked_ms = now_ms
        names = sorted(n for n in topics if n not in INTERNAL_TOPICS)
        version = _names_version(names)
        for regex in sorted(in_use):
            before = resolved.get(regex)
            if before is not None and before.version == version:
                continue
            pattern = _compile(regex)
            matched = frozenset(
                n for n in names if pattern is not None and pattern.fullmatch(n) is not None
            )
            after = ResolvedRegex(matched, version, now_ms)
            records.append(
                rec.encode(
                    rec.RegexKey(self.group_id, regex),
                    rec.RegularExpressionValue(tuple(sorted(matched)), version, now_ms),
                )
            )
            if (before.topics if before is not None else frozenset()) != matched:
                bump = True
            resolved[regex] = after
        return in_use, resolved, bump

    def _pick_assignor(self, counts: Counter[str]) -> str:
        live = [(c, name) for name, c in counts.items() if c > 0 and name in ASSIGNORS]
        if not live:
            return self.config.assignors[0]
        return min(live, key=lambda x: (-x[0], x[1]))[1]

    def _update_target(
        self,
        group_epoch: int,
        previous: Member | None,
        replaced: Member | None,
        updated: Member,
        resolved: Mapping[str, ResolvedRegex],
        topics: Mapping[str, TopicMetadata],
        now_ms: int,
        records: list[Record],
    ) -> TopicPartitionsMap:
        members = dict(self.members)
        current = dict(self.target)
        if replaced is not None:
            members.pop(replaced.member_id, None)
            current[updated.member_id] = current.pop(replaced.member_id, _NO_PARTITIONS)
        members[updated.member_id] = updated

        counts = Counter(self._assignors)
        if previous is not None and previous.server_assignor:
            counts[previous.server_assignor] -= 1
        if updated.server_assignor:
            counts[updated.server_assignor] += 1
        name = self._pick_assignor(counts)

        specs = {}
        for m in members.values():
            topics_of = set(m.subscribed_topic_names)
            if m.regex and m.regex in resolved:
                topics_of |= resolved[m.regex].topics
            specs[m.member_id] = MemberSubscription(frozenset(topics_of), m.rack_id)
        try:
            assignment = ASSIGNORS[name](specs, topics, current)
        except AssignorError as e:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"Failed to compute a new target assignment for epoch {group_epoch}: {e}",
            ) from None

        gid = self.group_id
        result = {m: _freeze(assignment.get(m, {})) for m in specs}
        for m in sorted(specs):
            if result[m] != self.target.get(m):
                records.append(
                    rec.encode(
                        _key(rec.TARGET_ASSIGNMENT_MEMBER, gid, m),
                        rec.TargetAssignmentMemberValue(rec.topic_partitions(result[m])),
                    )
                )
        records.append(
            rec.encode(
                _key(rec.TARGET_ASSIGNMENT_METADATA, gid),
                rec.TargetAssignmentMetadataValue(group_epoch, now_ms),
            )
        )
        return result[updated.member_id]

    # -- leaving and fencing ------------------------------------------------------------------

    def _leave(
        self, req: HeartbeatRequest, now_ms: int, topics: Mapping[str, TopicMetadata]
    ) -> HeartbeatResult:
        if not self.exists:
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Consumer group {self.group_id} not found."
            )
        response = HeartbeatResponse(req.member_id, req.member_epoch, 0)
        if req.instance_id is None:
            member = self._member(req.member_id)
            return HeartbeatResult(response, self.fence_member(member.member_id, now_ms, topics))
        member_id = self.static_members.get(req.instance_id)
        member = None if member_id is None else self.members.get(member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown."
            )
        if member.member_id != req.member_id:
            raise KafkaError(
                ErrorCode.fenced_instance_id,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced "
                f"by member {member.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A temporary leave: the member keeps its partitions until its session expires.
            leaving = dataclasses.replace(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                partitions_pending_revocation={},
            )
            record = rec.encode(
                _key(rec.CURRENT_MEMBER_ASSIGNMENT, self.group_id, member.member_id),
                leaving.assignment_value(),
            )
            return HeartbeatResult(
                HeartbeatResponse(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, 0), [record]
            )
        return HeartbeatResult(response, self.fence_member(member.member_id, now_ms, topics))

    def _remove_member_records(self, member_id: str, records: list[Record]) -> None:
        """Tombstones of a member; the order matters to `replay`."""
        gid = self.group_id
        records.append(rec.encode(_key(rec.CURRENT_MEMBER_ASSIGNMENT, gid, member_id), None))
        records.append(rec.encode(_key(rec.TARGET_ASSIGNMENT_MEMBER, gid, member_id), None))
        records.append(rec.encode(_key(rec.MEMBER_METADATA, gid, member_id), None))

    def fence_member(
        self, member_id: str, now_ms: int, topics: Mapping[str, TopicMetadata]
    ) -> list[Record]:
        """Records removing a member (it left, or its session or rebalance timeout expired)
        and bumping the group epoch so the others rebalance. UNKNOWN_MEMBER_ID if absent."""
        member = self._member(member_id)
        records: list[Record] = []
        self._remove_member_records(member_id, records)
        names = Counter(self._names)
        names.subtract(member.subscribed_topic_names)
        subscribed = {n for n, c in names.items() if c > 0}
        regexes = Counter(self._regexes)
        if member.regex:
            regexes[member.regex] -= 1
            if regexes[member.regex] <= 0 and member.regex in self.resolved_regexes:
                records.append(rec.encode(rec.RegexKey(self.group_id, member.regex), None))
        for regex, count in regexes.items():
            if count > 0 and regex in self.resolved_regexes:
                subscribed |= self.resolved_regexes[regex].topics
        records.append(
            rec.encode(
                _key(rec.GROUP_METADATA, self.group_id),
                rec.ConsumerGroupMetadataValue(
                    self.group_epoch + 1, metadata_hash(subscribed, topics), self.creation_time_ms
                ),
            )
        )
        if self.legacy_partition_metadata is not None:
            records.append(rec.encode(_key(rec.PARTITION_METADATA, self.group_id), None))
        self._session_deadlines.pop(member_id, None)
        self._rebalance_deadlines.pop(member_id, None)
        return records

    # -- replay -----------------------------------------------------------------------------

    def replay_record(self, key: bytes, value: bytes | None) -> None:
        """Apply one encoded record of this group."""
        decoded = rec.decode(key, value)
        if decoded is None:
            raise ValueError(f"record type {rec.record_type(key)} is not a consumer group record")
        self.replay(*decoded)

    def replay(self, key: rec.Key, value: rec.Value | None) -> None:
        """Apply one decoded record (Kafka's `GroupMetadataManager.replay` methods)."""
        if key.group_id != self.group_id:
            raise ValueError(f"record of group {key.group_id} replayed on {self.group_id}")
        if value is None and not self.exists:
            return  # a tombstone for a group that is not there
        if value is not None:
            self.exists = True
            self.deleted = False
        if isinstance(key, rec.MemberKey):
            self._replay_member(key, value)
        elif isinstance(key, rec.RegexKey):
            if isinstance(value, rec.RegularExpressionValue):
                self.resolved_regexes[key.regex] = ResolvedRegex(
                    frozenset(value.topics), value.version, value.timestamp
                )
            else:
                self.resolved_regexes.pop(key.regex, None)
        elif key.type == rec.GROUP_METADATA:
            if isinstance(value, rec.ConsumerGroupMetadataValue):
                self.group_epoch = value.epoch
                self.metadata_hash = value.metadata_hash
                self.creation_time_ms = value.creation_time_ms
            else:
                self._delete()
        elif key.type == rec.PARTITION_METADATA:
            self.legacy_partition_metadata = (
                value if isinstance(value, rec.PartitionMetadataValue) else None
            )
        elif key.type == rec.TARGET_ASSIGNMENT_METADATA:
            if isinstance(value, rec.TargetAssignmentMetadataValue):
                self.assignment_epoch = value.assignment_epoch
            else:
                if self.target:
                    raise IllegalStateError(
                        f"Received a tombstone record to delete target assignment of "
                        f"{self.group_id} but the assignment still has {len(self.target)} "
                        "members."
                    )
                self.assignment_epoch = -1

    def _replay_member(self, key: rec.MemberKey, value: rec.Value | None) -> None:
        member_id = key.member_id
        old = self.members.get(member_id)
        if key.type == rec.MEMBER_METADATA:
            if isinstance(value, rec.MemberMetadataValue):
                self._set_member(old, (old or Member(member_id)).with_subscription(value))
            elif old is not None:
                if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                    raise IllegalStateError(
                        f"Received a tombstone record to delete member {member_id} but did not "
                        "receive ConsumerGroupCurrentMemberAssignmentValue tombstone."
                    )
                if member_id in self.target:
                    raise IllegalStateError(
                        f"Received a tombstone record to delete member {member_id} but did not "
                        "receive ConsumerGroupTargetAssignmentMetadataValue tombstone."
                    )
                self._set_member(old, None)
        elif key.type == rec.TARGET_ASSIGNMENT_MEMBER:
            if isinstance(value, rec.TargetAssignmentMemberValue):
                self.target[member_id] = _from_records(value.topic_partitions)
            else:
                self.target.pop(member_id, None)
        elif key.type == rec.CURRENT_MEMBER_ASSIGNMENT:
            if isinstance(value, rec.CurrentMemberAssignmentValue):
                self._set_member(old, (old or Member(member_id)).with_assignment(value))
            elif old is not None:
                self._set_member(
                    old,
                    dataclasses.replace(
                        old,
                        member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        assigned_partitions={},
                        partitions_pending_revocation={},
                    ),
                )

    def _set_member(self, old: Member | None, new: Member | None) -> None:
        """Replace `old` by `new` (None: remove), keeping the derived indexes in step."""
        if old is not None:
            self._names.subtract(old.subscribed_topic_names)
            if old.regex:
                self._regexes[old.regex] -= 1
            if old.server_assignor:
                self._assignors[old.server_assignor] -= 1
            for topic_id, parts in (
                *old.assigned_partitions.items(),
                *old.partitions_pending_revocation.items(),
            ):
                for p in parts:
                    if self._owners.get((topic_id, p)) != (old.member_id, old.member_epoch):
                        raise IllegalStateError(
                            f"{old.member_id} releases {topic_id.hex()}-{p} it does not own at "
                            f"epoch {old.member_epoch}: {self._owners.get((topic_id, p))}"
                        )
                    del self._owners[(topic_id, p)]
            if old.instance_id and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
            del self.members[old.member_id]
        if new is not None:
            self._names.update(new.subscribed_topic_names)
            if new.regex:
                self._regexes[new.regex] += 1
            if new.server_assignor:
                self._assignors[new.server_assignor] += 1
            for topic_id, parts in (
                *new.assigned_partitions.items(),
                *new.partitions_pending_revocation.items(),
            ):
                for p in parts:
                    owner = self._owners.get((topic_id, p))
                    if owner is not None:
                        raise IllegalStateError(
                            f"Cannot give {topic_id.hex()}-{p} to {new.member_id} at epoch "
                            f"{new.member_epoch}: still owned by {owner[0]} at epoch {owner[1]}"
                        )
                    self._owners[(topic_id, p)] = (new.member_id, new.member_epoch)
            if new.instance_id is not None:
                self.static_members[new.instance_id] = new.member_id
            self.members[new.member_id] = new
        for counter in (self._names, self._regexes, self._assignors):
            for k in [k for k, c in counter.items() if c <= 0]:
                del counter[k]

    def _delete(self) -> None:
        if self.members:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but the group "
                f"still has {len(self.members)} members."
            )
        if self.target:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but the target "
                f"assignment still has {len(self.target)} members."
            )
        if self.assignment_epoch != -1:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but did not "
                "receive ConsumerGroupTargetAssignmentMetadataValue tombstone."
            )
        fresh = ConsumerGroup(self.group_id, self.config, self._new_member_id)
        self.__dict__.update(fresh.__dict__)
        self.deleted = True


class IllegalStateError(RuntimeError):
    """Records that contradict the state (Kafka's IllegalStateException on replay)."""


def _is_subset(owned: OwnedPartitions | None, assigned: TopicPartitionsMap) -> bool:
    if owned is None:
        return False
    for topic_id, parts in owned:
        mine = assigned.get(topic_id)
        # As Kafka: a topic absent from the assignment fails even with no partitions.
        if mine is None or any(p not in mine for p in parts):
            return False
    return True
