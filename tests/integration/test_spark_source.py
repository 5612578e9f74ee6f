"""Spark's official Kafka connector (spark-sql-kafka-0-10, tests/peers/spark) reading a 3-broker
Rafka cluster: its jars beside pyspark's, batch reads (offsets, timestamps, headers, assign and
patterns, minPartitions, data loss), and streaming reads (starting offsets, a file sink through
two restarts, rate limits, added and deleted topics, Trigger.AvailableNow). The sink:
test_spark_sink.py; SASL_SSL: test_spark_secured.py."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from .conftest import wait_for
from .spark_fixtures import (
    PARTS,
    PER_PART,
    T0,
    cluster,
    connector_jars,
    create_topic,
    produce,
    read_kafka,
    rows_of,
    source_record,
    source_row,
    spark,
    stream_kafka,
    topic,
    unique,
)

__all__ = ["cluster", "spark", "topic"]  # the fixtures


def aged_topic(bootstrap: str, name: str) -> str:
    """A 1-partition topic whose records v0..v4 were written and v0..v3 aged out: retention
    keeps only its active segment (one record a segment), so its earliest offset is 4."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import OffsetSpec as Spec

    create_topic(bootstrap, name, 1, 1, {"segment.bytes": "14", "retention.bytes": "1"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(5):  # one produce request, so one segment, a record
        produce(bootstrap, name, [{"value": f"v{i}".encode(), "partition": 0}])
    tp = TopicPartition(name, 0)

    def earliest() -> int:
        return admin.list_offsets({tp: Spec.earliest()})[tp].result().offset

    wait_for(
        lambda: earliest() == 4, 30, f"retention to age out {name}'s first records", interval=0.2
    )
    return name


# -- the connector's jars ------------------------------------------------------------------------


# Every Spark jar has this empty class (a build artifact of Spark's): not a conflict.
_SPARK_STUB = "org/apache/spark/unused/UnusedStubClass.class"


def _classes(jar: Path) -> set[str]:
    with zipfile.ZipFile(jar) as z:
        return {
            n
            for n in z.namelist()
            if n.endswith(".class") and not n.startswith("META-INF/") and n != _SPARK_STUB
        }


def test_connector_jars_beside_pyspark() -> None:
    """The connector is the one of pyspark's version, and its jars add no class pyspark's
    jars/ already has (no second kafka-clients, lz4, Scala or Hadoop on the classpath)."""
    import pyspark

    jars = sorted(connector_jars().glob("*.jar"))
    names = [j.name for j in jars]
    assert f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar" in names, names
    assert len([n for n in names if n.startswith("kafka-clients-")]) == 1, names
    pyspark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    assert not [j for j in pyspark_jars if re.match(r"kafka-clients-", j.name)]
    shipped = set().union(*map(_classes, pyspark_jars))
    for jar in jars:
        assert not _classes(jar) & shipped, f"{jar.name} repeats classes pyspark ships"


# -- batch reads ---------------------------------------------------------------------------------


def test_batch_read_all_with_headers(spark: Any, cluster: Any, topic: str) -> None:
    df = read_kafka(spark, cluster.bootstrap, subscribe=topic, includeHeaders="true")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    expected = {source_row(topic, p, j, True) for p in range(PARTS) for j in range(PER_PART)}
    assert rows_of(df) == expected
    assert df.count() == PARTS * PER_PART
    # Without includeHeaders, the same records without the column.
    df = read_kafka(spark, cluster.bootstrap, subscribe=topic)
    assert rows_of(df) == {source_row(topic, p, j) for p in range(PARTS) for j in range(PER_PART)}


def test_batch_offsets_json(spark: Any, cluster: Any, topic: str) -> None:
    start = {"0": 3, "1": -2, "2": 5, "3": 0, "4": 9, "5": -2}
    end = {"0": 7, "1": 4, "2": -1, "3": 0, "4": 10, "5": -1}
    df = read_kafka(
        spark,
        cluster.bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: start}),
        endingOffsets=json.dumps({topic: end}),
    )
    resolve = {-2: 0, -1: PER_PART}
    expected = {
        source_row(topic, p, j)
        for p in range(PARTS)
        for j in range(
            resolve.get(start[str(p)], start[str(p)]), resolve.get(end[str(p)], end[str(p)])
        )
    }
    assert rows_of(df) == expected
    assert len(expected) == 4 + 4 + 5 + 0 + 1 + 10


def test_batch_timestamps(spark: Any, cluster: Any, topic: str) -> None:
    """The connector turns timestamps into offsets with ListOffsets by timestamp."""
    b = cluster.bootstrap
    # Offset j has timestamp T0 + j s (+ p ms): [3 s, 7 s) is offsets 3..6 of every partition.
    df = read_kafka(
        spark, b, subscribe=topic, startingTimestamp=str(T0 + 3000), endingTimestamp=str(T0 + 7000)
    )
    assert rows_of(df) == {source_row(topic, p, j) for p in range(PARTS) for j in range(3, 7)}

    by_ts = {topic: {str(p): T0 + p * 1000 + p for p in range(PARTS)}}  # partition p from offset p
    df = read_kafka(spark, b, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_ts))
    assert rows_of(df) == {
        source_row(topic, p, j) for p in range(PARTS) for j in range(p, PER_PART)
    }

    # Partition p up to offset p + 2 (exclusive); partition 5's end timestamp matches no offset,
    # which for an end means the latest offset.
    end_ts = {str(p): T0 + (p + 2) * 1000 + p for p in range(PARTS - 1)}
    end_ts[str(PARTS - 1)] = T0 + 3_600_000
    df = read_kafka(spark, b, subscribe=topic, endingOffsetsByTimestamp=json.dumps({topic: end_ts}))
    expected = {source_row(topic, p, j) for p in range(PARTS - 1) for j in range(p + 2)}
    assert rows_of(df) == expected | {source_row(topic, PARTS - 1, j) for j in range(PER_PART)}

    # No offset at or after the starting timestamp: an error by default, the end with the
    # strategy "latest".
    late = str(T0 + 3_600_000)
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        read_kafka(spark, b, subscribe=topic, startingTimestamp=late).collect()
    df = read_kafka(
        spark,
        b,
        subscribe=topic,
        startingTimestamp=late,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0


def test_assign_and_subscribe_pattern(spark: Any, cluster: Any, topic: str) -> None:
    b = cluster.bootstrap
    df = read_kafka(spark, b, assign=json.dumps({topic: [1, 4]}))
    assert rows_of(df) == {source_row(topic, p, j) for p in (1, 4) for j in range(PER_PART)}

    prefix = unique("pat")
    t1, t2 = create_topic(b, f"{prefix}-a", 2, 1), create_topic(b, f"{prefix}-b", 1, 1)
    produce(b, t1, [{"value": b"a0", "partition": 0}, {"value": b"a1", "partition": 1}])
    produce(b, t2, [{"value": b"b0", "partition": 0}])
    df = read_kafka(spark, b, subscribePattern=f"{prefix}-.*")
    assert sorted(bytes(r.value) for r in df.collect()) == [b"a0", b"a1", b"b0"]
    df = read_kafka(spark, b, subscribe=f"{t2},{t1}")
    assert df.count() == 3


def test_min_partitions_split_offset_ranges(spark: Any, cluster: Any, topic: str) -> None:
    """minPartitions splits each partition's offset range among tasks, whose consumers then
    start fetching in the middle of a partition."""
    b = cluster.bootstrap
    everything = {source_row(topic, p, j) for p in range(PARTS) for j in range(PER_PART)}
    default = read_kafka(spark, b, subscribe=topic)
    assert default.rdd.getNumPartitions() == PARTS  # one task per Kafka partition
    split = read_kafka(spark, b, subscribe=topic, minPartitions="24")
    assert split.rdd.getNumPartitions() == 24
    assert rows_of(split) == everything
    assert split.count() == PARTS * PER_PART


def test_batch_fail_on_data_loss(spark: Any, cluster: Any) -> None:
    """A batch read whose starting offset has aged out fails (failOnDataLoss: Rafka answers the
    fetch with OFFSET_OUT_OF_RANGE); with failOnDataLoss=false it reads from the earliest offset
    left."""
    b = cluster.bootstrap
    aged = aged_topic(b, unique("aged"))
    from_zero = json.dumps({aged: {"0": 0}})
    with pytest.raises(Exception, match="Some data may have been lost") as e:
        read_kafka(spark, b, subscribe=aged, startingOffsets=from_zero).collect()
    assert f"Reason: Could not read records in offset [0, 5) for topic partition {aged}-0" in str(
        e.value
    )
    df = read_kafka(spark, b, subscribe=aged, startingOffsets=from_zero, failOnDataLoss="false")
    assert [(bytes(r.value), r.offset) for r in df.collect()] == [(b"v4", 4)]
    df = read_kafka(spark, b, subscribe=aged)  # earliest: nothing lost
    assert [(bytes(r.value), r.offset) for r in df.collect()] == [(b"v4", 4)]


# -- streaming -----------------------------------------------------------------------------------


def _memory_query(df: Any, name: str, checkpoint: Path) -> Any:
    return (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _collecting_query(df: Any, checkpoint: Path, sink: list) -> Any:
    """A query that appends (batch id, row) of each micro-batch to `sink` (foreachBatch runs in
    this process); unlike the memory sink it can restart from its checkpoint."""

    def collect(batch: Any, batch_id: int) -> None:
        sink.extend((batch_id, r) for r in batch.collect())

    return (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def test_stream_starting_offsets(spark: Any, cluster: Any, topic: str, tmp_path: Path) -> None:
    b = cluster.bootstrap
    # latest (the default): only what arrives after the start.
    live = create_topic(b, unique("live"), 3, 3)
    produce(b, live, [{"value": b"old", "partition": p} for p in range(3)])
    name = unique("latest").replace("-", "_")
    q = _memory_query(stream_kafka(spark, b, subscribe=live), name, tmp_path / "latest")
    try:
        q.processAllAvailable()
        assert spark.sql(f"select * from {name}").count() == 0
        produce(b, live, [{"value": f"new{p}".encode(), "partition": p} for p in range(3)])
        q.processAllAvailable()
        got = sorted(bytes(r.value) for r in spark.sql(f"select value from {name}").collect())
        assert got == [b"new0", b"new1", b"new2"]
    finally:
        q.stop()

    # Per-partition JSON (with -2 for earliest), per-partition timestamps, and a global one.
    starts = {
        "json": {
            "startingOffsets": json.dumps(
                {topic: {"0": 8, "1": -2, "2": 9, "3": 10, "4": 0, "5": 5}}
            )
        },
        "by_ts": {
            "startingOffsetsByTimestamp": json.dumps(
                {topic: {str(p): T0 + (8 if p % 2 else 5) * 1000 + p for p in range(PARTS)}}
            )
        },
        "ts": {"startingTimestamp": str(T0 + 8000)},
    }
    first = {
        "json": {0: 8, 1: 0, 2: 9, 3: 10, 4: 0, 5: 5},
        "by_ts": {p: 8 if p % 2 else 5 for p in range(PARTS)},
        "ts": dict.fromkeys(range(PARTS), 8),
    }
    for case, options in starts.items():
        name = unique(case).replace("-", "_")
        q = _memory_query(stream_kafka(spark, b, subscribe=topic, **options), name, tmp_path / case)
        try:
            q.processAllAvailable()
            rows = rows_of(spark.sql(f"select * from {name}"))
        finally:
            q.stop()
        assert rows == {
            source_row(topic, p, j) for p in range(PARTS) for j in range(first[case][p], PER_PART)
        }, case


def test_stream_to_files_restarted_twice_exactly_once(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    """A query from Rafka into a file sink (JSON files), rate limited to several micro-batches
    a run, stopped in the middle of its input and restarted from its checkpoint twice, with new
    records arriving between runs: the sink has every record exactly once, and each run's
    micro-batches follow the last one of the run before."""
    b = cluster.bootstrap
    t = create_topic(b, unique("files"), 3, 3)
    out, ck = tmp_path / "out", tmp_path / "ck"
    per_run = 150

    def start() -> Any:
        return (
            stream_kafka(
                spark, b, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger="40"
            )
            .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
            .writeStream.format("json")
            .option("path", str(out))
            .option("checkpointLocation", str(ck))
            .trigger(processingTime="100 milliseconds")
            .start()
        )

    def committed() -> set[int]:
        commits = ck / "commits"
        return (
            {int(f.name) for f in commits.iterdir() if f.name.isdigit()}
            if commits.exists()
            else set()
        )

    runs: list[set[int]] = []
    for run in range(3):
        values = [f"run{run}-{i}" for i in range(per_run)]
        produce(b, t, [{"value": v.encode(), "partition": i % 3} for i, v in enumerate(values)])
        before = committed()
        q = start()
        try:
            if run < 2:  # stop with part of the input not read: the next run goes on from there
                wait_for(lambda: len(committed() - before) >= 2, 60, f"run {run}'s batches")  # noqa: B023
            else:
                q.processAllAvailable()
            assert q.exception() is None
        finally:
            q.stop()
        runs.append(committed() - before)
    assert all(runs), runs
    assert max(runs[0]) < min(runs[1]), runs
    assert max(runs[1]) < min(runs[2]), runs

    rows = spark.read.json(str(out)).collect()  # through the sink's log: committed files only
    expected = {f"run{r}-{i}" for r in range(3) for i in range(per_run)}
    assert sorted(r.value for r in rows) == sorted(expected)
    for p in range(3):  # 3 runs of per_run records spread over 3 partitions
        assert sorted(r.offset for r in rows if r.partition == p) == list(range(per_run)), p


def test_stream_rate_limit_shares_by_backlog(spark: Any, cluster: Any, tmp_path: Path) -> None:
    """maxOffsetsPerTrigger is shared among partitions in proportion to their backlog, from
    the latest offsets Rafka lists for each micro-batch."""
    b = cluster.bootstrap
    t = create_topic(b, unique("rate"), PARTS, 3)
    produce(b, t, [source_record(p, j) for j in range(PER_PART) for p in range(PARTS)])
    seen: list = []
    df = stream_kafka(spark, b, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger="13")
    q = _collecting_query(df, tmp_path / "rate", seen)
    try:
        q.processAllAvailable()
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    # 13 * 10/60 -> 2 a partition a batch.
    assert [p["numInputRows"] for p in progress] == [12] * 5
    assert json.loads(progress[-1]["sources"][0]["endOffset"]) == {
        t: {str(p): PER_PART for p in range(PARTS)}
    }
    assert sorted((r.partition, r.offset) for _, r in seen) == [
        (p, j) for p in range(PARTS) for j in range(PER_PART)
    ]


def test_stream_added_partitions_start_at_earliest(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    """Partitions that appear while a query is down are read from their earliest offset; one
    whose earliest offset is not 0 (records aged out) is data loss: the query fails with
    failOnDataLoss, and reads what is left without."""
    b = cluster.bootstrap
    prefix = unique("grow")
    first = create_topic(b, f"{prefix}-a", 1, 3)
    produce(b, first, [{"value": b"a0"}])
    runs: dict[str, list] = {"true": [], "false": []}

    def start(fail: str) -> Any:
        df = stream_kafka(
            spark,
            b,
            subscribePattern=f"{prefix}-.*",
            startingOffsets="earliest",
            failOnDataLoss=fail,
        )
        return _collecting_query(df, tmp_path / fail, runs[fail])

    for fail in runs:
        q = start(fail)
        try:
            q.processAllAvailable()
        finally:
            q.stop()
    aged_topic(b, f"{prefix}-b")  # earliest offset 4
    fresh = create_topic(b, f"{prefix}-c", 1, 3)
    produce(b, fresh, [{"value": b"c0"}, {"value": b"c1"}])

    strict = start("true")
    try:
        with pytest.raises(Exception, match="Some data may have been lost") as e:
            strict.awaitTermination(60)
        assert f"Reason: Added partition {prefix}-b-0 starts from 4 instead of 0." in str(e.value)
    finally:
        strict.stop()
    lenient = start("false")
    try:
        lenient.processAllAvailable()
        assert lenient.isActive, lenient.exception()
    finally:
        lenient.stop()
    assert sorted((r.topic, bytes(r.value), r.offset) for _, r in runs["false"]) == [
        (first, b"a0", 0),
        (f"{prefix}-b", b"v4", 4),
        (fresh, b"c0", 0),
        (fresh, b"c1", 1),
    ]


def test_stream_fail_on_data_loss(spark: Any, cluster: Any, tmp_path: Path) -> None:
    """A subscribed topic is deleted under a running query: with failOnDataLoss (the default)
    the query fails with KAFKA_DATA_LOSS; with failOnDataLoss=false it goes on."""
    from confluent_kafka.admin import AdminClient

    b = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    prefix = unique("loss")
    doomed, kept = create_topic(b, f"{prefix}-x", 1, 3), create_topic(b, f"{prefix}-y", 1, 3)
    produce(b, doomed, [{"value": b"d"}])
    produce(b, kept, [{"value": b"k"}])
    queries = {}
    for fail in ("true", "false"):
        df = stream_kafka(
            spark,
            b,
            subscribePattern=f"{prefix}-.*",
            startingOffsets="earliest",
            failOnDataLoss=fail,
        )
        name = unique(f"loss_{fail}").replace("-", "_")
        queries[fail] = (_memory_query(df, name, tmp_path / fail), name)
    try:
        for q, _ in queries.values():
            q.processAllAvailable()
        admin.delete_topics([doomed])[doomed].result(30)
        wait_for(
            lambda: doomed not in admin.list_topics(timeout=10).topics,
            30,
            "the topic to be deleted",
        )
        strict, _ = queries["true"]
        wait_for(lambda: not strict.isActive, 60, "the failOnDataLoss query to fail")
        assert f"Reason: Partitions Set({doomed}-0) have been deleted." in str(strict.exception())

        lenient, name = queries["false"]
        produce(b, kept, [{"value": b"k2"}])
        lenient.processAllAvailable()
        assert lenient.isActive
        got = sorted(bytes(r.value) for r in spark.sql(f"select value from {name}").collect())
        assert got == [b"d", b"k", b"k2"]
    finally:
        for q, _ in queries.values():
            q.stop()


def test_stream_trigger_available_now(spark: Any, cluster: Any, topic: str, tmp_path: Path) -> None:
    """Trigger.AvailableNow reads what is there when the query starts, in rate-limited batches,
    and stops by itself."""
    seen: list = []

    def collect(batch: Any, batch_id: int) -> None:
        seen.extend((batch_id, r) for r in batch.collect())

    df = stream_kafka(
        spark,
        cluster.bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="25",
    )
    q = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "now"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120), "the query did not stop by itself"
    assert q.exception() is None
    assert len({b for b, _ in seen}) >= 3
    assert sorted((r.partition, r.offset) for _, r in seen) == [
        (p, j) for p in range(PARTS) for j in range(PER_PART)
    ]
