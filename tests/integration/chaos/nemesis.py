"""Faults against a `LocalCluster`, each a function that records itself in the `History`, and a
`Nemesis` that runs them in rounds.

Faults (``kind`` in the history):

- ``kill-leader``       kill -9 the broker leading a given partition (from Metadata)
- ``kill-broker``       kill -9 a random live broker
- ``pause-follower``    SIGSTOP a follower of a partition for longer than replica.lag.time.max.ms,
                        then SIGCONT (the leader must shrink the ISR to keep acks=all going)
- ``kill-meta-leader``  kill -9 the meta service's Raft leader (from DescribeCluster)

Every fault is healed by the round (restart what was killed, SIGCONT what was stopped) and the
round then polls, with a deadline, until the cluster is whole again: every partition led by a live
broker, and (``full_isr``) every replica back in the ISR. Nothing sleeps to wait for a state; the
only fixed waits are the fault's own duration and the quiet time between rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from cluster.internal_security import InternalSecurity
from cluster.local import LocalCluster
from meta.client import MetaClient
from tests.integration.chaos.history import Fault, History

log = logging.getLogger("chaos.nemesis")

KINDS = ("kill-leader", "kill-broker", "pause-follower", "kill-meta-leader")


@dataclass(frozen=True)
class PartitionState:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def broker_name(node_id: int) -> str:
    return f"broker-{node_id}"  # LocalCluster numbers brokers 1..N, node.id = N


def node_id(name: str) -> int:
    return int(name.rpartition("-")[2])


def alive(cluster: LocalCluster, name: str) -> bool:
    proc = cluster.nodes[name].proc
    return proc is not None and proc.poll() is None


def brokers(cluster: LocalCluster) -> list[str]:
    return [n for n, node in cluster.nodes.items() if node.kind == "broker"]


def metas(cluster: LocalCluster) -> list[str]:
    return [n for n, node in cluster.nodes.items() if node.kind == "meta"]


class ClusterView:
    """Metadata lookups through a client (what clients see) and the meta service's own API."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.cluster, self.topic = cluster, topic
        self._admin = AdminClient(
            {"bootstrap.servers": cluster.bootstrap, "logger": logging.getLogger("chaos.rdkafka")}
        )

    def partitions(self, timeout_s: float = 5.0) -> dict[int, PartitionState]:
        md = self._admin.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
        if md is None or md.error is not None:
            return {}
        return {
            p.id: PartitionState(p.leader, tuple(p.replicas), tuple(p.isrs))
            for p in md.partitions.values()
        }

    def registered_brokers(self, timeout_s: float = 5.0) -> set[int]:
        return set(self._admin.list_topics(timeout=timeout_s).brokers)

    def leader_of(self, partition: int, timeout_s: float = 30.0) -> int:
        """The live broker leading ``partition``, polling until metadata names one."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(Exception):
                state = self.partitions().get(partition)
                if state and state.leader >= 0 and alive(self.cluster, broker_name(state.leader)):
                    return state.leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"partition {partition}: no live leader after {timeout_s}s")
            time.sleep(0.1)

    def meta_leader(self, timeout_s: float = 30.0, exclude: str | None = None) -> str:
        """The meta Raft leader's node name (DescribeCluster), polling until one is known."""
        deadline = time.monotonic() + timeout_s
        while True:
            live = [
                a
                for n, a in zip(metas(self.cluster), self.cluster.meta_servers, strict=True)
                if alive(self.cluster, n)
            ]
            with contextlib.suppress(Exception):
                leader = asyncio.run(_describe_leader(live, self.cluster.internal_properties))
                name = f"meta-{leader}"
                if leader > 0 and name != exclude and alive(self.cluster, name):
                    return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"no meta Raft leader after {timeout_s}s")
            time.sleep(0.1)

    def wait_whole(self, timeout_s: float, full_isr: bool) -> float | None:
        """Poll until every partition has a live leader (and, with ``full_isr``, every replica
        in its ISR) and every live broker is registered. Returns when, or None on timeout."""
        deadline = time.monotonic() + timeout_s
        live = {node_id(b) for b in brokers(self.cluster) if alive(self.cluster, b)}
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                parts = self.partitions()
                ok = bool(parts) and all(
                    s.leader in live and (not full_isr or set(s.isr) >= set(s.replicas))
                    for s in parts.values()
                )
                if ok and self.registered_brokers() >= live:
                    return time.time()
            time.sleep(0.1)
        return None


async def _describe_leader(addresses: list[str], internal: dict[str, str]) -> int:
    security = InternalSecurity.from_properties(internal)
    async with MetaClient(
        addresses, timeout_s=3.0, attempt_timeout_s=2.0, security=security
    ) as client:
        return (await client.describe_cluster()).leader_id


# ------------------------------------------------------------------------------------ the faults
#
# Each injects one fault, records it and returns (fault, heal); heal() undoes it and records when.


Heal = Callable[[], None]


def _restart(cluster: LocalCluster, fault: Fault, name: str) -> Heal:
    def heal() -> None:
        cluster.start_node(name)
        cluster.wait_ready(60, names=[name])
        fault.t_heal = time.time()

    return heal


def kill_leader(
    cluster: LocalCluster, history: History, view: ClusterView, partition: int
) -> tuple[Fault, Heal]:
    """kill -9 the broker that leads ``partition``."""
    leader = view.leader_of(partition)
    name = broker_name(leader)
    led = tuple(sorted(p for p, s in view.partitions().items() if s.leader == leader))
    cluster.kill(name)
    fault = history.fault("kill-leader", name, led or (partition,), f"leader of {partition}")
    return fault, _restart(cluster, fault, name)


def kill_broker(
    cluster: LocalCluster, history: History, view: ClusterView, rng: random.Random
) -> tuple[Fault, Heal]:
    """kill -9 a random live broker."""
    name = rng.choice([b for b in brokers(cluster) if alive(cluster, b)])
    parts: dict[int, PartitionState] = {}
    with contextlib.suppress(Exception):
        parts = view.partitions()
    led = tuple(sorted(p for p, s in parts.items() if s.leader == node_id(name)))
    cluster.kill(name)
    fault = history.fault("kill-broker", name, led, f"led {list(led)}")
    return fault, _restart(cluster, fault, name)


def pause_follower(
    cluster: LocalCluster, history: History, view: ClusterView, partition: int, rng: random.Random
) -> tuple[Fault, Heal] | None:
    """SIGSTOP a follower of ``partition`` (None if it has none, e.g. RF=1); heal = SIGCONT.

    A broker is usually also the leader of other partitions; the follower leading the fewest is
    chosen, and the partitions it leads are in the fault's detail (those see a *leader* pause).
    """
    parts = view.partitions()
    state = parts.get(partition)
    if state is None:
        return None
    followers = [r for r in state.replicas if r != state.leader]
    if not followers:
        history.note(f"pause-follower: partition {partition} has no follower; skipped")
        return None

    def led(b: int) -> list[int]:
        return sorted(p for p, s in parts.items() if s.leader == b)

    rng.shuffle(followers)
    follower = min(followers, key=lambda b: len(led(b)))
    name = broker_name(follower)
    # acks=all on every partition it follows waits until the leader drops it from the ISR.
    hit = tuple(sorted(p for p, s in parts.items() if follower in s.replicas))
    cluster.signal_node(name, signal.SIGSTOP)
    fault = history.fault(
        "pause-follower", name, hit, f"follower of {partition}, leads {led(follower)}"
    )

    def heal() -> None:
        cluster.signal_node(name, signal.SIGCONT)
        fault.t_heal = time.time()

    return fault, heal


def kill_meta_leader(
    cluster: LocalCluster, history: History, view: ClusterView
) -> tuple[Fault, Heal]:
    """kill -9 the meta Raft leader; heal = restart it, then poll until a leader is known."""
    name = view.meta_leader()
    cluster.kill(name)
    fault = history.fault("kill-meta-leader", name, (), "meta Raft leader")
    restart = _restart(cluster, fault, name)

    def heal() -> None:
        restart()
        view.meta_leader()

    return fault, heal


# ------------------------------------------------------------------------------------ the rounds


@dataclass
class Schedule:
    kinds: tuple[str, ...] = KINDS  # cycled through, one per round
    rounds: int = 4
    down_s: float = 4.0  # how long a killed node stays down / a pause lasts
    quiet_s: float = 4.0  # healthy time after recovery, before the next round
    recover_timeout_s: float = 60.0
    full_isr: bool = True  # "recovered" includes every replica back in the ISR
    seed: int = 0


class Nemesis:
    def __init__(self, cluster: LocalCluster, history: History, topic: str) -> None:
        self.cluster, self.history = cluster, history
        self.view = ClusterView(cluster, topic)
        self._stop = threading.Event()
        self._heal: Heal | None = None

    def stop(self) -> None:
        self._stop.set()

    def run(self, schedule: Schedule) -> None:
        """Run the rounds (blocking). Always leaves every node running and resumed."""
        rng = random.Random(schedule.seed)
        try:
            for i in range(schedule.rounds):
                if self._stop.is_set():
                    return
                kind = schedule.kinds[i % len(schedule.kinds)]
                self._round(i, kind, schedule, rng)
                if self._stop.wait(schedule.quiet_s):
                    return
        finally:
            self.heal_all()

    def _round(self, i: int, kind: str, s: Schedule, rng: random.Random) -> None:
        h, c, v = self.history, self.cluster, self.view
        partitions = sorted(v.partitions())
        target = partitions[i % len(partitions)] if partitions else 0
        if kind == "kill-leader":
            injected = kill_leader(c, h, v, target)
        elif kind == "kill-broker":
            injected = kill_broker(c, h, v, rng)
        elif kind == "pause-follower":
            injected = pause_follower(c, h, v, target, rng)
        elif kind == "kill-meta-leader":
            injected = kill_meta_leader(c, h, v)
        else:
            raise ValueError(f"unknown fault {kind}")
        if injected is None:
            return
        fault, self._heal = injected
        log.info("round %d: %s %s (%s)", i, kind, fault.target, fault.detail)
        self._stop.wait(s.down_s)
        self._heal()
        self._heal = None
        fault.t_recovered = v.wait_whole(s.recover_timeout_s, s.full_isr)
        if fault.t_recovered is None:
            h.note(f"{kind} {fault.target}: cluster not whole {s.recover_timeout_s}s after heal")

    def heal_all(self) -> None:
        """Undo whatever is still in effect: SIGCONT every node, start every dead one."""
        if self._heal is not None:
            with contextlib.suppress(Exception):
                self._heal()
            self._heal = None
        for name in self.cluster.nodes:
            self.cluster.signal_node(name, signal.SIGCONT)
            if not alive(self.cluster, name):
                self.cluster.start_node(name)
        self.cluster.wait_ready(60)
