"""Authorization of the topic and cluster APIs: each request as the writer (its ACLs) or the
reader (none), the errors of what it may not do, and the authorized operations of Metadata and
DescribeCluster."""

from __future__ import annotations

import datetime
import time
import uuid
from functools import partial

import pytest

from cluster.kafka_client import builder
from cluster.polling import wait_for
from meta.acl import AclOperation as Op
from meta.acl import ResourceType as Resource
from tests.compat.pair import Pair
from tests.compat.security.support import (
    ALTER_CONFIGS,
    ALTER_REASSIGNMENTS,
    CLOSED,
    CREATE_ACLS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DENIED,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_LOG_DIRS,
    DESCRIBED,
    ELECT_LEADERS,
    FETCH,
    GROUP,
    INCREMENTAL_ALTER_CONFIGS,
    KAFKA_REQUEST_TEXT,
    LIST_OFFSETS,
    LIST_REASSIGNMENTS,
    METADATA,
    METADATA_MASKED,
    MISSING,
    OPEN,
    OTHER_TXN,
    TIMEOUT,
    UNREGISTER_CONTROLLER,
    Principals,
    acl,
    acls_in_force,
    metadata,
    produce,
)
from tests.unit.log.batches import make_batch


@pytest.mark.parametrize(
    ("what", "topic"),
    [
        ("WRITE allowed", OPEN),
        ("DESCRIBE only", DESCRIBED),
        ("no ACL", CLOSED),
        ("ALL allowed, WRITE denied", DENIED),
        ("a topic that does not exist", MISSING),
    ],
)
def test_produce_authorization(users: Principals, what: str, topic: str) -> None:
    produce(users.writer, f"Produce as writer: {what}", topic)


def test_produce_mixed_topics(users: Principals) -> None:
    produce(
        users.writer,
        "Produce as writer: allowed and denied topics in one request",
        OPEN,
        CLOSED,
        DESCRIBED,
    )


def test_produce_transactional_unauthorized(users: Principals) -> None:
    batch = make_batch(
        [b"t"],
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        extra_attributes=0x10,
        timestamps=[int(time.time() * 1000)],
    )
    produce(
        users.writer,
        "Produce as writer: a transactional id without WRITE",
        OPEN,
        transactional_id=OTHER_TXN,
        batch=batch,
    )


def fetch(pair: Pair, case: str, *topics: str) -> None:
    b = builder(FETCH, 12)
    pair.call(
        case,
        FETCH,
        12,
        masked=[
            "responses.*.partitions.*.records",
            "responses.*.partitions.*.high_watermark",
            "responses.*.partitions.*.last_stable_offset",
            "responses.*.partitions.*.log_start_offset",
            "session_id",
        ],
        sort=["responses"],
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=tuple(
            b.FetchTopic(
                topic=t,
                partitions=(
                    b.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            )
            for t in topics
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


@pytest.mark.parametrize(
    ("what", "topic"),
    [
        ("READ allowed", OPEN),
        ("DESCRIBE only", DESCRIBED),
        ("no ACL", CLOSED),
        ("a topic that does not exist", MISSING),
    ],
)
def test_fetch_authorization(users: Principals, what: str, topic: str) -> None:
    fetch(users.writer, f"Fetch as writer: {what}", topic)


def test_fetch_mixed_topics(users: Principals) -> None:
    fetch(users.writer, "Fetch as writer: allowed and denied topics", OPEN, CLOSED)


def test_metadata_named_topics(users: Principals) -> None:
    metadata(
        users.writer,
        "Metadata as writer: named topics (allowed, described, denied, missing)",
        [OPEN, DESCRIBED, CLOSED, DENIED, MISSING],
    )


def test_metadata_all_topics(users: Principals) -> None:
    metadata(users.writer, "Metadata as writer: all topics (the undescribable left out)", None)


def test_metadata_auto_create_without_create(users: Principals) -> None:
    metadata(users.writer, "Metadata as writer: auto-creation without CREATE", ["sec-auto"], True)


def test_metadata_no_acls(users: Principals) -> None:
    metadata(users.reader, "Metadata as reader (no ACL): all topics", None)


def test_metadata_cluster_authorized_operations(users: Principals) -> None:
    for user, pair in (("writer", users.writer), ("reader", users.reader)):
        pair.call(
            f"Metadata v10 as {user}: cluster authorized operations",
            METADATA,
            10,
            masked=METADATA_MASKED,
            topics=(),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True,
        )


def test_describe_cluster_authorized_operations(users: Principals) -> None:
    for user, pair in (("admin", users.admin), ("writer", users.writer), ("reader", users.reader)):
        pair.call(
            f"DescribeCluster as {user}: authorized operations",
            DESCRIBE_CLUSTER,
            1,
            include_cluster_authorized_operations=True,
            endpoint_type=1,
        )


def test_list_offsets(users: Principals) -> None:
    b = builder(LIST_OFFSETS, 9)
    users.writer.call(
        "ListOffsets as writer: allowed, denied, missing",
        LIST_OFFSETS,
        9,
        sort=["topics"],
        replica_id=-1,
        isolation_level=0,
        topics=tuple(
            b.ListOffsetsTopic(
                name=t,
                partitions=(
                    b.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1
                    ),
                ),
            )
            for t in (OPEN, CLOSED, MISSING)
        ),
    )


def create_topics(pair: Pair, case: str, *names: str, validate_only: bool = True) -> None:
    b = builder(CREATE_TOPICS, 7)
    pair.call(
        case,
        CREATE_TOPICS,
        7,
        masked=["topics.*.configs"],
        sort=["topics"],
        topics=tuple(
            b.CreatableTopic(
                name=n, num_partitions=1, replication_factor=1, assignments=(), configs=()
            )
            for n in names
        ),
        timeout=TIMEOUT,
        validate_only=validate_only,
    )


def test_create_topics_authorization(users: Principals) -> None:
    create_topics(
        users.writer,
        "CreateTopics as writer: CREATE on a prefix, and on nothing",
        "sec-mine-1",
        "sec-not-mine",
    )
    create_topics(users.reader, "CreateTopics as reader (no ACL)", "sec-mine-2")
    create_topics(
        users.writer, "CreateTopics as writer: an existing topic it may not describe", CLOSED
    )


def test_create_topics_with_cluster_create(users: Principals) -> None:
    """CREATE on the cluster allows any topic (its configs stay hidden without
    DESCRIBE_CONFIGS)."""
    b = builder(CREATE_ACLS, 3)
    binding = acl(Resource.CLUSTER, "kafka-cluster", principal="User:revoked", operation=Op.CREATE)
    users.admin.call(
        "CreateAcls: CLUSTER CREATE", CREATE_ACLS, 3, creations=(b.AclCreation(**binding),)
    )
    wait_for(partial(acls_in_force, users.admin, "User:revoked", 1), 30, "the ACL on both")
    create_topics(users.pair("revoked"), "CreateTopics with CLUSTER CREATE", "sec-anything")


def test_delete_topics_authorization(users: Principals) -> None:
    b = builder(DELETE_TOPICS, 6)
    users.writer.call(
        "DeleteTopics as writer: without DELETE, without DESCRIBE, missing",
        DELETE_TOPICS,
        6,
        sort=["responses"],
        masked=["responses.*.topic_id"],
        topics=tuple(
            b.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0)) for n in (OPEN, CLOSED, MISSING)
        ),
        timeout=TIMEOUT,
    )
    users.writer.call(
        "DeleteTopics as writer: an unknown topic id",
        DELETE_TOPICS,
        6,
        topics=(b.DeleteTopicState(name=None, topic_id=uuid.uuid4()),),
        timeout=TIMEOUT,
    )


def test_create_partitions_authorization(users: Principals) -> None:
    b = builder(CREATE_PARTITIONS, 3)
    users.writer.call(
        "CreatePartitions as writer: without ALTER, without DESCRIBE, missing",
        CREATE_PARTITIONS,
        3,
        sort=["results"],
        topics=tuple(
            b.CreatePartitionsTopic(name=n, count=2, assignments=None)
            for n in (OPEN, CLOSED, MISSING)
        ),
        timeout=TIMEOUT,
        validate_only=True,
    )


def test_delete_records_authorization(users: Principals) -> None:
    b = builder(DELETE_RECORDS, 2)
    users.writer.call(
        "DeleteRecords as writer: without DELETE, without DESCRIBE",
        DELETE_RECORDS,
        2,
        sort=["topics"],
        topics=tuple(
            b.DeleteRecordsTopic(
                name=n, partitions=(b.DeleteRecordsPartition(partition_index=0, offset=0),)
            )
            for n in (OPEN, CLOSED, MISSING)
        ),
        timeout=TIMEOUT,
    )


def describe_configs(pair: Pair, case: str, *resources: tuple[int, str]) -> None:
    b = builder(DESCRIBE_CONFIGS, 4)
    pair.call(
        case,
        DESCRIBE_CONFIGS,
        4,
        masked=["results.*.configs"],
        sort=["results"],
        resources=tuple(
            b.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=None)
            for t, n in resources
        ),
        include_synonyms=False,
        include_documentation=False,
    )


TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER, GROUP_RESOURCE = 2, 4, 8, 32


def test_describe_configs_authorization(users: Principals) -> None:
    describe_configs(
        users.writer,
        "DescribeConfigs as writer: broker, broker logger, topics",
        (BROKER_RESOURCE, "1"),
        (BROKER_LOGGER, "1"),
        (TOPIC_RESOURCE, OPEN),
        (TOPIC_RESOURCE, CLOSED),
        (TOPIC_RESOURCE, DENIED),
    )
    describe_configs(
        users.writer, "DescribeConfigs as writer: cluster-wide defaults", (BROKER_RESOURCE, "")
    )
    describe_configs(users.writer, "DescribeConfigs as writer: a group", (GROUP_RESOURCE, GROUP))


def test_alter_configs_authorization(users: Principals) -> None:
    b = builder(ALTER_CONFIGS, 2)
    users.writer.call(
        "AlterConfigs as writer: broker, topics",
        ALTER_CONFIGS,
        2,
        sort=["responses"],
        resources=tuple(
            b.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=(b.AlterableConfig(name="retention.ms", value="1000"),)
                if t == TOPIC_RESOURCE
                else (b.AlterableConfig(name="log.cleaner.threads", value="2"),),
            )
            for t, n in (
                (BROKER_RESOURCE, "1"),
                (TOPIC_RESOURCE, OPEN),
                (TOPIC_RESOURCE, DENIED),
                (TOPIC_RESOURCE, MISSING),
            )
        ),
        validate_only=True,
    )
    ib = builder(INCREMENTAL_ALTER_CONFIGS, 1)
    users.writer.call(
        "IncrementalAlterConfigs as writer: broker, broker logger, topic",
        INCREMENTAL_ALTER_CONFIGS,
        1,
        sort=["responses"],
        resources=tuple(
            ib.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=(ib.AlterableConfig(name=k, config_operation=0, value=v),),
            )
            for t, n, k, v in (
                (BROKER_RESOURCE, "1", "log.cleaner.threads", "2"),
                (BROKER_LOGGER, "1", "kafka", "INFO"),
                (TOPIC_RESOURCE, OPEN, "retention.ms", "1000"),
            )
        ),
        validate_only=True,
    )


def test_cluster_operations(users: Principals) -> None:
    """APIs guarded by a CLUSTER operation the writer does not have."""
    users.writer.call(
        "DescribeLogDirs as writer (CLUSTER DESCRIBE)",
        DESCRIBE_LOG_DIRS,
        4,
        masked=[
            "results.*.log_dir",
            "results.*.total_bytes",
            "results.*.usable_bytes",
            "results.*.topics",
        ],
        topics=None,
    )
    users.reader.call(
        "DescribeLogDirs as reader (no CLUSTER DESCRIBE)", DESCRIBE_LOG_DIRS, 4, topics=None
    )
    eb = builder(ELECT_LEADERS, 2)
    users.writer.call(
        "ElectLeaders as writer (no CLUSTER ALTER)",
        ELECT_LEADERS,
        2,
        masked=["replica_election_results.*.partition_result.*.error_message"],
        election_type=0,
        topic_partitions=(eb.TopicPartitions(topic=OPEN, partitions=(0,)),),
        timeout=TIMEOUT,
    )
    users.writer.call(
        "AlterPartitionReassignments as writer (no CLUSTER ALTER)",
        ALTER_REASSIGNMENTS,
        0,
        masked=KAFKA_REQUEST_TEXT,
        timeout=TIMEOUT,
        topics=(),
    )
    users.writer.call(
        "UnregisterController as writer (no CLUSTER ALTER)",
        UNREGISTER_CONTROLLER,
        0,
        masked=KAFKA_REQUEST_TEXT,
        controller_id=42,
    )
    users.writer.call(
        "ListPartitionReassignments as writer (CLUSTER DESCRIBE)",
        LIST_REASSIGNMENTS,
        0,
        timeout=TIMEOUT,
        topics=None,
    )
    users.reader.call(
        "ListPartitionReassignments as reader (no CLUSTER DESCRIBE)",
        LIST_REASSIGNMENTS,
        0,
        masked=KAFKA_REQUEST_TEXT,
        timeout=TIMEOUT,
        topics=None,
    )
