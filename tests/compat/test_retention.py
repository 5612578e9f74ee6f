"""Retention (retention.ms) against Apache Kafka 4.4: records older than a topic's retention.ms
go at the next retention check, the active segment's too (Kafka's UnifiedLog rolls it first),
and an open transaction does not hold them back (only the high watermark bounds retention).

A pair of its own, whose brokers check retention every second (log.retention.check.interval.ms,
and Kafka's first check a second after start: log.initial.task.delay.ms); the session's pair
checks every 5 minutes, and its other modules' old test timestamps would be deleted under them.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from cluster.kafka_client import builder
from cluster.polling import wait_for
from tests.compat.conftest import SAME_SETTINGS, create_topics
from tests.compat.pair import Pair, Side
from tests.integration.conftest import running_cluster
from tests.peers.apache_kafka import ApacheKafka
from tests.unit.log.batches import make_batch

PRODUCE, LIST_OFFSETS = 0, 2
EXPIRED = "compat-retention-expired"
OPEN_TXN = "compat-retention-open-txn"
T0 = 1_700_000_000_000  # far older than the topics' retention.ms
RETENTION = {"retention.ms": "60000", "segment.ms": "60000"}
CHECK_EVERY_S: dict[str, Any] = {"log.retention.check.interval.ms": "1000"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    kafka = ApacheKafka(
        tmp_path_factory.mktemp("retention-kafka"),
        overrides=SAME_SETTINGS | CHECK_EVERY_S | {"log.initial.task.delay.ms": "1000"},
    )
    kafka.start()
    try:
        with running_cluster(
            tmp_path_factory.mktemp("retention-rafka"),
            brokers=1,
            metas=1,
            **SAME_SETTINGS,
            **CHECK_EVERY_S,
        ) as rafka:
            p = Pair(kafka.bootstrap, rafka.bootstrap)
            create_topics(p, NewTopic(EXPIRED, 1, 1, config=RETENTION))
            create_topics(p, NewTopic(OPEN_TXN, 1, 1, config=RETENTION))
            yield p
            p.close()
    finally:
        kafka.stop()


def list_offsets(side: Side, topic: str, timestamp: int) -> Any:
    """ListOffsets v8 of the topic's partition 0 (-2: earliest, -1: latest)."""
    b = builder(LIST_OFFSETS, 8)
    partition = b.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
    )
    return side.conn().call(
        LIST_OFFSETS,
        8,
        replica_id=-1,
        isolation_level=0,
        topics=(b.ListOffsetsTopic(name=topic, partitions=(partition,)),),
        timeout=datetime.timedelta(seconds=30),
    )


def after_retention(pair: Pair, case: str, topic: str) -> None:
    """ListOffsets earliest and latest on both, once the retention of the expired records ran
    on Kafka (it must) and Rafka (if it does: else the answers tell the difference)."""

    def offsets(side: Side) -> dict[str, Any]:
        return {
            what: list_offsets(side, topic, timestamp)
            for what, timestamp in (("earliest", -2), ("latest", -1))
        }

    def deleted(side: Side) -> bool:
        return bool(offsets(side)["earliest"].topics[0].partitions[0].offset > 0)

    wait_for(lambda: deleted(pair.kafka), 60, "Kafka's retention of the expired records")
    with contextlib.suppress(AssertionError):  # compared below: a difference is the finding
        wait_for(lambda: deleted(pair.rafka), 20, "Rafka's retention of the expired records")
    pair.compare(case, offsets(pair.kafka), offsets(pair.rafka))


def produce(pair: Pair, case: str, topic: str, timestamp: int) -> None:
    batch = make_batch([b"v-1", b"v-2"], timestamps=[timestamp, timestamp + 1])
    b = builder(PRODUCE, 11)
    data = b.TopicProduceData(
        name=topic, partition_data=(b.PartitionProduceData(index=0, records=batch),)
    )
    pair.call(
        case,
        PRODUCE,
        11,
        masked=[
            "responses.*.partition_responses.*.log_append_time",
            # whether retention ran already (every second) on the records before
            "responses.*.partition_responses.*.log_start_offset",
        ],
        transactional_id=None,
        acks=-1,
        timeout=10000,
        topic_data=(data,),
    )


def test_an_expired_active_segment_is_deleted(pair: Pair) -> None:
    """Both records are in the one segment, the active one: Kafka rolls it and deletes it."""
    produce(pair, "Produce: records older than retention.ms", EXPIRED, T0)
    after_retention(pair, "Retention: an expired active segment, ListOffsets after", EXPIRED)


def test_an_open_transaction_does_not_hold_retention_back(pair: Pair) -> None:
    """The open transaction's records, expired, are in the first segment; the records after
    them, new, roll a segment of their own (segment.ms is far shorter than the time between
    their timestamps). Kafka deletes the first segment: only the high watermark bounds
    retention."""
    producers = []
    for side in pair.sides:
        producer = Producer(
            {"bootstrap.servers": side.bootstrap, "transactional.id": f"retention-{side.name}"}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        for value in (b"open-1", b"open-2"):
            producer.produce(OPEN_TXN, value, partition=0, timestamp=T0)
        assert producer.flush(30) == 0
        producers.append(producer)
    now = int(time.time() * 1000)
    produce(pair, "Produce: new records after an open transaction's expired ones", OPEN_TXN, now)
    after_retention(
        pair, "Retention: the expired records of an open transaction, ListOffsets after", OPEN_TXN
    )
    for producer in producers:
        producer.abort_transaction(30)
