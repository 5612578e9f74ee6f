"""Producer ids for idempotent producers, handed out from blocks the meta service allocates.

Each block comes through Raft, so ids are unique across the cluster and never reused after a
restart; the broker takes the next block before the current one runs out.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.client import MetaError

if TYPE_CHECKING:
    from dataplane.broker import Broker

log = logging.getLogger("rafka.producer_ids")


class ProducerIdManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._next = 0
        self._end = 0  # exclusive
        self._lock = anyio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                await self._allocate()
            pid = self._next
            self._next += 1
            return pid

    async def _allocate(self) -> None:
        try:
            block = await self.broker.meta.allocate_producer_ids(
                self.broker.node_id, self.broker.broker_epoch
            )
        except MetaError as e:
            log.warning("no producer id block from the meta service (%s); clients will retry", e)
            raise KafkaError(ErrorCode.coordinator_not_available, "producer ids unavailable") from e
        self._next, self._end = block.first, block.first + block.count
        log.info("producer id block %d..%d", self._next, self._end - 1)
