"""Controller decisions: placement, validation and leader election, without Raft."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from meta.model import NO_LEADER, Broker, Partition, Topic
from meta.partition_leadership import on_broker_fenced, on_broker_unfenced
from meta.protocol import ErrorCode
from meta.topic_config import unclean_election_enabled, validate_topic_configs
from meta.topic_planning import (
    TOO_MANY_PARTITIONS,
    TOO_MANY_RECORDS,
    NewTopic,
    Rejection,
    assign_replicas,
    plan_topic,
    plan_topics,
    validate_topic_name,
)


def broker(broker_id: int, rack: str | None = None, fenced: bool = False) -> Broker:
    return Broker(broker_id, "localhost", 9092, rack, "", b"i", epoch=1, fenced=fenced)


def brokers(*ids: int, fenced: tuple[int, ...] = ()) -> dict[int, Broker]:
    return {i: broker(i, fenced=i in fenced) for i in ids}


def new_topic(
    name: str = "t", partitions: int = 3, rf: int = 1, assignments: tuple = (), **kwargs: object
) -> NewTopic:
    return NewTopic(name, partitions, rf, assignments, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- placement


def test_placement_matches_kafka_rack_unaware() -> None:
    # Kafka's AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start 0.
    assignment = assign_replicas([broker(i) for i in range(5)], 10, 3, 0, 0)
    assert assignment == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
        [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2],
    ]  # fmt: skip


def test_placement_matches_kafka_rack_aware() -> None:
    # Kafka's AdminRackAwareTest: brokers alternate racks (0, 3, 1, 5, 4, 2), one replica per rack.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assignment = assign_replicas([broker(i, rack) for i, rack in racks.items()], 7, 3, 0, 0)
    assert assignment == [
        [0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2],
    ]  # fmt: skip
    for replicas in assignment:
        assert len({racks[b] for b in replicas}) == 3


def test_placement_spreads_leaders_and_varies_start() -> None:
    three = [broker(1), broker(2), broker(3)]
    assert Counter(r[0] for r in assign_replicas(three, 6, 1, 0, 0)) == {1: 2, 2: 2, 3: 2}
    assert assign_replicas(three, 3, 1, 1, 0) == [[2], [3], [1]]
    for replicas in assign_replicas(three, 9, 3, 2, 1):
        assert sorted(replicas) == [1, 2, 3]


def test_placement_ignores_racks_unless_every_broker_has_one() -> None:
    mixed = [broker(1, "a"), broker(2), broker(3, "b")]
    assert assign_replicas(mixed, 3, 1, 0, 0) == [[1], [2], [3]]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "ümlaut", "a/b"], ids=repr)
def test_illegal_topic_names(name: str) -> None:
    message = validate_topic_name(name)
    assert message is not None
    rejection = plan_topic(new_topic(name), {}, brokers(1))
    assert rejection == Rejection(ErrorCode.INVALID_TOPIC_EXCEPTION, message)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "the empty string is not allowed"),
        ("..", "'..' is not allowed"),
        ("a" * 250, f"the length of '{'a' * 250}' is longer than the max allowed length 249"),
        (
            "bad name",
            "'bad name' contains one or more characters other than ASCII alphanumerics, '.', "
            "'_' and '-'",
        ),
    ],
    ids=["empty", "dots", "long", "space"],
)
def test_topic_name_messages_are_kafkas(name: str, why: str) -> None:
    """Kafka's Topic.validate, as its controller answers CreateTopics."""
    assert validate_topic_name(name) == f"Topic name is invalid: {why}"


@pytest.mark.parametrize("name", ["a", "A-b_c.9", "__consumer_offsets", "a" * 249])
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) is None


def rejection_code(
    request: NewTopic, existing: dict[str, Topic] | None = None, fleet: dict | None = None
) -> int:
    outcome = plan_topic(request, existing or {}, fleet or brokers(1, 2, 3))
    assert isinstance(outcome, Rejection), outcome
    return outcome.error_code


def test_existing_and_colliding_names() -> None:
    existing = plan_topic(new_topic("a.b"), {}, brokers(1))
    assert isinstance(existing, Topic)
    assert rejection_code(new_topic("a.b"), {"a.b": existing}) == ErrorCode.TOPIC_ALREADY_EXISTS
    assert rejection_code(new_topic("a_b"), {"a.b": existing}) == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize(
    ("partitions", "rf", "code"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS),
        (-1, 1, ErrorCode.INVALID_PARTITIONS),
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
        (1, 3, ErrorCode.INVALID_REPLICATION_FACTOR),  # only 2 unfenced brokers
    ],
)
def test_partitions_and_replication_factor(partitions: int, rf: int, code: ErrorCode) -> None:
    fleet = brokers(1, 2, 3, fenced=(3,))
    assert rejection_code(new_topic(partitions=partitions, rf=rf), fleet=fleet) == code


def test_default_placement_uses_unfenced_brokers_only() -> None:
    topic = plan_topic(new_topic(partitions=4, rf=2), {}, brokers(1, 2, 3, fenced=(2,)))
    assert isinstance(topic, Topic)
    for index, partition in enumerate(topic.partitions):
        assert partition.index == index
        assert set(partition.replicas) == {1, 3}
        assert partition.isr == partition.replicas
        assert partition.leader == partition.replicas[0]
        assert (partition.leader_epoch, partition.partition_epoch) == (0, 0)


def test_placement_seed_makes_creation_deterministic() -> None:
    request = new_topic(partitions=6, placement_seed=42)
    assert plan_topic(request, {}, brokers(1, 2, 3)) == plan_topic(request, {}, brokers(1, 2, 3))


@pytest.mark.parametrize(
    ("assignments", "code"),
    [
        (((0, (1, 2)), (1, (2,))), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # inconsistent RF
        (((0, (1, 1)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # duplicate broker
        (((0, (1, 9)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # unknown broker
        (((1, (1,)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # not 0-based
        (((0, (1,)), (0, (2,))), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # index twice
        (((0, ()),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # empty
        (((0, (3,)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # only fenced brokers
    ],
)
def test_invalid_manual_assignments(assignments: tuple, code: ErrorCode) -> None:
    request = new_topic(partitions=0, rf=0, assignments=assignments)
    assert rejection_code(request, fleet=brokers(1, 2, 3, fenced=(3,))) == code


def test_manual_assignment_with_counts_set_is_invalid_request() -> None:
    request = new_topic(partitions=1, rf=1, assignments=((0, (1,)),))
    assert rejection_code(request) == ErrorCode.INVALID_REQUEST


def refusal(request: NewTopic, fleet: dict | None = None) -> str:
    outcome = plan_topic(request, {}, fleet or brokers(1, 2, 3))
    assert isinstance(outcome, Rejection), outcome
    return outcome.message


def test_refusals_say_what_kafkas_controller_says() -> None:
    """ReplicationControlManager.createTopic and StripedReplicaPlacer's messages; the
    replication factor is checked before the partition count."""
    rf_message = "Replication factor must be larger than 0, or -1 to use the default value."
    assert refusal(new_topic(rf=0)) == rf_message
    assert refusal(new_topic(partitions=0, rf=-2)) == rf_message
    assert refusal(new_topic(rf=4)) == (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
        "cannot be reached because only 3 broker(s) are registered or some brokers have all "
        "their log directories cordoned."
    )
    assert refusal(new_topic(rf=1), brokers(1, fenced=(1,))) == (
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or "
        "have all their log directories cordoned."
    )


@pytest.mark.parametrize(
    ("partitions", "rf", "assignments", "message"),
    [
        (
            0,
            1,
            ((0, (1,)),),
            "A manual partition assignment was specified, but replication factor was not set "
            "to -1.",
        ),
        (
            2,
            -1,
            ((0, (1,)),),
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            -1,
            -1,
            ((0, (1,)), (0, (2,))),
            "Found multiple manual partition assignments for partition 0",
        ),
        (0, 0, ((1, (1,)),), "partitions should be a consecutive 0-based integer sequence"),
        (
            0,
            0,
            ((0, (3,)),),
            "All brokers specified in the manual partition assignment for partition 0 are "
            "fenced or in controlled shutdown.",
        ),
    ],
    ids=["rf", "partitions", "index-twice", "not-0-based", "fenced"],
)
def test_manual_assignment_refusals_are_kafkas(
    partitions: int, rf: int, assignments: tuple, message: str
) -> None:
    """The counts must be unset (-1, or 0 in older records), then each assignment is checked
    in request order, then the indexes."""
    request = new_topic(partitions=partitions, rf=rf, assignments=assignments)
    assert refusal(request, brokers(1, 2, 3, fenced=(3,))) == message


def test_manual_assignment_isr_is_its_unfenced_replicas() -> None:
    request = new_topic(partitions=0, rf=0, assignments=((0, (3, 1)), (1, (2, 3))))
    topic = plan_topic(request, {}, brokers(1, 2, 3, fenced=(3,)))
    assert isinstance(topic, Topic)
    assert [(p.replicas, p.isr, p.leader) for p in topic.partitions] == [
        ((3, 1), (1,), 1),
        ((2, 3), (2,), 2),
    ]


def test_batch_rejects_duplicates_and_sees_earlier_topics() -> None:
    outcomes = plan_topics(
        [new_topic("x"), new_topic("x"), new_topic("a.b"), new_topic("a_b")], {}, brokers(1)
    )
    codes = [o.error_code if isinstance(o, Rejection) else 0 for o in outcomes]
    assert codes == [ErrorCode.INVALID_REQUEST] * 2 + [0, ErrorCode.INVALID_TOPIC_EXCEPTION]


def test_a_request_over_kafkas_partition_bound_is_refused_whole() -> None:
    # Kafka's validateTotalNumberOfPartitions: 10,000 partitions in all at most, counted
    # before any other check (librdkafka lets one NewTopic ask for 100,000).
    outcomes = plan_topics([new_topic("huge", 100_000), new_topic("ok", 1)], {}, brokers(1))
    assert outcomes == [Rejection(ErrorCode.POLICY_VIOLATION, TOO_MANY_PARTITIONS)] * 2
    manual = new_topic("m", 0, 0, tuple((i, (1,)) for i in range(6_000)))
    assert plan_topics([manual, new_topic("n", 4_001)], {}, brokers(1))[0] == Rejection(
        ErrorCode.POLICY_VIOLATION, TOO_MANY_PARTITIONS
    )


def test_a_request_over_kafkas_record_bound_is_refused_whole() -> None:
    # MAX_RECORDS_PER_USER_OP: a TopicRecord, a ConfigRecord per config and a PartitionRecord
    # per partition; 10,000 partitions pass the partition bound but make 10,001 records.
    refused = [Rejection(ErrorCode.POLICY_VIOLATION, TOO_MANY_RECORDS)]
    assert plan_topics([new_topic("t", 10_000)], {}, brokers(1)) == refused
    configs = {"retention.ms": "1000"}
    assert plan_topics([new_topic("t", 9_999, configs=configs)], {}, brokers(1)) == refused
    fits = plan_topics([new_topic("t", 9_999)], {}, brokers(1))
    assert isinstance(fits[0], Topic)
    assert len(fits[0].partitions) == 9_999
    # Only topics that would be created count: a refused one writes no record.
    two = plan_topics([new_topic("t", 9_990, rf=2), new_topic("u", 9)], {}, brokers(1))
    assert isinstance(two[0], Rejection)
    assert isinstance(two[1], Topic)


def test_topic_configs() -> None:
    good = {"retention.ms": "-1", "cleanup.policy": "compact,delete", "preallocate": "TRUE"}
    assert validate_topic_configs(good) is None
    assert validate_topic_configs({"nope": "1"}) == "Unknown topic config name: nope"
    for bad in ({"retention.ms": "soon"}, {"min.insync.replicas": "0"}, {"cleanup.policy": "x"}):
        assert validate_topic_configs(bad) is not None
    request = new_topic(configs={"segment.bytes": "1"})
    assert rejection_code(request) == ErrorCode.INVALID_CONFIG
    assert unclean_election_enabled({}, default=True)
    assert not unclean_election_enabled({"unclean.leader.election.enable": "false"}, True)


# ---------------------------------------------------------------- leader election


def partition(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int) -> Partition:
    return Partition(0, replicas, isr, leader, leader_epoch=5, partition_epoch=7)


def test_fencing_the_leader_elects_the_next_isr_replica() -> None:
    after = on_broker_fenced(partition((1, 2, 3), (1, 2, 3), 1), 1, {2, 3}, False, "t")
    assert after == Partition(0, (1, 2, 3), (2, 3), 2, leader_epoch=6, partition_epoch=8)


def test_fenced_leader_skips_isr_replicas_that_are_fenced_too() -> None:
    after = on_broker_fenced(partition((1, 2, 3), (1, 2, 3), 1), 1, {3}, False, "t")
    assert after is not None
    assert after.leader == 3


def test_fencing_a_follower_shrinks_the_isr_only() -> None:
    after = on_broker_fenced(partition((1, 2, 3), (1, 2, 3), 1), 3, {1, 2}, False, "t")
    assert after == Partition(0, (1, 2, 3), (1, 2), 1, leader_epoch=5, partition_epoch=8)


def test_fencing_the_last_isr_member_takes_the_partition_offline() -> None:
    after = on_broker_fenced(partition((1, 2), (1,), 1), 1, {2}, False, "t")
    assert after == Partition(0, (1, 2), (1,), NO_LEADER, leader_epoch=6, partition_epoch=8)


def test_unclean_election_picks_a_live_replica_and_warns(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="rafka.meta.controller"):
        after = on_broker_fenced(partition((1, 2), (1,), 1), 1, {2}, True, "orders")
    assert after == Partition(0, (1, 2), (2,), 2, leader_epoch=6, partition_epoch=8)
    assert "Unclean leader election for orders-0" in caplog.text


def test_fencing_a_broker_outside_the_partition_changes_nothing() -> None:
    assert on_broker_fenced(partition((1, 2), (1, 2), 1), 3, {1, 2}, False, "t") is None
    assert on_broker_fenced(partition((1, 2), (1,), 1), 2, {1}, False, "t") is None


def test_unfencing_restores_an_offline_partition() -> None:
    offline = partition((1, 2), (1,), NO_LEADER)
    assert on_broker_unfenced(offline, 1, False, "t") == Partition(
        0, (1, 2), (1,), 1, leader_epoch=6, partition_epoch=8
    )
    assert on_broker_unfenced(offline, 2, False, "t") is None  # not in the ISR
    assert on_broker_unfenced(offline, 2, True, "t") == Partition(
        0, (1, 2), (2,), 2, leader_epoch=6, partition_epoch=8
    )
    assert on_broker_unfenced(partition((1, 2), (1, 2), 2), 1, False, "t") is None  # has a leader
