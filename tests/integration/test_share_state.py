"""Durable share-partition state through the failure of its share coordinator (3 brokers,
`__share_group_state` with RF 3 and min.insync.replicas 2).

The test process runs the persister share-partition leaders use (`SharePersister`), as a node
that coordinates nothing: it follows the real meta service's metadata, has
`__share_group_state` created on first use, and reaches the coordinating broker through the
`ShareState` RPC on its replication port with the cluster's internal credentials. A writer
replaces the state of a share-partition in sequence (each write acknowledged before the next)
while the coordinating broker is killed with SIGKILL; the persister finds the new coordinator
by itself. Afterwards the state read from the new coordinator is the last acknowledged one (no
acknowledged write lost), and the leader epoch claimed before the failure still fences a
stale share-partition leader. FindCoordinator (v6, key type 2) names that coordinator for the
key as Kafka spells it, on any broker.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from functools import partial

import anyio
import pytest

from cluster.local import LocalCluster
from common.internal_security import InternalSecurity
from dataplane.coordinator.runtime import InternalTopic
from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.peers import PeerChannels
from dataplane.share.model import DeliveryState, SharePartitionKey, ShareState, StateBatch
from dataplane.share.persister import SharePersister
from dataplane.share.state_rpc import key_to_proto
from dataplane.topic_admin import TopicAdmin
from proto import replication_pb2, replication_pb2_grpc
from tests.integration.conftest import running_cluster
from tests.integration.kafka_wire import WireClient

TOPIC = "__share_group_state"
PARTITIONS = 3
FAST = {
    "broker_session_timeout_ms": "2000",
    "broker_heartbeat_interval_ms": "300",
    "replica_lag_time_max_ms": "2000",
    "leader_imbalance_check_interval_seconds": "1",
    "share_coordinator_state_topic_num_partitions": str(PARTITIONS),
}
ACK, ARCHIVED = DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED
NOT_A_BROKER = -1
CALL_TIMEOUT_S = 60.0  # the persister's deadline: covers a failover (session timeout 2 s)
WRITES_AFTER_KILL = 20
FIND_COORDINATOR, SHARE_KEY = 10, 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("share-state"), 3, 3, False, **FAST) as c:
        yield c


class Tool:
    """A persister in the test process, on live metadata from the meta service."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.meta = cluster.meta_client()
        self.cache = MetadataCache()
        security = InternalSecurity.from_properties(cluster.internal_properties)
        admin = TopicAdmin(self.meta, self.cache, 1, 3)
        self.topic = InternalTopic(
            self.cache,
            partial(admin.create_topics, validate_only=False),
            TOPIC,
            PARTITIONS,
            3,
            {"cleanup.policy": "compact", "min.insync.replicas": "2"},
        )
        self.peers = PeerChannels(self.cache, security)
        self.persister = SharePersister(
            NOT_A_BROKER, self.cache, self.topic, self.peers, None, CALL_TIMEOUT_S
        )

    async def follow(self) -> None:
        async for event in self.meta.watch(self.cache.offset):
            self.cache.apply(event)

    def leader(self, key: SharePartitionKey) -> int:
        info = self.cache.topics[TOPIC]
        return info.partitions[self.topic.partition_for(key.coordinator_key())].leader

    async def close(self) -> None:
        await self.peers.close()
        await self.meta.close()


def _state(leader_epoch: int, start: int) -> ShareState:
    """The state a share-partition leader writes once every offset before `start` is done:
    the next few acknowledged, one archived after too many deliveries."""
    return ShareState(
        0,
        leader_epoch,
        start,
        (StateBatch(start, start + 2, ACK, 1), StateBatch(start + 5, start + 5, ARCHIVED, 5)),
    )


def find_share_coordinator(port: int, key: SharePartitionKey, version: int = 6) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator for the share key in Kafka's spelling
    "group:topicId:partition", the topic id as Kafka's Uuid.toString() prints it."""
    topic_id = base64.urlsafe_b64encode(key.topic_id.bytes).rstrip(b"=").decode()
    ck = f"{key.group_id}:{topic_id}:{key.partition}"
    with WireClient(port) as w:
        r = w.call(FIND_COORDINATOR, version, key_type=SHARE_KEY, coordinator_keys=(ck,))
    (c,) = r.coordinators
    assert c.key == ck
    return c.error_code, c.node_id


async def _fenced(call: object) -> ErrorCode:
    try:
        await call  # type: ignore[misc]
    except KafkaError as e:
        return e.code
    return ErrorCode.none


def test_state_survives_coordinator_kill(cluster: LocalCluster) -> None:
    key = SharePartitionKey("share-state-group", uuid.uuid4(), 0)

    async def main() -> None:
        tool = Tool(cluster)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(tool.follow)
                await tool.cache.ready.wait()
                await scenario(cluster, tool, key)
                tg.cancel_scope.cancel()
        finally:
            await tool.close()

    anyio.run(main)


async def scenario(cluster: LocalCluster, tool: Tool, key: SharePartitionKey) -> None:
    p = tool.persister
    assert await p.summary(key) is None  # creates the topic, waits for its leaders
    assert await p.initialize(key, 0) == ShareState(0, 0, 0, ())  # leader epoch 0, as Kafka
    # the share-partition's leader at epoch 1 claims the state
    assert await p.read(key, 1) == ShareState(0, 1, 0, ())
    coordinator = tool.leader(key)

    # a broker that does not coordinate the key says so (the persister would look again)
    other = next(b for b in tool.cache.live_brokers() if b.id != coordinator).id
    stub = tool.peers.stub(other, replication_pb2_grpc.ShareStateStub)
    response = await stub.Summary(replication_pb2.ShareStateKeyRequest(key=key_to_proto(key)))
    assert response.error_code == ErrorCode.not_coordinator
    # FindCoordinator names it, on any broker; share keys came with v6
    port = cluster.nodes[f"broker-{other}"].port
    found = await anyio.to_thread.run_sync(find_share_coordinator, port, key)
    assert found == (ErrorCode.none, coordinator)
    found = await anyio.to_thread.run_sync(find_share_coordinator, port, key, 5)
    assert found == (ErrorCode.invalid_request, -1)

    kill_at = 30
    acknowledged = 0
    reached, killed = anyio.Event(), anyio.Event()

    async def writer() -> None:
        """Writes in sequence, each acknowledged before the next, on through the kill (one is
        in flight then) until WRITES_AFTER_KILL more are acknowledged."""
        nonlocal acknowledged
        start = after_kill = 0
        while after_kill < WRITES_AFTER_KILL:
            start += 1
            await p.write(key, _state(1, start))
            acknowledged = start
            if start == kill_at:
                reached.set()
            if killed.is_set():
                after_kill += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        with anyio.fail_after(CALL_TIMEOUT_S):
            await reached.wait()
        await anyio.to_thread.run_sync(cluster.kill, f"broker-{coordinator}")
        killed.set()

    # the writer went through the failover: a new coordinator, every write acknowledged
    assert tool.leader(key) not in (coordinator, -1)
    assert acknowledged >= kill_at + WRITES_AFTER_KILL
    assert await p.summary(key) == _state(1, acknowledged)
    # the epoch-1 claim made before the failure still fences an older leader
    assert await _fenced(p.write(key, _state(0, acknowledged + 1))) == ErrorCode.fenced_leader_epoch
    # a new leader (epoch 2) claims the state: the epoch-1 leader is fenced from then on
    assert await p.read(key, 2) == ShareState(0, 2, acknowledged, _state(1, acknowledged).batches)
    assert await _fenced(p.write(key, _state(1, acknowledged + 1))) == ErrorCode.fenced_leader_epoch
    # AlterShareGroupOffsets: a new state epoch fences writes of the old one
    assert await p.initialize(key, 500) == ShareState(1, 2, 500, ())
    assert await _fenced(p.write(key, _state(2, 501))) == ErrorCode.fenced_state_epoch
    await p.delete(key)
    assert await p.summary(key) is None
