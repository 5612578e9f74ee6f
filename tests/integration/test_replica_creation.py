"""A broker stays live while it creates thousands of replicas.

Opening a replica is file work (a directory and six files), about a millisecond each here. The
replica manager does it in slices that yield to the broker's event loop, so the heartbeats to
the meta service keep going: before, a 5,000-partition topic held each broker's loop for
seconds and the meta service fenced every broker at once. Here the lease is short (2 s, a
heartbeat every 250 ms) and one broker creates 5,000 replicas, several seconds of work (before
the slices, this fenced it every time): the broker must keep its lease throughout, so no
partition's leadership ever moves (every leader epoch stays 0), and it must answer requests
while it works.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient, topic_metadata

PARTITIONS = 5000
API_VERSIONS = 18


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("creation"),
        1,
        1,
        broker_session_timeout_ms="2000",
        broker_heartbeat_interval_ms="250",
    ) as c:
        yield c


def leader_epochs(port: int, topic: str) -> dict[int, tuple[int, int]]:
    """(leader, leader epoch) of each partition, from Metadata v12."""
    with WireClient(port) as c:
        t = topic_metadata(c, topic)
    return {p.partition_index: (p.leader_id, p.leader_epoch) for p in t.partitions}


def test_a_broker_creating_thousands_of_replicas_keeps_its_lease(cluster: LocalCluster) -> None:
    broker = cluster.nodes["broker-1"]
    log_dir = cluster.data_dir / "broker-1"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("many", PARTITIONS, 1)])["many"].result(60)

    slowest = [0.0]  # the broker answers while it creates the replicas

    def opened(c: WireClient) -> bool:
        t = time.monotonic()
        c.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        slowest[0] = max(slowest[0], time.monotonic() - t)
        return sum(1 for _ in log_dir.glob("many-*/partition.metadata")) >= PARTITIONS

    with WireClient(broker.port) as c:
        wait_for(lambda: opened(c), 120, f"{PARTITIONS} replicas opened", interval=0.1)
    epochs = leader_epochs(broker.port, "many")
    assert len(epochs) == PARTITIONS
    moved = {p: e for p, e in epochs.items() if e != (1, 0)}
    assert not moved, f"leaderships moved (the broker was fenced): {dict(list(moved.items())[:5])}"
    assert slowest[0] < 1.5, f"an ApiVersions answer took {slowest[0]:.2f} s as replicas opened"
