"""Decisions of the metadata controller on partitions: leader election, ISR changes, reassignment.

Pure functions, modelled on Kafka's KRaft controller (``ReplicationControlManager``). They do no
I/O and read no clock or random generator: the state machine (``meta.state`` and its appliers)
calls them while applying a Raft command, on every node and on every replay, and every call must
reach the same decision.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from enum import IntEnum

from meta.model import NO_LEADER, Broker, Partition
from meta.protocol import ErrorCode
from meta.topic_planning import Rejection, invalid_assignment

# The controller's decisions log under its name, as before they were split into modules.
log = logging.getLogger("rafka.meta.controller")


@dataclass(frozen=True)
class IsrChange:
    """One partition of an AlterPartition request: its leader asks for a new ISR."""

    topic_id: bytes
    partition_index: int
    leader_epoch: int  # the leader's view: both epochs must be current
    partition_epoch: int
    new_isr: tuple[int, ...]
    # Parallel to new_isr (or empty): each member's broker epoch as the leader knows it, so a
    # replica that restarted (and may have lost its log tail) since is not added; -1: unchecked.
    new_isr_broker_epochs: tuple[int, ...] = ()


class ElectionType(IntEnum):
    """Kafka's ElectLeaders election types (same values as on the wire)."""

    PREFERRED = 0
    UNCLEAN = 1


# ---------------------------------------------------------------- leader election


def on_broker_fenced(
    partition: Partition, broker_id: int, live: Set[int], unclean: bool, topic: str
) -> Partition | None:
    """The partition after ``broker_id`` is fenced, or None if it does not change.

    The broker leaves the ISR unless it is the last member: that replica is the only one known to
    hold every committed record, so it must stay eligible to come back as leader. If it led the
    partition, the first replica in the rest of the ISR that is ``live`` (active: unfenced and
    not shutting down) takes over; if there is none the partition goes offline, unless
    ``unclean`` election is allowed. A controlled shutdown moves a broker off the same way.
    """
    if broker_id not in partition.replicas:
        return None
    isr = tuple(b for b in partition.isr if b != broker_id) or partition.isr
    leader = partition.leader
    if leader == broker_id:
        leader = next((b for b in partition.replicas if b in isr and b in live), NO_LEADER)
        if leader == NO_LEADER and unclean:
            leader = next((b for b in partition.replicas if b in live), NO_LEADER)
            if leader != NO_LEADER:
                _warn_unclean(topic, partition, leader)
                isr = (leader,)
    return _changed(partition, leader, isr)


def on_broker_unfenced(
    partition: Partition, broker_id: int, unclean: bool, topic: str
) -> Partition | None:
    """The partition after ``broker_id`` is unfenced: an offline partition whose ISR holds the
    broker gets it as leader (with ``unclean``, any offline partition it replicates does)."""
    if partition.leader != NO_LEADER or broker_id not in partition.replicas:
        return None
    if broker_id in partition.isr:
        return _changed(partition, broker_id, partition.isr)
    if unclean:
        _warn_unclean(topic, partition, broker_id)
        return _changed(partition, broker_id, (broker_id,))
    return None


def active_brokers(brokers: Mapping[int, Broker]) -> set[int]:
    """Ids of the brokers that may lead and be in ISRs: unfenced, not shutting down."""
    return {broker.id for broker in brokers.values() if broker.active}


def elect_preferred(partition: Partition, active: Set[int]) -> Partition | None:
    """Kafka's automatic leader rebalance of one partition: its preferred replica (the first)
    leads again when it is ``active`` and in the ISR; None when that is not possible or needed."""
    preferred = partition.replicas[0]
    if partition.leader == preferred or preferred not in partition.isr or preferred not in active:
        return None
    return _changed(partition, preferred, partition.isr)


def elect_leader(
    partition: Partition, election: ElectionType, active: Set[int], topic: str
) -> Partition | Rejection:
    """One partition of an ElectLeaders request (Kafka's ``electLeader``): the changed partition,
    or why there is nothing to change.

    PREFERRED elects the preferred replica if it is an ``active`` ISR member; an offline
    partition gets any active ISR member. UNCLEAN only touches an offline partition: an active
    ISR member if there is one, else any active replica (whatever the topic's unclean setting:
    an administrator asked for it), which then forms the ISR alone.
    """
    valid = [b for b in partition.replicas if b in partition.isr and b in active]
    if election == ElectionType.PREFERRED:
        if partition.leader == partition.replicas[0]:
            return Rejection(ErrorCode.ELECTION_NOT_NEEDED, "The preferred replica is the leader.")
        if partition.replicas[0] in valid:
            leader = partition.replicas[0]
        elif partition.leader in valid:
            leader = partition.leader
        else:
            leader = valid[0] if valid else NO_LEADER
        if leader == partition.leader:
            return Rejection(
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"Preferred replica {partition.replicas[0]} of {topic}-{partition.index} is not "
                "an unfenced in-sync replica.",
            )
        return _new_leader(partition, leader, partition.isr)
    if partition.leader != NO_LEADER:
        return Rejection(ErrorCode.ELECTION_NOT_NEEDED, "The partition has a leader.")
    if valid:
        leader, isr = valid[0], partition.isr
    else:
        leader = next((b for b in partition.replicas if b in active), NO_LEADER)
        if leader == NO_LEADER:
            return Rejection(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"No replica of {topic}-{partition.index} is unfenced.",
            )
        _warn_unclean(topic, partition, leader, "an unclean ElectLeaders request")
        isr = (leader,)
    return _new_leader(partition, leader, isr)


def _warn_unclean(
    topic: str,
    partition: Partition,
    leader: int,
    reason: str = "unclean.leader.election.enable=true",
) -> None:
    log.warning(
        "Unclean leader election for %s-%d: broker %d becomes leader although it is not in the "
        "ISR %s (%s); records the old ISR had may be lost.",
        topic,
        partition.index,
        leader,
        list(partition.isr),
        reason,
    )


# ---------------------------------------------------------------- ISR changes


def check_isr_change(
    partition: Partition, change: IsrChange, sender: int, brokers: Mapping[int, Broker]
) -> Rejection | None:
    """Kafka's AlterPartition checks of one partition (``validateAlterPartitionData``).

    The epochs fence stale requests: only the current leader, quoting the current leader epoch
    and partition epoch, may change the ISR, so a request based on older state never overwrites
    newer state. The new ISR must hold the leader, only replicas, each once, and only active
    brokers (at the quoted broker epochs, if given).
    """
    if change.leader_epoch != partition.leader_epoch:
        return Rejection(
            ErrorCode.FENCED_LEADER_EPOCH,
            f"Leader epoch {change.leader_epoch} is not the current one "
            f"({partition.leader_epoch}).",
        )
    if sender != partition.leader:
        return Rejection(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"Broker {sender} is not the leader (the leader is {partition.leader}).",
        )
    if change.partition_epoch != partition.partition_epoch:
        return Rejection(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"Partition epoch {change.partition_epoch} is not the current one "
            f"({partition.partition_epoch}).",
        )
    isr = change.new_isr
    problem = None
    if len(set(isr)) != len(isr):
        problem = f"names a broker more than once: {list(isr)}"
    elif not set(isr) <= set(partition.replicas):
        problem = f"{list(isr)} has brokers that are not replicas {list(partition.replicas)}"
    elif partition.leader not in isr:
        problem = f"{list(isr)} does not include the leader {partition.leader}"
    elif change.new_isr_broker_epochs and len(change.new_isr_broker_epochs) != len(isr):
        problem = "has a different number of broker epochs than members"
    if problem:
        return Rejection(ErrorCode.INVALID_REQUEST, f"The new ISR {problem}.")
    epochs = change.new_isr_broker_epochs or (-1,) * len(isr)
    ineligible = []
    for broker_id, epoch in zip(isr, epochs, strict=True):
        broker = brokers.get(broker_id)
        if broker is None:
            ineligible.append(f"{broker_id} (not registered)")
        elif broker.in_controlled_shutdown:
            ineligible.append(f"{broker_id} (shutting down)")
        elif broker.fenced:
            ineligible.append(f"{broker_id} (fenced)")
        elif epoch != -1 and epoch != broker.epoch:
            ineligible.append(f"{broker_id} (broker epoch {epoch}, current {broker.epoch})")
    if ineligible:
        return Rejection(
            ErrorCode.INELIGIBLE_REPLICA,
            f"The new ISR {list(isr)} has ineligible replicas: {', '.join(ineligible)}.",
        )
    return None


def change_isr(partition: Partition, isr: tuple[int, ...]) -> Partition | None:
    """The partition with a validated new ISR (partition epoch bumped), or None if unchanged."""
    if isr == partition.isr:
        return None
    return replace(partition, isr=isr, partition_epoch=partition.partition_epoch + 1)


def _changed(partition: Partition, leader: int, isr: tuple[int, ...]) -> Partition | None:
    if leader == partition.leader and isr == partition.isr:
        return None
    return _new_leader(partition, leader, isr)


def _new_leader(partition: Partition, leader: int, isr: tuple[int, ...]) -> Partition:
    return replace(
        partition,
        isr=isr,
        leader=leader,
        leader_epoch=partition.leader_epoch + (leader != partition.leader),
        partition_epoch=partition.partition_epoch + 1,
    )


# ---------------------------------------------------------------- reassignment


def reassign(
    partition: Partition,
    target: Sequence[int],
    brokers: Mapping[int, Broker],
    topic: str,
    keep_replication_factor: bool = False,
) -> Partition | Rejection:
    """Kafka's ``changePartitionReassignment``: the partition replicating to ``target``.

    Its replicas become the target followed by the current replicas the target drops
    (``removing_replicas``); the target's new brokers are ``adding_replicas``. They fetch from
    the leader, which adds them to the ISR through AlterPartition; once the ISR holds the whole
    target, the reassignment completes (``complete_reassignment``). A target that only drops or
    reorders replicas of the ISR completes at once.

    With ``keep_replication_factor`` (KIP-860) the target must have as many replicas as the
    partition: its replicas, or while a reassignment runs, that reassignment's target.
    """
    if problem := invalid_assignment(target, brokers, None):
        return Rejection(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
    if keep_replication_factor:
        current = len(set(partition.replicas) - set(partition.removing_replicas))
        if current != len(target):
            return Rejection(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {current} to {len(target)}",
            )
    removing = tuple(sorted(set(partition.replicas) - set(target)))
    # The adding replicas of a reassignment in progress that the new target keeps stay adding
    # (Kafka keeps them when the target adds none), so a cancel still drops them.
    kept = set(partition.adding_replicas) & set(target)
    adding = tuple(sorted(set(target) - set(partition.replicas) | kept))
    replicas = (*target, *removing)
    return _settle(
        partition, replicas, partition.isr, adding, removing, active_brokers(brokers), False, topic
    )


def cancel_reassignment(
    partition: Partition, brokers: Mapping[int, Broker], unclean: bool, topic: str
) -> Partition | Rejection:
    """Kafka's ``cancelPartitionReassignment`` (``PartitionReassignmentRevert``): back to the
    replicas before the reassignment, the adding ones leaving replicas and ISR. If only adding
    replicas were in the ISR, the first original replica becomes the ISR: an unclean election,
    refused unless ``unclean`` (the topic's unclean.leader.election.enable)."""
    if not partition.reassigning:
        return Rejection(
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
        )
    replicas = tuple(b for b in partition.replicas if b not in partition.adding_replicas)
    isr = tuple(b for b in partition.isr if b not in partition.adding_replicas)
    if not isr:
        if not unclean:
            return Rejection(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {topic}:{partition.index} because "
                "it would require an unclean leader election.",
            )
        _warn_unclean(topic, partition, replicas[0], "cancelling its reassignment")
        isr = replicas[:1]
    return _settle(partition, replicas, isr, (), (), active_brokers(brokers), unclean, topic)


def complete_reassignment(before: Partition, after: Partition, active: Set[int]) -> Partition:
    """``after`` (a change of ``before``, e.g. its new ISR) with its reassignment completed if
    its ISR now allows, as Kafka's PartitionChangeBuilder does on every partition change."""
    if not after.reassigning:
        return after
    isr, replicas = _completed(after)
    if isr is None:
        return after
    leader = after.leader
    if leader not in isr or leader not in active:
        leader = next((b for b in replicas if b in isr and b in active), NO_LEADER)
    return _with_epochs(before, replicas, isr, leader, (), ())


def _completed(p: Partition) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    """(ISR, replicas) once ``p``'s reassignment completes, or (None, replicas) if the ISR does
    not hold every target replica yet (Kafka's ``maybeCompleteReassignment``)."""
    isr = tuple(b for b in p.isr if b not in p.removing_replicas)
    replicas = tuple(b for b in p.replicas if b not in p.removing_replicas)
    if not isr or not replicas or not set(replicas) <= set(isr):
        return None, p.replicas
    return isr, replicas


def _settle(
    before: Partition,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
    active: Set[int],
    unclean: bool,
    topic: str,
) -> Partition:
    """Kafka's PartitionChangeBuilder.build with an ONLINE (or UNCLEAN) election: complete the
    reassignment if possible, keep the leader if it is still a valid one, else elect the first
    replica in the ISR that is active (with ``unclean``, any active replica)."""
    proposed = replace(
        before, replicas=replicas, isr=isr, adding_replicas=adding, removing_replicas=removing
    )
    completed_isr, completed_replicas = _completed(proposed) if proposed.reassigning else (None, ())
    if completed_isr is not None:
        replicas, isr, adding, removing = completed_replicas, completed_isr, (), ()
    leader = before.leader
    if leader not in isr or leader not in active:
        leader = next((b for b in replicas if b in isr and b in active), NO_LEADER)
        if leader == NO_LEADER and unclean:
            leader = next((b for b in replicas if b in active), NO_LEADER)
            if leader != NO_LEADER:
                _warn_unclean(topic, before, leader)
                isr = (leader,)
    return _with_epochs(before, replicas, isr, leader, adding, removing)


def _with_epochs(
    before: Partition,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    leader: int,
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> Partition:
    """The partition after a change from ``before``: the partition epoch bumped once if anything
    changed, the leader epoch if the leader changed or a replica left (Kafka bumps it then, so
    the removed replica's fetches are fenced)."""
    after = replace(
        before,
        replicas=replicas,
        isr=isr,
        leader=leader,
        adding_replicas=adding,
        removing_replicas=removing,
        leader_epoch=before.leader_epoch,
        partition_epoch=before.partition_epoch,
    )
    if after == before:
        return before
    bump_leader = leader != before.leader or not set(before.replicas) <= set(replicas)
    return replace(
        after,
        leader_epoch=before.leader_epoch + bump_leader,
        partition_epoch=before.partition_epoch + 1,
    )
