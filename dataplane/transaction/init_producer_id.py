"""InitProducerId with a transactional id (Kafka's handleInitProducerId and
prepareInitProducerIdTransit): a new id gets a producer id, a known one its epoch bumped (or a
new producer id once the epochs are exhausted), which fences the previous incarnation
(PRODUCER_FENCED); an open transaction of that incarnation is aborted first
(`EndTxnFlow.fence_and_abort`). With its current producer id and epoch (KIP-360), a producer
continues itself after an error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dataplane.coordinator.timer import wall_ms
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction.end_txn import EndTxnFlow, ProducerIds
from dataplane.transaction.refusals import FAILED, Answer, illegal_state, log_refused
from dataplane.transaction.shard import TransactionShard
from dataplane.transaction.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from dataplane.transaction.state_manager import TransactionStateManager

if TYPE_CHECKING:
    from dataplane.transaction.config import TransactionConfig

log = logging.getLogger("rafka.transaction")

S = TransactionState


@dataclass(frozen=True, slots=True)
class InitProducerIdFlow:
    """Gives transactional producers their producer id and epoch."""

    config: TransactionConfig
    state: TransactionStateManager
    producer_ids: ProducerIds
    end: EndTxnFlow

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> Answer:
        """InitProducerId with a transactional id: (error, producer id, epoch). With the
        producer's current id and epoch (KIP-360) it continues that producer after an error."""
        if not transactional_id:
            return (ErrorCode.invalid_request, *FAILED)
        if not 0 < transaction_timeout_ms <= self.config.max_timeout_ms:
            log.info(
                "InitProducerId of %r: transaction.timeout.ms %d is not in (0, %d] "
                "(transaction.max.timeout.ms); lower the producer's transaction.timeout.ms",
                transactional_id,
                transaction_timeout_ms,
                self.config.max_timeout_ms,
            )
            return (ErrorCode.invalid_transaction_timeout, *FAILED)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return (ErrorCode.invalid_request, *FAILED)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        spare: int | None = None  # a producer id fetched ahead: for a new id or a rotation
        for _ in range(3):
            try:
                shard = self.state.runtime.shard(transactional_id)
                meta = shard.get(transactional_id)
                if spare is None and (meta is None or meta.epoch_exhausted):
                    spare = await self.producer_ids.next_id()
                    continue  # look again: the await let other requests in
            except KafkaError as e:
                return (e.code, *FAILED)
            if meta is None:
                assert spare is not None
                meta = TransactionMetadata(
                    transactional_id=transactional_id,
                    producer_id=spare,
                    producer_epoch=NO_PRODUCER_EPOCH,
                    txn_timeout_ms=transaction_timeout_ms,
                    state=S.EMPTY,
                    txn_last_update_timestamp=wall_ms(),
                )
                spare = None
                shard.transactions[transactional_id] = meta
            return await self._init_existing(shard, meta, transaction_timeout_ms, expected, spare)
        return (ErrorCode.concurrent_transactions, *FAILED)

    async def _init_existing(
        self,
        shard: TransactionShard,
        meta: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        spare: int | None,
    ) -> Answer:
        """Kafka's prepareInitProducerIdTransit, then the write (or the abort of the previous
        incarnation's transaction)."""
        if meta.pending_transition_in_progress:
            return (ErrorCode.concurrent_transactions, *FAILED)
        if expected is not None and not (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == meta.producer_id
            or (expected[0] == meta.previous_producer_id and is_epoch_exhausted(expected[1]))
        ):
            code = ErrorCode.producer_fenced
            wanted = (
                f"producer {meta.producer_id}, or {meta.previous_producer_id} at an exhausted epoch"
            )
            log_refused("InitProducerId", meta, code, *expected, wanted)
            return (code, *FAILED)
        state = meta.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return (ErrorCode.concurrent_transactions, *FAILED)
        if state == S.ONGOING:
            # abort the previous incarnation's transaction first; the client retries and gets
            # the epoch bumped once more (or a new producer id if this exhausts the epochs)
            log.info(
                "InitProducerId of %r: aborting the ongoing transaction of producer %d first",
                meta.transactional_id,
                meta.producer_id,
            )
            code = await self.end.fence_and_abort(meta, spare)
            return (code or ErrorCode.concurrent_transactions, *FAILED)
        if state not in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            return illegal_state(meta, "InitProducerId")
        now = wall_ms()
        transit: TxnTransitMetadata | ErrorCode
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            if spare is None:  # exhausted while this request waited: the client retries
                return (ErrorCode.concurrent_transactions, *FAILED)
            transit = meta.prepare_producer_id_rotation(
                spare, timeout_ms, now, expected is not None
            )
        else:
            transit = meta.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
        if isinstance(transit, ErrorCode):
            assert expected is not None  # only a producer's own epoch can be refused
            wanted = f"epoch {meta.producer_epoch}"
            if meta.last_producer_epoch != NO_PRODUCER_EPOCH:
                wanted += f", or {meta.last_producer_epoch} retrying"
            log_refused("InitProducerId", meta, transit, *expected, wanted)
            return (transit, *FAILED)
        code = await self.state.write(shard, meta, transit)
        if code != ErrorCode.none:
            log.info("InitProducerId of %r failed: %s", meta.transactional_id, code.name)
            return (code, *FAILED)
        log.info(
            "initialized transactional id %r: producer %d epoch %d (%s-%d)",
            meta.transactional_id,
            transit.producer_id,
            transit.producer_epoch,
            self.state.topic.name,
            shard.partition_index,
        )
        return (ErrorCode.none, transit.producer_id, transit.producer_epoch)
