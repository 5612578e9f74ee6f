"""Per-partition producer state for idempotent and transactional producers: Kafka's
ProducerStateManager, ProducerStateEntry and the checks of ProducerAppendInfo.

An idempotent producer stamps each batch with (producerId, producerEpoch, baseSequence). For
every producer id seen in a partition the replica keeps its epoch and the last 5 batches it
wrote (sequence range, offset range, max timestamp). The leader uses that to

- fence an older epoch: INVALID_PRODUCER_EPOCH;
- answer a retried batch (same epoch, same first and last sequence as one of the last 5) with the
  original offsets instead of writing it twice;
- refuse a gap, or a new epoch that does not start at sequence 0: OUT_OF_ORDER_SEQUENCE_NUMBER.
  A producer the partition knows nothing about may start at any sequence (KIP-360).

Transactions: a producer's first transactional batch opens its transaction in this partition
(``current_txn_first_offset``), its COMMIT/ABORT marker (the one record the state decodes) ends
it. The oldest open transaction bounds the last stable offset (`first_unstable_offset`); so does
a completed one until the high watermark passes its marker (`on_high_watermark`, as Kafka's
unreplicatedTxns). An ABORT goes to the log's transaction index (`PartitionLog.append_aborted_txn`)
when its marker is applied, live or replayed: the log skips entries it already has, so a replay
from a snapshot (after a restart or a truncation) indexes each aborted transaction exactly once,
and one after a crash re-indexes what recovery dropped (recovery.py). Markers are checked
before they are written (`check_marker`): an older producer epoch is INVALID_PRODUCER_EPOCH, an
older coordinator epoch TRANSACTION_COORDINATOR_FENCED.

KIP-890 part 1 (Kafka's VerificationGuard/VerificationStateEntry): before a producer's first
transactional batch in this partition, the leader asks the transaction coordinator whether the
partition is in the producer's transaction. A marker can land while that answer is awaited (the
transaction ended), and a batch appended after it would open a transaction nobody ends. So the
leader takes a `VerificationGuard` first (`start_verification`); any transactional batch or
marker of the producer drops it, and a batch that would open a transaction is appended only with
the guard still held (`check(..., require_verification=True)`), else INVALID_TXN_STATE.

Followers apply the same updates to the batches they replicate, so a new leader dedups as the
old one did. The state is a pure function of the log's batch headers, so it is rebuilt by
replaying headers (never records) from a snapshot. Snapshots live in the broker's StateStore
under the log's own keys: one is taken when a segment rolls (`update` notices), one after each
rebuild, and the broker takes one on clean close; the newest few are kept.

Usage (one thread at a time, like the PartitionLog, with no await between check and append)::

    producers = ProducerStateManager.load(plog)
    # leader, client produce
    infos = plog.validate(records, now_ms)
    dup = producers.check(infos)            # raises ProducerStateError
    # (a transactional batch opening a transaction: guard = producers.start_verification(...)
    # before asking the coordinator, then producers.check(infos, guard, require_verification=True))
    if dup is None:
        result = plog.append_as_leader(records, epoch, now_ms, validated=infos)
        producers.update(result.batches)
    # follower
    producers.update(plog.append_as_follower(records).batches)
    # after plog.truncate_to / truncate_fully_and_start_at
    producers.truncate_and_reload()
    # periodically / before plog.close()
    producers.remove_expired(now_ms); producers.snapshot()
"""

from __future__ import annotations

import logging
import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from dataplane.log.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchInfo
from dataplane.log.control import InvalidMarkerError, read_marker
from dataplane.log.errors import LogError
from dataplane.log.partition_log import PartitionLog
from dataplane.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_OFFSET = -1
INT32_MAX = 2**31 - 1
DEFAULT_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_SNAPSHOTS_TO_KEEP = 3

SNAPSHOT_PREFIX = "producer-snapshot/"  # + 20-digit offset, under the log's state keys
_SNAPSHOT_VERSION = 1
# version, crc32c of the rest, offset, producer count
_SNAP_HEADER = struct.Struct(">HIqi")
_CRC_END = 6  # the CRC covers the bytes after version and crc
# producer id, epoch, coordinator epoch, last timestamp, current txn first offset, batch count
_SNAP_ENTRY = struct.Struct(">qhiqqB")
# first seq, last seq, first offset, last offset, timestamp
_SNAP_BATCH = struct.Struct(">iiqqq")


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: int32 sequences wrap to 0 after 2^31-1."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def last_sequence(info: BatchInfo) -> int:
    """Sequence of the batch's last record (Kafka's RecordBatch.lastSequence)."""
    base = info.base_sequence
    return NO_SEQUENCE if base == NO_SEQUENCE else increment_sequence(base, info.last_offset_delta)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateError(KafkaError):
    """A batch the producer state refuses: INVALID_PRODUCER_EPOCH or
    OUT_OF_ORDER_SEQUENCE_NUMBER (``code``), for the produce response."""


def _stale_epoch(message: str) -> ProducerStateError:
    """INVALID_PRODUCER_EPOCH for a batch or marker of an older epoch, logged: the producer
    only sees the code, and an operator should see which producer was fenced where."""
    log.info(
        "refused: %s. A newer producer with the same id (InitProducerId with its "
        "transactional.id, or a transaction version 2 commit/abort) bumped the epoch: the "
        "producer of the older epoch is fenced",
        message,
    )
    return ProducerStateError(ErrorCode.invalid_producer_epoch, message)


class CorruptSnapshotError(ValueError):
    pass


class BatchMetadata(NamedTuple):
    """One of a producer's last batches. A retry of it is answered with these offsets; the
    produce response's log_append_time is ``timestamp`` under LogAppendTime (as in Kafka)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp


def _batches() -> deque[BatchMetadata]:
    return deque(maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerStateEntry:
    """What a partition knows of one producer id (Kafka's ProducerStateEntry)."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=_batches)  # oldest first
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of the last marker written for this producer
    current_txn_first_offset: int = NO_OFFSET  # first offset of the open transaction, or -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this sequence range in this epoch, if any."""
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def _set_epoch(self, epoch: int) -> None:
        """Kafka's maybeUpdateProducerEpoch: a different epoch (even an older one, which only
        replication or recovery can bring) starts with no batches."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


class VerificationGuard:
    """One verification of a producer's next transaction in a partition, compared by identity
    (Kafka's VerificationGuard): a guard taken before a marker is never the current one after
    it, even if the producer starts verifying again (the ABA case Kafka's comment describes)."""

    __slots__ = ()


@dataclass(slots=True)
class VerificationState:
    """A producer being verified (Kafka's VerificationStateEntry). It keeps the lowest sequence
    (and highest epoch) of the batches waiting for verification, so that a later batch cannot
    be written before an earlier one whose verification failed with a retriable error."""

    guard: VerificationGuard
    created_ms: int
    lowest_sequence: int
    epoch: int
    # a transaction version 2 producer (Produce v12+): it starts each partition at sequence 0
    supports_epoch_bump: bool = False

    def note(self, sequence: int, epoch: int) -> None:
        """Kafka's maybeUpdateLowestSequenceAndEpoch: a lower sequence of the same epoch, or a
        newer epoch (its sequences start over)."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        elif epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


class ProducerStateManager:
    """The producer state of one partition, kept in step with its `PartitionLog`.

    Create with `load`. ``producers`` maps producer id to entry; treat it as read-only.
    ``end_offset``: the state reflects exactly the batches below it.
    """

    def __init__(
        self,
        plog: PartitionLog,
        expiration_ms: int = DEFAULT_EXPIRATION_MS,
        snapshots_to_keep: int = DEFAULT_SNAPSHOTS_TO_KEEP,
    ) -> None:
        if snapshots_to_keep < 1:
            raise ValueError("snapshots_to_keep must be >= 1")
        self.producers: dict[int, ProducerStateEntry] = {}
        self.expiration_ms = expiration_ms
        self.snapshots_to_keep = snapshots_to_keep
        self._log = plog
        self._store = plog.store
        self._prefix = plog.state_key(SNAPSHOT_PREFIX)
        self._name = plog.state_key("")
        self._snapshots = sorted(
            int(key[len(self._prefix) :]) for key, _ in self._store.scan_prefix(self._prefix)
        )
        self._rolls = plog.roll_count
        self.end_offset = plog.log_start_offset
        # pid -> first offset of its open transaction; insertion order is offset order, since
        # a transaction opens at the end of the log.
        self._ongoing: dict[int, int] = {}
        # (first offset, marker offset) of transactions completed at or above the high
        # watermark, in marker order; tracked once the partition reports its high watermark.
        self._unreplicated: deque[tuple[int, int]] = deque()
        self._high_watermark: int | None = None
        # pid -> its verification in progress (leader only); dropped by the producer's next
        # transactional batch or marker, or expired with the idle producers.
        self._verifying: dict[int, VerificationState] = {}

    @classmethod
    def load(
        cls,
        plog: PartitionLog,
        expiration_ms: int = DEFAULT_EXPIRATION_MS,
        *,
        now_ms: int | None = None,
        snapshots_to_keep: int = DEFAULT_SNAPSHOTS_TO_KEEP,
    ) -> ProducerStateManager:
        """The state of an opened log: its newest usable snapshot plus a replay of the batch
        headers after it (all of them if there is none). Drops the producers expired at
        ``now_ms`` (default: the wall clock) and snapshots the result."""
        manager = cls(plog, expiration_ms, snapshots_to_keep)
        manager._rebuild(now_ms, clear_if_empty=False)
        return manager

    # -- the produce path --------------------------------------------------------------------

    def check(
        self,
        batches: list[BatchInfo],
        verification_guard: VerificationGuard | None = None,
        *,
        require_verification: bool = False,
    ) -> BatchMetadata | None:
        """Validate a client's batches against the state before appending them; no side
        effect. Returns the original batch when one is a retry of a retained batch (answer
        with its offsets, append nothing), else None. Raises `ProducerStateError`.

        Kafka's order: each batch is first compared with the retained batches, then its epoch
        and sequence are checked against the state as the request's earlier batches would
        leave it. Control batches (written by coordinators, not clients) are not checked.
        A non-transactional batch from a producer with an open transaction is INVALID_TXN_STATE.
        With ``require_verification`` (a leader's client or coordinator append), a
        transactional batch that would open a transaction needs ``verification_guard`` to be
        the producer's current guard (INVALID_TXN_STATE: not verified, or its transaction ended
        meanwhile); while a producer is being verified, a batch of an older epoch is
        INVALID_PRODUCER_EPOCH and one past the lowest waiting sequence OUT_OF_ORDER_SEQUENCE.
        """
        producers = self.producers
        pending: dict[int, tuple[int, int]] | None = None  # pid -> (epoch, last seq) so far
        for info in batches:
            pid = info.producer_id
            if pid < 0 or info.attributes & ATTR_CONTROL:
                continue
            entry = producers.get(pid)
            epoch = info.producer_epoch
            first_seq = info.base_sequence
            last_seq = last_sequence(info)
            if entry is not None and epoch == entry.epoch:
                duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return duplicate
            current_epoch = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
            if pending is not None and pid in pending:
                updated_epoch, updated_last_seq = pending[pid]
            else:
                updated_epoch, updated_last_seq = current_epoch, None
            # ProducerAppendInfo.checkProducerEpoch
            if epoch < updated_epoch:
                raise _stale_epoch(
                    f"epoch of producer {pid} in {self._name} is {epoch}, "
                    f"older than the last seen epoch {updated_epoch}"
                )
            self._check_sequence(info, entry, updated_epoch, updated_last_seq)
            if info.attributes & ATTR_TRANSACTIONAL:
                if self._verifying or require_verification:
                    first_of_pid = pending is None or pid not in pending
                    self._check_verified(
                        info, entry, first_of_pid, verification_guard, require_verification
                    )
            elif entry is not None and entry.current_txn_first_offset >= 0:
                raise ProducerStateError(
                    ErrorCode.invalid_txn_state,
                    f"producer {pid} wrote a non-transactional batch to {self._name} during its "
                    f"transaction started at offset {entry.current_txn_first_offset}",
                )
            if len(batches) > 1:
                if pending is None:
                    pending = {}
                pending[pid] = (epoch, last_seq)
        return None

    def _check_sequence(
        self,
        info: BatchInfo,
        entry: ProducerStateEntry | None,
        updated_epoch: int,
        updated_last_seq: int | None,
    ) -> None:
        """Kafka's ProducerAppendInfo.checkSequence of one batch (`check`): ``updated_epoch``
        and ``updated_last_seq`` are the producer's as the request's earlier batches leave it
        (``updated_last_seq`` None: no earlier batch of this producer)."""
        pid = info.producer_id
        epoch = info.producer_epoch
        first_seq = info.base_sequence
        if first_seq != 0 and (entry is None or not entry.batches):
            verifying = self._verifying.get(pid)
            if verifying is not None and verifying.supports_epoch_bump:
                raise ProducerStateError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {pid} in {self._name}: sequence {first_seq}, but a "
                    "transaction version 2 producer with no state here starts at 0",
                )
        if epoch != updated_epoch:
            if first_seq != 0 and updated_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {pid} in {self._name}: new epoch {epoch} (from "
                    f"{updated_epoch}) must start at sequence 0, not {first_seq}",
                )
            return
        if updated_last_seq is not None:
            current_last_seq = updated_last_seq
        elif entry is not None and epoch == entry.epoch:
            current_last_seq = entry.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # No known epoch: the producer's data is gone (retention, DeleteRecords, expiry),
        # so any sequence is accepted.
        current_epoch = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
        if current_epoch != NO_PRODUCER_EPOCH and not in_sequence(current_last_seq, first_seq):
            raise ProducerStateError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {pid} in {self._name}: sequence {first_seq} does not follow "
                f"{current_last_seq} (epoch {epoch})",
            )

    def _check_verified(
        self,
        info: BatchInfo,
        entry: ProducerStateEntry | None,
        first_of_pid: bool,
        guard: VerificationGuard | None,
        required: bool,
    ) -> None:
        """The KIP-890 checks of one transactional batch (`check`)."""
        pid = info.producer_id
        state = self._verifying.get(pid)
        if state is not None and first_of_pid:  # Kafka checks each append's first batch
            if info.producer_epoch < state.epoch:
                raise _stale_epoch(
                    f"producer {pid} in {self._name}: epoch {info.producer_epoch} is older "
                    f"than the epoch {state.epoch} being verified"
                )
            if info.producer_epoch == state.epoch and info.base_sequence > state.lowest_sequence:
                raise ProducerStateError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {pid} in {self._name}: sequence {info.base_sequence} is past "
                    f"{state.lowest_sequence}, the earliest batch waiting for verification",
                )
        if (
            required
            and (entry is None or entry.current_txn_first_offset < 0)
            and (state is None or state.guard is not guard)
        ):
            raise ProducerStateError(
                ErrorCode.invalid_txn_state,
                f"transactional batch of producer {pid} in {self._name} was not verified: "
                "its transaction is not ongoing here (it ended while the transaction "
                "coordinator was asked, or was never checked)",
            )

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Checks before a leader writes a transaction marker (Kafka's appendEndTxnMarker):
        raises `ProducerStateError` INVALID_PRODUCER_EPOCH for an epoch older than the
        producer's, TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the last
        marker's (a zombie coordinator)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.invalid_producer_epoch,
                f"marker for producer {producer_id} in {self._name}: epoch {producer_epoch} is "
                f"older than the last seen epoch {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.transaction_coordinator_fenced,
                f"marker for producer {producer_id} in {self._name}: coordinator epoch "
                f"{coordinator_epoch} is older than {entry.coordinator_epoch} (a zombie "
                "coordinator)",
            )

    def update(self, batches: Iterable[BatchInfo]) -> None:
        """Apply batches just appended to the log (with their offsets assigned), as leader or
        follower; never raises. Takes a snapshot when the log rolled a segment meanwhile."""
        last = None
        for info in batches:
            last = info
            if info.producer_id >= 0:
                self._apply(info, live=True)
        if last is not None:
            self.end_offset = last.base_offset + last.last_offset_delta + 1
        if self._log.roll_count != self._rolls:
            self._rolls = self._log.roll_count
            self.snapshot()

    def _apply(self, info: BatchInfo, *, live: bool = False) -> None:
        """One batch's effect (ProducerAppendInfo.append without the checks). ``live``: just
        appended (not replayed), so a completed transaction waits for the high watermark."""
        pid = info.producer_id
        attributes = info.attributes
        if attributes & ATTR_CONTROL and info.record_count == 0:
            return  # an emptied control batch says nothing (Kafka skips it too)
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        entry._set_epoch(info.producer_epoch)
        entry.last_timestamp = info.max_timestamp
        if attributes & ATTR_CONTROL:
            if self._verifying:  # the transaction ended: a guard taken before is stale
                self._verifying.pop(pid, None)
            self._apply_marker(entry, info, live)
            return
        first_offset = info.base_offset
        entry.batches.append(
            BatchMetadata(
                info.base_sequence,
                last_sequence(info),
                first_offset,
                first_offset + info.last_offset_delta,
                info.max_timestamp,
            )
        )
        if attributes & ATTR_TRANSACTIONAL:
            if self._verifying:  # written: the open transaction is the check from now on
                self._verifying.pop(pid, None)
            # A batch the cleaner emptied belongs to a decided transaction: it opens none.
            if entry.current_txn_first_offset < 0 and info.record_count > 0:
                entry.current_txn_first_offset = first_offset
                self._ongoing[pid] = first_offset

    def _apply_marker(self, entry: ProducerStateEntry, info: BatchInfo, live: bool) -> None:
        """A COMMIT/ABORT marker ends the producer's transaction; an abort is indexed."""
        marker = self._read_marker(info)
        commit = True
        if marker is not None:
            commit, entry.coordinator_epoch = marker
        first = entry.current_txn_first_offset
        if first < 0:
            return  # nothing of the transaction here: Kafka indexes only non-empty ones
        entry.current_txn_first_offset = NO_OFFSET
        self._ongoing.pop(entry.producer_id, None)
        offset = info.base_offset
        if not commit:
            # The LSO once this transaction ended: the oldest other open one, or just past it.
            lso = next(iter(self._ongoing.values()), offset + 1)
            self._log.append_aborted_txn(entry.producer_id, first, offset, lso)
        hw = self._high_watermark
        if live and hw is not None and offset >= hw:
            self._unreplicated.append((first, offset))

    def _read_marker(self, info: BatchInfo) -> tuple[bool, int] | None:
        """(commit?, coordinator epoch) of a marker in the log; None (logged) if unreadable."""
        try:
            batch = self._log.read(info.base_offset, info.size, info.last_offset + 1, True)
            return read_marker(batch)
        except (LogError, InvalidMarkerError) as e:
            log.warning(
                "%s: unreadable transaction marker at offset %d (%s); its transaction is taken "
                "as committed",
                self._name,
                info.base_offset,
                e,
            )
            return None

    # -- transactions ------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction that is open, or completed with its marker
        not yet below the high watermark (Kafka's firstUnstableOffset); None if there is none.
        Never below the log start: DeleteRecords may delete an open transaction's first
        records (Kafka's maybeIncrementFirstUnstableOffset)."""
        first = next(iter(self._ongoing.values()), None)
        if self._unreplicated:
            unreplicated = min(f for f, _ in self._unreplicated)
            first = unreplicated if first is None else min(first, unreplicated)
        return first if first is None else max(first, self._log.log_start_offset)

    def on_high_watermark(self, high_watermark: int) -> None:
        """The partition's high watermark moved: completed transactions whose marker is now
        below it no longer bound the LSO (Kafka's onHighWatermarkUpdated)."""
        self._high_watermark = high_watermark
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0][1] < high_watermark:
            unreplicated.popleft()

    def open_transactions(self) -> list[tuple[int, int, int]]:
        """(producer id, epoch, first offset) of every open transaction, oldest first."""
        producers = self.producers
        return [(pid, producers[pid].epoch, first) for pid, first in self._ongoing.items()]

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Kafka's hasOngoingTransaction: the producer, at this epoch, has written to this
        partition in its current transaction (KIP-890's verification is skipped then)."""
        entry = self.producers.get(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset >= 0
            and entry.epoch == producer_epoch
        )

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def start_verification(
        self,
        producer_id: int,
        sequence: int,
        epoch: int,
        now_ms: int | None = None,
        supports_epoch_bump: bool = False,
    ) -> VerificationGuard:
        """The producer's current verification guard, created if it has none (Kafka's
        maybeCreateVerificationStateEntry); notes the batch's sequence and epoch.
        ``supports_epoch_bump``: the producer uses transaction version 2, so its first batch
        in a partition where nothing of it is left must be at sequence 0."""
        state = self._verifying.get(producer_id)
        if state is None:
            created = _wall_clock_ms() if now_ms is None else now_ms
            state = VerificationState(
                VerificationGuard(), created, sequence, epoch, supports_epoch_bump
            )
            self._verifying[producer_id] = state
        else:
            state.note(sequence, epoch)
        return state.guard

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        """The producer's current guard, if a verification is in progress."""
        state = self._verifying.get(producer_id)
        return None if state is None else state.guard

    # -- expiry ------------------------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> int:
        """Drop producers idle for producer.id.expiration.ms (by the max timestamp of their
        last batch, as Kafka), except those with an open transaction, and verifications
        started that long ago (never followed by a batch). Returns how many producers."""
        limit = now_ms - self.expiration_ms
        expired = [
            pid
            for pid, entry in self.producers.items()
            if entry.current_txn_first_offset < 0 and entry.last_timestamp <= limit
        ]
        for pid in expired:
            del self.producers[pid]
        if self._verifying:
            self._verifying = {
                pid: state
                for pid, state in self._verifying.items()
                if now_ms - state.created_ms < self.expiration_ms
            }
        return len(expired)

    # -- snapshots and rebuild ---------------------------------------------------------------

    @property
    def snapshot_offsets(self) -> list[int]:
        """Offsets of the stored snapshots, oldest first."""
        return list(self._snapshots)

    def _snapshot_key(self, offset: int) -> str:
        return f"{self._prefix}{offset:020d}"

    def snapshot(self, offset: int | None = None) -> None:
        """Store the state as of ``offset`` (default and normally `end_offset`; a larger offset
        is allowed when the batches in between carry no producer id and were not passed to
        `update`), unless that snapshot exists; then keep only the newest few, and none below
        the log start."""
        if offset is None:
            offset = self.end_offset
        elif offset < self.end_offset:
            raise ValueError(f"snapshot at {offset}: the state is as of {self.end_offset}")
        self.end_offset = offset
        if offset not in self._snapshots:
            self._store.put_bytes(self._snapshot_key(offset), self._encode(offset))
            self._snapshots.append(offset)
            self._snapshots.sort()
        self._prune()

    def _prune(self) -> None:
        start = self._log.log_start_offset
        keep = self._snapshots[-self.snapshots_to_keep :]
        for offset in self._snapshots:
            if offset not in keep or offset < start:
                self._store.delete(self._snapshot_key(offset))
        self._snapshots = [o for o in keep if o >= start]

    def _delete_snapshots(self, offsets: list[int]) -> None:
        for offset in offsets:
            self._store.delete(self._snapshot_key(offset))
            self._snapshots.remove(offset)

    def truncate_and_reload(
        self, plog: PartitionLog | None = None, *, now_ms: int | None = None
    ) -> None:
        """Call after truncating the log (`truncate_to`, `truncate_fully_and_start_at`; pass
        ``plog`` if it is a new object): drop the snapshots above the new end, then rebuild
        from the newest one left plus a replay (from the log start if none). A log left empty
        (fully truncated) gets an empty state and loses every snapshot, as in Kafka."""
        if plog is not None and plog is not self._log:
            self._log = plog
            self._store = plog.store
        plog = self._log
        if plog.log_end_offset == self.end_offset and plog.log_end_offset > plog.log_start_offset:
            self._prune()  # nothing was removed (e.g. truncating at or past the end)
            return
        self._rebuild(now_ms, clear_if_empty=True)

    def _rebuild(self, now_ms: int | None, *, clear_if_empty: bool) -> None:
        plog = self._log
        start, end = plog.log_start_offset, plog.log_end_offset
        self._rolls = plog.roll_count
        self.producers = {}
        self._ongoing = {}
        self._unreplicated.clear()
        if clear_if_empty and start == end:
            self._delete_snapshots(list(self._snapshots))
        # Above the end: the data they saw is gone. Below the start: the batches between them
        # and the start are gone, so they cannot be replayed from.
        self._delete_snapshots([o for o in self._snapshots if o > end or o < start])
        self.end_offset = start
        # After a crash the transaction indexes lack the aborts from this offset on: replay
        # from at or below it, so that each of them is indexed again.
        txn_limit = plog.txn_index_rebuild_from
        for offset in reversed(self._snapshots):
            if txn_limit is not None and offset > txn_limit:
                continue
            raw = self._store.get_bytes(self._snapshot_key(offset))
            try:
                if raw is None:
                    raise CorruptSnapshotError("missing")
                self.producers = self._decode(raw, offset)
            except CorruptSnapshotError as e:
                log.warning("%s: dropping producer snapshot at %d: %s", self._name, offset, e)
                self._delete_snapshots([offset])
                continue
            self.end_offset = offset
            break
        self._ongoing = {
            pid: entry.current_txn_first_offset
            for pid, entry in sorted(
                self.producers.items(), key=lambda item: item[1].current_txn_first_offset
            )
            if entry.current_txn_first_offset >= 0
        }
        replayed = 0
        for info in plog.batches_from(self.end_offset):
            if info.producer_id >= 0:
                self._apply(info)
            replayed += 1
        if replayed:
            log.info(
                "%s: producer state rebuilt from offset %d (%d batch headers replayed)",
                self._name,
                self.end_offset,
                replayed,
            )
        self.end_offset = end
        plog.txn_index_rebuilt()
        self.remove_expired(_wall_clock_ms() if now_ms is None else now_ms)
        if end > start or self.producers:
            self.snapshot()  # the next rebuild starts here
        else:
            self._prune()

    # -- snapshot encoding -------------------------------------------------------------------

    def _encode(self, offset: int) -> bytes:
        parts: list[bytes] = []
        entry_struct, batch_struct = _SNAP_ENTRY, _SNAP_BATCH
        for pid, entry in self.producers.items():
            parts.append(
                entry_struct.pack(
                    pid,
                    entry.epoch,
                    entry.coordinator_epoch,
                    entry.last_timestamp,
                    entry.current_txn_first_offset,
                    len(entry.batches),
                )
            )
            parts.extend(batch_struct.pack(*batch) for batch in entry.batches)
        head = bytearray(_SNAP_HEADER.pack(_SNAPSHOT_VERSION, 0, offset, len(self.producers)))
        body = b"".join(parts)
        crc = crc32c(bytes(head[_CRC_END:]) + body)
        struct.pack_into(">I", head, 2, crc)
        return bytes(head) + body

    @staticmethod
    def _decode(raw: bytes, offset: int) -> dict[int, ProducerStateEntry]:
        try:
            version, crc, stored_offset, count = _SNAP_HEADER.unpack_from(raw, 0)
        except struct.error as e:
            raise CorruptSnapshotError(f"truncated header: {e}") from e
        if version != _SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unknown version {version}")
        if crc32c(raw[_CRC_END:]) != crc:
            raise CorruptSnapshotError("CRC mismatch")
        if stored_offset != offset:
            raise CorruptSnapshotError(f"holds offset {stored_offset}")
        producers: dict[int, ProducerStateEntry] = {}
        pos = _SNAP_HEADER.size
        try:
            for _ in range(count):
                pid, epoch, coordinator_epoch, last_ts, txn_first, n = _SNAP_ENTRY.unpack_from(
                    raw, pos
                )
                pos += _SNAP_ENTRY.size
                batches = _batches()
                for _ in range(n):
                    batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(raw, pos)))
                    pos += _SNAP_BATCH.size
                producers[pid] = ProducerStateEntry(
                    pid, epoch, batches, last_ts, coordinator_epoch, txn_first
                )
        except struct.error as e:
            raise CorruptSnapshotError(f"truncated: {e}") from e
        if pos != len(raw):
            raise CorruptSnapshotError(f"{len(raw) - pos} trailing bytes")
        return producers
