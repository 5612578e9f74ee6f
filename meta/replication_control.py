"""Replication control on the state machine (Kafka's ReplicationControlManager and
ClusterControlManager): topics, broker registrations and fencing, ISR changes, controlled
shutdown, leader elections, producer ids and the group registry.

Also the partition helpers the other appliers share (``after_fencing``, ``replace_partition``,
``unclean_allowed``, ``stale_broker_epoch``). Decisions are ``meta.topic_planning``'s and
``meta.partition_leadership``'s; the appliers apply them to the ``MetaState`` and record what
changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from meta import partition_leadership, topic_planning
from meta.commands import (
    AllocateProducerIds,
    AlterPartition,
    AlterPartitionOutcome,
    BalanceLeaders,
    ControlledShutdown,
    CreateTopics,
    DeleteOutcome,
    DeleteTopics,
    ElectionOutcome,
    ElectLeaders,
    FenceBroker,
    InitCluster,
    IsrOutcome,
    Outcome,
    ProducerIdBlock,
    RegisterBroker,
    RegisterGroups,
    ShutdownOutcome,
    UnfenceBroker,
    UnregisterBroker,
    UnregisterGroups,
)
from meta.model import CLUSTER_DEFAULT, NO_LEADER, Broker, Partition, Topic
from meta.partition_leadership import ElectionType, IsrChange
from meta.protocol import ErrorCode
from meta.topic_config import unclean_election_enabled
from meta.topic_planning import Rejection

if TYPE_CHECKING:
    from meta.state import Changes, MetaState

# The state machine's logger, whichever module applies the command.
log = logging.getLogger("rafka.meta.state")

# Producer ids are handed to brokers in blocks of this many (Kafka's PRODUCER_ID_BLOCK_SIZE).
PRODUCER_ID_BLOCK_SIZE = 1000
_MAX_PRODUCER_ID = 2**63 - 1


def _init_cluster(state: MetaState, cmd: InitCluster, changes: Changes) -> str:
    if not state.cluster_id:  # only the first proposal counts
        state.cluster_id = cmd.cluster_id
        log.info("Cluster initialised with cluster id %s", cmd.cluster_id)
    if cmd.features is not None and not state.features_initialized:
        state.features = {name: level for name, level in cmd.features if level > 0}
        state.features_initialized = True
        changes.features()
        log.info("Finalized features bootstrapped: %s", state.features)
    return state.cluster_id


def _create_topics(
    state: MetaState, cmd: CreateTopics, changes: Changes
) -> list[Topic | Rejection]:
    outcomes = topic_planning.plan_topics(cmd.topics, state.topics, state.brokers)
    for outcome in outcomes:
        if isinstance(outcome, Topic):
            state.topics[outcome.name] = outcome
            changes.topic(outcome.name)
            log.info(
                "Created topic %s (id %s) with %d partition(s)",
                outcome.name,
                outcome.topic_id.hex(),
                len(outcome.partitions),
            )
    return outcomes


_UNKNOWN = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
}


def _delete_topics(state: MetaState, cmd: DeleteTopics, changes: Changes) -> list[DeleteOutcome]:
    by_id = {topic.topic_id: topic for topic in state.topics.values()}
    wanted: list[tuple[str, bytes, Topic | None, ErrorCode]] = [
        (name, b"", state.topics.get(name), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        for name in cmd.names
    ] + [
        ("", topic_id, by_id.get(topic_id), ErrorCode.UNKNOWN_TOPIC_ID)
        for topic_id in cmd.topic_ids
    ]
    outcomes = []
    for name, topic_id, topic, missing in wanted:
        if topic is None:  # Kafka answers with the error's own message
            outcomes.append(DeleteOutcome(name, topic_id, missing, _UNKNOWN[missing]))
        elif topic.name not in state.topics:
            outcomes.append(
                DeleteOutcome(
                    topic.name,
                    topic.topic_id,
                    ErrorCode.INVALID_REQUEST,
                    f"Topic {topic.name} is named more than once in the request.",
                )
            )
        else:
            del state.topics[topic.name]
            changes.topic_deleted(topic)
            log.info("Deleted topic %s (id %s)", topic.name, topic.topic_id.hex())
            outcomes.append(DeleteOutcome(topic.name, topic.topic_id))
    return outcomes


def _register_broker(state: MetaState, cmd: RegisterBroker, changes: Changes) -> int:
    old = state.brokers.get(cmd.broker_id)
    epoch = changes.broker(cmd.broker_id)  # like KRaft: the offset of the registration
    # A new Broker: this also ends a controlled shutdown (the restarted broker is back).
    state.brokers[cmd.broker_id] = Broker(
        cmd.broker_id,
        cmd.host,
        cmd.port,
        cmd.rack,
        cmd.replication_endpoint,
        cmd.incarnation_id,
        epoch,
        fenced=True,
        endpoints=cmd.endpoints,
    )
    if old is not None and not old.fenced and old.incarnation_id != cmd.incarnation_id:
        # The old process died without being fenced: its leaderships and ISR memberships go,
        # exactly as if its lease had expired; it wins back offline partitions below.
        log.info(
            "Broker %d restarted (incarnation %s -> %s); moving its leaderships",
            cmd.broker_id,
            old.incarnation_id.hex(),
            cmd.incarnation_id.hex(),
        )
        after_fencing(state, cmd.broker_id, cmd.unclean_election_default, changes)
    log.info("Registered broker %d at %s:%d, epoch %d", cmd.broker_id, cmd.host, cmd.port, epoch)
    _unfence_and_elect(state, cmd.broker_id, cmd.unclean_election_default, changes)
    return epoch


def _fence_broker(state: MetaState, cmd: FenceBroker, changes: Changes) -> bool:
    broker = state.brokers.get(cmd.broker_id)
    if broker is None or broker.epoch != cmd.epoch or broker.fenced:
        return False
    state.brokers[broker.id] = replace(broker, fenced=True)
    changes.broker(broker.id)
    log.info("Fenced broker %d (epoch %d)", broker.id, broker.epoch)
    after_fencing(state, broker.id, cmd.unclean_election_default, changes)
    return True


def _unregister_broker(state: MetaState, cmd: UnregisterBroker, changes: Changes) -> Outcome:
    """Kafka's ReplicationControlManager.unregisterBroker: the broker leaves every ISR and
    leadership (as when fenced), then its registration goes. Its replica assignments stay."""
    broker = state.brokers.get(cmd.broker_id)
    if broker is None:
        return Outcome(
            ErrorCode.BROKER_ID_NOT_REGISTERED,
            f"Broker ID {cmd.broker_id} is not currently registered",
        )
    after_fencing(state, broker.id, cmd.unclean_election_default, changes)
    del state.brokers[broker.id]
    changes.broker_unregistered(broker.id)
    log.info(
        "Unregistered broker %d (epoch %d%s)",
        broker.id,
        broker.epoch,
        "" if broker.fenced else ", still unfenced: a live broker registers again",
    )
    return Outcome()


def _unfence_broker(state: MetaState, cmd: UnfenceBroker, changes: Changes) -> bool:
    broker = state.brokers.get(cmd.broker_id)
    if broker is None or broker.epoch != cmd.epoch or not broker.fenced:
        return False
    if broker.in_controlled_shutdown:  # it was let go: only a new registration brings it back
        return False
    log.info("Unfenced broker %d (epoch %d)", broker.id, broker.epoch)
    _unfence_and_elect(state, broker.id, cmd.unclean_election_default, changes)
    return True


def after_fencing(
    state: MetaState,
    broker_id: int,
    unclean_default: bool,
    changes: Changes,
    only: set[tuple[str, int]] | None = None,
) -> int:
    """Move leadership and ISR membership off ``broker_id``, which is now fenced (or in a
    controlled shutdown), or only off its replicas ``only`` (which it cannot serve any more);
    return how many partitions changed."""
    active = partition_leadership.active_brokers(state.brokers) - {broker_id}
    moved, offline, left_isrs, changed = 0, [], 0, 0

    def decide(topic: Topic, partition: Partition) -> Partition | None:
        nonlocal moved, left_isrs, changed
        if only is not None and (topic.name, partition.index) not in only:
            return None
        new = partition_leadership.on_broker_fenced(
            partition, broker_id, active, unclean_allowed(state, topic, unclean_default), topic.name
        )
        if new is not None:
            changed += 1
            left_isrs += broker_id not in new.isr
            if new.leader == NO_LEADER != partition.leader:
                offline.append(f"{topic.name}-{partition.index}")
            elif new.leader != partition.leader:
                moved += 1
        return new

    _update_partitions(state, changes, decide)
    if moved or left_isrs:
        log.info(
            "Broker %d left %d ISR(s); %d of its leaderships moved to other in-sync replicas",
            broker_id,
            left_isrs,
            moved,
        )
    if offline:
        log.warning(
            "%d partition(s) offline: broker %d was their last active in-sync replica; they "
            "come back when it does (or by unclean leader election): %s",
            len(offline),
            broker_id,
            ", ".join(offline[:20]) + (", ..." if len(offline) > 20 else ""),
        )
    return changed


def _unfence_and_elect(
    state: MetaState, broker_id: int, unclean_default: bool, changes: Changes
) -> None:
    """Unfence ``broker_id`` and make it leader of the offline partitions it can lead."""
    state.brokers[broker_id] = replace(state.brokers[broker_id], fenced=False)
    changes.broker(broker_id)
    _update_partitions(
        state,
        changes,
        lambda topic, partition: partition_leadership.on_broker_unfenced(
            partition, broker_id, unclean_allowed(state, topic, unclean_default), topic.name
        ),
    )


def _alter_partition(
    state: MetaState, cmd: AlterPartition, changes: Changes
) -> AlterPartitionOutcome:
    if stale := stale_broker_epoch(state, cmd.broker_id, cmd.broker_epoch):
        log.warning("Rejected AlterPartition from broker %d: %s", cmd.broker_id, stale)
        refused = [
            IsrOutcome(c.topic_id, c.partition_index, ErrorCode.STALE_BROKER_EPOCH, stale)
            for c in cmd.partitions
        ]
        return AlterPartitionOutcome(ErrorCode.STALE_BROKER_EPOCH, stale, refused)
    names = {topic.topic_id: name for name, topic in state.topics.items()}
    outcomes = []
    for change in cmd.partitions:
        outcome = _change_isr(state, cmd.broker_id, names.get(change.topic_id), change, changes)
        if outcome.error_code != ErrorCode.NONE:
            log.warning(
                "Rejected AlterPartition from broker %d: %s (%s)",
                cmd.broker_id,
                outcome.error_message,
                outcome.error_code.name,
            )
        outcomes.append(outcome)
    return AlterPartitionOutcome(ErrorCode.NONE, "", outcomes)


def _change_isr(
    state: MetaState, sender: int, name: str | None, change: IsrChange, changes: Changes
) -> IsrOutcome:
    def refused(code: ErrorCode, message: str) -> IsrOutcome:
        return IsrOutcome(change.topic_id, change.partition_index, code, message)

    if name is None:
        return refused(
            ErrorCode.UNKNOWN_TOPIC_ID,
            f"Unknown topic id {change.topic_id.hex()} (partition {change.partition_index}).",
        )
    topic = state.topics[name]
    if not 0 <= change.partition_index < len(topic.partitions):
        return refused(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Topic {name} has no partition {change.partition_index}.",
        )
    partition = topic.partitions[change.partition_index]
    if rejection := partition_leadership.check_isr_change(partition, change, sender, state.brokers):
        return refused(rejection.error_code, f"{name}-{partition.index}: {rejection.message}")
    changed = partition_leadership.change_isr(partition, change.new_isr)
    if partition.reassigning:
        active = partition_leadership.active_brokers(state.brokers)
        completed = partition_leadership.complete_reassignment(
            partition, changed or partition, active
        )
        if not completed.reassigning:
            replace_partition(state, topic, completed, changes)
            log.info(
                "Reassignment of %s-%d completed: replicas %s, ISR %s, leader %d (leader epoch %d)",
                name,
                partition.index,
                list(completed.replicas),
                list(completed.isr),
                completed.leader,
                completed.leader_epoch,
            )
            if completed.leader != sender:  # Kafka's answer when the leader moved with it
                return refused(
                    ErrorCode.NEW_LEADER_ELECTED,
                    f"{name}-{partition.index}: the ISR change completed the partition's "
                    f"reassignment and broker {completed.leader} now leads it.",
                )
            return IsrOutcome(change.topic_id, change.partition_index, partition=completed)
    if changed is not None:
        replace_partition(state, topic, changed, changes)
        log.info(
            "ISR of %s-%d changed from %s to %s by leader %d (leader epoch %d, partition "
            "epoch %d -> %d)",
            name,
            partition.index,
            list(partition.isr),
            list(changed.isr),
            sender,
            changed.leader_epoch,
            partition.partition_epoch,
            changed.partition_epoch,
        )
    return IsrOutcome(change.topic_id, change.partition_index, partition=changed or partition)


def _controlled_shutdown(
    state: MetaState, cmd: ControlledShutdown, changes: Changes
) -> ShutdownOutcome:
    """KRaft's controlled shutdown: the broker leaves every ISR (but as its last member) and
    hands each leadership to another active ISR member; a partition with none goes offline, as
    on a fence. Then it leads nothing, so it may exit: it is fenced right away (KRaft's
    SHUTDOWN_NOW) rather than when its lease runs out."""
    if stale := stale_broker_epoch(state, cmd.broker_id, cmd.broker_epoch):
        log.warning("Rejected controlled shutdown of broker %d: %s", cmd.broker_id, stale)
        return ShutdownOutcome(False, 0, ErrorCode.STALE_BROKER_EPOCH, stale)
    broker = state.brokers[cmd.broker_id]
    if not broker.in_controlled_shutdown:
        state.brokers[broker.id] = replace(broker, in_controlled_shutdown=True)
        changes.broker(broker.id)
        log.info(
            "Broker %d (epoch %d) is shutting down: moving its leaderships to other in-sync "
            "replicas and removing it from ISRs",
            broker.id,
            broker.epoch,
        )
    after_fencing(state, broker.id, cmd.unclean_election_default, changes)
    left = sum(
        partition.leader == broker.id
        for topic in state.topics.values()
        for partition in topic.partitions
    )
    broker = state.brokers[broker.id]
    if left == 0 and not broker.fenced:
        state.brokers[broker.id] = replace(broker, fenced=True)
        changes.broker(broker.id)
        log.info("Broker %d leads no partition any more: it may shut down (fenced)", broker.id)
    return ShutdownOutcome(left == 0, left)


def _elect_leaders(state: MetaState, cmd: ElectLeaders, changes: Changes) -> list[ElectionOutcome]:
    active = partition_leadership.active_brokers(state.brokers)
    everything = cmd.topic_partitions is None
    wanted = cmd.topic_partitions
    if wanted is None:
        wanted = tuple(
            (name, tuple(range(len(topic.partitions))))
            for name, topic in sorted(state.topics.items())
        )
    outcomes = []
    for name, indexes in wanted:
        for index in indexes:
            topic = state.topics.get(name)
            if topic is None or not 0 <= index < len(topic.partitions):
                outcome = ElectionOutcome(
                    name,
                    index,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such partition as {name}-{index}" if topic else f"No such topic as {name}",
                )
            else:
                outcome = _elect(state, topic, index, cmd.election_type, active, changes)
            if not (everything and outcome.error_code == ErrorCode.ELECTION_NOT_NEEDED):
                outcomes.append(outcome)  # like Kafka: "all" omits partitions with no change
    return outcomes


def _elect(
    state: MetaState,
    topic: Topic,
    index: int,
    election: ElectionType,
    active: set[int],
    changes: Changes,
) -> ElectionOutcome:
    old = topic.partitions[index]
    decided = partition_leadership.elect_leader(old, election, active, topic.name)
    if isinstance(decided, Rejection):
        return ElectionOutcome(topic.name, index, decided.error_code, decided.message)
    replace_partition(state, topic, decided, changes)
    log.info(
        "%s leader election for %s-%d: leader %d -> %d (leader epoch %d)",
        election.name.capitalize(),
        topic.name,
        index,
        old.leader,
        decided.leader,
        decided.leader_epoch,
    )
    return ElectionOutcome(topic.name, index)


def _balance_leaders(state: MetaState, cmd: BalanceLeaders, changes: Changes) -> int:
    active = partition_leadership.active_brokers(state.brokers)
    moved = 0

    def decide(topic: Topic, partition: Partition) -> Partition | None:
        nonlocal moved
        elected = partition_leadership.elect_preferred(partition, active)
        if elected is not None:
            moved += 1
            log.info(
                "Preferred leader election for %s-%d: leader %d -> %d (leader epoch %d)",
                topic.name,
                partition.index,
                partition.leader,
                elected.leader,
                elected.leader_epoch,
            )
        return elected

    _update_partitions(state, changes, decide)
    return moved


def _allocate_producer_ids(
    state: MetaState, cmd: AllocateProducerIds, changes: Changes
) -> ProducerIdBlock:
    if stale := stale_broker_epoch(state, cmd.broker_id, cmd.broker_epoch):
        log.warning("Refused producer ids to broker %d: %s", cmd.broker_id, stale)
        return ProducerIdBlock(-1, 0, ErrorCode.STALE_BROKER_EPOCH, stale)
    first = state.next_producer_id
    if first > _MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        message = "Exhausted all producer ids: the next block would pass the int64 limit."
        log.error("Refused producer ids to broker %d: %s", cmd.broker_id, message)
        return ProducerIdBlock(-1, 0, ErrorCode.UNKNOWN_SERVER_ERROR, message)
    state.next_producer_id = first + PRODUCER_ID_BLOCK_SIZE
    log.info(
        "Allocated producer ids %d-%d to broker %d",
        first,
        first + PRODUCER_ID_BLOCK_SIZE - 1,
        cmd.broker_id,
    )
    return ProducerIdBlock(first, PRODUCER_ID_BLOCK_SIZE)


def _register_groups(state: MetaState, cmd: RegisterGroups, changes: Changes) -> int:
    added = 0
    for group_id, partition in cmd.groups:
        added += group_id not in state.groups
        state.groups[group_id] = partition
    return added


def _unregister_groups(state: MetaState, cmd: UnregisterGroups, changes: Changes) -> int:
    return sum(state.groups.pop(group_id, None) is not None for group_id in cmd.group_ids)


# ---------------------------------------------------------------- shared by the appliers


def unclean_allowed(state: MetaState, topic: Topic, default: bool) -> bool:
    """The topic's unclean.leader.election.enable, else the cluster-wide dynamic broker
    default, else ``default`` (the proposer's static setting), as Kafka resolves it."""
    cluster = state.broker_configs.get(CLUSTER_DEFAULT, {})
    return unclean_election_enabled(topic.configs, unclean_election_enabled(cluster, default))


def stale_broker_epoch(state: MetaState, broker_id: int, epoch: int) -> str:
    """Why ``epoch`` is not broker ``broker_id``'s current one ("" if it is), as KRaft checks."""
    broker = state.brokers.get(broker_id)
    if broker is None:
        return f"No broker registration found for broker {broker_id}."
    if broker.epoch != epoch:
        return f"Expected broker epoch {broker.epoch}, but got broker epoch {epoch}."
    return ""


def replace_partition(
    state: MetaState, topic: Topic, partition: Partition, changes: Changes
) -> None:
    topic = state.topics[topic.name]  # the latest version: this command may have changed it
    partitions = list(topic.partitions)
    partitions[partition.index] = partition
    state.topics[topic.name] = replace(topic, partitions=tuple(partitions))
    changes.topic(topic.name)


def _update_partitions(
    state: MetaState,
    changes: Changes,
    decide: Callable[[Topic, Partition], Partition | None],
) -> None:
    for topic in list(state.topics.values()):
        decided = [decide(topic, partition) for partition in topic.partitions]
        if any(decided):
            partitions = tuple(
                new or old for new, old in zip(decided, topic.partitions, strict=True)
            )
            state.topics[topic.name] = replace(topic, partitions=partitions)
            changes.topic(topic.name)


APPLIERS: dict[type, Callable[[MetaState, Any, Changes], Any]] = {
    InitCluster: _init_cluster,
    CreateTopics: _create_topics,
    DeleteTopics: _delete_topics,
    RegisterBroker: _register_broker,
    FenceBroker: _fence_broker,
    UnfenceBroker: _unfence_broker,
    UnregisterBroker: _unregister_broker,
    AlterPartition: _alter_partition,
    ControlledShutdown: _controlled_shutdown,
    ElectLeaders: _elect_leaders,
    BalanceLeaders: _balance_leaders,
    AllocateProducerIds: _allocate_producer_ids,
    RegisterGroups: _register_groups,
    UnregisterGroups: _unregister_groups,
}
