"""Log compaction on a real cluster: a compacted topic written by confluent-kafka keeps the latest
value of each key at its offset and its segment files shrink on every replica; a consumer
group's committed offsets survive the compaction of __consumer_offsets and the loss of its
coordinator."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.clients.group_member import committed
from tests.integration.conftest import running_cluster, wait_for

SETTINGS: dict[str, Any] = {  # broker settings, for running_cluster(**SETTINGS)
    "log_cleaner_backoff_ms": 200,
    "offsets_topic_num_partitions": 1,
    "offsets_topic_segment_bytes": 2048,
    "broker_session_timeout_ms": 2000,
    "broker_heartbeat_interval_ms": 300,
    "leader_imbalance_check_interval_seconds": 1,
}
KEYS = 5
UPDATES = 400  # per key
COMMITS = 600

Record = tuple[int, bytes | None, bytes | None]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("compaction"), **SETTINGS) as c:
        yield c


def _admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def _create(cluster: LocalCluster, topic: str, partitions: int, **configs: str) -> None:
    admin = _admin(cluster)  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, 3, config=configs)])[topic].result(30)


def _leader(cluster: LocalCluster, topic: str) -> int:
    return _admin(cluster).list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def _partition_dir(cluster: LocalCluster, broker: int, topic: str) -> Path:
    return cluster.data_dir / f"broker-{broker}" / f"{topic}-0"


def _segments(cluster: LocalCluster, broker: int, topic: str) -> dict[int, int]:
    """Base offset -> size of each segment of the broker's replica (a segment the cleaner or
    retention removes while it is listed is left out)."""
    sizes = {}
    for p in _partition_dir(cluster, broker, topic).glob("*.log"):
        if p.stem.isdigit():
            with contextlib.suppress(FileNotFoundError):
                sizes[int(p.stem)] = p.stat().st_size
    return sizes


def _read_from_earliest(cluster: LocalCluster, topic: str) -> list[Record]:
    """Every record up to the high watermark, as a consumer from offset 0 sees it."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader"})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[Record] = []

        def read_to_end() -> bool:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out.append((present(m.offset()), m.key(), m.value()))
            return consumer.position([TopicPartition(topic, 0)])[0].offset >= end

        wait_for(read_to_end, 60, f"{topic} read to offset {end}")
        return out
    finally:
        consumer.close()


def test_compacted_topic_keeps_the_latest_value_of_each_key(cluster: LocalCluster) -> None:
    topic = "compacted"
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",  # clean whatever is dirty: a deterministic end state
    }
    _create(cluster, topic, 1, **configs)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
            "batch.num.messages": 10,  # many batches: segments roll, some get rewritten
        }
    )
    produced: dict[int, tuple[bytes, bytes | None]] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        produced[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]

    for i in range(KEYS * UPDATES):
        producer.produce(topic, os.urandom(100), f"key-{i % KEYS}".encode(), on_delivery=delivered)
        producer.poll(0)
    producer.produce(topic, b"soon deleted", b"gone", on_delivery=delivered)
    producer.produce(topic, None, b"gone", on_delivery=delivered)  # a tombstone
    assert producer.flush(30) == 0
    written = sum(len(k) + len(v or b"") for k, v in produced.values())
    leader = _leader(cluster, topic)

    def clean_below_the_active_segment() -> list[Record] | None:
        active = max(_segments(cluster, leader, topic))
        records = _read_from_earliest(cluster, topic)
        keys = [key for offset, key, _ in records if offset < active]
        return records if active > 0 and len(keys) == len(set(keys)) else None

    records = wait_for(clean_below_the_active_segment, 90, "the compaction of the leader's log")
    for offset, key, value in records:
        assert produced[offset] == (key, value), f"offset {offset} changed"
    latest = {key: value for _, (key, value) in sorted(produced.items())}
    assert {key: value for _, key, value in records} == latest
    assert latest[b"gone"] is None
    assert len(records) < len(produced) / 4
    for broker in (1, 2, 3):  # each replica compacts its own log

        def shrunk(b: int = broker) -> bool:
            return sum(_segments(cluster, b, topic).values()) < written / 4

        wait_for(
            shrunk,
            60,
            f"broker {broker}'s replica to shrink below {written // 4} bytes",
        )
    log_text = cluster.nodes[f"broker-{leader}"].log_file.read_text()
    assert f"{topic}-0: cleaned" in log_text


def test_committed_offsets_survive_compaction_and_coordinator_loss(
    cluster: LocalCluster,
) -> None:
    topic, group = "commits", "compaction-group"
    _create(cluster, topic, 2)
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    for i in range(1, COMMITS + 1):
        consumer.commit(
            offsets=[TopicPartition(topic, p, 10 * i + p) for p in (0, 1)], asynchronous=False
        )
    consumer.close()
    want = {0: 10 * COMMITS, 1: 10 * COMMITS + 1}
    assert committed(cluster.bootstrap, topic, group) == want
    offsets_topic = "__consumer_offsets"
    coordinator = _leader(cluster, offsets_topic)
    end = max(_segments(cluster, coordinator, offsets_topic))
    for broker in (1, 2, 3):

        def compacted(b: int = broker) -> bool:
            return (
                len(_segments(cluster, b, offsets_topic)) > 1
                and sum(_segments(cluster, b, offsets_topic).values()) < 20 * 2048
            )

        wait_for(
            compacted,
            60,
            f"broker {broker}'s replica of {offsets_topic} to be compacted",
        )
    assert end > COMMITS  # every commit was appended: the log really was long

    def offsets_intact() -> bool:
        try:
            return committed(cluster.bootstrap, topic, group) == want
        except KafkaException:
            return False  # coordinator moving or loading

    cluster.kill(f"broker-{coordinator}")
    wait_for(lambda: _leader(cluster, offsets_topic) not in (-1, coordinator), 30, "a new leader")
    wait_for(offsets_intact, 60, "the offsets from the new coordinator")
    cluster.start_node(f"broker-{coordinator}")
    cluster.wait_ready(names=[f"broker-{coordinator}"])
    wait_for(lambda: _leader(cluster, offsets_topic) == coordinator, 60, "the preferred leader")
    wait_for(offsets_intact, 60, "the offsets from the restarted coordinator")
