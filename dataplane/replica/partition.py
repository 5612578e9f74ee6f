"""One replica of a topic-partition on this broker: its log, its role and its high watermark.

The high watermark is the offset below which every in-sync replica has the data; consumers
never see past it, and acks=all produce completes once it passes the produced batch.
"""

from __future__ import annotations

import logging

import anyio

from dataplane.log import AppendResult, PartitionLog
from dataplane.metadata_cache import PartitionInfo
from dataplane.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("rafka.partition")


class Partition:
    """Role, epoch and high watermark around a PartitionLog; wakes fetch waiters on progress."""

    def __init__(
        self, topic: str, topic_id: bytes, index: int, plog: PartitionLog, node_id: int
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = plog
        self.node_id = node_id
        self.leader = -1
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.min_insync_replicas = 1
        self.high_watermark = plog.log_start_offset
        self._waiters: set[anyio.Event] = set()

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    def __repr__(self) -> str:
        return f"{self.topic}-{self.index}"

    def update(self, info: PartitionInfo) -> None:
        """Apply a leadership/ISR change from the metadata service."""
        became_leader = info.leader == self.node_id and (
            not self.is_leader or info.leader_epoch != self.leader_epoch
        )
        self.leader, self.leader_epoch = info.leader, info.leader_epoch
        self.isr, self.replicas = info.isr, info.replicas
        if became_leader:
            log.info(
                "%r: leader at epoch %d (log end %d)",
                self,
                info.leader_epoch,
                self.log.log_end_offset,
            )
        self._maybe_advance_high_watermark()

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Kafka's fencing of requests that name a leader epoch (KIP-320)."""
        if not self.is_leader:
            raise KafkaError(
                ErrorCode.not_leader_or_follower, f"broker {self.node_id} does not lead {self!r}"
            )
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)

    def append(self, records: bytes, now_ms: int) -> AppendResult:
        result = self.log.append_as_leader(records, self.leader_epoch, now_ms)
        self._maybe_advance_high_watermark()
        return result

    def _maybe_advance_high_watermark(self) -> None:
        """Only replicas in the ISR count; with this broker alone in the ISR, HW = log end."""
        if self.is_leader and self.isr == (self.node_id,):
            self._set_high_watermark(self.log.log_end_offset)

    def _set_high_watermark(self, offset: int) -> None:
        if offset > self.high_watermark:
            self.high_watermark = offset
            waiters, self._waiters = self._waiters, set()
            for event in waiters:
                event.set()

    def watch(self, event: anyio.Event) -> None:
        """Set `event` the next time the high watermark moves (fetch long poll, acks=all)."""
        self._waiters.add(event)

    def unwatch(self, event: anyio.Event) -> None:
        self._waiters.discard(event)

    async def wait_for_high_watermark(self, offset: int, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while self.high_watermark < offset:
                event = anyio.Event()
                self.watch(event)
                try:
                    await event.wait()
                finally:
                    self.unwatch(event)
            return True
        return False

    def close(self) -> None:
        self.log.close()
