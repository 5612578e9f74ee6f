"""EndTxn (Kafka's TransactionCoordinator.endTransaction, transaction versions 1 and 2): which
request ends which transaction, at which producer id and epoch, up to the first phase —
PrepareCommit/PrepareAbort persisted and the client answered; `Completions` (completion.py)
writes the markers and Complete*. The coordinator's own aborts come here too
(`fence_and_abort`: the producer's epoch bumped first, Kafka's PrepareEpochFence), for an
InitProducerId over an open transaction and for a transaction past its timeout.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from dataplane.coordinator.timer import wall_ms
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction.completion import Completions
from dataplane.transaction.refusals import FAILED, Answer, illegal_state, log_refused
from dataplane.transaction.shard import TransactionShard
from dataplane.transaction.state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    supports_epoch_bump,
)
from dataplane.transaction.state_manager import TransactionStateManager

log = logging.getLogger("rafka.transaction")

S = TransactionState


class ProducerIds(Protocol):
    """The broker's ProducerIdManager (ids from the meta service's blocks): an epoch bump
    needs a new producer id once the epochs are exhausted."""

    async def next_id(self) -> int: ...


class _NeedProducerId(Exception):
    """An epoch bump needs a fresh producer id (the epochs are exhausted): fetch one, retry."""


@dataclass(frozen=True, slots=True)
class _Prepared:
    """An EndTxn ready to be written: the Prepare* transition, and whether it fences."""

    transit: TxnTransitMetadata
    is_fence: bool


@dataclass(frozen=True, slots=True)
class EndTxnFlow:
    """Ends transactions: a client's EndTxn, or the coordinator's own abort."""

    state: TransactionStateManager
    producer_ids: ProducerIds
    completions: Completions

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        tv2: bool,
    ) -> Answer:
        """EndTxn: (error, producer id, epoch); TV2 (EndTxn v5+) answers the bumped epoch (or a
        new producer id once the epochs are exhausted), TV1 answers -1, -1. Like
        AddPartitionsToTxn it first waits (briefly) for the previous transaction's markers: a
        TV2 producer's next EndTxn may follow the last one at once (an abort with nothing
        sent), and would get CONCURRENT_TRANSACTIONS and a client backoff."""
        try:
            await self.state.settled(transactional_id)
        except KafkaError as e:
            return (e.code, *FAILED)
        return await self._end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            commit=commit,
            from_client=True,
            transaction_version=TV_2 if tv2 else TV_0,
        )

    async def fence_and_abort(self, meta: TransactionMetadata, spare: int | None) -> ErrorCode:
        """Abort the ongoing transaction with the producer's epoch bumped (Kafka's
        PrepareEpochFence), so its current incarnation can no longer write to it."""
        fence = meta.prepare_fence_producer_epoch()
        code, _, _ = await self._end_transaction(
            meta.transactional_id,
            fence.producer_id,
            fence.producer_epoch,
            commit=False,
            from_client=False,
            transaction_version=self.state.transaction_version,
            spare=spare,
        )
        return code

    async def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        from_client: bool,
        transaction_version: int,
        spare: int | None = None,
    ) -> Answer:
        if not transactional_id:
            return (ErrorCode.invalid_request, *FAILED)
        for _ in range(3):
            try:
                shard = self.state.runtime.shard(transactional_id)
            except KafkaError as e:
                return (e.code, *FAILED)
            meta = shard.get(transactional_id)
            if meta is None:
                return (ErrorCode.invalid_producer_id_mapping, *FAILED)
            try:
                prepared = _prepare_end(
                    meta,
                    producer_id,
                    producer_epoch,
                    commit,
                    from_client,
                    transaction_version,
                    spare,
                )
            except _NeedProducerId:
                try:
                    spare = await self.producer_ids.next_id()
                except KafkaError as e:
                    return (e.code, *FAILED)
                continue
            if isinstance(prepared, _Prepared):
                return await self._finish_end(shard, meta, prepared, commit)
            if meta.pending_state == S.PREPARE_EPOCH_FENCE:
                meta.pending_state = None  # a fence that did not go ahead
            return prepared
        return (ErrorCode.concurrent_transactions, *FAILED)

    async def _finish_end(
        self,
        shard: TransactionShard,
        meta: TransactionMetadata,
        prepared: _Prepared,
        commit: bool,
    ) -> Answer:
        """Persist Prepare*, answer, and leave the markers and Complete* to a task."""
        transit = prepared.transit
        code = await self.state.write(shard, meta, transit)
        if code != ErrorCode.none:
            tv1_fence = prepared.is_fence and not supports_epoch_bump(
                transit.client_transaction_version
            )
            if tv1_fence and shard.get(meta.transactional_id) is meta:
                # TV1 bumped the epoch in memory: the next fence must not bump it again (TV2
                # bumped nothing, so its next fence may)
                meta.has_failed_epoch_fence = True
                log.warning(
                    "fencing producer %d of %r failed (%s): its epoch %d is not written; "
                    "the next attempt reuses it",
                    meta.producer_id,
                    meta.transactional_id,
                    code.name,
                    transit.producer_epoch,
                )
            log.info(
                "EndTxn (%s) of %r not written: %s",
                "commit" if commit else "abort",
                meta.transactional_id,
                code.name,
            )
            return (code, *FAILED)
        done = meta.prepare_complete(wall_ms())
        self.completions.start(shard, meta, done)
        if supports_epoch_bump(transit.client_transaction_version):
            return (ErrorCode.none, done.producer_id, done.producer_epoch)
        return (ErrorCode.none, *FAILED)


def _prepare_end(  # noqa: C901 - Kafka's endTransaction, branch by branch
    meta: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    from_client: bool,
    tv: int,
    spare: int | None,
) -> Answer | _Prepared:
    """Kafka's endTransaction (TV1 and TV2) up to the write: an answer, or the Prepare*
    transition to write. Raises _NeedProducerId before changing anything."""
    tv2 = supports_epoch_bump(tv)
    is_fence = meta.pending_state == S.PREPARE_EPOCH_FENCE
    state = meta.state
    current = meta.producer_epoch
    retry_on_overflow = is_retry = False
    if is_fence:  # the coordinator's own abort after bumping the epoch
        valid_epoch = (not from_client or producer_epoch == current) and producer_epoch >= current
        expected = f"epoch {current} or later"
    elif tv2:
        # with TV2 every EndTxn bumps the epoch: a retry carries the epoch before the bump
        retry_on_overflow = (
            meta.previous_producer_id == producer_id
            and producer_epoch == MAX_EPOCH - 1
            and current == 0
        )
        retry_on_bump = current == producer_epoch + 1
        is_retry = retry_on_bump or retry_on_overflow
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
            expected = f"epoch {current - 1} (a retry of the EndTxn that prepared it)"
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = is_retry or producer_epoch == current
            expected = f"epoch {current}, or {current - 1} retrying the EndTxn that ended it"
        else:
            valid_epoch = producer_epoch == current
            expected = f"epoch {current}"
    else:
        valid_epoch = not ((from_client and producer_epoch != current) or producer_epoch < current)
        expected = f"epoch {current}"
    # A pending transition answers CONCURRENT_TRANSACTIONS (the client retries) before the
    # epoch is checked, as Kafka does since KAFKA-18464: with TV2 the producer's next
    # EndTxn, e.g. the abort of a transaction it sent nothing in, may come while the
    # markers of its previous one are being written, at the epoch that EndTxn answered;
    # against PrepareCommit's rule (only a retry, one epoch lower) it would look fenced.
    # Before the producer id too (Kafka checks it first): when that EndTxn ran out of
    # epochs, the producer already has the new id that Complete* only installs. Clients
    # never join a fence: they wait for it, then are fenced.
    if meta.pending_transition_in_progress and (from_client or not is_fence):
        return (ErrorCode.concurrent_transactions, *FAILED)
    what = f"EndTxn ({'commit' if commit else 'abort'}, transaction version {tv})"
    if meta.producer_id != producer_id and not retry_on_overflow:
        code = ErrorCode.invalid_producer_id_mapping
        log_refused(what, meta, code, producer_id, producer_epoch, f"producer {meta.producer_id}")
        return (code, *FAILED)
    if not valid_epoch:
        code = ErrorCode.producer_fenced
        log_refused(what, meta, code, producer_id, producer_epoch, expected)
        return (code, *FAILED)

    def prepare(next_state: TransactionState, no_partition_added: bool) -> _Prepared:
        next_producer_id = NO_PRODUCER_ID
        if tv2 and meta.epoch_exhausted:  # the bump needs a new producer id
            if spare is None:
                raise _NeedProducerId
            next_producer_id = spare
        if is_fence:
            meta.pending_state = None
            if not tv2:  # TV1: the fence's bumped epoch goes into the abort written now
                meta.producer_epoch = producer_epoch
                meta.last_producer_epoch = NO_PRODUCER_EPOCH
            # TV2: the abort bumps the epoch itself, once (Kafka does not apply the fence's)
        transit = meta.prepare_abort_or_commit(
            next_state, tv, next_producer_id, wall_ms(), no_partition_added
        )
        return _Prepared(transit, is_fence)

    # an EndTxn already done: TV2 answers the current producer id and epoch
    done: Answer = (
        (ErrorCode.none, meta.producer_id, meta.producer_epoch)
        if tv2
        else (ErrorCode.none, *FAILED)
    )
    if state == S.ONGOING:
        return prepare(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
    if is_fence:
        return illegal_state(meta, "EndTxn")
    if state == S.COMPLETE_COMMIT:
        if commit:
            return done if is_retry or not tv2 else _invalid_end(meta, commit)
        if not tv2 or is_retry:
            return _invalid_end(meta, commit)
        return prepare(S.PREPARE_ABORT, True)
    if state == S.COMPLETE_ABORT:
        if commit and is_retry:
            # KAFKA-20785: a commit at the epoch before the abort's bump is not a retry of
            # that abort (a client retries what it sent): the coordinator aborted the
            # transaction on its own (transaction.timeout.ms) while the commit was in
            # flight. PRODUCER_FENCED lets the client recover; INVALID_TXN_STATE is fatal.
            code = ErrorCode.producer_fenced
            wanted = f"epoch {current} (the transaction this commit ends was aborted)"
            log_refused(what, meta, code, producer_id, producer_epoch, wanted)
            return (code, *FAILED)
        if commit:
            return _invalid_end(meta, commit)
        return done if is_retry or not tv2 else prepare(S.PREPARE_ABORT, True)
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        if commit == (state == S.PREPARE_COMMIT):
            return (ErrorCode.concurrent_transactions, *FAILED)
        return _invalid_end(meta, commit)
    if state == S.EMPTY:
        if tv2 and not commit:
            return prepare(S.PREPARE_ABORT, True)  # TV2: aborting nothing still bumps
        return _invalid_end(meta, commit)
    return illegal_state(meta, "EndTxn")


def _invalid_end(meta: TransactionMetadata, commit: bool) -> Answer:
    log.info(
        "EndTxn (%s) of %r in state %s: INVALID_TXN_STATE",
        "commit" if commit else "abort",
        meta.transactional_id,
        meta.state.kafka_name,
    )
    return (ErrorCode.invalid_txn_state, *FAILED)
