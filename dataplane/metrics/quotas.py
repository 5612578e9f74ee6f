"""Quota throttle times (Kafka's per-quota-type throttle-time sensors, kafka.server:type=Produce,
Fetch, Request, ControllerMutation), recorded by the quota managers when they throttle a client.

Labelled by quota type only: a per-client series would grow with every client id seen.
"""

from __future__ import annotations

from prometheus_client import Histogram

QUOTA_TYPES = ("produce", "fetch", "request", "controller_mutation")

THROTTLE_TIME = Histogram(
    "kafka_server_quota_throttle_time_ms",
    "Throttle time given to clients that exceeded a quota, by quota type (throttle-time)",
    ["quota_type"],
    buckets=(1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000),
)
_BY_TYPE = {quota: THROTTLE_TIME.labels(quota_type=quota) for quota in QUOTA_TYPES}


def throttled(quota_type: str, throttle_ms: float) -> None:
    """A client got `throttle_ms` of throttling for exceeding its `quota_type` quota (one of
    QUOTA_TYPES); zero throttles are not recorded."""
    if throttle_ms > 0:
        _BY_TYPE[quota_type].observe(throttle_ms)
