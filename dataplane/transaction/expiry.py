"""The coordinator's timeouts (Kafka's abortTimedOutTransactions and
removeExpiredTransactionalIds), run every transaction.abort.timed.out.transaction.cleanup.
interval.ms and transaction.remove.expired.transaction.cleanup.interval.ms: a transaction open
longer than its transaction.timeout.ms is aborted, its producer fenced first (an epoch bump);
an id idle for transactional.id.expiration.ms with nothing open is removed (a tombstone).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dataplane.coordinator.timer import wall_ms
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction.end_txn import EndTxnFlow, ProducerIds
from dataplane.transaction.records import encode_key
from dataplane.transaction.shard import TransactionShard
from dataplane.transaction.state import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    supports_epoch_bump,
)
from dataplane.transaction.state_manager import TransactionStateManager

if TYPE_CHECKING:
    from dataplane.transaction.config import TransactionConfig

log = logging.getLogger("rafka.transaction")

S = TransactionState
_EXPIRE_BATCH = 500  # tombstones per write


@dataclass(frozen=True, slots=True)
class Expiry:
    """Aborts timed-out transactions and removes expired transactional ids."""

    config: TransactionConfig
    state: TransactionStateManager
    producer_ids: ProducerIds
    end: EndTxnFlow

    def abort_timed_out(self) -> int:
        """Abort every ongoing transaction older than its timeout, fencing its producer first
        (Kafka's abortTimedOutTransactions); returns how many were started."""
        now = wall_ms()
        started = 0
        for shard in self.state.runtime.loaded_shards():
            for meta in shard.transactions.values():
                if _timed_out(meta, now):
                    self.state.spawn(functools.partial(self._abort_timed_out, shard, meta))
                    started += 1
        return started

    async def _abort_timed_out(self, shard: TransactionShard, meta: TransactionMetadata) -> None:
        spare = None
        if meta.epoch_exhausted and supports_epoch_bump(self.state.transaction_version):
            try:
                spare = await self.producer_ids.next_id()
            except KafkaError as e:
                log.info("abort of timed-out %r postponed: %s", meta.transactional_id, e.code.name)
                return
        # from here to the write nothing awaits: the fence and its abort are one step
        if shard.unloaded or shard.get(meta.transactional_id) is not meta:
            return
        if not _timed_out(meta, wall_ms()):
            return
        log.info(
            "aborting the transaction of %r (producer %d): open longer than its timeout of %d ms",
            meta.transactional_id,
            meta.producer_id,
            meta.txn_timeout_ms,
        )
        code = await self.end.fence_and_abort(meta, spare)
        if code != ErrorCode.none:
            log.warning("rollback of timed-out %r failed: %s", meta.transactional_id, code.name)

    def remove_expired(self) -> int:
        """Tombstone every id idle for transactional.id.expiration.ms with nothing open;
        returns how many."""
        now = wall_ms()
        count = 0
        for shard in self.state.runtime.loaded_shards():
            expired: list[tuple[TransactionMetadata, TxnTransitMetadata]] = []
            for meta in shard.transactions.values():
                if (
                    meta.pending_state is None
                    and meta.state.expiration_allowed
                    and meta.txn_last_update_timestamp
                    <= now - self.config.transactional_id_expiration_ms
                ):
                    expired.append((meta, meta.prepare_dead()))
            for i in range(0, len(expired), _EXPIRE_BATCH):
                batch = expired[i : i + _EXPIRE_BATCH]
                self.state.spawn(functools.partial(self._write_tombstones, shard, batch))
                count += len(batch)
        return count

    async def _write_tombstones(
        self,
        shard: TransactionShard,
        batch: list[tuple[TransactionMetadata, TxnTransitMetadata]],
    ) -> None:
        records = [(encode_key(m.transactional_id), None) for m, _ in batch]
        try:
            await self.state.runtime.append(batch[0][0].transactional_id, records, replay=False)
            ok = True
        except KafkaError as e:
            ok = False
            log.info("expiring %d transactional ids postponed: %s", len(batch), e.code.name)
        removed = 0
        for meta, dead in batch:
            tid = meta.transactional_id
            if shard.get(tid) is not meta:
                continue
            if (
                ok
                and not shard.unloaded
                and meta.pending_state == S.DEAD
                and meta.producer_epoch == dead.producer_epoch
            ):
                del shard.transactions[tid]
                removed += 1
            else:
                meta.pending_state = None
        if removed:
            log.info(
                "%s-%d: expired %d idle transactional ids",
                self.state.topic.name,
                shard.partition_index,
                removed,
            )


def _timed_out(meta: TransactionMetadata, now_ms: int) -> bool:
    return (
        not meta.pending_transition_in_progress
        and meta.state == S.ONGOING
        and meta.txn_start_timestamp + meta.txn_timeout_ms < now_ms
    )
