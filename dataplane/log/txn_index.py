"""Per-segment transaction index: ``<baseOffset:020d>.txnindex`` (Kafka's TransactionIndex).

One entry per aborted transaction, in the segment that holds its ABORT marker, appended when
the marker is applied to the producer state. Entries are 34 bytes, in Kafka's file format::

    version i16 (0) | producerId i64 | firstOffset i64 | lastOffset i64 | lastStableOffset i64

``lastOffset`` is the marker's offset; ``lastStableOffset`` is the partition's first unstable
offset once the transaction ended (the first offset of the oldest other open transaction, or
``lastOffset + 1``): a search that meets an entry whose LSO is at or past its upper bound knows
that no later entry can start below that bound, and stops (`collect`).

A read_committed fetch gets from these the aborted transactions overlapping what it reads, so
the consumer drops their records without the broker decoding any. The file is written unbuffered
(entries are rare), so a killed broker loses none; it is fsynced with its segment. Entries are
kept in memory once read; most segments have no file at all.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from pathlib import Path
from typing import NamedTuple

from dataplane.log.index import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions of one segment, ordered by last offset."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self._last_offsets: list[int] = []
        self._fd: int | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry (reads the file the first time). Raises `CorruptIndexError`."""
        if self._entries is None:
            self._entries = self._read()
            self._last_offsets = [e.last_offset for e in self._entries]
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a whole entry count")
        entries = []
        last = -1
        for version, *fields in _ENTRY.iter_unpack(data):
            if version != _VERSION:
                raise CorruptIndexError(f"{self.path}: unknown entry version {version}")
            txn = AbortedTxn(*fields)
            if txn.last_offset <= last or txn.first_offset > txn.last_offset:
                raise CorruptIndexError(f"{self.path}: entries out of order")
            last = txn.last_offset
            entries.append(txn)
        return entries

    def sanity_check(self) -> None:
        """Read and check the file now (most segments have none: one failed open), so that a
        corrupt one is rebuilt at load rather than failing a fetch. Raises `CorruptIndexError`."""
        self._entries = None
        _ = self.entries

    @property
    def last_offset(self) -> int:
        """Last offset of the last entry, -1 if none."""
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry after the others (Kafka refuses an out-of-order one too)."""
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted txn ending at {txn.last_offset} does not follow "
                f"{entries[-1].last_offset}"
            )
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, _ENTRY.pack(_VERSION, *txn))
        entries.append(txn)
        self._last_offsets.append(txn.last_offset)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries whose [first, last] offsets intersect [fetch_offset, upper_bound), and whether
        the search is complete (an entry's LSO reached ``upper_bound``: Kafka's
        TransactionIndex.collectAbortedTxns)."""
        entries = self.entries
        found: list[AbortedTxn] = []
        # Entries ending before fetch_offset cannot intersect, but their LSO may complete the
        # search: only skip those whose LSO is below the bound too (LSOs grow with entries).
        start = bisect_left(self._last_offsets, fetch_offset)
        if start and entries[start - 1].last_stable_offset >= upper_bound:
            return found, True
        for txn in entries[start:]:
            if txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (the log was cut there)."""
        entries = self.entries
        keep = bisect_left(self._last_offsets, offset)
        if keep == len(entries):
            return
        self.close()
        del entries[keep:]
        del self._last_offsets[keep:]
        if keep:
            os.truncate(self.path, keep * ENTRY_SIZE)
        else:
            self.path.unlink(missing_ok=True)

    def reset(self) -> None:
        """No entries and no file (a new segment, or a rebuild about to start)."""
        self.close()
        self._entries, self._last_offsets = [], []
        self.path.unlink(missing_ok=True)

    def fsync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Close the file; the entries stay readable and a later append reopens it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
