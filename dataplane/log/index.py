"""Sparse segment indexes: Kafka's ``.index`` (offset -> position) and ``.timeindex`` files.

Both are append-only lists of fixed-size big-endian entries sorted by key, in Kafka's file format.
Kafka memory-maps them; here the entries live in two compact arrays (one entry per
``index.interval.bytes`` of log, 8 or 12 bytes each), lookups are a C-level ``bisect``, and new
entries go to the file through a buffered writer. The files are a cache of what the log says:
recovery rebuilds them for every segment it scans, and a file that fails the sanity checks of
`SparseIndex.load` is rebuilt too. They are fsynced with their segment on roll and clean close.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO


class CorruptIndexError(Exception):
    """An index file that cannot be trusted (missing, torn or inconsistent): rebuild it."""


class SparseIndex:
    """Entries (key, value) with strictly increasing keys and non-decreasing values."""

    def __init__(self, path: Path, entry: struct.Struct, key_type: str, value_type: str) -> None:
        self.path = path
        self._entry = entry
        self.keys = array(key_type)
        self.values = array(value_type)
        self._file: BinaryIO | None = None  # opened by the first append

    def __len__(self) -> int:
        return len(self.keys)

    def load(self) -> None:
        """Read the file; raise `CorruptIndexError` if it is missing or not sane."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise CorruptIndexError(f"{self.path}: missing") from None
        if len(data) % self._entry.size:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a whole entry count")
        entries = list(self._entry.iter_unpack(data))
        if any(a[0] >= b[0] or a[1] > b[1] for a, b in pairwise(entries)):
            raise CorruptIndexError(f"{self.path}: entries out of order")
        self.keys = array(self.keys.typecode, [k for k, _ in entries])
        self.values = array(self.values.typecode, [v for _, v in entries])

    def floor(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``, or -1."""
        return bisect_right(self.keys, key) - 1

    def last_key(self, default: int) -> int:
        return self.keys[-1] if self.keys else default

    def append(self, key: int, value: int) -> None:
        self.open_for_append()  # first: a failed open leaves the index as it was
        assert self._file is not None
        self._file.write(self._entry.pack(key, value))
        self.keys.append(key)
        self.values.append(value)

    def open_for_append(self) -> None:
        """Open the file's writer (kept open while the segment is active), if not yet."""
        if self._file is None:
            self._file = open(self.path, "ab")  # noqa: SIM115 - closed by `close`

    def reset(self) -> None:
        """No entries, and an empty file (a new segment, or a rebuild about to start)."""
        self.close()
        del self.keys[:]
        del self.values[:]
        self.path.write_bytes(b"")

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and in the file."""
        self.close()
        del self.keys[count:]
        del self.values[count:]
        os.truncate(self.path, count * self._entry.size)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def fsync(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
        else:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Flush and close the file; the entries stay readable and a later append reopens it."""
        if self._file is not None:
            self._file.close()
            self._file = None


def offset_index(path: Path) -> SparseIndex:
    """``.index``: relative offset u32 -> byte position u32 of a batch (Kafka's OffsetIndex)."""
    return SparseIndex(path, struct.Struct(">II"), "I", "I")


def time_index(path: Path) -> SparseIndex:
    """``.timeindex``: max timestamp i64 -> relative offset u32 (Kafka's TimeIndex)."""
    return SparseIndex(path, struct.Struct(">qI"), "q", "I")
