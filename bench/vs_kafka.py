"""Rafka side by side with Apache Kafka 4.4 on this machine: issue 28's table.

    python bench/vs_kafka.py [--quick] [--mb 1000] [--rounds 3] [--kills 3] [--logs-gb 10]
                             [--skip single,replicated] [--dir D] [--profile DIR [--rows 7a,8]]

Kafka 4.4 in KRaft mode, as one combined node (broker and controller in one JVM) or three
brokers and a controller, each JVM with a 1 GB heap (kafka-server-start.sh's default,
-Xmx1G -Xms1G: 4 GB for the replicated shape on this 2-core, 23 GB machine); Rafka as one meta
node and one or three brokers. Both get the same topic settings, the same client (librdkafka
through confluent-kafka; Kafka's own Java producer for row 4j, which sends a quarter of the
MB of the other throughput rows: it runs at a few MB/s here) and 1 KiB records. The two
clusters of a shape run side by side and every row is measured on both in one run, the order
alternated from row to row and round to round; each system gets an untimed produce first (a
JVM just started runs interpreted). The machine is shared: the ratio within a run is the figure
to read, not the absolute MB/s. The table (Markdown) gives both figures (medians over the
rounds), Rafka / Kafka, and issue 28's floor; a row that could not be measured says why.
Figures only: nothing here fails on a timing.

Row 8 kills the partition leader ``--kills`` times per round on each system (the killed broker
started again and back in sync before the next kill) and gives the median of every kill. Row 11
restarts the single-broker clusters once their logs hold ``--logs-gb`` GB (topped up with an
acks=1 produce over row 4's 1,000 partitions, if the disk has room: the note says what it had);
each shape's data is removed when its clusters stop (unless --dir keeps it).

--profile DIR: py-spy profiles (raw collapsed stacks, which speedscope opens) of every Rafka
broker during each row's Rafka runs (``--rows``: only those rows), for naming the cause of a
row that misses its floor. py-spy samples from a process beside the broker and takes CPU from
the 2 cores: a profiled run's figures are not the table's. Rows 8 and 11 kill or restart
brokers: their profiles end with the process that was running at the row's start.

--quick: 200 MB per throughput run, one round, 20 transactions, 5 s latency windows, 10 s of
idle producers, 3 kills, no top-up for row 11: about 10 minutes with the machine to itself,
15-17 with other test runs beside it (load 15-20). The full run (1,000 MB, three rounds, 200
transactions, 15 s windows, 30 s of idle producers, 9 kills, 10 GB): about 35 minutes with the
machine to itself, an hour under that load. MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import MB, QUIET, RECORD, start_cluster, work_dir
from bench.groups import rebalance
from bench.produce_consume import bench_producer, consume, produce, send_all
from bench.replication import create_topic, failover, full_isr, latency, percentiles
from bench.scale_proc import CpuMeter, Profiler, peak_rss_kb
from bench.transactions import transactional_rate
from cluster.local import LocalCluster
from cluster.polling import wait_for
from tests.peers.apache_kafka import ApacheKafka
from tests.peers.kafka_tools import run_tool

SEGMENT = re.compile(r"\d{20}\.log")  # a partition log's segment file, on both systems
DISK_MARGIN = 15 * 10**9  # free disk row 11's top-up leaves to the machine's other users
HEAP = "1g"  # Kafka's default broker heap (kafka-server-start.sh): 4 JVMs fit 23 GB with room
PARTITIONS = 6
WIDE = 1000  # row 4's partitions
PER_TXN = 100  # row 9's records per transaction
GROUP_MEMBERS = 10  # row 7
GROUP_PARTITIONS = 60
# Settings both systems get where their defaults differ: a new group rebalances at once (Kafka's
# sample server.properties; the tests' Kafka has it), not after 3 s (the broker default).
SAME = {"group.initial.rebalance.delay.ms": "0"}


@dataclass
class Side:
    """One system of a pair: its bootstrap, its processes (for CPU and memory) and kill -9."""

    name: str
    bootstrap: str
    data: Path  # its nodes' directories
    pids: Callable[[], dict[str, int]]
    kill: Callable[[str], None]
    stop: Callable[[], None]  # a clean stop of every node
    start: Callable[[], None]  # every node not running started; returns when they serve
    profiler: Profiler | None = None  # --profile: its brokers are profiled during the rows
    profile_rows: frozenset[str] = frozenset()  # those rows only (none named: every row)

    def revive(self, _name: str) -> None:
        """Start a killed node again (`start` starts whatever is down)."""
        self.start()

    def profile(self, row: str, turn: int) -> contextlib.AbstractContextManager[None]:
        """A py-spy profile of the brokers during the block, with --profile."""
        if self.profiler is None or (self.profile_rows and row not in self.profile_rows):
            return contextlib.nullcontext()
        brokers = {n: pid for n, pid in self.pids().items() if n.startswith("broker")}
        return self.profiler.window(f"row{row}-turn{turn}", brokers)


def kafka_side(work: Path, brokers: int, stack: contextlib.ExitStack) -> Side:
    data = work / f"kafka-{brokers}"
    kafka = ApacheKafka(data, brokers=brokers, overrides=SAME, heap=HEAP)
    kafka.start(180)
    stack.callback(kafka.stop)

    def pids() -> dict[str, int]:
        return {n.name: n.proc.pid for n in kafka.nodes if n.proc and n.proc.poll() is None}

    restart = partial(kafka.start, 180, format_storage=False)
    return Side("kafka", kafka.bootstrap, data, pids, kafka.kill, kafka.stop, restart)


def rafka_side(work: Path, brokers: int, stack: contextlib.ExitStack) -> Side:
    data = work / f"rafka-{brokers}"
    cluster: LocalCluster = start_cluster(data, brokers, 1, SAME, stack)

    def pids() -> dict[str, int]:
        return {
            name: node.proc.pid
            for name, node in cluster.nodes.items()
            if node.proc is not None and node.proc.poll() is None
        }

    return Side(
        "rafka",
        cluster.bootstrap,
        data,
        pids,
        cluster.kill,
        cluster.stop,
        partial(cluster.start, 180),
    )


@dataclass
class Row:
    """One line of the table: both systems' figures and the floor of Rafka / Kafka."""

    n: str
    measure: str
    floor: float
    higher_is_better: bool
    figures: dict[str, list[float]] = field(default_factory=lambda: {"kafka": [], "rafka": []})
    failed: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def value(self, side: str) -> float | None:
        runs = self.figures[side]
        return statistics.median(runs) if runs else None

    def ratio(self) -> float | None:
        k, r = self.value("kafka"), self.value("rafka")
        return None if k is None or r is None or k == 0 else r / k

    def met(self) -> str:
        ratio = self.ratio()
        if ratio is None:
            return "-"
        ratio = round(ratio, 2)  # as printed: a ratio shown as 1.00 meets a floor of 1
        ok = ratio >= self.floor if self.higher_is_better else ratio <= self.floor
        return "yes" if ok else "NO"


def run_both(
    row: Row, sides: list[Side], turn: int, fn: Callable[[Side], float | list[float]]
) -> None:
    """fn on both systems, Kafka first on even turns and Rafka first on odd ones; a failure is
    kept as the row's reason, not raised. fn gives one figure, or several samples (row 8's
    kills), each a figure of the row's median."""
    for side in sides if turn % 2 == 0 else sides[::-1]:
        os.sync()  # the run before's dirty pages are not this run's cost
        print(f"  row {row.n} {side.name} ...", end="", flush=True)
        started = time.monotonic()
        try:
            with side.profile(row.n, turn):
                got = fn(side)
        except Exception as e:
            row.failed[side.name] = f"{type(e).__name__}: {e}"
            print(f" n/a ({row.failed[side.name]})", flush=True)
            continue
        samples = got if isinstance(got, list) else [got]
        row.figures[side.name].extend(samples)
        took = time.monotonic() - started
        print(f" {' '.join(f'{x:.2f}' for x in samples)} ({took:.0f} s)", flush=True)


# -- rows ----------------------------------------------------------------------------------------


class ProduceCost:
    """Row 1's produce, with row 10's CPU-seconds of all the system's processes beside it."""

    def __init__(self, mb: int, cpu: Row) -> None:
        self.mb = mb
        self.cpu = cpu

    def __call__(self, side: Side) -> float:
        meter = CpuMeter(side.pids()).start()
        rate = produce(side.bootstrap, "bench", self.mb, "1", logger=QUIET)
        meter.stop()
        self.cpu.figures[side.name].append(sum(meter.seconds.values()) / (self.mb * MB / 1e9))
        return rate


def peak_rss_mb(side: Side) -> float:
    """The sum of the system's processes' peak resident memory so far."""
    return sum(peak_rss_kb(pid) for pid in side.pids().values()) / 1024


def commits_per_s(txns: int, side: Side) -> float:
    return transactional_rate(side.bootstrap, "txn", txns * PER_TXN, PER_TXN) / PER_TXN


def group_formed_s(protocol: str, side: Side) -> float:
    """Seconds from creating 10 consumers to every one of them assigned (a fresh group)."""
    args = argparse.Namespace(
        members=GROUP_MEMBERS,
        partitions=GROUP_PARTITIONS,
        trials=0,
        brokers=1,
        protocol=protocol,
        heartbeat_ms=3000,
        assignor="range",
    )
    formed = rebalance(side.bootstrap, args)["formed"]
    assert isinstance(formed, float)
    return formed


class EndToEnd:
    """A consumer of a latency run's records as they arrive: its receive time minus each
    record's CreateTime (librdkafka stamps it at produce()), in ms."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.lat: list[float] = []
        conf = {"bootstrap.servers": bootstrap, "group.id": "e2e", "logger": QUIET}
        self.consumer = Consumer(conf | {"enable.auto.commit": False})
        ends = [
            self.consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
            for p in range(partitions)
        ]  # from the end as it is now: only the run's records, none left from before
        self.consumer.assign([TopicPartition(topic, p, o) for p, o in enumerate(ends)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self.consumer.consume(10_000, 0.1):
                if msg.error() is None:
                    self.lat.append(time.time() * 1000 - msg.timestamp()[1])

    def stop(self) -> dict[str, float]:
        """Once no record has come for a second (or after 60 s), the percentiles."""
        deadline = time.monotonic() + 60
        seen = -1
        while seen != len(self.lat) and time.monotonic() < deadline:
            seen = len(self.lat)
            time.sleep(1.0)  # a measurement window: records still arriving count
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()
        if len(self.lat) < 2:
            raise RuntimeError("the end-to-end consumer received no records")
        return percentiles(self.lat)


def latency_rows(mb_s: float, seconds: float, rows: dict[str, Row], side: Side) -> float:
    """Produce-ack (acks=all) and end-to-end latency at a fixed rate, into ``rows`` (keyed
    "ack p50", ..., "e2e p99.9"); returns the ack p99, the row run_both records."""
    e2e = EndToEnd(side.bootstrap, "bench", PARTITIONS)
    try:
        ack = latency(side.bootstrap, "bench", mb_s, seconds)
    finally:
        ends = e2e.stop()
    for q in ("p50", "p99", "p99.9"):
        rows[f"e2e {q}"].figures[side.name].append(ends[q])
        if q != "p99":
            rows[f"ack {q}"].figures[side.name].append(ack[q])
    return ack["p99"]


def idle_producers_cpu(producers: int, seconds: float, side: Side) -> float:
    """CPU % (of one core) of all the system's processes while ``producers`` idempotent
    producers each send one 1 KiB record a second."""
    clients = [
        Producer(
            {
                "bootstrap.servers": side.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "logger": QUIET,
            }
        )
        for _ in range(producers)
    ]
    value = b"x" * RECORD
    try:
        for p in clients:  # each has its producer id and its connection before the window
            p.produce("idle", value)
        for p in clients:
            if p.flush(60):
                raise RuntimeError("a producer's first record was not acknowledged in 60 s")
        meter = CpuMeter(side.pids()).start()
        start = time.monotonic()
        for tick in range(int(seconds)):
            for p in clients:
                p.produce("idle", value)
                p.poll(0)
            time.sleep(max(0.0, start + tick + 1 - time.monotonic()))
        meter.stop()
        return sum(meter.percent.values())
    finally:
        for p in clients:
            p.flush(30)


def log_bytes(side: Side) -> int:
    """The bytes of the system's partition logs (their segment files: 20-digit names)."""
    return sum(f.stat().st_size for f in side.data.rglob("*.log") if SEGMENT.fullmatch(f.name))


def top_up_mb(missing: dict[str, int], free: int) -> dict[str, int]:
    """MB to produce into each system for its logs to reach row 11's size (``missing`` bytes
    each), within ``free`` bytes of disk less DISK_MARGIN, shared evenly."""
    share = max(0, free - DISK_MARGIN) // max(1, len(missing))
    return {name: min(short, share) // MB for name, short in missing.items()}


def top_up_logs(sides: list[Side], target: int, work: Path) -> str:
    """acks=1 records over row 4's 1,000 partitions until each system's logs hold ``target``
    bytes, as far as the disk has room; says what each system then holds, for row 11's note."""
    missing = {s.name: max(0, target - log_bytes(s)) for s in sides}
    plan = top_up_mb(missing, shutil.disk_usage(work).free)
    for side in sides:
        if plan[side.name] * MB < missing[side.name] - MB:
            print(f"  row 11 {side.name}: the disk has no room for all {target / 1e9:g} GB")
        if plan[side.name] > 0:
            print(f"  row 11 {side.name}: {plan[side.name]} MB more logs ...", flush=True)
            produce(side.bootstrap, "wide", plan[side.name], "1", logger=QUIET)
    return ", ".join(f"{s.name} {log_bytes(s) / 1e9:.1f} GB" for s in sides)


def restart_serving_s(side: Side) -> float:
    """Seconds from starting every node again (after a clean stop) to each of the 1,000
    partitions of row 4 taking an acks=all record (what a user waits for after an upgrade)."""
    side.stop()
    start = time.monotonic()
    side.start()
    admin = AdminClient({"bootstrap.servers": side.bootstrap}, logger=QUIET)
    wait_for(lambda: full_isr(admin, "wide", WIDE, 1), 300, "wide: every partition led")
    producer = bench_producer(side.bootstrap, "all", logger=QUIET)
    for partition in range(WIDE):
        producer.produce("wide", b"x" * RECORD, partition=partition)
    if producer.flush(300):
        raise RuntimeError("records unacknowledged 300 s after the restart")
    return time.monotonic() - start


def failover_s(kills: int, side: Side) -> list[float]:
    """kill -9 of the leader of a 1-partition RF 3 topic, ``kills`` times: seconds from each
    kill to the first acks=all ack of a record sent after it (the killed broker is started
    again and back in sync before the next kill)."""
    took = failover(side, side.bootstrap, kills, side.revive)
    if not took:
        raise RuntimeError(f"no acks=all ack within 90 s of any of {kills} kills")
    return took


# -- the run ---------------------------------------------------------------------------------------

ROWS = [
    ("1", "produce 1 KiB acks=1, 1 broker, 6 partitions: MB/s", 1.0, True),
    ("2", "one consumer reading it: MB/s", 1.0, True),
    ("3", "RF 3, acks=all, min.insync 2, 3 brokers: MB/s", 0.8, True),
    ("4", "1,000 partitions, keyed, acks=all, librdkafka: MB/s", 0.5, True),
    ("4j", "1,000 partitions, round-robin, acks=all, Java producer: MB/s", 0.5, True),
    ("5a", "produce-ack p50 at 10 MB/s, acks=all, RF 3: ms", float("inf"), False),
    ("5b", "produce-ack p99 at 10 MB/s: ms", 1.5, False),
    ("5c", "produce-ack p99.9 at 10 MB/s: ms", float("inf"), False),
    ("5d", "end-to-end p50 at 10 MB/s: ms", float("inf"), False),
    ("5e", "end-to-end p99 at 10 MB/s: ms", 1.5, False),
    ("5f", "end-to-end p99.9 at 10 MB/s: ms", float("inf"), False),
    ("5g", "produce-ack p50 at 50 MB/s: ms", float("inf"), False),
    ("5h", "produce-ack p99 at 50 MB/s: ms", 1.5, False),
    ("5i", "produce-ack p99.9 at 50 MB/s: ms", float("inf"), False),
    ("5j", "end-to-end p50 at 50 MB/s: ms", float("inf"), False),
    ("5k", "end-to-end p99 at 50 MB/s: ms", 1.5, False),
    ("5l", "end-to-end p99.9 at 50 MB/s: ms", float("inf"), False),
    ("6", "200 idempotent producers, 1 record/s each: CPU % of all processes", 1.5, False),
    ("7a", "10 consumers joining, classic protocol: s until all assigned", 1.0, False),
    ("7b", "10 consumers joining, consumer protocol: s until all assigned", 1.0, False),
    ("8", "kill -9 of a partition leader: s to the first acks=all ack", 1.0, False),
    ("9", "transactions of 100 records: commits/s", 0.8, True),
    ("10a", "CPU-seconds per GB produced (row 1, all processes)", 1.0, False),
    ("10b", "peak RSS after rows 1-2, all processes: MB", 1.0, False),
    ("11", "restart to serving row 4's 1,000 partitions (logs: see the note): s", 1.0, False),
]


def warm_up(sides: list[Side], rf: int, acks: str, args: argparse.Namespace) -> None:
    """An untimed produce on each system first, in large batches and then in small ones at a
    low rate: a JVM just started runs Kafka interpreted until the JIT has compiled its hot
    paths (its first seconds of acks=all at 1 MB/s had a p50 of seconds here), and its first
    run would be the cost of that."""
    for side in sides:
        create_topic(side.bootstrap, "warm", PARTITIONS, rf, min(2, rf))
        produce(side.bootstrap, "warm", max(50, args.mb // 4), acks, logger=QUIET)
        latency(side.bootstrap, "warm", 1.0, 5.0)


def single_broker_rows(rows: dict[str, Row], sides: list[Side], args: argparse.Namespace) -> None:
    warm_up(sides, 1, "1", args)
    for side in sides:
        create_topic(side.bootstrap, "bench", PARTITIONS, 1, 1)
    cost = ProduceCost(args.mb, rows["10a"])
    for rnd in range(args.rounds):
        run_both(rows["1"], sides, rnd, cost)
        run_both(rows["2"], sides, rnd + 1, partial(_consume, args.mb))
    for side in sides:
        rows["10b"].figures[side.name].append(peak_rss_mb(side))
    for side in sides:
        create_topic(side.bootstrap, "txn", 1, 1, 1)
    for rnd in range(args.rounds):
        run_both(rows["9"], sides, rnd, partial(commits_per_s, args.txns))
    for rnd in range(max(3, args.rounds)):  # a few seconds each, and bimodal: see the README
        run_both(rows["7a"], sides, rnd + 1, partial(group_formed_s, "classic"))
        run_both(rows["7b"], sides, rnd, partial(group_formed_s, "consumer"))
    for side in sides:
        create_topic(side.bootstrap, "wide", WIDE, 1, 1)
    for rnd in range(args.rounds):
        run_both(rows["4"], sides, rnd + 1, partial(_keyed, args.mb))
        run_both(rows["4j"], sides, rnd, partial(java_spread, args.java_mb))
    for side in sides:
        create_topic(side.bootstrap, "idle", PARTITIONS, 1, 1)
    for rnd in range(args.rounds):
        run_both(rows["6"], sides, rnd, partial(idle_producers_cpu, 200, args.idle_s))
    held = top_up_logs(sides, int(args.logs_gb * 1e9), args.work)
    rows["11"].note = f"logs at the restart: {held} (target {args.logs_gb:g} GB)"
    run_both(rows["11"], sides, 1, restart_serving_s)  # last: it restarts the clusters


def _consume(mb: int, side: Side) -> float:
    return consume(side.bootstrap, "bench", PARTITIONS, mb)


def _keyed(mb: int, side: Side) -> float:
    return send_all(bench_producer(side.bootstrap, "all", logger=QUIET), "wide", mb, keys=WIDE)


def java_spread(mb: int, side: Side) -> float:
    """MB/s of Kafka's Java producer (kafka-producer-perf-test, kafka-clients 4.4) over the
    1,000 partitions: it sends no keys, so the round-robin partitioner spreads the records as
    keys would, every request carrying many partitions (the producer's defaults otherwise,
    acks=all, linger.ms=5)."""
    done = run_tool(
        "kafka-producer-perf-test",
        *("--topic", "wide", "--num-records", str(mb * MB // RECORD)),
        *("--record-size", str(RECORD), "--throughput", "-1", "--producer-props"),
        f"bootstrap.servers={side.bootstrap}",
        "acks=all",
        "linger.ms=5",
        "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
        timeout=900,
    )
    # its last line: "N records sent, R records/sec (M MB/sec), ..." (MB there is 2^20 bytes)
    rate = re.search(r"([\d.]+) records/sec[^\n]*\s*$", done.stdout)
    if done.returncode != 0 or rate is None:
        raise RuntimeError(
            f"kafka-producer-perf-test failed: {(done.stderr or done.stdout)[-300:]}"
        )
    return float(rate.group(1)) * RECORD / MB


def replicated_rows(rows: dict[str, Row], sides: list[Side], args: argparse.Namespace) -> None:
    warm_up(sides, 3, "all", args)
    for side in sides:
        create_topic(side.bootstrap, "bench", PARTITIONS, 3, 2)
    for rnd in range(args.rounds):
        run_both(
            rows["3"],
            sides,
            rnd,
            lambda s: produce(s.bootstrap, "bench", args.mb, "all", logger=QUIET),
        )
    for mb_s, first in ((10, "a"), (50, "g")):
        names = [f"{kind} {q}" for kind in ("ack", "e2e") for q in ("p50", "p99", "p99.9")]
        at = dict(zip(names, (rows[f"5{chr(ord(first) + i)}"] for i in range(6)), strict=True))
        for rnd in range(args.rounds):
            run_both(at["ack p99"], sides, rnd, partial(latency_rows, mb_s, args.latency_s, at))
    for side in sides:
        create_topic(side.bootstrap, "failover", 1, 3, 2)
    for rnd in range(args.rounds):
        run_both(rows["8"], sides, rnd, partial(failover_s, args.kills))
    rows["8"].note = f"the median of {args.kills} kills per round on each system"


def print_table(rows: dict[str, Row], args: argparse.Namespace) -> None:
    """The table in Markdown (as the README gives it), then every failure's reason."""
    print(
        f"\nRafka vs Apache Kafka 4.4, same machine, librdkafka, 1 KiB records, "
        f"{args.mb} MB per throughput run (row 4j: {args.java_mb} MB), median of "
        f"{args.rounds} round(s)" + (" (--quick)" if args.quick else "")
    )
    print("load average at the end:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print("\n| row | measure | Kafka 4.4 | Rafka | Rafka / Kafka | floor | met |")
    print("|---|---|---:|---:|---:|---|---|")
    for row in rows.values():
        k, r, ratio = row.value("kafka"), row.value("rafka"), row.ratio()
        if k is None and r is None:
            why = "; ".join(f"{s}: {e}" for s, e in row.failed.items()) or "skipped (--skip)"
            print(f"| {row.n} | {row.measure} | not measured: {why} | | | | |")
            continue
        unbound = row.floor == float("inf")
        cells = [
            row.n,
            row.measure,
            "n/a" if k is None else f"{k:.2f}",
            "n/a" if r is None else f"{r:.2f}",
            "-" if ratio is None else f"{ratio:.2f}",
            "-" if unbound else f"{'≥' if row.higher_is_better else '≤'} {row.floor:g}",
            "-" if unbound else row.met(),
        ]
        print(f"| {' | '.join(cells)} |")
    for row in rows.values():
        if row.note:
            print(f"  row {row.n}: {row.note}")
        for side, err in row.failed.items():
            print(f"  row {row.n} {side}: {err}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a few minutes' run")
    parser.add_argument("--mb", type=int, help="MB per throughput run (default 1000)")
    parser.add_argument("--rounds", type=int, help="runs of each row on each system (default 3)")
    parser.add_argument("--dir", type=Path, help="keep the clusters' data and logs here")
    parser.add_argument("--kills", type=int, help="row 8's kills per round (default 3)")
    parser.add_argument("--logs-gb", type=float, help="row 11's logs (default 10; --quick 0)")
    parser.add_argument("--skip", default="", help="single,replicated: a pair of clusters to skip")
    parser.add_argument("--profile", type=Path, help="py-spy profiles of Rafka's brokers, here")
    parser.add_argument("--rows", default="", help="with --profile: these rows only (7a,8)")
    args = parser.parse_args()
    args.mb = args.mb or (200 if args.quick else 1000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.txns = 20 if args.quick else 200
    args.latency_s = 5.0 if args.quick else 15.0
    args.idle_s = 10 if args.quick else 30
    args.java_mb = max(50, args.mb // 4)  # row 4j: Kafka's Java producer runs at a few MB/s here
    args.kills = args.kills or 3
    args.logs_gb = args.logs_gb if args.logs_gb is not None else (0.0 if args.quick else 10.0)
    profiler = Profiler(args.profile) if args.profile else None
    skip = set(filter(None, args.skip.split(",")))
    rows = {n: Row(n, m, floor, higher) for n, m, floor, higher in ROWS}
    started = time.monotonic()
    with contextlib.ExitStack() as outer:
        work = args.work = work_dir(outer, args.dir)
        for shape, brokers, fill in (
            ("single", 1, single_broker_rows),
            ("replicated", 3, replicated_rows),
        ):
            if shape in skip:
                continue
            print(f"{brokers} broker(s): starting Apache Kafka and Rafka ...", flush=True)
            with contextlib.ExitStack() as stack:
                if args.dir is None:  # the shape's logs (10 GB and more) go with its clusters
                    for name in (f"kafka-{brokers}", f"rafka-{brokers}"):
                        stack.callback(shutil.rmtree, work / name, ignore_errors=True)
                sides = [kafka_side(work, brokers, stack), rafka_side(work, brokers, stack)]
                sides[1].profiler = profiler
                sides[1].profile_rows = frozenset(filter(None, args.rows.split(",")))
                fill(rows, sides, args)
    print_table(rows, args)
    if profiler is not None:
        print(f"py-spy profiles ({len(profiler.files)}) in {args.profile}")
    print(f"bench took {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
