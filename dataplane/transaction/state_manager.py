"""Where the transaction coordinator's state lives and how it changes (Kafka's
TransactionStateManager): the `CoordinatorRuntime` over `__transaction_state`'s partitions
(a `TransactionShard` each), the write of a prepared transition, the short wait of a request
behind an id's transition, and the task group the coordinator's background work runs in.

Every change of an id is prepared on its `TransactionMetadata` (a pending state keeps other
requests out: CONCURRENT_TRANSACTIONS), written to its partition and replicated, and only then
applied (`write`) — so what a client was told survives a coordinator failover.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from dataplane import features
from dataplane.coordinator.base import map_append_error
from dataplane.coordinator.runtime import CoordinatorRuntime
from dataplane.features import TRANSACTION_VERSION
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction.records import encode_key, encode_value
from dataplane.transaction.shard import ShardListener, TransactionShard
from dataplane.transaction.state import (
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)

if TYPE_CHECKING:
    from dataplane.coordinator.runtime import InternalTopic
    from dataplane.metadata_cache import MetadataCache
    from dataplane.replica.manager import ReplicaManager
    from dataplane.transaction.config import TransactionConfig

log = logging.getLogger("rafka.transaction")

S = TransactionState
# How long AddPartitionsToTxn/AddOffsetsToTxn wait for the previous transaction to complete
# before answering CONCURRENT_TRANSACTIONS (see `settled`).
_SETTLE_WAIT_S = 1.0

Work = Callable[[], Awaitable[None]]
"""Background work of the coordinator (`spawn`)."""


class TransactionStateManager:
    """The shards of the partitions this broker leads, and the writes that change them."""

    def __init__(
        self,
        config: TransactionConfig,
        cache: MetadataCache,
        replicas: ReplicaManager,
        topic: InternalTopic,
        listener: ShardListener,
    ) -> None:
        self._config = config
        self._cache = cache
        self._replicas = replicas
        self.topic = topic
        self._listener = listener
        self.runtime: CoordinatorRuntime[TransactionShard] = CoordinatorRuntime(
            replicas, topic, self._new_shard
        )
        self._task_group: anyio.abc.TaskGroup | None = None
        self._transition_done = anyio.Event()  # set (and replaced) when a transition ends
        self._queued: list[Work] = []

    @property
    def transaction_version(self) -> int:
        """The finalized transaction.version level (UpdateFeatures changes it live;
        dataplane/features.py)."""
        return features.level(self._cache, TRANSACTION_VERSION, self._config.transaction_version)

    def _new_shard(self, index: int) -> TransactionShard:
        partition = self._replicas.partitions.get((self.topic.name, index))
        epoch = partition.leader_epoch if partition is not None else 0
        return TransactionShard(index, epoch, self._listener)

    # -- writing ------------------------------------------------------------------------------

    async def write(
        self,
        shard: TransactionShard,
        meta: TransactionMetadata,
        transit: TxnTransitMetadata,
        *,
        keep_pending: bool = False,
    ) -> ErrorCode:
        """Write a transition and apply it once replicated; on failure drop the pending state
        (unless the caller retries the same transition)."""
        try:
            return await self._write_transition(shard, meta, transit, keep_pending)
        finally:
            self.transition_ended()

    async def _write_transition(
        self,
        shard: TransactionShard,
        meta: TransactionMetadata,
        transit: TxnTransitMetadata,
        keep_pending: bool,
    ) -> ErrorCode:
        tid = meta.transactional_id
        record = (encode_key(tid), encode_value(transit, self.transaction_version))
        try:
            with anyio.CancelScope(shield=True):  # bounded by the runtime's write timeout
                await self.runtime.append(tid, [record], replay=False)
        except KafkaError as e:
            code = map_append_error(e.code)  # as a group write failure maps
            if not keep_pending and shard.get(tid) is meta:
                meta.pending_state = None
            return code
        if shard.unloaded or shard.get(tid) is not meta:
            return ErrorCode.not_coordinator  # leadership moved: the new leader has the record
        try:
            meta.complete_transition_to(transit)
        except IllegalTransition:
            log.exception("transactional id %r: applying a written transition failed", tid)
            meta.pending_state = None
            return ErrorCode.unknown_server_error
        return ErrorCode.none

    def transition_ended(self) -> None:
        """Wake the requests `settled` parks: some transition was applied or dropped (or the
        shard unloaded: they answer NOT_COORDINATOR now)."""
        self._transition_done.set()
        self._transition_done = anyio.Event()

    async def settled(self, transactional_id: str) -> None:
        """Wait (up to _SETTLE_WAIT_S) while the id's previous transaction is still being
        completed. Kafka answers CONCURRENT_TRANSACTIONS at once and the producer retries after
        a backoff (librdkafka and the Java client: 20-100 ms), which caps a producer that
        commits back to back at a few dozen transactions per second; waiting here turns that
        backoff into the few milliseconds the markers take. Raises what `runtime.shard`
        raises."""
        deadline = anyio.current_time() + _SETTLE_WAIT_S
        while True:
            meta = self.runtime.shard(transactional_id).get(transactional_id)
            busy = meta is not None and (
                meta.pending_transition_in_progress
                or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
            )
            remaining = deadline - anyio.current_time()
            if not busy or remaining <= 0:
                return
            with anyio.move_on_after(remaining):
                await self._transition_done.wait()

    # -- background work ----------------------------------------------------------------------

    def spawn(self, fn: Work) -> None:
        """Run `fn` in the coordinator's task group (queued until `run` has started it)."""
        if self._task_group is None:
            self._queued.append(fn)
        else:
            self._task_group.start_soon(_guarded, fn)

    async def run(self, *periodic: tuple[int, Callable[[], int]]) -> None:
        """Run the runtime, the spawned work and every (interval_ms, job) of `periodic`."""
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            for fn in self._queued:
                tg.start_soon(_guarded, fn)
            self._queued.clear()
            for interval_ms, job in periodic:
                tg.start_soon(_every, interval_ms, job)
            await self.runtime.run()


async def _every(interval_ms: int, fn: Callable[[], int]) -> None:
    while True:
        await anyio.sleep(interval_ms / 1000)
        try:
            fn()
        except Exception:
            log.exception("transaction coordinator background work failed")


async def _guarded(fn: Work) -> None:
    try:
        await fn()
    except Exception:
        log.exception("transaction coordinator background work failed")
