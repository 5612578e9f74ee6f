"""``clock-skew``: one random node (meta or broker) runs with its wall clock minutes ahead or
behind (2, 5 or 10 minutes), through libfaketime: the node is restarted (SIGTERM, then start)
with the offset, and restarted again without it at the heal. Leases, timeouts, retention,
record timestamps and token expiry compare times taken on different nodes: none of it may lose
or misplace data. (The offset is constant for the life of a process: libfaketime moves the
process's monotonic clock too, so only a restart can change it without time running backwards.)
"""

from __future__ import annotations

import time

from cluster.verify.cluster import NamespacedCluster
from cluster.verify.nemesis.base import Context, FaultFn, Injected, alive


def _restart_with_clock(cluster: NamespacedCluster, name: str, offset_s: int) -> None:
    cluster.set_clock(name, offset_s)
    cluster.stop_node(name)
    cluster.start_node(name)
    cluster.wait_ready(60, names=[name])


def clock_skew(c: Context) -> Injected:
    cluster = c.cluster
    if not isinstance(cluster, NamespacedCluster):
        raise TypeError("clock faults need a NamespacedCluster")
    name = c.rng.choice([n for n in cluster.nodes if alive(cluster, n)])
    offset = c.rng.choice((-1, 1)) * c.rng.choice((120, 300, 600))
    _restart_with_clock(cluster, name, offset)
    fault = c.history.fault("clock-skew", name, (), f"wall clock {offset:+d}s")

    def heal() -> None:
        _restart_with_clock(cluster, name, 0)
        fault.t_heal = time.time()

    return fault, heal


FAULTS: dict[str, FaultFn] = {"clock-skew": clock_skew}
