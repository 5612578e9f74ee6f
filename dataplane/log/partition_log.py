"""PartitionLog: the log of one topic-partition, a directory of segments (Kafka's UnifiedLog).

Durability, as in Kafka by default: flush.messages and flush.ms are "never", so an append is
acknowledged once ``write()`` has handed it to the OS page cache. That survives a crash of the
broker process (kill -9) but not of the machine; replication covers the latter. A segment is
fsynced when it rolls (on a background thread, so that an append never waits for the disk) and the
active one on `flush` and on clean `close`. Each fsync advances the recovery point, kept in the
`StateStore`: after a crash, only the segments from the one holding it are re-checked (see
recovery.py); after a clean close, nothing is.

Threading: a PartitionLog is not thread-safe; the broker calls it from one thread at a time (or
under its own lock). The shared background fsync thread only touches sealed segments, and every
operation that deletes or truncates segments first waits for it. A compaction (cleaner.py) reads
sealed segments from a worker thread through descriptors of its own; its results are swapped in
by `swap_cleaned`, on the log's thread.

Storage failures: an I/O error (OSError) in an append, read, flush, roll or truncation marks the
log failed and is raised as `LogError` KAFKA_STORAGE_ERROR (the code Kafka's clients retry after
a metadata refresh); `on_failure` tells the owner (the replica manager takes the whole log
directory offline, log_dirs.py). Every later call fails the same way, without touching the disk.
Running out of descriptors or memory (errors.out_of_resources) is no disk failure: an append
that hits it has written nothing and fails with UNKNOWN_SERVER_ERROR, the log staying usable;
elsewhere it fails the log, and the owner takes only this replica offline.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Concatenate, NamedTuple, ParamSpec, TypeVar

from dataplane.log.batch import BatchInfo, RecordError, assign_offsets, validate
from dataplane.log.cleaner import (
    CleanedGroup,
    CleaningAborted,
    CleaningJob,
    discard_cleaned,
    plan_cleaning,
    swap_in,
)
from dataplane.log.epoch_cache import LeaderEpochCache
from dataplane.log.errors import (
    ErrorCode,
    LogError,
    UnexpectedAppendOffsetError,
    out_of_resources,
    resource_error,
)
from dataplane.log.index import CorruptIndexError
from dataplane.log.log_config import LogConfig
from dataplane.log.log_dirs import LogDirFailure
from dataplane.log.recompress import needs_recompression, recompress
from dataplane.log.record_validation import RecordChecks, check_records, headers_in_range
from dataplane.log.recovery import load_segments, rebuild_epoch_cache
from dataplane.log.segment import LogSegment, fsync_dir
from dataplane.log.state_store import StateStore
from dataplane.log.txn_index import AbortedTxn

_MAX_RELATIVE_OFFSET = 2**31 - 1  # index entries hold offsets relative to the segment base
_FSYNC = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-fsync")
_REFUSAL_REPORT_INTERVAL_S = 10.0  # a producer retrying a refused batch must not flood the log
_REFUSAL_ADVICE = {
    ErrorCode.invalid_timestamp: "check the producer's clock and its records' timestamps "
    "(message.timestamp.before.max.ms and message.timestamp.after.max.ms set the range)",
    ErrorCode.invalid_record: "the producer must send records Kafka accepts (a compacted topic "
    "needs a key on every record)",
    ErrorCode.corrupt_message: "the producer's compressed records do not decode: check its "
    "compression library",
    ErrorCode.message_too_large: "stored in the topic's compression.type, the batch outgrows "
    "max.message.bytes: produce smaller batches, or raise max.message.bytes",
}

log = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _patchable(records: bytes | bytearray | memoryview) -> bytearray | memoryview:
    """``records`` itself if it can be patched in place, else a copy that can."""
    if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
        return records
    return bytearray(records)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _storage(
    method: Callable[Concatenate[PartitionLog, _P], _R],
) -> Callable[Concatenate[PartitionLog, _P], _R]:
    """A method that touches the disk: refused once the log failed; an OSError fails it."""

    @functools.wraps(method)
    def guarded(self: PartitionLog, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self.failure is not None:
            raise self._storage_error()
        if self._fsync_failure is not None:
            raise self.fail(self._fsync_failure)
        try:
            return method(self, *args, **kwargs)
        except OSError as e:
            raise self.fail(e) from e

    return guarded


class AppendResult(NamedTuple):
    base_offset: int  # offset of the first record appended
    last_offset: int
    log_append_time: int  # the time stamped on the batches under LogAppendTime, else -1
    batches: list[BatchInfo]  # headers as written, for producer-state checks


class PartitionLog:
    """Append, read and maintain one partition's log. Create with `PartitionLog.open`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        store: StateStore,
        key: str,
        segments: list[LogSegment],
        txn_index_rebuild_from: int | None = None,
    ) -> None:
        self.directory = directory
        self.config = config  # replace it to apply a topic config change
        self._store = store
        self._key = key
        self._prefix = f"log/{key}/"
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._epochs = LeaderEpochCache(store, self._prefix + "leader-epochs")
        self._log_start_offset = store.get_int(self._prefix + "log-start-offset", 0)
        self._recovery_point = store.get_int(self._prefix + "recovery-point", 0)
        self._last_flush_ms: int | None = None  # set by the first append: the caller's clock
        self._pending_fsync: Future[None] | None = None
        self._rolls = 0
        self._closed = False
        self._txn_rebuild_from = txn_index_rebuild_from
        self._last_aborted: int | None = None  # last offset of the newest txn index entry
        self.failure: OSError | None = None  # the I/O error that failed this log
        self._fsync_failure: OSError | None = None  # of a background fsync, raised by the next call
        # Told once when the log fails (the replica manager takes its directory offline).
        self.on_failure: Callable[[PartitionLog, OSError], None] | None = None
        # Moves when data already written changes (truncation, compaction, retention): a log
        # move then copies its files whole rather than only what was appended (log_dirs.py).
        self.rewrites = 0
        self._refusal_reported_at = -_REFUSAL_REPORT_INTERVAL_S  # monotonic clock
        self._refusals_unreported = 0

    @classmethod
    def open(cls, directory: Path, config: LogConfig, store: StateStore, key: str) -> PartitionLog:
        """Open (creating it if new) the log in ``directory``; ``key`` names the partition in the
        store and in log messages. Runs crash recovery unless the log was closed cleanly."""
        prefix = f"log/{key}/"
        if not directory.is_dir():
            store.delete_prefix(prefix)  # state left by an earlier partition of the same name
        directory.mkdir(parents=True, exist_ok=True)
        clean = store.get_bytes(prefix + "clean-shutdown") is not None
        store.delete(prefix + "clean-shutdown")  # until the next clean close
        recovery_point = store.get_int(prefix + "recovery-point", 0)
        now_ms = _wall_clock_ms()
        segments, txn_rebuild_from = load_segments(
            directory, config.index_interval_bytes, recovery_point, clean, key, now_ms
        )
        plog = cls(directory, config, store, key, segments, txn_rebuild_from)
        plog._finish_loading(clean, now_ms)
        return plog

    def _finish_loading(self, clean: bool, now_ms: int) -> None:
        """Reconcile the stored offsets with what the files hold (Kafka's LogLoader rules)."""
        if not self._segments or self.log_end_offset < self._log_start_offset:
            # No data, or it ended before a log start offset that was already recorded.
            for segment in self._segments:
                segment.delete()
            self._replace_segments(self._log_start_offset, now_ms)
            self._txn_rebuild_from = None
        self._set_log_start_offset(max(self._log_start_offset, self._segments[0].base_offset))
        end = self.log_end_offset
        self._set_recovery_point(end if clean else min(self._recovery_point, end))
        if self._epochs.needs_rebuild:
            rebuild_epoch_cache(self._epochs, self._segments, self._key)
        self._epochs.truncate_from_end(end)
        self._epochs.truncate_from_start(self._log_start_offset)

    # -- state -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        """Offsets below this are fsynced."""
        return self._recovery_point

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch in the log, -1 if none."""
        return self._epochs.latest_epoch

    @_storage
    def start_epoch(self, epoch: int) -> None:
        """A new leader records where its epoch starts before appending anything (Kafka's
        makeLeader), so followers of an older epoch learn where it ended."""
        self._epochs.assign(epoch, self.log_end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), (-1, -1) if the epoch is unknown."""
        return self._epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """Leader epoch of the record at ``offset``, -1 if unknown (for ListOffsets responses)."""
        return self._epochs.epoch_for_offset(offset)

    @property
    def roll_count(self) -> int:
        """Segments rolled since the log was opened: watch it to act on a roll (the producer
        state takes a snapshot then)."""
        return self._rolls

    @property
    def store(self) -> StateStore:
        return self._store

    @property
    def key(self) -> str:
        """What names the partition in the store (and in log messages)."""
        return self._key

    @property
    def size(self) -> int:
        """Bytes of its segments' logs (DescribeLogDirs' partition size, as Kafka's log.size)."""
        return sum(s.size for s in self._segments)

    # -- storage failures ----------------------------------------------------------------------

    def _storage_error(self) -> LogError:
        return LogError(
            ErrorCode.kafka_storage_error,
            f"partition {self._key}: log directory {self.directory.parent} is offline "
            f"({self.failure})",
        )

    def fail(self, error: OSError) -> LogError:
        """Mark the log failed by ``error`` (once: tells `on_failure`); the error to raise."""
        if self.failure is None:
            self.failure = error
            if not isinstance(error, LogDirFailure):  # that one: its directory's line says it
                log.error("partition %s: I/O error in %s: %s", self._key, self.directory, error)
            if self.on_failure is not None:
                self.on_failure(self, error)
        return self._storage_error()

    def abandon(self) -> None:
        """Let go of a failed log: close its descriptors, write nothing (not even the clean
        shutdown mark: the next start recovers it from its files, if they are readable)."""
        self._closed = True
        for segment in self._segments:
            # its buffered index entries may be lost: recovery rebuilds the index
            with contextlib.suppress(OSError):
                segment.close()

    def state_key(self, name: str) -> str:
        """A store key for state kept beside this log (e.g. producer-state snapshots). It lives
        under the log's own prefix, so it goes with the partition: on `delete`, and when a new
        partition of the same name is created."""
        return self._prefix + name

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        self._store.put_int(self._prefix + "log-start-offset", offset)

    def _set_recovery_point(self, offset: int) -> None:
        self._recovery_point = offset
        self._store.put_int(self._prefix + "recovery-point", offset)

    @property
    def cleaner_checkpoint(self) -> int:
        """Compaction: the offsets below this are clean (no key twice), the rest is dirty."""
        return self._store.get_int(self._prefix + "cleaner-checkpoint", 0)

    def _lower_cleaner_checkpoint(self, offset: int) -> None:
        """After a truncation: what is appended from ``offset`` on again is dirty."""
        if self.cleaner_checkpoint > offset:
            self._store.put_int(self._prefix + "cleaner-checkpoint", offset)

    # -- transaction index ------------------------------------------------------------------

    @property
    def txn_index_rebuild_from(self) -> int | None:
        """Set after a crash: the transaction indexes hold the aborted transactions whose marker
        is below this offset only; the producer state replays from a snapshot at or below it and
        calls `txn_index_rebuilt` (recovery.py explains)."""
        return self._txn_rebuild_from

    @_storage
    def txn_index_rebuilt(self) -> None:
        """The producer state re-appended every aborted transaction from `txn_index_rebuild_from`
        on: make those entries as durable as the segments' other files."""
        start = self._txn_rebuild_from
        if start is None:
            return
        self._txn_rebuild_from = None
        self._wait_for_fsync()
        for segment in self._segments[max(bisect_right(self._bases, start) - 1, 0) :]:
            segment.txn_index.fsync()

    def _last_aborted_offset(self) -> int:
        """Marker offset of the newest entry of any transaction index, -1 if none."""
        if self._last_aborted is None:
            self._last_aborted = next(
                (s.txn_index.last_offset for s in reversed(self._segments) if s.txn_index),
                -1,
            )
        return self._last_aborted

    @_storage
    def append_aborted_txn(
        self, producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int
    ) -> bool:
        """Index an aborted transaction whose ABORT marker is at ``last_offset``, in the segment
        holding the marker. Entries arrive in marker order, and the indexes hold a prefix of
        them, so an entry at or below the newest one is already there (a producer-state replay
        after a truncation or a restart): it is skipped and False returned."""
        if last_offset <= self._last_aborted_offset() or last_offset >= self.log_end_offset:
            return False
        segment = self._segments[bisect_right(self._bases, last_offset) - 1]
        segment.txn_index.append(
            AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset)
        )
        self._last_aborted = last_offset
        return True

    def _collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTransactions: from the segment holding ``fetch_offset`` on, until
        an entry proves that no later one starts below ``upper_bound``."""
        found: list[AbortedTxn] = []
        if fetch_offset >= upper_bound:
            return found
        for segment in self._segments[max(bisect_right(self._bases, fetch_offset) - 1, 0) :]:
            if not segment.txn_index:
                continue
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found += txns
            if complete:
                break
        return found

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions whose offsets intersect
        [``fetch_offset``, ``upper_bound``): what a read_committed fetch returns beside its
        records (``upper_bound``: the last stable offset)."""
        return [
            (t.producer_id, t.first_offset)
            for t in self._collect_aborted(fetch_offset, upper_bound)
        ]

    # -- appending ---------------------------------------------------------------------------

    def validate(
        self, records: bytes | bytearray | memoryview, now_ms: int, *, from_client: bool = True
    ) -> list[BatchInfo]:
        """The checks `append_as_leader` makes (max.message.bytes and, for producers' records,
        keys and timestamps at ``now_ms``: record_validation.py), without appending: for a
        caller that must look at the headers first (producer state). Pass the result to
        `append_as_leader` as ``validated`` so the CRCs are not computed twice."""
        config = self.config
        infos = validate(records, config.max_message_bytes, from_client=from_client)
        if not infos:
            raise LogError(ErrorCode.invalid_record, "no record batch to append")
        if from_client:
            bounds = config.timestamp_bounds(now_ms)
            if config.compact or not headers_in_range(infos, bounds):
                self._check_records(records, infos, bounds)
        return infos

    def _check_records(
        self,
        records: bytes | bytearray | memoryview,
        infos: list[BatchInfo],
        bounds: tuple[int, int] | None,
    ) -> None:
        """The record checks off the hot path (a compacted topic, a header out of range)."""
        config = self.config
        checks = RecordChecks(self.directory.name, config.compact, bounds, config.inflation_limit)
        try:
            check_records(records, infos, checks)
        except RecordError as e:
            self._report_refusal(e)
            raise

    def _report_refusal(self, error: RecordError) -> None:
        """Log a produce refused for its records: at most one line per partition every few
        seconds, counting the refusals it stood for."""
        now = time.monotonic()
        if now - self._refusal_reported_at < _REFUSAL_REPORT_INTERVAL_S:
            self._refusals_unreported += 1
            return
        more, self._refusals_unreported = self._refusals_unreported, 0
        self._refusal_reported_at = now
        log.warning(
            "partition %s: produce refused with %s: %s%s; %s",
            self.directory.name,
            error.code.name.upper(),
            error.message,
            f" (and {more} more refusals since the last report)" if more else "",
            _REFUSAL_ADVICE.get(error.code, "see the message"),
        )

    @_storage
    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        *,
        from_client: bool = True,
        validated: list[BatchInfo] | None = None,
    ) -> AppendResult:
        """Validate a produce request's records, assign offsets and ``leader_epoch``, append.

        A writable ``records`` (bytearray, writable memoryview) is patched in place; bytes are
        copied once. ``from_client=False`` is for the broker's own coordinators, which may write
        control batches. ``validated``: the headers `validate` returned for these same
        ``records``, which are then not checked again. Raises `RecordError` (a `LogError`) with
        the Kafka error code. A compacted topic refuses records without a key.
        """
        config = self.config
        infos = validated
        if infos is None:
            infos = self.validate(records, now_ms, from_client=from_client)
        codec = config.stored_codec
        if codec is not None and needs_recompression(infos, codec):
            records, infos = self._recompress(records, infos, codec)
        buf = _patchable(records)
        append_time = now_ms if config.log_append_time else None
        base_offset = self.log_end_offset
        infos = assign_offsets(buf, infos, base_offset, leader_epoch, append_time)
        self._epochs.assign(leader_epoch, base_offset)
        self._append(buf, infos, now_ms)
        log_append_time = -1 if append_time is None else append_time
        return AppendResult(base_offset, infos[-1].last_offset, log_append_time, infos)

    def _recompress(
        self, records: bytes | bytearray | memoryview, infos: list[BatchInfo], codec: int
    ) -> tuple[bytearray, list[BatchInfo]]:
        """The topic's compression.type applied (recompress.py); a refusal is reported as the
        record checks' are."""
        config = self.config
        try:
            return recompress(
                records,
                infos,
                codec,
                config.inflation_limit,
                config.max_message_bytes,
                self.directory.name,
            )
        except RecordError as e:
            self._report_refusal(e)
            raise

    @_storage
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append replicated batches as they are: they must be intact and follow the log, with
        gaps where the leader's log was compacted (as in Kafka)."""
        infos = validate(records, None, from_client=False)
        end = self.log_end_offset
        if not infos:
            return AppendResult(end, end - 1, -1, [])
        for info in infos:
            if info.base_offset < end:
                raise UnexpectedAppendOffsetError(
                    f"partition {self._key}: batch at offset {info.base_offset}, log ends at {end}"
                )
            end = info.last_offset + 1
        for info in infos:
            self._epochs.assign(info.partition_leader_epoch, info.base_offset)
        self._append(records, infos, _wall_clock_ms())
        return AppendResult(infos[0].base_offset, infos[-1].last_offset, -1, infos)

    def _append(
        self, data: bytes | bytearray | memoryview, infos: list[BatchInfo], now_ms: int
    ) -> None:
        try:
            segment = self._segments[-1]
            if self._should_roll(segment, len(data), infos, now_ms):
                segment = self._roll(infos[0].base_offset, now_ms)
            segment.append(data, infos)
        except OSError as e:
            if out_of_resources(e):  # nothing was written: the log stays as it was, and usable
                raise resource_error(f"append to partition {self._key}", e) from e
            raise
        self._maybe_flush(now_ms)

    def _should_roll(
        self, segment: LogSegment, size: int, infos: list[BatchInfo], now_ms: int
    ) -> bool:
        """Kafka's LogSegment.shouldRoll: a non-empty segment rolls when the append would pass
        segment.bytes, when the append's max timestamp is more than segment.ms past the first
        batch's (or, without timestamps, the segment is that old), or when offsets would no
        longer fit the index."""
        if segment.size == 0:
            return False
        if segment.size + size > self.config.segment_bytes:
            return True
        if infos[-1].last_offset - segment.base_offset > _MAX_RELATIVE_OFFSET:
            return True
        first_ts = segment.rolling_timestamp
        if first_ts is not None and first_ts >= 0:
            waited = max(info.max_timestamp for info in infos) - first_ts
        else:
            waited = now_ms - segment.created_ms
        return waited > self.config.segment_ms

    def _roll(self, base_offset: int, now_ms: int) -> LogSegment:
        old = self._segments[-1]
        new = LogSegment.create(
            self.directory, base_offset, self.config.index_interval_bytes, now_ms
        )
        try:
            old.seal()
        except OSError:
            new.delete()  # the roll did not happen: the old segment stays the active one
            raise
        self._segments.append(new)
        self._bases.append(base_offset)
        self._rolls += 1
        self._pending_fsync = _FSYNC.submit(self._fsync_sealed, old, base_offset)
        self._pending_fsync.add_done_callback(self._report_fsync_failure)
        return new

    def _fsync_sealed(self, segment: LogSegment, end_offset: int) -> None:
        """Background: make a rolled segment durable, then move the recovery point past it."""
        segment.fsync()
        fsync_dir(self.directory)
        if end_offset > self._recovery_point:
            self._set_recovery_point(end_offset)

    def _report_fsync_failure(self, future: Future[None]) -> None:
        """A failed fsync leaves the recovery point behind (the next open re-checks the data);
        say so even if no later call waits on this future."""
        if (error := future.exception()) is not None:
            log.error("partition %s: fsync of a rolled segment failed: %s", self._key, error)
            if isinstance(error, OSError):
                self._fsync_failure = error  # fails the log at its next call, on its thread

    def _wait_for_fsync(self) -> None:
        """Before touching sealed segments or the recovery point from this thread."""
        if self._pending_fsync is not None:
            self._pending_fsync.result()
            self._pending_fsync = None

    def _maybe_flush(self, now_ms: int) -> None:
        """flush.messages / flush.ms (both "never" by default)."""
        if self._last_flush_ms is None:
            self._last_flush_ms = now_ms
        unflushed = self.log_end_offset - self._recovery_point
        if (
            unflushed >= self.config.flush_messages
            or now_ms - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()
            self._last_flush_ms = now_ms

    @_storage
    def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point to the end."""
        self._wait_for_fsync()
        self._segments[-1].fsync()
        self._set_recovery_point(self.log_end_offset)

    # -- reading -----------------------------------------------------------------------------

    def _out_of_range(self, offset: int) -> LogError:
        return LogError(
            ErrorCode.offset_out_of_range,
            f"partition {self._key}: offset {offset} not in "
            f"[{self._log_start_offset}, {self.log_end_offset}]",
        )

    @_storage
    def read(self, offset: int, max_bytes: int, upper_bound: int, min_one_batch: bool) -> bytes:
        """Whole batches as stored, from the one holding ``offset``, up to ``max_bytes`` (but at
        least one batch if ``min_one_batch``, KIP-74), none whose base offset is >= ``upper_bound``
        (the high watermark or the log end).

        A read that reaches the end of a segment with budget left goes on into the next one.
        Kafka stops at the segment's end; after compaction a segment may end with an emptied
        batch (kept for its producer's state), and a fetch answered with nothing but such
        batches makes librdkafka double its fetch size each time, then fail with
        MSG_SIZE_TOO_LARGE after enough of them in a row.

        Raises `LogError` OFFSET_OUT_OF_RANGE outside [log_start_offset, log_end_offset].
        """
        if not self._log_start_offset <= offset <= self.log_end_offset:
            raise self._out_of_range(offset)
        chunks: list[bytes] = []
        size = 0
        for segment in self._segments[bisect_right(self._bases, offset) - 1 :]:
            if offset >= upper_bound:
                break
            first = segment.translate(offset)
            if first is None:
                continue  # past this segment's end: the next one holds the offset
            if first.base_offset >= upper_bound:
                break
            limit = max_bytes - size
            if min_one_batch and not chunks:
                limit = max(limit, first.size)
            end = segment.read_end(first, first.position + limit, upper_bound)
            if end > first.position:
                chunks.append(segment.read(first.position, end))
                size += end - first.position
            if end < segment.size:
                break  # stopped by the budget or the upper bound, not by the segment's end
            offset = segment.next_offset
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def batches_from(self, offset: int) -> Iterator[BatchInfo]:
        """Headers of the batches from the one holding ``offset`` (or from the log start, if
        later) to the log end, across segments: for rebuilding state kept beside the log. Reads
        headers in windows (`LogSegment.scan_headers`), never decodes a record. Positions are
        within each batch's segment. Do not append or truncate while iterating."""
        offset = max(offset, self._log_start_offset)
        if offset >= self.log_end_offset:
            return
        i = max(bisect_right(self._bases, offset) - 1, 0)
        segments = self._segments[i:]
        first = segments[0].translate(offset)
        if first is not None:
            yield from segments[0].scan_headers(first.position)
        for segment in segments[1:]:
            yield from segment.scan_headers(0)

    @_storage
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets by time: (offset, timestamp) of the first record whose timestamp is >=
        ``timestamp``, or None. Decodes (and decompresses) only the one batch it lands in."""
        for segment in self._segments:
            if segment.max_timestamp >= timestamp:
                found = self._find_by_timestamp(segment, timestamp)
                if found is not None:
                    return found
        return None

    @_storage
    def max_timestamp(self) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): (offset, timestamp) of the first record carrying
        the largest timestamp, or None when no record has a timestamp."""
        segment = max(self._segments, key=lambda s: s.max_timestamp)
        if segment.max_timestamp < 0:
            return None
        return self._find_by_timestamp(segment, segment.max_timestamp)

    def _find_by_timestamp(self, segment: LogSegment, timestamp: int) -> tuple[int, int] | None:
        """`LogSegment.find_by_timestamp` within the log; a batch whose records do not decode
        (stored as its producer sent it) is reported, and its `RecordError` raised."""
        try:
            return segment.find_by_timestamp(
                timestamp, self._log_start_offset, self.config.inflation_limit
            )
        except RecordError as e:
            log.warning(
                "partition %s: the timestamp lookup for %d read a batch that does not decode "
                "(%s), answered %s; its consumers will fail on it too: DeleteRecords past it "
                "gets them going",
                self.directory.name,
                timestamp,
                e.message,
                e.code.name,
            )
            raise

    # -- truncation, retention, lifecycle -----------------------------------------------------

    @_storage
    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset`` (a batch straddling ``offset`` goes
        whole, so the log may end before it), with index and epoch entries; for followers."""
        if offset >= self.log_end_offset:
            # An epoch this replica started as leader without appending anything must still go
            # (Kafka's UnifiedLog.truncateTo): else the new leader keeps reporting divergence.
            self._epochs.truncate_from_end(self.log_end_offset)
            return
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._wait_for_fsync()
        self.rewrites += 1
        self._set_recovery_point(min(self._recovery_point, offset))
        self._lower_cleaner_checkpoint(offset)
        self._last_aborted = None
        while self._bases[-1] >= offset and len(self._segments) > 1:
            self._segments.pop().delete()
            self._bases.pop()
        self._segments[-1].truncate_to(offset, _wall_clock_ms())
        end = self.log_end_offset
        self._set_recovery_point(min(self._recovery_point, end))
        self._epochs.truncate_from_end(end)
        if self._log_start_offset > end:
            self._set_log_start_offset(end)

    @_storage
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a follower far behind the leader's start)."""
        self._wait_for_fsync()
        self.rewrites += 1
        self._set_log_start_offset(offset)
        self._set_recovery_point(offset)
        self._lower_cleaner_checkpoint(offset)
        self._epochs.clear()
        self._last_aborted = None
        for segment in self._segments:
            segment.delete()
        self._replace_segments(offset, _wall_clock_ms())

    def _replace_segments(self, base_offset: int, now_ms: int) -> None:
        segment = LogSegment.create(
            self.directory, base_offset, self.config.index_interval_bytes, now_ms
        )
        self._segments = [segment]
        self._bases = [base_offset]

    @_storage
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (never down); whole
        segments below it go at the next `enforce_retention`. Returns the log start offset."""
        if offset > self.log_end_offset:
            raise self._out_of_range(offset)
        if offset > self._log_start_offset:
            self._set_log_start_offset(offset)
            self._epochs.truncate_from_start(offset)
        return self._log_start_offset

    @_storage
    def enforce_retention(self, now_ms: int, high_watermark: int) -> int:
        """Kafka's UnifiedLog.deleteOldSegments: delete the oldest segments that lie wholly
        below the log start offset, then those that put the log over retention.bytes, then
        those past retention.ms (the last two under cleanup.policy delete; a compacted-only
        topic's segments shrink by compaction instead), each a run from the oldest. The active
        segment goes too, when it is not empty: it is rolled first, and the log restarts empty
        at its end. Only the high watermark bounds this (no segment holding an offset at or
        past it goes): records of an open transaction go like any, and the last stable offset
        is then the log start until their marker. Returns the number of segments deleted."""
        config = self.config
        count = self._deletable(0, high_watermark, self._below_log_start)
        if config.delete and config.retention_bytes >= 0:
            excess = sum(s.size for s in self._segments[count:]) - config.retention_bytes

            def too_big(segment: LogSegment, _next_base: int | None) -> bool:
                nonlocal excess
                if excess < segment.size:
                    return False
                excess -= segment.size
                return True

            count += self._deletable(count, high_watermark, too_big)
        if config.delete and config.retention_ms >= 0:

            def expired(segment: LogSegment, _next_base: int | None) -> bool:
                return now_ms - segment.largest_timestamp() > config.retention_ms

            count += self._deletable(count, high_watermark, expired)
        if count:
            self._delete_oldest(count, now_ms)
        return count

    def _below_log_start(self, _segment: LogSegment, next_base: int | None) -> bool:
        """Wholly below the log start offset (the active segment never is)."""
        return next_base is not None and next_base <= self._log_start_offset

    def _deletable(
        self,
        first: int,
        high_watermark: int,
        breached: Callable[[LogSegment, int | None], bool],
    ) -> int:
        """How many segments from index ``first`` on, in a run, are deletable (Kafka's
        deletableSegments): wholly below the high watermark, not the active segment while it
        is empty, and ``breached`` (given the segment and the next one's base offset, None for
        the active segment)."""
        last = len(self._segments) - 1
        index = first
        while index <= last:
            segment = self._segments[index]
            next_base = self._bases[index + 1] if index < last else None
            end = self.log_end_offset if next_base is None else next_base
            if end > high_watermark or (next_base is None and segment.size == 0):
                break
            if not breached(segment, next_base):
                break
            index += 1
        return index - first

    def _delete_oldest(self, count: int, now_ms: int) -> None:
        """Delete the oldest ``count`` segments (rolling the active one first if it is among
        them) and move the log start to the first segment left."""
        if count == len(self._segments):
            self._roll(self.log_end_offset, now_ms)
            log.info("partition %s: rolled the active segment to delete it (retention)", self._key)
        self._wait_for_fsync()
        for segment in self._segments[:count]:
            segment.delete()
        del self._segments[:count]
        del self._bases[:count]
        self._last_aborted = None
        if self._bases[0] > self._log_start_offset:
            self._set_log_start_offset(self._bases[0])
            self._epochs.truncate_from_start(self._bases[0])

    # -- compaction (cleaner.py) ---------------------------------------------------------------

    def plan_cleaning(
        self,
        now_ms: int,
        upper_bound: int,
        producer_last_offsets: Mapping[int, tuple[int, int]],
    ) -> CleaningJob | None:
        """The compaction this log needs now, or None (not compacted, or not dirty enough).
        ``upper_bound``: the last stable offset (nothing at or above it is cleaned, so every
        transaction in the cleaned range is decided); ``producer_last_offsets``: each active
        producer's (last data offset or -1, epoch), whose last batch is kept even if emptied."""
        if self._closed or not self.config.compact:
            return None
        return plan_cleaning(
            self.directory,
            self.config,
            self._segments,
            self._log_start_offset,
            self.cleaner_checkpoint,
            upper_bound,
            now_ms,
            producer_last_offsets,
            self._collect_aborted,
        )

    def swap_cleaned(self, job: CleaningJob, cleaned: CleanedGroup) -> None:
        """Put a cleaned group in place of its segments (between reads and appends: the files
        are renamed and the segment list changed with no await in between). Raises
        `CleaningAborted`, removing the cleaned files, if the log is closed or no longer holds
        the segments the job read (truncation, retention)."""
        segments = self._segments
        first = next((i for i, s in enumerate(segments) if s is job.pending[0].segment), None)
        if (
            self._closed
            or first is None
            or first + len(job.pending) >= len(segments)
            or any(
                segments[first + k] is not source.segment or source.segment.size != source.size
                for k, source in enumerate(job.pending)
            )
        ):
            discard_cleaned(self.directory, cleaned.base_offset)
            raise CleaningAborted(f"partition {self._key}: the log changed during its cleaning")
        self._wait_for_fsync()
        self.rewrites += 1
        swap_in(self.directory, cleaned)
        replaced = slice(first, first + len(cleaned.sources))
        for segment in segments[replaced]:
            segment.close()  # its files are gone; its descriptor was still serving reads
        new = LogSegment.open(
            self.directory, cleaned.base_offset, self.config.index_interval_bytes, _wall_clock_ms()
        )
        try:
            new.load()
        except CorruptIndexError:
            new.recover()
        segments[replaced] = [new]
        self._bases[replaced] = [new.base_offset]
        self._last_aborted = None
        job.swapped(cleaned)

    def finish_cleaning(self, job: CleaningJob) -> None:
        """Every group of ``job`` swapped in: the log is clean up to its end offset."""
        self._store.put_int(self._prefix + "cleaner-checkpoint", job.end_offset)

    def close(self) -> None:
        """Clean close: fsync, record the recovery point and mark the log clean (no scan on the
        next open). Closing twice is harmless."""
        if self._closed:
            return
        if self.failure is not None:
            self.abandon()
            return
        self._closed = True
        self._wait_for_fsync()
        active = self._segments[-1]
        active.seal()
        active.fsync()
        fsync_dir(self.directory)
        self._set_recovery_point(self.log_end_offset)
        for segment in self._segments:
            segment.close()
        self._store.put_bytes(self._prefix + "clean-shutdown", b"1")

    def delete(self) -> None:
        """Remove the partition: files, directory and stored state."""
        self._wait_for_fsync()
        if not self._closed:
            self._closed = True
            for segment in self._segments:
                segment.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        self._store.delete_prefix(self._prefix)
