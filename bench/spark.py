"""Spark on Rafka through Spark's official Kafka connector: batch read throughput and
streaming end-to-end latency.

    python bench/spark.py [--jars DIR] [--mb 200] [--records 300000] [--rate 500]
                          [--seconds 30] [--skip batch,stream]

Starts its own cluster (3 brokers, 1 meta node, free ports) and a local[2] SparkSession with
spark-sql-kafka-0-10 at pyspark's version (--jars: a folder of its jars, as
tests/peers/setup.sh makes in .cache/peers/spark; default: Spark resolves it from Maven
Central), then prints:

- batch MB/s: `spark.read.format("kafka")` summing the value lengths of a 6-partition RF=3
  topic of 1 KiB records, beside a librdkafka consumer reading the same topic;
- batch records/s over a topic of order JSON (~150 B values), for a plain count and for the
  order pipeline's batch aggregation (parse JSON, 1-minute windows per store);
  each Spark figure is the better of two runs, the first one being warm-up;
- streaming: end-to-end latency of a Structured Streaming query that reads the topic, parses
  each order and writes it to another topic with format("kafka"), with input produced at a fixed
  rate: from a record's produce time (its Kafka timestamp) to when a consumer of the output
  topic receives it; p50 / p95 / p99 / max over the run, with the micro-batch trigger "as fast
  as possible" (Spark's default).

Figures only: nothing fails on a timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import MB, QUIET, RECORD
from bench.produce_consume import consume, produce
from cluster.local import LocalCluster, free_base_port
from spark.pipeline.events import make_orders


def _topic(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap}, logger=QUIET)
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=5).topics[name]
        if md.error is None and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{name}: no leaders")


def fill(bootstrap: str, topic: str, records: int) -> float:
    """Produce `records` order JSONs; returns the average value size."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "logger": QUIET,
        }
    )
    size = 0
    chunk = 50_000
    for first in range(0, records, chunk):
        for o in make_orders(min(chunk, records - first), first, first_id=first):
            v = o.to_json().encode()
            size += len(v)
            while True:
                try:
                    producer.produce(topic, v, key=o.store.encode())
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("produce did not finish")
    return size / records


def _best_of_two(fn: Callable[[], int]) -> tuple[float, float, int]:
    """(best seconds, first run's seconds, fn's result) of two runs of fn."""
    times, n = [], 0
    for _ in range(2):
        t0 = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t0)
    return min(times), times[0], n


def batch_mb(spark: object, bootstrap: str, mb: int) -> None:
    """MB/s of a batch read of `mb` MB of 1 KiB records, beside librdkafka's."""
    from pyspark.sql import functions as F

    topic = "bytes"
    _topic(bootstrap, topic, 6, 3)
    produce(bootstrap, topic, mb, logger=QUIET)

    def read() -> int:
        raw = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)  # type: ignore[attr-defined]
        df = raw.option("subscribe", topic).load()
        return int(df.agg(F.sum(F.length("value"))).first()[0])

    best, first, size = _best_of_two(read)
    print(
        f"  batch read     : {size / MB / best:10,.0f} MB/s  ({size / MB:,.0f} MB of {RECORD} B "
        f"records in {best:.2f}s; first run {first:.2f}s)"
    )
    print(f"  librdkafka     : {consume(bootstrap, topic, 6, mb):10,.0f} MB/s  (the same topic)")


def batch_records(spark: object, bootstrap: str, records: int) -> None:
    from spark.pipeline.jobs import aggregate_orders, kafka_reader, parse_orders

    _topic(bootstrap, "orders", 6, 3)
    t0 = time.perf_counter()
    avg = fill(bootstrap, "orders", records)
    print(
        f"  filled a 6-partition RF=3 topic with {records:,} orders "
        f"(~{avg:.0f} B values) in {time.perf_counter() - t0:.1f}s"
    )

    def count() -> int:
        rows: int = kafka_reader(spark.read, bootstrap, "orders").load().count()  # type: ignore[attr-defined]
        return rows

    def aggregate() -> int:
        raw = kafka_reader(spark.read, bootstrap, "orders").load()  # type: ignore[attr-defined]
        return aggregate_orders(parse_orders(raw)).count()

    for name, fn in (("count", count), ("aggregate", aggregate)):
        best, first, n = _best_of_two(fn)
        print(
            f"  batch {name:9s}: {records / best:10,.0f} records/s  ({records:,} records in "
            f"{best:.2f}s; first run {first:.2f}s; {n:,} rows out)"
        )


def stream(spark: object, bootstrap: str, rate: int, seconds: float, work: Path) -> None:
    from pyspark.sql import functions as F

    from spark.pipeline.jobs import ORDER_SCHEMA

    src, dst = "latency-in", "latency-out"
    _topic(bootstrap, src, 6, 3)
    _topic(bootstrap, dst, 6, 3)
    raw = (
        spark.readStream.format("kafka")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "latest")
        .load()
    )
    o = F.from_json(F.col("value").cast("string"), ORDER_SCHEMA)
    out = raw.select(
        F.col("key"),
        F.to_json(
            F.struct(
                o.order_id.alias("order_id"),
                o.amount_cents.alias("amount_cents"),
                (F.unix_micros("timestamp")).alias("produced_us"),
            )
        ).alias("value"),
    )
    query = (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(work / "latency-ck"))
        .start()
    )
    # startingOffsets "latest" is resolved when the query starts: produce after that.
    deadline = time.monotonic() + 120
    while query.status["message"] != "Waiting for data to arrive":
        if time.monotonic() > deadline or not query.isActive:
            print(f"  streaming: the query did not start ({query.status})")
            query.stop()
            return
        time.sleep(0.1)
    # Warm up: a few records through the whole path before measuring.
    warm = Producer({"bootstrap.servers": bootstrap, "logger": QUIET})
    for o_ in make_orders(60, 0):
        warm.produce(src, o_.to_json().encode(), key=o_.store.encode())
    warm.flush(30)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "latency",
            "logger": QUIET,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    c.assign([TopicPartition(dst, p, -1) for p in range(6)])  # -1: the end
    deadline = time.monotonic() + 120
    got_warm = 0
    while got_warm < 60 and time.monotonic() < deadline:
        got_warm += sum(1 for m in c.consume(1000, 0.5) if not m.error())
    if got_warm < 60:
        print(f"  streaming: warm-up records did not come through ({got_warm}/60)")
        query.stop()
        return

    latencies: list[float] = []
    expected = int(rate * seconds)
    done = threading.Event()

    def feed() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "logger": QUIET})
        orders = make_orders(expected, 0, first_id=1_000_000)
        start = time.perf_counter()
        sent = 0
        while sent < expected:
            due = min(expected, int(rate * (time.perf_counter() - start)) + 1)
            while sent < due:
                o_ = orders[sent]
                p.produce(src, o_.to_json().encode(), key=o_.store.encode())
                sent += 1
            p.poll(0)
            time.sleep(0.001)
        p.flush(60)
        done.set()

    threading.Thread(target=feed, daemon=True).start()
    deadline = time.monotonic() + seconds + 120
    while len(latencies) < expected and time.monotonic() < deadline:
        for m in c.consume(1000, 0.2):
            value = m.value()
            if m.error() or value is None:
                continue
            now_us = time.time() * 1e6
            latencies.append((now_us - json.loads(value)["produced_us"]) / 1000)
    c.close()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    query.stop()
    if not latencies:
        print("  streaming: n/a (nothing came through)")
        return
    q = statistics.quantiles(latencies, n=100)
    batches = [p["durationMs"].get("triggerExecution", 0) for p in progress]
    print(
        f"  streaming at {rate}/s for {seconds:.0f}s: {len(latencies):,}/{expected:,} records; "
        f"end-to-end latency p50 {q[49]:.0f} ms, p95 {q[94]:.0f} ms, p99 {q[98]:.0f} ms, "
        f"max {max(latencies):.0f} ms"
    )
    if batches:
        rows = statistics.median(p["numInputRows"] for p in progress)
        print(
            f"    {len(batches)} micro-batches, median {statistics.median(batches):.0f} ms each "
            f"(trigger execution), median {rows:.0f} records per batch"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--jars", help="the connector's jars: a folder or a comma-separated list")
    ap.add_argument("--mb", type=int, default=200, help="MB of 1 KiB records for batch MB/s")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rate", type=int, default=500, help="streaming input, records/s")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--skip", default="", help="comma-separated: batch, stream")
    ap.add_argument("--dir", type=Path)
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    work = args.dir or Path(tempfile.mkdtemp(prefix="rafka-bench-spark-"))
    cluster = LocalCluster(3, 1, work / "cluster", free_base_port(3, 1), {}, log_level="WARNING")
    cluster.start()
    try:
        from spark.session import rafka_spark_session

        t0 = time.perf_counter()
        spark = rafka_spark_session("rafka-bench", master="local[2]", jars=args.jars)
        print(
            f"Spark on Rafka (pyspark {spark.version}, spark-sql-kafka-0-10, local[2], 3 brokers):"
        )
        print(f"  SparkSession start: {time.perf_counter() - t0:.1f}s")
        if "batch" not in skip:
            batch_mb(spark, cluster.bootstrap, args.mb)
            batch_records(spark, cluster.bootstrap, args.records)
        if "stream" not in skip:
            stream(spark, cluster.bootstrap, args.rate, args.seconds, work)
        spark.stop()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
