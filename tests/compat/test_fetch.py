"""Fetch and ListOffsets: the same batches appended to both brokers, read back at every version,
by offset, timestamp and epoch, and the errors a consumer can provoke."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from cluster.kafka_client import builder
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, Side
from tests.unit.log.batches import make_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 3, 23
TOPIC = "compat-fetch"
# The batches' timestamps: the same for both brokers, so both logs hold the same bytes, and
# recent, so neither broker's retention (7 days) deletes them during the session.
T0 = (time.time_ns() // 1_000_000 // 1000 - 3600) * 1000
# Three batches of 2, 3 and 1 records (offsets 0-1, 2-4, 5).
BATCHES = [
    make_batch([b"a0", b"a1"], timestamps=[T0, T0 + 10]),
    make_batch([b"b0", b"b1", b"b2"], timestamps=[T0 + 20, T0 + 40, T0 + 30]),
    make_batch([b"c0"], timestamps=[T0 + 50]),
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


def topic_id(side: Side, name: str = TOPIC) -> uuid.UUID:
    b = builder(METADATA, 12)
    r = side.conn().call(
        METADATA,
        12,
        topics=(b.MetadataRequestTopic(topic_id=None, name=name),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return r.topics[0].topic_id


def fetch(
    pair: Pair,
    case: str,
    version: int,
    offset: int = 0,
    partition: int = 0,
    name: str = TOPIC,
    epoch: int = -1,
    last_fetched_epoch: int = -1,
    max_bytes: int = 1 << 20,
    masked: tuple[str, ...] = (),
    unknown_id: bool = False,
    isolation_level: int = 0,
) -> tuple[Any, Any]:
    b = builder(FETCH, version)

    def one(side: Side) -> Any:
        tid = uuid.uuid4() if unknown_id else (topic_id(side) if version >= 13 else None)
        part = b.FetchPartition(
            partition=partition,
            current_leader_epoch=epoch,
            fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch,
            log_start_offset=-1,
            partition_max_bytes=max_bytes,
            replica_directory_id=None,
            high_watermark=None,
        )
        t = b.FetchTopic(topic=name, topic_id=tid, partitions=(part,))
        return side.conn().call(
            FETCH,
            version,
            cluster_id=None,
            replica_id=-1,
            replica_state=b.ReplicaState(replica_id=-1, replica_epoch=-1),
            max_wait=datetime.timedelta(milliseconds=0),
            min_bytes=0,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=(t,),
            forgotten_topics_data=(),
            rack_id="",
        )

    k, r = pair.both(one)
    return pair.compare(case, k, r, masked=["responses.*.topic_id", "session_id", *masked])


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15, 16])
def test_fetch_from_start(pair: Pair, version: int) -> None:
    fetch(pair, f"Fetch v{version}: three batches from offset 0", version)


def test_fetch_from_the_middle_of_a_batch(pair: Pair) -> None:
    fetch(pair, "Fetch v12: from offset 3, inside the second batch", 12, offset=3)


def test_fetch_at_the_end(pair: Pair) -> None:
    fetch(pair, "Fetch v12: at the log end offset", 12, offset=6)


def test_fetch_out_of_range(pair: Pair) -> None:
    fetch(pair, "Fetch v12: past the log end (OFFSET_OUT_OF_RANGE)", 12, offset=100)


def test_fetch_unknown_partition(pair: Pair) -> None:
    fetch(pair, "Fetch v12: unknown partition", 12, partition=9)


def test_fetch_unknown_topic(pair: Pair) -> None:
    fetch(pair, "Fetch v12: unknown topic", 12, name="compat-fetch-nope")


def test_fetch_unknown_topic_id(pair: Pair) -> None:
    fetch(pair, "Fetch v13: unknown topic id", 13, unknown_id=True)


def test_fetch_fenced_leader_epoch(pair: Pair) -> None:
    fetch(pair, "Fetch v12: current leader epoch ahead (UNKNOWN_LEADER_EPOCH)", 12, epoch=5)


def test_fetch_diverging_epoch(pair: Pair) -> None:
    fetch(
        pair,
        "Fetch v12: last fetched epoch 3 at offset 6 (diverging epoch)",
        12,
        offset=6,
        last_fetched_epoch=3,
    )


def test_fetch_last_epoch_that_agrees(pair: Pair) -> None:
    fetch(
        pair,
        "Fetch v12: last fetched epoch 0 at offset 6 (the log agrees)",
        12,
        offset=6,
        last_fetched_epoch=0,
    )
    fetch(
        pair,
        "Fetch v12: last fetched epoch 0 at offset 3 (the log agrees, records follow)",
        12,
        offset=3,
        last_fetched_epoch=0,
    )


def test_fetch_last_epoch_past_its_end(pair: Pair) -> None:
    """Epoch 0 ends at 6 here: a fetcher at 100 in epoch 0 diverged (KIP-320)."""
    fetch(
        pair,
        "Fetch v12: last fetched epoch 0 at offset 100 (diverged)",
        12,
        offset=100,
        last_fetched_epoch=0,
    )


@pytest.mark.parametrize("version", [4, 11])
def test_fetch_errors_before_flexible_versions(pair: Pair, version: int) -> None:
    fetch(pair, f"Fetch v{version}: past the log end", version, offset=100)
    fetch(pair, f"Fetch v{version}: unknown topic", version, name="compat-fetch-nope")


def test_fetch_negative_offset(pair: Pair) -> None:
    fetch(pair, "Fetch v12: offset -1", 12, offset=-1)


def test_fetch_read_committed(pair: Pair) -> None:
    fetch(pair, "Fetch v12: read_committed from offset 0", 12, isolation_level=1)
    fetch(pair, "Fetch v12: read_committed at the end", 12, offset=6, isolation_level=1)
    fetch(
        pair,
        "Fetch v12: read_committed, unknown partition",
        12,
        partition=9,
        isolation_level=1,
    )


def test_fetch_small_max_bytes(pair: Pair) -> None:
    """The first batch is returned whole even over max_bytes (KIP-74)."""
    fetch(pair, "Fetch v12: max_bytes smaller than the first batch", 12, max_bytes=10)


def list_offsets(
    pair: Pair,
    case: str,
    version: int,
    timestamp: int,
    partition: int = 0,
    epoch: int = -1,
    name: str = TOPIC,
) -> tuple[Any, Any]:
    b = builder(LIST_OFFSETS, version)
    t = b.ListOffsetsTopic(
        name=name,
        partitions=(
            b.ListOffsetsPartition(
                partition_index=partition,
                current_leader_epoch=epoch,
                timestamp=timestamp,
            ),
        ),
    )
    return pair.call(
        case,
        LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=(t,),
        timeout=datetime.timedelta(seconds=30),
    )


@pytest.mark.parametrize(
    ("what", "timestamp", "version"),
    [
        ("latest", -1, 1),
        ("earliest", -2, 1),
        ("latest", -1, 8),
        ("earliest", -2, 8),
        ("max timestamp", -3, 7),
        ("max timestamp", -3, 8),
        ("earliest local", -4, 8),
        ("the first timestamp", T0, 8),
        ("a timestamp inside the second batch", T0 + 35, 8),
        ("a timestamp past every record", T0 + 1000, 8),
        ("a timestamp before every record", T0 - 1000, 8),
    ],
)
def test_list_offsets(pair: Pair, what: str, timestamp: int, version: int) -> None:
    list_offsets(pair, f"ListOffsets v{version}: {what}", version, timestamp)


def test_list_offsets_unknown_partition(pair: Pair) -> None:
    list_offsets(pair, "ListOffsets v8: unknown partition", 8, -1, partition=9)


def test_list_offsets_fenced_epoch(pair: Pair) -> None:
    list_offsets(pair, "ListOffsets v8: current leader epoch ahead", 8, -1, epoch=7)


def test_list_offsets_unknown_topic(pair: Pair) -> None:
    list_offsets(pair, "ListOffsets v8: unknown topic", 8, -1, name="compat-fetch-nope")


def test_list_offsets_empty_partition(pair: Pair) -> None:
    """Partition 1 has no records."""
    for timestamp, what in ((-1, "latest"), (-2, "earliest"), (-3, "max timestamp"), (T0, "T0")):
        list_offsets(pair, f"ListOffsets v8: {what} of an empty partition", 8, timestamp, 1)


def test_offset_for_leader_epoch(pair: Pair) -> None:
    b = builder(OFFSET_FOR_LEADER_EPOCH, 4)
    for epoch, what in ((0, "the current epoch"), (3, "an epoch ahead"), (-1, "epoch -1")):
        t = b.OffsetForLeaderTopic(
            topic=TOPIC,
            partitions=(
                b.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=-1, leader_epoch=epoch
                ),
            ),
        )
        pair.call(
            f"OffsetForLeaderEpoch v4: {what}",
            OFFSET_FOR_LEADER_EPOCH,
            4,
            replica_id=-1,
            topics=(t,),
        )


@pytest.mark.parametrize(
    ("what", "name", "partition", "current"),
    [
        ("unknown partition", TOPIC, 9, -1),
        ("unknown topic", "compat-fetch-nope", 0, -1),
        ("current leader epoch ahead", TOPIC, 0, 4),
        ("an empty partition", TOPIC, 1, -1),
    ],
)
def test_offset_for_leader_epoch_errors(
    pair: Pair, what: str, name: str, partition: int, current: int
) -> None:
    b = builder(OFFSET_FOR_LEADER_EPOCH, 4)
    t = b.OffsetForLeaderTopic(
        topic=name,
        partitions=(
            b.OffsetForLeaderPartition(
                partition=partition, current_leader_epoch=current, leader_epoch=0
            ),
        ),
    )
    pair.call(
        f"OffsetForLeaderEpoch v4: {what}", OFFSET_FOR_LEADER_EPOCH, 4, replica_id=-1, topics=(t,)
    )


def test_list_offsets_partition_named_twice(pair: Pair) -> None:
    """Kafka's ReplicaManager.fetchOffset: a partition the request names twice (in one topic,
    or in two entries of the topic) is answered once, INVALID_REQUEST; the others as usual,
    in one entry per topic."""
    b = builder(LIST_OFFSETS, 8)

    def partition(index: int, timestamp: int) -> Any:
        return b.ListOffsetsPartition(
            partition_index=index, current_leader_epoch=-1, timestamp=timestamp
        )

    pair.call(
        "ListOffsets v8: a partition named twice",
        LIST_OFFSETS,
        8,
        sort=["topics.*.partitions"],
        replica_id=-1,
        isolation_level=0,
        topics=(
            b.ListOffsetsTopic(name=TOPIC, partitions=(partition(0, -1), partition(0, -2))),
            b.ListOffsetsTopic(name=TOPIC, partitions=(partition(1, -1),)),
            b.ListOffsetsTopic(name=TOPIC, partitions=(partition(1, -2),)),
        ),
        timeout=datetime.timedelta(seconds=30),
    )
    pair.call(
        "ListOffsets v8: one topic in two entries",
        LIST_OFFSETS,
        8,
        sort=["topics.*.partitions"],
        replica_id=-1,
        isolation_level=0,
        topics=(
            b.ListOffsetsTopic(name=TOPIC, partitions=(partition(0, -1),)),
            b.ListOffsetsTopic(name=TOPIC, partitions=(partition(1, -2),)),
        ),
        timeout=datetime.timedelta(seconds=30),
    )
