"""A local cluster whose every node runs in a network namespace of its own (netns.py), optionally
with each broker's second log directory on a small loop-mounted file system (loopfs.py) and with
libfaketime loaded into the nodes whose wall clock a fault skews.

The nodes bind their namespace's address: brokers' Kafka listener (advertised as is) and
replication gRPC, meta nodes' gRPC and Raft, all on the usual ports (9092.., 9192.., 9292..,
9392..: every node has an address of its own, so nothing clashes with anything else on the
machine). Clients in the root namespace reach them through the bridge.
"""

from __future__ import annotations

import glob
import logging
from pathlib import Path

from cluster.local import LocalCluster
from cluster.verify.loopfs import LoopFs
from cluster.verify.netns import Network
from cluster.verify.resources import Run, VerifyError

log = logging.getLogger("rafka.verify")

BASE_PORT = 9092
_FAKETIME = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
)


def faketime_library() -> str:
    for pattern in _FAKETIME:
        if found := sorted(glob.glob(pattern)):
            return found[0]
    raise VerifyError("clock faults need libfaketime (Debian/Ubuntu: apt-get install libfaketime)")


class NamespacedCluster(LocalCluster):
    def __init__(
        self,
        run: Run,
        data_dir: Path,
        brokers: int = 3,
        metas: int = 3,
        overrides: dict[str, str] | None = None,
        *,
        disks: bool = False,
        disk_mb: int = 256,
        log_level: str = "INFO",
    ) -> None:
        names = [f"meta-{i + 1}" for i in range(metas)] + [
            f"broker-{i + 1}" for i in range(brokers)
        ]
        self.resources = run
        self.net = Network(run, names)
        data_dir = data_dir.resolve()
        self.disks: dict[str, LoopFs] = {}
        node_overrides: dict[str, dict[str, str]] = {}
        if disks:
            for name in names[metas:]:
                mount = data_dir / "disks" / name
                self.disks[name] = LoopFs(run, mount.with_suffix(".img"), mount, disk_mb)
                node_overrides[name] = {"log.dirs": f"{data_dir / name},{mount}"}
        super().__init__(
            brokers,
            metas,
            data_dir,
            BASE_PORT,
            overrides,
            log_level,
            hosts=self.net.addresses,
            node_overrides=node_overrides,
        )
        for name, node in self.nodes.items():
            node.command_prefix = self.net.exec_prefix(name)
        self.skews: dict[str, int] = {}

    def start(self, timeout: float = 60.0) -> None:
        self.net.up()
        for disk in self.disks.values():
            disk.create()
        super().start(timeout)

    def set_clock(self, name: str, offset_s: int) -> None:
        """The wall clock ``name`` runs with from its next start: ``offset_s`` ahead (behind if
        negative) of the machine's. A constant offset for the process's whole life (libfaketime
        moves its monotonic clock by as much, which no process notices)."""
        node = self.nodes[name]
        if offset_s:
            node.env = {"LD_PRELOAD": faketime_library(), "FAKETIME": f"{offset_s:+d}"}
            self.skews[name] = offset_s
        else:
            node.env = {}
            self.skews.pop(name, None)

    def close(self) -> None:
        """Stop the nodes, then remove namespaces, bridge and mounts; forget the run."""
        try:
            self.stop()
        finally:
            self.net.down()
            for disk in self.disks.values():
                disk.unmount()
            self.resources.release()
