"""Rafka's Spark Kafka sink (spark/connector/sink.py, through the kafka.DefaultSource shim)
against a 3-broker Rafka cluster: the official connector's save modes, columns, producer
settings, timestamps and partitioning, and its errors for bad options."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

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


def test_bad_sink_options(spark: Any, cluster: Any) -> None:
    def write(ddl: str, row: tuple, **options: str) -> None:
        w = spark.createDataFrame([row], ddl).write.format("kafka")
        w = w.option("kafka.bootstrap.servers", cluster.bootstrap)
        for k, v in options.items():
            w = w.option(k, v)
        w.save()

    cases = [
        (
            ("value string", ("v",)),
            {},
            "topic option required when no 'topic' attribute is "
            "present. Use the topic option for setting a topic.",
        ),
        (("key string", ("k",)), {"topic": "t"}, "Required attribute 'value' not found"),
        (
            ("value int", (1,)),
            {"topic": "t"},
            "value attribute unsupported type int. value must be a(n) string or binary",
        ),
        (
            ("value string, partition string", ("v", "0")),
            {"topic": "t"},
            "partition attribute unsupported type string. partition must be a(n) int",
        ),
        (
            ("value string, timestamp string", ("v", "2026")),
            {"topic": "t"},
            "timestamp attribute unsupported type string. timestamp must be a(n) double or "
            "timestamp",
        ),
        (
            ("value string", ("v",)),
            {"topic": "t", "kafka.value.serializer": "x"},
            "Kafka option 'value.serializer' is not supported",
        ),
        (
            # librdkafka's name for it is queue.buffering.max.ms
            ("value string", ("v",)),
            {"topic": "t", "kafka.linger.ms": "-5"},
            "Kafka option 'kafka.linger.ms' is not valid",
        ),
        (
            ("value string", ("v",)),
            {"topic": "t", "kafka.delivery.timeout.ms": "1000", "kafka.linger.ms": "2000"},
            "Kafka options 'kafka.delivery.timeout.ms', 'kafka.linger.ms' are not valid together",
        ),
        (
            # Idempotence asked for explicitly, with a setting it cannot work with: the Java
            # producer's ConfigException.
            ("value string", ("v",)),
            {"topic": "t", "kafka.enable.idempotence": "true", "kafka.acks": "1"},
            "Kafka option 'kafka.acks' is not valid with kafka.enable.idempotence=true: Must "
            "set acks to all in order to use the idempotent producer.",
        ),
        (
            ("value string", ("v",)),
            {
                "topic": "t",
                "kafka.enable.idempotence": "true",
                "kafka.max.in.flight.requests.per.connection": "10",
            },
            "Kafka option 'kafka.max.in.flight.requests.per.connection' is not valid with "
            "kafka.enable.idempotence=true",
        ),
    ]
    for (ddl, row), options, message in cases:
        with pytest.raises(Exception) as err:
            write(ddl, row, **options)
        assert message in str(err.value), (options, str(err.value)[-1500:])


# -- sink ----------------------------------------------------------------------------------------


def test_sink_save_modes(spark: Any, cluster: Any) -> None:
    """Spark's documented batch write, `df.write.format("kafka")...save()` with no save mode,
    works as on the official connector: the default (ErrorIfExists) and Append write;
    Overwrite and Ignore fail with the official connector's AnalysisException, writing
    nothing."""
    from pyspark.errors import AnalysisException

    b = cluster.bootstrap
    out = create_topic(b, unique("modes"), 3, 3)

    def rows(tag: str) -> Any:
        return spark.createDataFrame(
            [(f"k-{tag}-{i}", f"{tag}-{i}") for i in range(3)], "key string, value string"
        )

    # The call as Spark's Kafka integration guide writes it, unchanged.
    rows("default").write.format("kafka").option("kafka.bootstrap.servers", b).option(
        "topic", out
    ).save()
    for mode in ("errorifexists", "append"):
        rows(mode).write.format("kafka").option("kafka.bootstrap.servers", b).option(
            "topic", out
        ).mode(mode).save()
    for mode, name in (("overwrite", "Overwrite"), ("ignore", "Ignore")):
        with pytest.raises(AnalysisException) as err:
            rows(mode).write.format("kafka").option("kafka.bootstrap.servers", b).option(
                "topic", out
            ).mode(mode).save()
        assert err.value.getCondition() == "_LEGACY_ERROR_TEMP_3081"
        assert str(err.value).startswith(
            f"Save mode {name} not allowed for Kafka. Allowed save modes are Append and "
            "ErrorIfExists (default)."
        ), str(err.value)[-1500:]
    got = sorted(
        (bytes(r.key), bytes(r.value)) for r in read_kafka(spark, b, subscribe=out).collect()
    )
    assert got == sorted(
        (f"k-{tag}-{i}".encode(), f"{tag}-{i}".encode())
        for tag in ("default", "errorifexists", "append")
        for i in range(3)
    )


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
    """kafka.* producer settings the idempotent producer cannot work with, given without
    asking for idempotence: the Java producer turns idempotence off, and so does this sink."""
    b = cluster.bootstrap
    out = create_topic(b, unique("acks"), 1, 3)
    settings = [{"kafka.acks": "1"}, {"kafka.max.in.flight.requests.per.connection": "10"}]
    for i, extra in enumerate(settings):
        w = spark.createDataFrame([(f"v{i}",)], "value string").write.format("kafka")
        w = w.option("kafka.bootstrap.servers", b).option("topic", out)
        for k, v in extra.items():
            w = w.option(k, v)
        w.save()
    assert sorted(bytes(r.value) for r in read_kafka(spark, b, subscribe=out).collect()) == [
        b"v0",
        b"v1",
    ]


def test_sink_timestamp_column(spark: Any, cluster: Any) -> None:
    """The sink's `timestamp` column (a timestamp, or a double of seconds) sets the record
    timestamp to the millisecond, microseconds truncated; null leaves it to the producer (now).
    A record without a timestamp (-1) reads as 1 ms before the epoch, as the official source's
    java.sql.Timestamp(-1)."""
    b = cluster.bootstrap
    # Records months apart would roll a segment, and the module's fast retention would then
    # delete the older one (retention.ms is 7 days): keep them all.
    out = create_topic(b, unique("stamped"), 1, 3, {"retention.ms": "-1"})
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [("a", t0 + timedelta(microseconds=1_234_567)), ("b", None)]
    spark.createDataFrame(rows, "value string, timestamp timestamp").write.format("kafka").option(
        "kafka.bootstrap.servers", b
    ).option("topic", out).save()
    spark.createDataFrame(
        [("c", t0.timestamp() + 2.5)], "value string, timestamp double"
    ).write.format("kafka").option("kafka.bootstrap.servers", b).option("topic", out).save()
    produce(b, out, [{"value": b"d", "timestamp": -1}])
    written_by = datetime.now(UTC)
    got = {
        bytes(r.value): (r.timestamp.replace(tzinfo=UTC), r.timestampType)
        for r in read_kafka(spark, b, subscribe=out).collect()
    }
    assert got[b"a"] == (t0 + timedelta(milliseconds=1234), 0)
    assert got[b"c"] == (t0 + timedelta(milliseconds=2500), 0)
    assert got[b"d"] == (datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), 0)
    assert written_by - timedelta(minutes=5) < got[b"b"][0] <= written_by


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
