"""Log compaction for cleanup.policy=compact (Kafka's LogCleaner, Cleaner and filterTo).

A compacted log keeps, for each key, at least its latest record. The log is cut in two at the
cleaner checkpoint: the *clean* part below it holds no key twice, the *dirty* part above it is as
appended. A log is cleaned once its dirty bytes exceed min.cleanable.dirty.ratio of the
cleanable log (or once a dirty record is older than max.compaction.lag.ms). Only whole segments
below the active one, below the high watermark and older than min.compaction.lag.ms are cleanable.

One cleaning (`CleaningJob`):

1. *Offset map*: the latest offset of each key in the dirty part (at most ``max_keys`` keys, as
   Kafka bounds its dedupe buffer: a larger dirty part is cleaned over several passes).
2. *Clean*, from the first segment on, groups of adjacent segments whose sizes add up to at most
   segment.bytes, each into one new segment: a record stays if it is past the map, or if it is
   its key's latest and is not a tombstone whose delete horizon has passed. Records without a key
   go. A batch keeps its base offset, last offset delta, leader epoch, producer id, epoch and base
   sequence; a batch left with no record goes, unless it is the last batch of an idempotent
   producer (its sequence must survive) or the last of its group (the group's offset range must
   survive, see 4.). Batches that lose records or first keep a tombstone are rewritten with their
   codec; the others are copied byte for byte. Control batches are kept as they are.
3. *Tombstones* (KIP-534): the first cleaning that keeps one sets the batch's delete horizon
   (now + delete.retention.ms, stored as its base timestamp with attribute bit 6); a cleaning after
   the horizon drops it.
3b. *Transactions* (Kafka's CleanedTransactionMetadata): nothing at or above the last stable
   offset is cleanable, so every transaction met is decided. The batches of aborted transactions
   (known from the transaction indexes) go whole, records unread, and never enter the offset map
   (an aborted write must not hide an older committed value). A marker stays while the cleaning
   still meets batches of its transaction in the group (an ABORT marker's entry is then copied to
   the cleaned segment's transaction index); once its transaction has no batch left, it is treated
   like a tombstone: a delete horizon is set, and a cleaning after it drops the marker. The last
   batch of each active producer stays (emptied if need be), and so does a marker that is a
   producer's last entry in the log: both carry the producer state a new leader rebuilds.
4. *Swap*, crash-safe: the new segment is written as ``<base>.log.cleaned`` (with its indexes) and
   fsynced; renaming it to ``.swap`` commits it; then the replaced segments (the bases in
   [base, its next offset)) are deleted and the ``.swap`` files renamed to the final names.
   Opening a log finishes an interrupted swap, or drops the ``.cleaned`` files of one that had
   not committed (`finish_interrupted_cleaning`).

Steps 1 and 2 read the segments through their own file descriptors, so they run in a worker
thread while the log serves reads and appends; the swap must run on the log's own thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from dataplane.log.batch import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchInfo,
    RecordError,
    batch_size_at,
    encode_batch,
    header_at,
)
from dataplane.log.compression import compress, is_xerial
from dataplane.log.control import InvalidMarkerError, read_marker
from dataplane.log.errors import ErrorCode, LogError
from dataplane.log.records import RawRecord, encode_record, raw_records
from dataplane.log.segment import LOG_SUFFIX, LogSegment, fsync_dir, segment_files
from dataplane.log.txn_index import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from dataplane.log.log_config import LogConfig

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
MAX_MAP_KEYS = 1_000_000  # keys in one offset map (Kafka: log.cleaner.dedupe.buffer.size)
_MAX_RELATIVE_OFFSET = 2**31 - 1  # a group must fit one segment's index
_READ_WINDOW = 1 << 20
_WRITE_CHUNK = 1 << 20


class CleaningAborted(Exception):
    """The log changed under a cleaning (truncated, retention, closed), or it was stopped."""


class _Source(NamedTuple):
    """A segment as it was when the cleaning was planned."""

    segment: LogSegment  # compared by identity when swapping; never read from the worker
    base_offset: int
    path: Path
    size: int
    next_offset: int
    mtime_ns: int


class CleanedGroup(NamedTuple):
    """A group of segments cleaned into ``<base>.log.cleaned``, ready to swap in."""

    sources: list[_Source]
    base_offset: int
    next_offset: int
    size: int


def plan_cleaning(
    directory: Path,
    config: LogConfig,
    segments: list[LogSegment],
    log_start_offset: int,
    checkpoint: int,
    upper_bound: int,
    now_ms: int,
    producer_last_offsets: Mapping[int, tuple[int, int]],
    collect_aborted: Callable[[int, int], list[AbortedTxn]] | None = None,
    max_keys: int = MAX_MAP_KEYS,
) -> CleaningJob | None:
    """The cleaning a log needs now (Kafka's LogCleanerManager.cleanableOffsets and
    grabFilthiestCompactedLog), or None. ``upper_bound``: the last stable offset (nothing above
    it is cleaned); ``producer_last_offsets``: producer id -> (offset of its last data batch or
    -1, epoch); ``collect_aborted``: the log's aborted transactions intersecting an offset
    range (`PartitionLog._collect_aborted`), read here on the log's thread."""
    active_base = segments[-1].base_offset
    first_dirty = checkpoint if log_start_offset <= checkpoint <= active_base else log_start_offset
    lag_limit = now_ms - config.min_compaction_lag_ms
    end = 0
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > upper_bound:
            break
        dirty = segment.next_offset > first_dirty
        if dirty and config.min_compaction_lag_ms > 0 and segment.largest_timestamp() > lag_limit:
            break
        end = i + 1
    cleanable = segments[:end]
    dirty_segments = [s for s in cleanable if s.next_offset > first_dirty]
    dirty_bytes = sum(s.size for s in dirty_segments)
    if not dirty_bytes:
        return None
    ratio = dirty_bytes / sum(s.size for s in cleanable)
    # max.compaction.lag.ms, from the first batch's timestamp of each dirty segment
    first_timestamps = [s.rolling_timestamp or 0 for s in dirty_segments]
    earliest = min((t for t in first_timestamps if t > 0), default=None)
    overdue = earliest is not None and earliest < now_ms - config.max_compaction_lag_ms
    if ratio <= config.min_cleanable_dirty_ratio and not overdue:
        return None
    uncleanable = segments[end].base_offset
    aborted = (
        [] if collect_aborted is None else collect_aborted(cleanable[0].base_offset, uncleanable)
    )
    return CleaningJob(
        directory,
        config,
        cleanable,
        uncleanable,
        first_dirty,
        ratio,
        now_ms,
        producer_last_offsets,
        max_keys,
        aborted,
    )


class CleaningJob:
    """One cleaning of one log. `build_offset_map`, then `clean_group` for each of `groups`
    (both in a worker thread), each result given to the log's `swap_cleaned` (on its thread),
    and last the log's `finish_cleaning`. `stop` (from any thread) ends the worker's current
    step with `CleaningAborted`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        uncleanable_offset: int,
        first_dirty: int,
        ratio: float,
        now_ms: int,
        producer_last_offsets: Mapping[int, tuple[int, int]],
        max_keys: int,
        aborted: list[AbortedTxn] | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        self.pending = [
            _Source(s, s.base_offset, s.path, s.size, s.next_offset, s.path.stat().st_mtime_ns)
            for s in segments
        ]  # not swapped yet: the log must still hold these when swapping
        self.first_dirty = first_dirty
        self.ratio = ratio
        self.now_ms = now_ms
        self.end_offset = uncleanable_offset  # the next checkpoint; lower if the map fills up
        self.groups: list[list[_Source]] = []
        self._uncleanable_offset = uncleanable_offset
        self._producer_last_offsets = dict(producer_last_offsets)
        self._aborted = sorted(aborted or (), key=lambda t: t.first_offset)
        self._max_keys = max_keys
        self._map: dict[bytes, int] = {}
        self._stop = threading.Event()
        self._started = time.monotonic()
        self.bytes_before = self.bytes_after = 0
        self.records_read = self.records_kept = 0
        self.segments_cleaned = 0

    def stop(self) -> None:
        self._stop.set()

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise CleaningAborted("stopped")

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    # -- 1. offset map -----------------------------------------------------------------------

    def build_offset_map(self) -> None:
        """Map each key of the dirty part to its latest offset; then group the segments to
        clean (Kafka's buildOffsetMap and groupSegmentsBySize)."""
        latest = self.first_dirty - 1
        full = False
        txns = _CleanedTransactions(
            [t for t in self._aborted if t.last_offset >= self.first_dirty], None
        )
        for i, source in enumerate(self.pending):
            if source.next_offset <= self.first_dirty:
                continue
            for info, batch in _read_batches(source.path, source.size):
                self._check_stop()
                if info.last_offset < self.first_dirty:
                    continue
                if info.is_control:
                    txns.on_control_batch(info, batch)
                elif not txns.on_batch(info):  # aborted data never hides a committed value
                    if self._map and len(self._map) + info.record_count > self._max_keys:
                        full = True
                        break
                    for record in self._records(info, batch):
                        offset = info.base_offset + record.offset_delta
                        if record.key is not None and offset >= self.first_dirty:
                            self._map[record.key] = offset
                latest = info.last_offset
            if full:
                break
            # Past a gap at the segment's end, up to the next segment's base.
            following = self.pending[i + 1 : i + 2]
            latest = (following[0].base_offset if following else self._uncleanable_offset) - 1
        self.end_offset = latest + 1
        self.groups = _group(
            [s for s in self.pending if s.base_offset < self.end_offset], self.config.segment_bytes
        )

    # -- 2. cleaning -------------------------------------------------------------------------

    def clean_group(self, group: list[_Source]) -> CleanedGroup:
        """Write the cleaned replacement of ``group`` as ``<base>.log.cleaned`` (indexes
        included), fsynced; removed again if this fails or is stopped."""
        base = group[0].base_offset
        cleaned = LogSegment.create(
            self.directory,
            base,
            self.config.index_interval_bytes,
            self.now_ms,
            suffix=CLEANED_SUFFIX,
        )
        end = group[-1].next_offset
        txns = _CleanedTransactions(
            [t for t in self._aborted if t.last_offset >= base and t.first_offset < end],
            cleaned.txn_index,
        )
        try:
            out, infos = bytearray(), []
            for source in group:
                last_source = source is group[-1]
                for info, batch in _read_batches(source.path, source.size):
                    self._check_stop()
                    group_end = last_source and info.position + info.size == source.size
                    kept = self._filter(info, batch, group_end, txns)
                    if kept is None:
                        continue
                    infos.append(header_at(kept, 0)._replace(position=len(out)))
                    out += kept
                    if len(out) >= _WRITE_CHUNK:
                        cleaned.append(out, infos)
                        out, infos = bytearray(), []
            if infos:
                cleaned.append(out, infos)
            if cleaned.size == 0:  # cannot be: the group's last batch is always kept
                raise CleaningAborted(f"segments {base}...: nothing kept")
            cleaned.seal()
            cleaned.fsync()
            result = CleanedGroup(group, base, cleaned.next_offset, cleaned.size)
        except BaseException:
            cleaned.close()
            discard_cleaned(self.directory, base)
            raise
        cleaned.close()
        mtime = group[-1].mtime_ns  # as Kafka: the replacement keeps its last segment's age
        os.utime(segment_files(self.directory, base, CLEANED_SUFFIX)[-1], ns=(mtime, mtime))
        return result

    def swapped(self, cleaned: CleanedGroup) -> None:
        """The log swapped ``cleaned`` in: count it, and stop expecting its sources."""
        del self.pending[: len(cleaned.sources)]
        self.segments_cleaned += len(cleaned.sources)
        self.bytes_before += sum(s.size for s in cleaned.sources)
        self.bytes_after += cleaned.size

    def _last_of_producer(self, info: BatchInfo) -> bool:
        """The batch holds an active producer's last state: its last data batch, or, when its
        last entry is a marker (no data since its epoch began), that marker (Kafka's
        isBatchLastRecordOfProducer)."""
        if info.producer_id < 0:
            return False
        last = self._producer_last_offsets.get(info.producer_id)
        if last is None:
            return False
        offset, epoch = last
        if offset >= 0:
            return info.last_offset == offset
        return info.is_control and info.producer_epoch == epoch

    def _records(self, info: BatchInfo, batch: memoryview) -> list[RawRecord]:
        """The batch's records; one that does not decode raises `RecordError` naming the
        batch's offsets (the log line of the failed cleaning says what to delete)."""
        try:
            return list(raw_records(batch, info, self.config.inflation_limit))
        except RecordError as e:
            raise RecordError(
                e.code,
                f"the batch of offsets {info.base_offset} to {info.last_offset} does not "
                f"decode: {e.message}",
            ) from e

    def _filter(
        self, info: BatchInfo, batch: memoryview, group_end: bool, txns: _CleanedTransactions
    ) -> bytes | None:
        """The batch as it stays in the log, or None if it goes (Kafka's filterTo with the
        cleaner's RecordFilter)."""
        horizon = info.delete_horizon_ms
        if info.is_control:
            if not txns.on_control_batch(info, batch):
                return bytes(batch)
            if horizon is None:  # its transaction has no batch left: start its delete horizon
                records = self._records(info, batch)
                return _rewrite(info, batch, records, self.now_ms + self.config.delete_retention_ms)
            if self.now_ms < horizon:
                return bytes(batch)
            keep_empty = self._last_of_producer(info) or group_end
            return _empty_batch(info) if keep_empty else None
        if txns.on_batch(info):  # aborted: its records go unread
            self.records_read += info.record_count
            return _empty_batch(info) if self._last_of_producer(info) or group_end else None
        records = self._records(info, batch)
        keep_tombstones = horizon is None or self.now_ms < horizon
        kept = [
            r for r in records if self._keep(info.base_offset + r.offset_delta, r, keep_tombstones)
        ]
        self.records_read += len(records)
        self.records_kept += len(kept)
        if not kept:
            return _empty_batch(info) if self._last_of_producer(info) or group_end else None
        new_tombstones = horizon is None and any(r.is_tombstone for r in kept)
        if len(kept) == len(records) and not new_tombstones:
            return bytes(batch)
        if new_tombstones:
            horizon = self.now_ms + self.config.delete_retention_ms
        return _rewrite(info, batch, kept, horizon)

    def _keep(self, offset: int, record: RawRecord, keep_tombstones: bool) -> bool:
        """Kafka's Cleaner.shouldRetainRecord."""
        if offset >= self.end_offset:
            return True  # past what the map covers
        if record.key is None:
            return False
        latest = offset >= self._map.get(record.key, -1)
        return latest and (keep_tombstones or not record.is_tombstone)


class _CleanedTransactions:
    """What one pass over a run of batches knows of their transactions (Kafka's
    CleanedTransactionMetadata): ``aborted`` are the log's aborted transactions that may have
    batches in the run; ``index`` (the cleaned segment's) receives those whose marker stays."""

    def __init__(self, aborted: list[AbortedTxn], index: TransactionIndex | None) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._index = index
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # pid -> (txn, seen data)
        self._ongoing_committed: set[int] = set()

    def _start_aborted_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._next += 1
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, info: BatchInfo) -> bool:
        """A data batch: whether it belongs to an aborted transaction (then it goes)."""
        self._start_aborted_up_to(info.last_offset)
        if not info.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(info.producer_id)
        if aborted is None:
            self._ongoing_committed.add(info.producer_id)
            return False
        self._ongoing_aborted[info.producer_id] = (aborted[0], True)
        return True

    def on_control_batch(self, info: BatchInfo, batch: memoryview) -> bool:
        """A marker: whether it may go (after its delete horizon), i.e. no batch of its
        transaction was met in this run."""
        self._start_aborted_up_to(info.last_offset)
        if info.record_count == 0:
            return True  # emptied by an earlier cleaning
        try:
            commit, _ = read_marker(batch)
        except InvalidMarkerError as e:
            log.warning("keeping an unreadable control batch: %s", e)
            return False
        pid = info.producer_id
        if commit:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        aborted = self._ongoing_aborted.pop(pid, None)
        if aborted is not None and aborted[1]:
            if self._index is not None:
                self._index.append(aborted[0])
            return False
        return True


def _group(sources: list[_Source], max_bytes: int) -> list[list[_Source]]:
    """Adjacent segments cleaned into one, up to segment.bytes of input, within one index's
    offset range (Kafka's groupSegmentsBySize)."""
    groups: list[list[_Source]] = []
    size = 0
    for source in sources:
        if (
            groups
            and size + source.size <= max_bytes
            and source.next_offset - 1 - groups[-1][0].base_offset <= _MAX_RELATIVE_OFFSET
        ):
            groups[-1].append(source)
            size += source.size
        else:
            groups.append([source])
            size = source.size
    return groups


def _rewrite(
    info: BatchInfo, batch: memoryview, kept: list[RawRecord], horizon: int | None
) -> bytes:
    """The batch with only ``kept`` records, its codec and identity preserved; with a delete
    horizon, that is its base timestamp and record timestamps are re-based on it."""
    timestamps = [info.base_timestamp + r.timestamp_delta for r in kept]
    base_timestamp = timestamps[0] if horizon is None else horizon
    body = b"".join(
        encode_record(r.offset_delta, ts - base_timestamp, r.body)
        for r, ts in zip(kept, timestamps, strict=True)
    )
    xerial = is_xerial(batch[HEADER_SIZE:])
    attributes = info.attributes & ~ATTR_DELETE_HORIZON
    if horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
    return encode_batch(
        compress(info.compression, body, xerial=xerial),
        base_offset=info.base_offset,
        partition_leader_epoch=info.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=info.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=info.max_timestamp if info.is_log_append_time else max(timestamps),
        producer_id=info.producer_id,
        producer_epoch=info.producer_epoch,
        base_sequence=info.base_sequence,
        record_count=len(kept),
    )


def _empty_batch(info: BatchInfo) -> bytes:
    """A batch emptied of records but kept for its offsets and producer sequence (Kafka's
    DefaultRecordBatch.writeEmptyHeader)."""
    return encode_batch(
        b"",
        base_offset=info.base_offset,
        partition_leader_epoch=info.partition_leader_epoch,
        attributes=info.attributes & (ATTR_LOG_APPEND_TIME | ATTR_TRANSACTIONAL | ATTR_CONTROL),
        last_offset_delta=info.last_offset_delta,
        base_timestamp=info.max_timestamp,
        max_timestamp=info.max_timestamp,
        producer_id=info.producer_id,
        producer_epoch=info.producer_epoch,
        base_sequence=info.base_sequence,
        record_count=0,
    )


def _read_batches(path: Path, size: int) -> Iterator[tuple[BatchInfo, memoryview]]:
    """The batches of the first ``size`` bytes of a segment file, read in 1 MiB windows through
    a descriptor of its own (the log may close its own meanwhile)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        window, window_pos, pos = b"", 0, 0
        while pos < size:
            rel = pos - window_pos
            if rel + HEADER_SIZE > len(window):
                window, window_pos, rel = os.pread(fd, _READ_WINDOW, pos), pos, 0
            length = batch_size_at(window, rel) if rel + LOG_OVERHEAD <= len(window) else 0
            if rel + length > len(window):
                window, window_pos, rel = os.pread(fd, max(_READ_WINDOW, length), pos), pos, 0
            if length < HEADER_SIZE or pos + length > size or rel + length > len(window):
                raise LogError(ErrorCode.corrupt_message, f"{path}: bad batch at byte {pos}")
            yield (
                header_at(window, rel)._replace(position=pos),
                memoryview(window)[rel : rel + length],
            )
            pos += length
    finally:
        os.close(fd)


# -- swapping ----------------------------------------------------------------------------------


def discard_cleaned(directory: Path, base_offset: int) -> None:
    for path in segment_files(directory, base_offset, CLEANED_SUFFIX):
        path.unlink(missing_ok=True)


def swap_in(directory: Path, cleaned: CleanedGroup) -> None:
    """Replace the group's segment files with the cleaned one: the rename of its log to
    ``.swap`` is the commit point (after it, a crash completes the swap on the next open)."""
    base = cleaned.base_offset
    for path, swap in zip(
        segment_files(directory, base, CLEANED_SUFFIX),
        segment_files(directory, base, SWAP_SUFFIX),
        strict=True,
    ):
        if path.exists():  # a segment without aborted transactions has no txn index
            path.rename(swap)
    fsync_dir(directory)
    complete_swap(directory, base, cleaned.next_offset)


def complete_swap(directory: Path, base_offset: int, next_offset: int) -> None:
    """Delete the segments the swapped-in one replaces (those based in [base_offset,
    next_offset)) and give it their place; safe to repeat after a crash."""
    for path in directory.glob(f"*{LOG_SUFFIX}"):
        if path.stem.isdigit() and base_offset <= int(path.stem) < next_offset:
            for file in segment_files(directory, int(path.stem)):
                file.unlink(missing_ok=True)
    for swap, final in zip(
        segment_files(directory, base_offset, SWAP_SUFFIX),
        segment_files(directory, base_offset),
        strict=True,
    ):
        if swap.exists():
            swap.rename(final)
    fsync_dir(directory)


def finish_interrupted_cleaning(
    directory: Path, index_interval_bytes: int, partition: str, now_ms: int
) -> None:
    """On opening a log: drop what a cleaning left before its commit point (``.cleaned``
    files) and complete a swap it committed (``.swap`` files, Kafka's LogLoader does the same)."""
    for path in directory.glob(f"*{CLEANED_SUFFIX}"):
        log.info("partition %s: removing %s left by an interrupted cleaning", partition, path.name)
        path.unlink()
    for path in sorted(directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
        base = path.name.split(".")[0]
        if not base.isdigit():
            continue
        swap = LogSegment.open(
            directory, int(base), index_interval_bytes, now_ms, suffix=SWAP_SUFFIX
        )
        cut = swap.recover()  # its indexes are rebuilt from it, whatever state they were left in
        swap.close()
        complete_swap(directory, int(base), swap.next_offset)
        log.warning(
            "partition %s: completed the swap of cleaned segment %s (offsets %s to %d) that a "
            "crash interrupted%s",
            partition,
            base,
            base,
            swap.next_offset - 1,
            f"; {cut} torn bytes cut from it" if cut else "",
        )
    for path in directory.glob(f"*{SWAP_SUFFIX}"):  # index files whose log swap completed
        path.unlink()
