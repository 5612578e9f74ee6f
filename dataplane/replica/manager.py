"""Which partitions this broker hosts, kept in step with the metadata cache.

A topic change from the watch stream opens (or creates) the local log of every partition this
broker is a replica of, updates roles and epochs, and deletes the logs of partitions that moved
away or whose topic was deleted.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio

from dataplane.config import BrokerConfig
from dataplane.log import LogConfig, PartitionLog, StateStore
from dataplane.log.cleaner import CleaningAborted, CleaningJob
from dataplane.metadata_cache import MetadataCache, TopicInfo
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.fetcher import ReplicaFetchers
from dataplane.replica.partition import IsrSubmit, Partition, now_ms
from dataplane.replica.producer_state import ProducerStateManager
from dataplane.topic_configs import effective_topic_configs

log = logging.getLogger("rafka.replicas")

_TOPIC_ID_FILE = "partition.metadata"  # same name and purpose as Kafka's (KIP-516)


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        store: StateStore,
        cache: MetadataCache,
        submit_isr: IsrSubmit,
        fetchers: ReplicaFetchers,
    ) -> None:
        self.config = config
        self._submit_isr = submit_isr
        self._fetchers = fetchers
        self.node_id = config.node_id
        self.store = store
        self.cache = cache
        self.root = Path(config.log_dirs)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._uncleanable: set[tuple[bytes, int]] = set()  # compaction failed (Kafka's too)
        # Called after every leadership change of a local replica (coordinators load/unload).
        self.leadership_listeners: list[Callable[[Partition], None]] = []
        cache.topic_listeners.append(self._on_topic_change)

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
            info = self.cache.topics.get(topic)
            if info is None or not 0 <= index < len(info.partitions):
                raise KafkaError(ErrorCode.unknown_topic_or_partition)
            raise KafkaError(ErrorCode.not_leader_or_follower)
        if follower_ok and not partition.is_leader and partition.leader >= 0:
            partition.check_epoch(current_leader_epoch)
        else:
            partition.check_leader(current_leader_epoch)
        return partition

    # -- reacting to metadata ------------------------------------------------------------------

    def _on_topic_change(self, old: TopicInfo | None, new: TopicInfo | None) -> None:
        if new is None:
            assert old is not None
            for p in old.partitions:
                self._remove(old.name, p.index)
            return
        log_config = LogConfig.from_configs(self.config, dict(new.configs))
        min_isr = int(
            effective_topic_configs(self.config, new.configs)["min.insync.replicas"].value
        )
        for p in new.partitions:
            key = (new.name, p.index)
            if self.node_id not in p.replicas:
                if key in self.partitions:
                    self._remove(new.name, p.index)
                continue
            partition = self.partitions.get(key)
            if partition is None:
                partition = self._open(new, p.index, log_config)
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

    def _dir(self, topic: str, index: int) -> Path:
        return self.root / f"{topic}-{index}"

    def _open(self, topic: TopicInfo, index: int, log_config: LogConfig) -> Partition:
        directory = self._dir(topic.name, index)
        id_file = directory / _TOPIC_ID_FILE
        if directory.exists() and (
            not id_file.exists() or id_file.read_text().strip() != topic.topic_id.hex()
        ):
            log.warning("deleting %s: it belongs to an older topic of the same name", directory)
            self._delete_dir(directory)
        plog = PartitionLog.open(
            directory, log_config, self.store, self._state_key(topic.topic_id, index)
        )
        if not id_file.exists():
            id_file.write_text(topic.topic_id.hex() + "\n")
        producers = ProducerStateManager.load(plog, self.config.producer_id_expiration_ms)
        partition = Partition(
            topic.name, topic.topic_id, index, plog, producers, self.node_id, self._submit_isr
        )
        self.partitions[(topic.name, index)] = partition
        return partition

    def _remove(self, topic: str, index: int) -> None:
        partition = self.partitions.pop((topic, index), None)
        if partition is None:
            return
        log.info("removing replica %r", partition)
        self._fetchers.unfollow(partition)
        partition.leader = -1  # no longer here: listeners (coordinators) let go of it
        for listener in self.leadership_listeners:
            listener(partition)
        partition.log.delete()  # also removes the log's state-store keys

    @staticmethod
    def _state_key(topic_id: bytes, index: int) -> str:
        return f"{topic_id.hex()}-{index}"

    def _delete_dir(self, directory: Path) -> None:
        shutil.rmtree(directory, ignore_errors=True)

    def remove_stray_logs(self) -> None:
        """After the first metadata snapshot: drop logs of topics deleted while we were down."""
        if not self.root.exists():
            return
        for directory in self.root.iterdir():
            if not (directory / _TOPIC_ID_FILE).exists():
                continue
            topic, _, idx = directory.name.rpartition("-")
            if (topic, int(idx) if idx.isdigit() else -1) not in self.partitions:
                log.warning("deleting stray log %s (its topic no longer exists here)", directory)
                self._delete_dir(directory)

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
        past the first unstable offset: open transactions keep their data), and expiry of idle
        idempotent producers (producer.id.expiration.ms)."""
        while True:
            await anyio.sleep(self.config.log_retention_check_interval_ms / 1000)
            now = now_ms()
            for partition in list(self.partitions.values()):
                bound = partition.producers.first_unstable_offset
                deleted = partition.log.enforce_retention(now, bound)
                if deleted:
                    log.info("%r: retention deleted %d segment(s)", partition, deleted)
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
        except Exception:
            if self.partitions.get((partition.topic, partition.index)) is not partition:
                log.info("%r: removed while it was being cleaned", partition)
                return False
            log.exception(
                "%r: cleaning failed; this log is no longer compacted until the broker restarts "
                "(check the disk and the log directory %s)",
                partition,
                plog.directory,
            )
            self._uncleanable.add((partition.topic_id, partition.index))
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

    def close(self) -> None:
        for partition in self.partitions.values():
            partition.close()
        self.partitions.clear()
