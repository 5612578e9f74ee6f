"""The state of one transactional id, as Kafka's TransactionMetadata keeps it.

A change is two steps, so concurrent requests never interleave: `prepare_*` checks the
transition is legal, sets `pending_state` (other requests meanwhile get CONCURRENT_TRANSACTIONS)
and returns the target as a `TxnTransitMetadata`; once that record is written and replicated to
`__transaction_state`, `complete_transition_to` applies it (or the caller drops `pending_state`
when the write failed). The rules are Kafka's, transaction version 2 (KIP-890: an epoch bump at
every commit or abort) included.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from dataplane.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue

TopicPartition = tuple[str, int]

# transaction.version feature levels (Kafka's TransactionVersion)
TV_0, TV_1, TV_2 = 0, 1, 2


def supports_epoch_bump(transaction_version: int) -> bool:
    """TV2 (KIP-890 part 2): every commit or abort bumps the producer epoch."""
    return transaction_version >= TV_2


def log_value_version(transaction_version: int) -> int:
    """The TransactionLogValue version a coordinator at this feature level writes (flexible,
    with the tagged fields, from TV1 on)."""
    return 1 if transaction_version >= TV_1 else 0


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka keeps Short.MaxValue free so it can always fence the current producer."""
    return producer_epoch >= MAX_EPOCH - 1


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState; the value is the id stored in TransactionLogValue."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit", ...)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )


S = TransactionState
_NAMES = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # TV2 lets a client abort whatever it does not know the state of (Empty, Complete*)
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
"""Kafka's TransactionState.validPreviousStates."""


class IllegalTransition(Exception):
    """A transition Kafka's state machine forbids: a coordinator bug, never a client error."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a transition: what is written to the log, then applied."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


@dataclass(slots=True)
class TransactionMetadata:
    """One transactional id's state on its coordinator."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    txn_last_update_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    client_transaction_version: int = TV_0
    pending_state: TransactionState | None = None
    # a fence whose write failed already bumped the epoch once (never shown to a client)
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def snapshot(self) -> TxnTransitMetadata:
        """The current state as a transit (Kafka's prepareNoTransit): no pending state set."""
        return TxnTransitMetadata(
            self.producer_id,
            self.previous_producer_id,
            self.next_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
            self.client_transaction_version,
        )

    # -- preparing transitions ----------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch of an ongoing transaction to abort it (InitProducerId of a new
        incarnation, or the transaction timed out); not bumped again after a failed fence."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransition("cannot fence a producer at epoch Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE,
            producer_epoch=bumped,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            client_transaction_version=self.client_transaction_version,
        )

    def prepare_increment_producer_epoch(
        self, txn_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId on an id with nothing open: the next epoch, or the same one for a
        retry of a call that succeeded (KIP-360), or PRODUCER_FENCED."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"no producer epoch left for producer {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._prepare(
            S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=txn_timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
            now_ms=now_ms,
            client_transaction_version=self.client_transaction_version,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """A new producer id at epoch 0 once the epochs of the current one are exhausted."""
        if self.has_pending_transaction:
            raise IllegalTransition("cannot rotate producer ids while a transaction is pending")
        return self._prepare(
            S.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=txn_timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
            now_ms=now_ms,
            client_transaction_version=self.client_transaction_version,
        )

    def prepare_add_partitions(
        self, added: Iterable[TopicPartition], now_ms: int, client_transaction_version: int
    ) -> TxnTransitMetadata:
        starts = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        return self._prepare(
            S.ONGOING,
            partitions=frozenset(self.partitions) | frozenset(added),
            txn_start_timestamp=now_ms if starts else self.txn_start_timestamp,
            now_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self,
        new_state: TransactionState,
        client_transaction_version: int,
        next_producer_id: int,
        now_ms: int,
        no_partition_added: bool,
    ) -> TxnTransitMetadata:
        if supports_epoch_bump(client_transaction_version):
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            new_state,
            next_producer_id=next_producer_id,
            producer_epoch=epoch,
            last_producer_epoch=last,
            # TV2 may abort with nothing added: the start time is then the abort's
            txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
            now_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """PrepareCommit/PrepareAbort -> Complete*, once every marker is written. With TV2 and an
        exhausted epoch, the producer id prepared at EndTxn takes over at epoch 0."""
        new_state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        if (
            supports_epoch_bump(self.client_transaction_version)
            and self.next_producer_id != NO_PRODUCER_ID
        ):
            producer_id, epoch = self.next_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        # the last epoch stays what Prepare* set: the one the client had (Kafka's; on an
        # overflow, Short.MaxValue - 1, not the Short.MaxValue the markers were written at)
        return self._prepare(
            new_state,
            producer_id=producer_id,
            next_producer_id=NO_PRODUCER_ID,
            producer_epoch=epoch,
            partitions=frozenset(),
            now_ms=now_ms,
            client_transaction_version=self.client_transaction_version,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(
            S.DEAD,
            partitions=frozenset(),
            now_ms=self.txn_last_update_timestamp,
            client_transaction_version=TV_0,
        )

    def _prepare(
        self,
        state: TransactionState,
        *,
        producer_id: int | None = None,
        next_producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        txn_start_timestamp: int | None = None,
        now_ms: int | None = None,
        client_transaction_version: int = TV_0,
    ) -> TxnTransitMetadata:
        """Kafka's prepareTransitionTo: check and set the pending state."""
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: transition to {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending"
            )
        producer_id = self.producer_id if producer_id is None else producer_id
        epoch = self.producer_epoch if producer_epoch is None else producer_epoch
        if producer_id < 0:
            raise IllegalTransition(f"illegal producer id {producer_id}")
        if state != S.DEAD and epoch < 0:
            raise IllegalTransition(f"illegal producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: no transition from {self.state.kafka_name} "
                f"to {state.kafka_name}"
            )
        transit = TxnTransitMetadata(
            producer_id=producer_id,
            prev_producer_id=self.producer_id,
            next_producer_id=next_producer_id,
            producer_epoch=epoch,
            last_producer_epoch=(
                self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch
            ),
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            txn_start_timestamp=(
                self.txn_start_timestamp if txn_start_timestamp is None else txn_start_timestamp
            ),
            txn_last_update_timestamp=(
                self.txn_last_update_timestamp if now_ms is None else now_ms
            ),
            client_transaction_version=client_transaction_version,
        )
        self.pending_state = state
        return transit

    # -- completing them ----------------------------------------------------------------------

    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        """Apply a transition whose record is written and replicated (Kafka's
        completeTransitionTo, with its consistency checks)."""
        to_state = self.pending_state
        if to_state is None or to_state != t.state:
            raise self._failure(t)
        tv2 = supports_epoch_bump(t.client_transaction_version)
        if to_state == S.EMPTY:  # InitProducerId
            if (
                (self.producer_epoch != t.producer_epoch and not self._valid_epoch_bump(t))
                or t.partitions
                or t.txn_start_timestamp != -1
            ):
                raise self._failure(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.prev_producer_id
        elif to_state == S.ONGOING:  # AddPartitionsToTxn / AddOffsetsToTxn
            if (
                not self._valid_epoch(t)
                or not self.partitions <= t.partitions
                or self.txn_timeout_ms != t.txn_timeout_ms
            ):
                raise self._failure(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.partitions |= t.partitions
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # EndTxn
            if (
                not self._valid_epoch(t)
                or self.partitions != t.partitions
                or self.txn_timeout_ms != t.txn_timeout_ms
            ):
                raise self._failure(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            if tv2:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.next_producer_id = t.next_producer_id
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # markers written
            if (
                not self._valid_epoch(t)
                or self.txn_timeout_ms != t.txn_timeout_ms
                or t.txn_start_timestamp == -1
            ):
                raise self._failure(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.partitions.clear()
            if tv2:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.previous_producer_id = t.prev_producer_id
                self.producer_id = t.producer_id
                self.next_producer_id = t.next_producer_id
        else:  # PrepareEpochFence is replaced by PrepareAbort; Dead is removed, not applied
            raise self._failure(t)
        self.client_transaction_version = t.client_transaction_version
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _valid_epoch(self, t: TxnTransitMetadata) -> bool:
        """Kafka's validProducerEpoch."""
        tv2 = supports_epoch_bump(t.client_transaction_version)
        if tv2 and t.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and t.producer_epoch == 0:
            # the producer id rotated (epochs exhausted): the last epoch is carried over
            return (
                t.last_producer_epoch == self.last_producer_epoch
                and t.prev_producer_id == self.producer_id
            )
        if tv2 and t.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return (
                t.last_producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
            )
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def _valid_epoch_bump(self, t: TxnTransitMetadata) -> bool:
        return t.producer_epoch == self.producer_epoch + 1 or (
            t.producer_epoch == 0 and t.producer_id != self.producer_id
        )

    def _failure(self, t: TxnTransitMetadata) -> IllegalTransition:
        return IllegalTransition(f"{self.transactional_id}: unexpected transition {self} -> {t}")


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions' answer for one transactional id (an error's has the fields'
    schema defaults, zeros, as Kafka's)."""

    transactional_id: str
    error_code: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (topic, partitions), sorted


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    """ListTransactions' entry for one transactional id."""

    transactional_id: str
    producer_id: int
    state: str
