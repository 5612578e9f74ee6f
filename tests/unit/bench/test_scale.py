"""The scale bench's pieces that decide what its table says: the verdicts against issue 16's
bounds, the group protocol bytes its raw members send, and the /proc readings."""

from __future__ import annotations

import os

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription
from kio.serial import entity_reader

from bench.scale import QUICK, Run
from bench.scale_proc import CpuMeter, cpu_seconds, rss_kb
from bench.scale_table import Row, Table
from bench.scale_wire import _assignment, _subscription


def _rows(run: Run, skip: set[str] | None = None) -> list[Row]:
    table = Table(run.plan, skip or set())
    table.print(run)
    return table.rows


def _row(rows: list[Row], step: str, what: str) -> Row:
    return next(r for r in rows if r[1] == step and r[2].startswith(what))


def test_throughput_at_1000_partitions_is_judged_against_the_6_partition_figure() -> None:
    run = Run(QUICK, {}, None)
    figures = {"rss_kb": 20.0, "idle_cpu": 1.0, "metadata_p99": 10.0}
    run.partitions[6] = {"produce": 100.0, "consume": 100.0, **figures}
    run.partitions[1000] = {"produce": 69.0, "consume": 71.0, **figures}
    rows = _rows(run)
    assert _row(rows, "1,000", "acks=all produce")[3:] == (
        "69.0 (69% of 6)",
        ">= 70% of 6-partition",
        "NO",
    )
    assert _row(rows, "1,000", "consume")[5] == "yes"
    assert _row(rows, "6", "acks=all produce")[4:] == ("", "")  # the baseline has no bound


def test_a_bound_set_at_5000_partitions_says_where_a_quick_run_judged_it() -> None:
    run = Run(QUICK, {}, None)
    run.partitions[1000] = {"idle_cpu": 2.5, "metadata_p99": 40.0, "rss_kb": 120.0}
    rows = _rows(run)
    idle = _row(rows, "1,000", "idle CPU")
    assert idle[4:] == ("< 2% at 5,000 (judged at 1,000: --quick)", "NO")
    assert _row(rows, "1,000", "Metadata")[5] == "yes"
    assert _row(rows, "1,000", "RSS")[5] == "NO"
    assert _row(rows, "1,000", "acks=all produce")[3:] == ("n/a", ">= 70% of 6-partition", "n/a")


def test_connections_groups_fetch_and_log_verdicts() -> None:
    run = Run(QUICK, {}, None)
    run.connections = {
        100: {"cpu": 0.1, "rss_mb": 90.0, "p99": 10.0},
        1000: {"cpu": 0.1, "rss_mb": 120.0, "p99": 25.0},
    }
    run.groups = {100: {"cpu": 1.0, "p99": 49.0, "commits": 10.0, "heartbeat_errors": 0.0}}
    run.fetch = {
        "without": 10.0,
        "without_fetches": 100.0,
        "without_listed": 1000.0,
        "with": 1.0,
        "with_fetches": 100.0,
        "with_listed": 5.0,
    }
    run.log = {
        1: {"serving_s": 2.0, "listening_s": 1.0, "bytes": 1e9},
        2: {"serving_s": 5.5, "listening_s": 1.0, "bytes": 2e9},
    }
    rows = _rows(run)
    assert _row(rows, "1,000", "produce p99")[5] == "NO"  # 2.5x the 100-connection p99
    assert _row(rows, "100", "OffsetCommit p99")[5] == "yes"
    assert _row(rows, "1,000 partitions", "cut by sessions")[3:] == ("10.0x", ">= 5x", "yes")
    assert _row(rows, "2.0 GB", "kill -9")[5] == "NO"  # within 10 s but grew past 2x


def test_skipped_sections_say_so_and_fetch_without_sessions_reads_n_a() -> None:
    run = Run(QUICK, {}, None)
    run.fetch = {"without": 10.0, "without_fetches": 1.0, "without_listed": 1000.0}
    run.fetch["with"] = "n/a: the broker opened no fetch session (KIP-227)"
    rows = _rows(run, {"partitions", "log"})
    assert _row(rows, "-", "all")[3] == "skipped"
    assert _row(rows, "1,000 partitions", "cut by sessions")[3:] == ("n/a", ">= 5x", "n/a")
    assert next(r for r in rows if r[0] == "log size")[3] == "skipped"


def test_group_member_bytes_are_the_consumer_protocol_v0() -> None:
    sub, _ = entity_reader(ConsumerProtocolSubscription)(_subscription("orders"), 2)
    assert sub.topics == ("orders",)
    assert sub.user_data is None
    assignment, _ = entity_reader(ConsumerProtocolAssignment)(_assignment("orders", 3), 2)
    (owned,) = assignment.assigned_partitions
    assert (owned.topic, owned.partitions) == ("orders", (3,))


def test_proc_readings_of_this_process() -> None:
    pid = os.getpid()
    meter = CpuMeter({"me": pid}).start()
    spent = cpu_seconds(pid)
    while cpu_seconds(pid) - spent < 0.05:  # burn a little CPU: the meter must see it
        sum(range(10_000))
    meter.stop()
    assert meter.seconds["me"] >= 0.05
    assert meter.percent["me"] > 0
    assert rss_kb(pid) > 1000


def test_a_long_reason_for_n_a_goes_below_the_table() -> None:
    run = Run(QUICK, {}, None)
    why = "n/a: 92530 deliveries failed (" + "x" * 100 + ")"
    run.partitions[6] = {"produce": why, "consume": 1.0}
    table = Table(run.plan, set())
    table.print(run)
    figure = _row(table.rows, "6", "acks=all produce")[3]
    assert len(figure) <= 64
    assert figure.endswith("[1]")
    assert table.notes == [f"[1] partitions/broker 6, acks=all produce MB/s: {why}"]
