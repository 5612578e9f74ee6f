"""Spark's official Kafka connector through a broker failover: kill -9 of the leader of a
partition of an RF=3 topic while records stream in and two queries read it, one into a file
sink, one into another topic through the connector's (idempotent) producer. Neither query
stops, and both outputs have every record exactly once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.conftest import wait_for

from .spark_fixtures import cluster, consume_all, create_topic, produce, spark, stream_kafka, unique

__all__ = ["cluster", "spark"]  # the fixtures

RECORDS, CHUNK = 3000, 100


def _start(df: Any, fmt: str, checkpoint: Path, **options: str) -> Any:
    w = df.writeStream.format(fmt).option("checkpointLocation", str(checkpoint))
    for k, v in options.items():
        w = w.option(k, v)
    return w.trigger(processingTime="500 milliseconds").start()


def _ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ends")})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        c.close()


def test_stream_through_leader_kill(spark: Any, cluster: Any, tmp_path: Path) -> None:
    """kill -9 of a partition leader mid-stream: no gap and no duplicate in the file sink (per
    partition, offsets 0..end each once) nor in the topic the other query copies into."""
    b = cluster.bootstrap
    src = create_topic(b, unique("failover-in"), 6, 3)
    dst = create_topic(b, unique("failover-out"), 6, 3)
    out = tmp_path / "out"
    values = [f"r{i:05d}" for i in range(RECORDS)]
    # 250 records a micro-batch: the queries still have a backlog when the leader dies.
    source = stream_kafka(
        spark, b, subscribe=src, startingOffsets="earliest", maxOffsetsPerTrigger="250"
    )
    files = _start(
        source.selectExpr("CAST(value AS STRING) AS value", "partition", "offset"),
        "parquet",
        tmp_path / "ck-files",
        path=str(out),
    )
    copy = _start(
        source.selectExpr("key", "value"),
        "kafka",
        tmp_path / "ck-copy",
        **{"kafka.bootstrap.servers": b, "topic": dst},
    )
    queries = (files, copy)
    failure: list[BaseException] = []
    killed = threading.Event()

    def feed() -> None:
        """Half of the records before the kill, the other half through the failover."""
        try:
            for i in range(0, RECORDS, CHUNK):
                if i == RECORDS // 2:
                    killed.wait(120)
                chunk = values[i : i + CHUNK]
                produce(b, src, [{"key": v[-2:].encode(), "value": v.encode()} for v in chunk])
        except BaseException as e:  # reported by the test thread
            failure.append(e)

    def read() -> list[int]:
        """The records each query has read so far (it must still be running)."""
        for q in queries:
            assert q.isActive, q.exception()
        return [sum(p["numInputRows"] for p in q.recentProgress) for q in queries]

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        feeder.start()
        wait_for(lambda: min(read()) >= 500, 120, "both queries to read 500 records", 0.1)
        assert max(read()) < RECORDS // 2, "a query had read everything before the kill"
        md = AdminClient({"bootstrap.servers": b}).list_topics(src, timeout=10)
        victim = f"broker-{md.topics[src].partitions[0].leader}"
        cluster.kill(victim)
        killed.set()
        feeder.join(180)
        assert not feeder.is_alive(), failure
        assert not failure, failure
        for q in queries:  # until each has read and written all there is
            q.processAllAvailable()
            assert q.isActive, q.exception()
            assert q.exception() is None, q.exception()
    finally:
        for q in queries:
            q.stop()
        killed.set()
        feeder.join(30)

    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.value for r in rows) == values
    for p, end in _ends(b, src, 6).items():
        assert sorted(r.offset for r in rows if r.partition == p) == list(range(end)), p
    copied = sorted(m.value().decode() for m in consume_all(b, dst))
    assert copied == values
    print(f"killed {victim}: {len(rows)} records in the file sink, {len(copied)} copied")
