"""The `rafka` admin commands against a real cluster: cluster status, topics, consumer
groups (the meta service's registry lists every group, with its coordinator) and
transactions."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from cluster.local import LocalCluster
from tests.integration.conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("admin"), brokers=3, metas=1) as c:
        yield c


def rafka(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    env_args = ["-b", cluster.bootstrap]
    if args[0] == "cluster" or args[:2] == ("groups", "list"):
        env_args += ["--meta", ",".join(cluster.meta_servers)]
        env_args += ["--command-config", str(cluster.internal_properties_file)]
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args, *env_args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(cluster: LocalCluster, *args: str) -> str:
    r = rafka(cluster, *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


def test_topics_create_describe_delete(cluster: LocalCluster) -> None:
    ok(
        cluster,
        "topics",
        "create",
        "events",
        "-p",
        "4",
        "-r",
        "3",
        "--config",
        "retention.ms=60000",
    )
    listed = {r[0]: r for r in rows(ok(cluster, "topics", "list"))}
    assert listed["events"][1:3] == ["4", "3"]

    described = rows(ok(cluster, "topics", "describe", "events"))
    partitions = [r for r in described if r[0].isdigit()]
    assert [int(r[0]) for r in partitions] == [0, 1, 2, 3]
    for _p, leader, epoch, replicas, isr in (r[:5] for r in partitions):
        assert leader in replicas.split(",")
        assert sorted(isr.split(",")) == ["1", "2", "3"]
        assert int(epoch) >= 0

    again = rafka(cluster, "topics", "create", "events")
    assert again.returncode == 1
    assert "TOPIC_ALREADY_EXISTS" in again.stderr
    bad = rafka(cluster, "topics", "create", "bad", "-r", "9")
    assert bad.returncode == 1
    assert "INVALID_REPLICATION_FACTOR" in bad.stderr
    unknown = rafka(cluster, "topics", "describe", "nope")
    assert unknown.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr

    assert "Deleted topic events." in ok(cluster, "topics", "delete", "events")
    wait_for(lambda: "events" not in ok(cluster, "topics", "list"), what="the topic to go")


def test_cluster_reports_quorum_brokers_and_offline_partitions(cluster: LocalCluster) -> None:
    ok(cluster, "topics", "create", "single", "-p", "3", "-r", "1")
    status = ok(cluster, "cluster")
    assert "meta leader 1" in status
    assert {r[0] for r in rows(status) if r[0] in ("1", "2", "3")} == {"1", "2", "3"}
    assert "0 offline" in status
    cluster.kill("broker-2")
    try:

        def offline() -> str | None:
            out = ok(cluster, "cluster")
            return None if "0 offline" in out else out

        status = wait_for(offline, what="partitions of broker 2 to go offline")
        assert "offline: single-" in status
    finally:
        cluster.start_node("broker-2")
        cluster.wait_ready()


def test_groups_list_describe_delete(cluster: LocalCluster) -> None:
    ok(cluster, "topics", "create", "clicks", "-p", "2", "-r", "3")
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(50):
        producer.produce("clicks", key=b"k%d" % i, value=b"v", partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["clicks"])
        read = 0
        while read < 50:
            msg = consumer.poll(1.0)
            read += msg is not None and msg.error() is None
        consumer.commit(asynchronous=False)

        out = ok(cluster, "groups", "describe", "readers")
        assert "group readers (classic): Stable" in out
        offsets = {(r[0], r[1]): r for r in rows(out) if r[0] == "clicks"}
        assert {k: (v[2], v[3], v[4]) for k, v in offsets.items()} == {
            ("clicks", "0"): ("25", "25", "0"),
            ("clicks", "1"): ("25", "25", "0"),
        }
        assert all(v[5] == consumer.memberid() for v in offsets.values())

        listed = wait_for(
            lambda: {r[0]: r for r in rows(ok(cluster, "groups", "list"))}.get("readers"),
            what="the group in the registry",
        )
        assert listed[1:3] == ["classic", "Stable"]
        assert listed[4].startswith("__consumer_offsets-")

        busy = rafka(cluster, "groups", "delete", "readers")
        assert busy.returncode == 1
        assert "NON_EMPTY_GROUP" in busy.stderr
    finally:
        consumer.close()
    assert "Deleted group readers." in ok(cluster, "groups", "delete", "readers")
    wait_for(
        lambda: "readers" not in ok(cluster, "groups", "list"),
        what="the group to leave the registry",
    )
    gone = rafka(cluster, "groups", "describe", "readers")
    assert gone.returncode == 1
    assert "GROUP_ID_NOT_FOUND" in gone.stderr


def test_command_config_is_read_and_checked(cluster: LocalCluster, tmp_path) -> None:
    """--command-config: Kafka's client properties; settings that cannot work are named."""
    plain = tmp_path / "plain.properties"
    plain.write_text("# a client of a PLAINTEXT listener\nsecurity.protocol=PLAINTEXT\n")
    assert rafka(cluster, "topics", "list", "--command-config", str(plain)).returncode == 0
    gssapi = tmp_path / "gssapi.properties"
    gssapi.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    for config, says in ((gssapi, "GSSAPI"), (tmp_path / "missing", "cannot read")):
        r = rafka(cluster, "topics", "list", "--command-config", str(config))
        assert r.returncode == 1, r.stderr
        assert says in r.stderr, r.stderr


def test_transactions_list_and_describe(cluster: LocalCluster) -> None:
    """An open transaction shows Ongoing with its partitions and age; committed, it shows
    CompleteCommit (kafka-transactions.sh list / describe)."""
    ok(cluster, "topics", "create", "txn-out", "-p", "2", "-r", "3")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "cli-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce("txn-out", b"v", partition=partition)
    assert producer.flush(30) == 0

    listed = wait_for(
        lambda: {r[0]: r for r in rows(ok(cluster, "transactions", "list"))}.get("cli-txn"),
        what="the transactional id in the list",
    )
    _tid, coordinator, producer_id, state = listed
    assert state == "Ongoing"
    assert coordinator in ("1", "2", "3")
    assert "cli-txn" in ok(cluster, "transactions", "list", "--state", "Ongoing")
    assert "cli-txn" in ok(cluster, "transactions", "list", "--producer-id", producer_id)
    assert "cli-txn" not in ok(cluster, "transactions", "list", "--state", "CompleteCommit")
    assert "cli-txn" not in ok(cluster, "transactions", "list", "--duration-ms", "3600000")

    described = {r[0]: r for r in rows(ok(cluster, "transactions", "describe", "cli-txn"))}
    row = described["cli-txn"]
    assert row[1:5] == [coordinator, producer_id, row[3], "Ongoing"]
    # start time and age of an open transaction
    assert row[6].endswith("Z")
    assert row[7] != "-"
    assert sorted(row[8].split(",")) == ["txn-out-0", "txn-out-1"]

    producer.commit_transaction(30)

    def finished() -> list[str] | None:
        row = {r[0]: r for r in rows(ok(cluster, "transactions", "describe", "cli-txn"))}["cli-txn"]
        return row if row[4] in ("CompleteCommit", "Empty") else None

    row = wait_for(finished, what="the transaction to complete")
    assert row[7:] == ["-", "-"]  # no age, no partitions
    assert "cli-txn" in ok(cluster, "transactions", "list", "--state", row[4])

    unknown = rafka(cluster, "transactions", "describe", "no-such-txn")
    assert unknown.returncode == 1
    assert "TRANSACTIONAL_ID_NOT_FOUND" in unknown.stderr
