"""How Rafka's cost grows with partitions, connections, groups and data (issue 16's curves).

    python bench/scale.py [--quick] [--skip partitions,failover,connections,groups,fetch,log]
                          [--partitions 6,1000,5000] [--profile DIR] [--dir D] [-o key=value ...]

Prints one table, every figure beside its bound and the step it is compared with (the
6-partition, 100-connection, 10-group or 1 GB figure of the same run):

- partitions per broker (3 brokers, RF 3, min.insync.replicas=2, a fresh cluster per step):
  acks=all produce MB/s of 1 KiB records spread at random over all the partitions (what keyed
  records cost: librdkafka sends a Produce request per partition, at 1,000 partitions of 25-30
  records where 6 partitions get about 500), beside the same with librdkafka's default sticky
  partitioner (full batches, one partition at a time): the median of 3 runs of each,
  interleaved, the runs printed too (on a 2-core machine shared by the client and three
  brokers one run can land in a slow phase); MB/s of one consumer reading them all back
  (assign, librdkafka), the median of as many runs; broker RSS per partition (RSS growth since
  the cluster started, over the partitions each broker holds) and idle CPU % of the busiest
  broker, both before any traffic, once every broker opened its replicas; Metadata v12 (all
  topics) latency p99 over raw requests, with p50 and the broker's CPU per request (all
  threads);
- failover at the largest step: kill -9 of the broker leading the most partitions (about a
  third), then the time until every partition has acknowledged an acks=all record sent after
  the kill (records go to every partition not yet done every 200 ms);
- idle connections (1 broker): N connections that completed ApiVersions and say nothing;
  broker CPU % and RSS, and the acks=all produce latency p99 of one active client at a fixed
  rate beside them;
- consumer groups (1 broker): N groups of one member each (raw JoinGroup / SyncGroup,
  heartbeats every 3 s); coordinator CPU % while they heartbeat, then OffsetCommit p99;
- fetch sessions (1 broker): a consumer of a 1,000-partition topic that gets a trickle of
  records; broker CPU per fetch (net of the trickle's own cost) with full fetches, and with a
  KIP-227 session whose fetches list only the partitions that moved. "n/a" until the broker
  opens sessions;
- log size (1 broker, 1 partition): the log grown to each size, written back to disk, kill -9,
  then the time from the restart to the first record produced and fetched back (the median of
  3 restarts).

--quick (a few minutes): partitions 6/100/1,000, connections 100/1,000, groups 10/100, log
1/2 GB. The full run (under an hour): partitions up to 5,000, connections up to 5,000, groups
up to 500, log up to 20 GB. A bound judged at a smaller step than the issue's (quick mode) says
so. --profile DIR records py-spy profiles of the brokers during the measured windows.
Figures only: nothing here fails on a timing; a part that cannot run prints n/a and why.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import scale_wire as wire
from bench.common import QUIET, start_cluster, work_dir
from bench.groups import create_topic
from bench.produce_consume import bench_producer, consume, measure, produce, try_or_say
from bench.replication import latency, median_runs
from bench.scale_proc import CpuMeter, Profiler, broker_pids, idle_cpu, rss_kb
from bench.scale_table import Table
from cluster.local import LocalCluster
from cluster.polling import wait_for

SPREAD = {"sticky.partitioning.linger.ms": 0}  # key-less records: a random partition each


@dataclass(frozen=True)
class Plan:
    partitions: list[int]
    mb: int  # produced per produce run (and consumed) in a partition step
    connections: list[int]
    groups: list[int]
    log_gb: list[int]
    idle_s: float  # CPU windows
    metadata_requests: int
    latency_s: float
    commit_s: float
    fetch_s: float
    fetch_partitions: int = 1000
    trickle_per_s: int = 20
    rounds: int = 3  # runs of each partitioner, consume runs, restarts (medians are the figures)


QUICK = Plan([6, 100, 1000], 200, [100, 1000], [10, 100], [1, 2], 5, 100, 5, 5, 8)
# 3 runs of 200 MB a produce run in both: more grows the page cache of a step past about 5 GB,
# into memory this VM's host has not backed yet, and the later runs slow down whatever the
# partitions.
FULL = Plan(
    [6, 100, 1000, 5000], 200, [100, 1000, 5000], [10, 100, 500], [1, 5, 20], 10, 300, 10, 10, 15
)


@dataclass
class Run:
    """What one run measured, by section and step."""

    plan: Plan
    overrides: dict[str, str]
    profiler: Profiler | None
    keep: bool = False  # --dir: the clusters' data stays for a look afterwards
    partitions: dict[int, dict[str, float | str]] = field(default_factory=dict)
    failover: dict[str, float | str] = field(default_factory=dict)
    connections: dict[int, dict[str, float]] = field(default_factory=dict)
    groups: dict[int, dict[str, float]] = field(default_factory=dict)
    fetch: dict[str, float | str] = field(default_factory=dict)
    log: dict[int, dict[str, float]] = field(default_factory=dict)

    def profile(self, label: str, pids: dict[str, int]) -> contextlib.AbstractContextManager:
        return self.profiler.window(label, pids) if self.profiler else contextlib.nullcontext()


# -- partitions per broker, and failover -------------------------------------------------------


def produce_all(bootstrap: str, mb: int, conf: Mapping[str, object]) -> float:
    """acks=all produce of `mb` MB to the `scale` topic, as `measure` runs it."""
    return produce(bootstrap, "scale", mb, "all", logger=QUIET, **conf)


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap}, logger=QUIET)


def create_replicated(bootstrap: str, topic: str, partitions: int) -> AdminClient:
    """A topic of RF 3 and min.insync.replicas=2, once every replica is in sync (the wait
    grows with the partitions: 5,000 take a while to come up)."""
    admin = _admin(bootstrap)
    timeout = 60 + partitions / 20
    new = NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new], request_timeout=timeout)[topic].result(timeout)

    def in_sync() -> bool:
        try:
            md = admin.list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException:
            return False
        return (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values())
        )

    wait_for(in_sync, timeout, f"{topic}: {partitions} partitions in sync", interval=0.5)
    return admin


def wait_replicas_open(cluster: LocalCluster, topic: str, partitions: int) -> None:
    """Until every broker has opened its replica of each partition (the ISR of a new topic is
    complete at once, while the brokers still create the logs): idle means idle after this."""
    first_segment = f"{0:020d}.log"

    def opened() -> bool:
        return all(
            sum(1 for _ in _log_dir(cluster, node).glob(f"{topic}-*/{first_segment}")) >= partitions
            for node in broker_pids(cluster)
        )

    wait_for(opened, 60 + partitions / 20, f"{topic}: replicas opened", interval=0.5)


def partition_step(work: Path, n: int, run: Run, with_failover: bool) -> None:
    """One fresh 3-broker cluster with one topic of ``n`` partitions: memory and idle CPU
    first (before any traffic grows the buffers), then Metadata, produce, consume, failover."""
    plan = run.plan
    print(f"partitions: {n} ...", flush=True)
    with contextlib.ExitStack() as stack:
        if not run.keep:  # the next steps need the disk space (3 copies of every run)
            stack.callback(shutil.rmtree, work / f"partitions-{n}", True)
        cluster = start_cluster(work / f"partitions-{n}", 3, 3, run.overrides, stack)
        pids = broker_pids(cluster)
        before = {name: rss_kb(pid) for name, pid in pids.items()}
        admin = create_replicated(cluster.bootstrap, "scale", n)
        wait_replicas_open(cluster, "scale", n)
        out = run.partitions[n] = {}
        cpu = idle_cpu(pids, plan.idle_s, run.profile(f"idle-{n}p", pids))
        out["idle_cpu"] = max(cpu.percent.values())
        growth = [rss_kb(pid) - before[name] for name, pid in pids.items()]
        out["rss_kb"] = sum(growth) / len(growth) / n
        port = cluster.nodes["broker-1"].port
        meter = CpuMeter({"broker-1": pids["broker-1"]}).start()
        with run.profile(f"metadata-{n}p", {"broker-1": pids["broker-1"]}):
            lat = wire.metadata_latencies(port, plan.metadata_requests)
        out["metadata_cpu_ms"] = 1000 * meter.stop().seconds["broker-1"] / len(lat)
        out["metadata_p99"] = wire.p99(lat)
        out["metadata_p50"] = statistics.median(lat)
        runs: dict[str, list[float | str]] = {"produce": [], "produce_sticky": []}
        for _ in range(plan.rounds):  # interleaved: both see the same machine
            for key, conf in (("produce", SPREAD), ("produce_sticky", {})):
                with run.profile(f"{key}-{n}p", pids):
                    runs[key].append(
                        measure(partial(produce_all, cluster.bootstrap, plan.mb, conf))
                    )
        with run.profile(f"consume-{n}p", pids):
            runs["consume"] = [
                measure(lambda: consume(cluster.bootstrap, "scale", n, plan.mb))
                for _ in range(plan.rounds)
            ]
        for key, figures in runs.items():  # the median: one run can land in a bad phase
            median = median_runs(figures)
            out[key] = "n/a" if median is None else median
            out[f"{key}_runs"] = " ".join(
                f"{f:.0f}" if isinstance(f, float) else "n/a" for f in figures
            )
        print(f"  {_brief(out)}", flush=True)
        fenced = lease_fencings(cluster)
        if fenced:
            print(
                f"  WARNING: the meta service fenced a broker {fenced} time(s) in this step (no "
                f"heartbeat within broker.session.timeout.ms): its figures are suspect; the "
                f"logs are in {cluster.data_dir / 'logs'} (--dir keeps them)",
                flush=True,
            )
        if with_failover:
            print(f"failover: kill -9 of a broker of {n} partitions ...", flush=True)
            result = try_or_say("failover", lambda: failover(cluster, admin, "scale", n))
            if isinstance(result, dict):
                run.failover = result


def lease_fencings(cluster: LocalCluster) -> int:
    """How often the meta nodes fenced a live broker for a missed heartbeat (a broker whose
    event loop stalled that long), from their logs."""
    return sum(
        path.read_text(errors="replace").count("sent no heartbeat within")
        for path in (cluster.data_dir / "logs").glob("meta-*.log")
    )


def _brief(figures: Mapping[str, float | str]) -> str:
    return ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
    )


def failover(cluster: LocalCluster, admin: AdminClient, topic: str, n: int) -> dict[str, float]:
    """kill -9 of the broker leading the most partitions; seconds until every partition
    acknowledged an acks=all record sent after the kill (its own and all of them)."""
    md = admin.list_topics(topic, timeout=30).topics[topic]
    leaders = {p.id: p.leader for p in md.partitions.values()}
    victim = max(set(leaders.values()), key=list(leaders.values()).count)
    led = {p for p, leader in leaders.items() if leader == victim}
    producer = bench_producer(
        cluster.bootstrap, "all", logger=QUIET, **{"linger.ms": 5, "message.timeout.ms": 60_000}
    )
    for p in range(n):  # warm: every partition's leader connected and known
        producer.produce(topic, b"", partition=p)
    if producer.flush(60):
        raise RuntimeError("the warm-up records were not all acknowledged")
    done: dict[int, float] = {}

    def acked(p: int, err: object, _msg: object) -> None:
        if err is None and p not in done:
            done[p] = time.monotonic()

    callbacks = [partial(acked, p) for p in range(n)]
    t_kill = time.monotonic()
    cluster.kill(f"broker-{victim}")
    deadline = t_kill + 90
    while len(done) < n and time.monotonic() < deadline:
        with contextlib.suppress(BufferError):  # a full queue: the next round sends again
            for p in range(n):
                if p not in done:
                    producer.produce(topic, b"", partition=p, on_delivery=callbacks[p])
        round_end = time.monotonic() + 0.2
        while time.monotonic() < round_end:
            producer.poll(0.02)
    if len(done) < n:
        raise RuntimeError(f"{n - len(done)} of {n} partitions took no acks=all record in 90 s")
    return {
        "all_s": max(done.values()) - t_kill,
        "led_s": max(done[p] for p in led) - t_kill,
        "led": len(led),
    }


# -- idle connections, consumer groups and fetch sessions on one broker --------------------------


def connections(cluster: LocalCluster, run: Run) -> None:
    plan = run.plan
    port, pids = cluster.nodes["broker-1"].port, broker_pids(cluster)
    create_topic(cluster.bootstrap, "scale-latency", 1, 1)
    for n in plan.connections:
        print(f"idle connections: {n} ...", flush=True)
        conns = wire.idle_connections(port, n)
        try:
            cpu = idle_cpu(pids, plan.idle_s, run.profile(f"conns-{n}", pids))
            lat = latency(cluster.bootstrap, "scale-latency", 5, plan.latency_s)
            run.connections[n] = {
                "cpu": cpu.percent["broker-1"],
                "rss_mb": rss_kb(pids["broker-1"]) / 1024,
                "p99": lat["p99"],
            }
        finally:
            wire.close_all(conns)
        print(f"  {_brief(run.connections[n])}", flush=True)


def groups(cluster: LocalCluster, run: Run) -> None:
    plan = run.plan
    port, pids = cluster.nodes["broker-1"].port, broker_pids(cluster)
    create_topic(cluster.bootstrap, "scale-commits", 1, 1)
    for n in plan.groups:
        print(f"consumer groups: {n} ...", flush=True)
        joined = wire.join_groups(port, [f"scale-{n}-{i}" for i in range(n)], "scale-commits")
        try:
            cpu = idle_cpu(pids, plan.idle_s, run.profile(f"groups-{n}", pids))
            with run.profile(f"commits-{n}", pids):
                lat = wire.commit_latencies(joined, "scale-commits", plan.commit_s)
            run.groups[n] = {
                "cpu": cpu.percent["broker-1"],
                "p99": wire.p99(lat),
                "commits": len(lat),
                "heartbeat_errors": len(joined.errors),
            }
        finally:
            joined.close()
        print(f"  {_brief(run.groups[n])}", flush=True)


class Trickle:
    """A producer sending ``per_s`` records a second to random partitions, in a thread."""

    def __init__(self, bootstrap: str, topic: str, per_s: int) -> None:
        self.producer = bench_producer(bootstrap, "1", logger=QUIET, **SPREAD)
        self.topic, self.per_s = topic, per_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1 / self.per_s):
            self.producer.produce(self.topic, b"t" * 100)
            self.producer.poll(0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(30)


def fetch_sessions(cluster: LocalCluster, run: Run) -> None:
    """Broker CPU per fetch of a 1,000-partition consumer, without and with a session, net of
    what the trickle of records costs the broker on its own (measured first)."""
    plan, n = run.plan, run.plan.fetch_partitions
    port, pids = cluster.nodes["broker-1"].port, broker_pids(cluster)
    print(f"fetch sessions: {n} partitions, {plan.trickle_per_s} records/s ...", flush=True)
    create_topic(cluster.bootstrap, "scale-fetch", n, 1)
    wait_replicas_open(cluster, "scale-fetch", n)  # opening them is CPU the base would count
    trickle = Trickle(cluster.bootstrap, "scale-fetch", plan.trickle_per_s)
    try:
        base = idle_cpu(pids, plan.fetch_s)
        base_rate = base.seconds["broker-1"] / base.wall
        for mode, sessions in (("without", False), ("with", True)):
            meter = CpuMeter(pids).start()
            try:
                with run.profile(f"fetch-{mode}-sessions", pids):
                    done = wire.fetch_loop(port, "scale-fetch", n, plan.fetch_s, sessions)
            except wire.NoSession as e:
                run.fetch[mode] = f"n/a: {e}"
                continue
            meter.stop()
            net = meter.seconds["broker-1"] - base_rate * meter.wall
            run.fetch[mode] = 1000 * max(net, 0.0) / done.fetches
            run.fetch[f"{mode}_fetches"] = float(done.fetches)
            run.fetch[f"{mode}_listed"] = done.partitions_sent / done.fetches
            run.fetch[f"{mode}_session_errors"] = float(done.session_errors)
    finally:
        trickle.close()
    print(f"  {_brief(run.fetch)}", flush=True)


# -- log size and restart ------------------------------------------------------------------------


def _log_dir(cluster: LocalCluster, node: str) -> Path:
    return Path(
        next(
            line.split("=", 1)[1]
            for line in cluster.nodes[node].config_file.read_text().splitlines()
            if line.startswith("log.dirs=")
        )
    )


def _partition_bytes(cluster: LocalCluster, topic: str) -> int:
    log_dir = _log_dir(cluster, "broker-1")
    return sum(f.stat().st_size for f in (log_dir / f"{topic}-0").iterdir() if f.is_file())


def first_served(bootstrap: str, topic: str, deadline: float) -> None:
    """Produce one record (acks=1) and fetch it back, retrying until ``deadline``."""
    fast = {"reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200, "logger": QUIET}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", **fast})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-probe", **fast})
    try:
        offset: list[int] = []

        def acked(err: object, msg: Message) -> None:
            at = msg.offset()
            if err is None and at is not None:
                offset.append(at)

        while not offset:
            if time.monotonic() > deadline:
                raise TimeoutError("no produce acknowledged")
            producer.produce(topic, b"probe", partition=0, on_delivery=acked)
            producer.flush(2)
        consumer.assign([TopicPartition(topic, 0, offset[0])])
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return
        raise TimeoutError("the produced record was not fetched")
    finally:
        consumer.close()


def log_restart(work: Path, run: Run) -> None:
    """At each log size: kill -9 and restart `rounds` times; the medians of the times to
    listening and to serving (one restart's first produce and fetch swing with the client's
    reconnection backoff)."""
    with contextlib.ExitStack() as stack:
        cluster = start_cluster(work / "log", 1, 1, run.overrides, stack)
        create_topic(cluster.bootstrap, "scale-log", 1, 1)
        written = 0
        for gb in run.plan.log_gb:
            print(f"log size: {gb} GB, then kill -9 and restart ...", flush=True)
            produce(cluster.bootstrap, "scale-log", gb * 1000 - written, "1", logger=QUIET)
            written = gb * 1000
            os.sync()  # the restart should not wait on the writeback of the fill
            serving, listening = [], []
            for _ in range(run.plan.rounds):
                cluster.kill("broker-1")
                t = time.monotonic()
                cluster.start_node("broker-1")
                cluster.wait_ready(600, names=["broker-1"])
                listening.append(time.monotonic() - t)
                first_served(cluster.bootstrap, "scale-log", t + 600)
                serving.append(time.monotonic() - t)
            run.log[gb] = {
                "serving_s": statistics.median(serving),
                "listening_s": statistics.median(listening),
                "bytes": float(_partition_bytes(cluster, "scale-log")),
            }
            print(f"  {_brief(run.log[gb])}", flush=True)


# -- the run ---------------------------------------------------------------------------------------


def _section(name: str, skip: set[str], fn: Callable[[], object]) -> None:
    if name not in skip:
        try_or_say(name, fn)


def raise_fd_limit(connections: int) -> None:
    """Soft limit up to the hard one: the bench and the brokers it starts (they inherit it)
    hold a descriptor per idle connection."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard != resource.RLIM_INFINITY and hard < connections + 1000:
        print(f"the fd limit ({hard}) is below {connections} connections: expect n/a there")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller steps: a few minutes")
    parser.add_argument(
        "--skip", default="", help="any of partitions,failover,connections,groups,fetch,log"
    )
    parser.add_argument(
        "--partitions", help="partition steps instead of the plan's, e.g. 6,5000 (6 first)"
    )
    parser.add_argument("--profile", type=Path, help="py-spy profiles of the windows, here")
    parser.add_argument("-o", action="append", default=[], help="key=value for every node")
    parser.add_argument("--dir", type=Path, help="keep the clusters' data and logs here")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    plan = QUICK if args.quick else FULL
    if args.partitions:
        plan = replace(plan, partitions=sorted(int(n) for n in args.partitions.split(",")))
    raise_fd_limit(max(plan.connections))
    overrides = dict(kv.split("=", 1) for kv in args.o)
    profiler = Profiler(args.profile) if args.profile else None
    run = Run(plan, overrides, profiler, keep=args.dir is not None)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        work = work_dir(stack, args.dir)
        if "partitions" not in skip:
            for n in plan.partitions:
                last = n == plan.partitions[-1] and "failover" not in skip
                try_or_say(f"{n} partitions", partial(partition_step, work, n, run, last))
        if not skip >= {"connections", "groups", "fetch"}:
            single = start_cluster(work / "single", 1, 1, overrides, stack)
            _section("connections", skip, lambda: connections(single, run))
            _section("groups", skip, lambda: groups(single, run))
            _section("fetch", skip, lambda: fetch_sessions(single, run))
        _section("log", skip, lambda: log_restart(work, run))
    Table(run.plan, skip).print(run)
    if run.profiler is not None:
        print(f"py-spy profiles ({len(run.profiler.files)}) in {args.profile}")
    print(f"bench took {time.monotonic() - started:.0f}s (--quick: {args.quick})")


if __name__ == "__main__":
    main()
