"""What the nemeses share: the cluster as clients and the meta service see it, node names, and
the shape of a fault (inject, record in the history, return how to heal it).

Every fault function takes a `Context` and returns ``(fault, heal)`` or None when it has no
target this round (e.g. a follower pause at replication factor 1); ``heal()`` undoes it and sets
``fault.t_heal``. The round (schedule.py) then polls until the cluster is whole again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from cluster.local import LocalCluster
from cluster.verify.history import Fault, History
from common.internal_security import InternalSecurity
from meta.client import MetaClient

Heal = Callable[[], None]
Injected = tuple[Fault, Heal]


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
    """Metadata lookups through a client (what clients see) and the meta service's own API.
    ``topic``: the workload's, whose partitions faults aim at; ``also``: other topics that must
    be whole again after a fault (e.g. ``__consumer_offsets`` for a group workload)."""

    def __init__(self, cluster: LocalCluster, topic: str, also: tuple[str, ...] = ()) -> None:
        self.cluster, self.topic, self.also = cluster, topic, also
        conf: dict = {"bootstrap.servers": cluster.bootstrap}
        conf["logger"] = logging.getLogger("verify.rdkafka")  # not to stderr
        self._admin = AdminClient(conf)

    def partitions(
        self, timeout_s: float = 5.0, topic: str | None = None
    ) -> dict[int, PartitionState]:
        topic = topic or self.topic
        md = self._admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
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
                ok = True
                for topic in (self.topic, *self.also):
                    parts = self.partitions(topic=topic)
                    ok = ok and bool(parts or topic != self.topic)
                    ok = ok and all(
                        s.leader in live and (not full_isr or set(s.isr) >= set(s.replicas))
                        for s in parts.values()
                    )
                if ok and self.registered_brokers() >= live:
                    self.meta_leader(timeout_s=max(1.0, deadline - time.monotonic()))
                    return time.time()
            time.sleep(0.1)
        return None


async def _describe_leader(addresses: list[str], internal: dict[str, str]) -> int:
    security = InternalSecurity.from_properties(internal)
    async with MetaClient(
        addresses, timeout_s=3.0, attempt_timeout_s=2.0, security=security
    ) as client:
        return (await client.describe_cluster()).leader_id


@dataclass
class Context:
    """What a fault function gets: the cluster, the history to record in, the view, the run's
    random source, the round's target partition and how long faults last."""

    cluster: LocalCluster
    history: History
    view: ClusterView
    rng: random.Random
    partition: int
    down_s: float


FaultFn = Callable[[Context], Injected | None]


def restart(cluster: LocalCluster, fault: Fault, name: str) -> Heal:
    """A heal that starts ``name`` again and waits for its port."""

    def heal() -> None:
        cluster.start_node(name)
        cluster.wait_ready(60, names=[name])
        fault.t_heal = time.time()

    return heal


def led_by(view: ClusterView, broker: int) -> tuple[int, ...]:
    """The workload topic's partitions ``broker`` leads now (empty if metadata fails)."""
    parts: dict[int, PartitionState] = {}
    with contextlib.suppress(Exception):
        parts = view.partitions()
    return tuple(sorted(p for p, s in parts.items() if s.leader == broker))
