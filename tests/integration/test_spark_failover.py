"""The streaming order pipeline keeps running through a broker failover: kill -9 of the leader
of a partition of its RF=3 input topic while orders stream in, and its output is still exact
(no window lost, none duplicated)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from spark.pipeline.events import Order, expected_aggregates, make_orders, produce_orders
from spark.pipeline.jobs import start_streaming, stop_gracefully
from tests.integration.conftest import wait_for

from .spark_fixtures import create_topic, spark, unique, window_results

__all__ = ["spark"]  # the fixture


def test_streaming_through_broker_failover(spark: Any, cluster: Any, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap
    topic = create_topic(bootstrap, unique("orders"), partitions=6, rf=3)
    results_topic = create_topic(bootstrap, unique("order-stats"), partitions=3, rf=3)
    out = tmp_path / "out"
    # 6 minutes of event time, produced at ~200 orders/s in event-time order.
    orders = make_orders(1200, 0, 360, seed=5)
    expected = {
        k: (v.orders, v.items, v.revenue_cents) for k, v in expected_aggregates(orders).items()
    }
    assert len(expected) == 36

    query = start_streaming(
        spark,
        bootstrap,
        topic,
        str(out),
        str(tmp_path / "ck"),
        results_topic,
        trigger="500 milliseconds",
    )
    produced = threading.Event()
    failure: list[BaseException] = []

    def feed() -> None:
        try:
            for i in range(0, len(orders), 40):
                produce_orders(bootstrap, topic, orders[i : i + 40])
                time.sleep(0.2)
        except BaseException as e:  # reported by the test thread
            failure.append(e)
        finally:
            produced.set()

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        wait_for(
            lambda: query.lastProgress and query.lastProgress["batchId"] >= 0,
            60,
            "the first micro-batch",
        )
        feeder.start()
        # Once the job has read part of the stream, crash the leader of partition 0.
        wait_for(
            lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 200,
            60,
            "the job to read 200 orders",
            interval=0.1,
        )
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
        victim = f"broker-{md.topics[topic].partitions[0].leader}"
        cluster.kill(victim)
        killed_at = time.monotonic()
        produced.wait(120)
        assert not failure, failure
        # An order 20 minutes later moves the watermark past every window above.
        closing = Order(
            "o-closing", "berlin", "sku-1", 1, 1, datetime(2026, 1, 1, 0, 20, tzinfo=UTC)
        )
        produce_orders(bootstrap, topic, [closing])

        def all_windows() -> dict | None:
            if not any(out.glob("batch_id=*/_SUCCESS")):
                return None
            rows = spark.read.parquet(str(out)).collect()
            return rows if len(rows) >= len(expected) else None

        rows = wait_for(all_windows, 180, "every window in the output", interval=1.0)
        assert query.isActive and query.exception() is None
        recovery = time.monotonic() - killed_at
    finally:
        stop_gracefully(query)
        feeder.join(30)

    got = [
        ((r.window_start.replace(tzinfo=UTC), r.store), (r.orders, r.items, r.revenue_cents))
        for r in rows
    ]
    assert len(got) == len(dict(got)) == 36, "a window was emitted twice"
    assert dict(got) == expected
    # At least once in the results topic, with the Parquet values.
    assert set(window_results(bootstrap, results_topic)) == set(expected.items())
    print(f"killed {victim}; all windows out {recovery:.1f}s later")
