"""KIP-714 client telemetry end to end: a CLIENT_METRICS subscription set with the Java admin
client, then a confluent-kafka (librdkafka) producer and a Java producer, both unchanged
(enable.metrics.push defaults to true), push their metrics; the broker's /metrics shows them
with each client's instance id and labels. Also ListConfigResources and DescribeConfigs over
the subscription, and an invalid subscription refused."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster
from cluster.polling import wait_for
from tests.integration.clients.drivers import Running, ensure_setup, run_driver
from tests.integration.conftest import running_cluster

JAVA = "java-4.3.0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def telemetry_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalCluster, int]]:
    ensure_setup()
    port = _free_port()
    with running_cluster(
        tmp_path_factory.mktemp("telemetry"), brokers=1, metas=1, metrics_port=str(port)
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
        out = run_driver(
            JAVA,
            "admin",
            "alter-configs",
            "--bootstrap",
            cluster.bootstrap,
            "--client-metrics",
            "all-producers",
            "--set",
            "metrics=org.apache.kafka.",
            "--set",
            "interval.ms=1000",
            "--set",
            "match=client_id=telemetry-py|producer-[0-9]+",
        )
        assert out.returncode == 0, (out.lines, out.stderr)
        assert out.lines[-1]["error"] is None, (out.lines, out.stderr)
        yield cluster, port


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def _poll(
    port: int, check: Callable[[str], list[str]], what: str, timeout: float = 60
) -> list[str]:
    return wait_for(lambda: check(_scrape(port)), timeout, f"{what} on /metrics", 0.5)


def _pushed(client_id_prefix: str) -> Callable[[str], list[str]]:
    """Lines of pushed client metrics from clients whose client id starts with the prefix."""

    def check(text: str) -> list[str]:
        return [
            line
            for line in text.splitlines()
            if line.startswith("org_apache_kafka_")
            and f'client_id="{client_id_prefix}' in line
            and 'client_instance_id="' in line
        ]

    return check


def test_subscription_is_listed_and_described(telemetry_cluster: tuple[LocalCluster, int]) -> None:
    cluster, _ = telemetry_cluster
    out = run_driver(
        JAVA,
        "admin",
        "describe-configs",
        "--bootstrap",
        cluster.bootstrap,
        "--client-metrics",
        "all-producers",
    )
    assert out.returncode == 0, out.stderr
    configs = out.lines[-1]["configs"]
    assert configs["interval.ms"]["value"] == "1000"
    assert configs["metrics"]["value"] == "org.apache.kafka."
    bad = run_driver(
        JAVA,
        "admin",
        "alter-configs",
        "--bootstrap",
        cluster.bootstrap,
        "--client-metrics",
        "bad",
        "--set",
        "interval.ms=5",
    )
    assert bad.lines[-1]["error"] == "INVALID_CONFIG", bad.lines


def test_librdkafka_producer_pushes_metrics(telemetry_cluster: tuple[LocalCluster, int]) -> None:
    cluster, port = telemetry_cluster
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": "telemetry-py"})
    stop = threading.Event()

    def keep_producing() -> None:
        while not stop.is_set():
            producer.produce("t", b"v")
            producer.poll(0.05)

    worker = threading.Thread(target=keep_producing, daemon=True)
    worker.start()
    try:
        lines = _poll(port, _pushed("telemetry-py"), "librdkafka's pushed metrics")
    finally:
        stop.set()
        worker.join(10)
        producer.flush(10)
    assert any(line.startswith("org_apache_kafka_producer_") for line in lines), lines[:5]
    assert any(
        'client_software_name="confluent-kafka-python"' in line
        or 'client_software_name="librdkafka"' in line
        for line in lines
    ), lines[:3]


def test_java_producer_pushes_metrics(telemetry_cluster: tuple[LocalCluster, int]) -> None:
    cluster, port = telemetry_cluster
    running = Running(
        JAVA,
        "produce-stream",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        "t",
        "--duration",
        "60",
        "--rate",
        "20",
        "--producer-id",
        "telemetry-java",
        "--stop-on-eof",
        "true",
    )
    try:
        lines = _poll(port, _java_lines, "the Java client's pushed metrics")
    finally:
        running.finish(60)
    assert any(line.startswith("org_apache_kafka_producer_") for line in lines), lines[:5]


def _java_lines(text: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if line.startswith("org_apache_kafka_")
        and 'client_software_name="apache-kafka-java"' in line
        and 'client_instance_id="' in line
    ]
