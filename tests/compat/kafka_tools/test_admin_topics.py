"""kafka-topics: create, describe, alter and delete topics, the listings of unhealthy
partitions, and what they show while a broker is down.
"""

from __future__ import annotations

from cluster.local import LocalCluster
from tests.compat.kafka_tools.support import describe_topic, fails, ok, rows
from tests.integration.conftest import wait_for


def test_topics_create_describe_alter_delete(cluster: LocalCluster) -> None:
    b = cluster.bootstrap
    created = ok(
        b,
        "kafka-topics --create --topic ops --partitions 3 --replication-factor 3 "
        "--config cleanup.policy=compact --config max.message.bytes=20000",
    )
    assert created == "Created topic ops.\n"
    assert "ops" in ok(b, "kafka-topics --list").split()
    described = describe_topic(b, "ops")
    assert described[0][:3] == ["Topic:", "ops", "TopicId:"]
    assert described[0][4:] == [
        "PartitionCount:",
        "3",
        "ReplicationFactor:",
        "3",
        "Configs:",
        "cleanup.policy=compact,max.message.bytes=20000",
    ]
    assert [r[3] for r in described[1:]] == ["0", "1", "2"]
    for r in described[1:]:
        assert r[4:10:2] == ["Leader:", "Replicas:", "Isr:"]
        assert r[10:] == ["Elr:", "LastKnownElr:"]
        assert r[5] == r[7].split(",")[0]  # the preferred replica leads
        assert sorted(r[7].split(",")) == sorted(r[9].split(",")) == ["1", "2", "3"]
    assert {r[5] for r in described[1:]} == {"1", "2", "3"}  # leaders spread over brokers

    error = "Error while executing topic command : "
    assert fails(b, "kafka-topics --create --topic ops").splitlines()[0] == (
        f"{error}Topic 'ops' already exists."
    )
    assert fails(b, "kafka-topics --create --topic wide --replication-factor 5").splitlines()[
        0
    ] == (
        f"{error}Unable to replicate the partition 5 time(s): The target replication factor "
        "of 5 cannot be reached because only 3 broker(s) are registered or some brokers have "
        "all their log directories cordoned."
    )
    assert fails(b, "kafka-topics --describe --topic nope").splitlines()[0] == (
        f"{error}Topic 'nope' does not exist as expected"
    )
    assert ok(b, "kafka-topics --alter --topic ops --partitions 5") == ""
    assert describe_topic(b, "ops")[0][5] == "5"
    assert fails(b, "kafka-topics --alter --topic ops --partitions 2").splitlines()[0] == (
        f"{error}The topic ops currently has 5 partition(s); 2 would not be an increase."
    )

    # All healthy: nothing under-replicated, unavailable or under min ISR; at min ISR only the
    # partitions of a topic whose min.insync.replicas is its replication factor.
    ok(
        b,
        "kafka-topics --create --topic strict --partitions 2 --replication-factor 3 "
        "--config min.insync.replicas=3",
    )
    for flag in ("under-replicated", "unavailable", "under-min-isr"):
        assert ok(b, f"kafka-topics --describe --{flag}-partitions") == "", flag
    at_min = rows(ok(b, "kafka-topics --describe --at-min-isr-partitions"))
    assert [(r[1], r[3]) for r in at_min] == [("strict", "0"), ("strict", "1")]
    overrides = rows(ok(b, "kafka-topics --describe --topics-with-overrides"))
    assert {r[1]: r[-1] for r in overrides} == {
        "ops": "cleanup.policy=compact,max.message.bytes=20000",
        "strict": "min.insync.replicas=3",
    }
    assert ok(b, "kafka-topics --delete --topic strict") == ""
    wait_for(lambda: "strict" not in ok(b, "kafka-topics --list").split(), what="the deletion")


def test_topics_while_a_broker_is_down(cluster: LocalCluster) -> None:
    """Broker 3 stopped: its replicas leave the ISR (under-replicated), a partition only it
    has goes offline (unavailable, and no unclean election can help), and both heal when it
    is back."""
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic down --replica-assignment 3:1")
    ok(b, "kafka-topics --create --topic alone --replica-assignment 3")
    cluster.stop_node("broker-3")
    try:
        up = ",".join(a for a in b.split(",") if a != f"127.0.0.1:{cluster.nodes['broker-3'].port}")

        def listed(flag: str) -> list[list[str]]:
            out = rows(ok(up, f"kafka-topics --describe --{flag}-partitions"))
            return [r[3:10] for r in out if r[1] in ("down", "alone")]

        wait_for(lambda: listed("under-replicated"), what="the ISR to shrink")
        assert listed("under-replicated") == [
            ["0", "Leader:", "1", "Replicas:", "3,1", "Isr:", "1"]
        ]
        assert listed("unavailable") == [["0", "Leader:", "none", "Replicas:", "3", "Isr:", "3"]]
        out = fails(up, "kafka-leader-election --election-type unclean --topic alone --partition 0")
        assert out.splitlines()[0].startswith(
            "Error completing leader election (UNCLEAN) for partition: alone-0: "
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException"
        ), out
    finally:
        cluster.start_node("broker-3")
        cluster.wait_ready(names=["broker-3"])
    wait_for(
        lambda: ok(b, "kafka-topics --describe --under-replicated-partitions") == "",
        timeout=60,
        what="the ISR to be full again",
    )
    assert ok(b, "kafka-topics --describe --unavailable-partitions") == ""
