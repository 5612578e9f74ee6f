"""What a client cannot make a broker do: Kafka's bounds on one topic-creating request. One meta
node and one broker, driven with confluent-kafka."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from cluster.local import LocalCluster
from tests.integration.conftest import running_cluster

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


def produce_one(cluster: LocalCluster, topic: str) -> None:
    """The broker still serves: a topic is created and a record acknowledged."""
    a = admin(cluster)  # kept until the result: a destroyed client fails its futures
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0 and errors == [None]


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
