"""The nemesis: faults in rounds, with a seed. Each round injects one fault (the kinds are cycled
through), keeps it for ``down_s``, heals it, then polls, with a deadline, until the cluster is
whole again (every partition led by a live broker, with ``full_isr`` every replica back in the
ISR, a meta Raft leader known) and leaves ``quiet_s`` of health before the next round.

Nothing sleeps to wait for a state; the only fixed waits are the fault's own duration and the
quiet time between rounds. `Nemesis.run` always leaves every node running, resumed, its network
healed and its disk given back.
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import threading
import time
from dataclasses import dataclass

from cluster.local import LocalCluster
from cluster.verify.cluster import NamespacedCluster
from cluster.verify.history import History
from cluster.verify.nemesis import clock, disk, network, process
from cluster.verify.nemesis.base import ClusterView, Context, FaultFn, Heal, alive

log = logging.getLogger("rafka.verify")

PROCESS_FAULTS: dict[str, FaultFn] = process.FAULTS
NETWORK_FAULTS: dict[str, FaultFn] = network.FAULTS
DISK_FAULTS: dict[str, FaultFn] = disk.FAULTS
CLOCK_FAULTS: dict[str, FaultFn] = clock.FAULTS
FAULTS: dict[str, FaultFn] = PROCESS_FAULTS | NETWORK_FAULTS | DISK_FAULTS | CLOCK_FAULTS
# How long each fault lasts unless the schedule says: a pause outlasts replica.lag.time.max.ms
# but not broker.session.timeout.ms (REPLICATED_OVERRIDES: 2 s, 6 s); a cut outlasts the
# session, so the meta service fences whom it no longer hears and a new leader takes over.
DEFAULT_DOWN_S: dict[str, float] = (
    dict.fromkeys(PROCESS_FAULTS, 4.0)
    | dict.fromkeys(NETWORK_FAULTS, 10.0)
    | dict.fromkeys(DISK_FAULTS, 10.0)
    | dict.fromkeys(CLOCK_FAULTS, 15.0)
)


def needs_namespaces(kinds: tuple[str, ...]) -> bool:
    """Whether any of the faults needs the nodes in namespaces (network, disk, clock)."""
    return any(k not in PROCESS_FAULTS for k in kinds)


@dataclass
class Schedule:
    kinds: tuple[str, ...] = ("kill-leader", "kill-broker", "pause-follower", "kill-meta-leader")
    rounds: int = 4  # at most this many rounds (0: as many as ``duration_s`` allows)
    duration_s: float = 0.0  # no new round starts after this long (0: no limit)
    down_s: float = 0.0  # how long a fault lasts (a killed node stays down...); 0: its default
    quiet_s: float = 4.0  # healthy time after recovery, before the next round
    recover_timeout_s: float = 60.0
    full_isr: bool = True  # "recovered" includes every replica back in the ISR
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault(s) {unknown}; known: {', '.join(FAULTS)}")
        if not self.kinds:
            raise ValueError("no fault kinds")
        if self.rounds <= 0 and self.duration_s <= 0:
            raise ValueError("a schedule needs rounds or a duration")

    def down_for(self, kind: str) -> float:
        return self.down_s or DEFAULT_DOWN_S[kind]


class Nemesis:
    def __init__(
        self, cluster: LocalCluster, history: History, topic: str, also: tuple[str, ...] = ()
    ) -> None:
        self.cluster, self.history = cluster, history
        self.view = ClusterView(cluster, topic, also)
        self._stop = threading.Event()
        self._heal: Heal | None = None

    def stop(self) -> None:
        self._stop.set()

    def run(self, schedule: Schedule) -> None:
        """Run the rounds (blocking). Always leaves the cluster healed."""
        rng = random.Random(schedule.seed)
        end = time.monotonic() + schedule.duration_s if schedule.duration_s > 0 else None
        i = 0
        try:
            while schedule.rounds <= 0 or i < schedule.rounds:
                if self._stop.is_set() or (end is not None and time.monotonic() >= end):
                    return
                self._round(i, schedule.kinds[i % len(schedule.kinds)], schedule, rng)
                i += 1
                if self._stop.wait(schedule.quiet_s):
                    return
        finally:
            self.heal_all()

    def _round(self, i: int, kind: str, s: Schedule, rng: random.Random) -> None:
        partitions = sorted(self.view.partitions())
        target = partitions[i % len(partitions)] if partitions else 0
        down_s = s.down_for(kind)
        ctx = Context(self.cluster, self.history, self.view, rng, target, down_s)
        injected = FAULTS[kind](ctx)
        if injected is None:
            return
        fault, self._heal = injected
        log.info("round %d: %s %s (%s)", i, kind, fault.target, fault.detail)
        self._stop.wait(down_s)
        self._heal()
        self._heal = None
        fault.t_recovered = self.view.wait_whole(s.recover_timeout_s, s.full_isr)
        if fault.t_recovered is None:
            self.history.note(
                f"{kind} {fault.target}: cluster not whole {s.recover_timeout_s}s after heal"
            )

    def heal_all(self) -> None:
        """Undo whatever is still in effect: the pending heal, every network cut, every paused
        or dead node."""
        if self._heal is not None:
            with contextlib.suppress(Exception):
                self._heal()
            self._heal = None
        if isinstance(self.cluster, NamespacedCluster):
            self.cluster.net.heal()
            for fs in self.cluster.disks.values():
                fs.unfill()
        for name in self.cluster.nodes:
            self.cluster.signal_node(name, signal.SIGCONT)
            if not alive(self.cluster, name):
                self.cluster.start_node(name)
        self.cluster.wait_ready(60)
