"""Kafka's BrokerTopicMetrics per topic (bytes in, bytes out, messages in) and the sizes of the
produce and fetch purgatories.

The produce and fetch paths add to plain integers kept per topic (`topic(name)` makes a topic's
slot once; the path then only adds), cheaper than a labelled Counter's lock. A collector turns
them into counter families when scraped and drops the topics this broker no longer hosts, so a
deleted topic's series goes away with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import Gauge
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector


class TopicStats:
    """Running totals of one topic on this broker."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.messages_in = 0


_topics: dict[str, TopicStats] = {}


def topic(name: str) -> TopicStats:
    """The totals of topic `name`, made on its first produce or fetch here."""
    stats = _topics.get(name)
    if stats is None:
        stats = _topics[name] = TopicStats()
    return stats


def fetched(topics: Iterable[tuple[str | None, int]]) -> None:
    """Bytes of records sent to consumers, by topic (None: an unknown topic id, no bytes)."""
    for name, size in topics:
        if size and name is not None:
            (_topics.get(name) or topic(name)).bytes_out += size


class TopicCollector(Collector):
    """BrokerTopicMetrics per topic; forgets topics `hosted` no longer names."""

    def __init__(self, hosted: Callable[[], set[str]]) -> None:
        self._hosted = hosted

    def collect(self) -> Iterable[Metric]:
        hosted = self._hosted()
        for name in [n for n in list(_topics) if n not in hosted]:
            _topics.pop(name, None)
        families = (
            CounterMetricFamily(
                "kafka_server_broker_topic_metrics_bytes_in",
                "Bytes of records appended to this broker's leader replicas (BytesInPerSec)",
                labels=["topic"],
            ),
            CounterMetricFamily(
                "kafka_server_broker_topic_metrics_bytes_out",
                "Bytes of records sent to consumers (BytesOutPerSec)",
                labels=["topic"],
            ),
            CounterMetricFamily(
                "kafka_server_broker_topic_metrics_messages_in",
                "Records appended to this broker's leader replicas (MessagesInPerSec)",
                labels=["topic"],
            ),
        )
        for name, stats in list(_topics.items()):
            families[0].add_metric([name], stats.bytes_in)
            families[1].add_metric([name], stats.bytes_out)
            families[2].add_metric([name], stats.messages_in)
        return families


PURGATORY = Gauge(
    "kafka_server_delayed_operation_purgatory_purgatory_size",
    "Requests parked until they can complete (PurgatorySize): acks=all produces waiting for "
    "replication, fetches long-polling for data",
    ["delayed_operation"],
)
PRODUCE_PURGATORY = PURGATORY.labels(delayed_operation="Produce")
FETCH_PURGATORY = PURGATORY.labels(delayed_operation="Fetch")
