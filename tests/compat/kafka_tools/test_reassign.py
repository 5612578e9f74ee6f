"""kafka-reassign-partitions (generate, execute with a throttle, verify), kafka-log-dirs and
kafka-leader-election.
"""

from __future__ import annotations

import json
from pathlib import Path

from cluster.local import LocalCluster
from tests.compat.kafka_tools.support import Sides, both_fail, describe_topic, fails, ok, produce
from tests.integration.conftest import wait_for


def test_reassign_partitions_with_throttle(cluster: LocalCluster, tmp_path: Path) -> None:
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic moving --replica-assignment 1:2,2:3")
    produce(
        b, "moving", [f"{i}:record-{i}" for i in range(50)], "parse.key=true", "key.separator=:"
    )
    move = tmp_path / "topics.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": "moving"}]}))
    generated = ok(
        b,
        "kafka-reassign-partitions --generate --broker-list 1,2,3 --topics-to-move-json-file",
        str(move),
    ).splitlines()
    assert generated[0] == "Current partition replica assignment"
    current = json.loads(generated[1])["partitions"]
    assert [(p["partition"], p["replicas"]) for p in current] == [(0, [1, 2]), (1, [2, 3])]
    assert [Path(d).name for d in current[0]["log_dirs"]] == ["broker-1", "broker-2"]
    assert generated[3] == "Proposed partition reassignment configuration"
    for p in json.loads(generated[4])["partitions"]:
        assert len(set(p["replicas"])) == 2
        assert set(p["replicas"]) <= {1, 2, 3}

    plan = tmp_path / "plan.json"
    moves = [(0, [3, 2]), (1, [2, 1])]
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "moving", "partition": p, "replicas": r} for p, r in moves
                ],
            }
        )
    )
    reassign = "kafka-reassign-partitions --reassignment-json-file"
    # KIP-860: a plan that changes a partition's replica count, refused when asked to keep it.
    grow = tmp_path / "grow.json"
    growing = {"topic": "moving", "partition": 0, "replicas": [1, 2, 3]}
    grow.write_text(json.dumps({"version": 1, "partitions": [growing]}))
    refused = fails(b, f"{reassign} {grow} --execute --disallow-replication-factor-change")
    assert refused.splitlines()[-2:] == [
        "Error reassigning partition(s):",
        "moving-0: The replication factor is changed from 2 to 3",
    ]
    executed = ok(b, f"{reassign} {plan} --execute --throttle 10000000").splitlines()
    assert executed[0] == "Current partition replica assignment"
    assert executed[3:] == [
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        "The inter-broker throttle limit was set to 10000000 B/s",
        "Successfully started partition reassignments for moving-0,moving-1",
    ]
    # The throttles stay until --verify sees the moves done.
    topic_configs = "kafka-configs --describe --entity-type topics --entity-name moving"
    throttled = ok(b, topic_configs)
    assert "  follower.replication.throttled.replicas=0:3,1:1 " in throttled
    assert "  leader.replication.throttled.replicas=0:1,0:2,1:2,1:3 " in throttled
    rates = ok(b, "kafka-configs --describe --entity-type brokers")  # each broker's, then default
    for kind in ("leader", "follower"):
        assert rates.count(f"  {kind}.replication.throttled.rate=10000000 ") == 3

    def verify() -> list[str]:
        return ok(b, f"{reassign} {plan} --verify").splitlines()

    wait_for(lambda: verify()[2].endswith("is completed."), what="the moves")
    assert verify() == [
        "Status of partition reassignment:",
        "Reassignment of partition moving-0 is completed.",
        "Reassignment of partition moving-1 is completed.",
        "",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic moving",
    ]
    assert ok(b, topic_configs) == "Dynamic configs for topic moving are:\n"
    assert "throttled" not in ok(b, "kafka-configs --describe --entity-type brokers")
    assert ok(b, "kafka-reassign-partitions --list") == "No partition reassignments found.\n"
    placed = describe_topic(b, "moving")[1:]
    assert [(r[7], sorted(r[9].split(","))) for r in placed] == [
        ("3,2", ["2", "3"]),
        ("2,1", ["1", "2"]),
    ]

    # Where each replica's log is now, with its data.
    out = ok(b, "kafka-log-dirs --describe --topic-list moving").splitlines()
    assert out[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1,2,3",
    ]
    sizes = {
        (broker["broker"], p["partition"]): p["size"]
        for broker in json.loads(out[2])["brokers"]
        for log_dir in broker["logDirs"]
        for p in log_dir["partitions"]
    }
    assert sorted(sizes) == [(1, "moving-1"), (2, "moving-0"), (2, "moving-1"), (3, "moving-0")]
    assert sizes[(3, "moving-0")] == sizes[(2, "moving-0")] > 0

    # Reordering partition 0's replicas keeps its leader (3); a preferred election then moves
    # leadership to the new first replica (2).
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}]}
        )
    )
    ok(b, f"{reassign} {plan} --execute")
    wait_for(lambda: describe_topic(b, "moving")[1][7] == "2,3", what="the reorder")
    assert describe_topic(b, "moving")[1][5] == "3"
    elect = "kafka-leader-election --topic moving --election-type"
    assert ok(b, f"{elect} preferred --partition 0") == (
        "Successfully completed leader election (PREFERRED) for partitions moving-0\n"
    )
    assert describe_topic(b, "moving")[1][5] == "2"
    assert ok(b, f"{elect} preferred --partition 0") == (
        "Valid replica already elected for partitions moving-0\n"
    )
    assert ok(b, f"{elect} unclean --partition 1") == (
        "Valid replica already elected for partitions moving-1\n"
    )
    # Every partition whose leader is not its first replica (after a broker's restart, until
    # the meta service's periodic rebalance) gets it back; then none needs an election.
    all_preferred = "kafka-leader-election --election-type preferred --all-topic-partitions"
    moved = ok(b, all_preferred)
    assert moved == "" or moved.startswith(
        "Successfully completed leader election (PREFERRED) for partitions "
    ), moved
    assert ok(b, all_preferred) == ""


def test_leader_election_errors(sides: Sides) -> None:
    both_fail(
        sides,
        "leader election: unknown topic",
        "kafka-leader-election --election-type preferred --topic nope --partition 1",
    )
