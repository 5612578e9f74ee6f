"""Cluster administration on the state machine: dynamic topic and broker configs (Kafka's
ConfigurationControlManager), CreatePartitions, partition reassignments, finalized features
(FeatureControlManager) and the replicas a broker reports offline (a failed log dir).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from meta import features, partition_leadership, topic_planning
from meta.commands import (
    AlterConfigs,
    AlterReassignments,
    CreatePartitions,
    FeatureOutcome,
    OfflineOutcome,
    OfflineReplicas,
    Outcome,
    UpdateFeatures,
)
from meta.model import CLUSTER_DEFAULT, ConfigAlteration, Partition, ReassignmentInfo, Topic
from meta.protocol import ErrorCode
from meta.replication_control import (
    after_fencing,
    replace_partition,
    stale_broker_epoch,
    unclean_allowed,
)
from meta.topic_planning import Rejection

if TYPE_CHECKING:
    from meta.state import Changes, MetaState

# The state machine's logger, whichever module applies the command.
log = logging.getLogger("rafka.meta.state")


def _alter_configs(state: MetaState, cmd: AlterConfigs, changes: Changes) -> list[Outcome]:
    """Kafka's ConfigurationControlManager: each resource must exist (QuorumController's
    ConfigResourceExistenceChecker); its dynamic configs are then replaced (AlterConfigs) or
    changed (IncrementalAlterConfigs). A broker resource is reported changed even when its
    configs are not, as Kafka does so brokers reload them (KAFKA-14136)."""
    outcomes = []
    for alteration in cmd.alterations:
        refusal = _config_resource_refusal(state, alteration)
        if refusal is not None:
            log.warning(
                "Refused to alter the configs of %s %r: %s",
                alteration.resource_type,
                alteration.name,
                refusal.error_message,
            )
            outcomes.append(refusal)
            continue
        outcomes.append(Outcome())
        if cmd.validate_only:
            continue
        if alteration.resource_type == "topic":
            topic = state.topics[alteration.name]
            configs = _altered(topic.configs, alteration)
            if configs != topic.configs:
                state.topics[topic.name] = replace(topic, configs=configs)
                changes.topic(topic.name)
            what = f"topic {topic.name}"
        else:
            broker_id = int(alteration.name) if alteration.name else CLUSTER_DEFAULT
            configs = _altered(state.broker_configs.get(broker_id, {}), alteration)
            if configs:
                state.broker_configs[broker_id] = configs
            else:
                state.broker_configs.pop(broker_id, None)
            changes.broker_config(broker_id)
            what = f"broker {broker_id}" if alteration.name else "the cluster-wide broker default"
        # names only: broker configs may hold secrets (Kafka's sensitive configs)
        log.info(
            "Altered the dynamic configs of %s (%s): set %s, removed %s",
            what,
            "replaced" if alteration.replace else "incremental",
            sorted(alteration.set),
            sorted(set(alteration.delete)),
        )
    return outcomes


def _config_resource_refusal(state: MetaState, alteration: ConfigAlteration) -> Outcome | None:
    name = alteration.name
    if alteration.resource_type == "topic":
        if name not in state.topics:
            return Outcome(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
    elif alteration.resource_type == "broker":
        if not name:
            return None  # the cluster-wide default always exists
        if not name.lstrip("-").isdigit():
            return Outcome(ErrorCode.INVALID_REQUEST, f"Invalid broker name {name}")
        if int(name) not in state.brokers:
            return Outcome(ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {name} found.")
    else:
        return Outcome(
            ErrorCode.INVALID_REQUEST, f"Unsupported resource type {alteration.resource_type!r}"
        )
    return None


def _altered(configs: dict[str, str], alteration: ConfigAlteration) -> dict[str, str]:
    """A new dict (configs are shared by frozen entities, never mutated)."""
    altered = {} if alteration.replace else dict(configs)
    altered.update(alteration.set)
    for name in alteration.delete:
        altered.pop(name, None)
    return altered


def _create_partitions(state: MetaState, cmd: CreatePartitions, changes: Changes) -> Outcome:
    topic = state.topics.get(cmd.topic)
    if topic is None:
        outcome: Topic | Rejection = Rejection(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{cmd.topic}' does not exist."
        )
    else:
        outcome = topic_planning.plan_new_partitions(
            topic, cmd.count, cmd.assignments, state.brokers, cmd.placement_seed
        )
    if isinstance(outcome, Rejection):
        log.warning(
            "Refused to create partitions of topic %s (to %d): %s",
            cmd.topic,
            cmd.count,
            outcome.message,
        )
        return Outcome(outcome.error_code, outcome.message)
    if not cmd.validate_only and topic is not None:
        state.topics[topic.name] = outcome
        changes.topic(topic.name)
        log.info(
            "Topic %s now has %d partition(s) (was %d); new replicas %s",
            topic.name,
            len(outcome.partitions),
            len(topic.partitions),
            [list(p.replicas) for p in outcome.partitions[len(topic.partitions) :]],
        )
    return Outcome()


def _alter_reassignments(
    state: MetaState, cmd: AlterReassignments, changes: Changes
) -> list[Outcome]:
    """Kafka's alterPartitionReassignments: each partition on its own."""
    outcomes = []
    for name, index, target in cmd.reassignments:
        topic = state.topics.get(name)
        if topic is None:
            decided: Partition | Rejection = Rejection(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
            )
        elif not 0 <= index < len(topic.partitions):
            decided = Rejection(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}."
            )
        elif target is None:
            unclean = unclean_allowed(state, topic, cmd.unclean_election_default)
            decided = partition_leadership.cancel_reassignment(
                topic.partitions[index], state.brokers, unclean, name
            )
        else:
            decided = partition_leadership.reassign(
                topic.partitions[index], target, state.brokers, name, cmd.keep_replication_factor
            )
        if isinstance(decided, Rejection):
            log.warning(
                "Unable to alter the reassignment of %s-%d: %s", name, index, decided.message
            )
            outcomes.append(Outcome(decided.error_code, decided.message))
            continue
        old = state.topics[name].partitions[index]
        if decided != old:
            replace_partition(state, state.topics[name], decided, changes)
        log.info(
            "%s of %s-%d: replicas %s -> %s (adding %s, removing %s), ISR %s, leader %d",
            "Cancelled the reassignment" if target is None else f"Reassignment to {list(target)}",
            name,
            index,
            list(old.replicas),
            list(decided.replicas),
            list(decided.adding_replicas),
            list(decided.removing_replicas),
            list(decided.isr),
            decided.leader,
        )
        outcomes.append(Outcome())
    return outcomes


def list_reassignments(
    state: MetaState, partitions: tuple[tuple[str, int], ...] | None
) -> list[ReassignmentInfo]:
    """Kafka's listPartitionReassignments: the given partitions (None: every partition) that
    are being reassigned; unknown topics and partitions are left out, as in Kafka."""
    if partitions is None:
        partitions = tuple(
            (name, p.index) for name, topic in state.topics.items() for p in topic.partitions
        )
    found = []
    for name, index in partitions:
        topic = state.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            continue
        p = topic.partitions[index]
        if p.reassigning:
            found.append(
                ReassignmentInfo(name, index, p.replicas, p.adding_replicas, p.removing_replicas)
            )
    return found


def _update_features(
    state: MetaState, cmd: UpdateFeatures, changes: Changes
) -> list[FeatureOutcome]:
    """Kafka's FeatureControlManager.updateFeatures: all updates or none; the first refused
    one fails the request and every feature reports its error, as Kafka answers."""
    for name, level, upgrade_type in cmd.updates:
        current = state.features.get(name, 0)
        if problem := features.check_feature_update(name, level, upgrade_type, current):
            log.warning("Refused to update features: %s", problem)
            return [
                FeatureOutcome(n, ErrorCode.INVALID_UPDATE_VERSION, problem)
                for n, _, _ in cmd.updates
            ]
    if not cmd.validate_only:
        before = dict(state.features)
        for name, level, _ in cmd.updates:
            if level > 0:
                state.features[name] = level
            else:
                state.features.pop(name, None)
        if state.features != before:
            changes.features()
            log.info("Finalized features changed from %s to %s", before, state.features)
    return [FeatureOutcome(name) for name, _, _ in cmd.updates]


def _offline_replicas(state: MetaState, cmd: OfflineReplicas, changes: Changes) -> OfflineOutcome:
    if stale := stale_broker_epoch(state, cmd.broker_id, cmd.broker_epoch):
        log.warning("Refused offline replicas of broker %d: %s", cmd.broker_id, stale)
        return OfflineOutcome(0, ErrorCode.STALE_BROKER_EPOCH, stale)
    log.warning(
        "Broker %d reports %d replica(s) offline (a failed log dir): moving their leaderships "
        "and ISR memberships to other replicas; they come back once the disk is repaired or "
        "replaced and the broker restarts: %s",
        cmd.broker_id,
        len(cmd.partitions),
        ", ".join(f"{t}-{p}" for t, p in cmd.partitions[:20])
        + (", ..." if len(cmd.partitions) > 20 else ""),
    )
    only = set(cmd.partitions)
    changed = after_fencing(state, cmd.broker_id, cmd.unclean_election_default, changes, only)
    return OfflineOutcome(changed)


APPLIERS: dict[type, Callable[[MetaState, Any, Changes], Any]] = {
    AlterConfigs: _alter_configs,
    CreatePartitions: _create_partitions,
    AlterReassignments: _alter_reassignments,
    UpdateFeatures: _update_features,
    OfflineReplicas: _offline_replicas,
}
