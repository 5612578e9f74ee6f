"""Changing the meta quorum while it serves (KIP-853 on the meta service): DescribeQuorum,
AddRaftVoter and RemoveRaftVoter over the Kafka port, kafka-metadata-quorum against a broker, a
fourth meta node added, one removed, one replaced with a fresh disk, and every meta node
restarted with the membership kept, while a producer and topic creations keep being
acknowledged."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.kafka_client import KafkaConnection, builder
from cluster.local import LocalCluster
from meta import quorum
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.meta.harness import free_ports
from tests.peers.apache_kafka import PEERS

pytestmark = pytest.mark.timeout(600)

DESCRIBE_QUORUM, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 80, 81
METADATA = "__cluster_metadata"


@dataclass
class Writes:
    """A producer (acks=all) and topic creations, in a thread, until stopped."""

    bootstrap: str
    acked: int = 0
    created: int = 0
    failures: list[str] = field(default_factory=list)
    longest_gap_s: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        last_ack = time.monotonic()

        def delivered(err: Any, _msg: Any) -> None:
            nonlocal last_ack
            if err is not None:
                self.failures.append(f"produce: {err}")
                return
            now = time.monotonic()
            self.longest_gap_s = max(self.longest_gap_s, now - last_ack)
            last_ack = now
            self.acked += 1

        round_ = 0
        while not self._stop.is_set():
            producer.produce("quorum-writes", b"x" * 100, on_delivery=delivered)
            producer.flush(60)
            if round_ % 10 == 0:
                name = f"quorum-topic-{round_}"
                try:
                    admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
                    self.created += 1
                except Exception as exc:
                    self.failures.append(f"create {name}: {exc}")
            round_ += 1
            time.sleep(0.1)
        producer.flush(60)

    def stop(self) -> None:
        self._stop.set()


@pytest.fixture
def quorum_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path, brokers=1, metas=3) as cluster:
        yield cluster


def kafka(cluster: LocalCluster) -> KafkaConnection:
    return KafkaConnection.to_any(cluster.bootstrap)


def describe(cluster: LocalCluster, version: int = 2) -> Any:
    b = builder(DESCRIBE_QUORUM, version)
    topics = [b.TopicData(topic_name=METADATA, partitions=[b.PartitionData(partition_index=0)])]
    conn = kafka(cluster)
    try:
        answer = conn.call(DESCRIBE_QUORUM, version, topics=topics)
    finally:
        conn.sock.close()
    assert answer.error_code == ErrorCode.none, answer
    [partition] = answer.topics[0].partitions
    assert partition.error_code == ErrorCode.none, partition
    return answer


def voters(cluster: LocalCluster) -> dict[int, Any]:
    return {v.replica_id: v for v in describe(cluster).topics[0].partitions[0].current_voters}


def observers(cluster: LocalCluster) -> dict[int, Any]:
    return {o.replica_id: o for o in describe(cluster).topics[0].partitions[0].observers}


def add_voter(
    cluster: LocalCluster, node_id: int, directory: uuid.UUID | None, **fields: Any
) -> Any:
    """AddRaftVoter v1 for meta node ``node_id`` (its RAFT and META endpoints)."""
    b = builder(ADD_RAFT_VOTER, 1)
    props = config(cluster, node_id)
    listeners = [
        b.Listener(name=name, host="127.0.0.1", port=int(address.rsplit(":", 1)[1]))
        for name, address in (
            (quorum.RAFT_LISTENER, props["meta.raft.listener"]),
            (quorum.META_LISTENER, props["meta.listener"]),
        )
    ]
    request = {
        "cluster_id": None,
        "timeout": timedelta(seconds=10),
        "voter_id": node_id,
        "voter_directory_id": directory,
        "listeners": listeners,
    } | fields
    conn = kafka(cluster)
    try:
        return conn.call(ADD_RAFT_VOTER, 1, **request)
    finally:
        conn.sock.close()


def remove_voter(
    cluster: LocalCluster, node_id: int, directory: uuid.UUID | None, **fields: Any
) -> Any:
    conn = kafka(cluster)
    try:
        return conn.call(
            REMOVE_RAFT_VOTER,
            0,
            **({"cluster_id": None, "voter_id": node_id, "voter_directory_id": directory} | fields),
        )
    finally:
        conn.sock.close()


def rafka(cluster: LocalCluster, *args: str) -> str:
    """`rafka meta-quorum ARGS -b <the broker>`; its output (it must succeed)."""
    out = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "meta-quorum", *args, "-b", cluster.bootstrap],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def config(cluster: LocalCluster, node_id: int) -> dict[str, str]:
    text = cluster.nodes[f"meta-{node_id}"].config_file.read_text()
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    voters_ = quorum_addresses(props["meta.quorum.voters"])
    props.setdefault("meta.raft.listener", voters_.get(node_id, ""))
    return props


def quorum_addresses(value: str) -> dict[int, str]:
    return {int(e.split("@")[0]): e.split("@")[1] for e in value.split(",") if e}


def join_config(cluster: LocalCluster, node_id: int, raft: str | None = None) -> None:
    """(Re)write meta node ``node_id``'s config as one that joins the running quorum: not among
    meta.quorum.voters (the bootstrap set), its Raft endpoint in meta.raft.listener."""
    grpc_port, raft_port = free_ports(2)
    existing = f"meta-{node_id}" in cluster.nodes
    props = config(cluster, node_id if existing else 3)
    if not existing:
        del props["meta.raft.listener"]
    listeners = quorum_addresses(props["meta.quorum.listeners"])
    grpc = listeners.get(node_id) or f"127.0.0.1:{grpc_port}"
    listeners[node_id] = grpc
    props |= {
        "node.id": str(node_id),
        "meta.listener": grpc,
        "meta.raft.listener": raft or props.get("meta.raft.listener") or f"127.0.0.1:{raft_port}",
        "meta.quorum.listeners": ",".join(f"{i}@{a}" for i, a in sorted(listeners.items())),
        "meta.data.dir": str(cluster.data_dir / f"meta-{node_id}"),
    }
    if not existing:
        cluster._add(f"meta-{node_id}", "meta", props, int(grpc.rsplit(":", 1)[1]))
    else:
        cluster.nodes[f"meta-{node_id}"].config_file.write_text(
            "".join(f"{k}={v}\n" for k, v in props.items())
        )


def directory_of(cluster: LocalCluster, node_id: int) -> uuid.UUID:
    text = (cluster.data_dir / f"meta-{node_id}" / quorum.DIRECTORY_FILE).read_text()
    found = quorum.parse_kafka_uuid(text.split("directory.id=")[1].split()[0])
    assert found is not None
    return found


def test_describe_quorum_names_the_leader_voters_and_their_progress(
    quorum_cluster: LocalCluster,
) -> None:
    cluster = quorum_cluster
    wait_for(lambda: all(v.replica_directory_id for v in voters(cluster).values()), 30,
             "every voter's directory id in the quorum")  # fmt: skip
    answer = describe(cluster)
    [partition] = answer.topics[0].partitions
    assert sorted(voters(cluster)) == [1, 2, 3]
    assert partition.leader_id in (1, 2, 3)
    assert partition.leader_epoch >= 1
    assert partition.high_watermark > 0
    assert partition.observers == ()
    for node_id, voter in voters(cluster).items():
        assert voter.replica_directory_id == directory_of(cluster, node_id)
        assert voter.log_end_offset > 0
        assert voter.last_fetch_timestamp > 0
    nodes = {n.node_id: {(e.name, e.port) for e in n.listeners} for n in answer.nodes}
    props = config(cluster, 1)
    assert (quorum.RAFT_LISTENER, int(props["meta.raft.listener"].rsplit(":")[1])) in nodes[1]
    assert (quorum.META_LISTENER, int(props["meta.listener"].rsplit(":")[1])) in nodes[1]
    # v0 and v1 have the same partition, without what later versions added
    old = describe(cluster, 0).topics[0].partitions[0]
    assert sorted(v.replica_id for v in old.current_voters) == [1, 2, 3]

    for args in (["describe", "--status"], ["describe", "--replication"]):
        out = subprocess.run(
            ["java", "-cp", f"{PEERS}/kafka/*", "org.apache.kafka.tools.MetadataQuorumCommand",
             "--bootstrap-server", cluster.bootstrap, *args],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        if "--status" in args:
            assert f"LeaderId:               {partition.leader_id}" in out.stdout, out.stdout
            assert '"endpoints": ["RAFT://127.0.0.1:' in out.stdout, out.stdout
        else:
            rows = [line.split() for line in out.stdout.splitlines()[1:] if line.strip()]
            assert sorted(int(r[0]) for r in rows) == [1, 2, 3], out.stdout
            assert sum(r[-1] == "Leader" for r in rows) == 1, out.stdout


def test_meta_nodes_are_added_removed_and_replaced_while_writes_go_on(
    quorum_cluster: LocalCluster,
) -> None:
    cluster = quorum_cluster
    writes = Writes(cluster.bootstrap)
    writer = threading.Thread(target=writes.run, daemon=True)
    writer.start()
    try:
        before = _change_the_quorum(cluster, writes)
    finally:
        writes.stop()
        writer.join(120)
    assert writes.failures == [], writes.failures
    assert writes.acked > 0
    assert writes.created > 0
    # acknowledged throughout: never a pause like a quorum outage (elections take seconds)
    assert writes.longest_gap_s < 20, writes.longest_gap_s

    # Every meta node restarts: the quorum is what was changed, not meta.quorum.voters
    for name in ("meta-2", "meta-3", "meta-4"):
        cluster.stop_node(name)
    for name in ("meta-2", "meta-3", "meta-4"):
        cluster.start_node(name)
    wait_for(lambda: _voters_or_none(cluster) == before, 90, "the changed quorum after restarts")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("after-restarts", 1, 1)])["after-restarts"].result(90)


def _change_the_quorum(cluster: LocalCluster, writes: Writes) -> dict[int, Any]:
    """Add meta node 4, remove node 1, replace node 2; the voters' directory ids then."""
    wait_for(lambda: writes.acked > 10, 60, "the first writes acknowledged")
    wait_for(lambda: all(v.replica_directory_id for v in voters(cluster).values()), 30,
             "every voter's directory id in the quorum")  # fmt: skip

    # A fourth meta node, started with an empty data dir, follows the log as an observer...
    join_config(cluster, 4)
    cluster.start_node("meta-4")
    wait_for(lambda: 4 in observers(cluster), 60, "meta node 4 among the observers")
    directory4 = directory_of(cluster, 4)
    assert observers(cluster)[4].replica_directory_id == directory4
    # ... and is refused unless the request names it as it runs
    wrong = add_voter(cluster, 4, uuid.uuid4())
    assert wrong.error_code == ErrorCode.invalid_request, wrong
    assert add_voter(cluster, 4, None).error_code == ErrorCode.invalid_request
    bad_cluster = add_voter(cluster, 4, directory4, cluster_id="not-this-cluster")
    assert bad_cluster.error_code == ErrorCode.inconsistent_cluster_id, bad_cluster
    added = add_voter(cluster, 4, directory4)
    assert added.error_code == ErrorCode.none, added
    assert sorted(voters(cluster)) == [1, 2, 3, 4]
    assert add_voter(cluster, 4, directory4).error_code == ErrorCode.duplicate_voter
    wait_for(lambda: voters(cluster)[4].log_end_offset > 0, 30, "meta node 4 replicating")

    # Remove a node (the leader itself, if it is node 1: it hands its leadership over first)
    missing = remove_voter(cluster, 1, uuid.uuid4())
    assert missing.error_code == ErrorCode.voter_not_found, missing
    removed = remove_voter(cluster, 1, directory_of(cluster, 1))
    assert removed.error_code == ErrorCode.none, removed
    assert sorted(voters(cluster)) == [2, 3, 4]
    # cut off, the removed node learns it from the quorum and goes on as an observer
    wait_for(lambda: 1 in observers(cluster), 90, "meta node 1 among the observers")
    cluster.stop_node("meta-1")

    # Replace node 2 (with `rafka meta-quorum`): its disk is lost; it is removed, then added
    # again with a fresh one. It keeps its configuration: still among meta.quorum.voters, it
    # learns from the quorum that it is not a voter and follows the log as an observer.
    old2 = directory_of(cluster, 2)
    cluster.stop_node("meta-2")
    shutil.rmtree(cluster.data_dir / "meta-2")
    out = rafka(cluster, "remove-controller", "--controller-id", "2",
                "--controller-directory-id", quorum.kafka_uuid(old2))  # fmt: skip
    assert "Removed meta node 2" in out
    assert sorted(voters(cluster)) == [3, 4]
    join_config(cluster, 2)  # the same Raft endpoint; meta.quorum.voters unchanged
    cluster.start_node("meta-2")
    wait_for(lambda: 2 in observers(cluster), 90, "the new meta node 2 among the observers")
    new2 = directory_of(cluster, 2)
    assert new2 != old2
    config2 = str(cluster.nodes["meta-2"].config_file)
    assert "Added meta node 2" in rafka(cluster, "add-controller", "--config", config2)
    table = rafka(cluster, "describe", "--replication")
    assert quorum.kafka_uuid(new2) in table, table
    assert "Leader" in table, table
    after = {i: v.replica_directory_id for i, v in voters(cluster).items()}
    assert after == {2: new2, 3: directory_of(cluster, 3), 4: directory4}
    acked = writes.acked
    wait_for(lambda: writes.acked > acked + 10, 60, "writes acknowledged after the changes")
    return after


def _voters_or_none(cluster: LocalCluster) -> dict[int, Any] | None:
    try:
        return {i: v.replica_directory_id for i, v in voters(cluster).items()}
    except (AssertionError, OSError):
        return None
