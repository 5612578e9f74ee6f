"""The API versions Kafka 4.4 added over Rafka's earlier ones (issue 26), each asked of both
brokers and compared: topics by id (Produce v13, OffsetCommit/OffsetFetch v10, each side asked by
its own id), Fetch v17-v18, ListOffsets v9-v11, DescribeGroups v6, DeleteGroups v3,
AlterPartitionReassignments v1, DescribeLogDirs v3-v5, ApiVersions v5 and UnregisterBroker."""

from __future__ import annotations

import datetime
import functools
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from cluster.kafka_client import builder
from cluster.polling import wait_for
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, Side, fresh_connections
from tests.compat.test_fetch import topic_id
from tests.unit.log.batches import make_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA, COMMIT, OFFSET_FETCH, FIND_COORDINATOR = (
    0,
    1,
    2,
    3,
    8,
    9,
    10,
)
DESCRIBE_GROUPS, API_VERSIONS, DESCRIBE_LOG_DIRS, DELETE_GROUPS = 15, 18, 35, 42
REASSIGN, DESCRIBE_CLUSTER, UNREGISTER_BROKER = 45, 60, 64
TOPIC = "compat-versions"
GROUP = "compat-versions-group"
EMPTY_GROUP, DELETED_GROUP = "compat-versions-empty", "compat-versions-deleted"
UNKNOWN_GROUP = "compat-versions-nope"
GROUPS = (GROUP, EMPTY_GROUP, DELETED_GROUP, UNKNOWN_GROUP)
# The same recent timestamps for both brokers: both logs hold the same bytes, within retention.
T0 = (time.time_ns() // 1_000_000 // 1000 - 3600) * 1000
BATCHES = [
    make_batch([b"a0", b"a1"], timestamps=[T0, T0 + 10]),
    make_batch([b"b0"], timestamps=[T0 + 20]),
]
UNKNOWN_ID = uuid.UUID("5ca1ab1e-0000-4000-8000-000000000026")
# What differs between two brokers for the same append: where it landed and when.
APPEND = [
    "responses.*.partition_responses.*.log_append_time",
    "responses.*.partition_responses.*.base_offset",
    "responses.*.partition_responses.*.log_start_offset",
]


@pytest.fixture(scope="module", autouse=True)
def topic(pair: Pair) -> None:
    create_topics(pair, NewTopic(TOPIC, 2, 1))
    b = builder(PRODUCE, 9)
    for batch in BATCHES:
        data = b.TopicProduceData(
            name=TOPIC, partition_data=(b.PartitionProduceData(index=0, records=batch),)
        )
        k, r = pair.send(
            PRODUCE, 9, transactional_id=None, acks=-1, timeout=10000, topic_data=(data,)
        )
        for answer in (k, r):
            assert answer.responses[0].partition_responses[0].error_code == 0, answer
    for group in GROUPS:
        for side in pair.sides:
            what = f"{side.name}'s coordinator of {group}"
            wait_for(functools.partial(coordinates, side, group), what=what)


def coordinates(side: Side, group: str) -> bool:
    """Whether the broker coordinates `group` and has loaded its offsets partition (the
    groups' __consumer_offsets is created by the first FindCoordinator)."""
    found = side.conn().call(FIND_COORDINATOR, 3, key=group, key_type=0)
    if found.error_code != ErrorCode.none:
        return False
    answer = side.conn().call(
        DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False
    )
    return answer.groups[0].error_code == ErrorCode.none


def by_id(
    pair: Pair, case: str, request: Callable[[Side, uuid.UUID], Any], masked: list[str]
) -> tuple[Any, Any]:
    """The same request to both brokers, each naming the topic by its own id (ids are
    random per cluster and masked in the answers)."""
    k, r = pair.both(lambda side: request(side, topic_id(side, TOPIC)))
    return pair.compare(case, k, r, masked=masked)


# ---------------------------------------------------------------- Produce v13


def produce_v13(side: Side, tid: uuid.UUID | None, records: bytes) -> Any:
    b = builder(PRODUCE, 13)
    data = b.TopicProduceData(
        topic_id=tid, partition_data=(b.PartitionProduceData(index=1, records=records),)
    )
    return side.conn().call(
        PRODUCE, 13, transactional_id=None, acks=-1, timeout=10000, topic_data=(data,)
    )


def test_produce_v13_by_topic_id(pair: Pair) -> None:
    batch = make_batch([b"x", b"y"], timestamps=[int(time.time() * 1000)] * 2)
    by_id(
        pair,
        "Produce v13: a batch to a topic named by its id",
        lambda side, tid: produce_v13(side, tid, batch),
        APPEND,
    )


def test_produce_v13_unknown_topic_id(pair: Pair) -> None:
    batch = make_batch([b"x"], timestamps=[int(time.time() * 1000)])
    k, r = pair.both(lambda side: produce_v13(side, UNKNOWN_ID, batch))
    pair.compare("Produce v13: an unknown topic id (UNKNOWN_TOPIC_ID)", k, r, APPEND)


# ---------------------------------------------------------------- Fetch v17-v18


def fetch(side: Side, tid: uuid.UUID, version: int, high_watermark: int) -> Any:
    b = builder(FETCH, version)
    part = b.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
        replica_directory_id=None,
        high_watermark=high_watermark,
    )
    return side.conn().call(
        FETCH,
        version,
        cluster_id=None,
        replica_id=-1,
        replica_state=b.ReplicaState(replica_id=-1, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(b.FetchTopic(topic_id=tid, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


@pytest.mark.parametrize(
    ("version", "high_watermark", "what"),
    [
        (17, 2**63 - 1, "a consumer's fetch"),
        (18, 2**63 - 1, "a consumer's fetch (no high watermark known)"),
        (18, 1, "with a high watermark behind the leader's (a follower's field)"),
    ],
)
def test_fetch(pair: Pair, version: int, high_watermark: int, what: str) -> None:
    by_id(
        pair,
        f"Fetch v{version}: {what}",
        lambda side, tid: fetch(side, tid, version, high_watermark),
        ["session_id"],
    )


# ---------------------------------------------------------------- ListOffsets v9-v11


@pytest.mark.parametrize(
    ("what", "timestamp", "version"),
    [
        ("last tiered offset (-5)", -5, 9),
        ("last tiered offset (-5) below v9", -5, 8),
        ("latest, with v10's timeout", -1, 10),
        ("earliest local (-4)", -4, 10),
        ("earliest pending upload offset (-6)", -6, 11),
        ("earliest pending upload offset (-6) below v11", -6, 10),
        ("max timestamp (-3) below v7", -3, 6),
        ("a special timestamp no version knows (-7)", -7, 11),
        ("a timestamp", T0 + 5, 11),
    ],
)
def test_list_offsets(pair: Pair, what: str, timestamp: int, version: int) -> None:
    b = builder(LIST_OFFSETS, version)
    partition = b.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
    )
    pair.call(
        f"ListOffsets v{version}: {what}",
        LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=(b.ListOffsetsTopic(name=TOPIC, partitions=(partition,)),),
        timeout=datetime.timedelta(seconds=30),
    )


# ---------------------------------------------------------------- OffsetCommit/OffsetFetch v10


def commit_v10(side: Side, tid: uuid.UUID, group: str = GROUP) -> Any:
    b = builder(COMMIT, 10)
    partition = b.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=2, committed_leader_epoch=-1, committed_metadata="m"
    )
    return side.conn().call(
        COMMIT,
        10,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(b.OffsetCommitRequestTopic(topic_id=tid, partitions=(partition,)),),
    )


def offset_fetch_v10(side: Side, tid: uuid.UUID | None, group: str = GROUP) -> Any:
    b = builder(OFFSET_FETCH, 10)
    topics = None
    if tid is not None:
        topics = (b.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=(0, 1)),)
    return side.conn().call(
        OFFSET_FETCH,
        10,
        groups=(b.OffsetFetchRequestGroup(group_id=group, member_id=None, topics=topics),),
        require_stable=True,
    )


def test_offset_commit_and_fetch_v10(pair: Pair) -> None:
    by_id(pair, "OffsetCommit v10: a topic named by its id", commit_v10, [])
    by_id(pair, "OffsetFetch v10: a topic named by its id", offset_fetch_v10, [])
    k, r = pair.both(lambda side: offset_fetch_v10(side, None))
    pair.compare("OffsetFetch v10: every committed partition", k, r)


def test_offset_commit_and_fetch_v10_unknown_topic_id(pair: Pair) -> None:
    k, r = pair.both(lambda side: commit_v10(side, UNKNOWN_ID))
    pair.compare("OffsetCommit v10: an unknown topic id (UNKNOWN_TOPIC_ID)", k, r)
    k, r = pair.both(lambda side: offset_fetch_v10(side, UNKNOWN_ID))
    pair.compare("OffsetFetch v10: an unknown topic id (UNKNOWN_TOPIC_ID)", k, r)


# ---------------------------------------------------------------- DescribeGroups v6, DeleteGroups


def describe_groups(pair: Pair, case: str, version: int, *groups: str) -> None:
    pair.call(case, DESCRIBE_GROUPS, version, groups=groups, include_authorized_operations=False)


def test_describe_groups_v6(pair: Pair) -> None:
    describe_groups(pair, "DescribeGroups v5: an unknown group (Dead)", 5, UNKNOWN_GROUP)
    describe_groups(
        pair, "DescribeGroups v6: an unknown group (GROUP_ID_NOT_FOUND)", 6, UNKNOWN_GROUP
    )
    pair.both(lambda side: commit_v10(side, topic_id(side, TOPIC), EMPTY_GROUP))
    describe_groups(
        pair, "DescribeGroups v6: an empty classic group (offsets only)", 6, EMPTY_GROUP
    )


def test_delete_groups_v3(pair: Pair) -> None:
    pair.both(lambda side: commit_v10(side, topic_id(side, TOPIC), DELETED_GROUP))
    for version in (2, 3):
        pair.call(
            f"DeleteGroups v{version}: an unknown group",
            DELETE_GROUPS,
            version,
            groups_names=(UNKNOWN_GROUP,),
        )
    pair.call(
        "DeleteGroups v3: an empty group",
        DELETE_GROUPS,
        3,
        groups_names=(DELETED_GROUP,),
    )


# ---------------------------------------------------------------- AlterPartitionReassignments v1


@pytest.mark.parametrize("allow", [False, True])
def test_reassignment_v1(pair: Pair, allow: bool) -> None:
    b = builder(REASSIGN, 1)

    def reassign(replicas: tuple[int, ...]) -> dict[str, Any]:
        partition = b.ReassignablePartition(partition_index=1, replicas=replicas)
        return {
            "timeout": datetime.timedelta(seconds=30),
            "allow_replication_factor_change": allow,
            "topics": (b.ReassignableTopic(name=TOPIC, partitions=(partition,)),),
        }

    state = "allowed" if allow else "not allowed"
    pair.call(
        f"AlterPartitionReassignments v1: the same replica, factor change {state}",
        REASSIGN,
        1,
        **reassign((1,)),
    )
    pair.call(
        f"AlterPartitionReassignments v1: an unknown broker added, factor change {state}",
        REASSIGN,
        1,
        **reassign((1, 99)),
    )


# ---------------------------------------------------------------- DescribeLogDirs v3-v5


@pytest.mark.parametrize("version", [3, 4, 5])
def test_describe_log_dirs(pair: Pair, version: int) -> None:
    b = builder(DESCRIBE_LOG_DIRS, version)
    pair.call(
        f"DescribeLogDirs v{version}: one partition's directory",
        DESCRIBE_LOG_DIRS,
        version,
        topics=(b.DescribableLogDirTopic(topic=TOPIC, partitions=(0,)),),
        masked=["results.*.log_dir", "results.*.total_bytes", "results.*.usable_bytes"],
    )


# ---------------------------------------------------------------- ApiVersions v5


def api_versions(conn: Any, version: int, **fields: Any) -> Any:
    software = {"client_software_name": "compat", "client_software_version": "1"}
    return conn.call(API_VERSIONS, version, **(software | fields))


def cluster_id(side: Side) -> str:
    answer = side.conn().call(
        DESCRIBE_CLUSTER,
        1,
        include_cluster_authorized_operations=False,
        endpoint_type=1,
    )
    return str(answer.cluster_id)


@pytest.mark.parametrize(
    ("what", "version", "fields"),
    [
        ("another cluster's id (REBOOTSTRAP_REQUIRED)", 5, {"cluster_id": "Zm9v", "node_id": 1}),
        ("a cluster id without a node id", 5, {"cluster_id": "Zm9v", "node_id": -1}),
        ("a node id without a cluster id", 5, {"cluster_id": None, "node_id": 1}),
        ("a software name with a space", 3, {"client_software_name": "bad name"}),
        ("an empty software version", 5, {"client_software_version": ""}),
    ],
)
def test_api_versions_refused(pair: Pair, what: str, version: int, fields: dict) -> None:
    """Each on a fresh connection: Kafka's error answers list no API."""
    with fresh_connections(pair) as (k, r):
        pair.compare(
            f"ApiVersions v{version}: {what}",
            api_versions(k, version, **fields),
            api_versions(r, version, **fields),
        )


def test_api_versions_v5_naming_the_broker(pair: Pair) -> None:
    """Naming the cluster and node a broker is, or neither: the usual answer (its API list is
    test_api_versions's), and another node of the same cluster: REBOOTSTRAP_REQUIRED."""
    for what, node, same in (
        ("its own cluster and node id", 1, True),
        ("its cluster and another node id", 2, False),
    ):
        answers = []
        for side in pair.sides:
            conn = side.fresh()
            try:
                answers.append(api_versions(conn, 5, cluster_id=cluster_id(side), node_id=node))
            finally:
                conn.sock.close()
        k, r = answers
        assert bool(k.api_keys) is same
        assert bool(r.api_keys) is same
        pair.compare(
            f"ApiVersions v5: {what}",
            {"error_code": k.error_code, "serves": bool(k.api_keys)},
            {"error_code": r.error_code, "serves": bool(r.api_keys)},
        )


def test_api_versions_at_a_version_the_broker_does_not_know(pair: Pair) -> None:
    """KIP-511: a version the broker does not know is answered in v0's layout,
    UNSUPPORTED_VERSION, with the versions of ApiVersions alone (Kafka's
    ApiVersionsRequest.getErrorResponse), from which the client picks one it shares."""
    client_id = b"compat"
    header = struct.pack(">hhih", API_VERSIONS, 99, 7, len(client_id)) + client_id + b"\x00"
    payload = header + b"\x00\x00\x00"  # a v3+ body: empty name and version, no tags
    answers = []
    for side in pair.sides:
        conn = side.fresh()
        try:
            conn.sock.sendall(struct.pack(">i", len(payload)) + payload)
            frame = conn.recv_frame()
        finally:
            conn.sock.close()
        assert struct.unpack_from(">i", frame)[0] == 7
        answers.append(entity_reader(ApiVersionsResponseV0)(frame, 4)[0])
    kafka, rafka = answers
    pair.compare("ApiVersions v99: a version the broker does not know", kafka, rafka)


# ---------------------------------------------------------------- UnregisterBroker


def test_unregister_unknown_broker(pair: Pair) -> None:
    pair.call(
        "UnregisterBroker v0: a broker id no broker has (BROKER_ID_NOT_REGISTERED)",
        UNREGISTER_BROKER,
        0,
        broker_id=99,
    )
