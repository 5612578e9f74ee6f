"""The broker's Prometheus endpoint (metrics.port) reports requests, bytes and partitions."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import running_cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sample(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_metrics_endpoint(tmp_path: Path) -> None:
    port = _free_port()
    with running_cluster(tmp_path, brokers=1, metas=1, metrics_port=port) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("m", 2, 1)])["m"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(100):
            producer.produce("m", f"v{i}".encode())
        assert producer.flush(15) == 0
        text = (
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        )
        assert _sample(text, 'rafka_requests_total{api="produce"}') >= 1
        assert _sample(text, "rafka_bytes_in_total") > 1000
        assert _sample(text, 'rafka_partitions{role="leader"}') == 2
        assert _sample(text, "rafka_under_replicated_partitions") == 0
