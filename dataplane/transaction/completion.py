"""The second phase of EndTxn: once PrepareCommit/PrepareAbort is persisted and the client
answered, every partition leader writes the COMMIT/ABORT marker (`MarkerWriter`, the
`TxnMarkerSender` of markers.py), then CompleteCommit/CompleteAbort is persisted — each step
retried until done or the shard is dropped. Markers of one id never hold up another's: each
completion runs in its own task. A new leader of the partition resumes every Prepare* it
loads (`resume`), so a commit in flight when its coordinator died completes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from dataplane.coordinator.timer import wall_ms
from dataplane.protocol.errors import ErrorCode
from dataplane.transaction.shard import TransactionShard
from dataplane.transaction.state import TransactionMetadata, TransactionState, TxnTransitMetadata
from dataplane.transaction.state_manager import TransactionStateManager

log = logging.getLogger("rafka.transaction")

S = TransactionState
_RETRY_S = 0.5  # backoff of a completion whose write or markers failed


class MarkerWriter(Protocol):
    """H4's TxnMarkerSender, as the coordinator uses it."""

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[tuple[str, int]],
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Completions:
    """Markers, then Complete*, of every transaction this broker has prepared or loaded."""

    state: TransactionStateManager
    markers: MarkerWriter

    def start(
        self, shard: TransactionShard, meta: TransactionMetadata, done: TxnTransitMetadata
    ) -> None:
        """Markers, then Complete*, in a task of its own (cancelled if the shard is dropped:
        the new leader resumes it)."""
        self.state.spawn(functools.partial(self._complete, shard, meta, done))

    def resume(self, shard: TransactionShard) -> None:
        """Resume every transaction the previous leader left in Prepare*."""
        now = wall_ms()
        resumed = 0
        for meta in shard.transactions.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and meta.pending_state is None:
                self.start(shard, meta, meta.prepare_complete(now))
                resumed += 1
        if resumed:
            log.info(
                "%s-%d: completing %d transactions left in PrepareCommit/PrepareAbort",
                self.state.topic.name,
                shard.partition_index,
                resumed,
            )

    async def _complete(
        self, shard: TransactionShard, meta: TransactionMetadata, done: TxnTransitMetadata
    ) -> None:
        scope = anyio.CancelScope()
        shard.scopes.add(scope)
        try:
            with scope:
                await self._complete_in_scope(shard, meta, done)
        finally:
            shard.scopes.discard(scope)

    async def _complete_in_scope(
        self, shard: TransactionShard, meta: TransactionMetadata, done: TxnTransitMetadata
    ) -> None:
        commit = done.state == S.COMPLETE_COMMIT
        partitions = sorted(meta.partitions)
        while not shard.unloaded:
            try:
                await self.markers.write_markers(
                    meta.producer_id,
                    meta.producer_epoch,
                    commit,
                    shard.coordinator_epoch,
                    partitions,
                )
                break
            except Exception:  # the sender retries what it can; anything else: again later
                log.exception(
                    "writing the %s markers of %r failed; retrying",
                    "commit" if commit else "abort",
                    meta.transactional_id,
                )
                await anyio.sleep(_RETRY_S)
        while not shard.unloaded and shard.get(meta.transactional_id) is meta:
            code = await self.state.write(shard, meta, done, keep_pending=True)
            if code == ErrorCode.none:
                log.debug("%r: %s", meta.transactional_id, done.state.kafka_name)
                return
            if code == ErrorCode.not_coordinator:
                return  # the new leader loads Prepare* and completes it
            log.warning(
                "completing the transaction of %r failed (%s); retrying",
                meta.transactional_id,
                code.name,
            )
            await anyio.sleep(_RETRY_S)
