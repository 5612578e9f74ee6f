"""AlterReplicaLogDirs on this broker: move a replica's log to another log directory while it
serves (Kafka's future log and ReplicaAlterLogDirsThread; how the copy works is in
dataplane/log/log_dirs.py).

A move copies in rounds on a worker thread; the final round runs on the event loop with the
log closed, between two requests, so no append, truncation or read sees a log half moved. A
replica not hosted here yet gets its directory remembered and is created there (Kafka's
preferred log dir) and the request answers REPLICA_NOT_AVAILABLE, as Kafka's does.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from dataplane.log import PartitionLog
from dataplane.log.log_dirs import (
    FINAL_ROUND_BYTES,
    MAX_ROUNDS,
    Listing,
    LogDir,
    copy_round,
    delete_name,
    fsync_tree,
    future_name,
    list_log_files,
    pending_bytes,
)
from dataplane.protocol.errors import ErrorCode
from dataplane.replica.producer_state import ProducerStateManager

if TYPE_CHECKING:
    from dataplane.replica.manager import ReplicaManager
    from dataplane.replica.partition import Partition

log = logging.getLogger("rafka.logdirs")

Key = tuple[str, int]


@dataclass(eq=False)
class Move:
    """One replica being moved: where its copy (the future log) is and how far it got."""

    partition: Partition
    dest: LogDir
    future_dir: Path
    copied: Listing = field(default_factory=dict)
    cancelled: bool = False

    def offset_lag(self) -> int:
        """Kafka's future-log lag: the current log end minus the copy's, here the offsets
        from the first segment not yet copied as it is now (0 once all are)."""
        plog = self.partition.log
        try:
            listing = list_log_files(plog.directory)
        except OSError:
            return -1
        for name in sorted(n for n in listing if n.endswith(".log")):
            if self.copied.get(name) != listing[name]:
                return max(plog.log_end_offset - int(name[:20]), 0)
        return 0

    @property
    def size(self) -> int:
        return sum(stat[1] for name, stat in self.copied.items() if name.endswith(".log"))


class LogMoves:
    """The moves of one broker's replicas between its log directories."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas
        self.moves: dict[Key, Move] = {}
        self._task_group: anyio.abc.TaskGroup | None = None

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            await anyio.sleep_forever()

    def request(self, topic: str, index: int, path: str) -> ErrorCode:
        """AlterReplicaLogDirs for one partition (Kafka's ReplicaManager.alterReplicaLogDirs):
        LOG_DIR_NOT_FOUND (not one of log.dirs), KAFKA_STORAGE_ERROR (that directory or the
        replica is offline), REPLICA_NOT_AVAILABLE (not hosted here yet: it will be created
        there), else NONE once the move is started (or the replica is already there)."""
        replicas = self._replicas
        dest = replicas.log_dirs.get(path)
        if dest is None:
            log.warning(
                "AlterReplicaLogDirs %s-%d: %s is not one of log.dirs (%s)",
                topic,
                index,
                path,
                replicas.log_dirs.describe(),
            )
            return ErrorCode.log_dir_not_found
        if not dest.online or (topic, index) in replicas.offline:
            return ErrorCode.kafka_storage_error
        key = (topic, index)
        move = self.moves.get(key)
        if move is not None and move.dest is not dest:
            move.cancelled = True  # a move elsewhere: it stops, this one replaces it
            self.moves.pop(key)
        partition = replicas.partitions.get(key)
        if partition is None:
            replicas.log_dirs.preferred[f"{topic}-{index}"] = dest
            return ErrorCode.replica_not_available
        if partition.log.directory.parent == dest.path or key in self.moves:
            return ErrorCode.none
        if self._task_group is None:
            return ErrorCode.replica_not_available  # the broker is still starting
        name = partition.log.directory.name
        move = Move(partition, dest, dest.path / future_name(name))
        self.moves[key] = move
        log.info("moving %r from %s to %s", partition, partition.log.directory.parent, dest.path)
        self._task_group.start_soon(self._move, key, move)
        return ErrorCode.none

    async def _move(self, key: Key, move: Move) -> None:
        try:
            done = await self._copy(key, move)
        except OSError as e:
            log.error(
                "moving %r to %s failed: %s; it stays where it is (check the disk of %s and "
                "run AlterReplicaLogDirs again)",
                move.partition,
                move.dest.path,
                e,
                move.dest.path,
            )
            done = False
        finally:
            if self.moves.get(key) is move:
                del self.moves[key]
        if not done:
            await anyio.to_thread.run_sync(shutil.rmtree, move.future_dir, True)

    def _current(self, key: Key, move: Move) -> bool:
        """The move still applies: not cancelled, the replica still here and online."""
        partition = self._replicas.partitions.get(key)
        return (
            not move.cancelled
            and partition is move.partition
            and partition.log.failure is None
            and move.dest.online
        )

    async def _copy(self, key: Key, move: Move) -> bool:
        """Copy rounds in the background, then the final round and the swap. False if the
        move no longer applies."""
        rewrites = -1
        for _ in range(MAX_ROUNDS):
            if not self._current(key, move):
                return False
            plog = move.partition.log
            appends_only = plog.rewrites == rewrites
            rewrites = plog.rewrites
            listing = list_log_files(plog.directory)
            if pending_bytes(listing, move.copied, appends_only) <= FINAL_ROUND_BYTES:
                break
            await anyio.to_thread.run_sync(
                copy_round, plog.directory, move.future_dir, listing, move.copied, appends_only
            )
        if not self._current(key, move):
            return False
        self._swap(move, appends_only=move.partition.log.rewrites == rewrites)
        return True

    def _swap(self, move: Move, appends_only: bool) -> None:
        """The final round, on the event loop: close, copy what changed, rename, reopen."""
        partition = move.partition
        old = partition.log
        source = old.directory
        partition.producers.snapshot()
        old.on_failure = None  # from here on an error is the move's, not the directory's
        old.close()
        try:
            listing = list_log_files(source)
            copy_round(source, move.future_dir, listing, move.copied, appends_only)
            fsync_tree(move.future_dir, listing)
            source.rename(source.parent / delete_name(source.name))
        except OSError:
            self._reopen(partition, source, old)  # the copy failed: it stays where it was
            raise
        target = move.dest.path / source.name
        move.future_dir.rename(target)
        self._reopen(partition, target, old)
        log.info("moved %r to %s", partition, move.dest.path)
        for stale in source.parent.glob(f"{source.name}.*-delete"):
            shutil.rmtree(stale, ignore_errors=True)

    def _reopen(self, partition: Partition, directory: Path, old: PartitionLog) -> None:
        """Open the replica's log in ``directory`` in place of the closed ``old``; if that
        fails, its directory fails (the replica goes offline)."""
        replicas = self._replicas
        try:
            plog = PartitionLog.open(directory, old.config, old.store, old.key)
        except OSError as e:
            old.on_failure = replicas.log_failed
            old.fail(e)
            return
        plog.on_failure = replicas.log_failed
        partition.log = plog
        partition.producers = ProducerStateManager.load(
            plog, replicas.config.producer_id_expiration_ms
        )
        partition.producers.on_high_watermark(partition.high_watermark)
