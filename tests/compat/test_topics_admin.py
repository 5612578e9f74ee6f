"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords, with
every error an admin client can provoke."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from cluster.kafka_client import builder
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair

PRODUCE, DELETE_RECORDS, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 0, 21, 19, 20, 37
TIMEOUT = datetime.timedelta(seconds=30)
# CreateTopics v5+ describes the created topic: its configs (the brokers' defaults differ
# where a default is the broker's own, e.g. segment sizes) are compared in test_configs.
CREATED = ["topics.*.topic_id", "topics.*.configs"]


def create(
    pair: Pair,
    case: str,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    configs: dict[str, str | None] | None = None,
    validate_only: bool = False,
    version: int = 7,
    assignments: tuple = (),
) -> tuple[Any, Any]:
    b = builder(CREATE_TOPICS, version)
    topic = b.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=assignments,
        configs=tuple(b.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()),
    )
    return pair.call(
        case,
        CREATE_TOPICS,
        version,
        masked=CREATED,
        topics=(topic,),
        timeout=TIMEOUT,
        validate_only=validate_only,
    )


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create(pair: Pair, version: int) -> None:
    create(pair, f"CreateTopics v{version}: 3 partitions", f"compat-create-v{version}", 3)


def test_create_validate_only(pair: Pair) -> None:
    create(pair, "CreateTopics: validate_only", "compat-create-dry", 2, validate_only=True)


def test_create_existing(pair: Pair) -> None:
    create(pair, "CreateTopics: the topic exists", "compat-create-v7", 3)


@pytest.mark.parametrize(
    ("what", "name"),
    [
        ("an invalid character", "bad name!"),
        ("249 characters", "t" * 250),
        ("'.'", "."),
        ("an empty name", ""),
    ],
)
def test_create_invalid_name(pair: Pair, what: str, name: str) -> None:
    create(pair, f"CreateTopics: a name with {what}", name)


def test_create_colliding_name(pair: Pair) -> None:
    create_topics(pair, NewTopic("compat.collide", 1, 1))
    create(pair, "CreateTopics: a name colliding with another ('.' vs '_')", "compat_collide")


def test_create_internal_name(pair: Pair) -> None:
    create(pair, "CreateTopics: __consumer_offsets", "__consumer_offsets", 5)


@pytest.mark.parametrize(
    ("what", "partitions", "replication"),
    [
        ("0 partitions", 0, 1),
        ("-5 partitions", -5, 1),
        ("replication factor 0", 1, 0),
        ("replication factor 4 on one broker", 1, 4),
        ("default partitions and replication (-1)", -1, -1),
    ],
)
def test_create_bad_counts(pair: Pair, what: str, partitions: int, replication: int) -> None:
    create(
        pair,
        f"CreateTopics: {what}",
        f"compat-counts-{partitions}-{replication}",
        partitions,
        replication,
        validate_only=True,
    )


@pytest.mark.parametrize(
    ("what", "configs"),
    [
        ("an unknown config", {"no.such.config": "1"}),
        ("a bad cleanup.policy", {"cleanup.policy": "sometimes"}),
        ("a non-numeric retention.ms", {"retention.ms": "soon"}),
        ("min.insync.replicas 0", {"min.insync.replicas": "0"}),
        ("a null config value", {"retention.ms": None}),
        ("good configs", {"cleanup.policy": "compact", "retention.ms": "1000"}),
        ("a config Kafka 4 removed", {"message.downconversion.enable": "true"}),
        ("an empty cleanup.policy (infinite retention)", {"cleanup.policy": ""}),
        ("cleanup.policy naming delete twice", {"cleanup.policy": "delete,delete"}),
        ("cleanup.policy with an empty item", {"cleanup.policy": "delete,"}),
        ("retention.bytes -5 (no lower bound)", {"retention.bytes": "-5"}),
        ("preallocate=yes", {"preallocate": "yes"}),
        ("min.cleanable.dirty.ratio 1.5", {"min.cleanable.dirty.ratio": "1.5"}),
        ("an unknown compression.type", {"compression.type": "brotli"}),
        ("segment.ms past the INT range is fine (LONG)", {"segment.ms": str(2**40)}),
        ("max.message.bytes past the INT range", {"max.message.bytes": str(2**31)}),
        ("max.message.bytes -1", {"max.message.bytes": "-1"}),
        ("message.timestamp.type in lower case", {"message.timestamp.type": "createtime"}),
        (
            "min.compaction.lag.ms over max.compaction.lag.ms",
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
        ),
        (
            "a leader throttle list that is not replicas",
            {"leader.replication.throttled.replicas": "x"},
        ),
    ],
)
def test_create_configs(pair: Pair, what: str, configs: dict[str, str | None]) -> None:
    create(pair, f"CreateTopics: {what}", "compat-configs", configs=configs, validate_only=True)


def test_create_with_assignment(pair: Pair) -> None:
    b = builder(CREATE_TOPICS, 7)
    assignments = (
        b.CreatableReplicaAssignment(partition_index=0, broker_ids=(1,)),
        b.CreatableReplicaAssignment(partition_index=1, broker_ids=(1,)),
    )
    create(
        pair,
        "CreateTopics: a replica assignment",
        "compat-assigned",
        -1,
        -1,
        assignments=assignments,
    )
    bad = (b.CreatableReplicaAssignment(partition_index=0, broker_ids=(7,)),)
    create(
        pair,
        "CreateTopics: an assignment to an unknown broker",
        "compat-assigned-bad",
        -1,
        -1,
        assignments=bad,
    )


@pytest.mark.parametrize(
    ("what", "partitions", "replication", "assignments"),
    [
        ("an assignment with a replication factor", -1, 1, [(0, (1,))]),
        ("an assignment with a partition count", 1, -1, [(0, (1,))]),
        ("an assignment naming partition 0 twice", -1, -1, [(0, (1,)), (0, (1,))]),
        ("assignments not starting at 0", -1, -1, [(1, (1,))]),
        ("an assignment naming a broker twice", -1, -1, [(0, (1, 1))]),
        ("an empty assignment", -1, -1, [(0, ())]),
    ],
)
def test_create_bad_assignment(
    pair: Pair, what: str, partitions: int, replication: int, assignments: list
) -> None:
    b = builder(CREATE_TOPICS, 7)
    create(
        pair,
        f"CreateTopics: {what}",
        "compat-assigned-wrong",
        partitions,
        replication,
        assignments=tuple(
            b.CreatableReplicaAssignment(partition_index=i, broker_ids=ids)
            for i, ids in assignments
        ),
        validate_only=True,
    )


def test_create_twice_in_one_request(pair: Pair) -> None:
    b = builder(CREATE_TOPICS, 7)
    topic = b.CreatableTopic(
        name="compat-twice", num_partitions=1, replication_factor=1, assignments=(), configs=()
    )
    pair.call(
        "CreateTopics: one name twice in a request",
        CREATE_TOPICS,
        7,
        masked=CREATED,
        topics=(topic, topic),
        timeout=TIMEOUT,
        validate_only=True,
    )


def test_create_metadata_topic(pair: Pair) -> None:
    create(pair, "CreateTopics: __cluster_metadata", "__cluster_metadata", validate_only=True)


def test_create_too_many_partitions(pair: Pair) -> None:
    create(
        pair,
        "CreateTopics: 100,000 partitions in one request",
        "compat-huge",
        100_000,
        validate_only=True,
    )


def delete(pair: Pair, case: str, *names: str, version: int = 6) -> tuple[Any, Any]:
    b = builder(DELETE_TOPICS, version)
    return pair.call(
        case,
        DELETE_TOPICS,
        version,
        masked=["responses.*.topic_id"],
        topics=tuple(b.DeleteTopicState(name=n, topic_id=None) for n in names),
        topic_names=names,
        timeout=TIMEOUT,
    )


def test_delete(pair: Pair) -> None:
    create_topics(pair, NewTopic("compat-delete", 1, 1))
    delete(pair, "DeleteTopics v6: an existing topic", "compat-delete")
    delete(pair, "DeleteTopics v6: the same topic again (gone)", "compat-delete")
    delete(pair, "DeleteTopics v4: an unknown topic", "compat-delete-nope", version=4)


def test_delete_internal(pair: Pair) -> None:
    delete(pair, "DeleteTopics v6: __consumer_offsets", "__consumer_offsets")


def test_delete_unknown_id(pair: Pair) -> None:
    b = builder(DELETE_TOPICS, 6)
    pair.call(
        "DeleteTopics v6: an unknown topic id",
        DELETE_TOPICS,
        6,
        masked=["responses.*.topic_id"],
        topics=(b.DeleteTopicState(name=None, topic_id=uuid.uuid4()),),
        topic_names=(),
        timeout=TIMEOUT,
    )


def test_delete_twice_in_one_request(pair: Pair) -> None:
    create_topics(pair, NewTopic("compat-delete-twice", 1, 1))
    delete(pair, "DeleteTopics v6: one name twice", "compat-delete-twice", "compat-delete-twice")


def partitions(
    pair: Pair, case: str, name: str, count: int, validate_only: bool = False
) -> tuple[Any, Any]:
    b = builder(CREATE_PARTITIONS, 3)
    return pair.call(
        case,
        CREATE_PARTITIONS,
        3,
        topics=(b.CreatePartitionsTopic(name=name, count=count, assignments=None),),
        timeout=TIMEOUT,
        validate_only=validate_only,
    )


def test_create_partitions(pair: Pair) -> None:
    create_topics(pair, NewTopic("compat-grow", 2, 1))
    partitions(pair, "CreatePartitions: 2 to 4", "compat-grow", 4)
    partitions(pair, "CreatePartitions: 4 to 4 (no change)", "compat-grow", 4)
    partitions(pair, "CreatePartitions: 4 to 3 (fewer)", "compat-grow", 3)
    partitions(pair, "CreatePartitions: an unknown topic", "compat-grow-nope", 3)
    partitions(pair, "CreatePartitions: validate_only 4 to 6", "compat-grow", 6, True)
    b = builder(CREATE_PARTITIONS, 3)

    def assigned(case: str, count: int, assignments: tuple) -> None:
        topic = b.CreatePartitionsTopic(
            name="compat-grow",
            count=count,
            assignments=tuple(b.CreatePartitionsAssignment(broker_ids=a) for a in assignments),
        )
        pair.call(case, CREATE_PARTITIONS, 3, topics=(topic,), timeout=TIMEOUT, validate_only=True)

    assigned("CreatePartitions: 4 to 5 on broker 1", 5, ((1,),))
    assigned("CreatePartitions: 4 to 6 with one assignment", 6, ((1,),))
    assigned("CreatePartitions: an assignment to an unknown broker", 5, ((7,),))
    assigned("CreatePartitions: an assignment with two replicas (the topic has one)", 5, ((1, 1),))


def test_delete_records(pair: Pair) -> None:
    create_topics(pair, NewTopic("compat-truncate", 1, 1))
    from tests.unit.log.batches import make_batch

    now = time.time_ns() // 1_000_000
    batch = make_batch([b"%d" % i for i in range(10)], timestamps=[now] * 10)
    pb = builder(PRODUCE, 9)
    data = pb.TopicProduceData(
        name="compat-truncate", partition_data=(pb.PartitionProduceData(index=0, records=batch),)
    )
    pair.send(PRODUCE, 9, transactional_id=None, acks=-1, timeout=10000, topic_data=(data,))
    b = builder(DELETE_RECORDS, 2)

    def call(case: str, offset: int, partition: int = 0, name: str = "compat-truncate") -> None:
        t = b.DeleteRecordsTopic(
            name=name,
            partitions=(b.DeleteRecordsPartition(partition_index=partition, offset=offset),),
        )
        pair.call(case, DELETE_RECORDS, 2, topics=(t,), timeout=TIMEOUT)

    call("DeleteRecords: up to offset 4", 4)
    call("DeleteRecords: up to offset 2 (behind the start)", 2)
    call("DeleteRecords: up to the high watermark (-1)", -1)
    call("DeleteRecords: past the high watermark", 50)
    call("DeleteRecords: unknown partition", 1, partition=3)
    call("DeleteRecords: unknown topic", 1, name="compat-truncate-nope")
    call("DeleteRecords: offset -2", -2)
