"""Share groups (KIP-932): membership, the simple assignor and the group's records.

Pure logic, no I/O, no clock of its own, like `consumer/group.py` (whose protocol it shares:
group epoch, target assignment, member epochs, records written then replayed; see there). It
follows Kafka 4.x's `GroupMetadataManager.shareGroupHeartbeat` and `ShareGroup`; the records
are `records`' (types 10-15). What differs from a consumer group:

- members subscribe by topic name only; the assignor is the server's `SimpleAssignor`: every
  subscribed partition goes to some member, and a partition is *shared* by several members when
  a topic has fewer partitions than subscribed members (4 members on 1 partition all get it);
- nothing is revoked (records are acquired one by one through ShareFetch, not owned): a member
  moves to its target assignment and the group's epoch on its next heartbeat;
- the group keeps the share-partitions whose state it may have in the share coordinator
  (ShareGroupStatePartitionMetadata): every partition ever assigned, and those set by
  AlterShareGroupOffsets, until DeleteShareGroupOffsets or the group's deletion forgets them.

`adapter.py` makes it a `base.Group` of its `GroupShard`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.consumer.member import LEAVE_GROUP_MEMBER_EPOCH
from dataplane.coordinator.consumer.requests import Record
from dataplane.coordinator.deadlines import MemberDeadlines
from dataplane.coordinator.share import records as rec
from dataplane.coordinator.subscriptions import metadata_hash
from dataplane.protocol.errors import ErrorCode, KafkaError

PartitionsMap = dict[bytes, frozenset[int]]
"""topic id -> partitions; never an empty set"""

ASSIGNOR_NAME = "simple"
EMPTY, STABLE = "Empty", "Stable"


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """Kafka's `group.share.*` membership settings (per-group overrides: the caller's)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: PartitionsMap = field(default_factory=dict)

    def metadata_value(self) -> rec.Value:
        return rec.MemberMetadataValue(
            self.rack_id,
            self.client_id,
            self.client_host,
            tuple(sorted(self.subscribed_topic_names)),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: tuple[tuple[bytes, tuple[int, ...]], ...] | None = None  # None: unchanged
    error_code: int = 0
    error_message: str | None = None

    @classmethod
    def error(cls, exc: KafkaError) -> HeartbeatResponse:
        return cls(None, 0, 0, None, int(exc.code), exc.message)


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[tuple[bytes, str, tuple[int, ...]], ...]  # (topic id, name, partitions)


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[DescribedMember, ...]
    assignor_name: str = ASSIGNOR_NAME


def validate_heartbeat(req: HeartbeatRequest) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (INVALID_REQUEST)."""
    problem = None
    if not req.member_id.strip():
        problem = "MemberId can't be empty."
    elif not req.group_id.strip():
        problem = "GroupId can't be empty."
    elif req.rack_id is not None and not req.rack_id.strip():
        problem = "RackId can't be empty."
    elif req.member_epoch == 0 and not req.subscribed_topic_names:
        problem = "SubscribedTopicNames must be set in first request."
    elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        problem = "MemberEpoch is invalid."
    if problem is not None:
        raise KafkaError(ErrorCode.invalid_request, problem)


def simple_assign(
    subscriptions: Mapping[str, frozenset[str]], topics: Mapping[str, TopicMetadata]
) -> dict[str, PartitionsMap]:
    """Kafka's SimpleAssignor for share groups, per subscribed topic: with at least as many
    partitions as subscribers, the partitions are spread over the subscribers (each to one);
    with fewer, every subscriber gets one partition and each partition is shared by about
    subscribers / partitions members. Members sorted by id, so it is deterministic."""
    out: dict[str, dict[bytes, set[int]]] = {m: {} for m in subscriptions}
    by_topic: dict[str, list[str]] = {}
    for member_id in sorted(subscriptions):
        for name in subscriptions[member_id]:
            by_topic.setdefault(name, []).append(member_id)
    for name, members in by_topic.items():
        topic = topics.get(name)
        if topic is None or topic.num_partitions <= 0:
            continue
        count = topic.num_partitions
        if count >= len(members):
            for p in range(count):
                out[members[p % len(members)]].setdefault(topic.topic_id, set()).add(p)
        else:
            for i, member_id in enumerate(members):
                out[member_id].setdefault(topic.topic_id, set()).add(i % count)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


class ShareGroup:
    """One share group. Hard state changes only through `replay`; `heartbeat`, `fence_members`
    and the offsets operations compute records; session deadlines are soft state."""

    TYPE = "share"

    def __init__(self, group_id: str, config: ShareGroupConfig | None = None) -> None:
        self.group_id = group_id
        self.config = config or ShareGroupConfig()
        self.exists = False
        self.deleted = False
        self.group_epoch = 1  # as a consumer group's (ConsumerGroupState)
        self.metadata_hash = 0
        self.assignment_epoch = 1
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, PartitionsMap] = {}
        # share-partitions whose state may exist: topic id -> (topic name, partitions)
        self.state_partitions: dict[bytes, tuple[str, frozenset[int]]] = {}
        self.deadlines = MemberDeadlines()

    # -- views -------------------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        return STABLE if self.members else EMPTY

    @property
    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(self) -> set[str]:
        return {n for m in self.members.values() for n in m.subscribed_topic_names}

    def _key(self, kind: int, member_id: str = "") -> rec.Key:
        return rec.Key(kind, self.group_id, member_id)

    # -- replay ------------------------------------------------------------------------------

    def replay(self, key: rec.Key, value: rec.Value | None) -> None:
        kind = key.type
        if kind == rec.GROUP_METADATA:
            if value is None:
                self.deleted, self.exists = True, False
                self.members.clear()
                self.target.clear()
                return
            assert isinstance(value, rec.GroupMetadataValue)
            self.exists, self.deleted = True, False
            self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif kind == rec.MEMBER_METADATA:
            if value is None:
                self.members.pop(key.member_id, None)
                return
            assert isinstance(value, rec.MemberMetadataValue)
            old = self.members.get(key.member_id) or ShareMember(key.member_id)
            self.members[key.member_id] = dataclasses.replace(
                old,
                rack_id=value.rack_id,
                client_id=value.client_id,
                client_host=value.client_host,
                subscribed_topic_names=frozenset(value.subscribed_topic_names),
            )
        elif kind == rec.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                assert isinstance(value, rec.TargetAssignmentMemberValue)
                self.target[key.member_id] = {
                    tp.topic_id: frozenset(tp.partitions)
                    for tp in value.topic_partitions
                    if tp.partitions
                }
        elif kind == rec.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = (
                -1 if value is None else value.assignment_epoch  # type: ignore[union-attr]
            )
        elif kind == rec.CURRENT_MEMBER_ASSIGNMENT:
            member = self.members.get(key.member_id)
            if member is None or value is None:
                return
            assert isinstance(value, rec.CurrentMemberAssignmentValue)
            self.members[key.member_id] = dataclasses.replace(
                member,
                member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                assigned={
                    tp.topic_id: frozenset(tp.partitions)
                    for tp in value.assigned_partitions
                    if tp.partitions
                },
            )
        elif kind == rec.STATE_PARTITION_METADATA:
            self.state_partitions = {}
            if value is not None:
                assert isinstance(value, rec.StatePartitionMetadataValue)
                for info in (*value.initializing_topics, *value.initialized_topics):
                    name, parts = self.state_partitions.get(info.topic_id, (info.topic_name, ()))
                    self.state_partitions[info.topic_id] = (
                        name,
                        frozenset(parts) | frozenset(info.partitions),
                    )

    # -- heartbeat ---------------------------------------------------------------------------

    def heartbeat(
        self,
        req: HeartbeatRequest,
        now_ms: int,
        topics: Mapping[str, TopicMetadata],
        *,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> tuple[HeartbeatResponse, list[Record]]:
        """A ShareGroupHeartbeat: (response, records to write and replay); raises KafkaError.
        The timings default to the config's (the group's own GROUP configs override them)."""
        validate_heartbeat(req)
        session = session_timeout_ms or self.config.session_timeout_ms
        interval = heartbeat_interval_ms or self.config.heartbeat_interval_ms
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not self.exists:  # Kafka's shareGroupLeave looks the group up by id only
                raise KafkaError(ErrorCode.group_id_not_found, f"Group {self.group_id} not found.")
            self._member(req.member_id)
            fencing = self.fence_members([req.member_id], now_ms, topics)
            return HeartbeatResponse(req.member_id, LEAVE_GROUP_MEMBER_EPOCH, 0), fencing
        joining = req.member_epoch == 0
        if not self.exists and not joining:
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Share group {self.group_id} not found."
            )
        existing = self.members.get(req.member_id)
        if existing is None and joining and len(self.members) >= self.config.max_size:
            raise KafkaError(
                ErrorCode.group_max_size_reached,
                f"The share group has reached its maximum capacity of {self.config.max_size} "
                "members.",
            )
        if existing is None:
            if not joining:
                raise KafkaError(
                    ErrorCode.unknown_member_id,
                    f"Member {req.member_id} is not a member of group {self.group_id}.",
                )
            member = ShareMember(req.member_id)
        else:
            member = existing
            if not joining:
                self._check_epoch(member, req.member_epoch)

        records: list[Record] = []
        updated = dataclasses.replace(
            member,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=(
                frozenset(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
        )
        bump = False
        if existing is None or updated.metadata_value() != member.metadata_value():
            records.append(
                rec.encode(self._key(rec.MEMBER_METADATA, req.member_id), updated.metadata_value())
            )
            bump |= updated.subscribed_topic_names != member.subscribed_topic_names
        subscriptions = {m.member_id: m.subscribed_topic_names for m in self.members.values()}
        subscriptions[req.member_id] = updated.subscribed_topic_names
        names = {n for subscribed in subscriptions.values() for n in subscribed}
        new_hash = metadata_hash(names, topics)
        bump |= new_hash != self.metadata_hash

        group_epoch = self.group_epoch
        if bump:
            group_epoch += 1
            records.append(
                rec.encode(
                    self._key(rec.GROUP_METADATA), rec.GroupMetadataValue(group_epoch, new_hash)
                )
            )
        if group_epoch > self.assignment_epoch:
            target = simple_assign(subscriptions, topics)
            for member_id, assignment in sorted(target.items()):
                if self.target.get(member_id) != assignment:
                    records.append(
                        rec.encode(
                            self._key(rec.TARGET_ASSIGNMENT_MEMBER, member_id),
                            rec.target_value(assignment),
                        )
                    )
            records.append(
                rec.encode(
                    self._key(rec.TARGET_ASSIGNMENT_METADATA),
                    rec.TargetAssignmentMetadataValue(group_epoch),
                )
            )
            records += self._state_partitions_records(target, topics)
            member_target, target_epoch = target.get(req.member_id, {}), group_epoch
        else:
            member_target = self.target.get(req.member_id, {})
            target_epoch = self.assignment_epoch

        if updated.member_epoch != target_epoch or updated.assigned != member_target:
            previous = updated.member_epoch
            updated = dataclasses.replace(
                updated,
                member_epoch=target_epoch,
                previous_member_epoch=previous,
                assigned=dict(member_target),
            )
            records.append(
                rec.encode(
                    self._key(rec.CURRENT_MEMBER_ASSIGNMENT, req.member_id),
                    rec.current_value(target_epoch, previous, member_target),
                )
            )
        self.deadlines.session(req.member_id, now_ms + session)
        sent = None
        if joining or updated.assigned != member.assigned:
            sent = tuple((t, tuple(sorted(ps))) for t, ps in sorted(updated.assigned.items()))
        response = HeartbeatResponse(req.member_id, updated.member_epoch, interval, sent)
        return response, records

    def _member(self, member_id: str) -> ShareMember:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.unknown_member_id,
                f"Member {member_id} is not a member of group {self.group_id}.",
            )
        return member

    @staticmethod
    def _check_epoch(member: ShareMember, received: int) -> None:
        """Kafka's throwIfShareGroupMemberEpochIsInvalid: the current epoch, or the previous
        one (the response that moved the member on was lost)."""
        if received > member.member_epoch or (
            received < member.member_epoch and received != member.previous_member_epoch
        ):
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The share group member has epoch {received}, the group coordinator expects "
                f"{member.member_epoch}. The member must rejoin.",
            )

    def _state_partitions_records(
        self, target: Mapping[str, PartitionsMap], topics: Mapping[str, TopicMetadata]
    ) -> list[Record]:
        """A ShareGroupStatePartitionMetadata record when the assignment reaches partitions
        the group had no state for."""
        wanted = {t: set(ps) for t, (_, ps) in self.state_partitions.items()}
        for assignment in target.values():
            for topic_id, parts in assignment.items():
                wanted.setdefault(topic_id, set()).update(parts)
        current = {t: ps for t, (_, ps) in self.state_partitions.items()}
        if all(current.get(t) == frozenset(ps) for t, ps in wanted.items()):
            return []
        names = {t.topic_id: t.name for t in topics.values()}
        known = {t: n for t, (n, _) in self.state_partitions.items()}
        return [
            self.state_partitions_record(
                {t: (names.get(t) or known.get(t, ""), frozenset(ps)) for t, ps in wanted.items()}
            )
        ]

    def state_partitions_record(
        self, partitions: Mapping[bytes, tuple[str, frozenset[int]]]
    ) -> Record:
        """The record making `partitions` the group's share-partitions with state."""
        key = self._key(rec.STATE_PARTITION_METADATA)
        if not partitions:
            return rec.encode(key, None)
        infos = tuple(
            rec.TopicPartitionsInfo(t, name, tuple(sorted(ps)))
            for t, (name, ps) in sorted(partitions.items())
            if ps
        )
        return rec.encode(key, rec.StatePartitionMetadataValue((), infos, ()))

    # -- leaving, fencing, deletion ----------------------------------------------------------

    def fence_members(
        self, member_ids: Sequence[str], now_ms: int, topics: Mapping[str, TopicMetadata]
    ) -> list[Record]:
        """Records removing members (they left, or their session expired) and bumping the
        group epoch so the others get a new assignment; when that empties the group, its
        assignment epoch follows (Kafka 4.4's shareGroupFenceMember)."""
        members = [self._member(m) for m in dict.fromkeys(member_ids)]
        if not members:
            return []
        records = []
        for member in members:
            records += [
                rec.encode(self._key(rec.CURRENT_MEMBER_ASSIGNMENT, member.member_id), None),
                rec.encode(self._key(rec.TARGET_ASSIGNMENT_MEMBER, member.member_id), None),
                rec.encode(self._key(rec.MEMBER_METADATA, member.member_id), None),
            ]
        names = Counter(n for m in self.members.values() for n in m.subscribed_topic_names)
        for member in members:
            names.subtract(member.subscribed_topic_names)
        subscribed = {n for n, c in names.items() if c > 0}
        group_epoch = self.group_epoch + 1
        records.append(
            rec.encode(
                self._key(rec.GROUP_METADATA),
                rec.GroupMetadataValue(group_epoch, metadata_hash(subscribed, topics)),
            )
        )
        if len(members) == len(self.members):
            records.append(
                rec.encode(
                    self._key(rec.TARGET_ASSIGNMENT_METADATA),
                    rec.TargetAssignmentMetadataValue(group_epoch),
                )
            )
        for member in members:
            self.deadlines.forget(member.member_id)
        return records

    def validate_delete(self) -> None:
        if self.members:
            raise KafkaError(ErrorCode.non_empty_group)

    def tombstones(self) -> list[Record]:
        """The records deleting the whole group (its share-partition state is deleted through
        the persister by the caller)."""
        out = [self.state_partitions_record({})]
        for m in sorted(self.members):
            out.append(rec.encode(self._key(rec.CURRENT_MEMBER_ASSIGNMENT, m), None))
        for m in sorted(set(self.members) | set(self.target)):
            out.append(rec.encode(self._key(rec.TARGET_ASSIGNMENT_MEMBER, m), None))
        out.append(rec.encode(self._key(rec.TARGET_ASSIGNMENT_METADATA), None))
        for m in sorted(self.members):
            out.append(rec.encode(self._key(rec.MEMBER_METADATA, m), None))
        out.append(rec.encode(self._key(rec.GROUP_METADATA), None))
        return out

    # -- describe ----------------------------------------------------------------------------

    def describe(self, topics: Mapping[str, TopicMetadata]) -> DescribedGroup:
        names = {t.topic_id: t.name for t in topics.values()}
        members = tuple(
            DescribedMember(
                m.member_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                tuple(sorted(m.subscribed_topic_names)),
                tuple(
                    (t, names[t], tuple(sorted(ps)))
                    for t, ps in sorted(m.assigned.items(), key=lambda i: names.get(i[0], ""))
                    if t in names
                ),
            )
            for m in sorted(self.members.values(), key=lambda m: m.member_id)
        )
        return DescribedGroup(
            self.group_id, self.state_name, self.group_epoch, self.assignment_epoch, members
        )

    # -- session deadlines (soft state) ------------------------------------------------------

    def on_loaded(self, now_ms: int) -> None:
        """After loading, every member gets a full session (Kafka's onLoaded)."""
        for member_id in self.members:
            self.deadlines.session(member_id, now_ms + self.config.session_timeout_ms)

    def next_deadline_ms(self) -> int | None:
        return self.deadlines.next_ms(self.members)

    def expired_members(self, now_ms: int) -> list[str]:
        return self.deadlines.expired(self.members, now_ms)

    def postpone_expiry(self, member_id: str, deadline_ms: int) -> None:
        self.deadlines.postpone(self.members, member_id, deadline_ms)
