"""Pushed telemetry payloads: decompressed (Kafka's record codecs, never past
telemetry.max.bytes: a small payload may inflate to gigabytes) and decoded from OTLP
MetricsData into Prometheus samples, once per push, so a scrape only copies them out.

An OTLP metric becomes a Prometheus family of its name with dots and other characters
Prometheus forbids turned into underscores (``org.apache.kafka.producer.record.send.total``
-> ``org_apache_kafka_producer_record_send_total``): monotonic sums are counters, other sums
and gauges gauges, histograms and summaries themselves. Each sample carries the client's
instance id and the data point's and resource's attributes as labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    SummaryDataPoint,
)

from dataplane.log.batch import RecordError
from dataplane.log.compression import InflatedTooLarge, inflate

COMPRESSION_TYPES = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd (Kafka's CompressionType)
# Offered to clients, preferred first (Kafka's ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES)
ACCEPTED_COMPRESSION = (4, 3, 1, 2)

_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


class InvalidPayload(ValueError):
    """Not an OTLP MetricsData payload in the announced compression (INVALID_RECORD)."""


class PayloadTooLarge(ValueError):
    """Inflates beyond telemetry.max.bytes (TELEMETRY_TOO_LARGE); refused without inflating
    past it."""


@dataclass(frozen=True, slots=True)
class Family:
    """One decoded metric: Prometheus name, type, help text and samples
    (sample name, labels, value)."""

    name: str
    kind: str  # counter, gauge, histogram, summary
    doc: str
    samples: tuple[tuple[str, Mapping[str, str], float], ...]


def prometheus_name(name: str) -> str:
    """An OTLP metric or attribute name as a valid Prometheus name."""
    clean = _INVALID.sub("_", name)
    return clean if clean and not clean[0].isdigit() else f"_{clean}"


def decode(
    payload: bytes, compression: int, max_bytes: int, labels: Mapping[str, str]
) -> list[Family]:
    """The families of a pushed payload, each sample labelled with `labels` (the client's
    identity) and its attributes."""
    if compression not in COMPRESSION_TYPES:
        raise InvalidPayload(f"unknown compression type {compression}")
    try:
        raw = inflate(compression, payload, max_bytes)
    except InflatedTooLarge as e:
        raise PayloadTooLarge(f"{e.message}: over telemetry.max.bytes") from e
    except RecordError as e:
        raise InvalidPayload(f"cannot decompress the payload ({e.message})") from e
    data = MetricsData()
    try:
        data.ParseFromString(raw)
    except DecodeError as e:
        raise InvalidPayload(f"not an OTLP MetricsData message ({e})") from e
    families: list[Family] = []
    for resource in data.resource_metrics:
        base = {**_attributes(resource.resource.attributes), **labels}
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                family = _family(metric, base)
                if family is not None:
                    families.append(family)
    return families


def _family(metric: Metric, base: Mapping[str, str]) -> Family | None:
    name = prometheus_name(metric.name)
    kind = metric.WhichOneof("data")
    if kind == "gauge":
        return Family(
            name, "gauge", metric.description, _numbers(name, metric.gauge.data_points, base)
        )
    if kind == "sum":
        total = metric.sum.is_monotonic and metric.sum.aggregation_temporality != (
            AGGREGATION_TEMPORALITY_DELTA
        )
        if total:
            stem = name[: -len("_total")] if name.endswith("_total") else name
            points = _numbers(f"{stem}_total", metric.sum.data_points, base)
            return Family(stem, "counter", metric.description, points)
        return Family(
            name, "gauge", metric.description, _numbers(name, metric.sum.data_points, base)
        )
    if kind == "histogram":
        samples = [s for p in metric.histogram.data_points for s in _histogram(name, p, base)]
        return Family(name, "histogram", metric.description, tuple(samples))
    if kind == "summary":
        samples = [s for p in metric.summary.data_points for s in _summary(name, p, base)]
        return Family(name, "summary", metric.description, tuple(samples))
    return None  # exponential histograms: no Prometheus text form


def _numbers(
    name: str, points: Iterable[NumberDataPoint], base: Mapping[str, str]
) -> tuple[tuple[str, Mapping[str, str], float], ...]:
    return tuple(
        (
            name,
            {**_attributes(p.attributes), **base},
            float(p.as_int if p.WhichOneof("value") == "as_int" else p.as_double),
        )
        for p in points
    )


def _histogram(
    name: str, p: HistogramDataPoint, base: Mapping[str, str]
) -> list[tuple[str, Mapping[str, str], float]]:
    labels = {**_attributes(p.attributes), **base}
    out: list[tuple[str, Mapping[str, str], float]] = []
    cumulative = 0
    bounds = [*(repr(float(b)) for b in p.explicit_bounds), "+Inf"]
    for bound, count in zip(bounds, p.bucket_counts, strict=False):
        cumulative += count
        out.append((f"{name}_bucket", {**labels, "le": bound}, float(cumulative)))
    out.append((f"{name}_count", labels, float(p.count)))
    out.append((f"{name}_sum", labels, p.sum))
    return out


def _summary(
    name: str, p: SummaryDataPoint, base: Mapping[str, str]
) -> list[tuple[str, Mapping[str, str], float]]:
    labels = {**_attributes(p.attributes), **base}
    out: list[tuple[str, Mapping[str, str], float]] = [
        (name, {**labels, "quantile": repr(q.quantile)}, q.value) for q in p.quantile_values
    ]
    out.append((f"{name}_count", labels, float(p.count)))
    out.append((f"{name}_sum", labels, p.sum))
    return out


def _attributes(attributes: Iterable[KeyValue]) -> dict[str, str]:
    return {prometheus_name(kv.key): _string(kv.value) for kv in attributes}


def _string(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind in ("array_value", "kvlist_value", "bytes_value"):
        return str(getattr(value, kind)).strip()
    return str(getattr(value, kind))
