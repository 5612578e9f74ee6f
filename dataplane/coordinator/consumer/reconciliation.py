"""A member's reconciliation towards its target assignment (Kafka's CurrentAssignmentBuilder)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dataplane.coordinator.consumer.member import (
    Member,
    MemberState,
    OwnedPartitions,
    TopicPartitionsMap,
    freeze,
)
from dataplane.protocol.errors import ErrorCode, KafkaError


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
        return member._next(state, target_epoch, freeze(merged), {})
    if unreleased:
        return member._next(MemberState.UNRELEASED_PARTITIONS, target_epoch, assigned, {})
    return member._next(MemberState.STABLE, target_epoch, assigned, {})
