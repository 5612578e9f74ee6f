"""Consumer-group coordinator: rebalance time and OffsetCommit throughput, with librdkafka.

    python bench/groups.py [--members 20] [--partitions 60] [--trials 3] [--heartbeat-ms 3000]
                           [--protocol classic|consumer] [--assignor range]
                           [--commit-s 5] [--clients 4] [--brokers 3] [--skip rebalance,commit]
                           [--dir D] [-o key=value ...]

Prints, from one run on a local cluster (3 brokers, __consumer_offsets with RF 3):

- rebalance: how long a group of ``--members`` consumers (confluent-kafka, one thread each) on a
  ``--partitions`` topic takes to form from nothing (this includes
  group.initial.rebalance.delay.ms, printed beside it), and to become stable again after one
  more member joins a stable group of members-1 (median / min / max of ``--trials``): from the
  newcomer's subscribe() to the moment every member's assignment callback has run and each
  partition has exactly one owner. Members notice a rebalance at their next heartbeat, so the
  heartbeat interval is printed too (classic: the client's heartbeat.interval.ms; KIP-848:
  the broker's group.consumer.heartbeat.interval.ms).
- OffsetCommit throughput of one coordinator: commits/s of one client committing synchronously
  in a loop (commit(offsets, asynchronous=False), one partition's offset going up by one), and
  of ``--clients`` such clients at once, each on its own group; all the groups are chosen to
  have the same coordinator.

Figures only: nothing here fails on a timing. A part that cannot complete (say the broker
lacks an API) prints "n/a" and why.
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
from typing import NamedTuple

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import QUIET, start_cluster, work_dir
from bench.produce_consume import try_or_say
from cluster.polling import wait_for
from dataplane.config import BrokerConfig


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap}, logger=QUIET)


def create_topic(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(60)

    def ready() -> bool:
        md = admin.list_topics(name, timeout=5).topics.get(name)
        return (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        )

    wait_for(ready, 60, f"{name}: leaders")


# -- rebalance ---------------------------------------------------------------------------------


class GroupMember:
    """One consumer polled by its own thread; records its assignment as callbacks give it."""

    def __init__(self, bootstrap: str, topic: str, group: str, args: argparse.Namespace) -> None:
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "logger": QUIET,
        }
        self.incremental = args.protocol == "consumer" or args.assignor == "cooperative-sticky"
        if args.protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            conf["heartbeat.interval.ms"] = args.heartbeat_ms
            conf["session.timeout.ms"] = max(10_000, 3 * args.heartbeat_ms)
            conf["partition.assignment.strategy"] = args.assignor
        self.consumer = Consumer(conf)
        self.owned: frozenset[int] = frozenset()
        self.changed = 0.0  # monotonic time of the last assignment change
        self._stop = threading.Event()
        self.consumer.subscribe(
            [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _set(self, consumer: Consumer) -> None:
        self.owned = frozenset(tp.partition for tp in consumer.assignment())
        self.changed = time.monotonic()

    def _on_assign(self, consumer: Consumer, parts: list) -> None:
        consumer.incremental_assign(parts) if self.incremental else consumer.assign(parts)
        self._set(consumer)

    def _on_revoke(self, consumer: Consumer, parts: list) -> None:
        consumer.incremental_unassign(parts) if self.incremental else consumer.unassign()
        with contextlib.suppress(KafkaException):
            self._set(consumer)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.consume(100, 0.1)
        self.consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def stable(members: list[GroupMember], partitions: int) -> bool:
    """Every partition owned by exactly one member, every member owning one at least."""
    owned = [m.owned for m in members]
    total = sum(len(o) for o in owned)
    union = frozenset().union(*owned)
    return total == partitions and len(union) == partitions and all(owned)


def stable_with_newcomer(members: list[GroupMember], partitions: int, since: float) -> bool:
    """`stable`, with the last member to join assigned after ``since``."""
    return stable(members, partitions) and members[-1].changed > since


def rebalance(bootstrap: str, args: argparse.Namespace) -> dict[str, object]:
    topic = f"rebalance-{uuid.uuid4().hex[:6]}"
    group = f"bench-{topic}"
    create_topic(bootstrap, topic, args.partitions, min(3, args.brokers))
    members: list[GroupMember] = []
    joins: list[float] = []
    try:
        t0 = time.monotonic()
        members = [GroupMember(bootstrap, topic, group, args) for _ in range(args.members)]
        wait_for(lambda: stable(members, args.partitions), 300, "the group to form")
        formed = max(m.changed for m in members) - t0
        for trial in range(args.trials):
            # One leaves (clean close: LeaveGroup), the group settles, a new one joins.
            members.pop(0).close()
            wait_for(lambda: stable(members, args.partitions), 300, "the group without one")
            t = time.monotonic()
            members.append(GroupMember(bootstrap, topic, group, args))
            wait_for(
                partial(stable_with_newcomer, members, args.partitions, t),
                300,
                "the group with the newcomer",
            )
            took = max(m.changed for m in members) - t
            joins.append(took)
            print(f"  trial {trial + 1}: {args.members}th member joined, stable after {took:.2f}s")
        return {"formed": formed, "joins": joins}
    finally:
        for m in members:
            m.close()


# -- OffsetCommit throughput ---------------------------------------------------------------------


def coordinator_of(admin: AdminClient, group: str) -> int:
    """The coordinator's node id (DescribeGroups through FindCoordinator: a new group is Dead
    and answers with its coordinator all the same)."""
    described = admin.describe_consumer_groups([group], request_timeout=20)[group].result(30)
    node_id: int = described.coordinator.id
    return node_id


def groups_on_one_coordinator(bootstrap: str, n: int) -> tuple[int, list[str]]:
    admin = _admin(bootstrap)
    by_node: dict[int, list[str]] = {}
    for _ in range(50 * n):
        g = f"commit-bench-{uuid.uuid4().hex[:8]}"
        node = coordinator_of(admin, g)
        by_node.setdefault(node, []).append(g)
        if len(by_node[node]) == n:
            return node, by_node[node]
    raise RuntimeError(f"no coordinator got {n} of {50 * n} group names")


def commit_loop(bootstrap: str, topic: str, group: str, seconds: float, out: list[int]) -> None:
    """Synchronous commits of partition 0's offset, one after the other, for ``seconds``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": QUIET})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # warm: coordinator
        n, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            n += 1
            c.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=False)
        out.append(n)
    finally:
        c.close()


class CommitRates(NamedTuple):
    coordinator: int  # the broker coordinating every group of the run
    per_second: dict[int, float]  # commits/s by number of concurrent clients


def commit_throughput(bootstrap: str, args: argparse.Namespace) -> CommitRates:
    topic = f"commits-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1, min(3, args.brokers))
    node, groups = groups_on_one_coordinator(bootstrap, args.clients)
    results = CommitRates(node, {})
    for clients in (1, args.clients):
        counts: list[int] = []
        threads = [
            threading.Thread(
                target=commit_loop, args=(bootstrap, topic, groups[i], args.commit_s, counts)
            )
            for i in range(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if len(counts) != clients:
            raise RuntimeError(f"{clients - len(counts)} of {clients} commit loops failed")
        rate = results.per_second[clients] = sum(counts) / args.commit_s
        print(f"  {clients} client(s): {rate:.0f} commits/s", flush=True)
    return results


def setting(overrides: dict[str, str], name: str) -> str:
    """``name=value`` of a broker setting: the -o override, else the broker's default."""
    if name in overrides:
        return f"{name}={overrides[name]}"
    field = BrokerConfig.model_fields.get(name.replace(".", "_"))
    return f"{name}={field.default} (default)" if field else f"{name}=n/a"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--trials", type=int, default=3, help="member joins measured")
    parser.add_argument("--heartbeat-ms", type=int, default=3000, help="librdkafka's default")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--assignor", default="range", help="classic protocol only")
    parser.add_argument("--commit-s", type=float, default=5.0, help="seconds per commit run")
    parser.add_argument("--clients", type=int, default=4, help="clients committing at once")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("-o", action="append", default=[], help="key=value for every node")
    parser.add_argument("--dir", type=Path, help="keep the cluster's data and logs here")
    parser.add_argument("--skip", default="", help="any of rebalance,commit")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    overrides = dict(kv.split("=", 1) for kv in args.o)
    timing = ", ".join(
        [
            f"heartbeat.interval.ms={args.heartbeat_ms}",
            setting(overrides, "group.initial.rebalance.delay.ms"),
        ]
        if args.protocol == "classic"
        else [setting(overrides, "group.consumer.heartbeat.interval.ms")]
    )
    started = time.monotonic()
    reb = commits = None
    with contextlib.ExitStack() as stack:
        work = work_dir(stack, args.dir)
        cluster = start_cluster(work, args.brokers, min(3, args.brokers), overrides, stack)
        if "rebalance" not in skip:
            print(f"rebalance: {args.members} members, {args.partitions} partitions ...")
            reb = try_or_say("rebalance", lambda: rebalance(cluster.bootstrap, args))
        if "commit" not in skip:
            print(f"OffsetCommit: 1 and {args.clients} clients, {args.commit_s:g}s each ...")
            commits = try_or_say("commit", lambda: commit_throughput(cluster.bootstrap, args))

    how = f"{args.protocol} protocol" + (f", {args.assignor}" if args.protocol == "classic" else "")
    print(
        f"\nconsumer groups, librdkafka, {args.brokers} brokers, __consumer_offsets RF "
        f"{min(3, args.brokers)}"
    )
    if isinstance(reb, dict):
        joins = reb["joins"]
        print(f"  {args.members} members on {args.partitions} partitions ({how}; {timing}):")
        print(f"    form from empty: {reb['formed']:.2f}s")
        if joins:
            print(
                f"    stable after a member joins: median {statistics.median(joins):.2f}s, "
                f"min {min(joins):.2f}s, max {max(joins):.2f}s over {len(joins)} trials"
            )
    else:
        print(f"  rebalance: {'skipped' if 'rebalance' in skip else 'n/a'}")
    if isinstance(commits, CommitRates):
        rates = commits.per_second
        print(
            f"  OffsetCommit (sync, 1 partition) on coordinator broker {commits.coordinator}: "
            f"1 client {rates[1]:.0f}/s, {args.clients} clients {rates[args.clients]:.0f}/s"
        )
    else:
        print(f"  OffsetCommit: {'skipped' if 'commit' in skip else 'n/a'}")
    print(f"  bench took {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
