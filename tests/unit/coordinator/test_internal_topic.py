"""When an internal topic is created, and with how many replicas (issue 25): as in Kafka, with
its configured replication factor (`offsets.topic.replication.factor`,
`transaction.state.log.replication.factor`, `share.coordinator.state.topic.replication.factor`)
once that many brokers are alive, never with fewer; until then its coordinators are
COORDINATOR_NOT_AVAILABLE and a log line says why and what to do. A topic of the name that
lacks the key's partition (a client created it) is COORDINATOR_NOT_AVAILABLE too, not a crash."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from dataplane.coordinator.runtime import InternalTopic
from dataplane.metadata_cache import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.topic_admin import NewTopic
from proto import meta_pb2

SETTINGS = {
    "__consumer_offsets": "offsets.topic.replication.factor",
    "__transaction_state": "transaction.state.log.replication.factor",
    "__share_group_state": "share.coordinator.state.topic.replication.factor",
}


class Cluster:
    """A metadata cache with `live` unfenced brokers (and one fenced), and the meta service's
    topic creation: it answers `answer` and, when that is no error, the topic appears."""

    def __init__(self, live: int, answer: ErrorCode = ErrorCode.none) -> None:
        self.cache = MetadataCache()
        for i in range(1, live + 2):
            self.cache.brokers[i] = BrokerInfo(i, "h", 9092, None, i > live, 1, "")
        self.answer = answer
        self.created: list[NewTopic] = []

    async def create_topics(self, topics: Sequence[NewTopic]) -> list[Any]:
        (topic,) = topics
        self.created.append(topic)
        if self.answer == ErrorCode.none:
            self.add(topic.name, topic.num_partitions)
        return [meta_pb2.CreateTopicResult(error_code=self.answer, error_message="refused")]

    def add(self, name: str, partitions: int) -> None:
        parts = tuple(PartitionInfo(i, (1,), (1,), 1, 1, 1) for i in range(partitions))
        self.cache.topics[name] = TopicInfo(name, b"\x01" * 16, parts, {}, True)

    def topic(self, name: str, replication_factor: int, min_isr: int = 2) -> InternalTopic:
        configs = {"cleanup.policy": "compact", "min.insync.replicas": str(min_isr)}
        return InternalTopic(
            self.cache,
            self.create_topics,
            name,
            50,
            replication_factor,
            configs,
        )


def _find(topic: InternalTopic, key: str = "g") -> int | KafkaError:
    async def main() -> int | KafkaError:
        try:
            return await topic.coordinator(key)
        except KafkaError as e:
            return e

    return anyio.run(main)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_not_created_with_fewer_live_brokers_than_its_replication_factor(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = Cluster(live=1)
    topic = cluster.topic(name, 3)
    with caplog.at_level(logging.WARNING):
        first, again = _find(topic), _find(topic)

    for answer in (first, again):
        assert isinstance(answer, KafkaError)
        assert answer.code == ErrorCode.coordinator_not_available
        assert SETTINGS[name] in (answer.message or "")
    assert cluster.created == []  # never created with fewer replicas than configured
    # why and what to do, once for a client's retries (not at each of them)
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert name in line
    assert f"{SETTINGS[name]}=3 needs 3 live brokers, 1 are up" in line
    assert "start more brokers" in line
    assert f"lower {SETTINGS[name]}" in line


def test_created_with_its_replication_factor_once_enough_brokers_are_up() -> None:
    cluster = Cluster(live=1)
    topic = cluster.topic("__consumer_offsets", 3)
    assert isinstance(_find(topic), KafkaError)
    for i in (2, 3):  # two more brokers join
        cluster.cache.brokers[i] = BrokerInfo(i, "h", 9092, None, False, 1, "")

    assert _find(topic) == 1
    (created,) = cluster.created
    assert created.replication_factor == 3
    assert created.internal
    assert created.configs["min.insync.replicas"] == "2"


def test_a_lowered_replication_factor_serves_a_single_broker() -> None:
    """offsets.topic.replication.factor=1 (what `rafka up --brokers 1` sets): one broker is
    enough, and a min ISR above the replication factor is lowered to it (it could never be
    met)."""
    cluster = Cluster(live=1)
    assert _find(cluster.topic("__transaction_state", 1, min_isr=2)) == 1
    (created,) = cluster.created
    assert created.replication_factor == 1
    assert created.configs["min.insync.replicas"] == "1"


def test_refused_by_the_meta_service_is_coordinator_not_available() -> None:
    """The meta service counts brokers too (one may have just died): its refusal is the
    client's COORDINATOR_NOT_AVAILABLE, retried."""
    cluster = Cluster(live=3, answer=ErrorCode.invalid_replication_factor)
    answer = _find(cluster.topic("__consumer_offsets", 3))
    assert isinstance(answer, KafkaError)
    assert answer.code == ErrorCode.coordinator_not_available


def test_a_topic_without_the_keys_partition_is_coordinator_not_available(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`__consumer_offsets` created by a client with 1 partition while the broker places
    groups on 50: Kafka answers COORDINATOR_NOT_AVAILABLE (today: IndexError, the
    connection closed)."""
    cluster = Cluster(live=1)
    cluster.add("__consumer_offsets", 1)
    key = next(k for k in (f"g{i}" for i in range(100)) if cluster.topic("x", 1).partition_for(k))
    with caplog.at_level(logging.WARNING):
        answer = _find(cluster.topic("__consumer_offsets", 1), key)
    assert isinstance(answer, KafkaError)
    assert answer.code == ErrorCode.coordinator_not_available
    assert any("offsets.topic.num.partitions" in r.getMessage() for r in caplog.records)
