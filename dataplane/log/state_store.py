"""Broker-local crash-safe state: one RocksDB per broker (via rocksdict), under its log dir.

It holds what Kafka keeps in small checkpoint files next to the logs (recovery points, log start
offsets, leader-epoch checkpoints, the clean-shutdown marker) and whatever else the broker needs to
remember across restarts. Keys are strings, conventionally ``<owner>/<partition>/<name>``, so that
everything about a removed partition goes with one `delete_prefix`.

Durability: every write goes through RocksDB's write-ahead log before the call returns. By default
the WAL is *not* fsynced (``sync=False``): the write sits in the OS page cache, which survives a
kill -9 of the broker but not a power loss - the same promise the partition logs make for their
data under Kafka's default flush settings. ``sync=True`` fsyncs the WAL on every write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast, overload

from rocksdict import Options, Rdict, WriteOptions

_INT = 8  # ints are stored as 8-byte big-endian signed
# Table files RocksDB keeps open at most (its max_open_files; Kafka has no such store). Its
# default, -1, keeps every table file open for the life of the store, each on a descriptor the
# broker needs for segments and connections. The store holds a few small keys per partition: a
# few table files, far under this bound, so it costs nothing in practice; past it (a compaction
# backlog of many small files) RocksDB closes the least used and reopens them when read.
MAX_OPEN_FILES = 256


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        raise ValueError("a prefix of only 0xff bytes has no upper bound")
    return stripped[:-1] + bytes([stripped[-1] + 1])


class StateStore:
    """Small typed helpers over a raw-bytes RocksDB. Thread-safe (RocksDB is)."""

    def __init__(self, path: Path, *, sync: bool = False) -> None:
        path.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_max_open_files(MAX_OPEN_FILES)
        self._db = Rdict(str(path), options)
        write_options = WriteOptions()
        write_options.sync = sync
        self._db.set_write_options(write_options)

    def get_bytes(self, key: str) -> bytes | None:
        return self._db.get(key.encode())

    def put_bytes(self, key: str, value: bytes) -> None:
        self._db.put(key.encode(), value)

    @overload
    def get_int(self, key: str) -> int | None: ...
    @overload
    def get_int(self, key: str, default: int) -> int: ...
    def get_int(self, key: str, default: int | None = None) -> int | None:
        raw = self.get_bytes(key)
        return default if raw is None else int.from_bytes(raw, "big", signed=True)

    def put_int(self, key: str, value: int) -> None:
        self.put_bytes(key, value.to_bytes(_INT, "big", signed=True))

    def get_json(self, key: str, default: Any = None) -> Any:
        raw = self.get_bytes(key)
        return default if raw is None else json.loads(raw)

    def put_json(self, key: str, value: Any) -> None:
        self.put_bytes(key, json.dumps(value, separators=(",", ":")).encode())

    def delete(self, key: str) -> None:
        self._db.delete(key.encode())

    def scan_prefix(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        """(key, value) of every key starting with ``prefix``, in key order."""
        start = prefix.encode()
        # rocksdict's stubs type the keys of its pickling mode; in raw_mode they are bytes.
        items = cast(Iterator[tuple[bytes, bytes]], self._db.items(from_key=start))
        for key, value in items:
            if not key.startswith(start):
                return
            yield key.decode(), value

    def delete_prefix(self, prefix: str) -> None:
        """Remove every key starting with ``prefix`` (one range tombstone)."""
        start = prefix.encode()
        self._db.delete_range(start, _prefix_end(start))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
