"""Shared pieces of the Spark tests (tests/integration/test_spark*.py).

One SparkSession for the whole pytest process (a JVM takes ~15 s to start, and PySpark allows
one SparkContext per process): `spark` hands it to every Spark test module. Its Kafka connector
is Spark's official one (spark-sql-kafka-0-10 at pyspark's version), whose jars
tests/peers/setup.sh resolves with Maven into .cache/peers/spark. The cluster is a
module-scoped 3-broker Rafka cluster.
"""

from __future__ import annotations

import atexit
import functools
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.expect import present
from tests.integration.conftest import running_cluster, wait_for
from tests.peers.apache_kafka import setup as peers_setup

REPO = Path(__file__).resolve().parents[2]


def connector_jars() -> Path:
    """The folder of the official connector's jars (Maven, through tests/peers/setup.sh)."""
    return peers_setup("spark")


@functools.cache
def _session() -> Any:
    from spark.session import rafka_spark_session

    spark = rafka_spark_session(
        "rafka-spark-tests",
        master="local[2]",
        jars=str(connector_jars()),
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
    from confluent_kafka import KafkaError, Message, Producer

    errors: list[KafkaError] = []

    def report(e: KafkaError | None, _m: Message) -> None:
        if e is not None:
            errors.append(e)

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for r in records:
        kwargs = {k: r[k] for k in ("key", "partition", "timestamp", "headers") if k in r}
        p.produce(topic, value=r["value"], on_delivery=report, **kwargs)
    assert p.flush(30) == 0, errors
    assert not errors, errors


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
                partition = present(m.partition())
                if present(m.offset()) + 1 >= ends.get(partition, 0):
                    ends.pop(partition, None)
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


# -- the cluster and topic the connector tests read and write ---------------------------------

# A whole hour a day before the run, in ms: recent enough that retention (7 days, Kafka's
# rule: the active segment goes too) never deletes the records while the tests read them.
T0 = (int(time.time()) // 3600 - 24) * 3600 * 1000
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
    row: tuple[Any, ...] = (
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
        t: tuple[Any, ...] = (
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
