"""What a client cannot make a broker do: Kafka's bounds on one topic-creating request; a broker
out of file descriptors fails what needs one (its log directory stays online, it keeps running)
and hosts the replicas it could not open once descriptors are free. One meta node and one
broker, driven with confluent-kafka."""

from __future__ import annotations

import os
import resource
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from cluster.local import LocalCluster
from tests.integration.conftest import running_cluster, wait_for

POLICY_VIOLATION = KafkaError.POLICY_VIOLATION


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("limits"), brokers=1, metas=1) as c:
        yield c


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def broker_log(cluster: LocalCluster) -> str:
    return cluster.nodes["broker-1"].log_file.read_text(errors="replace")


def produce(cluster: LocalCluster, topic: str, partitions: int = 1) -> None:
    """A record to each partition, every one acknowledged."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    failed: list[str] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failed.append(error.str())

    for partition in range(partitions):
        producer.produce(topic, b"v", partition=partition, on_delivery=delivered)
    assert producer.flush(60) == 0 and not failed


def produce_one(cluster: LocalCluster, topic: str) -> None:
    """The broker still serves: a topic is created and a record acknowledged."""
    a = admin(cluster)  # kept until the result: a destroyed client fails its futures
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(cluster, topic)


def test_a_huge_create_topics_is_refused_and_the_broker_keeps_serving(
    cluster: LocalCluster,
) -> None:
    # librdkafka lets one NewTopic ask for 100,000 partitions; Kafka's controller refuses a
    # request over 10,000 partitions in all, and one over 10,000 metadata records.
    a = admin(cluster)
    for topic, partitions, message in (
        (unique("huge"), 100_000, "Excessively large number of partitions per request."),
        (unique("edge"), 10_000, "Unable to perform excessively large batch operation."),
    ):
        with pytest.raises(KafkaException) as refused:
            a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
        error = refused.value.args[0]
        assert error.code() == POLICY_VIOLATION and error.str() == message
        assert topic not in a.list_topics(timeout=10).topics
    assert cluster.nodes["broker-1"].proc.poll() is None  # type: ignore[union-attr]
    produce_one(cluster, unique("after"))


def test_create_partitions_counts_its_records_over_the_whole_request(
    cluster: LocalCluster,
) -> None:
    a = admin(cluster)
    first, second = unique("grow"), unique("grow")
    for topic in (first, second):
        a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    results = a.create_partitions(
        [NewPartitions(first, 6_001), NewPartitions(second, 6_001)], validate_only=True
    )
    results[first].result(30)  # 6,000 records: within the bound
    with pytest.raises(KafkaException) as refused:
        results[second].result(30)  # 12,000 in the request: over it
    error = refused.value.args[0]
    assert error.code() == POLICY_VIOLATION and "excessively large batch" in error.str()
    assert "refused" in broker_log(cluster)


def test_a_broker_out_of_descriptors_keeps_serving_and_hosts_the_rest_later(
    cluster: LocalCluster,
) -> None:
    proc = cluster.nodes["broker-1"].proc
    assert proc is not None
    assert "broker runs with an open-files limit of" in broker_log(cluster)
    soft, hard = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)
    assert soft == hard  # raised to the hard limit at start
    topic, after = unique("many"), unique("after")
    a = admin(cluster)

    def leaders() -> list[int]:
        return [
            p.leader for p in a.list_topics(topic, timeout=10).topics[topic].partitions.values()
        ]

    in_use = len(os.listdir(f"/proc/{proc.pid}/fd"))
    resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (in_use + 100, hard))
    try:
        # 300 partitions on a broker with about 100 descriptors to spare: the topic exists,
        # the replicas the broker could not open are offline, the broker runs on.
        a.create_topics([NewTopic(topic, 300, 1)])[topic].result(60)
        wait_for(lambda: -1 in leaders(), what="replicas reported offline")
        assert "ulimit -n" in broker_log(cluster) and proc.poll() is None
    finally:
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (soft, hard))
    assert "its partitions are offline on this broker" not in broker_log(cluster)  # no dir failed
    # Descriptors free again: every replica is hosted and leads; the broker serves them all.
    wait_for(lambda: leaders() == [1] * 300, timeout=60, what="every partition led again")
    produce(cluster, topic, 300)
    produce_one(cluster, after)
