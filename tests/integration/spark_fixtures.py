"""Shared pieces of the Spark tests (tests/integration/test_spark*.py).

One SparkSession for the whole pytest process (a JVM takes ~15 s to start, and PySpark allows
one SparkContext per process): `spark` hands it to every Spark test module. The cluster is
conftest's module-scoped `cluster`.

Run as a module it is the child process of the lookup-precedence test:
    python -m tests.integration.spark_fixtures precedence <fake-connector.jar>
"""

from __future__ import annotations

import atexit
import functools
import json
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.integration.conftest import running_cluster, wait_for

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _session() -> Any:
    from spark.session import rafka_spark_session

    spark = rafka_spark_session(
        "rafka-spark-tests",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            # Streaming tests poll their outputs; keep the state stores small and local.
            "spark.sql.streaming.stateStore.maintenanceInterval": "600s",
        },
    )
    atexit.register(spark.stop)
    return spark


@pytest.fixture(scope="module")
def spark() -> Any:
    return _session()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 6,
    rf: int = 3,
    configs: dict[str, str] | None = None,
) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})])[name].result(30)

    def ready() -> bool:
        md = admin.list_topics(name, timeout=10).topics[name]
        return (
            md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        )

    wait_for(ready, 30, f"topic {name} to have leaders")
    return name


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
    """records: dicts with value and optional key, partition, timestamp (ms), headers."""
    from confluent_kafka import Producer

    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for r in records:
        kwargs = {k: r[k] for k in ("key", "partition", "timestamp", "headers") if k in r}
        p.produce(
            topic, value=r["value"], on_delivery=lambda e, _m: e and errors.append(e), **kwargs
        )
    assert p.flush(30) == 0 and not errors, errors


def consume_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every record of `topic` (up to its current end), with a plain Kafka consumer."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    parts = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("check"), "enable.auto.commit": False}
    )
    out: list[Any] = []
    try:
        ends = {}
        for p in parts.topics[topic].partitions:
            _lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if hi > 0:
                ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + timeout
        while ends and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    continue
                out.append(m)
                if m.offset() + 1 >= ends.get(m.partition(), 0):
                    ends.pop(m.partition(), None)
        assert not ends, f"did not reach the end of {topic}: {ends}"
    finally:
        c.close()
    return out


def window_results(
    bootstrap: str, topic: str
) -> list[tuple[tuple[datetime, str], tuple[int, int, int]]]:
    """The order pipeline's results topic, a record a line: ((window start, store), (orders,
    items, revenue_cents)), records a replayed micro-batch wrote twice included."""
    out = []
    for m in consume_all(bootstrap, topic):
        v = json.loads(m.value())
        start = datetime.fromisoformat(v["window_start"].replace("Z", "+00:00"))
        out.append(((start, v["store"]), (v["orders"], v["items"], v["revenue_cents"])))
    return out


# -- the official connector's precedence ----------------------------------------------------------

# Stands in for spark-sql-kafka-0-10 (not installable here): a DataSourceRegister named "kafka",
# registered through META-INF/services as the real jar does, in the real provider's package
# and class name. Any use of it fails with a marker naming it.
FAKE_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
FAKE_MARKER = "FAKE-OFFICIAL-KAFKA-CONNECTOR"
_FAKE_SOURCE = """
package org.apache.spark.sql.kafka010;

import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.RelationProvider;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Map;

public class KafkaSourceProvider implements DataSourceRegister, RelationProvider,
        CreatableRelationProvider, StreamSourceProvider {
    static final String MARKER = "@MARKER@";

    public String shortName() { return "kafka"; }

    public BaseRelation createRelation(SQLContext ctx, Map<String, String> params) {
        throw new UnsupportedOperationException(MARKER + " read " + params.get("subscribe"));
    }

    public BaseRelation createRelation(SQLContext ctx, SaveMode mode,
            Map<String, String> params, Dataset<Row> data) {
        throw new UnsupportedOperationException(MARKER + " write " + params.get("topic"));
    }

    public Tuple2<String, StructType> sourceSchema(SQLContext ctx, Option<StructType> schema,
            String provider, Map<String, String> params) {
        throw new UnsupportedOperationException(MARKER + " readStream " + params.get("subscribe"));
    }

    public Source createSource(SQLContext ctx, String metadataPath, Option<StructType> schema,
            String provider, Map<String, String> params) {
        throw new UnsupportedOperationException(MARKER + " createSource");
    }
}
""".replace("@MARKER@", FAKE_MARKER)


def build_fake_official_jar(workdir: Path) -> Path:
    from spark.connector.shim import compile_jar

    src = workdir / "src" / "org" / "apache" / "spark" / "sql" / "kafka010"
    src.mkdir(parents=True)
    (src / "KafkaSourceProvider.java").write_text(_FAKE_SOURCE)
    jar = workdir / "fake-spark-sql-kafka-0-10.jar"
    compile_jar(
        [src / "KafkaSourceProvider.java"],
        workdir / "classes",
        jar,
        {"META-INF/services/org.apache.spark.sql.sources.DataSourceRegister": FAKE_PROVIDER + "\n"},
    )
    return jar


def _precedence_child(fake_jar: str) -> None:
    """With the fake official jar and Rafka's shim both on spark.jars: which one serves
    format("kafka") for read, readStream and write."""
    from spark.connector import kafka_provider, register
    from spark.session import rafka_spark_session

    spark = rafka_spark_session("precedence", master="local[1]", extra_jars=[fake_jar])
    report: dict[str, Any] = {"provider": kafka_provider(spark)}
    # Register Rafka's Python source under "kafka" anyway: the official connector must still
    # serve format("kafka").
    register(spark, force=True)
    bootstrap = "127.0.0.1:1"  # never contacted: the fake connector fails first
    attempts = {
        "read": lambda: (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "t")
            .load()
            .collect()
        ),
        "readStream": lambda: (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "t")
            .load()
        ),
        "write": lambda: (
            spark.createDataFrame([("v",)], "value string")
            .write.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", "t")
            .save()
        ),
    }
    for name, fn in attempts.items():
        try:
            fn()
            report[name] = "no error"
        except Exception as e:
            report[name] = str(e).splitlines()[0][:300]
    # Our Python source is registered in the session all the same: it must not matter.
    report["python_source_registered"] = bool(
        spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists("kafka")
    )
    spark.stop()
    print("PRECEDENCE " + json.dumps(report), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "precedence":
        _precedence_child(sys.argv[2])


# -- the cluster and topic the connector tests read and write ---------------------------------

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms
PARTS, PER_PART = 6, 10


def source_record(p: int, j: int) -> dict[str, Any]:
    r: dict[str, Any] = {
        "key": f"k{p}-{j}".encode(),
        "value": f"v{p}-{j}".encode(),
        "partition": p,
        "timestamp": T0 + j * 1000 + p,
    }
    if j % 2 == 0:
        r["headers"] = [("h", str(p).encode()), ("j", str(j).encode())]
    return r


def source_row(topic: str, p: int, j: int, headers: bool = False) -> tuple:
    r = source_record(p, j)
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


@pytest.fixture(scope="module")
def topic(cluster: Any) -> str:
    """6 partitions x 10 records: offset j of partition p has key k{p}-{j}, value v{p}-{j},
    timestamp T0 + j s + p ms, and headers on even offsets."""
    name = create_topic(cluster.bootstrap, unique("src"), PARTS, 3)
    produce(
        cluster.bootstrap,
        name,
        [source_record(p, j) for j in range(PER_PART) for p in range(PARTS)],
    )
    return name


def read_kafka(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def rows_of(df: Any) -> set[tuple]:
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


def stream_kafka(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()
