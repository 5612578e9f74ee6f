"""Transactions: transactional beside idempotent produce, and read_committed latency, with
librdkafka (confluent-kafka) and 1 KiB records.

    python bench/transactions.py [--records 20000] [--per-txn 100] [--partitions 3]
                                 [--rounds 3] [--latency-txns 200] [--brokers 3]
                                 [--skip throughput,latency] [--dir D] [-o key=value ...]

Prints, from one run on a local cluster (topics with RF min(3, brokers), min.insync.replicas 2
when there are 3 brokers or more; acks=all):

- produce throughput, records/s and MB/s, of ``--records`` records: by an idempotent producer
  (produce, then flush) and by a transactional one (begin, ``--per-txn`` records, commit, again),
  measured in turn ``--rounds`` times on the same topic layout; medians, and the ratio of the two
  within each round - what a transaction per ``--per-txn`` records costs (AddPartitionsToTxn,
  EndTxn, one marker per partition written and replicated).
- end-to-end latency of read_committed: a transactional producer writes ``--per-txn`` records,
  flushes them (they are in the log but invisible to read_committed), then commits; a
  consumer with isolation.level=read_committed polls the topic. Per transaction: from the
  commit_transaction() call to the consumer holding the transaction's last record (EndTxn,
  markers, the LSO moving, the fetch), p50 / p99 / max over ``--latency-txns`` transactions, one
  at a time; beside it, how long commit_transaction() itself took, and how long the
  transaction took before it (begin, the records produced and acknowledged: AddPartitionsToTxn
  and the produce round trips).

Figures only: nothing here fails on a timing. A part that cannot complete (say the broker lacks
an API) prints "n/a" and why. MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
import uuid
from functools import partial
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import MB, QUIET, RECORD, start_cluster, work_dir
from bench.produce_consume import try_or_say
from bench.replication import create_topic
from cluster.polling import wait_for


def _producer(bootstrap: str, **conf: object) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "logger": QUIET, **conf}
    )


def _produce(
    producer: Producer, topic: str, value: bytes, key: bytes | None = None, partition: int = -1
) -> None:
    """produce() (partition -1: the partitioner's choice), waiting for room in the client's
    queue when it is full."""
    while True:
        try:
            producer.produce(topic, value, key=key, partition=partition)
            return
        except BufferError:
            producer.poll(0.005)


def idempotent_rate(bootstrap: str, topic: str, records: int) -> float:
    """records/s of an idempotent producer: `records` produced, then flushed."""
    failed: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    p = _producer(bootstrap, **{"enable.idempotence": True, "on_delivery": on_delivery})
    _produce(p, topic, b"warm")
    p.flush(60)
    value = b"x" * RECORD
    start = time.perf_counter()
    for _ in range(records):
        _produce(p, topic, value)
    left = p.flush(300)
    took = time.perf_counter() - start
    if left or failed:
        raise RuntimeError(f"{left} records unsent, {len(failed)} failed: {failed[:1]}")
    return records / took


def transactional_rate(bootstrap: str, topic: str, records: int, per_txn: int) -> float:
    """records/s of a transactional producer committing every `per_txn` records."""
    p = _producer(bootstrap, **{"transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(60)
    p.begin_transaction()  # warm: the coordinator, the partitions' leaders
    _produce(p, topic, b"warm")
    p.commit_transaction(60)
    value = b"x" * RECORD
    start = time.perf_counter()
    for first in range(0, records, per_txn):
        p.begin_transaction()
        for _ in range(min(per_txn, records - first)):
            _produce(p, topic, value)
        p.commit_transaction(120)
    return records / (time.perf_counter() - start)


def throughput(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """Idempotent and transactional runs in turn, `--rounds` times."""
    runs: dict[str, list[float]] = {"idempotent": [], "transactional": []}
    for i in range(args.rounds):
        for kind, run in (
            ("idempotent", lambda: idempotent_rate(bootstrap, topic, args.records)),
            (
                "transactional",
                lambda: transactional_rate(bootstrap, topic, args.records, args.per_txn),
            ),
        ):
            print(f"round {i + 1}: {kind}, {args.records} records ...", end="", flush=True)
            rate = run()
            runs[kind].append(rate)
            print(f"  {rate:.0f} records/s", flush=True)
    return runs


class LastRecordSeen:
    """A read_committed consumer in a thread: when it holds the `per_txn`-th record of each
    transaction (the record key names the transaction)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, per_txn: int) -> None:
        self.per_txn = per_txn
        self.counts: dict[bytes, int] = {}
        self.complete: dict[bytes, float] = {}  # key -> perf_counter() of its last record
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "logger": QUIET,
            }
        )
        self._consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self._consumer.poll(0.1)  # returns at the first record: no batching delay
            if m is None or m.error() is not None:
                continue
            key = m.key() or b""
            n = self.counts[key] = self.counts.get(key, 0) + 1
            if n == self.per_txn:
                self.complete[key] = time.perf_counter()
        self._consumer.close()

    def completed_at(self, key: bytes) -> float:
        """When the transaction's last record arrived; 0 while it has not."""
        return self.complete.get(key, 0.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def read_committed_latency(bootstrap: str, topic: str, args: argparse.Namespace) -> dict:
    """Commit-to-consume latency (ms) of `--latency-txns` transactions, one at a time."""
    seen = LastRecordSeen(bootstrap, topic, args.partitions, args.per_txn)
    p = _producer(bootstrap, **{"transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    lat: list[float] = []
    commits: list[float] = []
    writes: list[float] = []  # begin, the records produced and acknowledged
    try:
        p.init_transactions(60)
        value = b"x" * RECORD
        for t in range(args.latency_txns):
            key = b"txn-%d" % t
            begun = time.perf_counter()
            p.begin_transaction()
            for i in range(args.per_txn):  # over every partition, as the throughput runs
                _produce(p, topic, value, key, i % args.partitions)
            p.flush(60)
            start = time.perf_counter()
            writes.append((start - begun) * 1000)
            p.commit_transaction(60)
            commits.append((time.perf_counter() - start) * 1000)
            done = wait_for(partial(seen.completed_at, key), 30, f"transaction {t}", interval=0.001)
            lat.append((done - start) * 1000)
    finally:
        seen.close()
    q = statistics.quantiles(lat, n=100, method="inclusive")
    return {
        "p50": q[49],
        "p99": q[98],
        "max": max(lat),
        "commit_p50": statistics.median(commits),
        "write_p50": statistics.median(writes),
        "n": len(lat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=20_000, help="records per run")
    parser.add_argument("--per-txn", type=int, default=100, help="records per transaction")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="throughput runs of each kind")
    parser.add_argument("--latency-txns", type=int, default=200)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("-o", action="append", default=[], help="key=value for every node")
    parser.add_argument("--dir", type=Path, help="keep the cluster's data and logs here")
    parser.add_argument("--skip", default="", help="any of throughput,latency")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    overrides = dict(kv.split("=", 1) for kv in args.o)
    rf = min(3, args.brokers)
    min_isr = 2 if rf >= 3 else 1
    started = time.monotonic()
    runs = lat = None
    with contextlib.ExitStack() as stack:
        work = work_dir(stack, args.dir)
        cluster = start_cluster(work, args.brokers, min(3, args.brokers), overrides, stack)
        bootstrap = cluster.bootstrap
        if "throughput" not in skip:
            ok = try_or_say(
                "topic", lambda: create_topic(bootstrap, "txn-bench", args.partitions, rf, min_isr)
            )
            if ok:
                runs = try_or_say("throughput", lambda: throughput(bootstrap, "txn-bench", args))
        if "latency" not in skip:
            print(f"read_committed latency, {args.latency_txns} transactions ...", flush=True)
            ok = try_or_say(
                "topic",
                lambda: create_topic(bootstrap, "txn-latency", args.partitions, rf, min_isr),
            )
            if ok:
                lat = try_or_say(
                    "latency", lambda: read_committed_latency(bootstrap, "txn-latency", args)
                )

    print(
        f"\ntransactions, librdkafka, {args.brokers} brokers, RF={rf}, min.insync.replicas="
        f"{min_isr}, acks=all, {args.partitions} partitions, {RECORD} B records"
    )
    if isinstance(runs, dict) and runs["transactional"]:
        idem, txn = statistics.median(runs["idempotent"]), statistics.median(runs["transactional"])
        ratios = [t / i for i, t in zip(runs["idempotent"], runs["transactional"], strict=True)]
        print(
            f"  idempotent produce     {idem:>9.0f} records/s  {idem * RECORD / MB:6.1f} MB/s"
            f"   (median of {len(runs['idempotent'])}, {args.records} records per run)"
        )
        print(
            f"  transactional produce  {txn:>9.0f} records/s  {txn * RECORD / MB:6.1f} MB/s"
            f"   ({args.per_txn} records per transaction: {txn / args.per_txn:.0f} commits/s)"
        )
        print(
            f"  transactional / idempotent within a round: median "
            f"{statistics.median(ratios):.0%} ({', '.join(f'{r:.0%}' for r in ratios)})"
        )
    else:
        print(f"  produce throughput: {'skipped' if 'throughput' in skip else 'n/a'}")
    if isinstance(lat, dict):
        print(
            f"  read_committed end to end (commit_transaction() call -> consumer has the last "
            f"record), {lat['n']} transactions of {args.per_txn}: p50 {lat['p50']:.1f} ms, "
            f"p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms; commit_transaction() itself "
            f"p50 {lat['commit_p50']:.1f} ms, after begin + {args.per_txn} records produced "
            f"and acknowledged p50 {lat['write_p50']:.1f} ms"
        )
    else:
        print(f"  read_committed latency: {'skipped' if 'latency' in skip else 'n/a'}")
    print(f"  bench took {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
