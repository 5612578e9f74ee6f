"""Producer ids for idempotent producers, handed out from blocks the meta service allocates.

Each block comes through Raft, so ids are unique across the cluster and never reused after a
restart. Once 90% of the current block is handed out, `run` fetches the next one in the
background (Kafka's RPCProducerIdManager prefetches at the same point), so InitProducerId
waits for the meta service only if a whole block goes before the next one arrives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress

import anyio

from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.client import MetaClient, MetaError, ProducerIdBlock

log = logging.getLogger("rafka.producer_ids")

PREFETCH_AT = 0.9  # share of a block handed out when the next one is fetched


class ProducerIdManager:
    def __init__(self, meta: MetaClient, node_id: int, broker_epoch: Callable[[], int]) -> None:
        """`broker_epoch` gives the current one: it changes when the broker registers again."""
        self._meta = meta
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self._next = 0
        self._end = 0  # exclusive
        self._prefetch_from = 0  # once ids up to here are handed out, `run` fetches the next
        self._following: ProducerIdBlock | None = None  # fetched ahead, used after this one
        self._lock = anyio.Lock()  # one meta call at a time
        self._wanted = anyio.Event()

    async def next_id(self) -> int:
        while self._next >= self._end:
            await self._next_block()
        pid = self._next
        self._next += 1
        if self._next >= self._prefetch_from and self._following is None:
            self._wanted.set()
        return pid

    async def run(self) -> None:
        """Fetch the next block whenever `next_id` has handed out 90% of the current one."""
        while True:
            await self._wanted.wait()
            self._wanted = anyio.Event()
            async with self._lock:
                if self._following is not None or self._next < self._prefetch_from:
                    continue  # fetched already, or `next_id` moved on to a fresh block
                with suppress(KafkaError):  # logged; the next id handed out asks again
                    self._following = await self._allocate()

    async def _next_block(self) -> None:
        """Move on to the block fetched ahead, or fetch one now (KafkaError if none comes)."""
        async with self._lock:
            if self._next < self._end:
                return  # another request moved on while this one waited
            block = self._following or await self._allocate()
            self._following = None
            self._next, self._end = block.first, block.first + block.size
            self._prefetch_from = block.first + int(block.size * PREFETCH_AT)
            log.info("producer id block %d..%d", self._next, self._end - 1)

    async def _allocate(self) -> ProducerIdBlock:
        try:
            return await self._meta.allocate_producer_ids(self._node_id, self._broker_epoch())
        except MetaError as e:
            log.warning("no producer id block from the meta service (%s); clients will retry", e)
            raise KafkaError(ErrorCode.coordinator_not_available, "producer ids unavailable") from e
