"""Differential tests: Apache Kafka 4.4 and Rafka side by side, answers compared field by field.

One Apache Kafka and one Rafka (each a single broker; Rafka with one meta node) serve the whole
session; `pair` talks to both. Cases that need replication start their own three-broker pair
in their module. The session ends with the table of every compared case (`make compat`), also
written to .cache/compat/report.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat.pair import REPORT, Pair
from tests.integration.conftest import running_cluster
from tests.peers.apache_kafka import ApacheKafka

REPO = Path(__file__).resolve().parents[2]


# Settings both single brokers are started with, as tests/peers/apache_kafka.py and
# cluster.local.LocalCluster set them for one broker (each sets the replication factors), so
# DescribeConfigs finds them set the same way on both (STATIC_BROKER_CONFIG).
SAME_SETTINGS: dict[str, Any] = {  # broker settings, for running_cluster(**SAME_SETTINGS)
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
}


# Kafka 4.4 batches a KIP-848 group's target assignment (at most one per interval, 1 s by
# default); Rafka computes it as soon as the members change, as Kafka does with an interval of 0,
# which keeps group answers independent of timing (the settings are allowlisted in
# test_configs as Kafka's assignment batching).
KAFKA_ONLY = {
    "group.consumer.assignment.interval.ms": "0",
    "group.share.assignment.interval.ms": "0",
}


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    kafka = ApacheKafka(
        tmp_path_factory.mktemp("apache-kafka"),
        brokers=1,
        overrides=SAME_SETTINGS | KAFKA_ONLY,
    )
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="session")
def rafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_cluster(
        tmp_path_factory.mktemp("rafka"), brokers=1, metas=1, **SAME_SETTINGS
    ) as cluster:
        yield cluster.bootstrap


@pytest.fixture(scope="session")
def pair(apache_kafka: ApacheKafka, rafka: str) -> Iterator[Pair]:
    p = Pair(apache_kafka.bootstrap, rafka)
    yield p
    p.close()


def create_topics(pair: Pair, *topics: NewTopic) -> None:
    """The same topics on both brokers (an existing one is an error: names are per case)."""
    for side in pair.sides:
        admin = AdminClient({"bootstrap.servers": side.bootstrap})
        for name, future in admin.create_topics(list(topics), operation_timeout=30).items():
            future.result(60)
            del name


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not REPORT:
        return
    same = sum(r.verdict == "same" for r in REPORT)
    allowed = sum(r.verdict.startswith("allowlisted") for r in REPORT)
    lines = [
        "| case | Apache Kafka 4.4 | Rafka | verdict |",
        "|---|---|---|---|",
        *(f"| {r.case} | {r.kafka} | {r.rafka} | {r.verdict} |" for r in REPORT),
        "",
        f"{len(REPORT)} cases: {same} same, {allowed} allowlisted, "
        f"{len(REPORT) - same - allowed} different",
    ]
    terminalreporter.section("Apache Kafka vs Rafka")
    for line in lines:
        terminalreporter.write_line(line)
    out = REPO / ".cache" / "compat" / "report.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
