"""The cluster as a whole: kafka-cluster cluster-id, kafka-broker-api-versions,
kafka-metadata-quorum, kafka-features and kafka-client-metrics.
"""

from __future__ import annotations

import json
import re

from cluster.kafka_client import KafkaConnection
from cluster.local import LocalCluster
from tests.compat.kafka_tools.support import Sides, both, fails, ok, rows
from tests.peers.kafka_tools import run_tool

API_VERSIONS, DESCRIBE_QUORUM = 18, 55

# -- kafka-cluster, kafka-broker-api-versions ---------------------------------------------------


def test_cluster_id_and_broker_api_versions(cluster: LocalCluster) -> None:
    b = cluster.bootstrap
    cluster_id = run_tool("kafka-cluster", "cluster-id", "--bootstrap-server", b)
    assert re.fullmatch(r"Cluster ID: \S+\n", cluster_id.stdout), cluster_id
    listed = ok(b, "kafka-broker-api-versions")
    brokers = re.findall(
        r"^127\.0\.0\.1:\d+ \(id: (\d+) rack: null isFenced: false\) -> \($", listed, re.M
    )
    assert sorted(brokers) == ["1", "2", "3"]
    # What Kafka's tools need is served by every broker (`Name(key): min to max [usable: v]`).
    for api in (
        "ListOffsets(2)",
        "WriteTxnMarkers(27)",
        "DescribeProducers(61)",
        "ElectLeaders(43)",
        "AlterPartitionReassignments(45)",
        "DescribeLogDirs(35)",
        "UpdateFeatures(57)",
        "DescribeShareGroupOffsets(90)",
        "AlterShareGroupOffsets(91)",
        "ListConfigResources(74)",
    ):
        served = re.findall(rf"^\t{re.escape(api)}: (.*?),?$", listed, re.M)
        assert len(served) == 3, (api, served)
        assert "UNSUPPORTED" not in served, (api, served)


# -- kafka-metadata-quorum, kafka-features, kafka-client-metrics --------------------------------


def test_metadata_quorum(cluster: LocalCluster) -> None:
    with KafkaConnection.to_any(cluster.bootstrap) as conn:
        answer = conn.call(
            API_VERSIONS, 3, client_software_name="tests", client_software_version="1"
        )
    # the brokers serve DescribeQuorum (issue 26): the tool's answers below come from it
    assert DESCRIBE_QUORUM in {k.api_key for k in answer.api_keys}
    b = cluster.bootstrap
    status = ok(b, "kafka-metadata-quorum describe --status").splitlines()
    fields = dict(line.split(":", 1) for line in status)
    assert list(fields) == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    assert int(fields["LeaderEpoch"]) >= 0
    assert int(fields["HighWatermark"]) >= 0
    voters = json.loads(fields["CurrentVoters"])
    assert int(fields["LeaderId"]) in {v["id"] for v in voters}
    replication = rows(ok(b, "kafka-metadata-quorum describe --replication"))
    assert replication[0] == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert [r[-1] for r in replication[1:]].count("Leader") == 1


def test_features(cluster: LocalCluster) -> None:
    b = cluster.bootstrap

    def described() -> dict[str, list[str]]:
        # Feature: group.version  SupportedMinVersion: 0  SupportedMaxVersion: 1
        #   FinalizedVersionLevel: 1  Epoch: 3
        return {r[1]: r[2:] for r in rows(ok(b, "kafka-features describe"))}

    before = described()
    assert sorted(before) == ["group.version", "streams.version", "transaction.version"]
    levels = ["SupportedMinVersion:", "0", "SupportedMaxVersion:"]
    assert before["group.version"][:6] == [*levels, "1", "FinalizedVersionLevel:", "1"]
    assert before["transaction.version"][:6] == [*levels, "2", "FinalizedVersionLevel:", "2"]
    assert ok(b, "kafka-features upgrade --feature transaction.version=2 --dry-run") == (
        "transaction.version can be upgraded to 2.\n"
    )
    assert ok(b, "kafka-features downgrade --feature group.version=0 --dry-run") == (
        "group.version can be downgraded to 0.\n"
    )
    assert fails(b, "kafka-features upgrade --feature transaction.version=9").splitlines() == [
        "Could not upgrade transaction.version to 9. The update failed for all features since "
        "the following feature had an error: Invalid update version 9 for feature "
        "transaction.version. The meta service only supports versions 0-2",
        "1 out of 1 operation(s) failed.",
    ]
    assert ok(b, "kafka-features downgrade --feature transaction.version=1") == (
        "transaction.version was downgraded to 1.\n"
    )
    try:
        after = described()["transaction.version"]
        assert after[5] == "1"
        assert int(after[7]) > int(before["transaction.version"][7])
    finally:
        assert ok(b, "kafka-features upgrade --feature transaction.version=2") == (
            "transaction.version was upgraded to 2.\n"
        )


def test_client_metrics(sides: Sides) -> None:
    metrics = "kafka-client-metrics"
    altered = both(
        sides,
        "client metrics: alter",
        f"{metrics} --alter --name cm1 --metrics org.apache.kafka.producer. --interval 5000 "
        "--match client_id=app1",
    )
    assert altered == "Altered client metrics config for cm1.\n"
    assert "cm1" in both(sides, "client metrics: list", f"{metrics} --list").split()
    assert both(sides, "client metrics: describe", f"{metrics} --describe --name cm1") == (
        "Client metrics configs for cm1 are:\n"
        "  interval.ms=5000\n"
        "  match=client_id=app1\n"
        "  metrics=org.apache.kafka.producer.\n"
    )
    both(sides, "client metrics: delete", f"{metrics} --delete --name cm1")
    assert "cm1" not in ok(sides.rafka, f"{metrics} --list").split()
