"""Rafka's Spark Kafka connector (spark/connector) against a 3-broker Rafka cluster: what
format("kafka") resolves to, the official connector's options and schema for batch and
streaming reads, the sink, and the official connector's errors for bad options."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from spark.connector import SHIM_CLASS, kafka_provider, lookup_provider
from spark.connector.client import librdkafka_config, parse_jaas
from spark.connector.options import IllegalArgumentException
from spark.connector.source import SCHEMA, KafkaStreamReader, split_ranges

from .conftest import running_cluster, wait_for
from .spark_fixtures import (
    FAKE_MARKER,
    FAKE_PROVIDER,
    REPO,
    build_fake_official_jar,
    create_topic,
    produce,
    spark,
    unique,
)

__all__ = ["spark"]  # the fixture

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms
PARTS, PER_PART = 6, 10


def _record(p: int, j: int) -> dict[str, Any]:
    r: dict[str, Any] = {
        "key": f"k{p}-{j}".encode(),
        "value": f"v{p}-{j}".encode(),
        "partition": p,
        "timestamp": T0 + j * 1000 + p,
    }
    if j % 2 == 0:
        r["headers"] = [("h", str(p).encode()), ("j", str(j).encode())]
    return r


def _row(topic: str, p: int, j: int, headers: bool = False) -> tuple:
    r = _record(p, j)
    row = (
        r["key"],
        r["value"],
        topic,
        p,
        j,
        datetime.fromtimestamp(r["timestamp"] / 1000, UTC),
        0,
    )
    if headers:
        hs = r.get("headers")
        row += (tuple(hs) if hs else None,)
    return row


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """conftest's 3-broker cluster, with retention enforced every 200 ms: the data-loss tests
    age records out of a topic (`aged_topic`)."""
    with running_cluster(
        tmp_path_factory.mktemp("cluster"), log_retention_check_interval_ms=200
    ) as c:
        yield c


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


@pytest.fixture(scope="module")
def topic(cluster: Any) -> str:
    """6 partitions x 10 records: offset j of partition p has key k{p}-{j}, value v{p}-{j},
    timestamp T0 + j s + p ms, and headers on even offsets."""
    name = create_topic(cluster.bootstrap, unique("src"), PARTS, 3)
    produce(cluster.bootstrap, name, [_record(p, j) for j in range(PER_PART) for p in range(PARTS)])
    return name


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _rows(df: Any) -> set[tuple]:
    out = set()
    for r in df.collect():
        t = (
            bytes(r.key),
            bytes(r.value),
            r.topic,
            r.partition,
            r.offset,
            r.timestamp.replace(tzinfo=UTC),
            r.timestampType,
        )
        if "headers" in r:
            t += (tuple((h.key, bytes(h.value)) for h in r.headers) if r.headers else None,)
        out.add(t)
    return out


# -- what format("kafka") is ---------------------------------------------------------------------


def test_format_kafka_resolves_to_rafka_source(spark: Any, cluster: Any, topic: str) -> None:
    assert kafka_provider(spark) == SHIM_CLASS
    df = _read(spark, cluster.bootstrap, subscribe=topic)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]
    df = _read(spark, cluster.bootstrap, subscribe=topic, includeHeaders="true")
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
    df = _read(spark, cluster.bootstrap, subscribe=topic, includeHeaders="true")
    expected = {_row(topic, p, j, True) for p in range(PARTS) for j in range(PER_PART)}
    assert _rows(df) == expected
    assert df.count() == PARTS * PER_PART
    # Without includeHeaders, the same records without the column.
    df = _read(spark, cluster.bootstrap, subscribe=topic)
    assert _rows(df) == {_row(topic, p, j) for p in range(PARTS) for j in range(PER_PART)}


def test_batch_offsets_json(spark: Any, cluster: Any, topic: str) -> None:
    start = {"0": 3, "1": -2, "2": 5, "3": 0, "4": 9, "5": -2}
    end = {"0": 7, "1": 4, "2": -1, "3": 0, "4": 10, "5": -1}
    df = _read(
        spark,
        cluster.bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: start}),
        endingOffsets=json.dumps({topic: end}),
    )
    resolve = {-2: 0, -1: PER_PART}
    expected = {
        _row(topic, p, j)
        for p in range(PARTS)
        for j in range(
            resolve.get(start[str(p)], start[str(p)]), resolve.get(end[str(p)], end[str(p)])
        )
    }
    assert _rows(df) == expected
    assert len(expected) == 4 + 4 + 5 + 0 + 1 + 10


def test_batch_timestamps(spark: Any, cluster: Any, topic: str) -> None:
    b = cluster.bootstrap
    # Offset j has timestamp T0 + j s (+ p ms): [3 s, 7 s) is offsets 3..6 of every partition.
    df = _read(
        spark, b, subscribe=topic, startingTimestamp=str(T0 + 3000), endingTimestamp=str(T0 + 7000)
    )
    assert _rows(df) == {_row(topic, p, j) for p in range(PARTS) for j in range(3, 7)}

    by_ts = {topic: {str(p): T0 + p * 1000 + p for p in range(PARTS)}}  # partition p from offset p
    df = _read(spark, b, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_ts))
    assert _rows(df) == {_row(topic, p, j) for p in range(PARTS) for j in range(p, PER_PART)}

    # Partition p up to offset p + 2 (exclusive); partition 5's end timestamp matches no offset,
    # which for an end means the latest offset.
    end_ts = {str(p): T0 + (p + 2) * 1000 + p for p in range(PARTS - 1)}
    end_ts[str(PARTS - 1)] = T0 + 3_600_000
    df = _read(spark, b, subscribe=topic, endingOffsetsByTimestamp=json.dumps({topic: end_ts}))
    expected = {_row(topic, p, j) for p in range(PARTS - 1) for j in range(p + 2)}
    assert _rows(df) == expected | {_row(topic, PARTS - 1, j) for j in range(PER_PART)}
    with pytest.raises(Exception, match="timestamp based ending offsets don't match"):
        subset = json.dumps({topic: {"0": T0}})
        _read(spark, b, subscribe=topic, endingOffsetsByTimestamp=subset).collect()

    # No offset at or after the timestamp: an error by default, the end with strategy latest.
    late = str(T0 + 3_600_000)
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        _read(spark, b, subscribe=topic, startingTimestamp=late).collect()
    df = _read(
        spark,
        b,
        subscribe=topic,
        startingTimestamp=late,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0


def test_assign_and_subscribe_pattern(spark: Any, cluster: Any, topic: str) -> None:
    b = cluster.bootstrap
    df = _read(spark, b, assign=json.dumps({topic: [1, 4]}))
    assert _rows(df) == {_row(topic, p, j) for p in (1, 4) for j in range(PER_PART)}

    prefix = unique("pat")
    t1, t2 = create_topic(b, f"{prefix}-a", 2, 1), create_topic(b, f"{prefix}-b", 1, 1)
    produce(b, t1, [{"value": b"a0", "partition": 0}, {"value": b"a1", "partition": 1}])
    produce(b, t2, [{"value": b"b0", "partition": 0}])
    df = _read(spark, b, subscribePattern=f"{prefix}-.*")
    assert sorted(bytes(r.value) for r in df.collect()) == [b"a0", b"a1", b"b0"]
    df = _read(spark, b, subscribe=f" {t2} , {t1},")
    assert df.count() == 3


def test_offset_ranges_split_across_tasks(spark: Any, cluster: Any, topic: str) -> None:
    b = cluster.bootstrap
    everything = {_row(topic, p, j) for p in range(PARTS) for j in range(PER_PART)}
    default = _read(spark, b, subscribe=topic)
    assert default.rdd.getNumPartitions() == PARTS  # one task per Kafka partition
    split = _read(spark, b, subscribe=topic, minPartitions="12")
    assert split.rdd.getNumPartitions() == 12
    assert _rows(split) == everything
    capped = _read(spark, b, subscribe=topic, maxRecordsPerPartition="3")
    assert capped.rdd.getNumPartitions() == PARTS * 4  # 10 records -> 3+3+2+2
    assert _rows(capped) == everything


def test_batch_fail_on_data_loss(spark: Any, cluster: Any) -> None:
    """A batch read whose starting offset has aged out: KAFKA_DATA_LOSS by default; with
    failOnDataLoss=false it reads from the earliest offset left."""
    b = cluster.bootstrap
    aged = aged_topic(b, unique("aged"))
    from_zero = json.dumps({aged: {"0": 0}})
    with pytest.raises(Exception, match=r"KAFKA_DATA_LOSS\.COULD_NOT_READ_OFFSET_RANGE"):
        _read(spark, b, subscribe=aged, startingOffsets=from_zero).collect()
    df = _read(spark, b, subscribe=aged, startingOffsets=from_zero, failOnDataLoss="false")
    assert [(bytes(r.value), r.offset) for r in df.collect()] == [(b"v4", 4)]
    df = _read(spark, b, subscribe=aged)  # earliest: nothing lost
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


def _stream(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_stream_starting_offsets(spark: Any, cluster: Any, topic: str, tmp_path: Path) -> None:
    b = cluster.bootstrap
    # latest (the default): only what arrives after the start.
    live = create_topic(b, unique("live"), 3, 3)
    produce(b, live, [{"value": b"old", "partition": p} for p in range(3)])
    name = unique("latest").replace("-", "_")
    q = _memory_query(_stream(spark, b, subscribe=live), name, tmp_path / "latest")
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
    q = _memory_query(_stream(spark, b, subscribe=busy), name, tmp_path / "busy")
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
        _stream(spark, b, subscribe=topic, startingOffsets=json.dumps(start)),
        name,
        tmp_path / "json",
    )
    try:
        q.processAllAvailable()
        rows = _rows(spark.sql(f"select * from {name}"))
    finally:
        q.stop()
    first = {"0": 8, "1": 0, "2": 9, "3": 10, "4": 0, "5": 5}
    assert rows == {_row(topic, p, j) for p in range(PARTS) for j in range(first[str(p)], PER_PART)}

    name = unique("ts").replace("-", "_")
    q = _memory_query(
        _stream(spark, b, subscribe=topic, startingTimestamp=str(T0 + 8000)),
        name,
        tmp_path / "ts",
    )
    try:
        q.processAllAvailable()
        rows = _rows(spark.sql(f"select * from {name}"))
    finally:
        q.stop()
    assert rows == {_row(topic, p, j) for p in range(PARTS) for j in (8, 9)}


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
        _stream(spark, b, subscribe=t)
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
    q = _collecting_query(_stream(spark, b, subscribe=t), ck, seen)
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
        df = _stream(
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
    produce(b, topic, [_record(p, j) for j in range(PER_PART) for p in range(PARTS)])
    ck = tmp_path / "rate"
    seen: list = []
    df = _stream(spark, b, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="13")
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
    q = _collecting_query(_stream(spark, b, subscribe=topic, startingOffsets="earliest"), ck, seen)
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
        df = _stream(
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
    got = sorted((bytes(r.key), bytes(r.value)) for r in _read(spark, b, subscribe=out).collect())
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
    got = _read(spark, b, subscribePattern=f"{out1}|{out2}", includeHeaders="true").collect()
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
        _stream(spark, b, subscribe=topic, startingOffsets="earliest")
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
    copied = _read(spark, b, subscribe=copy).collect()
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
    assert sorted(bytes(r.value) for r in _read(spark, b, subscribe=out).collect()) == [
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
        for r in _read(spark, b, subscribe=out).collect()
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


def test_stream_trigger_available_now(spark: Any, cluster: Any, topic: str, tmp_path: Path) -> None:
    """Trigger.AvailableNow reads what is there when the query starts, in rate-limited batches,
    and stops by itself."""
    seen: list = []

    def collect(batch: Any, batch_id: int) -> None:
        seen.extend((batch_id, r) for r in batch.collect())

    df = _stream(
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
