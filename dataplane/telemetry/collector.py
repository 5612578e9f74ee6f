"""The pushed client metrics on the broker's Prometheus endpoint: the latest push of every
client instance still pushing (an instance that stops is forgotten after its expiry), merged
into one family per metric name with each client's samples told apart by its labels."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from dataplane.telemetry.subscriptions import ClientMetricsManager


class TelemetryCollector(Collector):
    def __init__(self, manager: ClientMetricsManager) -> None:
        self._manager = manager

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        for pushed in self._manager.latest():
            for family in pushed:
                metric = families.get(family.name)
                if metric is None:
                    metric = families[family.name] = Metric(family.name, family.doc, family.kind)
                elif metric.type != family.kind:
                    continue  # two clients disagree on a metric's type: keep the first
                for name, labels, value in family.samples:
                    metric.add_sample(name, dict(labels), value)
        return list(families.values())
