"""DescribeQuorum, AddRaftVoter and RemoveRaftVoter (KIP-595/836/853) against Apache Kafka 4.4.

Both answer with one voter (Kafka's combined node, Rafka's single meta node); who leads, the
epoch, the offsets, the timestamps, the directory id (unknown in Kafka's static quorum) and the
listeners (Kafka's CONTROLLER; Rafka's RAFT and META) differ by nature and are masked: the
structure and the fields' meaning must be the same."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from cluster.kafka_client import builder
from tests.compat.pair import Pair

DESCRIBE_QUORUM, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 80, 81
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
