"""DescribeQuorum, AddRaftVoter, RemoveRaftVoter (KIP-595/836/853) and UnregisterController
(KIP-1312) against Apache Kafka 4.4.

Both answer with one voter (Kafka's combined node, Rafka's single meta node); who leads, the
epoch, the offsets, the timestamps, the directory id (unknown in Kafka's static quorum) and the
listeners (Kafka's CONTROLLER; Rafka's RAFT and META) differ by nature and are masked: the
structure and the fields' meaning must be the same. A running voter that is not the active
controller needs a quorum of three: a pair of its own (`quorum_pair`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from cluster.kafka_client import KafkaConnection, builder
from cluster.polling import wait_for
from tests.compat.pair import Pair, Side
from tests.integration.conftest import running_cluster
from tests.peers.apache_kafka import ApacheKafka

DESCRIBE_CLUSTER, DESCRIBE_QUORUM, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 60, 55, 80, 81
UNREGISTER_CONTROLLER = 94
BY_NATURE = [
    "topics.*.partitions.*.leader_id",
    "topics.*.partitions.*.leader_epoch",
    "topics.*.partitions.*.high_watermark",
    "topics.*.partitions.*.current_voters.*.replica_id",
    "topics.*.partitions.*.current_voters.*.replica_directory_id",
    "topics.*.partitions.*.current_voters.*.log_end_offset",
    "topics.*.partitions.*.current_voters.*.last_fetch_timestamp",
    "topics.*.partitions.*.current_voters.*.last_caught_up_timestamp",
    "nodes.*.node_id",
    "nodes.*.listeners",
]


def topics(version: int, *partitions: tuple[str, int]) -> list[object]:
    b = builder(DESCRIBE_QUORUM, version)
    return [
        b.TopicData(topic_name=name, partitions=[b.PartitionData(partition_index=index)])
        for name, index in partitions
    ]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum(pair: Pair, version: int) -> None:
    _, rafka = pair.call(
        f"DescribeQuorum v{version}",
        DESCRIBE_QUORUM,
        version,
        masked=BY_NATURE,
        topics=topics(version, ("__cluster_metadata", 0)),
    )
    [partition] = rafka["topics"][0]["partitions"]  # type: ignore[index]
    assert len(partition["current_voters"]) == 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("case", "partitions"),
    [
        ("another topic", [("orders", 0)]),
        ("another partition", [("__cluster_metadata", 1)]),
        ("two partitions", [("__cluster_metadata", 0), ("__cluster_metadata", 1)]),
        ("no topic", []),
    ],
)
def test_describe_quorum_of_what_is_not_the_metadata_log(
    pair: Pair, case: str, partitions: list[tuple[str, int]]
) -> None:
    pair.call(f"DescribeQuorum v2: {case}", DESCRIBE_QUORUM, 2, topics=topics(2, *partitions))


def test_voter_changes_of_another_cluster(pair: Pair) -> None:
    """The cluster id is checked first, as Kafka's KafkaRaftClient does."""
    b = builder(ADD_RAFT_VOTER, 1)
    pair.call(
        "AddRaftVoter v1: another cluster id",
        ADD_RAFT_VOTER,
        1,
        masked=["error_message"],  # it names each side's cluster id
        cluster_id="another-cluster",
        timeout=timedelta(seconds=5),
        voter_id=7,
        voter_directory_id=uuid.uuid4(),
        listeners=[b.Listener(name="RAFT", host="127.0.0.1", port=1)],
    )
    pair.call(
        "RemoveRaftVoter v0: another cluster id",
        REMOVE_RAFT_VOTER,
        0,
        masked=["error_message"],
        cluster_id="another-cluster",
        voter_id=7,
        voter_directory_id=uuid.uuid4(),
    )


# ---------------------------------------------------------------- UnregisterController


def active_controller(side: Side) -> int:
    """The Raft leader's id, as DescribeQuorum names it (Kafka's active controller)."""
    answer = side.conn().call(DESCRIBE_QUORUM, 2, topics=topics(2, ("__cluster_metadata", 0)))
    return int(answer.topics[0].partitions[0].leader_id)


def test_unregister_the_active_controller(pair: Pair) -> None:
    """Each side's own active controller (its id differs by nature)."""
    kafka, rafka = pair.both(
        lambda side: side.conn().call(
            UNREGISTER_CONTROLLER, 0, controller_id=active_controller(side)
        )
    )
    pair.compare("UnregisterController v0: the active controller", kafka, rafka)


@pytest.mark.parametrize("controller_id", [42, -1])
def test_unregister_an_unknown_controller(pair: Pair, controller_id: int) -> None:
    pair.call(
        f"UnregisterController v0: controller id {controller_id}, not registered",
        UNREGISTER_CONTROLLER,
        0,
        controller_id=controller_id,
    )


@pytest.fixture(scope="module")
def quorum_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pair, ApacheKafka]]:
    """Three controllers beside a broker on each side: Kafka's controllers 100-102, Rafka's
    meta nodes 1-3."""
    kafka = ApacheKafka(tmp_path_factory.mktemp("quorum-kafka"), brokers=1, controllers=3)
    kafka.start(timeout=180)
    try:
        with running_cluster(tmp_path_factory.mktemp("quorum-rafka"), brokers=1, metas=3) as r:
            p = Pair(kafka.bootstrap, r.bootstrap)
            yield p, kafka
            p.close()
    finally:
        kafka.stop()


def kafka_registered(kafka: ApacheKafka, controller: int) -> bool:
    """Whether Kafka's controllers list `controller` as registered (DescribeCluster to a
    controller's own listener, as a client with bootstrap.controllers asks)."""
    with KafkaConnection(kafka.controller_ports[controller]) as c:
        answer = c.call(
            DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=2
        )
    return controller in {b.broker_id for b in answer.brokers}


def rafka_fetched_since(side: Side, controller: int, since_ms: int) -> bool:
    """Whether the Raft leader heard from voter `controller` after `since_ms` (a running voter
    registers again so)."""
    answer = side.conn().call(DESCRIBE_QUORUM, 2, topics=topics(2, ("__cluster_metadata", 0)))
    [voter] = [
        v for v in answer.topics[0].partitions[0].current_voters if v.replica_id == controller
    ]
    return int(voter.last_fetch_timestamp) > since_ms


def test_unregister_a_running_voter_that_is_not_active(
    quorum_pair: tuple[Pair, ApacheKafka],
) -> None:
    """KIP-1312: its registration goes, and the running controller registers again at once
    (Kafka's ControllerRegistrationManager sees it gone): unregistering it again, once it did,
    succeeds again. (Not a third time at once: Kafka's manager may miss a removal that comes
    while its registration is in flight, and stay unregistered.)"""
    pair, kafka = quorum_pair
    active = {side.name: active_controller(side) for side in pair.sides}
    other = {
        "kafka": 100 if active["kafka"] != 100 else 101,
        "rafka": 1 if active["rafka"] != 1 else 2,
    }

    def unregister(case: str) -> None:
        kafka_answer, rafka_answer = pair.both(
            lambda side: side.conn().call(UNREGISTER_CONTROLLER, 0, controller_id=other[side.name])
        )
        pair.compare(case, kafka_answer, rafka_answer)

    unregister("UnregisterController v0: a running voter, not active")
    since_ms = int(time.time() * 1000)  # the leader's clock is this machine's
    wait_for(lambda: kafka_registered(kafka, other["kafka"]), 30, "Kafka's registration")
    wait_for(
        lambda: rafka_fetched_since(pair.rafka, other["rafka"], since_ms),
        30,
        "Rafka's voter heard from",
    )
    unregister("UnregisterController v0: a running voter, not active, once registered again")
