"""KIP-714 subscriptions and pushes: Kafka's errors, OTLP decoding in every codec, export."""

from __future__ import annotations

import tracemalloc
import uuid
from collections.abc import Mapping

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from prometheus_client import CollectorRegistry, generate_latest

from dataplane.log.compression import compress
from dataplane.protocol.errors import ErrorCode
from dataplane.telemetry.catalog import (
    CLIENT_METRICS,
    InvalidClientMetricsConfig,
    parse,
)
from dataplane.telemetry.collector import TelemetryCollector
from dataplane.telemetry.subscriptions import ClientMetricsManager, subscription_id, uuid_hash
from tests.unit.log.test_compression import zstd_bomb


class Configs:
    def __init__(self) -> None:
        self.by_name: dict[str, dict[str, str]] = {}

    def resource_names(self, resource_type: int) -> list[str]:
        assert resource_type == CLIENT_METRICS
        return sorted(self.by_name)

    def resource_configs(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self.by_name.get(name, {})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


ATTRS = {
    "client_id": "app-1",
    "client_software_name": "librdkafka",
    "client_software_version": "2.16.0",
    "client_source_address": "127.0.0.1",
    "client_source_port": "50000",
}


def _manager(**subs: dict[str, str]) -> tuple[ClientMetricsManager, Configs, Clock]:
    configs, clock = Configs(), Clock()
    configs.by_name.update(subs)
    return ClientMetricsManager(configs, 1 << 20, clock), configs, clock


def _payload() -> bytes:
    point = NumberDataPoint(
        as_int=42, attributes=[KeyValue(key="node.id", value=AnyValue(string_value="1"))]
    )
    data = MetricsData(
        resource_metrics=[
            ResourceMetrics(
                scope_metrics=[
                    ScopeMetrics(
                        metrics=[
                            Metric(
                                name="org.apache.kafka.producer.record.send.total",
                                sum=Sum(
                                    data_points=[point],
                                    is_monotonic=True,
                                    aggregation_temporality=AGGREGATION_TEMPORALITY_CUMULATIVE,
                                ),
                            ),
                            Metric(
                                name="org.apache.kafka.producer.buffer.available.bytes",
                                gauge=Gauge(data_points=[NumberDataPoint(as_double=1.5)]),
                            ),
                            Metric(
                                name="org.apache.kafka.producer.latency",
                                histogram=Histogram(
                                    data_points=[
                                        HistogramDataPoint(
                                            count=3,
                                            sum=6.0,
                                            explicit_bounds=[1.0, 5.0],
                                            bucket_counts=[1, 1, 1],
                                        )
                                    ]
                                ),
                            ),
                        ]
                    )
                ]
            )
        ]
    )
    return data.SerializeToString()


def test_new_client_gets_an_instance_id_and_the_matching_subscription() -> None:
    manager, _, _ = _manager(
        prod={
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": "1000",
            "match": "client_software_name=librdkafka,client_id=app-.*",
        },
        other={
            "metrics": "org.apache.kafka.consumer.",
            "interval.ms": "500",
            "match": "client_id=nobody",
        },
    )
    answer = manager.get_subscriptions(None, ATTRS)
    assert answer.error == ErrorCode.none
    assert answer.instance_id.int != 0
    assert answer.metrics == ("org.apache.kafka.producer.",)
    assert answer.interval_ms == 1000
    assert answer.subscription_id == subscription_id(answer.metrics, 1000, answer.instance_id)


def test_all_metrics_and_no_subscription() -> None:
    manager, configs, _ = _manager(a={"metrics": "*,org.x", "interval.ms": "200"})
    assert manager.get_subscriptions(None, ATTRS).metrics == ("*",)
    configs.by_name.clear()
    answer = manager.get_subscriptions(None, ATTRS)
    assert answer.metrics == ()
    assert answer.interval_ms == 300_000


def test_push_flow_errors() -> None:
    manager, configs, clock = _manager(a={"metrics": "*", "interval.ms": "1000"})
    got = manager.get_subscriptions(None, ATTRS)
    iid, sid = got.instance_id, got.subscription_id
    # too early to ask again
    assert manager.get_subscriptions(iid, ATTRS).error == ErrorCode.throttling_quota_exceeded
    # the first push after a Get is accepted at once
    assert manager.push(iid, ATTRS, sid, False, 0, _payload()) == ErrorCode.none
    clock.now += 100
    assert (
        manager.push(iid, ATTRS, sid, False, 0, _payload()) == ErrorCode.throttling_quota_exceeded
    )
    clock.now += 1000
    assert (
        manager.push(iid, ATTRS, sid + 1, False, 0, _payload()) == ErrorCode.unknown_subscription_id
    )
    # a changed subscription: the old id is unknown, a Get right away gets the new one
    configs.by_name["a"] = {"metrics": "org.", "interval.ms": "1000"}
    clock.now += 1000
    assert manager.push(iid, ATTRS, sid, False, 0, _payload()) == ErrorCode.unknown_subscription_id
    again = manager.get_subscriptions(iid, ATTRS)
    assert again.error == ErrorCode.none
    assert again.subscription_id != sid
    sid = again.subscription_id
    clock.now += 1000
    assert manager.push(iid, ATTRS, sid, False, 9, b"x") == ErrorCode.unsupported_compression_type
    clock.now += 1000
    manager.max_bytes = 10
    assert manager.push(iid, ATTRS, sid, False, 0, _payload()) == ErrorCode.telemetry_too_large
    manager.max_bytes = 1 << 20
    clock.now += 1000
    assert manager.push(iid, ATTRS, sid, False, 0, b"\xff\xff") == ErrorCode.invalid_record
    clock.now += 1000
    assert manager.push(iid, ATTRS, sid, True, 0, _payload()) == ErrorCode.none
    clock.now += 1000
    assert manager.push(iid, ATTRS, sid, False, 0, _payload()) == ErrorCode.invalid_request
    assert manager.push(None, ATTRS, sid, False, 0, b"") == ErrorCode.invalid_request
    assert manager.push(uuid.UUID(int=0), ATTRS, sid, False, 0, b"") == ErrorCode.invalid_request


def test_a_compressed_push_is_not_inflated_past_telemetry_max_bytes() -> None:
    """A 32 KiB zstd push that inflates to 1 GiB: TELEMETRY_TOO_LARGE, with no more than
    telemetry.max.bytes (1 MiB here) inflated (Kafka checks the compressed size only)."""
    manager, _, _ = _manager(a={"metrics": "*", "interval.ms": "1000"})
    got = manager.get_subscriptions(None, ATTRS)
    bomb = zstd_bomb(8192)
    tracemalloc.start()
    try:
        error = manager.push(got.instance_id, ATTRS, got.subscription_id, False, 4, bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error == ErrorCode.telemetry_too_large
    assert peak < 2 * manager.max_bytes


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_pushed_metrics_exported_in_every_codec(codec: int) -> None:
    manager, _, clock = _manager(a={"metrics": "*", "interval.ms": "1000"})
    got = manager.get_subscriptions(None, ATTRS)
    payload = compress(codec, _payload(), xerial=True)
    assert manager.push(got.instance_id, ATTRS, got.subscription_id, False, codec, payload) == (
        ErrorCode.none
    )
    registry = CollectorRegistry()
    registry.register(TelemetryCollector(manager))
    text = generate_latest(registry).decode()
    iid = str(got.instance_id)
    assert "# TYPE org_apache_kafka_producer_record_send_total counter" in text
    assert (
        f'org_apache_kafka_producer_record_send_total{{client_id="app-1",client_instance_id="{iid}",'
        'client_software_name="librdkafka",client_software_version="2.16.0",node_id="1"} 42.0'
    ) in text
    assert (
        f'org_apache_kafka_producer_buffer_available_bytes{{client_id="app-1",client_instance_id="{iid}"'
        in text
    )
    assert "org_apache_kafka_producer_latency_bucket{" in text
    assert 'le="+Inf"} 3.0' in text
    # a client that stops pushing is forgotten after max(60 s, 3 intervals)
    clock.now += 61_000
    assert "org_apache_kafka_producer" not in generate_latest(registry).decode()


def test_subscription_id_is_an_int32_like_kafka() -> None:
    iid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    sid = subscription_id(["*"], 1000, iid)
    assert -(2**31) <= sid < 2**31
    assert sid == subscription_id(["*"], 1000, iid)
    assert sid != subscription_id(["*"], 2000, iid)
    assert 0 <= uuid_hash(iid) < 2**32


@pytest.mark.parametrize(
    "configs",
    [
        {"interval.ms": "50"},
        {"interval.ms": "x"},
        {"match": "client_color=red"},
        {"match": "client_id=("},
        {"match": "client_id"},
        {"bogus": "1"},
    ],
)
def test_invalid_configs_are_refused(configs: dict[str, str]) -> None:
    with pytest.raises(InvalidClientMetricsConfig):
        parse("sub", configs)


def test_match_must_cover_the_whole_attribute() -> None:
    sub = parse("s", {"match": "client_id=app"})
    assert not sub.matches({"client_id": "app-1"})
    assert parse("s", {"match": "client_id=app.*"}).matches({"client_id": "app-1"})
    assert parse("s", {}).matches({})
