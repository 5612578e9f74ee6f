"""Prometheus metrics of a broker, served on metrics.port (0: off).

Names are Kafka's JMX metrics in Prometheus style (``kafka.network:type=RequestMetrics,
name=TotalTimeMs,request=Produce`` -> ``kafka_network_request_metrics_total_time_ms{request=
"Produce"}``), one module per concern: requests (RequestMetrics, socket-server metrics), topics
(BrokerTopicMetrics, purgatories), replicas (ReplicaManager, Log, offline partitions), groups
(consumer lag), quotas (throttle times). Hot paths only add to numbers made beforehand; what can
be read from the broker's state is read when scraped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, start_http_server
from prometheus_client.registry import Collector

from dataplane.metrics.groups import Committed, GroupLagCollector
from dataplane.metrics.replicas import ReplicaCollector
from dataplane.metrics.requests import BYTES_IN, BYTES_OUT, CLOSED, RequestCollector
from dataplane.metrics.topics import TopicCollector

if TYPE_CHECKING:
    from dataplane.metadata_cache import MetadataCache
    from dataplane.replica.partition import Partition

__all__ = ["BYTES_IN", "BYTES_OUT", "CLOSED", "serve"]

log = logging.getLogger("rafka.metrics")


def serve(
    port: int,
    partitions: Mapping[tuple[str, int], Partition],
    cache: MetadataCache | None = None,
    committed: Callable[[], Iterable[Committed]] | None = None,
    extra: Iterable[Collector] = (),
) -> None:
    """Start the HTTP endpoint on `port` (0: none) with the collectors that read the broker's
    state when scraped: the hosted replicas `partitions` (the ReplicaManager's, kept current),
    the metadata `cache`, the group coordinator's `committed` offsets, and `extra` ones."""
    if port <= 0:
        return
    collectors: list[Collector] = [
        RequestCollector(),
        ReplicaCollector(partitions, cache),
        TopicCollector(lambda: {topic for topic, _ in list(partitions)}),
        *extra,
    ]
    if committed is not None:
        collectors.append(GroupLagCollector(committed, partitions))
    for collector in collectors:
        REGISTRY.register(collector)
    start_http_server(port)
    log.info("serving Prometheus metrics on :%d/metrics", port)
