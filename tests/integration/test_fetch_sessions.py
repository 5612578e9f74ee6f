"""Incremental fetch sessions (KIP-227) with real consumers on 2 brokers: the Java client and
kafka-python keep a session per broker and read many partitions through incremental fetches
(librdkafka, which never opens one, reads the same through full fetches); with one cache slot
per broker and no minimum age (min.incremental.fetch.session.eviction.ms=0) two consumers evict
each other's sessions and recover with full fetches; a partition whose leader moves while it is
in a session is answered NOT_LEADER_OR_FOLLOWER by the old leader, and the consumer reads it on
from the new one. Every record is read exactly once.

Each broker serves Prometheus metrics: the session gauges and eviction counter
(kafka_server_fetch_session_cache_*) show the sessions the clients keep.
"""

from __future__ import annotations

import re
import socket
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import admin_operations
from cluster.admin import Brokers, metadata
from cluster.local import LocalCluster, free_base_port
from tests.integration.clients.drivers import Running, ensure_setup, latin1
from tests.integration.conftest import wait_for

BROKERS = (1, 2)
SESSION_CLIENTS = ["java-4.3.0", "kafka-python"]
_FAMILY = "kafka_server_fetch_session_cache"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    ensure_setup()
    tmp = tmp_path_factory.mktemp("fetch_sessions")
    overrides = {
        "max.incremental.fetch.session.cache.slots": "1",
        "min.incremental.fetch.session.eviction.ms": "0",
        "auto.create.topics.enable": "false",
    }
    c = LocalCluster(2, 1, tmp, free_base_port(2, 1), overrides, log_level="INFO")
    c.metrics_ports = {}  # type: ignore[attr-defined]
    for b in BROKERS:  # each broker its own metrics endpoint (an override would share one)
        port = c.metrics_ports[b] = _free_port()  # type: ignore[attr-defined]
        node = c.nodes[f"broker-{b}"]
        node.config_file.write_text(node.config_file.read_text() + f"metrics.port={port}\n")
    try:
        c.start()
        wait_for(lambda: len(metadata(Brokers(c.bootstrap)).brokers) == 2, what="2 brokers")
        yield c
    finally:
        c.stop()


def metric(cluster: LocalCluster, broker: int, name: str) -> float:
    port = cluster.metrics_ports[broker]  # type: ignore[attr-defined]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = re.search(rf"^{_FAMILY}_{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def cached_partitions(cluster: LocalCluster) -> int:
    """Partitions in the sessions of both brokers (one slot each: one consumer's)."""
    return int(sum(metric(cluster, b, "num_incremental_fetch_partitions_cached") for b in BROKERS))


def create(cluster: LocalCluster, topic: str, partitions: int, rf: int = 1) -> None:
    """Leaders alternate between the brokers: partition p on broker 1 + p % 2 first."""
    assignment = [[1 + (p + r) % 2 for r in range(rf)] for p in range(partitions)]
    a = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replica_assignment=assignment)
    a.create_topics([new])[topic].result(30)
    wait_for(
        lambda: all(
            p.leader > 0 for p in metadata(Brokers(cluster.bootstrap), [topic]).topics[0].partitions
        ),
        what=f"{topic} leaders",
    )


def produce(cluster: LocalCluster, topic: str, partitions: int, wave: int) -> list[str]:
    """One record per partition (acks=all), value ``<topic>/<wave>/<p>``; the values."""
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    failed: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    values = [f"{topic}/{wave}/{i}" for i in range(partitions)]
    for i, value in enumerate(values):
        p.produce(topic, value.encode(), partition=i, on_delivery=report)
    assert p.flush(60) == 0, failed
    assert not failed, failed
    return values


def consumer(driver: str, cluster: LocalCluster, topic: str, expect: int) -> Running:
    return Running(
        driver,
        "consume",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        topic,
        "--expect",
        str(expect),
        "--timeout",
        "90",
    )


def read(c: Running, count: int, what: str) -> None:
    """Wait until the consumer has printed `count` records."""
    c.wait_line(lambda _: len(c.lines) >= count, 60, what)


def check_exactly_once(c: Running, values: list[str]) -> None:
    result = c.finish(60)
    assert result.returncode == 0, result.stderr[-3000:]
    got = [(latin1(line["value"]) or b"").decode() for line in result.lines]
    assert sorted(got) == sorted(values)  # all of them, none twice
    positions = [(line["partition"], line["offset"]) for line in result.lines]
    assert len(set(positions)) == len(positions)


@pytest.mark.parametrize("driver", [*SESSION_CLIENTS, "confluent"])
def test_many_partitions_across_incremental_fetches(cluster: LocalCluster, driver: str) -> None:
    """Three waves of one record per partition while the consumer runs: the first read by its
    first (full) fetches, the others by incremental ones that list only what moved."""
    partitions = {"java-4.3.0": 120, "kafka-python": 121, "confluent": 122}[driver]
    topic = f"many-{driver}"
    create(cluster, topic, partitions)
    c = consumer(driver, cluster, topic, 3 * partitions)
    try:
        values = produce(cluster, topic, partitions, 0)
        read(c, partitions, "the first wave")
        if driver in SESSION_CLIENTS:  # its sessions hold every partition, across the brokers
            wait_for(lambda: cached_partitions(cluster) == partitions, what="sessions cached")
        for wave in (1, 2):
            values += produce(cluster, topic, partitions, wave)
            read(c, (wave + 1) * partitions, f"wave {wave}")
        check_exactly_once(c, values)
    finally:
        c.kill()


def test_evicted_sessions_recover_with_a_full_fetch(cluster: LocalCluster) -> None:
    """One slot per broker and two consumers: each full fetch evicts the other consumer's
    session (unused for more than 0 ms), whose next incremental fetch gets
    FETCH_SESSION_ID_NOT_FOUND and starts over with a full fetch."""
    partitions, waves = 40, 5
    topic = "evict"
    create(cluster, topic, partitions)
    before = sum(metric(cluster, b, "incremental_fetch_sessions_evictions_total") for b in BROKERS)
    consumers = [consumer(d, cluster, topic, waves * partitions) for d in SESSION_CLIENTS]
    try:
        values: list[str] = []
        for wave in range(waves):
            values += produce(cluster, topic, partitions, wave)
            for c in consumers:
                read(c, (wave + 1) * partitions, f"wave {wave}")
        for c in consumers:
            check_exactly_once(c, values)
    finally:
        for c in consumers:
            c.kill()
    after = sum(metric(cluster, b, "incremental_fetch_sessions_evictions_total") for b in BROKERS)
    assert after > before
    logs = "".join(cluster.nodes[f"broker-{b}"].log_file.read_text() for b in BROKERS)
    assert "max.incremental.fetch.session.cache.slots=1 is full" in logs


@pytest.mark.parametrize("driver", SESSION_CLIENTS)
def test_leader_change_under_a_session(cluster: LocalCluster, driver: str) -> None:
    """Partition 0 moves from broker 1 to broker 2 (replicas reordered, preferred election)
    while it is in the consumer's session on broker 1: broker 1 answers it with
    NOT_LEADER_OR_FOLLOWER, the client drops it from that session and reads it on from
    broker 2; nothing is lost or read twice."""
    partitions = 10
    topic = f"moving-{driver}"
    create(cluster, topic, partitions, rf=2)
    c = consumer(driver, cluster, topic, 3 * partitions)
    try:
        values = produce(cluster, topic, partitions, 0)
        read(c, partitions, "the first wave")
        wait_for(lambda: cached_partitions(cluster) == partitions, what="sessions cached")
        brokers = Brokers(cluster.bootstrap)
        moved = admin_operations.reassign_partitions(brokers, [(topic, 0, [2, 1])])
        assert moved == {f"{topic}-0": None}
        wait_for(
            lambda: metadata(brokers, [topic]).topics[0].partitions[0].replicas == [2, 1],
            what="replicas reordered",
        )
        elected = admin_operations.elect_leaders(brokers, "preferred", [(topic, 0)])
        assert elected == {f"{topic}-0": None}
        wait_for(
            lambda: metadata(brokers, [topic]).topics[0].partitions[0].leader == 2,
            what="broker 2 leads partition 0",
        )
        values += produce(cluster, topic, partitions, 1)
        read(c, 2 * partitions, "the wave after the move")
        # broker 1 (even partitions) dropped partition 0 from its session, broker 2 added it
        per_broker = {1: partitions // 2 - 1, 2: partitions // 2 + 1}
        wait_for(
            lambda: all(
                metric(cluster, b, "num_incremental_fetch_partitions_cached") == n
                for b, n in per_broker.items()
            ),
            what="the sessions follow the move",
        )
        values += produce(cluster, topic, partitions, 2)
        read(c, 3 * partitions, "the last wave")
        check_exactly_once(c, values)
    finally:
        c.kill()
