"""Real meta node processes, driven through ``meta.client.MetaClient`` as brokers drive them."""

from __future__ import annotations

import pytest

from meta.client import MetaClient, MetaError
from meta.protocol import ErrorCode
from proto import meta_pb2

from .harness import FakeBrokers, MetaNodes, WatchedMetadata, eventually, leader_id, watching

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SESSION_TIMEOUT_MS = 1500
HEARTBEAT_INTERVAL_S = 0.3


def topic(name: str, partitions: int, rf: int = 1) -> meta_pb2.CreatableTopic:
    return meta_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf)


async def create(client: MetaClient, name: str, partitions: int) -> meta_pb2.CreateTopicResult:
    [result] = await client.create_topics([topic(name, partitions)])
    assert result.error_code == ErrorCode.NONE, result.error_message
    return result


async def test_three_node_quorum(meta_nodes_factory) -> None:
    nodes: MetaNodes = meta_nodes_factory(3, broker_session_timeout_ms=SESSION_TIMEOUT_MS)
    nodes.start_all()
    async with nodes.client() as client:
        leader = await leader_id(client)
        follower = next(n for n in nodes.ids if n != leader)
        cluster_id = (await client.describe_cluster()).cluster_id
        async with (
            nodes.client([nodes.address(follower)]) as follower_client,
            watching(follower_client) as on_follower,
            nodes.client([nodes.address(follower)]) as broker_client,
        ):
            # Brokers dial a follower first: their heartbeats follow its redirect to the leader.
            brokers = FakeBrokers(broker_client, HEARTBEAT_INTERVAL_S)
            for broker_id in (1, 2, 3):
                await brokers.register(broker_id)

            # A topic created through any node arrives on a follower's watch.
            created = await create(client, "events", 6)
            assert sorted(p.leader for p in created.partitions) == [1, 1, 2, 2, 3, 3]
            await eventually(lambda: "events" in on_follower.topics, what="topic on follower")
            assert on_follower.topics["events"].topic_id == created.topic_id
            assert on_follower.cluster_id == cluster_id

            # A write sent to a follower works the same.
            await create(follower_client, "via-follower", 2)
            described = await follower_client.describe_cluster()
            assert (described.node_id, described.leader_id) == (follower, leader)

            await kill_leader_during_writes_and_watch(nodes, client, leader)
            await fence_broker_then_register_it_again(brokers, on_follower)
            await brokers.close()
            on_follower.assert_no_gap()
        topic_ids = {name: t.topic_id for name, t in on_follower.topics.items()}

    # Stop every node and start them again: the metadata survives.
    nodes.stop_all()
    nodes.start_all()
    async with nodes.client() as client, watching(client) as restarted:
        await eventually(lambda: len(restarted.topics) == 3, what="topics after restart")
        assert restarted.cluster_id == cluster_id
        assert {name: t.topic_id for name, t in restarted.topics.items()} == topic_ids
        assert sorted(restarted.brokers) == [1, 2, 3]
    nodes.stop_all()


async def kill_leader_during_writes_and_watch(
    nodes: MetaNodes, client: MetaClient, leader: int
) -> None:
    """Kill -9 the Raft leader while a watch streams from it: writes and the watch go on."""
    others = [address for address in nodes.addresses if address != nodes.address(leader)]
    async with (
        nodes.client([nodes.address(leader), *others]) as leader_client,
        watching(leader_client) as on_leader,
    ):
        await eventually(lambda: "via-follower" in on_leader.topics, what="watch on leader")
        nodes.kill(leader)
        await create(client, "after-failover", 3)
        await eventually(lambda: "after-failover" in on_leader.topics, what="resumed watch")
        on_leader.assert_no_gap()
    await leader_id(client, exclude=leader)
    nodes.start(leader)  # it rejoins as a follower


async def fence_broker_then_register_it_again(
    brokers: FakeBrokers, watched: WatchedMetadata
) -> None:
    """Broker 2 stops heartbeating: fenced, its partitions go offline; registering restores."""
    before = {p.index: p for p in watched.topics["events"].partitions if p.leader == 2}
    assert len(before) == 2

    def partitions_of_2() -> list[meta_pb2.Partition]:
        return [watched.topics["events"].partitions[index] for index in before]

    await brokers.stop_heartbeats(2)
    await eventually(lambda: watched.brokers[2].fenced, what="broker 2 fenced")
    await eventually(lambda: all(p.leader == -1 for p in partitions_of_2()), what="offline")
    for p in partitions_of_2():
        assert p.leader_epoch == before[p.index].leader_epoch + 1
        assert list(p.isr) == [2]  # the last ISR member stays in the ISR

    old_epoch = brokers.epochs[2]
    assert await brokers.register(2) > old_epoch
    await eventually(lambda: all(p.leader == 2 for p in partitions_of_2()), what="leader back")
    for p in partitions_of_2():
        assert p.leader_epoch == before[p.index].leader_epoch + 2
    assert not watched.brokers[2].fenced


async def test_writes_wait_for_a_quorum_then_fail_clearly(meta_nodes_factory) -> None:
    nodes: MetaNodes = meta_nodes_factory(3, meta_write_timeout_ms=500)
    nodes.start_all()
    async with nodes.client() as client:
        await leader_id(client)
    nodes.kill(2)
    nodes.kill(3)
    async with nodes.client([nodes.address(1)], timeout_s=2) as impatient:
        with pytest.raises(MetaError, match="a majority of meta nodes must be up"):
            await impatient.create_topics([topic("lost", 1)])
    nodes.start(2)  # a majority again: writes go through once it has joined
    async with nodes.client([nodes.address(1)]) as patient:
        [result] = await patient.create_topics([topic("back", 1)])
        assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR  # no brokers, but applied
    nodes.stop_all()


async def test_single_node_quorum(meta_nodes_factory) -> None:
    nodes: MetaNodes = meta_nodes_factory(1)
    nodes.start_all()
    async with nodes.client() as client:
        assert await leader_id(client) == 1
        brokers = FakeBrokers(client, HEARTBEAT_INTERVAL_S)
        await brokers.register(1)
        [checked] = await client.create_topics([topic("orders", 3)], validate_only=True)
        assert checked.error_code == ErrorCode.NONE
        assert checked.num_partitions == 3
        created = await create(client, "orders", 3)
        [again] = await client.create_topics([topic("orders", 3)])
        assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        [too_many] = await client.create_topics([topic("wide", 1, rf=2)])
        assert too_many.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        async with watching(client) as watched:
            await eventually(lambda: "orders" in watched.topics, what="orders watched")
            gone, unknown = await client.delete_topics(["orders"], [b"\x00" * 16])
            assert gone.error_code == ErrorCode.NONE
            assert gone.topic_id == created.topic_id
            assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_ID
            await eventually(lambda: "orders" not in watched.topics, what="orders deleted")
        await create(client, "kept", 1)
        await brokers.close()
        cluster_id = (await client.describe_cluster()).cluster_id

    nodes.stop_all()
    nodes.start_all()
    async with nodes.client() as client, watching(client) as watched:
        await eventually(lambda: "kept" in watched.topics, what="kept after restart")
        assert watched.cluster_id == cluster_id
        assert "orders" not in watched.topics
    nodes.stop_all()


async def test_a_large_command_reaches_every_node_whole(meta_nodes_factory) -> None:
    """Commands larger than pysyncobj's default append-entries size (64 KiB: topics of
    thousands of partitions) reach every node, and no node fails to read one (pysyncobj's own
    chunked transmission, which the meta nodes avoid, fails for sizes just over a chunk)."""
    nodes: MetaNodes = meta_nodes_factory(3, broker_session_timeout_ms=SESSION_TIMEOUT_MS)
    nodes.start_all()
    async with nodes.client() as client:
        leader = await leader_id(client)
        brokers = FakeBrokers(client, HEARTBEAT_INTERVAL_S)
        for broker_id in (1, 2, 3):
            await brokers.register(broker_id)
        for n, partitions in enumerate((3000, 5000)):
            await create(client, f"wide-{n}", partitions)
        for node in nodes.ids:
            if node == leader:
                continue
            async with nodes.client([nodes.address(node)]) as on_node, watching(on_node) as seen:

                def both_wide(seen: WatchedMetadata = seen) -> bool:
                    return {"wide-0", "wide-1"} <= set(seen.topics)

                await eventually(
                    both_wide,
                    what=f"the wide topics on meta node {node}",
                )
        await brokers.close()
    for node in nodes.ids:
        assert "failed _onTick" not in nodes.log_file(node).read_text(errors="replace"), (
            nodes.log_tail(node)
        )
    nodes.stop_all()
