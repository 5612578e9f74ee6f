"""python -m spark.pipeline {topics,produce,batch,stream} — the order pipeline against a
Rafka (or any Kafka) cluster; the defaults match `make run` (127.0.0.1:9092-9094)."""

from __future__ import annotations

import argparse
import signal
import sys
import time

DEFAULT_BOOTSTRAP = "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark.pipeline", description=__doc__)
    p.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    p.add_argument("--topic", default="orders")
    p.add_argument(
        "--jars",
        help="Spark's Kafka connector (spark-sql-kafka-0-10 at pyspark's version) and its "
        "dependencies: a folder of jars or jars separated by commas; '' when Spark has it "
        "already (default: resolved from Maven Central, as spark-submit --packages does)",
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("topics", help="create the input and results topics")
    t.add_argument("--partitions", type=int, default=6)
    t.add_argument("--replication-factor", type=int, default=3)
    t.add_argument("--results-topic", default="order-stats")

    pr = sub.add_parser("produce", help="produce generated orders")
    pr.add_argument("--count", type=int, default=10_000)
    pr.add_argument("--start-s", type=float, default=0.0, help="event time of the first order")
    pr.add_argument("--seconds", type=float, help="event-time span (default: one per second)")
    pr.add_argument("--seed", type=int, default=7)
    pr.add_argument("--first-id", type=int, default=0)

    b = sub.add_parser("batch", help="aggregate the whole topic once")
    b.add_argument("--output", default="data/spark/batch")
    b.add_argument("--results-topic", default="order-stats")
    b.add_argument("--window", default="1 minute")

    s = sub.add_parser("stream", help="run the streaming job until Ctrl-C")
    s.add_argument("--output", default="data/spark/stream")
    s.add_argument("--checkpoint", default="data/spark/checkpoint")
    s.add_argument("--results-topic", default="order-stats")
    s.add_argument("--window", default="1 minute")
    s.add_argument("--watermark", default="30 seconds")
    s.add_argument("--trigger", default="2 seconds")
    s.add_argument("--max-offsets-per-trigger")

    args = p.parse_args(argv)

    if args.cmd == "topics":
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": args.bootstrap})
        new = [
            NewTopic(args.topic, args.partitions, args.replication_factor),
            NewTopic(args.results_topic, 3, args.replication_factor),
        ]
        for name, f in admin.create_topics(new).items():
            try:
                f.result()
                print(f"created {name}")
            except Exception as e:
                print(f"{name}: {e}")
        return 0

    if args.cmd == "produce":
        from .events import make_orders, produce_orders

        orders = make_orders(
            args.count,
            args.start_s,
            None if args.seconds is None else args.start_s + args.seconds,
            seed=args.seed,
            first_id=args.first_id,
        )
        n = produce_orders(args.bootstrap, args.topic, orders)
        print(f"produced {n} orders to {args.topic}")
        return 0

    from ..session import rafka_spark_session

    spark = rafka_spark_session(f"rafka-orders-{args.cmd}", jars=args.jars)
    if args.cmd == "batch":
        from .jobs import run_batch

        t0 = time.monotonic()
        results = run_batch(
            spark, args.bootstrap, args.topic, args.output, args.results_topic, window=args.window
        )
        results.orderBy("window_start", "store").show(50, truncate=False)
        print(
            f"{results.count()} window aggregates -> {args.output} and topic "
            f"{args.results_topic} in {time.monotonic() - t0:.1f}s"
        )
        return 0

    from .jobs import start_streaming, stop_gracefully

    extra = {}
    if args.max_offsets_per_trigger:
        extra["maxOffsetsPerTrigger"] = args.max_offsets_per_trigger
    q = start_streaming(
        spark,
        args.bootstrap,
        args.topic,
        args.output,
        args.checkpoint,
        args.results_topic,
        window=args.window,
        watermark=args.watermark,
        trigger=args.trigger,
        query_name="orders",
        **extra,
    )
    signal.signal(signal.SIGTERM, lambda *_: stop_gracefully(q))
    print(
        f"streaming {args.topic} -> {args.output} and topic {args.results_topic}; "
        "Ctrl-C stops (the checkpoint keeps the position)",
        flush=True,
    )
    try:
        printed = -1
        while q.isActive:
            time.sleep(1)
            for prog in q.recentProgress:
                if prog["batchId"] <= printed or "addBatch" not in prog["durationMs"]:
                    continue
                printed = prog["batchId"]
                print(
                    f"batch {prog['batchId']}: {prog['numInputRows']} rows in, watermark "
                    f"{prog.get('eventTime', {}).get('watermark')}",
                    flush=True,
                )
    except KeyboardInterrupt:
        stop_gracefully(q)
    if q.exception():
        print(q.exception(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
