"""Rafka's Spark Kafka connector (spark/connector) against a 3-broker Rafka cluster: what
format("kafka") resolves to, the official connector's options and schema for batch and
streaming reads, and its errors for bad options (the sink: test_spark_sink.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from spark.connector import SHIM_CLASS, kafka_provider, lookup_provider
from spark.connector.client import librdkafka_config, parse_jaas
from spark.connector.options import IllegalArgumentException
from spark.connector.source import SCHEMA, KafkaStreamReader, split_ranges

from .conftest import wait_for
from .spark_fixtures import (
    FAKE_MARKER,
    FAKE_PROVIDER,
    PARTS,
    PER_PART,
    REPO,
    T0,
    build_fake_official_jar,
    cluster,
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


# -- what format("kafka") is ---------------------------------------------------------------------


def test_format_kafka_resolves_to_rafka_source(spark: Any, cluster: Any, topic: str) -> None:
    assert kafka_provider(spark) == SHIM_CLASS
    df = read_kafka(spark, cluster.bootstrap, subscribe=topic)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]
    df = read_kafka(spark, cluster.bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema.fields[-1].dataType.simpleString() == "array<struct<key:string,value:binary>>"


def test_provider_lookup_failures(spark: Any, tmp_path: Path) -> None:
    """No provider at all is None; a provider class that does not load (here `brokenkafka`,
    whose superclass is missing, as a shim built against another Spark would be) is an error,
    not "no provider"."""
    assert lookup_provider(spark, "no-such-source") is None
    src = tmp_path / "src" / "brokenkafka"
    src.mkdir(parents=True)
    (src / "Missing.java").write_text("package brokenkafka;\npublic class Missing {}\n")
    (src / "DefaultSource.java").write_text(
        "package brokenkafka;\npublic class DefaultSource extends Missing {}\n"
    )
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), *map(str, src.glob("*.java"))], check=True)
    (classes / "brokenkafka" / "Missing.class").unlink()
    jar = tmp_path / "brokenkafka.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    spark.sql(f"ADD JAR '{jar}'")
    with pytest.raises(Exception, match="NoClassDefFoundError: brokenkafka/Missing"):
        lookup_provider(spark, "brokenkafka")


def test_official_connector_wins_when_present(tmp_path: Path) -> None:
    """A DataSourceRegister named "kafka" on the classpath (here a stand-in for the official
    spark-sql-kafka-0-10 jar, which cannot be downloaded here) serves format("kafka") for read,
    readStream and write, even with Rafka's shim jar present and its Python source registered.
    It needs its own JVM, so it runs in a child process."""
    jar = build_fake_official_jar(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration.spark_fixtures", "precedence", str(jar)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("PRECEDENCE ")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-4000:]
    report = json.loads(line.removeprefix("PRECEDENCE "))
    assert report["provider"] == FAKE_PROVIDER
    assert report["python_source_registered"] is True
    assert report["read"].endswith(f"{FAKE_MARKER} read Some(t)"), report
    assert report["readStream"].endswith(f"{FAKE_MARKER} readStream Some(t)"), report
    assert report["write"].endswith(f"{FAKE_MARKER} write Some(t)"), report


# -- batch reads ---------------------------------------------------------------------------------


def test_batch_read_all_with_headers(spark: Any, cluster: Any, topic: str) -> None:
    df = read_kafka(spark, cluster.bootstrap, subscribe=topic, includeHeaders="true")
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
    with pytest.raises(Exception, match="timestamp based ending offsets don't match"):
        subset = json.dumps({topic: {"0": T0}})
        read_kafka(spark, b, subscribe=topic, endingOffsetsByTimestamp=subset).collect()

    # No offset at or after the timestamp: an error by default, the end with strategy latest.
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
    df = read_kafka(spark, b, subscribe=f" {t2} , {t1},")
    assert df.count() == 3


def test_offset_ranges_split_across_tasks(spark: Any, cluster: Any, topic: str) -> None:
    b = cluster.bootstrap
    everything = {source_row(topic, p, j) for p in range(PARTS) for j in range(PER_PART)}
    default = read_kafka(spark, b, subscribe=topic)
    assert default.rdd.getNumPartitions() == PARTS  # one task per Kafka partition
    split = read_kafka(spark, b, subscribe=topic, minPartitions="12")
    assert split.rdd.getNumPartitions() == 12
    assert rows_of(split) == everything
    capped = read_kafka(spark, b, subscribe=topic, maxRecordsPerPartition="3")
    assert capped.rdd.getNumPartitions() == PARTS * 4  # 10 records -> 3+3+2+2
    assert rows_of(capped) == everything


def test_batch_fail_on_data_loss(spark: Any, cluster: Any) -> None:
    """A batch read whose starting offset has aged out: KAFKA_DATA_LOSS by default; with
    failOnDataLoss=false it reads from the earliest offset left."""
    b = cluster.bootstrap
    aged = aged_topic(b, unique("aged"))
    from_zero = json.dumps({aged: {"0": 0}})
    with pytest.raises(Exception, match=r"KAFKA_DATA_LOSS\.COULD_NOT_READ_OFFSET_RANGE"):
        read_kafka(spark, b, subscribe=aged, startingOffsets=from_zero).collect()
    df = read_kafka(spark, b, subscribe=aged, startingOffsets=from_zero, failOnDataLoss="false")
    assert [(bytes(r.value), r.offset) for r in df.collect()] == [(b"v4", 4)]
    df = read_kafka(spark, b, subscribe=aged)  # earliest: nothing lost
    assert [(bytes(r.value), r.offset) for r in df.collect()] == [(b"v4", 4)]


def test_split_ranges_like_the_official_calculator() -> None:
    ranges = [("t", 0, 0, 100), ("t", 1, 0, 10), ("t", 2, 5, 5)]
    assert [(p.partition, p.start, p.end) for p in split_ranges(ranges, None, None)] == [
        (0, 0, 100),
        (1, 0, 10),
    ]
    # minPartitions 4: the small partition stays whole, the big one gets the other 3 tasks.
    got = [(p.partition, p.start, p.end) for p in split_ranges(ranges, 4, None)]
    assert got == [(0, 0, 33), (0, 33, 66), (0, 66, 100), (1, 0, 10)]
    got = [(p.partition, p.start, p.end) for p in split_ranges(ranges, None, 40)]
    assert got == [(0, 0, 34), (0, 34, 68), (0, 68, 100), (1, 0, 10)]


# -- bad options: the official connector's messages ----------------------------------------------

BAD_READS = [
    (
        {},
        "One of the following options must be specified for Kafka source: subscribe, "
        "subscribepattern, assign. See the docs for more details.",
    ),
    (
        {"subscribe": "a", "assign": '{"a":[0]}'},
        "Only one of the following options can be "
        "specified for Kafka source: subscribe, subscribepattern, assign.",
    ),
    (
        {"subscribe": "a", "subscribePattern": "a.*"},
        "Only one of the following options can be specified",
    ),
    (
        {"subscribe": " , "},
        "No topics to subscribe to as specified value for option 'subscribe' is ' , '",
    ),
    (
        {"subscribePattern": "  "},
        "Pattern to subscribe is empty as specified value for option 'subscribePattern' is '  '",
    ),
    (
        {"assign": "a:0"},
        "No topicpartitions to assign as specified value for option 'assign' is 'a:0'",
    ),
    ({"assign": '{"a":0}'}, 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got {"a":0}'),
    (
        {"subscribe": "a", "startingOffsets": '{"a":{"0":x}}'},
        'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got {"a":{"0":x}}',
    ),
    (
        {"subscribe": "a", "endingOffsets": "[1, 2]"},
        'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got [1, 2]',
    ),
    (
        {"subscribe": "a", "startingOffsets": "latest"},
        "starting offset can't be latest for batch queries on Kafka",
    ),
    (
        {"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'},
        "startingOffsets for a-0 can't be latest for batch queries on Kafka",
    ),
    (
        {"subscribe": "a", "endingOffsets": "earliest"},
        "ending offset can't be earliest for batch queries on Kafka",
    ),
    (
        {"subscribe": "a", "startingTimestamp": "yesterday"},
        "Expected a single long value, got yesterday",
    ),
    ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
    (
        {"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
        "Kafka option 'auto.offset.reset' is not supported.",
    ),
    (
        {"subscribe": "a", "kafka.key.deserializer": "x"},
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays",
    ),
    (
        {"subscribe": "a", "kafka.enable.auto.commit": "true"},
        "Kafka option 'enable.auto.commit' is not supported",
    ),
    (
        {"subscribe": "a", "kafka.bootstrap.servers": None},
        "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer",
    ),
    (
        {"subscribe": "a", "startingOffsets": '{"a":{"0":5}}', "endingOffsets": '{"a":{"0":2}}'},
        "The specified start offset 5 is greater than the end offset 2 for topic a partition 0",
    ),
    (
        {"subscribe": "a", "kafka.security.protocol": "BOGUS"},
        "Kafka option 'kafka.security.protocol' is not valid",
    ),
    (
        # librdkafka calls it fetch.wait.max.ms; the error names the option given
        {"subscribe": "a", "kafka.fetch.max.wait.ms": "soon"},
        "Kafka option 'kafka.fetch.max.wait.ms' is not valid",
    ),
    (
        {"subscribe": "a", "kafka.sasl.jaas.config": "nonsense"},
        "Kafka option 'sasl.jaas.config' is not a JAAS login module configuration",
    ),
]


def test_bad_read_options_fail_naming_the_option(spark: Any, cluster: Any) -> None:
    for options, message in BAD_READS:
        r = spark.read.format("kafka")
        if "kafka.bootstrap.servers" not in options:
            r = r.option("kafka.bootstrap.servers", cluster.bootstrap)
        for k, v in options.items():
            if v is not None:
                r = r.option(k, v)
        with pytest.raises(Exception) as err:
            r.load().collect()
        assert message in str(err.value), (options, str(err.value)[-1500:])


def test_bad_stream_options(spark: Any, cluster: Any) -> None:
    def start(**options: str) -> Any:
        r = spark.readStream.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap)
        for k, v in options.items():
            r = r.option(k, v)
        return r.load().writeStream.format("noop").start()

    cases = [
        (
            {"subscribe": "a", "endingOffsets": "latest"},
            "ending offset not valid in streaming queries",
        ),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger must be positive"),
        ({"assign": "x"}, "No topicpartitions to assign as specified value for option 'assign'"),
    ]
    for options, message in cases:
        with pytest.raises(Exception) as err:
            q = start(**options)
            try:
                q.awaitTermination(60)
            finally:
                q.stop()
        assert message in str(err.value), (options, str(err.value)[-1500:])


def test_java_client_settings_map_to_librdkafka() -> None:
    module, opts = parse_jaas(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" '
        'password="p@ss;\\"w\\"";'
    )
    assert module.endswith("PlainLoginModule")
    assert opts == {"username": "bob", "password": 'p@ss;"w"'}
    conf = librdkafka_config(
        {
            "bootstrap.servers": "b:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="secret";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/ca.pem",
            "ssl.endpoint.identification.algorithm": "",
            "max.poll.records": "500",
            "fetch.max.wait.ms": "100",
            "client.rack": "r1",
        },
        "consumer",
    )
    assert conf == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "secret",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
        "fetch.wait.max.ms": "100",
        "client.rack": "r1",
    }
    with pytest.raises(IllegalArgumentException, match=r"ssl\.truststore\.location"):
        librdkafka_config({"ssl.truststore.location": "/x.jks"}, "consumer")


# -- streaming -----------------------------------------------------------------------------------


def _memory_query(df: Any, name: str, checkpoint: Path) -> Any:
    return (
        df.writeStream.format("memory")
        .queryName(name)
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

    # latest while records keep arriving: Spark asks for the initial offsets more than once
    # (planning batch 0, then running it), and the query must still read, from wherever it
    # started, every later record once: a gapless run of offsets up to the end.
    busy = create_topic(b, unique("busy"), 3, 3)
    stop = threading.Event()

    def feed() -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": b, "linger.ms": 1})
        i = 0
        while not stop.is_set():
            for p in range(3):
                producer.produce(busy, f"{i}-{p}".encode(), partition=p)
            producer.poll(0)
            i += 1
            time.sleep(0.002)
        assert producer.flush(30) == 0

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    name = unique("busy").replace("-", "_")
    q = _memory_query(stream_kafka(spark, b, subscribe=busy), name, tmp_path / "busy")
    try:

        def reading() -> bool:
            if not q.isActive:
                raise RuntimeError(f"the query stopped: {q.exception()}")
            return spark.sql(f"select * from {name}").count() > 30

        wait_for(reading, 60, "records read while producing", interval=0.2)
        stop.set()
        feeder.join(30)
        q.processAllAvailable()
        assert q.isActive, q.exception()
        offsets: dict[int, list[int]] = {}
        for r in spark.sql(f"select partition, offset from {name}").collect():
            offsets.setdefault(r.partition, []).append(r.offset)
    finally:
        stop.set()
        q.stop()
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": b, "group.id": unique("hw")})
    for p, offs in offsets.items():
        _lo, hi = c.get_watermark_offsets(TopicPartition(busy, p), timeout=10)
        assert sorted(offs) == list(range(hi - len(offs), hi)), p
    c.close()

    # Per-partition JSON (with -2 for earliest) and a global timestamp.
    start = {topic: {"0": 8, "1": -2, "2": 9, "3": 10, "4": 0, "5": 5}}
    name = unique("json").replace("-", "_")
    q = _memory_query(
        stream_kafka(spark, b, subscribe=topic, startingOffsets=json.dumps(start)),
        name,
        tmp_path / "json",
    )
    try:
        q.processAllAvailable()
        rows = rows_of(spark.sql(f"select * from {name}"))
    finally:
        q.stop()
    first = {"0": 8, "1": 0, "2": 9, "3": 10, "4": 0, "5": 5}
    assert rows == {
        source_row(topic, p, j) for p in range(PARTS) for j in range(first[str(p)], PER_PART)
    }

    name = unique("ts").replace("-", "_")
    q = _memory_query(
        stream_kafka(spark, b, subscribe=topic, startingTimestamp=str(T0 + 8000)),
        name,
        tmp_path / "ts",
    )
    try:
        q.processAllAvailable()
        rows = rows_of(spark.sql(f"select * from {name}"))
    finally:
        q.stop()
    assert rows == {source_row(topic, p, j) for p in range(PARTS) for j in (8, 9)}


def test_stream_latest_is_pinned_when_the_query_starts(cluster: Any) -> None:
    """startingOffsets "latest" means the latest offsets when the query starts (its
    initialOffset), as in the official connector: records produced after that and before the
    first micro-batch is planned are read. Driven as Spark drives the stream reader (one reader
    for the query run), without Spark's timing in the way."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    b = cluster.bootstrap
    t = create_topic(b, unique("early"), 2, 3)
    produce(b, t, [{"value": b"before", "partition": p} for p in range(2)])
    reader = KafkaStreamReader({"kafka.bootstrap.servers": b, "subscribe": t}, SCHEMA)
    try:
        start = reader.initialOffset()  # the query starts
        assert start == {t: {"0": 1, "1": 1}}
        produce(b, t, [{"value": f"early{p}".encode(), "partition": p} for p in range(2)])
        # Spark asks again when it plans batch 0 and when it runs it.
        assert reader.initialOffset() == start
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {t: {"0": 2, "1": 2}}
        values = [
            v
            for part in reader.partitions(start, end)
            for batch in reader.read(part)
            for v in batch.column("value").to_pylist()
        ]
    finally:
        reader.stop()
    assert sorted(values) == [b"early0", b"early1"]


def test_stream_restart_before_first_batch_commits(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    """A query from "latest" that dies in batch 0 (journaled, not committed) restarts while
    newer records exist: batch 0 is replayed (from this run's initial offsets, past its
    journaled end) without a false data-loss error, and what followed it is read once."""
    b = cluster.bootstrap
    t = create_topic(b, unique("first"), 2, 3)
    ck = tmp_path / "first"

    def fail(_batch: Any, batch_id: int) -> None:
        raise RuntimeError(f"batch {batch_id} fails on purpose")

    q = (
        stream_kafka(spark, b, subscribe=t)
        .writeStream.foreachBatch(fail)
        .option("checkpointLocation", str(ck))
        .start()
    )
    try:
        with pytest.raises(Exception, match="batch 0 fails on purpose"):
            q.awaitTermination(60)
    finally:
        q.stop()
    assert (ck / "offsets" / "0").exists() and not (ck / "commits" / "0").exists()

    produce(b, t, [{"value": f"after{p}".encode(), "partition": p} for p in range(2)])
    seen: list = []
    q = _collecting_query(stream_kafka(spark, b, subscribe=t), ck, seen)
    try:
        produce(b, t, [{"value": f"later{p}".encode(), "partition": p} for p in range(2)])
        wait_for(lambda: len(seen) >= 4 or not q.isActive, 60, "the restarted query")
        q.processAllAvailable()
        assert q.isActive, q.exception()
    finally:
        q.stop()
    assert sorted(bytes(r.value) for _, r in seen) == [b"after0", b"after1", b"later0", b"later1"]


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
        with pytest.raises(Exception, match="ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO") as e:
            strict.awaitTermination(60)
        assert f"Added partition {prefix}-b-0 starts from 4 instead of 0" in str(e.value)
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


def test_stream_max_offsets_per_trigger_and_restart(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    b = cluster.bootstrap
    topic = create_topic(b, unique("rate"), PARTS, 3)  # its own: the test adds records
    produce(b, topic, [source_record(p, j) for j in range(PER_PART) for p in range(PARTS)])
    ck = tmp_path / "rate"
    seen: list = []
    df = stream_kafka(
        spark, b, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="13"
    )
    q = _collecting_query(df, ck, seen)
    try:
        q.processAllAvailable()
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    sizes = [p["numInputRows"] for p in progress]
    # Each batch reads at most 13 records, shared in proportion to the partitions' backlog
    # (10 each: 13 * 10/60 -> 2 per partition).
    assert sizes == [12] * 5, sizes
    assert json.loads(progress[-1]["sources"][0]["endOffset"]) == {
        topic: {str(p): PER_PART for p in range(PARTS)}
    }
    per_batch: dict[int, int] = {}
    for batch_id, _ in seen:
        per_batch[batch_id] = per_batch.get(batch_id, 0) + 1
    assert sorted(per_batch.values()) == [12] * 5
    assert {(bytes(r.value), r.partition, r.offset) for _, r in seen} == {
        (f"v{p}-{j}".encode(), p, j) for p in range(PARTS) for j in range(PER_PART)
    }
    first_run = max(per_batch)

    # Restarted from its checkpoint with new data: only the new records, each once, in batches
    # numbered after the first run's.
    produce(b, topic, [{"value": b"extra", "partition": p} for p in range(PARTS)])
    seen.clear()
    q = _collecting_query(
        stream_kafka(spark, b, subscribe=topic, startingOffsets="earliest"), ck, seen
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted((bytes(r.value), r.partition, r.offset) for _, r in seen) == [
        (b"extra", p, PER_PART) for p in range(PARTS)
    ]
    assert min(batch_id for batch_id, _ in seen) > first_run


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
        assert "KAFKA_DATA_LOSS.PARTITIONS_DELETED" in str(strict.exception())

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
