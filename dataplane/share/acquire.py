"""One share-partition's part of a ShareFetch: read the log from the next fetch offset, turn
the batch headers into acquisition candidates, acquire, and cut the records to send.

No record is decoded: a batch's offsets come from its header (base offset, last offset delta).
Control batches are never delivered; under read_committed neither are the batches of aborted
transactions, found as a read_committed consumer finds them (Kafka's Fetcher): the aborted
transactions of the range (the transaction index) become "aborted producers" as the batches
reach their first offsets, and a producer leaves the set at its next control batch (its marker).
The records sent are the batches that hold acquired offsets, as stored (slices of the read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dataplane.log.batch import batch_size_at, header_at
from dataplane.share.partition_state import Acquired, Candidate, SharePartitionState

if TYPE_CHECKING:
    from dataplane.replica.partition import Partition

READ_COMMITTED = 1


@dataclass(slots=True)
class FetchedPart:
    """What one share-partition gives a ShareFetch: the acquired ranges and their batches."""

    acquired: list[Acquired] = field(default_factory=list)
    records: list[memoryview] = field(default_factory=list)  # pieces sent back to back
    size: int = 0


@dataclass(slots=True)
class _Batch:
    first: int
    last: int
    start: int  # byte position in the read
    end: int


def read_and_acquire(
    state: SharePartitionState,
    partition: Partition,
    member: str,
    isolation_level: int,
    max_bytes: int,
    min_one_batch: bool,
    max_records: int,
    deadline: int,
    strict: bool,
) -> FetchedPart:
    """Acquire for `member` from the partition's log (raises `LogError` as a fetch would)."""
    part = FetchedPart()
    log = partition.log
    if state.start_offset < log.log_start_offset:
        state.advance_log_start(log.log_start_offset)
    if not state.can_acquire():
        return part
    committed = isolation_level == READ_COMMITTED
    upper = partition.last_stable_offset if committed else partition.high_watermark
    offset = state.next_fetch_offset()
    if offset >= upper:
        return part
    data = log.read(offset, max_bytes, upper, min_one_batch)
    if not data:
        return part
    aborted = log.aborted_transactions(offset, upper) if committed else []
    batches, candidates = _scan(memoryview(data), aborted)
    part.acquired = state.acquire(member, candidates, offset, max_records, deadline, strict)
    if part.acquired:
        part.records = _pieces(memoryview(data), batches, part.acquired)
        part.size = sum(len(p) for p in part.records)
    return part


def _scan(
    data: memoryview, aborted: Sequence[tuple[int, int]]
) -> tuple[list[_Batch], list[Candidate]]:
    """The batches of a read and their candidates (one header read per batch)."""
    pending = sorted(aborted, key=lambda t: t[1])  # (producer id, first offset)
    aborting: set[int] = set()
    next_abort = 0
    batches: list[_Batch] = []
    candidates: list[Candidate] = []
    pos, size = 0, len(data)
    while pos < size:
        info = header_at(data, pos)
        end = pos + batch_size_at(data, pos)
        first, last = info.base_offset, info.last_offset
        deliverable = not info.is_control
        if pending:
            while next_abort < len(pending) and pending[next_abort][1] <= last:
                aborting.add(pending[next_abort][0])
                next_abort += 1
            if info.is_control:
                aborting.discard(info.producer_id)  # its marker ends the transaction
            elif info.is_transactional and info.producer_id in aborting:
                deliverable = False
        batches.append(_Batch(first, last, pos, end))
        candidates.append(Candidate(first, last, deliverable))
        pos = end
    return batches, candidates


def _pieces(data: memoryview, batches: list[_Batch], acquired: list[Acquired]) -> list[memoryview]:
    """The byte ranges of the batches holding acquired offsets, adjacent ones joined."""
    pieces: list[tuple[int, int]] = []
    ranges = iter(acquired)
    current = next(ranges, None)
    for b in batches:
        while current is not None and current.last_offset < b.first:
            current = next(ranges, None)
        if current is None:
            break
        if current.first_offset > b.last:
            continue
        if pieces and pieces[-1][1] == b.start:
            pieces[-1] = (pieces[-1][0], b.end)
        else:
            pieces.append((b.start, b.end))
    return [data[start:end] for start, end in pieces]
