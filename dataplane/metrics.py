"""Prometheus metrics of a broker, served on metrics.port (0: off).

Names follow Kafka's JMX metrics where one exists (kafka.server BrokerTopicMetrics and
ReplicaManager), in Prometheus style. Label children are created once per API key so the
hot paths only add to a number.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kio.schema.index import api_key_map
from prometheus_client import Counter, Gauge, start_http_server

if TYPE_CHECKING:
    from dataplane.replica.partition import Partition

log = logging.getLogger("rafka.metrics")

REQUESTS = Counter("rafka_requests_total", "Kafka requests received, by API", ["api"])
CLOSED = Counter(
    "rafka_connections_closed_by_broker_total", "Connections closed for bad input or errors"
)
BYTES_IN = Counter("rafka_bytes_in_total", "Bytes of Kafka requests received")
BYTES_OUT = Counter("rafka_bytes_out_total", "Bytes of Kafka responses sent")
ISR_CHANGES = Counter("rafka_isr_changes_total", "ISR changes committed, by direction", ["change"])
PARTITIONS = Gauge("rafka_partitions", "Replicas hosted on this broker, by role", ["role"])
UNDER_REPLICATED = Gauge(
    "rafka_under_replicated_partitions", "Partitions this broker leads whose ISR lacks replicas"
)

_by_api = {key: REQUESTS.labels(api=name) for key, name in api_key_map.items()}


def request(api_key: int) -> None:
    counter = _by_api.get(api_key)
    if counter is not None:
        counter.inc()


def serve(port: int, partitions: Mapping[tuple[str, int], Partition]) -> None:
    """Start the HTTP endpoint on `port` (0: none) and have the gauges read the hosted
    replicas, `partitions` (the ReplicaManager's, kept current), when scraped."""
    if port <= 0:
        return
    PARTITIONS.labels(role="leader").set_function(
        lambda: sum(p.is_leader for p in partitions.values())
    )
    PARTITIONS.labels(role="follower").set_function(
        lambda: sum(not p.is_leader for p in partitions.values())
    )
    UNDER_REPLICATED.set_function(
        lambda: sum(p.is_leader and len(p.isr) < len(p.replicas) for p in partitions.values())
    )
    start_http_server(port)
    log.info("serving Prometheus metrics on :%d/metrics", port)
