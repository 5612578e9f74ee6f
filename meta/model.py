"""The entities of cluster metadata: brokers, topics and their partitions.

They are frozen: a change replaces the object (``dataclasses.replace``), so a reader holding one
never sees it change underneath, and results can share objects with the state safely.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_LEADER = -1


@dataclass(frozen=True)
class Partition:
    index: int
    replicas: tuple[int, ...]  # preferred leader first
    isr: tuple[int, ...]
    leader: int  # NO_LEADER: offline
    leader_epoch: int = 0  # bumped on every leader change
    partition_epoch: int = 0  # bumped on every change of this partition


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: bytes  # 16 raw bytes of a UUID4
    partitions: tuple[Partition, ...]
    configs: dict[str, str] = field(default_factory=dict)  # overrides only; never mutated
    internal: bool = False


@dataclass(frozen=True)
class Broker:
    id: int
    host: str
    port: int
    rack: str | None
    replication_endpoint: str
    incarnation_id: bytes  # new on every broker process start
    epoch: int  # the metadata offset of its latest registration, as in KRaft
    fenced: bool = False
    # Asked for a controlled shutdown: leads nothing new, joins no ISR, and heartbeats do not
    # unfence it; a new registration (the restarted process) clears it.
    in_controlled_shutdown: bool = False

    @property
    def active(self) -> bool:
        """May lead partitions and be in ISRs: unfenced and not shutting down (KRaft's isActive)."""
        return not self.fenced and not self.in_controlled_shutdown
