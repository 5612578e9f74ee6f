"""The order pipeline (spark/pipeline) on PySpark in local mode, through Spark's official Kafka
connector, against a 3-broker Rafka cluster: the batch job's exact aggregates, and the
streaming job's micro-batches through a stop and a restart from its checkpoint, and through
kill -9 of the job and a restart."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from spark.pipeline.events import (
    BASE_TIME,
    Order,
    expected_aggregates,
    make_orders,
    produce_orders,
)
from spark.pipeline.jobs import run_batch, start_streaming, stop_gracefully
from tests.integration.conftest import wait_for

from .spark_fixtures import (
    REPO,
    connector_jars,
    consume_all,
    create_topic,
    spark,
    unique,
    window_results,
)

__all__ = ["spark"]  # the fixture


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _as_expected(rows: list[Any]) -> dict[tuple[datetime, str], tuple[int, int, int]]:
    return {(_utc(r.window_start), r.store): (r.orders, r.items, r.revenue_cents) for r in rows}


def _values(expected: dict) -> dict[tuple[datetime, str], tuple[int, int, int]]:
    return {k: (v.orders, v.items, v.revenue_cents) for k, v in expected.items()}


def test_batch_job_exact_aggregates(spark: Any, cluster: Any, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap
    topic = create_topic(bootstrap, unique("orders"), partitions=6, rf=3)
    results_topic = create_topic(bootstrap, unique("order-stats"), partitions=3, rf=3)
    orders = make_orders(3000, 0, 600, seed=11)  # 10 one-minute windows x 6 stores
    produce_orders(bootstrap, topic, orders)
    # Not order JSON: the job drops it.
    produce_orders_raw(bootstrap, topic, [b"not json", b'{"order_id": null}'])

    results = run_batch(spark, bootstrap, topic, str(tmp_path / "batch"), results_topic)

    expected = _values(expected_aggregates(orders, 60))
    got = _as_expected(results.collect())
    assert len(expected) == 60
    assert got == expected
    assert sum(v[0] for v in got.values()) == 3000

    # The same aggregates, as JSON keyed "<store>|<window start>", in the results topic.
    records = consume_all(bootstrap, results_topic)
    assert len(records) == 60
    by_key = {m.key().decode(): json.loads(m.value()) for m in records}
    assert len(by_key) == 60
    for (start, store), (n, items, revenue) in expected.items():
        v = by_key[f"{store}|{start:%Y-%m-%dT%H:%M:%SZ}"]
        assert (v["orders"], v["items"], v["revenue_cents"]) == (n, items, revenue)


def produce_orders_raw(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from .spark_fixtures import produce

    produce(bootstrap, topic, [{"value": v, "key": b"junk"} for v in values])


class _StreamRun:
    """A streaming job's outputs: its Parquet directory per micro-batch and its progress."""

    def __init__(self, spark: Any, out: Path) -> None:
        self.spark = spark
        self.out = out
        self.watermarks: dict[int, datetime] = {}

    def record_progress(self, query: Any) -> None:
        for p in query.recentProgress:
            wm = p.get("eventTime", {}).get("watermark")
            if wm and "addBatch" in p.get("durationMs", {}):
                self.watermarks[p["batchId"]] = datetime.fromisoformat(wm.replace("Z", "+00:00"))

    def batches(self) -> dict[int, dict[tuple[datetime, str], tuple[int, int, int]]]:
        if not self.out.exists() or not any(self.out.glob("batch_id=*/_SUCCESS")):
            return {}
        rows = self.spark.read.parquet(str(self.out)).collect()
        out: dict[int, list[Any]] = {}
        for r in rows:
            out.setdefault(r.batch_id, []).append(r)
        return {b: _as_expected(rs) for b, rs in out.items()}

    def wait_for(self, windows: set[tuple[datetime, str]], timeout: float = 90) -> dict:
        def done() -> dict | None:
            batches = self.batches()
            seen = {k for b in batches.values() for k in b}
            return batches if windows <= seen else None

        return wait_for(
            done, timeout, f"{len(windows)} windows in the Parquet output", interval=0.5
        )


def test_streaming_job_microbatches_restart(spark: Any, cluster: Any, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap
    topic = create_topic(bootstrap, unique("orders"), partitions=6, rf=3)
    results_topic = create_topic(bootstrap, unique("order-stats"), partitions=3, rf=3)
    out, checkpoint = tmp_path / "stream", tmp_path / "checkpoint"
    run = _StreamRun(spark, out)

    # Event time: A covers minutes 0-2, B minutes 3-4, C minutes 5-6; the watermark trails the
    # newest event by 30 s, so after A windows 0-1 are final, after B 2-3, after C 4-5.
    a = make_orders(600, 0, 180, seed=1, first_id=0)
    b = make_orders(400, 180, 300, seed=2, first_id=10_000)
    late = Order("o-late", "berlin", "sku-1", 1, 100_000, a[0].event_time)  # window 0, too late
    c = make_orders(400, 300, 420, seed=3, first_id=20_000)
    expected = _values(expected_aggregates(a + b + c, 60))

    def final(minutes: range) -> dict:
        starts = {BASE_TIME + timedelta(minutes=m) for m in minutes}
        return {k: v for k, v in expected.items() if k[0] in starts}

    def start() -> Any:
        return start_streaming(
            spark,
            bootstrap,
            topic,
            str(out),
            str(checkpoint),
            results_topic,
            trigger="500 milliseconds",
        )

    def emitted_by_then(query: Any, minutes: range) -> dict:
        """Every window of `minutes` in the output, the query idle: what it emitted so far."""
        batches = run.wait_for(set(final(minutes)))
        query.processAllAvailable()
        run.record_progress(query)
        return {k: v for rows in batches.values() for k, v in rows.items()}

    produce_orders(bootstrap, topic, a)
    query = start()
    try:
        assert emitted_by_then(query, range(2)) == final(range(2))
        produce_orders(bootstrap, topic, [*b, late])
        # the late order changed nothing
        assert emitted_by_then(query, range(4)) == final(range(4))
    finally:
        stop_gracefully(query)
    first_run_batches = set(run.batches())

    # While the job is down more orders arrive; the restarted job resumes from its checkpoint.
    produce_orders(bootstrap, topic, c)
    query = start()
    try:
        emitted_by_then(query, range(6))
    finally:
        stop_gracefully(query)

    batches = run.batches()
    assert min(set(batches) - first_run_batches) > max(first_run_batches)
    # Each window exactly once, in one micro-batch: nothing lost, nothing duplicated.
    all_rows = [k for rows in batches.values() for k in rows]
    assert len(all_rows) == len(set(all_rows)) == 36
    assert {k: v for rows in batches.values() for k, v in rows.items()} == final(range(6))
    # Each micro-batch emitted exactly the windows its watermark closed: those ending after the
    # previous batch's watermark and no later than its own.
    previous = datetime(1970, 1, 1, tzinfo=UTC)
    for batch_id in sorted(run.watermarks):
        wm = run.watermarks[batch_id]
        closed = {k for k in expected if previous < k[0] + timedelta(minutes=1) <= wm}
        assert set(batches.get(batch_id, {})) == closed, (batch_id, wm)
        previous = wm

    # The results topic has each window once, with the Parquet values.
    results = window_results(bootstrap, results_topic)
    assert len(results) == 36
    assert set(results) == set(final(range(6)).items())


def _checkpoint_progress(checkpoint: Path) -> tuple[int, int, bool]:
    """(last micro-batch in the offset log, records its end offsets cover, whether it was
    committed), from Spark's checkpoint files (offsets/<n>: "v1", metadata, the source's
    offsets JSON; commits/<n>)."""
    batch = max(int(f.name) for f in (checkpoint / "offsets").iterdir() if f.name.isdigit())
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    offsets = json.loads(lines[2])
    covered = sum(off for parts in offsets.values() for off in parts.values())
    return batch, covered, (checkpoint / "commits" / str(batch)).exists()


class _PipelineJob:
    """`python -m spark.pipeline stream` in a child process of its own process group (its
    JVM and Python workers with it), logging to a file."""

    def __init__(self, log: Path, args: list[str]) -> None:
        self.log = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "spark.pipeline", *args],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the job exited ({self.proc.returncode}): {self.tail()}")
        return True

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def kill(self) -> None:
        """kill -9 of the whole job: driver, JVM, Python workers."""
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


# Two runs of the job, each its own JVM and Python workers: minutes on a loaded 2-core
# machine, more than the default per-test timeout.
@pytest.mark.timeout(900)
def test_streaming_job_killed_and_restarted(spark: Any, cluster: Any, tmp_path: Path) -> None:
    """The streaming job (its own process, as `python -m spark.pipeline stream`) is killed with
    SIGKILL in the middle of its run, right after a micro-batch wrote its Parquet output, and
    restarted from its checkpoint: every window is in the Parquet output exactly once (a batch
    that did not commit is replayed and overwrites its output) and in the results topic."""
    bootstrap = cluster.bootstrap
    topic = create_topic(bootstrap, unique("orders"), partitions=6, rf=3)
    results_topic = create_topic(bootstrap, unique("order-stats"), partitions=3, rf=3)
    out, checkpoint = tmp_path / "stream", tmp_path / "checkpoint"
    run = _StreamRun(spark, out)
    orders = make_orders(1200, 0, 360, seed=13)  # 6 minutes x 6 stores
    expected = _values(expected_aggregates(orders, 60))
    assert len(expected) == 36
    produce_orders(bootstrap, topic, orders)
    args = ["--bootstrap", bootstrap, "--topic", topic, "--jars", str(connector_jars())]
    args += ["stream", "--output", str(out)]
    args += ["--checkpoint", str(checkpoint), "--results-topic", results_topic]
    args += ["--trigger", "500 milliseconds"]

    # 150 orders (45 s of event time) a micro-batch: the first windows close in batch 2 of 8.
    job = _PipelineJob(tmp_path / "run1.log", [*args, "--max-offsets-per-trigger", "150"])
    try:
        wait_for(
            lambda: job.alive() and any(out.glob("batch_id=*/_SUCCESS")),
            360,
            "the job's first Parquet output",
            interval=0.02,
        )
    finally:
        job.kill()
    batch, covered, committed = _checkpoint_progress(checkpoint)
    assert covered < len(orders), "the job had read everything before it was killed"
    print(
        f"killed in batch {batch} ({'committed' if committed else 'not committed'}), {covered} read"
    )

    # An order 20 minutes later moves the watermark past every window above.
    closing = Order("o-closing", "berlin", "sku-1", 1, 1, BASE_TIME + timedelta(minutes=20))
    produce_orders(bootstrap, topic, [closing])
    job = _PipelineJob(tmp_path / "run2.log", args)
    try:

        def complete() -> bool:
            """Every window in the Parquet output, and the job idle: its last micro-batch
            (Parquet, then the results topic) committed."""
            job.alive()
            try:
                batches = run.batches()
            except Exception:  # a batch directory being overwritten while listed: not yet
                return False
            windows = {k for rows in batches.values() for k in rows}
            return windows >= set(expected) and _checkpoint_progress(checkpoint)[2]

        wait_for(complete, 360, "every window in the output", interval=0.5)
    finally:
        job.kill()

    batches = run.batches()
    rows = [(k, v) for b in batches.values() for k, v in b.items()]
    assert len(rows) == len(dict(rows)) == 36, "a window was emitted twice"
    assert dict(rows) == expected
    # At least once in the results topic (a replayed batch writes its records again), with the
    # Parquet values.
    assert set(window_results(bootstrap, results_topic)) == set(expected.items())
