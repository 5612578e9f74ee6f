"""Record validation on a real broker, as Kafka answers it: librdkafka's test 0011 (keyless
records to a compacted topic fail one by one with KIP-467 record errors), out-of-range
timestamps (KIP-937), a batch whose record count disagrees with its records (and the log line
of the cleaner that meets one in a topic compacted later), and a 1 MB zstd batch that would
inflate to 32 GiB, refused to a compacted topic and in a timestamp lookup without the broker's
memory growing by more than the inflation bound."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from dataplane.log.batch import Compression, encode_batch
from dataplane.log.compression import compress
from dataplane.log.records import bytes_field, encode_record, zigzag_varint
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient, builder

PRODUCE, LIST_OFFSETS = 0, 2
HOUR = 3_600_000
COMPACTED, PLAIN, STRICT = "compacted", "plain", "strict"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("records"), brokers=1, metas=1, log_cleaner_backoff_ms="200"
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topics = [
            NewTopic(COMPACTED, 1, 1, config={"cleanup.policy": "compact"}),
            NewTopic(PLAIN, 1, 1),
            NewTopic(STRICT, 1, 1, config={"message.timestamp.before.max.ms": "60000"}),
        ]
        for future in admin.create_topics(topics).values():
            future.result(30)
        yield cluster


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- attacks, reusable by a whole-cluster hostile test ------------------------------------------


def raw_batch(
    payload: bytes, count: int, timestamp: int, codec: Compression = Compression.NONE
) -> bytes:
    """A v2 batch around ``payload`` (its records, compressed as ``codec``) that declares
    ``count`` records, all stamped ``timestamp`` in its header; the CRC is right."""
    return encode_batch(
        payload,
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=codec,
        last_offset_delta=count - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=count,
    )


def keyed_records(n: int) -> bytes:
    return b"".join(
        encode_record(i, 0, bytes_field(b"k%d" % i) + bytes_field(b"v") + zigzag_varint(0))
        for i in range(n)
    )


def zstd_bomb(blocks: int = 262_000) -> bytes:
    """A zstd frame of RLE blocks, 4 bytes each inflating to 128 KiB of zeros, with no content
    size: the default ~1 MB inflates to 32 GiB."""
    frame = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")
    rle_block = (128 << 10) << 3 | 1 << 1
    for i in range(blocks):
        frame += (rle_block | (i == blocks - 1)).to_bytes(3, "little") + b"\x00"
    return bytes(frame)


def produce_raw(port: int, topic: str, batch: bytes, version: int = 9) -> Any:
    """One Produce of ``batch`` to partition 0 of ``topic``: that partition's answer."""
    b = builder(PRODUCE, version)
    data = b.TopicProduceData(
        name=topic, partition_data=(b.PartitionProduceData(index=0, records=batch),)
    )
    with WireClient(port, timeout=60) as w:
        r = w.call(PRODUCE, version, acks=-1, timeout=30_000, topic_data=(data,))
    (answer,) = r.responses[0].partition_responses
    return answer


def list_offsets_by_time(port: int, topic: str, timestamp: int) -> Any:
    b = builder(LIST_OFFSETS, 8)
    partition = b.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
    )
    with WireClient(port, timeout=60) as w:
        r = w.call(
            LIST_OFFSETS,
            8,
            replica_id=-1,
            isolation_level=0,
            topics=(b.ListOffsetsTopic(name=topic, partitions=(partition,)),),
        )
    return r.topics[0].partitions[0]


# -- tests -----------------------------------------------------------------------------------


def _port(cluster: LocalCluster) -> int:
    return cluster.nodes["broker-1"].port


def _peak_rss_mb(cluster: LocalCluster) -> int:
    """The broker process's resident-memory high-water mark (VmHWM), in MiB."""
    proc = cluster.nodes["broker-1"].proc
    assert proc is not None
    status = Path(f"/proc/{proc.pid}/status").read_text()
    (line,) = [s for s in status.splitlines() if s.startswith("VmHWM:")]
    return int(line.split()[1]) >> 10


def _deliver(cluster: LocalCluster, messages: list[dict[str, Any]]) -> list[Any]:
    """Produce ``messages`` (confluent-kafka produce() keywords) as one batch: the delivery
    report of each, in order."""
    reports: list[Any] = [None] * len(messages)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "linger.ms": 200, "batch.num.messages": 1000}
    )
    for i, message in enumerate(messages):

        def report(err: KafkaError | None, _m: Message, i: int = i) -> None:
            reports[i] = err

        producer.produce(**message, partition=0, on_delivery=report)
    assert producer.flush(30) == 0
    return reports


def test_librdkafka_0011_keyless_records_fail_one_by_one(broker: LocalCluster) -> None:
    """100 records in one batch, every 10th without a key, to a compacted topic: the 10 fail with
    INVALID_RECORD and Kafka's reason, the other 90 with librdkafka's "a different record
    failed" (_INVALID_DIFFERENT_RECORD), as against Kafka; none is written."""
    messages = [
        {"topic": COMPACTED, "value": b"m%d" % i, "key": None if i % 10 == 0 else b"k%d" % i}
        for i in range(100)
    ]
    errors = _deliver(broker, messages)
    bad = [i for i, e in enumerate(errors) if e and e.code() == KafkaError.INVALID_RECORD]
    different = KafkaError._INVALID_DIFFERENT_RECORD
    others = [i for i, e in enumerate(errors) if e and e.code() == different]
    assert bad == list(range(0, 100, 10))
    assert len(others) == 90
    assert list_offsets_by_time(_port(broker), COMPACTED, -1).offset == 0  # nothing written


def test_timestamps_out_of_range_are_refused(broker: LocalCluster) -> None:
    """message.timestamp.after.max.ms is one hour by default; the topic "strict" sets
    message.timestamp.before.max.ms to one minute. The records at fault are listed."""
    now = now_ms()
    (future,) = _deliver(broker, [{"topic": PLAIN, "value": b"x", "timestamp": now + 2 * HOUR}])
    assert future is not None
    assert future.code() == KafkaError.INVALID_TIMESTAMP
    batch = raw_batch(keyed_records(3), 3, now - 10 * 60_000)  # ten minutes old
    answer = produce_raw(_port(broker), STRICT, batch)
    assert answer.error_code == ErrorCode.invalid_timestamp
    assert answer.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in answer.record_errors] == [0, 1, 2]
    assert "is out of range. The timestamp should be within [" in (
        answer.record_errors[0].batch_index_error_message
    )
    assert produce_raw(_port(broker), STRICT, raw_batch(keyed_records(3), 3, now)).error_code == (
        ErrorCode.none
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (described,) = admin.describe_configs([ConfigResource("topic", PLAIN)]).values()
    configs = described.result(30)
    assert configs["message.timestamp.after.max.ms"].value == "3600000"
    assert configs["message.timestamp.before.max.ms"].value == str(2**63 - 1)


@pytest.mark.parametrize(
    ("records", "declared", "message"),
    [
        (3, 4, "Incorrect declared batch size, premature EOF reached"),
        (4, 3, "Incorrect declared batch size, records still remaining in file"),
    ],
)
def test_a_record_count_that_disagrees_with_the_records(
    broker: LocalCluster, records: int, declared: int, message: str
) -> None:
    """Where the broker decodes records (a compacted topic): Kafka's INVALID_RECORD."""
    batch = raw_batch(keyed_records(records), declared, now_ms())
    answer = produce_raw(_port(broker), COMPACTED, batch)
    assert answer.error_code == ErrorCode.invalid_record
    assert answer.error_message.endswith(message)


def test_a_zstd_bomb_is_never_inflated(broker: LocalCluster) -> None:
    """1 MB of zstd that inflates to 32 GiB: refused to a compacted topic (INVALID_RECORD);
    appended to a plain one (the hot path decodes nothing), then refused by the timestamp
    lookup that lands on it. The broker's peak memory grows by about the bound (~100 MiB),
    never by the gigabytes, and it keeps serving."""
    port, now = _port(broker), now_ms()
    bomb = raw_batch(zstd_bomb(), 1, now, Compression.ZSTD)
    assert len(bomb) < 1048588  # within max.message.bytes
    answer = produce_raw(port, COMPACTED, bomb)
    assert answer.error_code == ErrorCode.invalid_record
    assert "inflates past 104858800 bytes" in answer.error_message
    assert produce_raw(port, PLAIN, bomb).error_code == ErrorCode.none
    assert list_offsets_by_time(port, PLAIN, now).error_code == ErrorCode.invalid_record
    assert _peak_rss_mb(broker) < 512  # 236 MiB seen; 4 GiB for a 2 GiB bomb before
    keyed = raw_batch(compress(Compression.ZSTD, keyed_records(2)), 2, now_ms(), Compression.ZSTD)
    assert produce_raw(port, COMPACTED, keyed).error_code == ErrorCode.none


def test_the_cleaner_says_which_batch_it_cannot_decode_and_what_to_do(broker: LocalCluster) -> None:
    """A batch that declares more records than it holds passes Produce to a topic that is not
    compacted (the hot path decodes nothing). Compacted later, the topic's cleaner meets it: its
    log line names the batch and says what to do (no disk is at fault)."""
    topic, port = "compacted-later", _port(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "4096"})])[topic].result(30)
    assert produce_raw(port, topic, raw_batch(keyed_records(3), 4, now_ms())).error_code == 0
    for _ in range(40):  # the same keys again: segments roll, the first is dirty
        assert produce_raw(port, topic, raw_batch(keyed_records(20), 20, now_ms())).error_code == 0
    compact = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.01"))
    ]
    resource = ConfigResource("topic", topic, incremental_configs=compact)
    admin.incremental_alter_configs([resource])[resource].result(30)
    log_file = broker.nodes["broker-1"].log_file

    def reported() -> str | None:
        lines = log_file.read_text(errors="replace").splitlines()
        return next((line for line in lines if f"{topic}-0: cleaning" in line), None)

    line = wait_for(reported, 60, "the cleaner's report")
    assert "cannot decode" in line, line
    assert "the batch of offsets 0 to 3" in line, line
    assert "kafka-delete-records" in line, line
    assert "check the disk" not in line, line
