"""A broker's log directories (Kafka's `log.dirs`): where each partition's log lives, which
directories are online, and moving a log from one directory to another.

Every partition log is a directory ``<topic>-<partition>`` in exactly one log directory. A new
one goes to the online directory holding the fewest logs (Kafka's LogManager.nextLogDirs), or
to the one an AlterReplicaLogDirs named beforehand; at start-up each log is found in whichever
directory holds it.

The broker's state store (recovery points, log start offsets, leader epochs, producer
snapshots: see state_store.py) lives in ``<first log dir>/.state``, where a single-directory
broker always kept it. That first directory plays the part of Kafka's ``metadata.log.dir``:
when it fails the broker stops (as Kafka's does), while the failure of any other directory
only takes the logs in it offline.

Moving a log (AlterReplicaLogDirs): its files are copied into ``<topic>-<partition>.<id>-future``
in the destination while the log keeps serving, again and again until little changed since the
previous round; then, between two requests (no append can land meanwhile), the log is closed,
the last changes are copied, the source is renamed ``<...>.<id>-delete`` and the copy renamed
into place, and the log is reopened there. The state store keys a log by topic id and
partition, not by directory, so its state stays valid as the files are identical. On start-up
an ``-future`` copy whose source is gone (a crash between the two renames) is the log and is
renamed into place; any other ``-future`` copy is an unfinished move and is deleted, as are
``-delete`` directories.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("rafka.logdirs")

STATE_DIR = ".state"
FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
# The files of a log that a move copies (segments and their indexes, the topic id file);
# the cleaner's temporary files (.cleaned, .swap) are left behind.
_LOG_FILE = re.compile(r"^(\d{20}\.(log|index|timeindex|txnindex)|partition\.metadata)$")
_COPY_CHUNK = 1 << 20
# A move stops copying in the background once a round finds less than this left to copy: the
# rest is copied with the log closed, so this bounds how long requests wait.
FINAL_ROUND_BYTES = 4 << 20
MAX_ROUNDS = 20


class LogDirFailure(OSError):
    """A log directory failed (an I/O error in it); its logs are offline on this broker."""


@dataclass(eq=False)
class LogDir:
    """One configured log directory."""

    path: Path  # absolute
    error: str = ""  # why it is offline; empty while it is online

    @property
    def online(self) -> bool:
        return not self.error

    def usage(self) -> tuple[int, int]:
        """(total, usable) bytes of the volume it is on; (-1, -1) if that cannot be read."""
        try:
            usage = shutil.disk_usage(self.path)
        except OSError:
            return -1, -1
        return usage.total, usage.free


def parse_log_dirs(value: str) -> list[Path]:
    """The directories of a `log.dirs` value (comma-separated), absolute, each once."""
    paths = [Path(p.strip()).absolute() for p in value.split(",") if p.strip()]
    if not paths:
        raise ValueError("log.dirs names no directory")
    return list(dict.fromkeys(paths))


def future_name(name: str) -> str:
    return f"{name}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def delete_name(name: str) -> str:
    return f"{name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"


def _base_name(name: str, suffix: str) -> str:
    """``<topic>-<partition>`` of a ``<topic>-<partition>.<id><suffix>`` directory name."""
    return name[: -len(suffix)].rpartition(".")[0]


class LogDirs:
    """The configured directories, their state, and where each log is."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.dirs = [LogDir(p) for p in paths]
        self.preferred: dict[str, LogDir] = {}  # AlterReplicaLogDirs before the log exists

    @classmethod
    def from_config(cls, value: str) -> LogDirs:
        return cls(parse_log_dirs(value))

    @property
    def state_dir(self) -> Path:
        """Where the broker's state store lives (see the module docstring)."""
        return self.dirs[0].path / STATE_DIR

    @property
    def state_log_dir(self) -> LogDir:
        return self.dirs[0]

    def online(self) -> list[LogDir]:
        return [d for d in self.dirs if d.online]

    def get(self, path: str) -> LogDir | None:
        """The configured directory at ``path`` (absolute, as clients name it), or None."""
        wanted = Path(path).absolute()
        return next((d for d in self.dirs if d.path == wanted), None)

    def create_all(self) -> None:
        """Create missing directories at start-up; one that cannot be is offline from the start
        (a broker with its first directory unusable cannot start)."""
        for d in self.dirs:
            try:
                d.path.mkdir(parents=True, exist_ok=True)
                if not os.access(d.path, os.W_OK | os.X_OK):
                    raise PermissionError(f"{d.path} is not writable")
            except OSError as e:
                if d is self.state_log_dir:
                    raise
                self.fail(d, e)

    def fail(self, d: LogDir, error: BaseException) -> bool:
        """Mark ``d`` offline; False if it already was."""
        if not d.online:
            return False
        d.error = str(error) or type(error).__name__
        log.error(
            "log directory %s failed (%s): its partitions are offline on this broker and their "
            "leadership moves to other replicas. Check the disk; once it is fixed (or the "
            "directory removed from log.dirs) restart the broker",
            d.path,
            d.error,
        )
        return True

    def dir_of(self, log_dir: Path) -> LogDir | None:
        """The configured directory a log directory is in."""
        parent = log_dir.parent
        return next((d for d in self.dirs if d.path == parent), None)

    def locate(self, name: str) -> LogDir | None:
        """The online directory holding log ``name`` (``<topic>-<partition>``), or None."""
        for d in self.online():
            if (d.path / name).is_dir():
                return d
        return None

    def choose(self, name: str, counts: Callable[[LogDir], int]) -> LogDir:
        """Where a new log goes: the directory an AlterReplicaLogDirs asked for, else the online
        directory with the fewest logs (``counts``), the first one on a tie."""
        preferred = self.preferred.pop(name, None)
        if preferred is not None and preferred.online:
            return preferred
        online = self.online()
        if not online:
            raise LogDirFailure(f"no log directory is online (log.dirs: {self.describe()})")
        if len(online) == 1:
            return online[0]  # counting walks every log: not for each of a 1,000-partition topic
        return min(online, key=counts)

    def describe(self) -> str:
        return ",".join(str(d.path) for d in self.dirs)

    def log_names(self, d: LogDir) -> list[str]:
        """Names of the (current) logs in ``d``."""
        try:
            return [
                e.name
                for e in os.scandir(d.path)
                if e.is_dir()
                and not e.name.startswith(".")
                and "-" in e.name
                and not e.name.endswith((FUTURE_SUFFIX, DELETE_SUFFIX))
            ]
        except OSError:
            return []

    def clean_up_moves(self) -> None:
        """At start-up, finish or drop what interrupted moves left (module docstring)."""
        for d in self.online():
            try:
                entries = sorted(os.scandir(d.path), key=lambda e: e.name)
            except OSError as e:
                self.fail(d, e)
                continue
            for entry in entries:
                path = Path(entry.path)
                if entry.name.endswith(DELETE_SUFFIX):
                    log.info("deleting %s, left by a finished log move", path)
                    shutil.rmtree(path, ignore_errors=True)
                elif entry.name.endswith(FUTURE_SUFFIX):
                    name = _base_name(entry.name, FUTURE_SUFFIX)
                    if self.locate(name) is None:
                        log.warning(
                            "%s: a log move was interrupted after its copy completed; it is the "
                            "log of %s now",
                            path,
                            name,
                        )
                        path.rename(d.path / name)
                    else:
                        log.warning(
                            "deleting %s: a move of %s to this directory was interrupted; "
                            "run AlterReplicaLogDirs again to move it",
                            path,
                            name,
                        )
                        shutil.rmtree(path, ignore_errors=True)


# -- copying a log to another directory ---------------------------------------------------------

FileStat = tuple[int, int, int]  # inode, size, mtime (ns)
Listing = dict[str, FileStat]


def list_log_files(directory: Path) -> Listing:
    """The files of a log a move copies, with what tells whether one changed."""
    found: Listing = {}
    for entry in os.scandir(directory):
        if _LOG_FILE.match(entry.name):
            st = entry.stat()
            found[entry.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return found


def _copy_from(name: str, stat: FileStat, done: FileStat | None, appends_only: bool) -> int:
    """Where the copy of a changed file resumes: after what was copied of a segment's log that
    only grew by appends since (``appends_only``: the log was not truncated nor compacted
    meanwhile), else at 0."""
    grown = done is not None and done[0] == stat[0] and done[1] <= stat[1]
    return done[1] if appends_only and grown and done and name.endswith(".log") else 0


def pending_bytes(listing: Listing, copied: Listing, appends_only: bool) -> int:
    """How much a round would copy: the files that changed since they were copied."""
    return sum(
        stat[1] - _copy_from(name, stat, copied.get(name), appends_only)
        for name, stat in listing.items()
        if copied.get(name) != stat
    )


def copy_round(
    source: Path, dest: Path, listing: Listing, copied: Listing, appends_only: bool
) -> None:
    """Bring ``dest`` to ``listing`` (a listing of ``source``): copy the files that changed,
    delete those gone. Updates ``copied``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in list(copied):
        if name not in listing:
            (dest / name).unlink(missing_ok=True)
            del copied[name]
    for name, stat in listing.items():
        done = copied.get(name)
        if done != stat:
            start = _copy_from(name, stat, done, appends_only)
            _copy_range(source / name, dest / name, start, stat[1])
            copied[name] = stat


def _copy_range(src: Path, dst: Path, start: int, end: int) -> None:
    """``dst`` becomes ``src``'s bytes [0, end), of which [0, start) it already holds."""
    fin = os.open(src, os.O_RDONLY)
    try:
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fout, start)
            pos = start
            while pos < end:
                chunk = os.pread(fin, min(_COPY_CHUNK, end - pos), pos)
                if not chunk:
                    break  # the source shrank: the next round (or the final one) copies it whole
                os.pwrite(fout, chunk, pos)
                pos += len(chunk)
        finally:
            os.close(fout)
    finally:
        os.close(fin)


def fsync_tree(directory: Path, names: Iterable[str]) -> None:
    """fsync the copied files and the directory, before the copy replaces the source."""
    for name in names:
        fd = os.open(directory / name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
