"""Kafka's ReplicaManager, Log and controller partition metrics, read when scraped.

Nothing here runs on the produce or fetch path: the collector walks the hosted replicas (the
ReplicaManager's map, kept current) and the metadata cache at scrape time, so a partition's
series appear when it is created here and vanish when it goes away. ISR shrinks and expands
are counted where the meta service commits them (replica/isr.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from dataplane.metadata_cache import MetadataCache
    from dataplane.replica.partition import Partition

_RM = "kafka_server_replica_manager"

ISR_SHRINKS = Counter(f"{_RM}_isr_shrinks", "ISR shrinks committed (IsrShrinksPerSec)")
ISR_EXPANDS = Counter(f"{_RM}_isr_expands", "ISR expansions committed (IsrExpandsPerSec)")


def isr_changed(old_size: int, new_size: int) -> None:
    """An ISR change the meta service committed for a partition this broker leads."""
    (ISR_EXPANDS if new_size > old_size else ISR_SHRINKS).inc()


class ReplicaCollector(Collector):
    """Partition counts and per-partition log gauges of this broker; offline partitions of
    the cluster (from the metadata every broker follows)."""

    def __init__(
        self,
        partitions: Mapping[tuple[str, int], Partition],
        cache: MetadataCache | None = None,
    ) -> None:
        self._partitions = partitions
        self._cache = cache

    def collect(self) -> Iterable[Metric]:
        hosted = list(self._partitions.items())
        leaders = [p for _, p in hosted if p.is_leader]
        yield _gauge(f"{_RM}_partition_count", "Replicas hosted here", len(hosted))
        yield _gauge(f"{_RM}_leader_count", "Partitions this broker leads", len(leaders))
        yield _gauge(
            f"{_RM}_under_replicated_partitions",
            "Partitions led here whose ISR lacks some of their replicas",
            sum(len(p.isr) < len(p.replicas) for p in leaders),
        )
        yield _gauge(
            f"{_RM}_under_min_isr_partition_count",
            "Partitions led here whose ISR is smaller than min.insync.replicas",
            sum(len(p.isr) < p.min_insync_replicas for p in leaders),
        )
        size = GaugeMetricFamily(
            "kafka_log_log_size", "Bytes of a replica's log segments (Size)", labels=_LABELS
        )
        end = GaugeMetricFamily(
            "kafka_log_log_end_offset", "A replica's log end offset (LogEndOffset)", labels=_LABELS
        )
        start = GaugeMetricFamily(
            "kafka_log_log_start_offset",
            "A replica's log start offset (LogStartOffset)",
            labels=_LABELS,
        )
        for (topic, index), p in hosted:
            labels = [topic, str(index)]
            try:
                size.add_metric(labels, p.log.size)
                end.add_metric(labels, p.log.log_end_offset)
                start.add_metric(labels, p.log.log_start_offset)
            except Exception:  # closed while we read it (deleted, moved): skip this scrape
                continue
        yield size
        yield end
        yield start
        if self._cache is not None:
            yield _gauge(
                "kafka_controller_kafka_controller_offline_partitions_count",
                "Partitions of the cluster with no leader (OfflinePartitionsCount)",
                sum(
                    p.leader < 0
                    for topic in list(self._cache.topics.values())
                    for p in topic.partitions
                ),
            )


_LABELS = ["topic", "partition"]


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)
