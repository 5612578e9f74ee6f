"""Spark's official Kafka connector on a SASL_SSL Rafka cluster with ACLs (secured_cluster.py):
the `kafka.*` options carry the Java client's security settings (SCRAM and PLAIN logins, a PEM
truststore) to the connector's producer, admin client and consumers; each principal can do
what its ACLs allow and no more."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from meta.acl import AclOperation, ResourceType
from tests.integration.secured_cluster import PASSWORDS, SecuredCluster, secured_cluster

from .conftest import wait_for
from .spark_fixtures import rows_of, spark, unique

__all__ = ["spark"]  # the fixture

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    with secured_cluster(tmp_path_factory.mktemp("spark-secured")) as s:
        yield s


def kafka_options(secured: SecuredCluster, user: str, mechanism: str) -> dict[str, str]:
    """The connector's options for `user`: what a Spark user passes to reach a SASL_SSL
    cluster, in the Java client's names."""
    module = LOGIN_MODULES[mechanism]
    return {
        "kafka.bootstrap.servers": secured.bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": (
            f'{module} required username="{user}" password="{PASSWORDS[user]}";'
        ),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": secured.ca,
    }


def _with(builder: Any, options: dict[str, str]) -> Any:
    for k, v in options.items():
        builder = builder.option(k, v)
    return builder


@pytest.fixture(scope="module")
def written(spark: Any, secured: SecuredCluster) -> tuple[str, int]:
    """A 3-partition topic that `writer` (SCRAM-SHA-512, WRITE on it) filled through the
    connector in two writes: records 0..14, then 15..29; record i in partition i % 3, a header
    on even ones. Also returns a timestamp (ms) between the two writes."""
    topic = unique("secured")
    secured.create_topic(topic, 3)
    secured.allow("User:writer", AclOperation.WRITE, ResourceType.TOPIC, topic)
    secured.allow("User:reader", AclOperation.READ, ResourceType.TOPIC, topic)
    options = kafka_options(secured, "writer", "SCRAM-SHA-512") | {"topic": topic}
    between = 0
    for first in (0, 15):
        if first:
            between = int(time.time() * 1000) + 1
            # The first write's records are stamped before `between`, the second's from it on.
            wait_for(lambda: time.time() * 1000 > between, 5, "the next millisecond")  # noqa: B023
        rows = [
            (f"k{i}", f"v{i}", i % 3, [("h", bytearray(str(i).encode()))] if i % 2 == 0 else None)
            for i in range(first, first + 15)
        ]
        df = spark.createDataFrame(
            rows,
            "key string, value string, partition int, "
            "headers array<struct<key:string,value:binary>>",
        )
        _with(df.write.format("kafka"), options).save()
    return topic, between


def _records(df: Any) -> tuple[set[tuple], dict[int, list[int]]]:
    """(key, value, topic, partition, headers) of each row, and the offsets read per
    partition (a write's tasks run in parallel: the order within a partition is theirs)."""
    records: set[tuple] = set()
    offsets: dict[int, list[int]] = {}
    for k, v, t, p, o, _ts, _type, h in rows_of(df):
        records.add((k, v, t, p, h))
        offsets.setdefault(p, []).append(o)
    return records, {p: sorted(o) for p, o in offsets.items()}


def _expected(topic: str, first: int = 0) -> tuple[set[tuple], dict[int, list[int]]]:
    """_records() of records first..29: 5 of each write in each partition."""
    records = set()
    for i in range(first, 30):
        headers = (("h", str(i).encode()),) if i % 2 == 0 else None
        records.add((f"k{i}".encode(), f"v{i}".encode(), topic, i % 3, headers))
    return records, {p: list(range(first // 3, 10)) for p in range(3)}


def test_batch_read_over_sasl_ssl(
    spark: Any, secured: SecuredCluster, written: tuple[str, int]
) -> None:
    """`reader` (SCRAM-SHA-256, READ on the topic) reads what `writer` wrote, with headers,
    split into more tasks than partitions, and from per-partition timestamps."""
    topic, between = written
    options = kafka_options(secured, "reader", "SCRAM-SHA-256") | {
        "subscribe": topic,
        "includeHeaders": "true",
        "minPartitions": "6",
    }
    df = _with(spark.read.format("kafka"), options).load()
    assert df.rdd.getNumPartitions() == 6
    assert _records(df) == _expected(topic)
    by_ts = json.dumps({topic: {str(p): between for p in range(3)}})
    df = _with(spark.read.format("kafka"), options | {"startingOffsetsByTimestamp": by_ts})
    assert _records(df.load()) == _expected(topic, first=15)


def test_stream_over_sasl_ssl(
    spark: Any, secured: SecuredCluster, written: tuple[str, int], tmp_path: Path
) -> None:
    """A streaming query of `reader` (PLAIN) reads the topic from its earliest offsets."""
    topic, _ = written
    options = kafka_options(secured, "reader", "PLAIN") | {
        "subscribe": topic,
        "startingOffsets": "earliest",
        "includeHeaders": "true",
    }
    name = unique("secured").replace("-", "_")
    q = (
        _with(spark.readStream.format("kafka"), options)
        .load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    assert _records(spark.sql(f"select * from {name}")) == _expected(topic)


def test_acls_hold_through_the_connector(
    spark: Any, secured: SecuredCluster, written: tuple[str, int]
) -> None:
    """`reader` has no WRITE on any topic: its write fails, as on Kafka, at the idempotent
    producer's InitProducerId (ClusterAuthorizationException: neither IDEMPOTENT_WRITE nor
    WRITE on a topic), and without idempotence at the produce (TopicAuthorizationException);
    nothing is added to the topic."""
    topic, _ = written
    df = spark.createDataFrame([("intruder",)], "value string")
    options = kafka_options(secured, "reader", "SCRAM-SHA-512") | {"topic": topic}
    with pytest.raises(Exception, match="ClusterAuthorizationException"):
        _with(df.write.format("kafka"), options).save()
    options |= {"kafka.enable.idempotence": "false"}
    with pytest.raises(Exception, match="TopicAuthorizationException"):
        _with(df.write.format("kafka"), options).save()
    options = kafka_options(secured, "reader", "SCRAM-SHA-512") | {"subscribe": topic}
    assert _with(spark.read.format("kafka"), options).load().count() == 30
