"""The cluster's internal ports admit only its members (issue 11, "Internal traffic").

A local cluster always has a fresh cluster secret; one also has TLS with client certificates.
Calls to the meta gRPC (CreateTopics, Watch) and the replication gRPC (a fetch of partition
data) without credentials, with a wrong secret or with a certificate of another CA are refused,
the Raft port drops a peer without the password, and the cluster itself works: acks=all
produce and consume on 3 replicas.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pysyncobj.utility import TcpUtility, UtilityException

from cluster.local import LocalCluster
from common.internal_security import InternalSecurity, local_cluster_credentials
from dataplane.replica import wire
from meta.client import MetaClient, MetaError
from proto import meta_pb2, replication_pb2
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.meta.harness import MetaNodes

RECORDS = 200


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster with the secret only (TLS off), as `rafka up` starts a PLAINTEXT one."""
    with running_cluster(tmp_path_factory.mktemp("secret")) as c:
        yield c


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster with internal TLS (client certificates) and the secret."""
    tmp = tmp_path_factory.mktemp("tls")
    with running_cluster(tmp, metas=1, internal_tls=True) as c:
        yield c


def security(properties: dict[str, str]) -> InternalSecurity:
    return InternalSecurity.from_properties(properties)


WRONG_SECRET = security({"internal.secret": "not-the-cluster-secret"})


def foreign_certificate(tmp: Path, secret: str) -> InternalSecurity:
    """A certificate for 127.0.0.1 from another CA (with the right secret: only TLS refuses)."""
    foreign = local_cluster_credentials(tmp, tls=True)
    return security(foreign | {"internal.secret": secret})


# ------------------------------------------------------------------------------ helpers


def produce_and_consume(cluster: LocalCluster, topic: str) -> None:
    """acks=all on 3 replicas, every record read back, the 3 replicas in sync."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            errors.append(error)

    for i in range(RECORDS):
        producer.produce(topic, b"%d" % i, on_delivery=delivered)
    assert producer.flush(30) == 0, errors
    assert not errors, errors
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": topic})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes | None] = []

    def all_read() -> bool:
        got.extend(m.value() for m in consumer.consume(500, 0.5) if not m.error())
        return len(got) >= RECORDS

    wait_for(all_read, what=f"{RECORDS} records")
    consumer.close()
    assert got == [b"%d" % i for i in range(RECORDS)]
    wait_for(
        lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs) == 3,
        what="3 replicas in sync",
    )


async def create_topic(client: MetaClient, name: str) -> int:
    topic = meta_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
    [result] = await client.create_topics([topic])
    return result.error_code


async def first_event(client: MetaClient) -> meta_pb2.WatchEvent:
    async for event in client.watch(0):
        return event
    raise AssertionError("the watch stream ended")


def refused_meta_calls(cluster: LocalCluster, credentials: InternalSecurity | None) -> None:
    """CreateTopics and Watch fail, and the topic was not created."""
    name = f"intruder-{uuid.uuid4().hex[:6]}"

    async def calls() -> None:
        async with MetaClient(cluster.meta_servers, timeout_s=3, security=credentials) as client:
            with pytest.raises(MetaError):
                await create_topic(client, name)
            # Refused for good (UNAUTHENTICATED), or, when TLS fails, retried until cancelled.
            with pytest.raises((MetaError, TimeoutError)):
                await asyncio.wait_for(first_event(client), 3)
        async with cluster.meta_client() as member:
            snapshot = (await first_event(member)).snapshot
        assert name not in {t.name for t in snapshot.topics}

    asyncio.run(calls())


async def leader_of_partition_zero(
    cluster: LocalCluster, topic: str
) -> tuple[meta_pb2.Snapshot, meta_pb2.Topic, str]:
    """The cluster's metadata, ``topic``'s, and the replication endpoint of its partition 0's
    leader."""
    async with cluster.meta_client() as member:
        snapshot = (await first_event(member)).snapshot
    [t] = [t for t in snapshot.topics if t.name == topic]
    return snapshot, t, f"127.0.0.1:{cluster.base_port + 300 + t.partitions[0].leader - 1}"


async def replica_fetch(
    cluster: LocalCluster, topic: str, credentials: InternalSecurity
) -> replication_pb2.FetchResponse:
    """A fetch of ``topic``'s partition 0 from its leader, as its follower would send it."""
    snapshot, t, endpoint = await leader_of_partition_zero(cluster, topic)
    partition = t.partitions[0]
    follower = next(r for r in partition.replicas if r != partition.leader)
    epoch = next(b.epoch for b in snapshot.brokers if b.id == follower)
    request = replication_pb2.FetchRequest(
        replica_id=follower,
        broker_epoch=epoch,
        max_wait_ms=0,
        max_bytes=1 << 20,
        partitions=[
            replication_pb2.FetchPartition(
                topic_id=t.topic_id,
                partition=0,
                current_leader_epoch=partition.leader_epoch,
                fetch_offset=0,
                last_fetched_epoch=-1,
                max_bytes=1 << 20,
            )
        ],
    )
    async with credentials.channel(endpoint) as channel:
        call = wire.fetch_stream(channel)(timeout=5)
        await call.write(request)
        response, _batches = await call.read()
        call.cancel()
        return response


async def refusal(
    cluster: LocalCluster, topic: str, credentials: InternalSecurity
) -> grpc.StatusCode:
    """How the leader of ``topic``'s partition 0 answers a replication stream opened with
    ``credentials`` that sends nothing. A stranger is refused as the call opens (or at the
    TLS handshake), before any request is read; a member is answered nothing, so its call ends
    at its deadline. (No request is written: a write racing the refusal fails on the client,
    which then reports INTERNAL instead of the server's status.)"""
    _snapshot, _topic, endpoint = await leader_of_partition_zero(cluster, topic)
    async with credentials.channel(endpoint) as channel:
        return await wire.fetch_stream(channel)(timeout=5).code()


def refused_code(
    cluster: LocalCluster, topic: str, credentials: InternalSecurity
) -> grpc.StatusCode:
    return asyncio.run(refusal(cluster, topic, credentials))


def fetch_code(cluster: LocalCluster, topic: str, credentials: InternalSecurity) -> grpc.StatusCode:
    try:
        response = asyncio.run(replica_fetch(cluster, topic, credentials))
    except grpc.aio.AioRpcError as e:
        return e.code()
    assert response.partitions[0].records_size > 0  # the partition's data came back
    return grpc.StatusCode.OK


def log_of(cluster: LocalCluster, name: str) -> str:
    return cluster.nodes[name].log_file.read_text()


# ------------------------------------------------------------------------------ cluster secret


def test_the_cluster_works_with_its_secret(cluster: LocalCluster) -> None:
    produce_and_consume(cluster, "secured")
    assert "has no internal credential" not in log_of(cluster, "meta-1")
    assert "has no internal credential" not in log_of(cluster, "broker-1")
    assert (cluster.data_dir / "internal.properties").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("credentials", [None, WRONG_SECRET], ids=["none", "wrong-secret"])
def test_meta_grpc_refuses_strangers(
    cluster: LocalCluster, credentials: InternalSecurity | None
) -> None:
    refused_meta_calls(cluster, credentials)
    wait_for(
        lambda: (
            "Refused /rafka.meta.MetaService/CreateTopics from ipv4:127.0.0.1"
            in "".join(log_of(cluster, f"meta-{i}") for i in (1, 2, 3))
        ),
        what="the refusal logged",
    )


def test_replication_grpc_refuses_strangers(cluster: LocalCluster) -> None:
    produce_and_consume(cluster, "replicated")
    assert (
        refused_code(cluster, "replicated", InternalSecurity()) == grpc.StatusCode.UNAUTHENTICATED
    )
    assert refused_code(cluster, "replicated", WRONG_SECRET) == grpc.StatusCode.UNAUTHENTICATED
    member = security(cluster.internal_properties)
    assert fetch_code(cluster, "replicated", member) == grpc.StatusCode.OK
    logs = "".join(log_of(cluster, f"broker-{i}") for i in (1, 2, 3))
    assert "Refused /rafka.replication.Replication/Fetch from ipv4:127.0.0.1" in logs


def test_raft_port_drops_peers_without_the_password(cluster: LocalCluster) -> None:
    raft = f"127.0.0.1:{cluster.base_port + 200}"
    for password in (None, "wrong"):
        with pytest.raises(UtilityException):
            TcpUtility(password, timeout=5).executeCommand(raft, ["status"])
    password = security(cluster.internal_properties).raft_password
    status = TcpUtility(password, timeout=5).executeCommand(raft, ["status"])
    assert status["self"].address == raft


def test_a_node_without_credentials_warns_that_its_ports_are_open(tmp_path: Path) -> None:
    nodes = MetaNodes(tmp_path, 1, secure=False)
    nodes.start(1)
    try:
        wait_for(
            lambda: "has no internal credential" in nodes.log_file(1).read_text(),
            what="the warning",
        )
    finally:
        nodes.kill_all()


# ------------------------------------------------------------------------------ TLS


def test_the_cluster_works_over_internal_tls(tls_cluster: LocalCluster) -> None:
    produce_and_consume(tls_cluster, "tls")
    assert "TLS with client certificates + cluster secret" in log_of(tls_cluster, "meta-1")


def test_tls_refuses_a_client_without_a_certificate_of_the_cluster_ca(
    tls_cluster: LocalCluster, tmp_path: Path
) -> None:
    secret = tls_cluster.internal_properties["internal.secret"]
    without_certificate = security({"internal.secret": secret})
    foreign = foreign_certificate(tmp_path, secret)
    for credentials in (None, without_certificate, foreign):
        refused_meta_calls(tls_cluster, credentials)
    produce_and_consume(tls_cluster, "tls-replicated")
    for credentials in (InternalSecurity(), without_certificate, foreign):
        assert refused_code(tls_cluster, "tls-replicated", credentials) == (
            grpc.StatusCode.UNAVAILABLE  # the TLS handshake fails
        )
    member = security(tls_cluster.internal_properties)
    assert fetch_code(tls_cluster, "tls-replicated", member) == grpc.StatusCode.OK
