"""Kafka's RequestMetrics and socket-server metrics: per-API request rate and the time each
request spends in each phase, connections per listener, authentications, network bytes.

Every API's counters are made once, at import, so timing one request is a dict lookup and a
few additions to plain lists from numbers the server already took (`time.monotonic()` when the
frame was read, when the handler started, when it returned, when the response was sent); a
collector turns them into Prometheus families when scraped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from itertools import accumulate

from kio.schema.index import api_key_map
from kio.static.constants import EntityType
from prometheus_client import Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from dataplane.protocol.legacy import SCHEMAS as LEGACY_SCHEMAS

# Milliseconds, as Kafka's *TimeMs histograms: from a cached Metadata answer to a long poll.
_MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)

_PHASES = {
    "total_time_ms": "Time from the request read to its response sent (TotalTimeMs)",
    "request_queue_time_ms": "Time from the request read to its handler started "
    "(RequestQueueTimeMs)",
    "local_time_ms": "Time the handler ran before it answered or parked (LocalTimeMs)",
    "remote_time_ms": "Time a parked request waited in purgatory: acks=all replication, fetch "
    "long polls (RemoteTimeMs)",
    "throttle_time_ms": "Time the client's channel stayed muted for a quota (ThrottleTimeMs)",
    "response_send_time_ms": "Time writing the response to the socket (ResponseSendTimeMs)",
}
_FAMILY = "kafka_network_request_metrics"


class _Histogram:
    """One request's phase times: bucket counts and a sum, added to without a lock (the
    event loop is the only writer; a scrape may read a count one request ahead of the sum,
    which Prometheus tolerates) — a labelled prometheus_client Histogram costs several
    microseconds per observation, this a fraction of one."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(_MS_BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, ms: float) -> None:
        self.counts[bisect_left(_MS_BUCKETS, ms)] += 1
        self.sum += ms


CONNECTIONS = Gauge(
    "kafka_server_socket_server_metrics_connection_count",
    "Open client connections, by listener (connection-count)",
    ["listener"],
)
CLOSED = Counter(
    "kafka_server_socket_server_metrics_connections_closed_by_broker",
    "Connections the broker closed for bad input or errors",
)
AUTH_SUCCESS = Counter(
    "kafka_server_socket_server_metrics_successful_authentication",
    "Successful SASL or TLS client authentications, by listener (successful-authentication-total)",
    ["listener"],
)
AUTH_FAILURE = Counter(
    "kafka_server_socket_server_metrics_failed_authentication",
    "Failed SASL or TLS client authentications, by listener (failed-authentication-total)",
    ["listener"],
)
BYTES_IN = Counter(
    "kafka_server_socket_server_metrics_incoming_bytes", "Bytes of Kafka requests received"
)
BYTES_OUT = Counter(
    "kafka_server_socket_server_metrics_outgoing_bytes", "Bytes of Kafka responses sent"
)


# APIs kio lacks whole (their schemas are generated: dataplane.protocol.legacy), by name
_LEGACY_APIS = {
    key: kinds[EntityType.request].rpartition(":")[2].removesuffix("Request")
    for (key, _), kinds in LEGACY_SCHEMAS.items()
    if key not in api_key_map
}


def request_name(api_key: int) -> str:
    """Kafka's name of an API (ApiKeys.name), as RequestMetrics labels it: "ApiVersions"."""
    if api_key in _LEGACY_APIS:
        return _LEGACY_APIS[api_key]
    return "".join(part.capitalize() for part in api_key_map[api_key].split("_"))


class ApiMetrics:
    """The request count and phase histograms of one API, made once so timing a request
    allocates nothing."""

    __slots__ = ("local", "name", "queue", "remote", "requests", "send", "throttle", "total")

    def __init__(self, api_key: int) -> None:
        self.name = request_name(api_key)
        self.requests = 0
        self.total, self.queue, self.local = _Histogram(), _Histogram(), _Histogram()
        self.remote, self.throttle, self.send = _Histogram(), _Histogram(), _Histogram()

    def phases(self) -> dict[str, _Histogram]:
        return {
            "total_time_ms": self.total,
            "request_queue_time_ms": self.queue,
            "local_time_ms": self.local,
            "remote_time_ms": self.remote,
            "throttle_time_ms": self.throttle,
            "response_send_time_ms": self.send,
        }

    def observe(
        self,
        received: float,
        started: float,
        answered: float,
        ready: float,
        sent: float,
        send_started: float,
        throttle_ms: float,
    ) -> None:
        """Record one request from its monotonic timestamps (seconds): read, handler started,
        handler returned, response ready (after a parked wait), send started, sent."""
        self.total.observe((sent - received) * 1000)
        self.queue.observe((started - received) * 1000)
        self.local.observe((answered - started) * 1000)
        self.remote.observe((ready - answered) * 1000)
        self.throttle.observe(throttle_ms)
        self.send.observe((sent - send_started) * 1000)


BY_API: dict[int, ApiMetrics] = {key: ApiMetrics(key) for key in [*api_key_map, *_LEGACY_APIS]}


class RequestCollector(Collector):
    """RequestMetrics of the APIs that received requests, as Prometheus families."""

    def collect(self) -> Iterable[Metric]:
        requests = CounterMetricFamily(
            f"{_FAMILY}_requests", "Requests received, by API (RequestsPerSec)", labels=["request"]
        )
        phases = {
            phase: HistogramMetricFamily(f"{_FAMILY}_{phase}", doc, labels=["request"])
            for phase, doc in _PHASES.items()
        }
        bounds = [*(str(float(b)) for b in _MS_BUCKETS), "+Inf"]
        for api in BY_API.values():
            if not api.requests:
                continue
            requests.add_metric([api.name], api.requests)
            for phase, histogram in api.phases().items():
                counts = list(histogram.counts)
                cumulative = list(accumulate(counts))
                phases[phase].add_metric(
                    [api.name], list(zip(bounds, cumulative, strict=True)), histogram.sum
                )
        return [requests, *phases.values()]


class RequestStamp:
    """What the reader knows of a request when it queues the response for the writer."""

    __slots__ = ("answered", "api", "received", "started", "throttle_ms")

    def __init__(
        self, api: ApiMetrics, received: float, started: float, answered: float, throttle: float
    ) -> None:
        self.api = api
        self.received = received
        self.started = started
        self.answered = answered
        self.throttle_ms = throttle


_listeners: dict[str, tuple[Gauge, Counter, Counter]] = {}


def listener(name: str) -> tuple[Gauge, Counter, Counter]:
    """(connections gauge, authentication successes, failures) of a listener, made once."""
    children = _listeners.get(name)
    if children is None:
        children = (
            CONNECTIONS.labels(listener=name),
            AUTH_SUCCESS.labels(listener=name),
            AUTH_FAILURE.labels(listener=name),
        )
        _listeners[name] = children
    return children
