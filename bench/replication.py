"""Replication cost and failover, with librdkafka and 1 KiB records.

    python bench/replication.py [--mb 500] [--partitions 6] [--latency-mb-s 10] [--latency-s 10]
                                [--trials 5] [--rounds 3] [--skip throughput,latency,failover]
                                [--dir D] [-o key=value ...]

Prints, from one run:

- acks=all produce MB/s on 3 brokers with RF=3, min.insync.replicas=2, beside acks=1 MB/s on a
  single broker (RF=1) - the cost of replication on this machine. Both clusters run side by
  side and the two are measured in turn, ``--rounds`` times, each run after the page cache is
  written back (a run of a few seconds on this VM otherwise swings by a third with the
  writeback of the run before); the medians are printed, and the ratio of the two within each
  round (both runs of a round meet the same state of the machine: on this VM page-cache
  appends slow down as the cache grows into memory the host has not backed yet);
- produce latency p50 / p99 / max (send to delivery report) at a fixed 10 MB/s, acks=all, RF=3
  (a broker that cannot keep up shows as queueing latency);
- failover: kill -9 of a partition's leader to the first acks=all delivery of a record sent
  after the kill (so necessarily on the new leader), median / min / max of ``--trials``. It is
  how fast the meta service learns of the death and moves leadership (at worst after
  broker.session.timeout.ms: ``-o broker.session.timeout.ms=...`` to try other values) plus
  the client's metadata refresh.

Figures only: nothing here fails on a timing. A measurement that cannot complete (e.g. acks=all
never acknowledged while replication is missing) prints "n/a" and why. MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import MB, QUIET, RECORD, Killable, start_cluster, work_dir
from bench.produce_consume import bench_producer, measure, produce, try_or_say
from cluster.local import LocalCluster
from cluster.polling import wait_for


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap}, logger=QUIET)


def create_topic(bootstrap: str, name: str, partitions: int, rf: int, min_isr: int) -> bool:
    """Create the topic and wait for every replica to be in sync; True then (for `try_or_say`)."""
    admin = _admin(bootstrap)
    new = NewTopic(name, partitions, rf, config={"min.insync.replicas": str(min_isr)})
    admin.create_topics([new])[name].result(60)
    return wait_for(lambda: full_isr(admin, name, partitions, rf), 60, f"{name}: replicas in sync")


def full_isr(admin: AdminClient, topic: str, partitions: int, rf: int) -> bool:
    try:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
    except KafkaException:  # no broker answered (yet)
        return False
    if md is None or md.error is not None or len(md.partitions) != partitions:
        return False
    return all(p.leader >= 0 and len(p.isrs) >= rf for p in md.partitions.values())


def latency(bootstrap: str, topic: str, mb_s: float, seconds: float) -> dict[str, float]:
    """Send-to-delivery latency (ms) of acks=all records sent at a fixed rate: by each moment,
    ``rate x elapsed`` records have been handed to the client, no more."""
    producer = bench_producer(bootstrap, "all", logger=QUIET)
    value = b"x" * RECORD
    per_s = mb_s * MB / RECORD
    lat: list[float] = []
    failed: list = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failed.append(err)
        else:
            lat.append(msg.latency() * 1000)  # type: ignore[attr-defined]

    start = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - start < seconds:
        due = int(per_s * (now - start)) + 1
        while sent < due:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0.002)
    producer.flush(120)
    if not lat:
        raise RuntimeError(f"no record acknowledged ({len(failed)} failed: {failed[:1]})")
    return {
        **percentiles(lat),
        "max": max(lat),
        "rate": sent * RECORD / MB / seconds,
        "failed": len(failed),
    }


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50, p99 and p99.9 of at least two samples."""
    q = statistics.quantiles(samples, n=1000)
    return {"p50": q[499], "p99": q[989], "p99.9": q[998]}


def failover(
    cluster: Killable, bootstrap: str, trials: int, revive: Callable[[str], None]
) -> list[float]:
    """kill -9 the leader of the 1-partition RF=3 topic "failover" while records go out every
    5 ms; the time to the first acks=all delivery of a record sent after the kill. Start the
    killed broker again (`revive`, by its name), resync, repeat."""
    admin = _admin(bootstrap)
    producer = bench_producer(bootstrap, "all", logger=QUIET, **{"linger.ms": 0})
    times: list[float] = []
    for trial in range(trials):
        wait_for(lambda: full_isr(admin, "failover", 1, 3), 120, "failover: ISR back to 3")
        leader = admin.list_topics("failover", timeout=5).topics["failover"].partitions[0].leader
        took = one_failover(cluster, producer, f"broker-{leader}")
        if took is None:
            print(f"  failover trial {trial + 1}: no acks=all delivery within 90s of the kill")
        else:
            times.append(took)
            print(f"  failover trial {trial + 1}: broker-{leader} killed, {took:.2f}s")
        revive(f"broker-{leader}")
    producer.flush(60)
    return times


def restart_node(cluster: LocalCluster, name: str) -> None:
    """Start a killed node of a local cluster again; returns when it listens."""
    cluster.start_node(name)
    cluster.wait_ready(60, names=[name])


class _AckedAfter:
    """Delivery callback: when the first record sent at or after ``t_kill`` was acknowledged."""

    def __init__(self) -> None:
        self.t_kill = float("inf")
        self.first: float | None = None

    def __call__(self, err: object, msg: object) -> None:
        sent = float(msg.value())  # type: ignore[attr-defined]
        if err is None and sent >= self.t_kill and self.first is None:
            self.first = time.time()


def _failover(cluster: LocalCluster, trials: int) -> list[float]:
    create_topic(cluster.bootstrap, "failover", 1, 3, 2)
    return failover(cluster, cluster.bootstrap, trials, partial(restart_node, cluster))


def one_failover(cluster: Killable, producer: Producer, leader: str) -> float | None:
    acked = _AckedAfter()
    deadline = time.monotonic() + 91
    warm_until = time.monotonic() + 1.0
    while acked.first is None and time.monotonic() < deadline:
        if acked.t_kill == float("inf") and time.monotonic() >= warm_until:
            acked.t_kill = time.time()
            cluster.kill(leader)
        producer.produce("failover", f"{time.time():.6f}".encode(), on_delivery=acked)
        producer.poll(0.005)
    return None if acked.first is None else acked.first - acked.t_kill


def median_runs(runs: list[float | str]) -> float | None:
    """The median of the runs that completed (a failed run says why, once)."""
    for run in runs:
        if isinstance(run, str):
            print(f"  a throughput run failed: {run}")
    done = [r for r in runs if isinstance(r, float)]
    return statistics.median(done) if done else None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=500, help="MB per throughput run")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--latency-mb-s", type=float, default=10.0)
    parser.add_argument("--latency-s", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=5, help="failover trials")
    parser.add_argument("--rounds", type=int, default=3, help="throughput runs of each kind")
    parser.add_argument("-o", action="append", default=[], help="key=value for every node")
    parser.add_argument("--dir", type=Path, help="keep the clusters' data and logs here")
    parser.add_argument("--skip", default="", help="any of throughput,latency,failover")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    overrides = dict(kv.split("=", 1) for kv in args.o)
    started = time.monotonic()
    acks1 = acks_all = lat = fo = None
    ratios: list[float] = []
    with contextlib.ExitStack() as stack:
        work = work_dir(stack, args.dir)
        single = None
        if "throughput" not in skip:
            single = start_cluster(
                work / "single", 1, 1, {**overrides, "default.replication.factor": "1"}
            )
            stack.callback(single.stop)
            create_topic(single.bootstrap, "bench", args.partitions, 1, 1)

        print("3 brokers, RF=3, min.insync.replicas=2 ...", flush=True)
        repl = start_cluster(work / "repl", 3, 3, {**overrides, "min.insync.replicas": "2"})
        try:
            ok = try_or_say(
                "topic",
                lambda: create_topic(repl.bootstrap, "bench", args.partitions, 3, 2),
            )
            if ok and single is not None:
                runs: dict[str, list[float | str]] = {"1": [], "all": []}
                for i in range(args.rounds):
                    for acks, bootstrap in (("1", single.bootstrap), ("all", repl.bootstrap)):
                        print(f"round {i + 1}: acks={acks}, {args.mb} MB ...", end="", flush=True)
                        run = measure(partial(produce, bootstrap, "bench", args.mb, acks))
                        runs[acks].append(run)
                        print(f"  {run:.1f} MB/s" if isinstance(run, float) else f"  {run}")
                acks1, acks_all = median_runs(runs["1"]), median_runs(runs["all"])
                ratios = [
                    b / a
                    for a, b in zip(runs["1"], runs["all"], strict=True)
                    if isinstance(a, float) and isinstance(b, float)
                ]
            if ok and "latency" not in skip:
                print(f"latency at {args.latency_mb_s:g} MB/s for {args.latency_s:g}s ...")
                lat = try_or_say(
                    "latency",
                    lambda: latency(repl.bootstrap, "bench", args.latency_mb_s, args.latency_s),
                )
            if "failover" not in skip:
                print(f"failover, {args.trials} trials ...", flush=True)
                fo = try_or_say("failover", lambda: _failover(repl, args.trials))
        finally:
            for name in repl.nodes:  # nothing should be stopped, but never leave it so
                repl.signal_node(name, signal.SIGCONT)
            repl.stop()

    def mb(x: object) -> str:
        return ("skipped" if "throughput" in skip else "n/a") if x is None else f"{x:.1f}"

    print(f"\n{RECORD} B records, librdkafka, {args.partitions} partitions, {args.mb} MB per run")
    print(f"  1 broker,  RF=1, acks=1    produce {mb(acks1):>8} MB/s   (median of {args.rounds})")
    print(f"  3 brokers, RF=3, acks=all  produce {mb(acks_all):>8} MB/s   (min.insync.replicas=2)")
    if ratios:
        print(
            f"  acks=all / acks=1 within a round: median {statistics.median(ratios):.0%} "
            f"({', '.join(f'{r:.0%}' for r in ratios)})"
        )
    if isinstance(lat, dict):
        print(
            f"  acks=all latency at {args.latency_mb_s:g} MB/s: p50 {lat['p50']:.1f} ms, "
            f"p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms "
            f"(sent at {lat['rate']:.1f} MB/s, {lat['failed']} failed)"
        )
    else:
        print(f"  acks=all latency: {'skipped' if 'latency' in skip else 'n/a'}")
    if isinstance(fo, list) and fo:
        session = overrides.get("broker.session.timeout.ms", "9000 (default)")
        print(
            f"  failover (kill -9 leader -> first acks=all ack): median "
            f"{statistics.median(fo):.2f}s, min {min(fo):.2f}s, max {max(fo):.2f}s over "
            f"{len(fo)} trials (broker.session.timeout.ms={session})"
        )
    else:
        print(f"  failover: {'skipped' if 'failover' in skip else 'n/a'}")
    print(f"  bench took {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
