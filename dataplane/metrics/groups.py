"""Consumer group lag, computed when scraped on the group's coordinator.

Lag of a group on a partition is the partition's high watermark minus the group's committed
offset. The coordinator holds the committed offsets of the groups it coordinates; the high
watermark is known for the partitions this broker hosts (as leader, or as a follower a little
behind), so only those are reported here: in a cluster the coordinator of a group reports its
lag on the partitions it hosts (kafka_exporter's kafka_consumergroup_lag names the family).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from dataplane.coordinator.base import OffsetAndMetadata
    from dataplane.replica.partition import Partition

Committed = Mapping[str, Mapping[str, Mapping[int, "OffsetAndMetadata"]]]


class GroupLagCollector(Collector):
    """`committed()`: the committed offsets of every group coordinated here (group -> topic
    -> partition -> offset); `partitions`: the hosted replicas, for their high watermarks."""

    def __init__(
        self,
        committed: Callable[[], Iterable[Committed]],
        partitions: Mapping[tuple[str, int], Partition],
    ) -> None:
        self._committed = committed
        self._partitions = partitions

    def collect(self) -> Iterable[Metric]:
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset, per partition hosted here",
            labels=["consumergroup", "topic", "partition"],
        )
        total = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "The group's lag summed over the partitions hosted here",
            labels=["consumergroup"],
        )
        for shard in self._committed():
            for group, topics in list(shard.items()):
                summed = 0
                for topic, offsets in list(topics.items()):
                    for index, committed in list(offsets.items()):
                        partition = self._partitions.get((topic, index))
                        if partition is None:
                            continue
                        behind = max(0, partition.high_watermark - committed.offset)
                        summed += behind
                        lag.add_metric([group, topic, str(index)], behind)
                total.add_metric([group], summed)
        return (lag, total)
