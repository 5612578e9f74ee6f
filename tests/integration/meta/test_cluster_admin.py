"""Cluster administration on real meta nodes: dynamic configs, CreatePartitions, partition
reassignment, finalized features and offline replicas, as a broker's MetadataCache sees them
(fed by a Watch through a follower), and after every meta node restarted."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from dataplane.metadata_cache import MetadataCache
from meta.client import MetaClient
from meta.model import ConfigAlteration, ReassignmentInfo
from meta.protocol import ErrorCode
from proto import meta_pb2

from .harness import FakeBrokers, MetaNodes, eventually, leader_id

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TV, GV, SV = "transaction.version", "group.version", "streams.version"


@contextlib.asynccontextmanager
async def cache_of(client: MetaClient) -> AsyncIterator[MetadataCache]:
    """A broker's metadata cache, fed by ``client``'s watch stream in the background."""
    cache = MetadataCache()

    async def feed() -> None:
        async for event in client.watch():
            cache.apply(event)

    task = asyncio.create_task(feed())
    try:
        yield cache
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_cluster_administration_reaches_brokers_and_survives_restart(
    meta_nodes_factory,
) -> None:
    # transaction.version 1: the bootstrap level comes from the meta nodes' config
    nodes: MetaNodes = meta_nodes_factory(
        3, broker_session_timeout_ms=20_000, transaction_version=1
    )
    nodes.start_all()
    async with nodes.client() as client:
        leader = await leader_id(client)
        follower = next(n for n in nodes.ids if n != leader)
        async with (
            nodes.client([nodes.address(follower)]) as via_follower,
            cache_of(via_follower) as cache,
        ):
            brokers = FakeBrokers(client, 0.3)
            for broker_id in (1, 2, 3, 4):
                await brokers.register(broker_id)
            topic = meta_pb2.CreatableTopic(
                name="admin",
                assignments=[
                    meta_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1, 2, 3]),
                    meta_pb2.ReplicaAssignment(partition_index=1, broker_ids=[2, 3, 1]),
                ],
            )
            [created] = await client.create_topics([topic])
            assert created.error_code == 0, created.error_message

            # Features: bootstrapped from the config, then upgraded (a downgrade is refused).
            await eventually(
                lambda: cache.finalized_features == {TV: 1, GV: 1, SV: 1}, what="features"
            )
            assert await client.update_features([(TV, 2, 1)]) == [(TV, 0, "")]
            [(_, code, message)] = await via_follower.update_features([(TV, 1, 1)])
            assert code == ErrorCode.INVALID_UPDATE_VERSION
            assert "Can't downgrade" in message
            await eventually(
                lambda: cache.finalized_features == {TV: 2, GV: 1, SV: 1}, what="upgrade"
            )

            # Dynamic configs of a topic, the cluster default and one broker.
            reloads: list[int] = []
            cache.config_listeners.append(lambda: reloads.append(1))
            outcomes = await via_follower.alter_configs(
                [
                    ConfigAlteration("topic", "admin", {"retention.ms": "60000"}),
                    ConfigAlteration("broker", "", {"message.max.bytes": "2000000"}),
                    ConfigAlteration("broker", "2", {"log.cleaner.threads": "2"}),
                    ConfigAlteration("topic", "missing", {"retention.ms": "1"}),
                    ConfigAlteration("broker", "9", {"log.cleaner.threads": "2"}),
                ]
            )
            assert [code for code, _ in outcomes] == [
                0,
                0,
                0,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.BROKER_ID_NOT_REGISTERED,
            ]
            wanted = {-1: {"message.max.bytes": "2000000"}, 2: {"log.cleaner.threads": "2"}}
            await eventually(lambda: cache.broker_configs == wanted, what="broker configs")
            await eventually(
                lambda: cache.topics["admin"].configs == {"retention.ms": "60000"},
                what="topic configs",
            )
            assert len(reloads) == 2
            validated = await client.alter_configs(
                [ConfigAlteration("broker", "", {}, replace=True)], validate_only=True
            )
            assert validated == [(0, "")]

            # CreatePartitions: 2 -> 4, placed on the registered brokers.
            assert await client.create_partitions("admin", 4) == (0, "")
            code, message = await client.create_partitions("admin", 3)
            assert code == ErrorCode.INVALID_PARTITIONS
            assert "would not be an increase" in message
            code, _ = await client.create_partitions("admin", 5, [[1, 2]])
            assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
            await eventually(lambda: len(cache.topics["admin"].partitions) == 4, what="growth")
            assert all(len(p.replicas) == 3 for p in cache.topics["admin"].partitions)

            # Reassignment of partition 0 from 1,2,3 to 2,3,4: 4 is added, joins the ISR (as
            # its leader asks once it caught up), and then 1 is removed and 2 leads.
            assert await client.alter_partition_reassignments(
                [("admin", 0, [2, 3, 4]), ("admin", 1, None), ("nope", 0, [1])]
            ) == [
                (0, ""),
                (
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    "No partition reassignment is in progress.",
                ),
                (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
            ]
            moving = ReassignmentInfo("admin", 0, (2, 3, 4, 1), (4,), (1,))
            assert await via_follower.list_partition_reassignments() == [moving]
            assert await client.list_partition_reassignments([("admin", 0), ("admin", 1)]) == [
                moving
            ]
            await eventually(
                lambda: cache.topics["admin"].partitions[0].adding_replicas == (4,),
                what="the reassignment on the watch",
            )
            p0 = cache.topics["admin"].partitions[0]
            item = meta_pb2.AlterPartitionItem(
                topic_id=created.topic_id,
                partition_index=0,
                leader_epoch=p0.leader_epoch,
                partition_epoch=p0.partition_epoch,
                new_isr=[1, 2, 3, 4],
            )
            [joined] = await client.alter_partition(1, brokers.epochs[1], [item])
            assert joined.error_code == ErrorCode.NEW_LEADER_ELECTED, joined.error_message
            await eventually(
                lambda: cache.topics["admin"].partitions[0].replicas == (2, 3, 4),
                what="the completed reassignment",
            )
            done = cache.topics["admin"].partitions[0]
            assert (done.isr, done.leader, done.removing_replicas) == ((2, 3, 4), 2, ())
            assert await client.list_partition_reassignments() == []

            # A failed log dir on broker 2: partition 1's leadership moves away from it.
            assert await client.offline_replicas(2, brokers.epochs[2], [("admin", 1)]) == 1
            await eventually(
                lambda: cache.topics["admin"].partitions[1].leader == 3, what="offline replica"
            )
            assert 2 not in cache.topics["admin"].partitions[1].isr
            await brokers.close()

        # Every meta node restarts: configs, features and partitions come back.
        nodes.stop_all()
        nodes.start_all()
        await leader_id(client)
        async with cache_of(client) as restarted:
            await eventually(lambda: "admin" in restarted.topics, what="the state after restart")
            assert restarted.broker_configs == wanted
            assert restarted.finalized_features == {TV: 2, GV: 1, SV: 1}
            admin = restarted.topics["admin"]
            assert admin.configs == {"retention.ms": "60000"}
            assert len(admin.partitions) == 4
            assert admin.partitions[0].replicas == (2, 3, 4)
    nodes.stop_all()


async def test_a_cluster_initialised_gets_default_feature_levels(meta_nodes_factory) -> None:
    nodes: MetaNodes = meta_nodes_factory(1)
    nodes.start_all()
    async with nodes.client() as client, cache_of(client) as cache:
        await eventually(lambda: cache.finalized_features == {TV: 2, GV: 1, SV: 1}, what="features")
        assert cache.features_epoch > 0
    nodes.stop_all()
