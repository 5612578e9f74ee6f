"""Durable Raft storage for pysyncobj: the log, the term and vote, and the state dump.

Raft may only answer (acknowledge entries, grant a vote) once what the answer reflects is on
stable storage, as KRaft does; otherwise a power loss of a majority of meta nodes loses
committed metadata. pysyncobj's own storage does not: its journal is an mmap flushed at shutdown,
its term/vote file and state dump are renamed into place unsynced. Here:

- ``DurableJournal``: the Raft log as an append-only file of checksummed records. Appends are
  plain writes; ``sync()`` makes all of them durable with one fdatasync. The caller
  (``meta.raft``) holds back every message until the writes it reflects are synced, and syncs
  once per Raft tick, so a burst of writes costs one sync (group commit).
- the term, vote and commit index (``<log>.meta``) and the state dump are written to a temp
  file, fsynced, renamed over the old one, and the directory fsynced: a crash leaves the old
  file or the new one, never a torn or empty one.
- a torn last record (power lost mid-append) fails its checksum and is cut off at start-up: it
  was never acknowledged.
"""

from __future__ import annotations

import gzip
import io
import logging
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import crc32c
from pysyncobj import pickle
from pysyncobj.journal import FileJournal, Journal

log = logging.getLogger("rafka.meta.journal")

_MAGIC = b"RAFKA-RAFT-LOG-1\n"
# A record: length of what follows the checksum, crc32c of it, index, term, then the command.
_HEADER = struct.Struct("<II")
_POSITION = struct.Struct("<QQ")

T = TypeVar("T")
Entry = tuple[bytes, int, int]  # (command, index, term), as pysyncobj's journals hold them


class JournalError(Exception):
    """The Raft log on disk cannot be used; the message says which file and why."""


class StateDumpError(Exception):
    """The state dump on disk cannot be loaded; the message says which file and why."""


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (a created or renamed file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old content or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _record(entry: Entry) -> bytes:
    command, index, term = entry
    body = _POSITION.pack(index, term) + command
    return _HEADER.pack(len(body), crc32c.crc32c(body)) + body


def read_records(data: bytes) -> Iterator[tuple[int, int, Entry]]:
    """(start offset, end offset, entry) of each intact record of a log file's content, up to
    the first torn or corrupt one."""
    offset = len(_MAGIC)
    while offset + _HEADER.size <= len(data):
        size, crc = _HEADER.unpack_from(data, offset)
        end = offset + _HEADER.size + size
        body = data[offset + _HEADER.size : end]
        if len(body) < size or size < _POSITION.size or crc32c.crc32c(body) != crc:
            return
        index, term = _POSITION.unpack_from(body)
        yield offset, end, (body[_POSITION.size :], index, term)
        offset = end


class DurableJournal(Journal):
    """pysyncobj's Journal interface over a file of checksummed records, synced on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._meta_path = path.with_name(path.name + ".meta")
        self._entries: list[Entry] = []
        self._offsets: list[int] = []  # file offset of each entry's record
        self._meta: dict[str, Any] = {}
        self._meta_dirty = False
        self.dirty = False  # appended or truncated since the last sync()
        if self._meta_path.exists():
            try:
                self._meta = pickle.loads(self._meta_path.read_bytes())
            except Exception as exc:  # damaged: it is written whole, by a rename
                raise JournalError(
                    f"{self._meta_path} (the Raft term and vote) cannot be read ({exc!r})"
                ) from exc
        self._fd = self._open()

    def _open(self) -> int:
        """Open the log, creating it durably, and load its records; cut off a torn tail."""
        if not self.path.exists():
            write_atomically(self.path, _MAGIC)
        fd = os.open(self.path, os.O_RDWR)
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        if not data.startswith(_MAGIC):
            os.close(fd)
            raise JournalError(
                f"{self.path} is not a Rafka Raft log (it does not start with {_MAGIC!r})"
            )
        offset = len(_MAGIC)
        for start, end, entry in read_records(data):
            self._offsets.append(start)
            self._entries.append(entry)
            offset = end
        if offset != len(data):
            log.warning(
                "Raft log %s: cut off %d bytes after its last intact record (a write the node "
                "was stopped in; it was never acknowledged)",
                self.path,
                len(data) - offset,
            )
            os.ftruncate(fd, offset)
            os.fsync(fd)
        self._end = offset
        return fd

    # ---------------------------------------------------------------- the log

    def add(self, command: bytes, idx: int, term: int) -> None:
        record = _record((command, idx, term))
        os.pwrite(self._fd, record, self._end)
        self._entries.append((command, idx, term))
        self._offsets.append(self._end)
        self._end += len(record)
        self.dirty = True

    def deleteEntriesFrom(self, entryFrom: int) -> None:  # pysyncobj's names
        """Drop the entries from position ``entryFrom`` on (a new leader overrides them).

        Synced at once (it is rare): records appended after an unsynced truncation could
        otherwise come back after a crash followed by stale ones of the same length."""
        if entryFrom >= len(self._entries):
            return
        self._end = self._offsets[entryFrom]
        del self._entries[entryFrom:]
        del self._offsets[entryFrom:]
        os.ftruncate(self._fd, self._end)
        self.dirty = True
        self.sync()

    def deleteEntriesTo(self, entryTo: int) -> None:
        """Drop the entries before position ``entryTo``: the state dump now covers them.

        pysyncobj renames the dump into place just before; the directory is fsynced first so
        that the dump is durable before the entries it replaces are gone. The rest of the log
        is rewritten to a new file, swapped in with a rename."""
        fsync_dir(self.path.parent)
        self._rewrite(self._entries[entryTo:])

    def clear(self) -> None:
        self._rewrite([])

    def _rewrite(self, entries: list[Entry]) -> None:
        records = [_record(entry) for entry in entries]
        write_atomically(self.path, _MAGIC + b"".join(records))
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR)
        self._entries = list(entries)
        self.dirty = False  # write_atomically synced them all
        self._offsets = []
        offset = len(_MAGIC)
        for record in records:
            self._offsets.append(offset)
            offset += len(record)
        self._end = offset

    def sync(self) -> bool:
        """Make every append and truncation so far durable; True if there was any."""
        if not self.dirty:
            return False
        os.fdatasync(self._fd)
        self.dirty = False
        return True

    def __getitem__(self, item: Any) -> Any:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    def _destroy(self) -> None:
        self.sync()
        self._store_meta()
        os.close(self._fd)

    # ---------------------------------------------------------------- term, vote, commit index

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        """Durable before pysyncobj sends the vote request or grant that reflects it."""
        self._meta["currentTerm"] = term
        self._meta["votedForNodeId"] = votedForNodeId
        self._store_meta()

    def getCurrentTerm(self) -> int:
        term: int = self._meta.get("currentTerm", 0)
        return term

    def getVotedForNodeId(self) -> Any:
        return self._meta.get("votedForNodeId")

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        """Stored once a second: a lost commit index is learnt again from the leader."""
        if self._meta.get("raftCommitIndex") != raftCommitIndex:
            self._meta["raftCommitIndex"] = raftCommitIndex
            self._meta_dirty = True

    def getRaftCommitIndex(self) -> int:
        index: int = self._meta.get("raftCommitIndex", 1)
        return index

    def onOneSecondTimer(self) -> None:
        if self._meta_dirty:
            self._store_meta()

    def _store_meta(self) -> None:
        write_atomically(self._meta_path, pickle.dumps(self._meta))
        self._meta_dirty = False


def open_journal(path: Path) -> DurableJournal:
    """The Raft log at ``path``; a journal of pysyncobj's own format (``raft.journal``, kept by
    Rafka before the log was made durable) beside it is taken over once, then removed."""
    legacy = path.with_name("raft.journal")
    if path.exists() or not legacy.exists():
        return DurableJournal(path)
    old = FileJournal(str(legacy))
    entries = [old[i] for i in range(len(old))]
    term, voted, commit = old.getCurrentTerm(), old.getVotedForNodeId(), old.getRaftCommitIndex()
    old._destroy()
    journal = DurableJournal(path)
    for entry in entries:
        journal.add(*entry)
    journal.sync()
    journal.setRaftCommitIndex(commit)
    journal.setCurrentTerm(term, voted)  # also stores the commit index
    for name in (legacy.name, legacy.name + ".meta"):
        legacy.with_name(name).unlink(missing_ok=True)
    fsync_dir(path.parent)
    log.info("Took over %d Raft log entries from %s into %s", len(entries), legacy, path)
    return journal


def read_dump(file: Path, decode: Callable[[Any], T]) -> tuple[T, tuple[Any, ...]]:
    """(``decode`` of the consumer data, raft position) of the state dump ``file``, in
    pysyncobj's format (a gzipped pickle of ([sync object data, consumer data], *raft
    position)), made durable first. Raises StateDumpError, naming the file, if it cannot be
    read or decoded: a node must not serve a state without the dump's part of it."""
    try:
        with open(file, "rb") as f:
            os.fsync(f.fileno())
            data = pickle.loads(gzip.decompress(f.read()))
        return decode(data[0][1]), tuple(data[1:])
    except Exception as exc:  # any damage: a torn gzip, a bad pickle or record, an I/O error
        raise StateDumpError(f"the metadata state dump {file} cannot be loaded ({exc!r})") from exc


def dump_codec(
    state: Callable[[], bytes], decode: Callable[[Any], T], load: Callable[[T], None]
) -> tuple[Callable[[str, Any], None], Callable[[str], Any]]:
    """pysyncobj's custom (serializer, deserializer) for the state dump (see ``read_dump``);
    the consumer data is what ``state`` returns, and ``load`` gets it back through ``decode``.

    The serializer writes the temp file pysyncobj then renames, fsynced; the deserializer,
    which pysyncobj calls on start-up and on a dump received from the leader (renamed into
    place unsynced), makes the file and its name durable before loading it. (pysyncobj only
    logs a dump that fails to load: ``meta.raft.MetaRaft`` reads the dump once before it starts
    pysyncobj, and refuses to start on a damaged one; one from the leader that fails to load
    stops the node.)"""

    def serialize(tmp_file: str, position: Any) -> None:
        buffer = io.BytesIO()
        with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=1) as g:
            pickle.dump(([{}, state()], *position), g)
        with open(tmp_file, "wb") as f:
            f.write(buffer.getvalue())
            f.flush()
            os.fsync(f.fileno())

    def deserialize(file: str) -> Any:
        decoded, position = read_dump(Path(file), decode)
        fsync_dir(Path(file).parent)
        load(decoded)
        return position

    return serialize, deserialize
