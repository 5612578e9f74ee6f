"""The membership half of a classic group (Kafka's ClassicGroup, ClassicGroupMember and
ClassicGroupState): its members, state, generation and chosen protocol, the checks the shard's
group-agnostic APIs make of it, and the GroupMetadata record it is written as and rebuilt from.
`group.ClassicGroup` runs the JoinGroup/SyncGroup protocol on this state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Self

from dataplane.coordinator.base import (
    DescribedGroup,
    DescribedMember,
    Group,
    JoinedMember,
    JoinResult,
    OffsetAndMetadata,
    Protocols,
    Reply,
    ShardServices,
    SyncResult,
)
from dataplane.coordinator.records import (
    GroupMetadataValue,
    MemberMetadata,
    group_metadata_record,
    subscribed_topics,
)
from dataplane.protocol.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {
        GroupState.EMPTY,
        GroupState.STABLE,
        GroupState.COMPLETING_REBALANCE,
    },
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


def join_error(member_id: str, error: ErrorCode) -> JoinResult:
    return JoinResult(error, member_id)


@dataclass(eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_reply: Reply[JoinResult] | None = field(default=None, repr=False)
    sync_reply: Reply[SyncResult] | None = field(default=None, repr=False)
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: Protocols) -> bool:
        return tuple(protocols) == tuple(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class ClassicMembership(Group):
    """A classic group's state, changed by the protocol of its subclass `ClassicGroup`."""

    TYPE = "classic"

    def __init__(
        self,
        group_id: str,
        ctx: ShardServices,
        *,
        state: GroupState = GroupState.EMPTY,
        generation: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader: str | None = None,
        current_state_timestamp: int | None = None,
    ) -> None:
        super().__init__(group_id)
        self.ctx = ctx
        self.state = state
        self.previous_state = state
        self.generation = generation
        self.protocol_type = protocol_type or None
        self.protocol_name = protocol_name
        self.leader_id = leader
        self.current_state_timestamp = current_state_timestamp
        self.members: dict[str, ClassicMember] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    # ==================================================================== Group hooks

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def protocol_type_name(self) -> str:
        return self.protocol_type or ""

    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def describe(self) -> DescribedGroup:
        """As Kafka's describe: members' metadata only while stable; their assignment always
        (the last one synced, kept through a rebalance until the next SyncGroup)."""
        stable = self.state is GroupState.STABLE
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol_name) if stable else b"",
                m.assignment,
            )
            for m in self.members.values()
        )
        return DescribedGroup(
            self.group_id,
            self.state.value,
            self.protocol_type or "",
            (self.protocol_name or "") if stable else "",
            members,
        )

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation < 0 and self.state is GroupState.EMPTY:
            # the admin client or a consumer without group management (assign()): accepted
            # while nobody uses the group
            return ErrorCode.none
        if generation >= 0 or member_id or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error != ErrorCode.none:
                return error
            if generation != self.generation:
                return ErrorCode.illegal_generation
        elif self.state is not GroupState.EMPTY:
            # no member id and no generation (v0-style): only while the group is empty
            return ErrorCode.unknown_member_id
        if self.state is GroupState.COMPLETING_REBALANCE:
            # the member has the new generation but no assignment yet
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        return ErrorCode.none

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def offsets_expire_from(self, offset: OffsetAndMetadata) -> int | None:
        if self.protocol_type is not None:
            if self.state is GroupState.EMPTY:
                # since the group became empty (older metadata: since the commit)
                if self.current_state_timestamp is not None:
                    return self.current_state_timestamp
                return offset.commit_timestamp
            if (
                self.uses_consumer_protocol()
                and self.subscribed_topics is not None
                and self.state is GroupState.STABLE
            ):
                return offset.commit_timestamp  # only topics nobody subscribes to get here
            return None
        return offset.commit_timestamp  # a simple group: since the last commit

    def validate_delete(self) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if self.state is not GroupState.EMPTY:
            return ErrorCode.non_empty_group
        return ErrorCode.none

    def validate_offset_delete(self) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if self.state is not GroupState.EMPTY and not self.uses_consumer_protocol():
            return ErrorCode.non_empty_group
        return ErrorCode.none

    def tombstones(self) -> list[tuple[bytes, bytes | None]]:
        return [group_metadata_record(self.group_id, None)]

    def unload(self) -> None:
        self.ctx.timer.cancel(join_key(self.group_id))
        self.ctx.timer.cancel(sync_key(self.group_id))
        for member in self.members.values():
            self.ctx.timer.cancel(heartbeat_key(self.group_id, member.member_id))
            self._complete_join(member, join_error(member.member_id, ErrorCode.not_coordinator))
            self._complete_sync(member, SyncResult(ErrorCode.not_coordinator))
        for member_id in self.pending_members:
            self.ctx.timer.cancel(heartbeat_key(self.group_id, member_id))
        self._transition(GroupState.DEAD)

    # ==================================================================== membership basics

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ClassicGroup.validateMember."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name, _ in protocols
        )

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """A protocol every member supports, by the members' votes (each votes for its most
        preferred candidate); ties go to the earliest member's choice."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = [m.vote(candidates) for m in self.members.values()]
        tally = Counter(votes)
        best = max(tally.values())
        return next(v for v in votes if tally[v] == best)

    def current_members(self) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def assignments(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    def _add(self, member: ClassicMember, reply: Reply[JoinResult] | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_reply = reply
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            self.supported_protocols += Counter()  # drop non-positive counts
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
            # a request parked for a member that is gone must still be answered
            self._complete_join(member, join_error("", ErrorCode.unknown_member_id))
            self._complete_sync(member, SyncResult(ErrorCode.unknown_member_id))
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def _update_member(
        self,
        member: ClassicMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        reply: Reply[JoinResult] | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = tuple(protocols)
        self.supported_protocols.update(member.protocol_names())
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if reply is not None:
            reply.chain(member.join_reply)  # a re-sent JoinGroup: answer both
        member.join_reply = reply

    def _complete_join(self, member: ClassicMember, result: JoinResult) -> bool:
        reply, member.join_reply = member.join_reply, None
        return reply is not None and reply.complete(result)

    def _complete_sync(self, member: ClassicMember, result: SyncResult) -> bool:
        reply, member.sync_reply = member.sync_reply, None
        return reply is not None and reply.complete(result)

    def _transition(self, state: GroupState) -> None:
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = self.ctx.now_ms()

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type is None:
            return None
        if not self.members:
            return set()
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def _init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self._transition(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self._transition(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def metadata_value(self, assignments: dict[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadata record of the group as it is, with these assignments."""
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=(
                self.current_state_timestamp if self.current_state_timestamp is not None else -1
            ),
            members=tuple(
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name),
                    assignment=assignments.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    def _write_metadata(
        self, assignments: dict[str, bytes], done: Callable[[ErrorCode], None] | None = None
    ) -> None:
        record = group_metadata_record(self.group_id, self.metadata_value(assignments))
        self.ctx.write(self.group_id, [record], replay=False, done=done)

    def _replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        old = self.members.pop(old_id)
        # fence a duplicate instance parked with the old id
        self._complete_join(old, join_error(old_id, ErrorCode.fenced_instance_id))
        self._complete_sync(old, SyncResult(ErrorCode.fenced_instance_id))
        new = ClassicMember(
            new_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_id] = new
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        return new

    # ==================================================================== loading

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, ctx: ShardServices) -> Self:
        """Kafka's replay of a GroupMetadata record: Stable with members, else Empty."""
        group = cls(
            group_id,
            ctx,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader=value.leader,
            current_state_timestamp=(
                value.current_state_timestamp if value.current_state_timestamp >= 0 else None
            ),
        )
        for m in value.members:
            member = ClassicMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.session_timeout if m.rebalance_timeout < 0 else m.rebalance_timeout,
                m.session_timeout,
                value.protocol_type,
                ((value.protocol or "", m.subscription),),
                m.assignment,
            )
            group._add(member, None)
        group.leader_id = value.leader
        group.subscribed_topics = group._compute_subscribed_topics()
        return group
