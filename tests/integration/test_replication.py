"""Replicated partitions on 3 brokers: min.insync.replicas, offline partitions without unclean
election, unclean election when enabled, controlled shutdown, preferred leaders coming back,
follower reads (KIP-392), loss of the meta leader, and stale replication RPCs refused."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from common.internal_security import InternalSecurity
from dataplane.replica import wire
from proto import replication_pb2
from tests.expect import present
from tests.integration.conftest import running_cluster, start_cluster, wait_for
from tests.integration.kafka_wire import WireClient, builder
from tests.unit.log.batches import make_batch, values_of

FAST: dict[str, Any] = {  # broker settings, for running_cluster(**FAST)
    "broker_session_timeout_ms": 2000,
    "broker_heartbeat_interval_ms": 300,
    "replica_lag_time_max_ms": 2000,
    "leader_imbalance_check_interval_seconds": 1,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("replication"), **FAST) as c:
        yield c


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: LocalCluster) -> Iterator[None]:
    """Each test starts and ends with every node running."""
    yield
    cluster.start()  # starts again whatever a test stopped
    wait_for(lambda: len(admin(cluster).list_topics(timeout=5).brokers) == 3, what="3 live brokers")


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def create(
    cluster: LocalCluster,
    topic: str,
    partitions: int = 1,
    rf: int = 3,
    configs: dict[str, str] | None = None,
) -> None:
    a = admin(cluster)
    a.create_topics([NewTopic(topic, partitions, rf, config=configs or {})])[topic].result(30)


def partition_state(cluster: LocalCluster, topic: str, partition: int = 0) -> tuple[int, list[int]]:
    """(leader, isr) as the cluster reports it."""
    md = admin(cluster).list_topics(topic, timeout=10).topics[topic].partitions[partition]
    return md.leader, list(md.isrs)


def produce_one(
    cluster: LocalCluster, topic: str, value: bytes, timeout: float = 10
) -> KafkaError | None:
    """acks=all produce of one record; the delivery error, or None on success."""
    result: list = []
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "message.timeout.ms": int(timeout * 1000),
        }
    )
    p.produce(topic, value, on_delivery=lambda err, _msg: result.append(err))
    p.flush(timeout + 5)
    return result[0] if result else KafkaError(KafkaError._MSG_TIMED_OUT)


def read_all(
    cluster: LocalCluster, topic: str, partitions: int = 1, expect: int = 0
) -> list[bytes]:
    c = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "r", "enable.auto.commit": False}
    )
    c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
    out: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(out) < expect and time.monotonic() < deadline:
        out += [present(m.value()) for m in c.consume(500, 0.5) if m.error() is None]
    c.close()
    return out


def broker_log(cluster: LocalCluster, node_id: int) -> str:
    return Path(cluster.nodes[f"broker-{node_id}"].log_file).read_text()


def test_acks_all_survives_a_follower_and_needs_min_insync(cluster: LocalCluster) -> None:
    create(cluster, "misr", configs={"min.insync.replicas": "2"})
    leader, isr = partition_state(cluster, "misr")
    followers = [b for b in isr if b != leader]
    assert produce_one(cluster, "misr", b"all-three") is None

    cluster.kill(f"broker-{followers[0]}")
    wait_for(lambda: len(partition_state(cluster, "misr")[1]) == 2, what="ISR of 2")
    assert produce_one(cluster, "misr", b"two-of-three") is None

    cluster.kill(f"broker-{followers[1]}")
    wait_for(lambda: partition_state(cluster, "misr")[1] == [leader], what="ISR of 1")
    with WireClient(cluster.nodes[f"broker-{leader}"].port) as w:
        b = builder(0, 9)
        data = b.TopicProduceData(
            name="misr",
            partition_data=(b.PartitionProduceData(index=0, records=make_batch(values_of(1))),),
        )
        resp = w.call(0, 9, acks=-1, timeout=5000, topic_data=(data,))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.not_enough_replicas

    cluster.start_node(f"broker-{followers[1]}")
    wait_for(
        lambda: len(partition_state(cluster, "misr")[1]) >= 2, what="a follower back in the ISR"
    )
    assert produce_one(cluster, "misr", b"back-to-two") is None
    assert read_all(cluster, "misr", expect=3) == [b"all-three", b"two-of-three", b"back-to-two"]


def test_whole_isr_down_stays_offline_without_unclean_election(cluster: LocalCluster) -> None:
    create(cluster, "offline", rf=2)
    leader, isr = partition_state(cluster, "offline")
    (follower,) = [b for b in isr if b != leader]
    cluster.kill(f"broker-{follower}")
    wait_for(
        lambda: partition_state(cluster, "offline")[1] == [leader], what="ISR of the leader only"
    )
    assert produce_one(cluster, "offline", b"only-on-leader") is None
    cluster.kill(f"broker-{leader}")
    wait_for(lambda: partition_state(cluster, "offline")[0] == -1, what="partition offline")
    cluster.start_node(f"broker-{follower}")  # stale replica: it lacks "only-on-leader"
    cluster.wait_ready(names=[f"broker-{follower}"])
    time.sleep(3)  # longer than a lease: nothing may elect the stale replica meanwhile
    assert partition_state(cluster, "offline")[0] == -1
    cluster.start_node(f"broker-{leader}")
    wait_for(
        lambda: partition_state(cluster, "offline")[0] == leader,
        what="the last ISR member leads again",
    )
    assert read_all(cluster, "offline", expect=1) == [b"only-on-leader"]


def test_unclean_election_when_enabled(cluster: LocalCluster) -> None:
    create(cluster, "unclean", rf=2, configs={"unclean.leader.election.enable": "true"})
    leader, isr = partition_state(cluster, "unclean")
    (follower,) = [b for b in isr if b != leader]
    cluster.kill(f"broker-{follower}")
    wait_for(
        lambda: partition_state(cluster, "unclean")[1] == [leader], what="ISR of the leader only"
    )
    cluster.kill(f"broker-{leader}")
    cluster.start_node(f"broker-{follower}")
    wait_for(lambda: partition_state(cluster, "unclean")[0] == follower, what="unclean election")
    meta_logs = "".join(
        Path(n.log_file).read_text() for n in cluster.nodes.values() if n.kind == "meta"
    )
    assert "unclean" in meta_logs.lower()


def test_controlled_shutdown_hands_leadership_away(cluster: LocalCluster) -> None:
    create(cluster, "graceful", partitions=6)
    victim = 2
    assert any(partition_state(cluster, "graceful", p)[0] == victim for p in range(6))
    cluster.stop_node(f"broker-{victim}")  # SIGTERM
    leaders = [partition_state(cluster, "graceful", p)[0] for p in range(6)]
    assert victim not in leaders
    assert -1 not in leaders
    assert "controlled shutdown done" in broker_log(cluster, victim)


def test_preferred_leader_comes_back(cluster: LocalCluster) -> None:
    create(cluster, "preferred", partitions=3)
    preferred = {
        p: admin(cluster).list_topics("preferred").topics["preferred"].partitions[p].replicas[0]
        for p in range(3)
    }
    cluster.kill("broker-1")
    wait_for(
        lambda: all(partition_state(cluster, "preferred", p)[0] != 1 for p in range(3)),
        what="failover",
    )
    cluster.start_node("broker-1")
    wait_for(
        lambda: all(partition_state(cluster, "preferred", p)[0] == preferred[p] for p in range(3)),
        timeout=30,
        what="preferred leaders back",
    )


def test_meta_leader_loss_does_not_stop_produce_and_fetch(cluster: LocalCluster) -> None:
    create(cluster, "metaloss")

    async def leader_id() -> int:
        async with cluster.meta_client() as client:
            return (await client.describe_cluster()).leader_id

    meta_leader = asyncio.run(leader_id())
    cluster.kill(f"meta-{meta_leader}")
    assert produce_one(cluster, "metaloss", b"during") is None
    assert read_all(cluster, "metaloss", expect=1) == [b"during"]
    new_leader = wait_for(
        lambda: asyncio.run(leader_id()) not in (-1, meta_leader), what="a new Raft leader"
    )
    assert new_leader


def test_follower_read_on_the_clients_rack(tmp_path: Path) -> None:
    """KIP-392: the leader points a consumer at an in-sync replica on its rack, which serves it."""
    c = start_cluster(
        tmp_path,
        metas=1,
        replica_selector_class="org.apache.kafka.common.replica.RackAwareReplicaSelector",
    )
    try:
        for i in (1, 2, 3):  # give each broker its own rack; restart to apply
            props = c.nodes[f"broker-{i}"].config_file
            props.write_text(props.read_text() + f"broker.rack=rack-{i}\n")
            c.stop_node(f"broker-{i}")
            c.start_node(f"broker-{i}")
        c.wait_ready()
        wait_for(lambda: len(admin(c).list_topics(timeout=5).brokers) == 3)
        create(c, "racks")
        assert produce_one(c, "racks", b"x") is None
        leader, isr = partition_state(c, "racks")
        follower = next(b for b in isr if b != leader)
        with WireClient(c.nodes[f"broker-{leader}"].port) as w:
            b = builder(1, 12)
            part = b.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
            resp = w.call(
                1,
                12,
                max_wait=0,
                min_bytes=1,
                topics=(b.FetchTopic(topic="racks", partitions=(part,)),),
                forgotten_topics_data=(),
                rack_id=f"rack-{follower}",
            )
        assert resp.responses[0].partitions[0].preferred_read_replica == follower
        consumer = Consumer(
            {"bootstrap.servers": c.bootstrap, "group.id": "r", "client.rack": f"rack-{follower}"}
        )
        consumer.assign([TopicPartition("racks", 0, 0)])
        got = wait_for(
            lambda: [m.value() for m in consumer.consume(10, 0.5) if m.error() is None],
            what="record",
        )
        consumer.close()
        assert got == [b"x"]
    finally:
        c.stop()


def test_stale_replication_fetches_are_refused_and_logged(cluster: LocalCluster) -> None:
    create(cluster, "stale")
    assert produce_one(cluster, "stale", b"v") is None
    leader, isr = partition_state(cluster, "stale")
    follower = next(b for b in isr if b != leader)
    with WireClient(cluster.nodes[f"broker-{leader}"].port) as w:
        b = builder(3, 12)
        md = w.call(
            3,
            12,
            topics=(b.MetadataRequestTopic(name="stale", topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    topic_id = md.topics[0].topic_id.bytes
    leader_epoch = md.topics[0].partitions[0].leader_epoch
    endpoint = f"127.0.0.1:{cluster.base_port + 300 + leader - 1}"
    security = InternalSecurity.from_properties(cluster.internal_properties)

    async def follower_epoch() -> int:
        async with cluster.meta_client() as client:
            async for event in client.watch(0):
                return next(b.epoch for b in event.snapshot.brokers if b.id == follower)
        raise AssertionError("no snapshot")

    async def fetch(broker_epoch: int, current_leader_epoch: int) -> replication_pb2.PartitionData:
        request = replication_pb2.FetchRequest(
            replica_id=follower,
            broker_epoch=broker_epoch,
            max_wait_ms=0,
            max_bytes=1 << 20,
            partitions=[
                replication_pb2.FetchPartition(
                    topic_id=topic_id,
                    partition=0,
                    current_leader_epoch=current_leader_epoch,
                    fetch_offset=0,
                    last_fetched_epoch=-1,
                    max_bytes=1 << 20,
                )
            ],
        )
        async with security.channel(endpoint) as channel:
            call = wire.fetch_stream(channel)()
            await call.write(request)
            response, _batches = await call.read()
            call.cancel()
            return response.partitions[0]

    stale = asyncio.run(fetch(-5, leader_epoch))
    assert stale.error_code == ErrorCode.stale_broker_epoch
    assert not stale.records_size
    assert f"refusing a replica fetch from broker {follower}" in broker_log(cluster, leader)
    epoch = asyncio.run(follower_epoch())
    future = asyncio.run(fetch(epoch, leader_epoch + 1))
    assert future.error_code == ErrorCode.unknown_leader_epoch
    assert not future.records_size
    assert "refused" in broker_log(cluster, leader)
    # The refused fetches changed nothing: the follower is still in the ISR, the data intact.
    assert follower in partition_state(cluster, "stale")[1]
    assert read_all(cluster, "stale", expect=1) == [b"v"]


def test_crashed_broker_is_fenced_before_its_lease_runs_out(tmp_path: Path) -> None:
    """With default settings (9 s lease) a kill -9'd leader is replaced in about a second: its
    session with the meta leader closes when the process dies."""
    c = start_cluster(tmp_path, metas=1)
    try:
        create(c, "crash")
        leader, _ = partition_state(c, "crash")
        c.kill(f"broker-{leader}")
        start = time.monotonic()
        wait_for(
            lambda: partition_state(c, "crash")[0] not in (leader, -1),
            timeout=20,
            what="new leader",
        )
        elapsed = time.monotonic() - start
        assert elapsed < 6, (
            f"failover took {elapsed:.1f}s: the lease (9 s), not the session, fenced it"
        )
        meta_log = Path(c.nodes["meta-1"].log_file).read_text()
        assert f"Broker {leader}'s session closed" in meta_log
    finally:
        c.stop()
