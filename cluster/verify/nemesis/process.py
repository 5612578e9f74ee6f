"""Process faults: kill -9 and SIGSTOP (the faults of ``kind`` in the history).

- ``kill-leader``       kill -9 the broker leading the round's partition (from Metadata)
- ``kill-broker``       kill -9 a random live broker
- ``pause-follower``    SIGSTOP a follower of the round's partition, then SIGCONT (past
                        replica.lag.time.max.ms the leader must shrink the ISR to keep acks=all
                        going; past broker.session.timeout.ms it is fenced, and comes back)
- ``kill-meta-leader``  kill -9 the meta service's Raft leader (from DescribeCluster)

Healing restarts what was killed and resumes what was stopped.
"""

from __future__ import annotations

import random
import signal
import time

from cluster.local import LocalCluster
from cluster.verify.history import History
from cluster.verify.nemesis.base import (
    ClusterView,
    FaultFn,
    Injected,
    alive,
    broker_name,
    brokers,
    led_by,
    node_id,
    restart,
)


def kill_leader(
    cluster: LocalCluster, history: History, view: ClusterView, partition: int
) -> Injected:
    """kill -9 the broker that leads ``partition``."""
    leader = view.leader_of(partition)
    name = broker_name(leader)
    led = led_by(view, leader)
    cluster.kill(name)
    fault = history.fault("kill-leader", name, led or (partition,), f"leader of {partition}")
    return fault, restart(cluster, fault, name)


def kill_broker(
    cluster: LocalCluster, history: History, view: ClusterView, rng: random.Random
) -> Injected:
    """kill -9 a random live broker."""
    name = rng.choice([b for b in brokers(cluster) if alive(cluster, b)])
    led = led_by(view, node_id(name))
    cluster.kill(name)
    fault = history.fault("kill-broker", name, led, f"led {list(led)}")
    return fault, restart(cluster, fault, name)


def pause_follower(
    cluster: LocalCluster, history: History, view: ClusterView, partition: int, rng: random.Random
) -> Injected | None:
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


def kill_meta_leader(cluster: LocalCluster, history: History, view: ClusterView) -> Injected:
    """kill -9 the meta Raft leader; heal = restart it, then poll until a leader is known."""
    name = view.meta_leader()
    cluster.kill(name)
    fault = history.fault("kill-meta-leader", name, (), "meta Raft leader")
    start = restart(cluster, fault, name)

    def heal() -> None:
        start()
        view.meta_leader()

    return fault, heal


FAULTS: dict[str, FaultFn] = {
    "kill-leader": lambda c: kill_leader(c.cluster, c.history, c.view, c.partition),
    "kill-broker": lambda c: kill_broker(c.cluster, c.history, c.view, c.rng),
    "pause-follower": lambda c: pause_follower(c.cluster, c.history, c.view, c.partition, c.rng),
    "kill-meta-leader": lambda c: kill_meta_leader(c.cluster, c.history, c.view),
}
