"""One log segment: ``<baseOffset:020d>.log`` with its ``.index``, ``.timeindex`` and, once it
holds an ABORT marker, ``.txnindex`` (txn_index.py).

The ``.log`` file is the concatenation of the batches exactly as they were appended. An append is
one ``write()`` of whole batches to an O_APPEND descriptor; reads are ``pread()`` of byte ranges.
Finding an offset goes: sparse offset index (in memory) -> batch position -> a walk over batch
headers (61 bytes read per batch) up to the target. Nothing on these paths decodes a record.

The in-memory state (size, next offset, max timestamp) is recomputed on open, either from the
indexes plus the few batches after the last index entry (`load`), or from a full checked scan that
also rebuilds the indexes (`recover`).

The log cleaner writes a segment's replacement under a temporary suffix (Kafka's ``.cleaned``,
then ``.swap``) appended to all its file names.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from pathlib import Path

from dataplane.log.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchInfo,
    batch_size_at,
    check_batch,
    header_at,
)
from dataplane.log.errors import ErrorCode, LogError
from dataplane.log.index import CorruptIndexError, offset_index, time_index
from dataplane.log.records import record_timestamps
from dataplane.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_RECOVERY_CHUNK = 8 << 20  # bytes read at a time when checking a whole segment
_SCAN_WINDOW = 64 << 10  # bytes read at a time by `scan_headers`


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}"


def segment_files(directory: Path, base_offset: int, suffix: str = "") -> list[Path]:
    """A segment's files (under a temporary ``suffix``), the log last: renaming its log is what
    makes a cleaned segment current, so it is renamed after its indexes. The transaction index
    may not exist."""
    return [
        segment_path(directory, base_offset, name + suffix)
        for name in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)
    ]


def fsync_dir(directory: Path) -> None:
    """Make created, renamed or deleted file names durable too."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | bytearray | memoryview, start: int) -> None:
    """Write all of ``data`` at the end of the file; on failure cut the file back to ``start`` so
    that no partial batch is left for a later append to land after."""
    view = memoryview(data)
    written = 0
    try:
        while written < len(view):
            written += os.write(fd, view[written:])
    except OSError:
        os.ftruncate(fd, start)
        raise


class LogSegment:
    """A segment and its indexes. Create with `create`, or `open` then `load` or `recover`."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        now_ms: int,
        *,
        create: bool,
        suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.path = segment_path(directory, base_offset, LOG_SUFFIX + suffix)
        self.offset_index = offset_index(
            segment_path(directory, base_offset, INDEX_SUFFIX + suffix)
        )
        self.time_index = time_index(
            segment_path(directory, base_offset, TIME_INDEX_SUFFIX + suffix)
        )
        self.txn_index = TransactionIndex(
            segment_path(directory, base_offset, TXN_INDEX_SUFFIX + suffix)
        )
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if create else 0)
        self._fd = os.open(self.path, flags, 0o644)
        try:
            if create:
                self.offset_index.reset()
                self.time_index.reset()
                self.txn_index.reset()
            self.size = os.fstat(self._fd).st_size
        except OSError:
            os.close(self._fd)  # not leaked when descriptors run out half-way
            raise
        self._interval = index_interval_bytes
        self.created_ms = now_ms
        self.control_batches = 0  # found by the last `recover`
        self._reset_state()

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        now_ms: int,
        *,
        suffix: str = "",
    ) -> LogSegment:
        """A new, empty segment (replacing any file of the same name)."""
        return cls(directory, base_offset, index_interval_bytes, now_ms, create=True, suffix=suffix)

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        now_ms: int,
        *,
        suffix: str = "",
    ) -> LogSegment:
        """An existing segment; call `load` or `recover` before using it."""
        return cls(
            directory, base_offset, index_interval_bytes, now_ms, create=False, suffix=suffix
        )

    def _reset_state(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset  # last offset of the batch holding it
        self.rolling_timestamp: int | None = None  # max timestamp of the first batch (segment.ms)
        self._bytes_since_index = 0

    # -- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        """Trust the log; check the index files and recompute the state from the index tail.

        Raises `CorruptIndexError` if an index is missing or unsound (unsorted, an entry past the
        end of the log, a last offset entry that is not a batch boundary): the caller then runs
        `recover`.
        """
        self.offset_index.load()
        self.time_index.load()
        keys, positions = self.offset_index.keys, self.offset_index.values
        if positions and positions[-1] >= self.size:
            raise CorruptIndexError(f"{self.offset_index.path}: entry past the end of the log")
        try:
            if positions and self._header(positions[-1]).last_offset != self.base_offset + keys[-1]:
                raise CorruptIndexError(f"{self.offset_index.path}: last entry is not a batch")
            self._load_tail()
        except LogError as e:
            raise CorruptIndexError(f"{self.offset_index.path}: {e}") from e
        times = self.time_index
        if times and (times.keys[0] < 0 or self.base_offset + times.values[-1] >= self.next_offset):
            raise CorruptIndexError(f"{times.path}: entry outside the segment")

    def _load_tail(self) -> None:
        """State from the last index entries plus the batches after them (at most about
        index.interval.bytes of headers): the time index's last entry covers everything before."""
        self._reset_state()
        if self.size == 0:
            return
        self.rolling_timestamp = self._header(0).max_timestamp
        if self.time_index:
            self.max_timestamp = self.time_index.keys[-1]
            self.offset_of_max_timestamp = self.base_offset + self.time_index.values[-1]
        positions = self.offset_index.values
        for info in self.headers_from(positions[-1] if positions else 0):
            self._advance(info)

    def recover(self) -> int:
        """Check every batch (framing, CRC, increasing offsets), rebuild both indexes, and cut the
        log at the first torn or corrupt batch. Returns the number of bytes cut. Counts the
        control batches kept in `control_batches` (recovery.py: transaction indexes to rebuild);
        the transaction index itself is left to the caller."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_state()
        self.control_batches = 0
        file_size = os.fstat(self._fd).st_size
        pos, chunk, chunk_pos = 0, memoryview(b""), 0
        while pos < file_size:
            rel = pos - chunk_pos
            if len(chunk) - rel >= LOG_OVERHEAD:
                size = batch_size_at(chunk, rel)
                if not 0 < size <= file_size - pos:
                    break  # a torn write or a garbage length
                fits = rel + size <= len(chunk)
            else:
                size, fits = _RECOVERY_CHUNK, False
            if not fits:
                chunk = memoryview(os.pread(self._fd, max(_RECOVERY_CHUNK, size), pos))
                chunk_pos, rel = pos, 0
            try:
                info = check_batch(chunk, rel)
            except LogError:
                break
            if info.base_offset < self.next_offset:
                break  # offsets must increase: garbage that happens to carry a valid CRC
            info = info._replace(position=pos)
            self._advance(info)
            self._index(info)
            self.control_batches += info.is_control
            pos += info.size
        cut = file_size - pos
        if cut:
            os.ftruncate(self._fd, pos)
        self.size = pos
        self.offset_index.flush()
        self.time_index.flush()
        return cut

    # -- appending ---------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: list[BatchInfo]) -> None:
        """Write whole batches (``batches`` positions are relative to ``data``) and index them.
        The index files an entry may go to are opened first: running out of descriptors then
        fails the append before anything is written."""
        start = self.size
        if self._bytes_since_index + len(data) > self._interval:
            self.offset_index.open_for_append()
            self.time_index.open_for_append()
        _write_all(self._fd, data, start)
        for info in batches:
            info = info._replace(position=start + info.position)
            self._advance(info)
            self._index(info)
        self.size = start + len(data)

    def _advance(self, info: BatchInfo) -> None:
        """Account for a batch now at the end of the segment."""
        last = info.base_offset + info.last_offset_delta
        if info.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = info.max_timestamp, last
        if self.rolling_timestamp is None:
            self.rolling_timestamp = info.max_timestamp
        self.next_offset = last + 1

    def _index(self, info: BatchInfo) -> None:
        """Kafka's sparse indexing: an entry for a batch once more than index.interval.bytes were
        appended since the last one. Offset entries map the batch's last offset to its position;
        time entries record the max timestamp so far when it grew."""
        if self._bytes_since_index > self._interval:
            self.offset_index.append(info.last_offset - self.base_offset, info.position)
            self._maybe_index_time()
            self._bytes_since_index = 0
        self._bytes_since_index += info.size

    def _maybe_index_time(self) -> None:
        if self.max_timestamp > self.time_index.last_key(NO_TIMESTAMP):
            rel = self.offset_of_max_timestamp - self.base_offset
            self.time_index.append(self.max_timestamp, rel)

    def seal(self) -> None:
        """The segment stops being the active one: put its max timestamp in the time index (as
        Kafka does) so a reopen knows it without a scan, and close the index writers."""
        self._maybe_index_time()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    # -- reading -----------------------------------------------------------------------------

    def _header(self, pos: int) -> BatchInfo:
        head = os.pread(self._fd, HEADER_SIZE, pos)
        if len(head) < HEADER_SIZE:
            raise LogError(ErrorCode.corrupt_message, f"{self.path}: torn batch header at {pos}")
        info = header_at(head, 0)
        if info.size < HEADER_SIZE:
            raise LogError(ErrorCode.corrupt_message, f"{self.path}: bad batch length at {pos}")
        return info._replace(position=pos)

    def headers_from(self, pos: int) -> Iterator[BatchInfo]:
        """Headers of the batches from byte ``pos`` (a batch start) to the end of the segment."""
        while pos < self.size:
            info = self._header(pos)
            yield info
            pos += info.size

    def scan_headers(self, pos: int = 0) -> Iterator[BatchInfo]:
        """`headers_from` for long walks (rebuilding state from the log): reads the file in
        64 KiB windows, so many small batches cost one read rather than one each, and a batch
        larger than a window costs one window read. Records are never decoded."""
        window, window_pos = b"", pos
        while pos < self.size:
            rel = pos - window_pos
            if rel + HEADER_SIZE > len(window):
                window = os.pread(self._fd, max(_SCAN_WINDOW, HEADER_SIZE), pos)
                window_pos, rel = pos, 0
                if len(window) < HEADER_SIZE:
                    raise LogError(
                        ErrorCode.corrupt_message, f"{self.path}: torn batch header at {pos}"
                    )
            info = header_at(window, rel)
            if info.size < HEADER_SIZE:
                raise LogError(ErrorCode.corrupt_message, f"{self.path}: bad batch length at {pos}")
            yield info._replace(position=pos)
            pos += info.size

    def translate(self, offset: int) -> BatchInfo | None:
        """The header of the batch holding ``offset`` (the first whose last offset is >= it)."""
        if offset >= self.next_offset:
            return None
        i = self.offset_index.floor(offset - self.base_offset)
        for info in self.headers_from(self.offset_index.values[i] if i >= 0 else 0):
            if info.last_offset >= offset:
                return info
        return None

    def read_end(self, first: BatchInfo, max_end: int, upper_bound: int) -> int:
        """Where a read starting with batch ``first`` stops: before the first batch that would end
        past ``max_end`` or whose base offset is >= ``upper_bound``. The index proves that every
        batch before an entry (last offset < upper_bound, position <= max_end) fits, so the walk
        starts there and reads only a few headers, however large the read."""
        keys, positions = self.offset_index.keys, self.offset_index.values
        n = min(bisect_right(positions, max_end), bisect_left(keys, upper_bound - self.base_offset))
        pos = max(first.position, positions[n - 1]) if n else first.position
        for info in self.headers_from(pos):
            if info.base_offset >= upper_bound or info.position + info.size > max_end:
                return info.position
        return self.size

    def read(self, start: int, end: int) -> bytes:
        return os.pread(self._fd, end - start, start) if end > start else b""

    def find_by_timestamp(
        self, timestamp: int, min_offset: int, inflation_limit: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``min_offset`` whose timestamp is
        >= ``timestamp`` (Kafka's LogSegment.findOffsetByTimestamp). Decodes only the records of
        the first batch whose max timestamp qualifies, inflated to at most ``inflation_limit``
        bytes (raises `RecordError` if they do not decode)."""
        i = self.time_index.floor(timestamp)
        start = self.base_offset + self.time_index.values[i] if i >= 0 else self.base_offset
        first = self.translate(max(start, min_offset))
        if first is None:
            return None
        for info in self.headers_from(first.position):
            if info.max_timestamp >= timestamp:
                batch = self.read(info.position, info.position + info.size)
                for offset, ts in record_timestamps(batch, inflation_limit):
                    if ts >= timestamp and offset >= min_offset:
                        return offset, ts
        return None

    def largest_timestamp(self) -> int:
        """Max timestamp, or the file's mtime when no batch has one (Kafka's retention clock)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    # -- truncation and lifecycle ------------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Drop the batch holding ``offset`` and all after it. Returns the number of bytes cut."""
        first = self.translate(offset)
        if first is None:
            return 0
        cut = self.size - first.position
        os.ftruncate(self._fd, first.position)
        self.size = first.position
        self.offset_index.truncate(bisect_left(self.offset_index.values, first.position))
        rel_end = first.base_offset - self.base_offset
        self.time_index.truncate(bisect_left(self.time_index.values, rel_end))
        self.txn_index.truncate_to(first.base_offset)
        if self.size == 0:
            self.created_ms = now_ms
        self._load_tail()
        return cut

    def fsync(self) -> None:
        os.fsync(self._fd)
        self.offset_index.fsync()
        self.time_index.fsync()
        self.txn_index.fsync()

    def close(self) -> None:
        """Close its files (again: nothing; recovery closes what it opened on any failure)."""
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        for path in (self.path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            path.unlink(missing_ok=True)
