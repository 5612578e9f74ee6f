"""Disk faults on a broker's second log directory, a small loop-mounted ext4 (loopfs.py; its
first directory, with the broker's state store, stays on the ordinary disk):

- ``disk-full``   the file system fills up under load: appends there fail with ENOSPC, which
                  the broker must treat as the failure of that log directory (its replicas go
                  offline there, leadership and ISR move away, nothing acknowledged is lost).
                  Heal: the space comes back and, if the directory went offline, the broker is
                  restarted (as in Kafka, a failed directory comes back with a restart).
- ``disk-error``  every read and write on the file system fails with EIO from now on (issue
                  13's path: the directory fails, the broker keeps serving the rest). Heal:
                  stop the broker, remount (journal replay), start it.
"""

from __future__ import annotations

import time

from cluster.verify.cluster import NamespacedCluster
from cluster.verify.nemesis.base import Context, FaultFn, Injected, alive, led_by, node_id


def _target(c: Context) -> tuple[NamespacedCluster, str]:
    cluster = c.cluster
    if not isinstance(cluster, NamespacedCluster) or not cluster.disks:
        raise TypeError("disk faults need a NamespacedCluster with disks")
    return cluster, c.rng.choice([n for n in cluster.disks if alive(cluster, n)])


def _dir_failed_since(cluster: NamespacedCluster, name: str, offset: int) -> bool:
    """Whether the broker logged its loop-mounted directory's failure after ``offset``."""
    with cluster.nodes[name].log_file.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    return f"{cluster.disks[name].mount}" in text and "offline" in text


def _restart(cluster: NamespacedCluster, name: str) -> None:
    cluster.stop_node(name)
    cluster.start_node(name)
    cluster.wait_ready(60, names=[name])


def disk_full(c: Context) -> Injected:
    cluster, name = _target(c)
    disk = cluster.disks[name]
    offset = cluster.nodes[name].log_file.stat().st_size
    taken = disk.fill()
    fault = c.history.fault(
        "disk-full",
        name,
        led_by(c.view, node_id(name)),
        f"{disk.mount} full ({taken >> 20} MiB taken)",
    )

    def heal() -> None:
        disk.unfill()
        if _dir_failed_since(cluster, name, offset):
            fault.detail += "; its directory went offline: broker restarted"
            _restart(cluster, name)
        fault.t_heal = time.time()

    return fault, heal


def disk_error(c: Context) -> Injected:
    cluster, name = _target(c)
    disk = cluster.disks[name]
    disk.shutdown()
    fault = c.history.fault(
        "disk-error", name, led_by(c.view, node_id(name)), f"{disk.mount}: every I/O fails (EIO)"
    )

    def heal() -> None:
        cluster.stop_node(name)
        disk.remount()
        cluster.start_node(name)
        cluster.wait_ready(60, names=[name])
        fault.t_heal = time.time()

    return fault, heal


FAULTS: dict[str, FaultFn] = {"disk-full": disk_full, "disk-error": disk_error}
