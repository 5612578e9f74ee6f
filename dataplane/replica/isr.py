"""ISR changes a leader asks for, sent to the meta service as batched AlterPartition calls
(Kafka's AlterPartitionManager; the periodic check that asks to drop lagging followers is the
ReplicaManager's, as in Kafka).

The meta service commits a change only if the leader and partition epochs the leader quotes
are still current, so a deposed leader can never shrink an ISR to itself and acknowledge
writes alone; and (KIP-903) only if each member's broker epoch, as the leader saw it in the
member's fetches when it decided, is still the member's registration: a follower that
restarted meanwhile (possibly with an empty disk) is not added on the strength of a fetch of
its previous life.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from dataplane.metadata_cache import partition_info
from dataplane.metrics.replicas import isr_changed
from dataplane.protocol.errors import ErrorCode
from dataplane.replica.partition import Partition, now_ms
from meta.client import MetaClient, MetaError
from proto import meta_pb2

log = logging.getLogger("rafka.isr")

_RETRY_MS = 1000  # after a refused change, wait for newer metadata or this long

_Change = tuple[Partition, tuple[int, ...], tuple[int, ...]]  # new ISR, its broker epochs


class IsrManager:
    def __init__(self, meta: MetaClient, node_id: int, broker_epoch: Callable[[], int]) -> None:
        """`broker_epoch` gives the current one: it changes when the broker registers again."""
        self._meta = meta
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self._queue: dict[tuple[bytes, int], _Change] = {}
        self._refused_until: dict[tuple[bytes, int], tuple[int, int]] = {}  # -> (ms, epoch)
        self._ready = anyio.Event()

    def submit(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        """Ask for `new_isr` (the partition's leader calls this); one request in flight each."""
        key = (partition.topic_id, partition.index)
        refused = self._refused_until.get(key)
        if refused and refused[1] == partition.partition_epoch and now_ms() < refused[0]:
            return
        partition.pending_isr = new_isr
        self._queue[key] = (partition, new_isr, partition.isr_broker_epochs(new_isr))
        self._ready.set()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready = anyio.Event()
            batch, self._queue = list(self._queue.values()), {}
            await self._send(batch)

    async def _send(self, batch: list[_Change]) -> None:
        items = [
            meta_pb2.AlterPartitionItem(
                topic_id=p.topic_id,
                partition_index=p.index,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                new_isr=isr,
                new_isr_broker_epochs=epochs,
            )
            for p, isr, epochs in batch
        ]
        try:
            results = await self._meta.alter_partition(self._node_id, self._broker_epoch(), items)
        except MetaError as e:
            log.warning("AlterPartition failed (%s); the ISR changes will be retried", e)
            results = []
        for i, (partition, isr, _) in enumerate(batch):
            result = results[i] if i < len(results) else None
            if result is not None and result.error_code == 0:
                log.info("%r: ISR %s -> %s", partition, list(partition.isr), list(isr))
                isr_changed(len(partition.isr), len(isr))
                partition.update(partition_info(result.partition))
                continue
            if result is not None and result.error_code == ErrorCode.new_leader_elected:
                log.info(
                    "%r: ISR %s committed with another leader (a reassignment completed); "
                    "following the metadata",
                    partition,
                    list(isr),
                )
            elif result is not None:
                log.warning(
                    "%r: the meta service refused ISR %s (error %d: %s); waiting for metadata",
                    partition,
                    list(isr),
                    result.error_code,
                    result.error_message,
                )
            key = (partition.topic_id, partition.index)
            self._refused_until[key] = (now_ms() + _RETRY_MS, partition.partition_epoch)
            if partition.pending_isr == isr:
                partition.pending_isr = None
