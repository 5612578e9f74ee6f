"""The in-flight records of one share-partition (Kafka's SharePartition cached state), as pure
logic: no I/O, no clock, no awaits — the manager drives it and persists what it returns.

The window covers [start_offset, end_offset): every offset before it is done (acknowledged or
archived), every offset from end_offset on has never been acquired. Inside, contiguous *runs*
of offsets share one state, delivery count, acquiring member and lock deadline. A run is split
only where a request's bounds fall inside it (an acknowledgement of part of a batch, a cut by
max_records) and neighbours that end up alike are merged again, so a consumer that acquires
and accepts whole batches costs a few list operations per batch, never work per record.

Acquisition works from the log's batch headers (`Candidate`): offsets of control batches, of
aborted transactions (read_committed) and offsets no batch holds (compacted away) are archived
at once, never delivered; the rest is acquired a log batch at a time. Transitions follow
Kafka's SharePartition: only ACQUIRED records of the acknowledging member may be acknowledged
(else INVALID_RECORD_STATE, and nothing of the request is applied); a released or expired
record whose delivery count reached the limit is ARCHIVED; the start offset moves past the
done prefix; new records are acquired only while the window holds fewer than
partition_max_record_locks offsets.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from dataplane.protocol.errors import ErrorCode
from dataplane.share.model import AcknowledgeType, DeliveryState, ShareState, StateBatch

NO_MEMBER = ""
_DONE = (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED)
_AVAILABLE = DeliveryState.AVAILABLE
_ACQUIRED = DeliveryState.ACQUIRED
_ARCHIVED = DeliveryState.ARCHIVED


@dataclass(slots=True)
class Run:
    """Offsets [first, last] in one state; member and deadline (ms) only while ACQUIRED."""

    first: int
    last: int
    state: DeliveryState
    count: int
    member: str = NO_MEMBER
    deadline: int = 0

    def alike(self, other: Run) -> bool:
        return (
            self.state == other.state
            and self.count == other.count
            and self.member == other.member
            and self.deadline == other.deadline
        )


def _first(run: Run) -> int:
    return run.first


class Candidate(NamedTuple):
    """One batch of the log, from its header: its offsets and whether its records may be
    delivered (False for a control batch or a batch of an aborted transaction)."""

    first: int
    last: int
    deliverable: bool = True


class Acquired(NamedTuple):
    """ShareFetch's AcquiredRecords: a range acquired with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


class AckBatch(NamedTuple):
    """One acknowledgement batch: one type for the whole range, or one type per offset."""

    first_offset: int
    last_offset: int
    types: Sequence[int]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a change did: `durable` when the persisted state changed (write it before
    answering), `released` when records became AVAILABLE, `room` when a full window got room
    for new records (either wakes waiting fetches; nothing else can let them acquire more)."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    durable: bool = False
    released: bool = False
    room: bool = False


def check_ack_batches(batches: Sequence[AckBatch], max_type: int) -> str | None:
    """Kafka's validateAcknowledgementBatches: why the batches are an INVALID_REQUEST (None if
    they are not): ranges in order, each starting at or after the end of the one before, one
    type or one per offset, known types (RENEW, 4, only where the version has it)."""
    previous_last = -1
    for b in batches:
        if b.first_offset > b.last_offset:
            return f"first offset {b.first_offset} is after last offset {b.last_offset}"
        if b.first_offset < previous_last:  # Kafka lets a batch start where the last ended
            return "acknowledgement batches overlap or are out of order"
        if not b.types:
            return "an acknowledgement batch has no acknowledge type"
        if len(b.types) > 1 and len(b.types) != b.last_offset - b.first_offset + 1:
            return "acknowledge types must be one, or one per offset of the batch"
        if any(not 0 <= t <= max_type for t in b.types):
            return f"unknown acknowledge type in {list(b.types)}"
        previous_last = b.last_offset
    return None


class SharePartitionState:
    """The runs of one share-partition and the operations on them."""

    def __init__(
        self,
        start_offset: int,
        delivery_count_limit: int,
        max_record_locks: int,
        batches: Iterable[StateBatch] = (),
    ) -> None:
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.start_offset = start_offset
        self.end_offset = start_offset
        self._runs: list[Run] = []
        for b in sorted(batches, key=lambda b: b.first_offset):
            first = max(b.first_offset, self.end_offset)
            if b.last_offset < first:
                continue  # before the start offset, or overlapping the previous batch
            if first > self.end_offset:
                self._runs.append(Run(self.end_offset, first - 1, _AVAILABLE, 0))
            state = _AVAILABLE if b.delivery_state == _ACQUIRED else b.delivery_state
            self._runs.append(Run(first, b.last_offset, DeliveryState(state), b.delivery_count))
            self.end_offset = b.last_offset + 1
        self._coalesce(0, len(self._runs))
        self._advance_start()

    @classmethod
    def from_share_state(
        cls, state: ShareState, delivery_count_limit: int, max_record_locks: int
    ) -> SharePartitionState:
        """The window as the persister returned it: batches over AVAILABLE offsets."""
        return cls(state.start_offset, delivery_count_limit, max_record_locks, state.batches)

    def to_share_state(self, state_epoch: int, leader_epoch: int) -> ShareState:
        """The durable form: acquisition is not persisted (as in Kafka), so an ACQUIRED run is
        written as the AVAILABLE run it was before (one delivery less); AVAILABLE runs never
        delivered are left out (the persisted form's default)."""
        batches: list[StateBatch] = []
        for run in self._runs:
            state, count = run.state, run.count
            if state == _ACQUIRED:
                state, count = _AVAILABLE, max(0, count - 1)
            if state == _AVAILABLE and count == 0:
                continue
            prev = batches[-1] if batches else None
            if (
                prev is not None
                and prev.last_offset + 1 == run.first
                and prev.delivery_state == state
                and prev.delivery_count == count
            ):
                batches[-1] = StateBatch(prev.first_offset, run.last, state, count)
            else:
                batches.append(StateBatch(run.first, run.last, state, count))
        return ShareState(state_epoch, leader_epoch, self.start_offset, tuple(batches))

    # -- reads -------------------------------------------------------------------------------

    def runs(self) -> list[tuple[int, int, DeliveryState, int, str]]:
        """(first, last, state, delivery count, member) of every run, for tests and logs."""
        return [(r.first, r.last, r.state, r.count, r.member) for r in self._runs]

    def next_fetch_offset(self) -> int:
        """Where acquisition reads the log from: the first AVAILABLE offset, else the end."""
        for run in self._runs:
            if run.state == _AVAILABLE:
                return run.first
        return self.end_offset

    def can_acquire(self) -> bool:
        """Kafka's canAcquireRecords: some record of the window is AVAILABLE, or the window
        has room for new ones."""
        return self.next_fetch_offset() < self.end_offset or self._has_room()

    def _has_room(self) -> bool:
        return self.end_offset - self.start_offset < self.max_record_locks

    def next_deadline(self) -> int | None:
        """The earliest acquisition lock deadline, None when nothing is acquired."""
        deadlines = [r.deadline for r in self._runs if r.state == _ACQUIRED]
        return min(deadlines) if deadlines else None

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    # -- changes -----------------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        candidates: Sequence[Candidate],
        read_from: int,
        max_records: int,
        deadline: int,
        strict: bool = False,
    ) -> list[Acquired]:
        """Acquire for `member` what it may have of the log batches `candidates`, read from
        `read_from` (`next_fetch_offset`), until `deadline`. At least `max_records` records
        when there are that many, more when a log batch goes past the count (Kafka's
        batch-optimized mode); exactly that many at most with `strict` (record_limit mode)."""
        out: list[Acquired] = []
        if max_records <= 0:
            return out
        acquired = 0
        expected = read_from  # the offsets from here to the next batch hold no record
        for c in candidates:
            if acquired >= max_records:
                break
            if c.first > expected:
                self._archive(expected, c.first - 1, extend_to=c.first - 1)
            if c.first > self.end_offset:
                break  # the window had no room to reach this batch
            expected = max(expected, c.last + 1)
            if not c.deliverable:
                self._archive(c.first, c.last, extend_to=c.last)
                continue
            limit = max_records - acquired if strict else None
            got, isolated = self._acquire(member, c.first, c.last, limit, deadline, out)
            acquired += got
            if isolated:
                break
        self._advance_start()
        return out

    def acknowledge(
        self, member: str, batches: Sequence[AckBatch], renew_deadline: int = 0
    ) -> Outcome:
        """Apply `member`'s acknowledgements, all or none (Kafka answers one error for the
        partition). The batches passed `check_ack_batches`. Offsets below the start offset
        are skipped (already done, or dropped with the log start)."""
        previous_last = -1
        for b in batches:
            error = self._check_acquired(member, b)
            if error is None and b.first_offset == previous_last >= self.start_offset:
                # a batch starting where the one before ended (Kafka allows it): that record
                # is no longer acquired when Kafka, batch after batch, comes to it again
                error = Outcome(
                    ErrorCode.invalid_record_state,
                    f"The record {previous_last} cannot be acknowledged twice.",
                )
            if error is not None:
                return error
            previous_last = b.last_offset
        full = not self._has_room()
        durable = released = False
        for b in batches:
            if b.last_offset < self.start_offset:
                continue
            lo = max(b.first_offset, self.start_offset)
            if len(b.types) == 1:
                pieces: Iterable[tuple[int, int, int]] = ((lo, b.last_offset, b.types[0]),)
            else:
                pieces = _ranges(lo, b.types[lo - b.first_offset :])
            for first, last, ack in pieces:
                if ack == AcknowledgeType.RENEW:
                    self._transition(first, last, _ACQUIRED, renew_deadline)
                    continue
                durable = True
                if ack == AcknowledgeType.ACCEPT:
                    self._transition(first, last, DeliveryState.ACKNOWLEDGED)
                elif ack == AcknowledgeType.RELEASE:
                    released |= self._release(first, last, lambda run: True)
                else:  # REJECT, GAP
                    self._transition(first, last, _ARCHIVED)
        return self._settled(full, durable, released)

    def release_member(self, member: str) -> Outcome:
        """Release every record `member` holds (its share session closed)."""
        if not any(r.state == _ACQUIRED and r.member == member for r in self._runs):
            return Outcome()
        full = not self._has_room()
        released = self._release(
            self.start_offset, self.end_offset - 1, lambda run: run.member == member
        )
        return self._settled(full, True, released)

    def expire_locks(self, now: int) -> Outcome:
        """Release the records whose acquisition lock has expired by `now`."""
        if not any(r.state == _ACQUIRED and r.deadline <= now for r in self._runs):
            return Outcome()
        full = not self._has_room()
        released = self._release(
            self.start_offset, self.end_offset - 1, lambda run: run.deadline <= now
        )
        return self._settled(full, True, released)

    def _settled(self, was_full: bool, durable: bool, released: bool) -> Outcome:
        """Move the start past the done prefix, then say what the change did to a window
        that `was_full` before it."""
        self._advance_start()
        return Outcome(durable=durable, released=released, room=was_full and self._has_room())

    def advance_log_start(self, log_start: int) -> bool:
        """The log's start moved past the window's (retention, DeleteRecords): what is before it
        is gone; acknowledgements of it are ignored from now on (Kafka's
        updateCacheAndOffsets)."""
        if log_start <= self.start_offset:
            return False
        if log_start >= self.end_offset:
            self._runs.clear()
            self.end_offset = log_start
        else:
            del self._runs[: self._split(log_start)]
        self.start_offset = log_start
        self._advance_start()
        return True

    # -- internals ---------------------------------------------------------------------------

    def _check_acquired(self, member: str, b: AckBatch) -> Outcome | None:
        """Kafka's checks of one acknowledgement batch against the cached state."""
        if b.last_offset < self.start_offset:
            return None
        if not self._runs:
            return Outcome(
                ErrorCode.invalid_record_state,
                "Batch record not found. The request batch offsets are not found in the cache.",
            )
        for offset, which in ((b.first_offset, "first"), (b.last_offset, "last")):
            if offset >= self.end_offset:
                return Outcome(
                    ErrorCode.invalid_request,
                    f"Batch record not found. The {which} offset in request is past acquired "
                    "records.",
                )
        lo = max(b.first_offset, self.start_offset)
        runs = self._runs
        i = bisect_right(runs, lo, key=_first) - 1
        while i < len(runs) and runs[i].first <= b.last_offset:
            run = runs[i]
            if run.state != _ACQUIRED:
                return Outcome(
                    ErrorCode.invalid_record_state,
                    f"The records {max(lo, run.first)}-{min(b.last_offset, run.last)} cannot be "
                    f"acknowledged: they are {run.state.name}, not acquired.",
                )
            if run.member != member:
                return Outcome(
                    ErrorCode.invalid_record_state,
                    f"Member is not the owner of the records "
                    f"{max(lo, run.first)}-{min(b.last_offset, run.last)}.",
                )
            i += 1
        return None

    def _split(self, offset: int) -> int:
        """Make `offset` the first offset of a run; its index (len(runs) at the end)."""
        runs = self._runs
        if offset >= self.end_offset:
            return len(runs)
        if offset <= self.start_offset:
            return 0
        i = bisect_right(runs, offset, key=_first) - 1
        run = runs[i]
        if run.first == offset:
            return i
        runs.insert(i + 1, Run(offset, run.last, run.state, run.count, run.member, run.deadline))
        run.last = offset - 1
        return i + 1

    def _span(self, first: int, last: int) -> tuple[int, int]:
        """Indexes [i, j) of the runs that cover [first, last] exactly, splitting as needed."""
        i = self._split(first)
        return i, self._split(last + 1)

    def _coalesce(self, i: int, j: int) -> None:
        """Merge alike neighbours among runs[i-1:j+1]."""
        runs = self._runs
        k, end = max(i - 1, 0), min(j + 1, len(runs))
        merged: list[Run] = []
        for run in runs[k:end]:
            if merged and merged[-1].alike(run):
                merged[-1].last = run.last
            else:
                merged.append(run)
        runs[k:end] = merged

    def _advance_start(self) -> None:
        """Move the start offset past the done prefix and drop it."""
        runs = self._runs
        n = 0
        while n < len(runs) and runs[n].state in _DONE:
            n += 1
        if n:
            self.start_offset = runs[n - 1].last + 1
            del runs[:n]

    def _extend(self, last: int, limit: int | None = None) -> None:
        """Grow the window with never-delivered AVAILABLE offsets up to `last`, within the
        record-lock bound (a log batch that crosses it is taken whole, as Kafka does) and, when
        given, `limit` new offsets."""
        room = self.max_record_locks - (self.end_offset - self.start_offset)
        if last < self.end_offset or room <= 0:
            return
        if limit is not None:
            last = min(last, self.end_offset + limit - 1)
        self._runs.append(Run(self.end_offset, last, _AVAILABLE, 0))
        self.end_offset = last + 1
        self._coalesce(len(self._runs) - 1, len(self._runs))

    def _archive(self, first: int, last: int, extend_to: int) -> None:
        """Archive the AVAILABLE offsets of [first, last] (no deliverable record there)."""
        self._extend(extend_to)
        first, last = max(first, self.start_offset), min(last, self.end_offset - 1)
        if first > last:
            return
        i, j = self._span(first, last)
        for run in self._runs[i:j]:
            if run.state == _AVAILABLE:
                run.state = _ARCHIVED
        self._coalesce(i, j)

    def _acquire(
        self, member: str, first: int, last: int, limit: int | None, deadline: int, out: list
    ) -> tuple[int, bool]:
        """Acquire the AVAILABLE offsets of one log batch [first, last]: how many, and whether
        the acquisition must stop there. A record about to get its last allowed delivery is
        delivered alone (Kafka throttles such acquisitions): when the consumer fails on one
        poison record, only that record reaches the limit and is archived, not the records
        delivered with it."""
        self._extend(last, limit)
        first, last = max(first, self.start_offset), min(last, self.end_offset - 1)
        if first > last:
            return 0, False
        count = 0
        isolated = False
        i, j = self._span(first, last)
        runs = self._runs
        k = i
        while k < j:
            run = runs[k]
            if run.state == _AVAILABLE:
                if run.count > 0 and run.count + 1 >= self.delivery_count_limit:
                    if out:
                        isolated = True  # acquired alone by a later fetch
                        break
                    if run.last > run.first:
                        self._split(run.first + 1)
                        j += 1
                    isolated = True
                elif limit is not None and count + run.last - run.first + 1 > limit:
                    if count >= limit:
                        break
                    self._split(run.first + limit - count)
                    j += 1
                run.state, run.member, run.deadline = _ACQUIRED, member, deadline
                run.count += 1
                count += run.last - run.first + 1
                prev = out[-1] if out else None
                if prev and prev.last_offset + 1 == run.first and prev.delivery_count == run.count:
                    out[-1] = Acquired(prev.first_offset, run.last, run.count)
                else:
                    out.append(Acquired(run.first, run.last, run.count))
                if isolated:
                    break
            k += 1
        self._coalesce(i, j)
        return count, isolated

    def _transition(self, first: int, last: int, state: DeliveryState, deadline: int = 0) -> None:
        """Move the (checked: ACQUIRED) runs of [first, last] to `state`."""
        i, j = self._span(first, last)
        member_kept = state == _ACQUIRED
        for run in self._runs[i:j]:
            run.state, run.deadline = state, deadline
            if not member_kept:
                run.member = NO_MEMBER
        self._coalesce(i, j)

    def _release(self, first: int, last: int, which: Callable[[Run], bool]) -> bool:
        """Release the ACQUIRED runs of [first, last] that `which(run)` picks: AVAILABLE again,
        or ARCHIVED once their delivery count reached the limit. True if any became
        AVAILABLE."""
        i, j = self._span(first, last)
        released = False
        for run in self._runs[i:j]:
            if run.state != _ACQUIRED or not which(run):
                continue
            run.member, run.deadline = NO_MEMBER, 0
            if run.count >= self.delivery_count_limit:
                run.state = _ARCHIVED
            else:
                run.state = _AVAILABLE
                released = True
        self._coalesce(i, j)
        return released


def _ranges(first: int, types: Sequence[int]) -> Iterable[tuple[int, int, int]]:
    """(first, last, type) of each run of equal per-offset acknowledge types."""
    offset = first
    for ack, group in itertools.groupby(types):
        n = sum(1 for _ in group)
        yield offset, offset + n - 1, ack
        offset += n
