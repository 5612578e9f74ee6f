"""Spark's official Kafka connector (spark-sql-kafka-0-10) writing to a 3-broker Rafka cluster:
batch and streaming writes with every column (topic, key, value, partition, headers), the Java
producer's partitioning, producer settings (acks, in-flight requests, compression codecs), and
record timestamps (CreateTime, LogAppendTime, none)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .spark_fixtures import (
    PARTS,
    PER_PART,
    cluster,
    create_topic,
    produce,
    read_kafka,
    spark,
    stream_kafka,
    topic,
    unique,
)

__all__ = ["cluster", "spark", "topic"]  # the fixtures


def test_sink_batch_and_stream(spark: Any, cluster: Any, topic: str, tmp_path: Path) -> None:
    b = cluster.bootstrap
    out1, out2 = create_topic(b, unique("sink1"), 3, 3), create_topic(b, unique("sink2"), 3, 3)
    rows = [
        (out1, "k1", "v1", 0, [("a", bytearray(b"1"))]),
        (out2, "k2", "v2", 2, None),
        (out1, None, "v3", 1, [("b", bytearray(b"2")), ("c", bytearray(b""))]),
    ]
    df = spark.createDataFrame(
        rows,
        "topic string, key string, value string, partition int, "
        "headers array<struct<key:string,value:binary>>",
    )
    df.write.format("kafka").option("kafka.bootstrap.servers", b).save()
    got = read_kafka(spark, b, subscribePattern=f"{out1}|{out2}", includeHeaders="true").collect()
    read_back = {
        (
            r.topic,
            None if r.key is None else bytes(r.key),
            bytes(r.value),
            r.partition,
            tuple((h.key, bytes(h.value)) for h in r.headers) if r.headers else None,
        )
        for r in got
    }
    assert read_back == {
        (
            t,
            None if k is None else k.encode(),
            v.encode(),
            p,
            tuple((hk, bytes(hv)) for hk, hv in h) if h else None,
        )
        for t, k, v, p, h in rows
    }

    # The topic option overrides a topic column; a stream copies one topic into another.
    copy = create_topic(b, unique("copy"), 6, 3)
    q = (
        stream_kafka(spark, b, subscribe=topic, startingOffsets="earliest")
        .selectExpr("key", "value", "'ignored' as topic")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", b)
        .option("topic", copy)
        .option("checkpointLocation", str(tmp_path / "copy"))
        .start()
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    copied = read_kafka(spark, b, subscribe=copy).collect()
    assert sorted((bytes(r.key), bytes(r.value)) for r in copied) == sorted(
        (f"k{p}-{j}".encode(), f"v{p}-{j}".encode()) for p in range(PARTS) for j in range(PER_PART)
    )
    # Keyed records land where the Java client's default partitioner (murmur2) puts them.
    assert {(bytes(r.key), r.partition) for r in copied} == {
        (k, java_partition(k, PARTS)) for k, _ in ((bytes(r.key), 0) for r in copied)
    }


def test_sink_producer_settings(spark: Any, cluster: Any) -> None:
    """kafka.* settings reach the connector's Java producer: acks=1 and 10 requests in flight
    (which turn its idempotence off), and each compression codec; every record arrives once
    and reads back."""
    b = cluster.bootstrap
    out = create_topic(b, unique("settings"), 1, 3)
    settings = [
        {"kafka.acks": "1"},
        {"kafka.max.in.flight.requests.per.connection": "10"},
        *({"kafka.compression.type": c} for c in ("gzip", "snappy", "lz4", "zstd")),
    ]
    for i, extra in enumerate(settings):
        rows = [(f"v{i}-{j}" * 20,) for j in range(50)]
        w = spark.createDataFrame(rows, "value string").write.format("kafka")
        w = w.option("kafka.bootstrap.servers", b).option("topic", out)
        for k, v in extra.items():
            w = w.option(k, v)
        w.save()
    got = sorted(bytes(r.value) for r in read_kafka(spark, b, subscribe=out).collect())
    assert got == sorted(
        (f"v{i}-{j}" * 20).encode() for i in range(len(settings)) for j in range(50)
    )


def test_record_timestamps(spark: Any, cluster: Any) -> None:
    """The connector's producer sets no timestamp (it has no timestamp column): records are
    stamped at the write, CreateTime (timestampType 0); on a LogAppendTime topic Rafka stamps
    them and the connector reads timestampType 1. A record without a timestamp (-1) reads as
    1 ms before the epoch (java.sql.Timestamp(-1))."""
    b = cluster.bootstrap
    create = create_topic(b, unique("create-time"), 1, 3)
    append = create_topic(
        b, unique("append-time"), 1, 3, {"message.timestamp.type": "LogAppendTime"}
    )
    before = datetime.now(UTC) - timedelta(seconds=1)
    for t in (create, append):
        spark.createDataFrame([("a",)], "value string").write.format("kafka").option(
            "kafka.bootstrap.servers", b
        ).option("topic", t).save()
    produce(b, create, [{"value": b"d", "timestamp": -1}])
    after = datetime.now(UTC) + timedelta(seconds=1)
    got = {
        (r.topic, bytes(r.value)): (r.timestamp.replace(tzinfo=UTC), r.timestampType)
        for r in read_kafka(spark, b, subscribe=f"{create},{append}").collect()
    }
    assert got.keys() == {(create, b"a"), (create, b"d"), (append, b"a")}
    assert before < got[create, b"a"][0] < after
    assert got[create, b"a"][1] == 0
    assert before < got[append, b"a"][0] < after
    assert got[append, b"a"][1] == 1
    assert got[create, b"d"] == (datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), 0)


def java_partition(key: bytes, partitions: int) -> int:
    """Kafka's Utils.murmur2 and toPositive: the partition the Java producer picks for a key."""
    m, h = 0x5BD1E995, (0x9747B28C ^ len(key)) & 0xFFFFFFFF
    for i in range(len(key) // 4):
        k = int.from_bytes(key[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail, rest = len(key) & ~3, len(key) % 4
    if rest == 3:
        h ^= key[tail + 2] << 16
    if rest >= 2:
        h ^= key[tail + 1] << 8
    if rest >= 1:
        h ^= key[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions
