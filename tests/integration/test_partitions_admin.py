"""Partitions, records and the cluster's description on 3 brokers, with confluent-kafka's
AdminClient: CreatePartitions (counts, explicit assignments, validate_only, Kafka's errors)
picked up by a producer and by running consumer groups of both protocols; DeleteRecords moving
the log start on every replica (seen on the next leader after the leader dies), consumers
starting there, segments below it deleted; DescribeCluster; DescribeTopicPartitions' pages
(over the wire: the AdminClient describes topics with Metadata); `rafka topics alter` and
`rafka records delete`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient, builder

FAST: dict[str, Any] = {  # broker settings, for running_cluster(**FAST)
    "broker_session_timeout_ms": 2000,
    "broker_heartbeat_interval_ms": 300,
    "replica_lag_time_max_ms": 2000,
    "log_retention_check_interval_ms": 500,
}
SEGMENT = 1 << 20  # segment.bytes of the DeleteRecords topics: several segments, quickly
DESCRIBE_TOPIC_PARTITIONS, DELETE_RECORDS = 75, 21


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("partitions"), metas=1, **FAST) as c:
        yield c


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: LocalCluster) -> Iterator[None]:
    """Each test starts and ends with every broker running."""
    yield
    cluster.start()
    wait_for(lambda: len(admin(cluster).list_topics(timeout=5).brokers) == 3, what="3 live brokers")


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def create(
    cluster: LocalCluster,
    topic: str,
    partitions: int = 1,
    rf: int = 3,
    configs: dict[str, str] | None = None,
) -> str:
    a = admin(cluster)  # kept until the result: a destroyed client fails its futures
    a.create_topics([NewTopic(topic, partitions, rf, config=configs or {})])[topic].result(30)
    return topic


def partitions_of(cluster: LocalCluster, topic: str) -> dict[int, Any]:
    return dict(admin(cluster).list_topics(topic, timeout=10).topics[topic].partitions)


def error_of(future: Any) -> str:
    with pytest.raises(KafkaException) as e:
        future.result(30)
    return e.value.args[0].name()


def rafka(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args, "-b", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=90,
    )


# ---------------------------------------------------------------- CreatePartitions


def test_create_partitions_counts_assignments_and_errors(cluster: LocalCluster) -> None:
    a = admin(cluster)
    topic = create(cluster, "grow", partitions=2, rf=2)
    a.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    grown = partitions_of(cluster, topic)  # the answer came once they had leaders
    assert sorted(grown) == [0, 1, 2, 3]
    assert all(p.leader >= 0 and len(p.replicas) == 2 for p in grown.values())

    a.create_partitions([NewPartitions(topic, 6)], validate_only=True)[topic].result(30)
    assert len(partitions_of(cluster, topic)) == 4

    explicit = a.create_partitions([NewPartitions(topic, 6, [[3, 1], [2, 3]])])[topic]
    explicit.result(30)
    after = partitions_of(cluster, topic)
    assert (after[4].replicas, after[5].replicas) == ([3, 1], [2, 3])

    assert error_of(a.create_partitions([NewPartitions(topic, 5)])[topic]) == "INVALID_PARTITIONS"
    assert error_of(a.create_partitions([NewPartitions(topic, 6)])[topic]) == "INVALID_PARTITIONS"
    bad = a.create_partitions([NewPartitions(topic, 7, [[1, 9]])])[topic]
    assert error_of(bad) == "INVALID_REPLICA_ASSIGNMENT"
    wrong_count = a.create_partitions([NewPartitions(topic, 8, [[1, 2]])])[topic]
    assert error_of(wrong_count) == "INVALID_REPLICA_ASSIGNMENT"
    missing = a.create_partitions([NewPartitions("no-such-topic", 3)])["no-such-topic"]
    assert error_of(missing) == "UNKNOWN_TOPIC_OR_PART"  # librdkafka's name of the error
    assert len(partitions_of(cluster, topic)) == 6


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_new_partitions_reach_a_producer_and_a_running_group(
    cluster: LocalCluster, protocol: str
) -> None:
    topic = create(cluster, f"elastic-{protocol}", partitions=1, rf=2)
    refresh = {"topic.metadata.refresh.interval.ms": 1000}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"} | refresh)
    group = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        | refresh
    )
    try:
        group.subscribe([topic])

        def assigned() -> set[int]:
            group.poll(0.2)
            return {tp.partition for tp in group.assignment()}

        wait_for(lambda: assigned() == {0}, what="the group on partition 0")
        a = admin(cluster)
        a.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
        wait_for(lambda: assigned() == {0, 1, 2}, what="the group on the 3 partitions")

        delivered: list[int] = []

        def sent() -> bool:  # the default partitioner spreads keys over what it knows
            for i in range(30):
                producer.produce(
                    topic,
                    b"v",
                    key=b"k%d" % i,
                    on_delivery=lambda _e, m: delivered.append(present(m.partition())),
                )
            producer.flush(10)
            return set(delivered) == {0, 1, 2}

        wait_for(sent, what="the producer writing to the new partitions")
        seen: set[int] = set()

        def consumed() -> bool:
            for m in group.consume(100, 0.5):
                if m.error() is None:
                    seen.add(present(m.partition()))
            return seen == {0, 1, 2}

        wait_for(consumed, what="the group reading the new partitions")
    finally:
        group.close()


# ---------------------------------------------------------------- DeleteRecords


def produce(cluster: LocalCluster, topic: str, count: int, size: int = 100) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        p.produce(topic, b"%06d" % i + b"x" * (size - 6), partition=0)
    assert p.flush(30) == 0


def earliest(cluster: LocalCluster, topic: str) -> int:
    tp, a = TopicPartition(topic, 0), admin(cluster)
    return a.list_offsets({tp: OffsetSpec.earliest()})[tp].result(30).offset


def segment_bases(cluster: LocalCluster, node: int, topic: str) -> list[int]:
    directory = Path(cluster.data_dir / f"broker-{node}" / f"{topic}-0")
    return sorted(int(f.stem) for f in directory.glob("*.log"))


def first_value(cluster: LocalCluster, topic: str) -> tuple[int, bytes]:
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                return present(m.offset()), present(m.value())[:6]
        raise AssertionError(f"nothing consumed from {topic}")
    finally:
        c.close()


def test_delete_records_moves_the_log_start_on_every_replica(cluster: LocalCluster) -> None:
    a = admin(cluster)
    topic = create(cluster, "trim", configs={"segment.bytes": str(SEGMENT)})
    produce(cluster, topic, 80, size=50_000)  # about 4 segments
    replicas = partitions_of(cluster, topic)[0].replicas
    assert all(len(segment_bases(cluster, n, topic)) >= 3 for n in replicas)
    tp = TopicPartition(topic, 0, 60)
    deleted = a.delete_records([tp])[tp].result(30)
    assert deleted.low_watermark == 60  # every replica's log start reached it
    assert earliest(cluster, topic) == 60
    assert first_value(cluster, topic) == (60, b"000060")

    # Below the log start: a consumer asking for offset 10 is out of range and resets.
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "below",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, 0, 10)])
    m = wait_for(lambda: next((m for m in c.consume(1, 0.5) if m.error() is None), None))
    c.close()
    assert m.offset() == 60

    # Whole segments below 60 go at the next retention check, on every replica.
    wait_for(
        lambda: all(
            len([b for b in segment_bases(cluster, n, topic) if b <= 60]) == 1 for n in replicas
        ),
        what="the segments below the log start deleted on every replica",
    )

    # The followers have the log start too: the next leader answers 60.
    leader = partitions_of(cluster, topic)[0].leader
    cluster.kill(f"broker-{leader}")
    wait_for(
        lambda: partitions_of(cluster, topic)[0].leader not in (-1, leader), what="a new leader"
    )
    assert earliest(cluster, topic) == 60
    assert first_value(cluster, topic) == (60, b"000060")


def test_delete_records_offsets_and_errors(cluster: LocalCluster) -> None:
    a = admin(cluster)
    topic = create(cluster, "trim-errors")
    produce(cluster, topic, 10)

    beyond = TopicPartition(topic, 0, 11)
    assert error_of(a.delete_records([beyond])[beyond]) == "OFFSET_OUT_OF_RANGE"
    everything = TopicPartition(topic, 0, -1)  # OFFSET_END: up to the high watermark
    assert a.delete_records([everything])[everything].result(30).low_watermark == 10
    assert earliest(cluster, topic) == 10
    # librdkafka refuses partitions it does not know itself; a broker answers them so:
    b = builder(DELETE_RECORDS, 0)
    with WireClient(cluster.nodes["broker-1"].port) as w:
        r = w.call(
            DELETE_RECORDS,
            0,
            timeout=5000,
            topics=tuple(
                b.DeleteRecordsTopic(
                    name=name, partitions=(b.DeleteRecordsPartition(partition_index=5, offset=1),)
                )
                for name in (topic, "no-such-topic")
            ),
        )
    assert [
        (t.name, t.partitions[0].error_code, t.partitions[0].low_watermark) for t in r.topics
    ] == [
        (topic, ErrorCode.unknown_topic_or_partition, -1),
        ("no-such-topic", ErrorCode.unknown_topic_or_partition, -1),
    ]

    compacted = create(cluster, "trim-compacted", configs={"cleanup.policy": "compact"})
    produce(cluster, compacted, 3)
    kept = TopicPartition(compacted, 0, 2)
    assert error_of(a.delete_records([kept])[kept]) == "POLICY_VIOLATION"


# ---------------------------------------------------------------- DescribeCluster and API 75


def test_describe_cluster(cluster: LocalCluster) -> None:
    a = admin(cluster)
    d = a.describe_cluster(include_authorized_operations=True).result(30)
    assert d.cluster_id
    addresses = sorted(f"{n.host}:{n.port}" for n in d.nodes)
    assert addresses == sorted(cluster.bootstrap.split(","))
    assert sorted(n.id for n in d.nodes) == [1, 2, 3]
    assert d.controller.id in {n.id for n in d.nodes}
    ops = {op.name for op in d.authorized_operations}
    assert {"DESCRIBE", "ALTER", "CREATE"} <= ops  # no authorizer: every cluster operation


def describe_topic_partitions(
    cluster: LocalCluster, names: list[str], limit: int, cursor: tuple[str, int] | None
) -> Any:
    b = builder(DESCRIBE_TOPIC_PARTITIONS, 0)
    with WireClient(cluster.nodes["broker-1"].port) as w:
        return w.call(
            DESCRIBE_TOPIC_PARTITIONS,
            0,
            topics=tuple(b.TopicRequest(name=n) for n in names),
            response_partition_limit=limit,
            cursor=None
            if cursor is None
            else b.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
        )


def test_describe_topic_partitions_pages(cluster: LocalCluster) -> None:
    create(cluster, "pages-a", partitions=3, rf=2)
    create(cluster, "pages-b", partitions=2, rf=3)
    names = ["pages-b", "pages-a", "pages-none"]
    seen: list[tuple[str, int, int, list[int]]] = []
    errors: dict[str, ErrorCode] = {}
    cursor = None
    for _ in range(10):
        r = describe_topic_partitions(cluster, names, 2, cursor)
        for t in r.topics:
            errors[t.name] = t.error_code
            seen += [
                (t.name, p.partition_index, p.leader_id, list(p.replica_nodes))
                for p in t.partitions
            ]
        if r.next_cursor is None:
            break
        cursor = (r.next_cursor.topic_name, r.next_cursor.partition_index)
    assert [(n, i) for n, i, _, _ in seen] == [
        ("pages-a", 0),
        ("pages-a", 1),
        ("pages-a", 2),
        ("pages-b", 0),
        ("pages-b", 1),
    ]
    assert errors["pages-none"] == ErrorCode.unknown_topic_or_partition
    metadata = {
        (name, i): (p.leader, p.replicas)
        for name in ("pages-a", "pages-b")
        for i, p in partitions_of(cluster, name).items()
    }
    assert {(n, i): (leader, replicas) for n, i, leader, replicas in seen} == metadata
    a = admin(cluster)
    described = a.describe_topics(TopicCollection(["pages-a"]))["pages-a"].result(30)
    assert [(p.id, p.leader.id) for p in described.partitions] == [
        (i, metadata[("pages-a", i)][0]) for i in range(3)
    ]


# ---------------------------------------------------------------- the command line


def test_cli_topics_alter_and_records_delete(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = create(cluster, "cli-grow", partitions=1, rf=2)
    r = rafka(cluster, "topics", "alter", topic, "--partitions", "3")
    assert r.returncode == 0, r.stderr
    assert sorted(partitions_of(cluster, topic)) == [0, 1, 2]
    r = rafka(
        cluster,
        "topics",
        "alter",
        topic,
        "--partitions",
        "4",
        "--replica-assignment",
        "1:2,2:3,3:1,3:2",
    )
    assert r.returncode == 0, r.stderr
    assert partitions_of(cluster, topic)[3].replicas == [3, 2]
    shrink = rafka(cluster, "topics", "alter", topic, "--partitions", "2")
    assert shrink.returncode == 1
    assert "INVALID_PARTITIONS" in shrink.stderr

    trim = create(cluster, "cli-trim", partitions=2)
    produce(cluster, trim, 20)
    r = rafka(cluster, "records", "delete", "--topic", trim, "--partition", "0", "--offset", "5")
    assert r.returncode == 0, r.stderr
    assert "cli-trim-0: low watermark 5" in r.stdout
    assert earliest(cluster, trim) == 5
    spec = tmp_path / "offsets.json"
    spec.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": trim, "partition": 0, "offset": -1},
                    {"topic": trim, "partition": 1, "offset": 3},
                ],
                "version": 1,
            }
        )
    )
    r = rafka(cluster, "records", "delete", "--offset-json-file", str(spec))
    assert r.returncode == 1  # partition 1 is empty: 3 is beyond its high watermark
    assert "cli-trim-0: low watermark 20" in r.stdout
    assert "OFFSET_OUT_OF_RANGE" in r.stderr
