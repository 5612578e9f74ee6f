"""Which partitions this broker hosts, kept in step with the metadata cache.

A topic change from the watch stream opens (or creates) the local log of every partition this
broker is a replica of, updates roles and epochs, and deletes the logs of partitions that moved
away or whose topic was deleted. Changes are queued as the cache applies them and worked off by
`apply_changes` in slices that yield to the event loop: opening the replicas of a 5,000-partition
topic is seconds of file work (more on a busy disk), and in one piece it would hold up every
request and the broker's heartbeat to the meta service, which then fences the broker.

Log directories (`log.dirs`, log_dirs.py): a log is opened in the directory that holds it, a
new one created in the directory with the fewest logs. An I/O error in a log fails its whole
directory: every replica in it goes offline here (KAFKA_STORAGE_ERROR to clients, no longer
fetched nor led), `report_offline` tells the meta service so that leadership and ISR move to
the other replicas, and the rest of the broker keeps serving (Kafka's handleLogDirFailure). The
failure of the first directory, which holds the broker's state store, stops the broker, as
Kafka's broker stops when its metadata log directory fails.

Running out of file descriptors or memory is no disk failure (errors.out_of_resources): a log
that cannot be opened for it, or that failed for it, is not hosted here for now (reported
offline as above, so its leadership moves) while its directory and every other log stay
online; `rehost` tries it again every few seconds, so it comes back once descriptors are free.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio

from dataplane.config import BrokerConfig
from dataplane.log import LogConfig, PartitionLog, StateStore
from dataplane.log.cleaner import CleaningAborted, CleaningJob
from dataplane.log.errors import out_of_resources, resource_advice
from dataplane.log.log_dirs import LogDir, LogDirFailure, LogDirs
from dataplane.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.fetcher import ReplicaFetchers
from dataplane.replica.log_mover import LogMoves
from dataplane.replica.meta_lease import MetaLease
from dataplane.replica.partition import IsrSubmit, Partition, now_ms
from dataplane.replica.producer_state import ProducerStateManager
from dataplane.topic_configs import effective_topic_configs

log = logging.getLogger("rafka.replicas")

_SLICE_S = 0.02  # file work done between two turns of the event loop while changes apply
_REHOST_S = 5.0  # how often replicas not hosted for want of resources are tried again

_TOPIC_ID_FILE = "partition.metadata"  # same name and purpose as Kafka's (KIP-516)
# What a log's data that does not decode fails with (the cleaner decodes every batch it cleans).
_UNREADABLE = frozenset({ErrorCode.invalid_record, ErrorCode.corrupt_message})


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        store: StateStore,
        cache: MetadataCache,
        submit_isr: IsrSubmit,
        fetchers: ReplicaFetchers,
        log_dirs: LogDirs | None = None,
    ) -> None:
        self.config = config
        self._submit_isr = submit_isr
        self._fetchers = fetchers
        self.node_id = config.node_id
        self.store = store
        self.cache = cache
        self.log_dirs = log_dirs or LogDirs.from_config(config.log_dirs)
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Replicas whose log directory failed: their directory, until they leave this broker.
        self.offline: dict[tuple[str, int], LogDir] = {}
        # Replicas not hosted for want of descriptors or memory: why, until `rehost` opens them.
        self.unhosted: dict[tuple[str, int], str] = {}
        self._offline_changed = anyio.Event()
        self.moves = LogMoves(self)  # AlterReplicaLogDirs
        self._uncleanable: set[tuple[bytes, int]] = set()  # compaction failed (Kafka's too)
        # Called after every leadership change of a local replica (coordinators load/unload).
        self.leadership_listeners: list[Callable[[Partition], None]] = []
        # Whether this broker's lease with the meta service may have lapsed (coordinators stop).
        self.meta_lease = MetaLease(
            config.broker_session_timeout_ms, config.broker_heartbeat_interval_ms
        )
        # (old, new, whether the first snapshot was applied before it), for apply_changes
        self._changes: deque[tuple[TopicInfo | None, TopicInfo | None, bool]] = deque()
        cache.topic_listeners.append(self._queue_change)

    # -- lookups used by handlers --------------------------------------------------------------

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """The local leader replica, or the Kafka error a client expects."""
        return self.readable_partition(topic, index, current_leader_epoch, False)

    def readable_partition(
        self, topic: str, index: int, current_leader_epoch: int, follower_ok: bool
    ) -> Partition:
        """The local replica a client may read (the leader's, or with `follower_ok` a
        follower's, KIP-392), or the Kafka error a client expects."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            self.check_online(topic, index)
            info = self.cache.topics.get(topic)
            if info is None or not 0 <= index < len(info.partitions):
                raise KafkaError(ErrorCode.unknown_topic_or_partition)
            raise KafkaError(ErrorCode.not_leader_or_follower)
        if follower_ok and not partition.is_leader and partition.leader >= 0:
            partition.check_epoch(current_leader_epoch)
        else:
            partition.check_leader(current_leader_epoch)
        return partition

    def check_online(self, topic: str, index: int) -> None:
        """KAFKA_STORAGE_ERROR for a replica whose log directory failed (Kafka's
        HostedPartition.Offline)."""
        failed = self.offline.get((topic, index))
        if failed is not None:
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"{topic}-{index} is offline on broker {self.node_id}: its log directory "
                f"{failed.path} failed",
            )
        if (why := self.unhosted.get((topic, index))) is not None:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"{topic}-{index} is not hosted on broker {self.node_id} for now: {why}",
            )

    # -- reacting to metadata ------------------------------------------------------------------

    def _queue_change(self, old: TopicInfo | None, new: TopicInfo | None) -> None:
        self._changes.append((old, new, self.cache.ready.is_set()))

    async def apply_changes(self) -> None:
        """Apply the queued topic changes in order, giving the event loop a turn after every
        `_SLICE_S` of work (the watch stream applies no newer change meanwhile)."""
        turn_at = time.monotonic() + _SLICE_S
        while self._changes:
            for _ in self._on_topic_change(*self._changes.popleft()):
                if time.monotonic() >= turn_at:
                    await anyio.sleep(0)
                    turn_at = time.monotonic() + _SLICE_S

    def _on_topic_change(
        self, old: TopicInfo | None, new: TopicInfo | None, live: bool
    ) -> Iterator[None]:
        """The work of one change, yielding between partitions; `live`: the change
        came after the first snapshot (a partition at epoch 0 was created since)."""
        if new is None:
            assert old is not None
            for p in old.partitions:
                self._remove(old.name, p.index)
            return
        log_config, min_isr = self._log_settings(new)
        for p in new.partitions:
            yield  # each partition's work is whole before the loop may take a turn
            key = (new.name, p.index)
            if self.node_id not in p.replicas:
                if key in self.partitions:
                    self._remove(new.name, p.index)
                if (self.offline.pop(key, None), self.unhosted.pop(key, None)) != (None, None):
                    self._offline_changed.set()
                continue
            if key in self.offline or key in self.unhosted:
                continue  # its log directory failed (or `rehost` will try it again)
            self._host(new, p, log_config, min_isr, live)

    def _host(
        self, topic: TopicInfo, p: PartitionInfo, log_config: LogConfig, min_isr: int, live: bool
    ) -> None:
        """Open the replica if it is not open yet, and bring it to the metadata's state."""
        partition = self.partitions.get((topic.name, p.index))
        if partition is None:
            partition = self._open_or_offline(topic, p, log_config, live)
            if partition is None:
                return
        partition.log.config = log_config
        partition.min_insync_replicas = min_isr
        was = (partition.leader, partition.leader_epoch)
        partition.update(p)
        if (partition.leader, partition.leader_epoch) != was:
            for listener in self.leadership_listeners:
                listener(partition)
        if partition.is_leader or partition.leader < 0:
            self._fetchers.unfollow(partition)
        else:
            self._fetchers.follow(partition)

    def _log_settings(self, topic: TopicInfo) -> tuple[LogConfig, int]:
        """The topic's LogConfig and min.insync.replicas: its configs over this broker's."""
        log_config = LogConfig.from_configs(self.config, dict(topic.configs))
        min_isr = effective_topic_configs(self.config, topic.configs)["min.insync.replicas"]
        return log_config, int(min_isr.value)

    def reconfigure(self, config: BrokerConfig) -> None:
        """Dynamic broker configs changed (dynamic_config.py): every open log of a topic takes
        the new defaults where the topic has no value of its own, without a restart."""
        self.config = config
        for topic in list(self.cache.topics.values()):
            hosted = [self.partitions.get((topic.name, p.index)) for p in topic.partitions]
            if not any(hosted):
                continue
            log_config, min_isr = self._log_settings(topic)
            for partition in filter(None, hosted):
                partition.log.config = log_config
                partition.min_insync_replicas = min_isr

    def _dir(self, topic: str, index: int) -> Path:
        """Where the log is (the directory that holds it), or goes (log_dirs.py)."""
        name = f"{topic}-{index}"
        found = self.log_dirs.locate(name)
        if found is None:
            found = self.log_dirs.choose(name, self._log_count)
        return found.path / name

    def _log_count(self, d: LogDir) -> int:
        return sum(1 for p in self.partitions.values() if p.log.directory.parent == d.path)

    def _open_or_offline(
        self, topic: TopicInfo, p: PartitionInfo, log_config: LogConfig, live: bool
    ) -> Partition | None:
        """`_open`, or None when its log directory fails (the replica is offline here). While
        a directory is offline, the log of a partition that is not new and is in no online
        directory may be in the failed one: it is offline too, not created empty elsewhere
        (Kafka's LogManager refuses to as well), so an empty replica never takes its place."""
        index = p.index
        failed = [d for d in self.log_dirs.dirs if not d.online]
        is_new = live and p.leader_epoch == 0 and p.partition_epoch == 0  # created since start
        if failed and not is_new and self.log_dirs.locate(f"{topic.name}-{index}") is None:
            log.error(
                "the log of %s-%d is in no online log directory; it may be in the failed %s: "
                "offline on this broker",
                topic.name,
                index,
                ", ".join(str(d.path) for d in failed),
            )
            self.offline[(topic.name, index)] = failed[0]
            self._offline_changed.set()
            return None
        directory = self._dir(topic.name, index)
        try:
            return self._open(topic, index, log_config, directory)
        except (OSError, KafkaError) as e:
            if isinstance(e, OSError) and out_of_resources(e):
                self._unhost(topic.name, index, e)
                return None
            if isinstance(e, KafkaError) and e.code != ErrorCode.kafka_storage_error:
                raise
            d = self.log_dirs.dir_of(directory)
            assert d is not None  # _dir chose one of them
            log.error("cannot open the log of %s-%d in %s: %s", topic.name, index, d.path, e)
            self._dir_failed(d, e if isinstance(e, OSError) else LogDirFailure(str(e)))
            self.offline[(topic.name, index)] = d
            self._offline_changed.set()
            return None

    def _open(
        self,
        topic: TopicInfo,
        index: int,
        log_config: LogConfig,
        directory: Path | None = None,
    ) -> Partition:
        directory = directory or self._dir(topic.name, index)
        id_file = directory / _TOPIC_ID_FILE
        if directory.exists() and (
            not id_file.exists() or id_file.read_text().strip() != topic.topic_id.hex()
        ):
            log.warning("deleting %s: it belongs to an older topic of the same name", directory)
            self._delete_dir(directory)
        plog = PartitionLog.open(
            directory, log_config, self.store, self._state_key(topic.topic_id, index)
        )
        plog.on_failure = self.log_failed
        if not id_file.exists():
            id_file.write_text(topic.topic_id.hex() + "\n")
        producers = ProducerStateManager.load(plog, self.config.producer_id_expiration_ms)
        partition = Partition(
            topic.name, topic.topic_id, index, plog, producers, self.node_id, self._submit_isr
        )
        self.partitions[(topic.name, index)] = partition
        return partition

    def _unhost(self, topic: str, index: int, error: OSError) -> None:
        """The replica cannot be hosted for want of resources: offline here (and reported), its
        directory untouched, until `rehost` opens it."""
        first = not self.unhosted
        self.unhosted[(topic, index)] = f"{error.strerror or error}; {resource_advice(error)}"
        self._offline_changed.set()
        if first:  # one line per shortage, not one per replica of a large topic
            log.error(
                "broker %d cannot host %s-%d: %s. %s. Replicas it cannot open are offline "
                "here (their leadership moves to other replicas) and are tried again every "
                "%.0fs; their log directory stays online",
                self.node_id,
                topic,
                index,
                error,
                resource_advice(error),
                _REHOST_S,
            )

    async def rehost(self, elect: Callable[[dict[str, list[int]]], Awaitable[object]]) -> None:
        """Every few seconds, open again the replicas not hosted for want of resources; ask
        (``elect``: a preferred leader election) to lead again those left without a leader
        that this broker is the preferred replica of (a single replica's partition)."""
        while True:
            await anyio.sleep(_REHOST_S)
            if not self.unhosted:
                continue
            before = len(self.unhosted)
            leaderless: dict[str, list[int]] = {}
            for topic, index in list(self.unhosted):
                del self.unhosted[(topic, index)]
                info = self.cache.topics.get(topic)
                if info is None or index >= len(info.partitions):
                    continue  # deleted meanwhile
                p = info.partitions[index]
                if self.node_id in p.replicas:
                    log_config, min_isr = self._log_settings(info)
                    self._host(info, p, log_config, min_isr, True)
                    hosted = (topic, index) in self.partitions
                    if hosted and p.leader < 0 and p.replicas[0] == self.node_id:
                        leaderless.setdefault(topic, []).append(index)
                await anyio.sleep(0)
            if len(self.unhosted) == before:
                continue
            self._offline_changed.set()
            log.info(
                "broker %d hosts %d more replica(s) again; %d still wait for resources",
                self.node_id,
                before - len(self.unhosted),
                len(self.unhosted),
            )
            if leaderless:
                try:
                    await elect(leaderless)
                except Exception as e:  # MetaError: the next auto leader rebalance does it
                    log.warning("cannot ask the meta service to elect leaders again: %s", e)

    def _remove(self, topic: str, index: int) -> None:
        if (self.offline.pop((topic, index), None), self.unhosted.pop((topic, index), None)) != (
            None,
            None,
        ):
            self._offline_changed.set()
        partition = self.partitions.pop((topic, index), None)
        if partition is None:
            return
        log.info("removing replica %r", partition)
        self._fetchers.unfollow(partition)
        partition.leader = -1  # no longer here: listeners (coordinators) let go of it
        for listener in self.leadership_listeners:
            listener(partition)
        # Wake what waits on it (acks=all produces, long polls): they see it is gone at once, as
        # when a reassignment moves the leader off this broker, instead of at their timeout.
        partition.close()
        partition.log.delete()  # also removes the log's state-store keys

    @staticmethod
    def _state_key(topic_id: bytes, index: int) -> str:
        return f"{topic_id.hex()}-{index}"

    def _delete_dir(self, directory: Path) -> None:
        shutil.rmtree(directory, ignore_errors=True)

    def remove_stray_logs(self) -> None:
        """After the first metadata snapshot: drop logs of topics deleted while we were down."""
        for d in self.log_dirs.online():
            for name in self.log_dirs.log_names(d):
                directory = d.path / name
                if not (directory / _TOPIC_ID_FILE).exists():
                    continue
                topic, _, idx = name.rpartition("-")
                key = (topic, int(idx) if idx.isdigit() else -1)
                partition = self.partitions.get(key)
                if partition is None or partition.log.directory != directory:
                    log.warning("deleting stray log %s (its topic is gone from here)", directory)
                    self._delete_dir(directory)

    # -- failed log directories ------------------------------------------------------------

    def log_failed(self, plog: PartitionLog, error: OSError) -> None:
        """A log hit an I/O error: its directory is failed (`PartitionLog.on_failure`); for
        want of resources only this replica is, until `rehost` reopens it."""
        if out_of_resources(error):
            for key, partition in list(self.partitions.items()):
                if partition.log is plog:
                    self._drop_failed(key, partition)
                    self._unhost(*key, error)
            return
        d = self.log_dirs.dir_of(plog.directory)
        if d is not None:
            self._dir_failed(d, error)

    def _dir_failed(self, d: LogDir, error: OSError) -> None:
        """Take every replica in ``d`` offline here (Kafka's handleLogDirFailure)."""
        if not self.log_dirs.fail(d, error):
            return
        if d is self.log_dirs.state_log_dir:
            log.critical(
                "log directory %s holds this broker's state store (%s) and failed: the broker "
                "stops now, as Kafka's does when its metadata log directory fails. Fix or "
                "replace the disk, then restart the broker (its replicas are recovered from "
                "the other brokers)",
                d.path,
                self.log_dirs.state_dir,
            )
            os._exit(1)  # as Kafka's Exit.halt: a clean shutdown would write to the failed dir
        for key, partition in list(self.partitions.items()):
            if partition.log.directory.parent != d.path:
                continue
            self.offline[key] = d
            if partition.log.failure is None:
                partition.log.fail(LogDirFailure(f"log directory {d.path} failed"))
            self._drop_failed(key, partition)
        log.error(
            "%d replica(s) in %s are offline on broker %d: %s",
            sum(1 for v in self.offline.values() if v is d),
            d.path,
            self.node_id,
            ", ".join(f"{t}-{i}" for (t, i), v in sorted(self.offline.items()) if v is d),
        )
        self._offline_changed.set()

    def _drop_failed(self, key: tuple[str, int], partition: Partition) -> None:
        """Stop hosting a replica whose log failed."""
        del self.partitions[key]
        self._fetchers.unfollow(partition)
        partition.leader = -1  # listeners (coordinators) let go of it
        for listener in self.leadership_listeners:
            listener(partition)
        partition.close()  # wakes its waiters; the failed log is abandoned, not flushed

    async def report_offline(
        self, report: Callable[[list[tuple[str, int]]], Awaitable[object]]
    ) -> None:
        """Tell the meta service (``report``) the replicas offline here whenever they change,
        retrying until it has heard, so it moves their leadership and ISR elsewhere."""
        reported: set[tuple[str, int]] = set()
        while True:
            await self._offline_changed.wait()
            self._offline_changed = anyio.Event()
            current = set(self.offline) | set(self.unhosted)
            if current <= reported:
                reported = current
                continue
            try:
                await report(sorted(current))
            except Exception as e:  # MetaError: the meta service is unreachable
                log.warning(
                    "cannot report %d offline replica(s) to the meta service (%s); retrying",
                    len(current),
                    e,
                )
                await anyio.sleep(1)
                self._offline_changed.set()
                continue
            log.info("reported %d offline replica(s) to the meta service", len(current))
            reported = current

    def resend_offline(self) -> None:
        """Report the offline replicas again (after a new registration: a new broker epoch)."""
        if self.offline:
            self._offline_changed.set()

    async def shrink_isrs(self) -> None:
        """Kafka's isr-expiration task: every half replica.lag.time.max.ms, each partition led
        here asks to drop the followers that have not caught up within it."""
        lag_ms = self.config.replica_lag_time_max_ms
        period_ms = lag_ms // 2
        last = now_ms()
        while True:
            await anyio.sleep(period_ms / 1000)
            now = now_ms()
            late, last = now - last - period_ms, now
            if late > period_ms:
                # This process was stalled (paused, swapped out): the followers' fetches are
                # queued, not missing. Judge them after they have been served.
                log.info("ISR check ran %d ms late; skipping one round", late)
                continue
            for partition in list(self.partitions.values()):
                partition.maybe_shrink_isr(now, lag_ms)

    async def maintain_logs(self) -> None:
        """Kafka's log manager chores: retention every log.retention.check.interval.ms (never
        past the high watermark, as Kafka's), and expiry of idle idempotent producers
        (producer.id.expiration.ms)."""
        while True:
            await anyio.sleep(self.config.log_retention_check_interval_ms / 1000)
            now = now_ms()
            for partition in list(self.partitions.values()):
                try:
                    deleted = partition.log.enforce_retention(now, partition.high_watermark)
                except KafkaError as e:  # KAFKA_STORAGE_ERROR: its directory is now offline
                    log.warning("%r: retention failed: %s", partition, e)
                    continue
                if deleted:
                    log.info("%r: retention deleted %d segment(s)", partition, deleted)
                    partition.log_start_moved()
                partition.producers.remove_expired(now)

    async def clean_logs(self) -> None:
        """Kafka's log cleaner (log.cleaner.enable): compact the filthiest compacted log, one at a
        time; sleep log.cleaner.backoff.ms when none needs it. Each replica compacts its own log."""
        if not self.config.log_cleaner_enable:
            log.info(
                "log.cleaner.enable=false: compacted topics are not compacted and keep growing"
            )
            return
        while True:
            found = self._filthiest_log()
            if found is None or not await self._clean(*found):
                await anyio.sleep(self.config.log_cleaner_backoff_ms / 1000)

    def _filthiest_log(self) -> tuple[Partition, CleaningJob] | None:
        """The compacted log with the largest share of dirty bytes among those that need a
        cleaning (Kafka's grabFilthiestCompactedLog)."""
        best: tuple[Partition, CleaningJob] | None = None
        now = now_ms()
        for partition in list(self.partitions.values()):
            uncleanable = (partition.topic_id, partition.index) in self._uncleanable
            if uncleanable or not partition.log.config.compact:
                continue
            producers = {
                pid: (entry.batches[-1].last_offset if entry.batches else -1, entry.epoch)
                for pid, entry in partition.producers.producers.items()
            }
            # Below the LSO every transaction is decided: aborted data and markers can go.
            job = partition.log.plan_cleaning(now, partition.last_stable_offset, producers)
            if job is not None and (best is None or job.ratio > best[1].ratio):
                best = (partition, job)
        return best

    async def _clean(self, partition: Partition, job: CleaningJob) -> bool:
        """Run ``job``: the heavy work in a worker thread, each swap here, between requests.
        Returns whether it completed."""
        plog = partition.log
        try:
            await anyio.to_thread.run_sync(job.build_offset_map, abandon_on_cancel=True)
            for group in job.groups:
                cleaned = await anyio.to_thread.run_sync(
                    job.clean_group, group, abandon_on_cancel=True
                )
                plog.swap_cleaned(job, cleaned)
            plog.finish_cleaning(job)
        except CleaningAborted as e:
            log.info("%r: cleaning abandoned (%s); it is retried later", partition, e)
            return False
        except Exception as e:
            if (
                self.partitions.get((partition.topic, partition.index)) is not partition
                or partition.log is not plog
            ):
                log.info("%r: removed or moved while it was being cleaned", partition)
                return False
            self._cleaning_failed(partition, plog.directory, e)
            return False
        finally:
            job.stop()  # a worker abandoned by a cancellation stops at its next batch
        log.info(
            "%r: cleaned %d segment(s) below offset %d in %.2fs: %d -> %d bytes, %d of %d "
            "records kept (dirty ratio was %.2f)",
            partition,
            job.segments_cleaned,
            job.end_offset,
            job.elapsed_s,
            job.bytes_before,
            job.bytes_after,
            job.records_kept,
            job.records_read,
            job.ratio,
        )
        return True

    def _cleaning_failed(self, partition: Partition, directory: Path, error: Exception) -> None:
        """Say what stopped a cleaning and what to do. The log is not cleaned again until the
        broker restarts (Kafka marks it uncleanable), unless descriptors or memory ran out:
        that passes, and it is tried again after log.cleaner.backoff.ms."""
        if isinstance(error, OSError) and out_of_resources(error):
            log.error(
                "%r: cleaning failed: %s; %s; it is tried again later",
                partition,
                error,
                resource_advice(error),
            )
            return
        self._uncleanable.add((partition.topic_id, partition.index))
        stopped = "this log is no longer compacted until the broker restarts"
        if isinstance(error, KafkaError) and error.code in _UNREADABLE:
            log.error(
                "%r: cleaning stopped at data it cannot decode (%s): consumers cannot read it "
                "either. A producer wrote it so (its CRC holds), or the segment file in %s is "
                "damaged. %s: if those records may go, delete the records up to past them "
                "(kafka-delete-records.sh); if another replica holds them intact, reassign "
                "this replica away and back to copy them again; then restart the broker",
                partition,
                error.message,
                directory,
                stopped.capitalize(),
            )
        elif isinstance(error, OSError):
            log.error(
                "%r: cleaning failed on an I/O error (%s); %s: check the disk and the log "
                "directory %s",
                partition,
                error,
                stopped,
                directory,
            )
        else:
            log.exception(
                "%r: cleaning failed unexpectedly; %s. This is a bug: report it with this trace",
                partition,
                stopped,
            )

    def close(self) -> None:
        for partition in self.partitions.values():
            partition.close()
        self.partitions.clear()
