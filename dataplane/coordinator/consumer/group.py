"""Consumer groups of the new consumer protocol (KIP-848): heartbeat, leaving and fencing.

Pure logic, no I/O, no clock of its own: callers pass `now_ms`. It follows Kafka 4.x's group
coordinator: `GroupMetadataManager.consumerGroupHeartbeat` here, on the state its records
build (`state`, Kafka's `ConsumerGroup`), with the target assignment of
`target_assignment` (`TargetAssignmentBuilder`), the reconciliation of `reconciliation`
(`CurrentAssignmentBuilder`) and the records of `records`.

How the group coordinator drives it
-----------------------------------
State lives in records: an operation *computes* `(response, records)` without changing the
group; the caller appends the records to the group's `__consumer_offsets` partition and applies
them with `replay`, exactly as on load. Nothing else changes the hard state, so a group rebuilt
from its records equals the original. Between computing records and replaying them there must
be no other operation on the same group (`ShardServices.write` appends and replays at once, with
no `await` in between). `adapter.ConsumerGroupAdapter` is that caller: it makes
a `ConsumerGroup` a `base.Group` of its `GroupShard`, routes the records of types 3-8 and 16 to
it, runs the heartbeat and fences expired members on the shard's timer:

    group = ConsumerGroup(group_id, config)         # or the shard's existing one
    response, records = group.heartbeat(HeartbeatRequest.from_kio(req), now_ms, topics,
                                        api_version=v, client_id=..., client_host=...)
    services.write(group_id, records, replay=True)  # appends; replay -> group.replay(...)
    return response.to_kio(ResponseBuilder(68, v))  # once the records are replicated

    group.on_loaded(now_ms)                         # after the partition is replayed
    # at group.next_deadline_ms(): one member at a time (fence, write and replay, next)
    for member_id in group.expired_members(now_ms):
        services.write(group_id, group.fence_members([member_id], now_ms, topics), replay=True)

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
within its rebalance timeout, is removed (`expired` + `fence_members`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    NO_PARTITIONS,
    ConsumerGroupConfig,
    GroupState,
    Member,
    MemberState,
    OwnedPartitions,
    TopicPartitionsMap,
    record_key,
)
from dataplane.coordinator.consumer.reconciliation import reconcile
from dataplane.coordinator.consumer.requests import (
    DescribedGroup,
    DescribedMember,
    DescribedTopicPartitions,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResult,
    Record,
    invalid_request,
    validate_heartbeat_request,
)
from dataplane.coordinator.consumer.state import ConsumerGroupState
from dataplane.coordinator.consumer.target_assignment import (
    assignor_after,
    pick_assignor,
    update_regexes,
    update_target,
)
from dataplane.coordinator.deadlines import MemberDeadlines
from dataplane.coordinator.member_epoch import check_member_epoch
from dataplane.coordinator.subscriptions import metadata_hash
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.primitives import uuid_string

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "DescribedGroup",
    "GroupState",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "Member",
    "MemberState",
    "reconcile",
    "validate_heartbeat_request",
]


# -- the group -------------------------------------------------------------------------------


def _default_member_id() -> str:
    """Like Kafka's `Uuid.randomUuid().toString()`."""
    return uuid_string(uuid.uuid4().bytes)


class ConsumerGroup(ConsumerGroupState):
    """One consumer group. Hard state (`ConsumerGroupState`) changes only through `replay`;
    `heartbeat`, `fence_members` and `tombstones` compute records; deadlines are soft state."""

    def __init__(
        self,
        group_id: str,
        config: ConsumerGroupConfig | None = None,
        member_id_factory: Callable[[], str] = _default_member_id,
    ) -> None:
        super().__init__(group_id, config or ConsumerGroupConfig())
        self._new_member_id = member_id_factory
        # soft state
        self.deadlines = MemberDeadlines()
        self._regex_refreshed_ms: int | None = None

    def _fresh(self) -> ConsumerGroup:
        return ConsumerGroup(self.group_id, self.config, self._new_member_id)

    def preferred_assignor(self) -> str:
        return pick_assignor(self.assignor_counts, self.config.assignors)

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
        check_member_epoch(member_epoch, member.member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka's `ConsumerGroup.validateOffsetFetch` (OffsetFetch v9+ sends member id/epoch;
        no member id and epoch < 0 = not from a member)."""
        if member_id is None and member_epoch < 0:
            return
        member = self._member(member_id or "")
        check_member_epoch(member_epoch, member.member_epoch)

    def validate_delete(self) -> None:
        if self.state not in (GroupState.EMPTY, GroupState.DEAD):
            raise KafkaError(ErrorCode.non_empty_group)

    def tombstones(self) -> list[Record]:
        """The records deleting the whole group (Kafka's `createGroupTombstoneRecords`)."""
        gid = self.group_id
        out: list[Record] = []
        for m in sorted(self.members):
            out.append(rec.encode(record_key(rec.CURRENT_MEMBER_ASSIGNMENT, gid, m), None))
        for m in sorted(set(self.members) | set(self.target)):
            out.append(rec.encode(record_key(rec.TARGET_ASSIGNMENT_MEMBER, gid, m), None))
        out.append(rec.encode(record_key(rec.TARGET_ASSIGNMENT_METADATA, gid), None))
        for m in sorted(self.members):
            out.append(rec.encode(record_key(rec.MEMBER_METADATA, gid, m), None))
        for regex in sorted(self.resolved_regexes):
            out.append(rec.encode(rec.RegexKey(gid, regex), None))
        out.append(rec.encode(record_key(rec.PARTITION_METADATA, gid), None))
        out.append(rec.encode(record_key(rec.GROUP_METADATA, gid), None))
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
                target_assignment=described(self.target.get(m.member_id, NO_PARTITIONS)),
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
            self.deadlines.session(m.member_id, now_ms + self.config.session_timeout_ms)
            if m.state == MemberState.UNREVOKED_PARTITIONS:
                self.deadlines.revoking(
                    m.member_id, m.member_epoch, now_ms + m.rebalance_timeout_ms
                )

    def next_deadline_ms(self) -> int | None:
        """The earliest session or rebalance deadline of a member, if any."""
        return self.deadlines.next_ms(self.members)

    def expired_members(self, now_ms: int) -> list[str]:
        """Members whose session expired (no heartbeat for the session timeout) or who did not
        revoke partitions within their rebalance timeout: fence each with `fence_members`."""
        return self.deadlines.expired(self.members, now_ms)

    def postpone_expiry(self, member_id: str, deadline_ms: int) -> None:
        """Try to fence `member_id` again at `deadline_ms` (its fencing records could not be
        written; `fence_members` already dropped its deadlines)."""
        self.deadlines.postpone(self.members, member_id, deadline_ms)

    # -- heartbeat --------------------------------------------------------------------------

    def heartbeat(  # noqa: C901 - Kafka's consumerGroupHeartbeat, step by step
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
            raise invalid_request(
                f"heartbeat for group {req.group_id} sent to group {self.group_id}"
            )
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
        bump = False
        if updated != member:
            records.append(
                rec.encode(
                    record_key(rec.MEMBER_METADATA, self.group_id, member_id),
                    updated.subscription_value(),
                )
            )
            bump |= updated.subscribed_topic_names != member.subscribed_topic_names

        # The member whose subscription the group's current counts include.
        previous = replaced if replaced is not None else self.members.get(member_id)
        regexes = update_regexes(
            self, previous, updated, self._regex_refreshed_ms, now_ms, topics, records
        )
        if regexes.refreshed:
            self._regex_refreshed_ms = now_ms
        bump |= regexes.bump
        # Kafka 4.4: a change of the group's preferred server assignor recomputes the target.
        bump |= assignor_after(self, previous, updated) != self.preferred_assignor()

        names = Counter(self.name_counts)
        if previous is not None:
            names.subtract(previous.subscribed_topic_names)
        names.update(updated.subscribed_topic_names)
        subscribed = {n for n, c in names.items() if c > 0}
        for regex in regexes.in_use:
            if regex in regexes.resolved:
                subscribed |= regexes.resolved[regex].topics
        new_hash = metadata_hash(subscribed, topics)
        bump |= new_hash != self.metadata_hash

        group_epoch = self.group_epoch
        if bump:
            group_epoch += 1
            records.append(
                rec.encode(
                    record_key(rec.GROUP_METADATA, self.group_id),
                    rec.ConsumerGroupMetadataValue(
                        group_epoch,
                        new_hash,
                        self.creation_time_ms if self.exists else now_ms,
                    ),
                )
            )
            if self.legacy_partition_metadata is not None:
                records.append(rec.encode(record_key(rec.PARTITION_METADATA, self.group_id), None))

        # 2. A new target assignment if the group epoch moved past the assignment epoch.
        if group_epoch > self.assignment_epoch:
            target_epoch = group_epoch
            member_target = update_target(
                self,
                group_epoch,
                previous,
                replaced,
                updated,
                regexes.resolved,
                topics,
                now_ms,
                records,
            )
        else:
            target_epoch = self.assignment_epoch
            current = self.target.get(member_id)
            if current is None and replaced is not None:
                current = self.target.get(replaced.member_id)
            member_target = current or NO_PARTITIONS

        # 3. Reconcile the member towards its target.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = reconcile(
                updated, target_epoch, member_target, owned, self._owned_by_other(member_id)
            )
            if reconciled != updated:
                records.append(
                    rec.encode(
                        record_key(rec.CURRENT_MEMBER_ASSIGNMENT, self.group_id, member_id),
                        reconciled.assignment_value(),
                    )
                )
                if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
                    self.deadlines.revoking(
                        member_id,
                        reconciled.member_epoch,
                        now_ms + reconciled.rebalance_timeout_ms,
                    )
                else:
                    self.deadlines.revoked(member_id)
        self.deadlines.session(member_id, now_ms + self.config.session_timeout_ms)

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
                rec.encode(
                    record_key(rec.MEMBER_METADATA, gid, member_id), new.subscription_value()
                )
            )
            old_target = self.target.get(existing.member_id, NO_PARTITIONS)
            records.append(
                rec.encode(
                    record_key(rec.TARGET_ASSIGNMENT_MEMBER, gid, member_id),
                    rec.target_assignment(old_target),
                )
            )
            records.append(
                rec.encode(
                    record_key(rec.CURRENT_MEMBER_ASSIGNMENT, gid, member_id),
                    new.assignment_value(),
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
            dynamic = self._member(req.member_id)
            return HeartbeatResult(
                response, self.fence_members([dynamic.member_id], now_ms, topics)
            )
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
                record_key(rec.CURRENT_MEMBER_ASSIGNMENT, self.group_id, member.member_id),
                leaving.assignment_value(),
            )
            return HeartbeatResult(
                HeartbeatResponse(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, 0), [record]
            )
        return HeartbeatResult(response, self.fence_members([member.member_id], now_ms, topics))

    def _remove_member_records(self, member_id: str, records: list[Record]) -> None:
        """Tombstones of a member; the order matters to `replay`."""
        gid = self.group_id
        records.append(rec.encode(record_key(rec.CURRENT_MEMBER_ASSIGNMENT, gid, member_id), None))
        records.append(rec.encode(record_key(rec.TARGET_ASSIGNMENT_MEMBER, gid, member_id), None))
        records.append(rec.encode(record_key(rec.MEMBER_METADATA, gid, member_id), None))

    def fence_members(
        self, member_ids: Sequence[str], now_ms: int, topics: Mapping[str, TopicMetadata]
    ) -> list[Record]:
        """Records removing members (they left, or their session or rebalance timeout
        expired) and bumping the group epoch once so the others rebalance; when that empties
        the group, its assignment epoch follows (Kafka 4.4's consumerGroupFenceMembers).
        UNKNOWN_MEMBER_ID if one is absent."""
        members = [self._member(m) for m in dict.fromkeys(member_ids)]
        if not members:
            return []
        records: list[Record] = []
        for member in members:
            self._remove_member_records(member.member_id, records)
        names = Counter(self.name_counts)
        regexes = Counter(self.regex_counts)
        for member in members:
            names.subtract(member.subscribed_topic_names)
            if member.regex:
                regexes[member.regex] -= 1
        for regex in sorted({m.regex for m in members if m.regex}):
            if regexes[regex] <= 0 and regex in self.resolved_regexes:
                records.append(rec.encode(rec.RegexKey(self.group_id, regex), None))
        subscribed = {n for n, c in names.items() if c > 0}
        for regex, count in regexes.items():
            if count > 0 and regex in self.resolved_regexes:
                subscribed |= self.resolved_regexes[regex].topics
        group_epoch = self.group_epoch + 1
        records.append(
            rec.encode(
                record_key(rec.GROUP_METADATA, self.group_id),
                rec.ConsumerGroupMetadataValue(
                    group_epoch, metadata_hash(subscribed, topics), self.creation_time_ms
                ),
            )
        )
        if len(members) == len(self.members):
            records.append(
                rec.encode(
                    record_key(rec.TARGET_ASSIGNMENT_METADATA, self.group_id),
                    rec.TargetAssignmentMetadataValue(group_epoch, 0),
                )
            )
        if self.legacy_partition_metadata is not None:
            records.append(rec.encode(record_key(rec.PARTITION_METADATA, self.group_id), None))
        for member in members:
            self.deadlines.forget(member.member_id)
        return records


def _is_subset(owned: OwnedPartitions | None, assigned: TopicPartitionsMap) -> bool:
    if owned is None:
        return False
    for topic_id, parts in owned:
        mine = assigned.get(topic_id)
        # As Kafka: a topic absent from the assignment fails even with no partitions.
        if mine is None or any(p not in mine for p in parts):
            return False
    return True
