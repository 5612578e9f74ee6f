"""ISR changes, controlled shutdown, preferred leaders and producer ids on real meta nodes."""

from __future__ import annotations

import uuid

import pytest

from meta.client import MetaClient, MetaRequestError
from meta.protocol import ErrorCode
from proto import meta_pb2

from .harness import (
    FakeBrokers,
    MetaNodes,
    WatchedMetadata,
    eventually,
    isr_change,
    leader_id,
    watching,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

HEARTBEAT_INTERVAL_S = 0.3


async def create(client: MetaClient, name: str, partitions: int) -> meta_pb2.CreateTopicResult:
    topic = meta_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=3)
    [result] = await client.create_topics([topic])
    assert result.error_code == ErrorCode.NONE, result.error_message
    return result


async def test_isr_changes_and_producer_ids_survive_failover_and_restart(
    meta_nodes_factory,
) -> None:
    # Long sessions: the fake brokers must stay unfenced while every meta node restarts.
    nodes: MetaNodes = meta_nodes_factory(3, broker_session_timeout_ms=20_000)
    nodes.start_all()
    async with nodes.client() as client:
        leader = await leader_id(client)
        follower = next(n for n in nodes.ids if n != leader)
        others = [address for address in nodes.addresses if address != nodes.address(leader)]
        async with (
            nodes.client([nodes.address(follower)]) as via_follower,
            nodes.client([nodes.address(leader), *others]) as leader_first,
            watching(via_follower) as watched,
        ):
            brokers = FakeBrokers(via_follower, HEARTBEAT_INTERVAL_S)
            for broker_id in (1, 2, 3):
                await brokers.register(broker_id)
            created = await create(client, "replicated", 3)
            topic_id, p0, p1 = created.topic_id, created.partitions[0], created.partitions[1]

            # The leader of partition 0 shrinks its ISR through a follower meta node.
            [shrunk] = await via_follower.alter_partition(
                p0.leader, brokers.epochs[p0.leader], [isr_change(topic_id, p0, [p0.leader])]
            )
            assert shrunk.error_code == ErrorCode.NONE, shrunk.error_message
            assert list(shrunk.partition.isr) == [p0.leader]
            assert shrunk.partition.partition_epoch == p0.partition_epoch + 1
            assert shrunk.partition.leader_epoch == p0.leader_epoch
            await eventually(
                lambda: partition(watched, 0).partition_epoch == shrunk.partition.partition_epoch,
                what="the ISR change on the watch",
            )
            # The same change built from the old state again (a new request): fenced.
            [stale] = await via_follower.alter_partition(
                p0.leader, brokers.epochs[p0.leader], [isr_change(topic_id, p0, [p0.leader])]
            )
            assert stale.error_code == ErrorCode.INVALID_UPDATE_VERSION
            # KIP-903: a member quoted at a broker epoch it no longer has (it registered again
            # since the leader saw its fetch: maybe with an empty disk) is not added.
            other = next(b for b in p0.replicas if b != p0.leader)
            rejoin = isr_change(topic_id, shrunk.partition, [p0.leader, other])
            rejoin.new_isr_broker_epochs.extend([-1, brokers.epochs[other] - 1])
            [ineligible] = await via_follower.alter_partition(
                p0.leader, brokers.epochs[p0.leader], [rejoin]
            )
            assert ineligible.error_code == ErrorCode.INELIGIBLE_REPLICA, ineligible

            # A request applied by the Raft leader, which then dies before the broker hears
            # back: the broker's retry (same request id) on another node applies nothing new.
            request_id = uuid.uuid4().hex
            change = [isr_change(topic_id, p1, [p1.leader])]
            args = (p1.leader, brokers.epochs[p1.leader], change)
            [applied] = await leader_first.alter_partition(*args, request_id=request_id)
            assert applied.error_code == ErrorCode.NONE, applied.error_message
            nodes.kill(leader)
            [retried] = await leader_first.alter_partition(*args, request_id=request_id)
            assert retried == applied
            await leader_id(client, exclude=leader)
            await eventually(
                lambda: partition(watched, 1).partition_epoch == applied.partition.partition_epoch,
                what="the change once on the watch",
            )
            assert list(partition(watched, 1).isr) == [p1.leader]

            # ElectLeaders: nothing to do, every partition is led by its preferred replica.
            assert await client.elect_leaders(meta_pb2.ELECTION_TYPE_PREFERRED) == []
            [results] = await client.elect_leaders(
                meta_pb2.ELECTION_TYPE_UNCLEAN, {"replicated": [0, 9]}
            )
            assert results.topic == "replicated"
            assert [(r.partition_id, r.error_code) for r in results.partition_results] == [
                (0, ErrorCode.ELECTION_NOT_NEEDED),
                (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ]

            # Producer-id blocks from every node, including one while a node is down.
            blocks = [
                await c.allocate_producer_ids(b, brokers.epochs[b])
                for c in (via_follower, leader_first)
                for b in (1, 2)
            ]
            with pytest.raises(MetaRequestError) as refused:
                await client.allocate_producer_ids(1, brokers.epochs[1] - 1)
            assert refused.value.error_code == ErrorCode.STALE_BROKER_EPOCH
            nodes.start(leader)

            # Every meta node dies at once and starts again: the state comes back from the
            # journals, and no producer id is handed out twice.
            nodes.kill_all()
            nodes.start_all()
            await leader_id(client)
            blocks += [await client.allocate_producer_ids(3, brokers.epochs[3]) for _ in range(2)]
            await brokers.close()
            watched.assert_no_gap()
    firsts = [block.first for block in blocks]
    assert all(block.size == 1000 for block in blocks)
    assert firsts == sorted(firsts), firsts
    assert len(set(firsts)) == len(firsts), firsts
    assert firsts[0] >= 0
    assert firsts[-1] - firsts[0] == 1000 * (len(blocks) - 1)
    async with nodes.client() as client, watching(client) as restarted:
        await eventually(lambda: "replicated" in restarted.topics, what="topic after restart")
        assert list(partition(restarted, 0).isr) == [p0.leader]
    nodes.stop_all()


def partition(watched: WatchedMetadata, index: int, topic: str = "replicated"):
    return watched.topics[topic].partitions[index]


async def test_controlled_shutdown_and_preferred_leaders(meta_nodes_factory) -> None:
    nodes: MetaNodes = meta_nodes_factory(
        3, broker_session_timeout_ms=1500, leader_imbalance_check_interval_seconds=1
    )
    nodes.start_all()
    async with nodes.client() as client:
        leader = await leader_id(client)
        follower = next(n for n in nodes.ids if n != leader)
        async with (
            nodes.client([nodes.address(follower)]) as broker_client,
            watching(client) as watched,
        ):
            brokers = FakeBrokers(broker_client, HEARTBEAT_INTERVAL_S)
            for broker_id in (1, 2, 3):
                await brokers.register(broker_id)
            created = await create(client, "orders", 6)
            preferred = {p.index: p.replicas[0] for p in created.partitions}
            assert all(p.leader == preferred[p.index] for p in created.partitions)

            def partitions() -> list[meta_pb2.Partition]:
                return list(watched.topics["orders"].partitions)

            def led_by_preferred() -> bool:
                return all(p.leader == preferred[p.index] for p in partitions())

            # Broker 2 stops cleanly: it hands over its leaderships and leaves the ISRs first.
            await eventually(lambda: "orders" in watched.topics, what="orders watched")
            await brokers.controlled_shutdown(2)
            await eventually(
                lambda: all(p.leader != 2 and 2 not in p.isr for p in partitions()),
                what="broker 2 leading nothing and in no ISR",
            )
            assert watched.brokers[2].in_controlled_shutdown
            assert watched.brokers[2].fenced
            assert all(p.leader != -1 for p in partitions())
            [refused] = await client.elect_leaders(
                meta_pb2.ELECTION_TYPE_PREFERRED, {"orders": list(preferred)}
            )
            assert {
                r.error_code for r in refused.partition_results if preferred[r.partition_id] == 2
            } == {ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}

            # It restarts, catches up and rejoins the ISRs: it leads its partitions again.
            await brokers.register(2, restarted=True)
            await eventually(lambda: not watched.brokers[2].fenced, what="broker 2 back")
            assert not watched.brokers[2].in_controlled_shutdown
            await brokers.take_into_isrs(watched.topics["orders"], 2)
            await eventually(led_by_preferred, what="preferred leaders after the restart")

            # Broker 3 stops heartbeating: fenced, its partitions move; it registers again.
            await brokers.stop_heartbeats(3)
            await eventually(lambda: watched.brokers[3].fenced, what="broker 3 fenced")
            await eventually(
                lambda: all(p.leader != 3 and 3 not in p.isr for p in partitions()),
                what="broker 3 leading nothing",
            )
            await brokers.register(3)
            await eventually(lambda: not watched.brokers[3].fenced, what="broker 3 unfenced")
            await brokers.take_into_isrs(watched.topics["orders"], 3)
            await eventually(led_by_preferred, what="preferred leaders after the fence")
            assert all(len(p.isr) == 3 for p in partitions())
            await brokers.close()
            watched.assert_no_gap()
    nodes.stop_all()
