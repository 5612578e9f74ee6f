"""The transaction coordinator (Kafka's TransactionCoordinator and TransactionStateManager):
transactional ids on the leaders of `__transaction_state`'s partitions.

Every change of an id is prepared on its `TransactionMetadata` (a pending state keeps other
requests out: CONCURRENT_TRANSACTIONS), written to its partition and replicated, and only then
applied — so what a client was told survives a coordinator failover. EndTxn is two-phase:
PrepareCommit/PrepareAbort is persisted and the client answered, then every partition leader
writes the COMMIT/ABORT marker (`write_markers`), then CompleteCommit/CompleteAbort is
persisted. A new leader of the partition resumes every Prepare* it loads, so a commit in
flight when its coordinator died completes. Markers of one id never hold up another's: each
completion runs in its own task.

In the background it aborts transactions open longer than their timeout (fencing the producer
with an epoch bump first) and removes ids idle for transactional.id.expiration.ms (tombstones).
Client errors come back as Kafka error codes; nothing here raises for them.
"""

from __future__ import annotations

import builtins
import functools
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio

from dataplane import features
from dataplane.coordinator.base import map_append_error
from dataplane.coordinator.runtime import CoordinatorRuntime, partition_for
from dataplane.coordinator.timer import wall_ms
from dataplane.features import TRANSACTION_VERSION
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction.records import encode_key, encode_value
from dataplane.transaction.shard import TransactionShard
from dataplane.transaction.state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
    IllegalTransition,
    ListedTransaction,
    TransactionDescription,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    supports_epoch_bump,
)

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.coordinator.runtime import InternalTopic
    from dataplane.metadata_cache import MetadataCache
    from dataplane.replica.manager import ReplicaManager

log = logging.getLogger("rafka.transaction")

S = TransactionState
OFFSETS_TOPIC = "__consumer_offsets"
_EXPIRE_BATCH = 500  # tombstones per write
_RETRY_S = 0.5  # backoff of a completion whose write or markers failed
# How long AddPartitionsToTxn/AddOffsetsToTxn wait for the previous transaction to complete
# before answering CONCURRENT_TRANSACTIONS (see `_settled`).
_SETTLE_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The coordinator's settings (Kafka's TransactionConfig)."""

    max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    # transaction.version until the meta service has finalized feature levels (the broker
    # setting; see `TransactionCoordinator.transaction_version`)
    transaction_version: int = TV_2
    offsets_topic_partitions: int = 50  # where AddOffsetsToTxn finds a group's partition


def transaction_config(config: BrokerConfig) -> TransactionConfig:
    return TransactionConfig(
        max_timeout_ms=config.transaction_max_timeout_ms,
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        abort_timed_out_interval_ms=(
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        ),
        remove_expired_interval_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
        transaction_version=config.transaction_version,
        offsets_topic_partitions=config.offsets_topic_num_partitions,
    )


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


class ProducerIds(Protocol):
    """The broker's ProducerIdManager (ids from the meta service's blocks)."""

    async def next_id(self) -> int: ...


class _NeedProducerId(Exception):
    """An epoch bump needs a fresh producer id (the epochs are exhausted): fetch one, retry."""


Answer = tuple[ErrorCode, int, int]
"""(error, producer id, producer epoch), as InitProducerId and EndTxn answer."""
_FAILED = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """An EndTxn ready to be written: the Prepare* transition, and whether it fences."""

    transit: TxnTransitMetadata
    is_fence: bool


_REFUSAL_CAUSES = {
    ErrorCode.producer_fenced: (
        "a newer producer with this transactional.id has initialized, or the coordinator "
        "aborted the transaction after transaction.timeout.ms; this producer is fenced: close "
        "it (a new one with the same transactional.id continues)"
    ),
    ErrorCode.invalid_producer_id_mapping: (
        "the transactional id has another producer id now (a newer producer initialized "
        "after the epochs ran out, or the id expired after transactional.id.expiration.ms); "
        "this producer must initialize again"
    ),
}


def _log_refused(
    what: str,
    meta: TransactionMetadata,
    code: ErrorCode,
    producer_id: int,
    producer_epoch: int,
    expected: str,
) -> None:
    """Log a fencing decision with the epochs on both sides: the client only sees the code."""
    log.info(
        "%s of %r refused with %s: the request has producer %d epoch %d; the coordinator has "
        "producer %d epoch %d (previous producer %d, last epoch %d, state %s) and expects %s. "
        "Likely cause: %s",
        what,
        meta.transactional_id,
        code.name.upper(),
        producer_id,
        producer_epoch,
        meta.producer_id,
        meta.producer_epoch,
        meta.previous_producer_id,
        meta.last_producer_epoch,
        meta.state.kafka_name,
        expected,
        _REFUSAL_CAUSES[code],
    )


def for_client_version(code: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) as a client of an older API version knows it:
    INVALID_PRODUCER_EPOCH below `fenced_since`, the version that introduced it."""
    if code == ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return code


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        cache: MetadataCache,
        replicas: ReplicaManager,
        topic: InternalTopic,
        producer_ids: ProducerIds,
        markers: MarkerWriter,
    ) -> None:
        self.config = config
        self._cache = cache
        self._replicas = replicas
        self.topic = topic
        self._producer_ids = producer_ids
        self._markers = markers
        self.runtime: CoordinatorRuntime[TransactionShard] = CoordinatorRuntime(
            replicas, topic, self._new_shard
        )
        self._task_group: anyio.abc.TaskGroup | None = None
        self._transition_done = anyio.Event()  # set (and replaced) when a transition ends
        self._queued: list[Callable[[], Awaitable[None]]] = []

    @property
    def transaction_version(self) -> int:
        """The finalized transaction.version level (UpdateFeatures changes it live;
        dataplane/features.py)."""
        return features.level(self._cache, TRANSACTION_VERSION, self.config.transaction_version)

    def _new_shard(self, index: int) -> TransactionShard:
        partition = self._replicas.partitions.get((self.topic.name, index))
        epoch = partition.leader_epoch if partition is not None else 0
        return TransactionShard(index, epoch, self)

    # -- the client APIs ----------------------------------------------------------------------

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
            return (ErrorCode.invalid_request, *_FAILED)
        if not 0 < transaction_timeout_ms <= self.config.max_timeout_ms:
            log.info(
                "InitProducerId of %r: transaction.timeout.ms %d is not in (0, %d] "
                "(transaction.max.timeout.ms); lower the producer's transaction.timeout.ms",
                transactional_id,
                transaction_timeout_ms,
                self.config.max_timeout_ms,
            )
            return (ErrorCode.invalid_transaction_timeout, *_FAILED)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return (ErrorCode.invalid_request, *_FAILED)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        spare: int | None = None  # a producer id fetched ahead: for a new id or a rotation
        for _ in range(3):
            try:
                shard = self.runtime.shard(transactional_id)
                meta = shard.get(transactional_id)
                if spare is None and (meta is None or meta.epoch_exhausted):
                    spare = await self._producer_ids.next_id()
                    continue  # look again: the await let other requests in
            except KafkaError as e:
                return (e.code, *_FAILED)
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
        return (ErrorCode.concurrent_transactions, *_FAILED)

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
            return (ErrorCode.concurrent_transactions, *_FAILED)
        if expected is not None and not (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == meta.producer_id
            or (expected[0] == meta.previous_producer_id and is_epoch_exhausted(expected[1]))
        ):
            code = ErrorCode.producer_fenced
            wanted = (
                f"producer {meta.producer_id}, or {meta.previous_producer_id} at an exhausted epoch"
            )
            _log_refused("InitProducerId", meta, code, *expected, wanted)
            return (code, *_FAILED)
        state = meta.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return (ErrorCode.concurrent_transactions, *_FAILED)
        if state == S.ONGOING:
            # abort the previous incarnation's transaction first; the client retries and gets
            # the epoch bumped once more (or a new producer id if this exhausts the epochs)
            log.info(
                "InitProducerId of %r: aborting the ongoing transaction of producer %d first",
                meta.transactional_id,
                meta.producer_id,
            )
            code = await self._fence_and_abort(meta, spare)
            return (code or ErrorCode.concurrent_transactions, *_FAILED)
        if state not in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            return self._illegal(meta, "InitProducerId")
        now = wall_ms()
        transit: TxnTransitMetadata | ErrorCode
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            if spare is None:  # exhausted while this request waited: the client retries
                return (ErrorCode.concurrent_transactions, *_FAILED)
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
            _log_refused("InitProducerId", meta, transit, *expected, wanted)
            return (transit, *_FAILED)
        code = await self._write(shard, meta, transit)
        if code != ErrorCode.none:
            log.info("InitProducerId of %r failed: %s", meta.transactional_id, code.name)
            return (code, *_FAILED)
        log.info(
            "initialized transactional id %r: producer %d epoch %d (%s-%d)",
            meta.transactional_id,
            transit.producer_id,
            transit.producer_epoch,
            self.topic.name,
            shard.partition_index,
        )
        return (ErrorCode.none, transit.producer_id, transit.producer_epoch)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[tuple[str, int]],
        verify_only: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn (and the partition leaders' KIP-890 calls): an error per
        partition. verify_only answers whether each partition is in the ongoing transaction
        (NONE or TRANSACTION_ABORTABLE, which the leader maps to INVALID_TXN_STATE for clients
        that predate it) without adding it."""
        wanted = list(dict.fromkeys(partitions))

        def every(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return dict.fromkeys(wanted, code)

        if not transactional_id:
            return every(ErrorCode.invalid_request)
        try:
            await self._settled(transactional_id)
            shard = self.runtime.shard(transactional_id)
        except KafkaError as e:
            return every(e.code)
        meta = shard.get(transactional_id)
        if meta is None:
            return every(ErrorCode.invalid_producer_id_mapping)
        what = "AddPartitionsToTxn" + (" (verification)" if verify_only else "")
        if meta.producer_id != producer_id:
            code = ErrorCode.invalid_producer_id_mapping
            _log_refused(
                what, meta, code, producer_id, producer_epoch, f"producer {meta.producer_id}"
            )
            return every(code)
        if meta.producer_epoch != producer_epoch:
            code = ErrorCode.producer_fenced
            _log_refused(
                what, meta, code, producer_id, producer_epoch, f"epoch {meta.producer_epoch}"
            )
            return every(code)
        if verify_only:
            # a pending state is not checked: the append validates the epoch again
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return every(ErrorCode.concurrent_transactions)
            return {
                tp: ErrorCode.none if tp in meta.partitions else ErrorCode.transaction_abortable
                for tp in wanted
            }
        if meta.pending_transition_in_progress or meta.state in (
            S.PREPARE_COMMIT,
            S.PREPARE_ABORT,
        ):
            return every(ErrorCode.concurrent_transactions)
        if meta.state == S.ONGOING and meta.partitions.issuperset(wanted):
            return every(ErrorCode.none)
        if meta.state not in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return every(self._illegal(meta, "AddPartitionsToTxn")[0])
        transit = meta.prepare_add_partitions(wanted, wall_ms(), meta.client_transaction_version)
        return every(await self._write(shard, meta, transit))

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction
        (its leader gets the marker that makes the transaction's offsets visible)."""
        tp = (OFFSETS_TOPIC, partition_for(group_id, self.config.offsets_topic_partitions))
        result = await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])
        return result[tp]

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
            await self._settled(transactional_id)
        except KafkaError as e:
            return (e.code, *_FAILED)
        return await self._end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            commit=commit,
            from_client=True,
            transaction_version=TV_2 if tv2 else TV_0,
        )

    async def describe(
        self, transactional_ids: Iterable[str]
    ) -> builtins.list[TransactionDescription]:
        return [self._describe(transactional_id) for transactional_id in transactional_ids]

    def _describe(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(transactional_id, ErrorCode.invalid_request)
        try:
            meta = self.runtime.shard(transactional_id).get(transactional_id)
        except KafkaError as e:
            return TransactionDescription(transactional_id, e.code)
        if meta is None or meta.state == S.DEAD:
            return TransactionDescription(transactional_id, ErrorCode.transactional_id_not_found)
        by_topic: dict[str, builtins.list[int]] = {}
        for topic, index in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(index)
        return TransactionDescription(
            transactional_id,
            ErrorCode.none,
            state=meta.state.kafka_name,
            timeout_ms=meta.txn_timeout_ms,
            start_time_ms=meta.txn_start_timestamp,
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            partitions=tuple((t, tuple(ps)) for t, ps in by_topic.items()),
        )

    async def list(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        pattern: str | None = None,
    ) -> builtins.list[ListedTransaction]:
        """The ids this broker coordinates, filtered as ListTransactions asks: state names (as
        DescribeTransactions shows them), producer ids, open longer than duration_filter_ms
        (when >= 0), a regular expression the whole id matches (re.error if it is invalid)."""
        state_names = set(states)
        pids = set(producer_ids)
        regex = re.compile(pattern) if pattern else None
        now = wall_ms()
        out = []
        for shard in self.runtime.loaded_shards():
            for meta in shard.transactions.values():
                if (
                    meta.state == S.DEAD
                    or (pids and meta.producer_id not in pids)
                    or (state_names and meta.state.kafka_name not in state_names)
                    or (
                        duration_filter_ms >= 0
                        and now - meta.txn_start_timestamp <= duration_filter_ms
                    )
                    or (regex is not None and not regex.fullmatch(meta.transactional_id))
                ):
                    continue
                out.append(
                    ListedTransaction(
                        meta.transactional_id, meta.producer_id, meta.state.kafka_name
                    )
                )
        return out

    def is_loading(self) -> bool:
        """Whether a partition this broker leads is still loading (ListTransactions answers
        COORDINATOR_LOAD_IN_PROGRESS then)."""
        return self.runtime.is_loading()

    # -- EndTxn -------------------------------------------------------------------------------

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
            return (ErrorCode.invalid_request, *_FAILED)
        for _ in range(3):
            try:
                shard = self.runtime.shard(transactional_id)
            except KafkaError as e:
                return (e.code, *_FAILED)
            meta = shard.get(transactional_id)
            if meta is None:
                return (ErrorCode.invalid_producer_id_mapping, *_FAILED)
            try:
                prepared = self._prepare_end(
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
                    spare = await self._producer_ids.next_id()
                except KafkaError as e:
                    return (e.code, *_FAILED)
                continue
            if isinstance(prepared, _Prepared):
                return await self._finish_end(shard, meta, prepared, commit)
            if meta.pending_state == S.PREPARE_EPOCH_FENCE:
                meta.pending_state = None  # a fence that did not go ahead
            return prepared
        return (ErrorCode.concurrent_transactions, *_FAILED)

    def _prepare_end(  # noqa: C901 - Kafka's endTransaction, branch by branch
        self,
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
            valid_epoch = (
                not from_client or producer_epoch == current
            ) and producer_epoch >= current
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
            valid_epoch = not (
                (from_client and producer_epoch != current) or producer_epoch < current
            )
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
            return (ErrorCode.concurrent_transactions, *_FAILED)
        what = f"EndTxn ({'commit' if commit else 'abort'}, transaction version {tv})"
        if meta.producer_id != producer_id and not retry_on_overflow:
            code = ErrorCode.invalid_producer_id_mapping
            _log_refused(
                what, meta, code, producer_id, producer_epoch, f"producer {meta.producer_id}"
            )
            return (code, *_FAILED)
        if not valid_epoch:
            code = ErrorCode.producer_fenced
            _log_refused(what, meta, code, producer_id, producer_epoch, expected)
            return (code, *_FAILED)

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
            else (ErrorCode.none, *_FAILED)
        )
        if state == S.ONGOING:
            return prepare(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
        if is_fence:
            return self._illegal(meta, "EndTxn")
        if state == S.COMPLETE_COMMIT:
            if commit:
                return done if is_retry or not tv2 else self._invalid_end(meta, commit)
            if not tv2 or is_retry:
                return self._invalid_end(meta, commit)
            return prepare(S.PREPARE_ABORT, True)
        if state == S.COMPLETE_ABORT:
            if commit and is_retry:
                # KAFKA-20785: a commit at the epoch before the abort's bump is not a retry of
                # that abort (a client retries what it sent): the coordinator aborted the
                # transaction on its own (transaction.timeout.ms) while the commit was in
                # flight. PRODUCER_FENCED lets the client recover; INVALID_TXN_STATE is fatal.
                code = ErrorCode.producer_fenced
                wanted = f"epoch {current} (the transaction this commit ends was aborted)"
                _log_refused(what, meta, code, producer_id, producer_epoch, wanted)
                return (code, *_FAILED)
            if commit:
                return self._invalid_end(meta, commit)
            return done if is_retry or not tv2 else prepare(S.PREPARE_ABORT, True)
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            if commit == (state == S.PREPARE_COMMIT):
                return (ErrorCode.concurrent_transactions, *_FAILED)
            return self._invalid_end(meta, commit)
        if state == S.EMPTY:
            if tv2 and not commit:
                return prepare(S.PREPARE_ABORT, True)  # TV2: aborting nothing still bumps
            return self._invalid_end(meta, commit)
        return self._illegal(meta, "EndTxn")

    async def _finish_end(
        self,
        shard: TransactionShard,
        meta: TransactionMetadata,
        prepared: _Prepared,
        commit: bool,
    ) -> Answer:
        """Persist Prepare*, answer, and leave the markers and Complete* to a task."""
        transit = prepared.transit
        code = await self._write(shard, meta, transit)
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
            return (code, *_FAILED)
        done = meta.prepare_complete(wall_ms())
        self._spawn_completion(shard, meta, done)
        if supports_epoch_bump(transit.client_transaction_version):
            return (ErrorCode.none, done.producer_id, done.producer_epoch)
        return (ErrorCode.none, *_FAILED)

    def _invalid_end(self, meta: TransactionMetadata, commit: bool) -> Answer:
        log.info(
            "EndTxn (%s) of %r in state %s: INVALID_TXN_STATE",
            "commit" if commit else "abort",
            meta.transactional_id,
            meta.state.kafka_name,
        )
        return (ErrorCode.invalid_txn_state, *_FAILED)

    def _illegal(self, meta: TransactionMetadata, what: str) -> Answer:
        log.error(
            "%s: transactional id %r is in state %s (pending %s), which this request should "
            "never find: a coordinator bug",
            what,
            meta.transactional_id,
            meta.state.kafka_name,
            meta.pending_state,
        )
        return (ErrorCode.unknown_server_error, *_FAILED)

    # -- markers and completion ---------------------------------------------------------------

    def _spawn_completion(
        self, shard: TransactionShard, meta: TransactionMetadata, done: TxnTransitMetadata
    ) -> None:
        """Markers, then Complete*, in a task of its own (cancelled if the shard is dropped:
        the new leader resumes it)."""
        self._spawn(functools.partial(self._complete, shard, meta, done))

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
                await self._markers.write_markers(
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
            code = await self._write(shard, meta, done, keep_pending=True)
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

    # -- writing ------------------------------------------------------------------------------

    async def _write(
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
            self._transition_ended()

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

    def _transition_ended(self) -> None:
        """Wake the requests `_settled` parks: some transition was applied or dropped."""
        self._transition_done.set()
        self._transition_done = anyio.Event()

    async def _settled(self, transactional_id: str) -> None:
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

    # -- shards -------------------------------------------------------------------------------

    def shard_loaded(self, shard: TransactionShard) -> None:
        """Resume every transaction the previous leader left in Prepare*."""
        now = wall_ms()
        resumed = 0
        for meta in shard.transactions.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and meta.pending_state is None:
                self._spawn_completion(shard, meta, meta.prepare_complete(now))
                resumed += 1
        if resumed:
            log.info(
                "%s-%d: completing %d transactions left in PrepareCommit/PrepareAbort",
                self.topic.name,
                shard.partition_index,
                resumed,
            )

    def shard_unloaded(self, shard: TransactionShard) -> None:
        self._transition_ended()  # parked requests answer NOT_COORDINATOR now
        log.info(
            "%s-%d: no longer coordinating its transactions", self.topic.name, shard.partition_index
        )

    # -- background work ----------------------------------------------------------------------

    def _spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        if self._task_group is None:
            self._queued.append(fn)
        else:
            self._task_group.start_soon(_guarded, fn)

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            for fn in self._queued:
                tg.start_soon(_guarded, fn)
            self._queued.clear()
            tg.start_soon(
                self._every, self.config.abort_timed_out_interval_ms, self.abort_timed_out
            )
            tg.start_soon(self._every, self.config.remove_expired_interval_ms, self.remove_expired)
            await self.runtime.run()

    async def _every(self, interval_ms: int, fn: Callable[[], int]) -> None:
        while True:
            await anyio.sleep(interval_ms / 1000)
            try:
                fn()
            except Exception:
                log.exception("transaction coordinator background work failed")

    def abort_timed_out(self) -> int:
        """Abort every ongoing transaction older than its timeout, fencing its producer first
        (Kafka's abortTimedOutTransactions); returns how many were started."""
        now = wall_ms()
        started = 0
        for shard in self.runtime.loaded_shards():
            for meta in shard.transactions.values():
                if _timed_out(meta, now):
                    self._spawn(functools.partial(self._abort_timed_out, shard, meta))
                    started += 1
        return started

    async def _abort_timed_out(self, shard: TransactionShard, meta: TransactionMetadata) -> None:
        spare = None
        if meta.epoch_exhausted and supports_epoch_bump(self.transaction_version):
            try:
                spare = await self._producer_ids.next_id()
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
        code = await self._fence_and_abort(meta, spare)
        if code != ErrorCode.none:
            log.warning("rollback of timed-out %r failed: %s", meta.transactional_id, code.name)

    async def _fence_and_abort(self, meta: TransactionMetadata, spare: int | None) -> ErrorCode:
        """Abort the ongoing transaction with the producer's epoch bumped (Kafka's
        PrepareEpochFence), so its current incarnation can no longer write to it."""
        fence = meta.prepare_fence_producer_epoch()
        code, _, _ = await self._end_transaction(
            meta.transactional_id,
            fence.producer_id,
            fence.producer_epoch,
            commit=False,
            from_client=False,
            transaction_version=self.transaction_version,
            spare=spare,
        )
        return code

    def remove_expired(self) -> int:
        """Tombstone every id idle for transactional.id.expiration.ms with nothing open;
        returns how many."""
        now = wall_ms()
        count = 0
        for shard in self.runtime.loaded_shards():
            expired: builtins.list[tuple[TransactionMetadata, TxnTransitMetadata]] = []
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
                self._spawn(functools.partial(self._write_tombstones, shard, batch))
                count += len(batch)
        return count

    async def _write_tombstones(
        self,
        shard: TransactionShard,
        batch: builtins.list[tuple[TransactionMetadata, TxnTransitMetadata]],
    ) -> None:
        records = [(encode_key(m.transactional_id), None) for m, _ in batch]
        try:
            await self.runtime.append(batch[0][0].transactional_id, records, replay=False)
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
                self.topic.name,
                shard.partition_index,
                removed,
            )


def _timed_out(meta: TransactionMetadata, now_ms: int) -> bool:
    return (
        not meta.pending_transition_in_progress
        and meta.state == S.ONGOING
        and meta.txn_start_timestamp + meta.txn_timeout_ms < now_ms
    )


async def _guarded(fn: Callable[[], Awaitable[None]]) -> None:
    try:
        await fn()
    except Exception:
        log.exception("transaction coordinator background work failed")
