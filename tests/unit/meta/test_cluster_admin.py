"""Cluster administration on the state machine: dynamic configs, CreatePartitions, partition
reassignment (Kafka's KRaft semantics), finalized features and offline replicas; each survives
a dump, and reaches a broker's MetadataCache through the watch events."""

from __future__ import annotations

import logging

import pytest

from dataplane.metadata_cache import MetadataCache
from meta import wire
from meta.cluster_admin import list_reassignments
from meta.commands import (
    AlterConfigs,
    AlterReassignments,
    Command,
    CreatePartitions,
    FeatureOutcome,
    InitCluster,
    OfflineOutcome,
    OfflineReplicas,
    Outcome,
    UpdateFeatures,
)
from meta.features import UpgradeType
from meta.model import NO_LEADER, ConfigAlteration, Partition, ReassignmentInfo
from meta.protocol import ErrorCode
from meta.records import decode_command, decode_state, encode_command, encode_state
from meta.topic_config import validate_topic_configs
from tests.unit.dataplane.test_metadata_cache import Fed

from .machine import NOW, Machine
from .test_replication_control import cluster, only

TV, GV = "transaction.version", "group.version"


def restored(machine: Machine) -> None:
    """The state survives its dump unchanged."""
    assert decode_state(encode_state(machine.state)) == machine.state


def configs(machine: Machine, *alterations: ConfigAlteration, validate_only: bool = False):
    return machine.run(AlterConfigs(alterations, validate_only))


# ---------------------------------------------------------------- dynamic configs


def test_topic_configs_incremental_then_replaced(caplog) -> None:
    machine = cluster()
    machine.run(AlterConfigs((ConfigAlteration("topic", "t", {"retention.ms": "1"}),)))
    offset = machine.state.offset
    with caplog.at_level(logging.INFO, logger="rafka.meta.state"):
        outcome = configs(
            machine,
            ConfigAlteration("topic", "t", {"segment.ms": "5"}, ("retention.ms", "absent")),
        )
    assert outcome == [Outcome()]
    assert machine.state.topics["t"].configs == {"segment.ms": "5"}
    assert [(c.kind, c.key) for c in machine.changes if c.offset > offset] == [("topic", "t")]
    assert "Altered the dynamic configs of topic t (incremental)" in caplog.text
    configs(machine, ConfigAlteration("topic", "t", {"cleanup.policy": "compact"}, replace=True))
    assert machine.state.topics["t"].configs == {"cleanup.policy": "compact"}
    offset = machine.state.offset
    configs(machine, ConfigAlteration("topic", "t", {"cleanup.policy": "compact"}))
    assert machine.state.offset == offset  # unchanged: no topic change event
    restored(machine)


def test_broker_configs_per_broker_and_cluster_default() -> None:
    machine = cluster()
    secret = {"ssl.key.password": "hunter2"}
    assert configs(
        machine,
        ConfigAlteration("broker", "", {"message.max.bytes": "100"}),
        ConfigAlteration("broker", "2", secret),
    ) == [Outcome(), Outcome()]
    assert machine.state.broker_configs == {-1: {"message.max.bytes": "100"}, 2: secret}
    offset = machine.state.offset
    configs(machine, ConfigAlteration("broker", "2", secret))  # the same values
    assert [(c.kind, c.key) for c in machine.changes if c.offset > offset] == [
        ("broker_config", 2)  # Kafka: a broker resource is always reloaded
    ]
    configs(machine, ConfigAlteration("broker", "2", delete=("ssl.key.password",)))
    assert machine.state.broker_configs == {-1: {"message.max.bytes": "100"}}
    restored(machine)


def test_config_resources_must_exist(caplog) -> None:
    machine = cluster()
    with caplog.at_level(logging.WARNING, logger="rafka.meta.state"):
        outcomes = configs(
            machine,
            ConfigAlteration("topic", "nope", {"retention.ms": "1"}),
            ConfigAlteration("broker", "9", {"a": "b"}),
            ConfigAlteration("broker", "x", {"a": "b"}),
            ConfigAlteration("broker", "1", {"a": "b"}),
        )
    assert outcomes == [
        Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
        Outcome(ErrorCode.BROKER_ID_NOT_REGISTERED, "No node with id 9 found."),
        Outcome(ErrorCode.INVALID_REQUEST, "Invalid broker name x"),
        Outcome(),
    ]
    assert machine.state.broker_configs == {1: {"a": "b"}}
    assert "Refused to alter the configs of topic 'nope'" in caplog.text


def test_validate_only_configs_change_nothing() -> None:
    machine = cluster()
    offset = machine.state.offset
    outcome = configs(
        machine,
        ConfigAlteration("topic", "t", {"retention.ms": "1"}),
        ConfigAlteration("broker", "", {"a": "b"}),
        ConfigAlteration("topic", "nope"),
        validate_only=True,
    )
    assert [o.error_code for o in outcome] == [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert machine.state.offset == offset
    assert machine.state.topics["t"].configs == {}
    assert machine.state.broker_configs == {}


def test_the_cluster_default_enables_unclean_elections() -> None:
    machine = cluster(replicas=(1, 2))
    machine.alter(1, machine.isr_change("t", 0, (1,)))  # 2 fell out of the ISR
    configs(machine, ConfigAlteration("broker", "", {"unclean.leader.election.enable": "true"}))
    machine.fence(1)
    assert (machine.partition("t").leader, machine.partition("t").isr) == (2, (2,))


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("*", True),
        ("", True),
        ("0:1,1:2", True),
        (" 0:1 , 3:4", True),
        ("0", False),
        ("*,0:1", False),
    ],
)
def test_throttled_replicas_topic_configs(value: str, valid: bool) -> None:
    """Kafka's reassignment tools set these with the throttle rates; creation and alteration
    (through the broker) accept Kafka's format only."""
    for name in (
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ):
        problem = validate_topic_configs({name: value})
        assert (problem is None) == valid, problem


# ---------------------------------------------------------------- CreatePartitions


def grow(machine: Machine, count: int, assignments=None, validate_only=False) -> Outcome:
    body = CreatePartitions("t", count, assignments, validate_only, placement_seed=3)
    return machine.run(body)  # type: ignore[return-value]


def test_create_partitions_places_new_partitions_like_a_new_topic() -> None:
    machine = cluster(brokers=4, partitions=2, rf=3)
    offset = machine.state.offset
    assert grow(machine, 6) == Outcome()
    partitions = machine.state.topics["t"].partitions
    assert [p.index for p in partitions] == list(range(6))
    for p in partitions[2:]:
        assert len(set(p.replicas)) == 3
        assert p.isr == p.replicas
        assert p.leader == p.replicas[0]
    assert len({p.leader for p in partitions[2:]}) == 4  # leaders go round-robin
    assert [(c.kind, c.key) for c in machine.changes if c.offset > offset] == [("topic", "t")]
    restored(machine)


def test_create_partitions_with_assignments_and_fenced_replicas() -> None:
    machine = cluster(brokers=4, partitions=1, rf=2)
    machine.fence(4)
    assert grow(machine, 3, ((4, 2), (3, 4))) == Outcome()
    new = machine.state.topics["t"].partitions[1:]
    assert new == (Partition(1, (4, 2), (2,), 2), Partition(2, (3, 4), (3,), 3))


@pytest.mark.parametrize(
    ("count", "assignments", "code", "message"),
    [
        (3, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."),
        (2, None, ErrorCode.INVALID_PARTITIONS, "currently has 3 partition(s); 2 would not"),
        (5, ((1, 2, 3),), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "but only 1 assignment(s)"),
        (4, ((1, 2),), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "not consistent with previous"),
        (4, ((1, 2, 2),), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 2 more than once"),
        (4, ((1, 2, 7),), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "no such broker is registered"),
        (4, ((),), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "an empty replica list"),
        (10_004, None, ErrorCode.POLICY_VIOLATION, "excessively large batch operation"),
    ],
)
def test_create_partitions_errors(count, assignments, code, message) -> None:
    machine = cluster()
    before = machine.state.topics["t"]
    outcome = grow(machine, count, assignments)
    assert outcome.error_code == code
    assert message in outcome.error_message
    assert machine.state.topics["t"] == before


def test_create_partitions_of_an_unknown_topic_validate_only_and_too_few_brokers() -> None:
    machine = cluster()
    missing = machine.run(CreatePartitions("nope", 4, None))
    assert missing == Outcome(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."
    )
    assert grow(machine, 5, validate_only=True) == Outcome()
    assert len(machine.state.topics["t"].partitions) == 3
    machine.fence(3)
    outcome = grow(machine, 5)
    assert outcome.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


# ---------------------------------------------------------------- reassignment


def reassign(machine: Machine, *changes: tuple) -> list[Outcome]:
    return machine.run(AlterReassignments(changes))  # type: ignore[return-value]


def test_a_reassignment_adds_then_completes_when_the_isr_holds_the_target(caplog) -> None:
    """1,2,3 -> 2,3,4: 4 joins (replicas = target + removing), catches up, joins the ISR
    through the leader's AlterPartition, which completes the reassignment: 1 leaves replicas
    and ISR and, as it led, the first target replica in the ISR leads."""
    machine = cluster(brokers=4, replicas=(1, 2, 3))
    assert reassign(machine, ("t", 0, (2, 3, 4))) == [Outcome()]
    moving = machine.partition("t")
    assert moving == Partition(0, (2, 3, 4, 1), (1, 2, 3), 1, 0, 1, (4,), (1,))
    assert list_reassignments(machine.state, None) == [
        ReassignmentInfo("t", 0, (2, 3, 4, 1), (4,), (1,))
    ]
    restored(machine)
    code, after = only(machine.alter(1, machine.isr_change("t", 0, (1, 2, 3))))  # no change
    assert code == ErrorCode.NONE
    assert after == moving
    with caplog.at_level(logging.INFO, logger="rafka.meta.state"):
        outcome = machine.alter(1, machine.isr_change("t", 0, (1, 2, 3, 4)))
    assert only(outcome)[0] == ErrorCode.NEW_LEADER_ELECTED  # Kafka's answer to the old leader
    assert machine.partition("t") == Partition(0, (2, 3, 4), (2, 3, 4), 2, 1, 2)
    assert "Reassignment of t-0 completed" in caplog.text
    assert list_reassignments(machine.state, None) == []


def test_a_reassignment_keeping_the_leader_completes_with_a_leader_epoch_bump() -> None:
    machine = cluster(brokers=4, replicas=(1, 2, 3))
    reassign(machine, ("t", 0, (1, 2, 4)))
    code, after = only(machine.alter(1, machine.isr_change("t", 0, (1, 2, 3, 4))))
    # the leader stays, a replica left: its fetches must be fenced (leader epoch bumped)
    assert code == ErrorCode.NONE
    assert after == machine.partition("t") == Partition(0, (1, 2, 4), (1, 2, 4), 1, 1, 2)


def test_reordering_or_dropping_in_sync_replicas_completes_at_once() -> None:
    machine = cluster(brokers=4, replicas=(1, 2, 3))
    reassign(machine, ("t", 0, (3, 2, 1)))
    assert machine.partition("t") == Partition(0, (3, 2, 1), (1, 2, 3), 1, 0, 1)  # leader kept
    reassign(machine, ("t", 0, (2, 3)))
    assert machine.partition("t") == Partition(0, (2, 3), (2, 3), 2, 1, 2)


def test_a_target_of_another_size_is_refused_when_the_factor_must_stay() -> None:
    """KIP-860 (allow_replication_factor_change=false): the target must have as many replicas
    as the partition, or as the target of the reassignment in progress; the assignment's own
    checks come first, as in Kafka's ReplicationControlManager."""
    machine = cluster(brokers=5, replicas=(1, 2, 3))

    def keep(*changes: tuple) -> list[Outcome]:
        command = AlterReassignments(changes, keep_replication_factor=True)
        return machine.run(command)  # type: ignore[return-value]

    assert keep(("t", 0, (1, 2, 3, 4)), ("t", 0, (1, 2)), ("t", 0, (1, 1, 2))) == [
        Outcome(
            ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 4"
        ),
        Outcome(
            ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2"
        ),
        Outcome(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
    ]
    assert machine.partition("t").replicas == (1, 2, 3)
    assert keep(("t", 0, (2, 3, 4))) == [Outcome()]  # 1,2,3 -> 2,3,4 (+4, -1): 3 replicas
    assert machine.partition("t").replicas == (2, 3, 4, 1)
    assert keep(("t", 0, (2, 3, 5))) == [Outcome()]  # counted as the target in progress
    assert reassign(machine, ("t", 0, (2, 3, 4, 5))) == [Outcome()]  # allowed by default


def test_cancelling_reverts_to_the_original_replicas() -> None:
    machine = cluster(brokers=5, replicas=(1, 2, 3))
    reassign(machine, ("t", 0, (3, 4, 5)))
    machine.alter(1, machine.isr_change("t", 0, (1, 2, 3, 4)))  # 4 caught up, 5 not yet
    assert machine.partition("t").adding_replicas == (4, 5)
    assert reassign(machine, ("t", 0, None)) == [Outcome()]
    p = machine.partition("t")
    # Kafka's revert: the replicas (target + removing) without the adding ones, in that order
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == (
        (3, 1, 2), (1, 2, 3), 1, (), ()
    )  # fmt: skip
    restored(machine)


def test_a_new_target_during_a_reassignment_starts_from_the_current_replicas() -> None:
    machine = cluster(brokers=5, replicas=(1, 2, 3))
    reassign(machine, ("t", 0, (2, 3, 4)))
    reassign(machine, ("t", 0, (2, 3, 4)))  # the same again: 4 is still being added
    p = machine.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 4, 1), (4,), (1,))
    reassign(machine, ("t", 0, (2, 3, 5)))  # from 2,3,4,1 (as Kafka): 1 and 4 leave, 5 comes
    p = machine.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 5, 1, 4), (5,), (1, 4))
    reassign(machine, ("t", 0, None))
    assert machine.partition("t").replicas == (2, 3, 1, 4)


def test_cancel_without_reassignment_and_unknown_partitions() -> None:
    machine = cluster()
    assert reassign(
        machine, ("t", 0, None), ("t", 7, (1,)), ("nope", 0, (1,)), ("t", 1, (1, 1)), ("t", 1, ())
    ) == [
        Outcome(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."),
        Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:7."),
        Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
        Outcome(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        Outcome(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
    ]


def test_a_cancel_needing_an_unclean_election_is_refused_unless_enabled() -> None:
    machine = cluster(brokers=4, replicas=(1, 2))
    reassign(machine, ("t", 0, (3, 4)))
    machine.alter(1, machine.isr_change("t", 0, (1, 2, 3)))
    # 1 and 2 fail: 3 (an adding replica) is the only in-sync one and takes the leadership
    machine.fence(1)
    machine.fence(2)
    assert (machine.partition("t").leader, machine.partition("t").isr) == (3, (3,))
    [refused] = reassign(machine, ("t", 0, None))
    assert refused.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "would require an unclean leader election" in refused.error_message
    configs(machine, ConfigAlteration("topic", "t", {"unclean.leader.election.enable": "true"}))
    machine.unfence(2)
    assert reassign(machine, ("t", 0, None)) == [Outcome()]
    p = machine.partition("t")
    # 1 (the first original replica) would form the ISR, but is fenced: the unclean election
    # picks the first active replica, 2, which then is the ISR alone
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((1, 2), (2,), 2, ())


def test_the_removed_leader_failing_hands_over_within_the_union() -> None:
    machine = cluster(brokers=4, replicas=(1, 2, 3))
    reassign(machine, ("t", 0, (2, 3, 4)))
    machine.fence(1)  # leads no more; 2 (first of the replicas in the ISR) does
    p = machine.partition("t")
    assert (p.replicas, p.isr, p.leader) == ((2, 3, 4, 1), (2, 3), 2)
    code, after = only(machine.alter(2, machine.isr_change("t", 0, (2, 3, 4))))
    assert code == ErrorCode.NONE  # the leader stays: the completed partition is the answer
    assert after == machine.partition("t") == Partition(0, (2, 3, 4), (2, 3, 4), 2, 2, 3)


def test_list_reassignments_of_given_partitions() -> None:
    machine = cluster(brokers=4)
    machine.create("u", 0, 0, ((0, (1, 2, 3)), (1, (1, 2, 3))))
    reassign(machine, ("u", 1, (4, 2, 3)))
    assert list_reassignments(machine.state, (("u", 0), ("u", 1), ("u", 9), ("x", 0))) == [
        ReassignmentInfo("u", 1, (4, 2, 3, 1), (4,), (1,))
    ]


def test_reassignment_commands_round_trip() -> None:
    body = AlterReassignments((("t", 0, (1, 2)), ("t", 1, None)), True)
    command = Command("r", NOW, body)
    assert decode_command(encode_command(command)) == command


# ---------------------------------------------------------------- features


def test_features_are_bootstrapped_once() -> None:
    machine = Machine()
    machine.run(InitCluster("c"))  # from before features: leaves them unset
    assert not machine.state.features_initialized
    machine.run(InitCluster("other", ((TV, 2), (GV, 0))))
    assert machine.state.cluster_id == "c"
    assert machine.state.features == {TV: 2}
    assert machine.state.features_initialized
    assert [c.kind for c in machine.changes] == ["features"]
    machine.run(InitCluster("c", ((TV, 1),)))
    assert machine.state.features == {TV: 2}


def features(machine: Machine, *updates: tuple, validate_only: bool = False):
    return machine.run(UpdateFeatures(updates, validate_only))


def test_update_features_as_kafka() -> None:
    machine = Machine()
    machine.run(InitCluster("c", ((TV, 2), (GV, 1))))
    up, safe, unsafe = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE
    assert features(machine, (TV, 1, safe)) == [FeatureOutcome(TV)]
    assert features(machine, (TV, 2, up), (GV, 0, unsafe)) == [
        FeatureOutcome(TV),
        FeatureOutcome(GV),
    ]
    assert machine.state.features == {TV: 2}  # level 0: finalized no more
    restored(machine)


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        ((TV, 1, UpgradeType.UPGRADE), "Can't downgrade the version of this feature without"),
        ((GV, 1, UpgradeType.SAFE_DOWNGRADE), "Can't downgrade to a newer version."),
        ((TV, 3, UpgradeType.UPGRADE), "only supports versions 0-2"),
        (("metadata.version", 5, UpgradeType.UPGRADE), "does not support this feature."),
        ((TV, -1, UpgradeType.UNSAFE_DOWNGRADE), "cannot be less than 0."),
        ((TV, 1, UpgradeType.UNKNOWN), "does not support the given upgrade type."),
    ],
)
def test_feature_updates_kafka_refuses(update: tuple, reason: str) -> None:
    machine = Machine()
    machine.run(InitCluster("c", ((TV, 2),)))
    outcomes = features(machine, (GV, 1, UpgradeType.UPGRADE), update)
    assert [o.error_code for o in outcomes] == [ErrorCode.INVALID_UPDATE_VERSION] * 2
    assert outcomes[0].error_message == outcomes[1].error_message  # Kafka repeats the error
    name, level, _ = update
    assert outcomes[0].error_message.startswith(
        f"Invalid update version {level} for feature {name}."
    )
    assert reason in outcomes[0].error_message
    assert machine.state.features == {TV: 2}  # all or nothing: group.version not set either


def test_validate_only_features_change_nothing() -> None:
    machine = Machine()
    machine.run(InitCluster("c", ((TV, 2),)))
    offset = machine.state.offset
    assert features(machine, (GV, 1, 1), validate_only=True) == [FeatureOutcome(GV)]
    assert machine.state.features == {TV: 2}
    assert machine.state.offset == offset


# ---------------------------------------------------------------- offline replicas


def test_offline_replicas_leave_isrs_and_leaderships(caplog) -> None:
    machine = cluster(replicas=(1, 2, 3))
    machine.create("u", 0, 0, ((0, (1,)),))
    machine.create("v", 0, 0, ((0, (1, 2)),))
    body = OfflineReplicas(1, machine.epoch(1), (("t", 0), ("u", 0)))
    with caplog.at_level(logging.WARNING, logger="rafka.meta.state"):
        assert machine.run(body) == OfflineOutcome(2)
    assert "Broker 1 reports 2 replica(s) offline" in caplog.text
    assert machine.partition("t") == Partition(0, (1, 2, 3), (2, 3), 2, 1, 1)
    # its only replica cannot serve: offline, the last ISR member kept to come back as leader
    assert machine.partition("u") == Partition(0, (1,), (1,), NO_LEADER, 1, 1)
    assert "1 partition(s) offline: broker 1 was their last active in-sync replica" in caplog.text
    assert machine.partition("v").leader == 1  # its other replicas are not affected
    stale = machine.run(OfflineReplicas(1, machine.epoch(1) - 1, (("v", 0),)))
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the brokers' cache


def test_the_cache_follows_configs_features_and_reassignments() -> None:
    fed = Fed()
    for broker_id in (1, 2, 3, 4):
        fed.machine.register(broker_id)
    fed.machine.create("t", 0, 0, ((0, (1, 2, 3)),))
    fed.cache = fed.snapshot_cache()
    calls: list[dict] = []
    fed.cache.config_listeners.append(lambda: calls.append(dict(fed.cache.broker_configs)))
    fed.run(AlterConfigs((ConfigAlteration("broker", "", {"a": "1"}),)))
    fed.run(AlterConfigs((ConfigAlteration("broker", "2", {"b": "2"}),)))
    fed.run(AlterConfigs((ConfigAlteration("broker", "2", {"b": "2"}),)))  # a reload
    fed.run(AlterConfigs((ConfigAlteration("broker", "", {}, replace=True),)))
    both = {-1: {"a": "1"}, 2: {"b": "2"}}
    assert calls == [{-1: {"a": "1"}}, both, both, {2: {"b": "2"}}]
    fed.run(AlterConfigs((ConfigAlteration("topic", "t", {"retention.ms": "9"}),)))
    assert fed.cache.topics["t"].configs == {"retention.ms": "9"}
    fed.run(InitCluster("c", ((TV, 2), (GV, 1))))
    assert fed.cache.finalized_features == {TV: 2, GV: 1}
    assert fed.cache.features_epoch == fed.machine.state.offset
    fed.run(AlterReassignments((("t", 0, (2, 3, 4)),)))
    p = fed.cache.topics["t"].partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 4, 1), (4,), (1,))
    fresh = fed.snapshot_cache()
    assert fresh.broker_configs == fed.cache.broker_configs == {2: {"b": "2"}}
    assert fresh.finalized_features == {TV: 2, GV: 1}
    assert fresh.topics == fed.cache.topics


def test_a_snapshot_tells_config_listeners_only_of_a_change() -> None:
    fed = Fed()
    fed.machine.register(1)
    fed.run(AlterConfigs((ConfigAlteration("broker", "1", {"a": "1"}),)))
    cache = MetadataCache()
    calls = []
    cache.config_listeners.append(lambda: calls.append(1))
    cache.apply(wire.snapshot_event(fed.machine.state))
    cache.apply(wire.snapshot_event(fed.machine.state))
    assert calls == [1]
    assert cache.broker_configs == {1: {"a": "1"}}
