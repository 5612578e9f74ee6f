"""Share groups (KIP-932): consumption throughput of a share group with 1, 4 and 16 members on
one partition, beside a classic consumer group on the same data, with librdkafka.

    python bench/share_groups.py [--records 100000] [--size 1024] [--members 1,4,16]
                                 [--brokers 1] [--dir D] [-o key=value ...]

From one run on a local cluster: a 1-partition topic is filled with ``--records`` records of
``--size`` bytes; then each reader, on a group of its own reading from the earliest offset,
takes every record once:

- a classic consumer group of one member (confluent-kafka ``Consumer``);
- share groups of 1, 4 and 16 members (``ShareConsumer``, one thread each, implicit
  acknowledgement: each poll accepts the records of the one before, the client's default mode),
  group config share.auto.offset.reset=earliest set through the admin API.

Prints, for each, records/s and MB/s from its first record to its last (the group's forming is
left out, printed beside it as the time to the first record), and for share groups how the
records spread over the members and how many came twice (a redelivery). Figures only: nothing
here fails on a timing. A part that cannot complete (say the broker lacks share groups) prints
"n/a" and why. MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import NamedTuple

from confluent_kafka import Consumer, Producer, ShareConsumer, libversion
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import MB, QUIET, RECORD, start_cluster, work_dir
from bench.produce_consume import try_or_say
from bench.replication import create_topic

TIMEOUT_S = 600  # one reader's whole run at most


class Reading(NamedTuple):
    """One reader's run: when its first record came (from its start), how long the records
    took from the first to the last, and the records each member received."""

    first_s: float
    took_s: float
    per_member: list[int]


def fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "logger": QUIET})
    value = b"x" * size
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(120):
        raise RuntimeError("records left unacknowledged")


class Progress:
    """Records received by the members of one reader, and when the first and last came."""

    def __init__(self, members: int, want: int) -> None:
        self.want = want
        self.per_member = [0] * members
        self.first = self.last = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def add(self, member: int, n: int) -> None:
        with self._lock:
            now = time.monotonic()
            self.first = self.first or now
            self.per_member[member] += n
            if sum(self.per_member) >= self.want and not self.done.is_set():
                self.last = now
                self.done.set()

    def reading(self, start: float) -> Reading:
        if not self.done.wait(TIMEOUT_S):
            raise RuntimeError(f"{sum(self.per_member)} of {self.want} records in {TIMEOUT_S}s")
        return Reading(self.first - start, self.last - self.first, list(self.per_member))


def classic(bootstrap: str, topic: str, records: int) -> Reading:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"classic-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": QUIET,
        }
    )
    progress = Progress(1, records)
    start = time.monotonic()
    c.subscribe([topic])
    try:
        while not progress.done.is_set() and time.monotonic() - start < TIMEOUT_S:
            msgs = [m for m in c.consume(1000, 0.5) if m.error() is None]
            if msgs:
                progress.add(0, len(msgs))
    finally:
        c.close()
    return progress.reading(start)


def share_group(bootstrap: str, topic: str, records: int, members: int) -> Reading:
    group = f"share-{members}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap}, logger=QUIET)
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    progress = Progress(members, records)

    def member(i: int) -> None:
        conf: dict = {"bootstrap.servers": bootstrap, "group.id": group, "logger": QUIET}
        c = ShareConsumer(conf)
        c.subscribe([topic])
        try:
            while not progress.done.is_set() and time.monotonic() - start < TIMEOUT_S:
                n = sum(1 for m in c.poll(0.5) if m.error() is None)
                if n:
                    progress.add(i, n)
        finally:
            c.close()  # accepts the last poll's records, leaves the group

    start = time.monotonic()
    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    try:
        return progress.reading(start)
    finally:
        progress.done.set()
        for t in threads:
            t.join(60)


def line(what: str, reading: object, records: int, size: int) -> str:
    if not isinstance(reading, Reading):
        return f"  {what}: n/a"
    rate = records / reading.took_s if reading.took_s > 0 else float("inf")
    text = (
        f"  {what}: {rate:,.0f} records/s, {rate * size / MB:.1f} MB/s "
        f"(first record after {reading.first_s:.2f}s)"
    )
    got = sum(reading.per_member)
    if len(reading.per_member) > 1:
        text += f"; records per member {sorted(reading.per_member, reverse=True)}"
    if got > records:
        text += f"; {got - records} received twice"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=RECORD, help="bytes per record")
    parser.add_argument("--members", default="1,4,16", help="share group sizes")
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("-o", action="append", default=[], help="key=value for every node")
    parser.add_argument("--dir", type=Path, help="keep the cluster's data and logs here")
    args = parser.parse_args()
    sizes = [int(x) for x in args.members.split(",") if x.strip()]
    overrides = dict(kv.split("=", 1) for kv in args.o)
    started = time.monotonic()
    results: dict[str, object] = {}
    with contextlib.ExitStack() as stack:
        work = work_dir(stack, args.dir)
        cluster = start_cluster(work, args.brokers, min(3, args.brokers), overrides, stack)
        b = cluster.bootstrap
        topic = f"share-bench-{uuid.uuid4().hex[:6]}"
        rf = min(3, args.brokers)
        create_topic(b, topic, 1, rf, min(2, rf))
        print(f"filling {topic}: {args.records:,} records of {args.size} B ...", flush=True)
        fill(b, topic, args.records, args.size)
        print("classic consumer group, 1 member ...", flush=True)
        results["classic"] = try_or_say("classic", lambda: classic(b, topic, args.records))
        for n in sizes:
            print(f"share group, {n} member(s) ...", flush=True)
            results[f"share {n}"] = try_or_say(
                f"share group of {n}", partial(share_group, b, topic, args.records, n)
            )

    print(
        f"\nconsumption of one partition, librdkafka {libversion()[0]}, {args.brokers} broker(s), "
        f"{args.records:,} records of {args.size} B, each reader on a fresh group"
    )
    print(line("classic consumer group, 1 member", results["classic"], args.records, args.size))
    for n in sizes:
        what = f"share group, {n} member{'s' if n > 1 else ''}"
        print(line(what, results[f"share {n}"], args.records, args.size))
    print(f"  bench took {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
