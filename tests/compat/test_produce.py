"""Produce: the answers to good batches and every error a producer can provoke with one."""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from cluster.kafka_client import builder
from cluster.polling import wait_for
from dataplane.log.batch import Compression, header_at
from dataplane.log.records import decode_records
from tests.compat import diff
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, Side
from tests.unit.log.batches import make_batch

PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22
TOPIC = "compat-produce"
COMPACTED = "compat-produce-compacted"
# topic -> its compression.type (the codec the broker stores batches in)
RECOMPRESSED = {
    "compat-produce-zstd": "zstd",
    "compat-produce-uncompressed": "uncompressed",
    "compat-produce-gzip": "gzip",
}
# What differs between two brokers for the same append: where it landed and when.
APPEND = [
    "responses.*.partition_responses.*.log_append_time",
    "responses.*.partition_responses.*.base_offset",
    "responses.*.partition_responses.*.log_start_offset",
]


@pytest.fixture(scope="module", autouse=True)
def topics(pair: Pair) -> None:
    create_topics(
        pair,
        NewTopic(TOPIC, 2, 1),
        NewTopic(COMPACTED, 1, 1, config={"cleanup.policy": "compact"}),
        NewTopic("compat-produce-small", 1, 1, config={"max.message.bytes": "1000"}),
        NewTopic(
            "compat-produce-ts",
            1,
            1,
            config={
                "message.timestamp.after.max.ms": "60000",
                "message.timestamp.before.max.ms": "60000",
            },
        ),
        *(NewTopic(t, 1, 1, config={"compression.type": c}) for t, c in RECOMPRESSED.items()),
    )


def produce(
    pair: Pair,
    case: str,
    records: bytes,
    topic: str = TOPIC,
    partition: int = 0,
    version: int = 11,
    acks: int = -1,
    masked: list[str] | None = None,
    transactional_id: str | None = None,
) -> tuple[Any, Any]:
    b = builder(PRODUCE, version)
    data = b.TopicProduceData(
        name=topic, partition_data=(b.PartitionProduceData(index=partition, records=records),)
    )
    return pair.call(
        case,
        PRODUCE,
        version,
        masked=APPEND + (masked or []),
        transactional_id=transactional_id,
        acks=acks,
        timeout=10000,
        topic_data=(data,),
    )


def now_batch(n: int = 3, **kw: Any) -> bytes:
    now = int(time.time() * 1000)
    return make_batch([b"v%d" % i for i in range(n)], timestamps=[now + i for i in range(n)], **kw)


@pytest.mark.parametrize("version", [3, 7, 9, 11])
def test_good_batch(pair: Pair, version: int) -> None:
    produce(pair, f"Produce v{version}: a good batch, acks=all", now_batch(), version=version)


# LZ4 is left to the client-level cases: the test builder's frame (cramjam's, with linked
# blocks) is one Kafka's reader refuses.
@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.ZSTD])
def test_compressed_batch(pair: Pair, codec: Compression) -> None:
    produce(pair, f"Produce v9: a {codec.name.lower()} batch", now_batch(codec=codec), version=9)


def test_unknown_topic(pair: Pair) -> None:
    produce(pair, "Produce: unknown topic", now_batch(), topic="compat-produce-nope")


def test_unknown_partition(pair: Pair) -> None:
    produce(pair, "Produce: unknown partition", now_batch(), partition=7)


def test_invalid_acks(pair: Pair) -> None:
    produce(pair, "Produce: acks=2", now_batch(), acks=2)


def test_bad_crc(pair: Pair) -> None:
    batch = bytearray(now_batch())
    batch[-1] ^= 0xFF  # the last byte of the last record: the CRC no longer matches
    produce(pair, "Produce: a batch with a bad CRC", bytes(batch))


def test_record_too_large(pair: Pair) -> None:
    big = make_batch([b"x" * 2000], timestamps=[int(time.time() * 1000)])
    produce(pair, "Produce: a batch over max.message.bytes", big, topic="compat-produce-small")


def test_keyless_records_on_compacted_topic(pair: Pair) -> None:
    """KIP-467: the batch fails with INVALID_RECORD and record_errors lists the keyless ones."""
    now = int(time.time() * 1000)
    keys = [None if i % 10 == 0 else b"k%d" % i for i in range(20)]
    batch = make_batch([b"v"] * 20, keys=keys, timestamps=[now] * 20)
    produce(pair, "Produce: keyless records on a compacted topic", batch, topic=COMPACTED)


def test_timestamp_out_of_range(pair: Pair) -> None:
    """Each record's message names the window from the broker's clock at that moment: the
    epoch milliseconds in it are masked."""
    old = int(time.time() * 1000) - 3_600_000
    batch = make_batch([b"a", b"b"], timestamps=[old, old])
    b = builder(PRODUCE, 11)
    data = b.TopicProduceData(
        name="compat-produce-ts",
        partition_data=(b.PartitionProduceData(index=0, records=batch),),
    )
    k, r = pair.send(PRODUCE, 11, transactional_id=None, acks=-1, timeout=10000, topic_data=(data,))
    pair.compare(
        "Produce: timestamps before message.timestamp.before.max.ms",
        _mask_millis(diff.plain(k)),
        _mask_millis(diff.plain(r)),
        masked=APPEND,
    )


def _mask_millis(tree: Any) -> Any:
    """`tree` with every 13-digit number inside a string (epoch milliseconds) masked."""
    if isinstance(tree, dict):
        return {k: _mask_millis(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_mask_millis(v) for v in tree]
    if isinstance(tree, str):
        return re.sub(r"\b\d{13}\b", "<ms>", tree)
    return tree


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_magic(pair: Pair, magic: int) -> None:
    produce(pair, f"Produce: a batch with magic {magic} in a v2 header", now_batch(magic=magic))


def test_record_count_mismatch(pair: Pair) -> None:
    produce(pair, "Produce: a batch whose record count says 5 of 3", now_batch(record_count=5))


@pytest.mark.parametrize(
    ("version", "codec"), [(3, Compression.NONE), (11, Compression.NONE), (9, Compression.GZIP)]
)
def test_two_batches_for_one_partition(pair: Pair, version: int, codec: Compression) -> None:
    """Kafka's ProduceRequest.validateRecords: exactly one batch per partition."""
    produce(
        pair,
        f"Produce v{version}: two {codec.name.lower()} batches for one partition",
        now_batch(codec=codec) + now_batch(codec=codec),
        version=version,
    )


def _producer_id(pair: Pair) -> tuple[int, int]:
    """An idempotent producer id on each side (they differ: masked by the caller); a broker
    whose transaction coordinator is still loading is asked again."""

    def one(side: Any) -> int:
        def ask() -> int | None:
            r = side.conn().call(
                INIT_PRODUCER_ID,
                4,
                transactional_id=None,
                transaction_timeout=datetime.timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            )
            return r.producer_id if r.error_code == ErrorCode.none else None

        return wait_for(ask, what=f"a producer id from {side.name}")

    return pair.both(one)


def test_idempotent_sequences(pair: Pair) -> None:
    """First batch at 0, a duplicate of it, then a gap (OUT_OF_ORDER_SEQUENCE_NUMBER)."""
    kpid, rpid = _producer_id(pair)

    def send(case: str, sequence: int) -> None:
        def one(side: Any) -> Any:
            pid = kpid if side.name == "kafka" else rpid
            b = builder(PRODUCE, 9)
            batch = now_batch(producer_id=pid, producer_epoch=0, base_sequence=sequence)
            data = b.TopicProduceData(
                name=TOPIC, partition_data=(b.PartitionProduceData(index=1, records=batch),)
            )
            return side.conn().call(
                PRODUCE, 9, transactional_id=None, acks=-1, timeout=10000, topic_data=(data,)
            )

        k, r = pair.both(one)
        pair.compare(case, k, r, masked=APPEND)

    send("Produce idempotent: first batch, sequence 0", 0)
    send("Produce idempotent: the same batch again (duplicate)", 0)
    send("Produce idempotent: sequence 10 after 2 (a gap)", 10)
    send("Produce idempotent: sequence 3, the next one", 3)


def test_unknown_producer_id(pair: Pair) -> None:
    produce(
        pair,
        "Produce idempotent: a producer id nobody was given",
        now_batch(producer_id=987654321, producer_epoch=0, base_sequence=0),
    )


def stored_batches(side: Side, topic: str) -> list[dict[str, Any]]:
    """The batches of the topic's partition 0 as a consumer fetches them: codec, offsets,
    producer fields and records (keys, values, headers, timestamps)."""
    b = builder(FETCH, 12)
    part = b.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    answer = side.conn().call(
        FETCH,
        12,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(b.FetchTopic(topic=topic, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    records = bytes(answer.responses[0].partitions[0].records or b"")
    batches, pos = [], 0
    while pos < len(records):
        info = header_at(records, pos)
        batch = records[pos : pos + info.size]
        batches.append(
            {
                "codec": Compression(info.compression).name,
                "base_offset": info.base_offset,
                "last_offset_delta": info.last_offset_delta,
                "producer": (info.producer_id, info.producer_epoch, info.base_sequence),
                "transactional": info.is_transactional,
                "records": [tuple(r) for r in decode_records(batch)],
            }
        )
        pos += info.size
    return batches


@pytest.mark.parametrize(
    ("topic", "codec"),
    [
        ("compat-produce-zstd", Compression.GZIP),
        ("compat-produce-uncompressed", Compression.SNAPPY),
        ("compat-produce-gzip", Compression.GZIP),
        ("compat-produce-zstd", Compression.NONE),
    ],
)
def test_topic_compression_type(pair: Pair, topic: str, codec: Compression) -> None:
    """Kafka's LogValidator: a batch whose codec is not the topic's compression.type is stored
    recompressed in it (uncompressed: as is); one already in it is stored as produced."""
    now = int(time.time() * 1000)
    batch = make_batch(
        [b"v%d" % i * 50 for i in range(4)],
        keys=[b"k%d" % i for i in range(4)],
        timestamps=[now + i for i in range(4)],
        codec=codec,
    )
    produce(pair, f"Produce: a {codec.name.lower()} batch to {topic}", batch, topic=topic)
    kafka, rafka = pair.both(lambda side: stored_batches(side, topic))
    pair.compare(
        f"Produce: a {codec.name.lower()} batch to a topic of compression.type="
        f"{RECOMPRESSED[topic]}, as stored",
        kafka[-1],
        rafka[-1],
    )
