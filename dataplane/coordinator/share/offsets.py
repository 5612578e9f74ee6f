"""What the share group offsets APIs (DescribeShareGroupOffsets 90, AlterShareGroupOffsets 91,
DeleteShareGroupOffsets 92) and DeleteGroups do with the share-partition state: the group's
checks in its shard, the persister calls (`dataplane.share.model.Persister`, the share
coordinator's), and the group's record of which share-partitions have state.

A share-partition's *start offset* is the first offset not yet done (acknowledged or archived);
its *lag* (Kafka's KIP-1226) the records still to deliver: the high watermark (the last stable
offset for a read_committed group) minus the start offset minus the records already done
inside the in-flight window.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import anyio

from dataplane.coordinator.base import Reply, map_append_error
from dataplane.coordinator.share.adapter import ShareGroupAdapter, share_group
from dataplane.coordinator.share.group import ShareGroup
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.share.model import DeliveryState, SharePartitionKey, ShareState

if TYPE_CHECKING:
    from dataplane.coordinator.shard import GroupShard
    from dataplane.replica.manager import ReplicaManager

log = logging.getLogger("rafka.coordinator.share_group")

T = TypeVar("T")
UNKNOWN_PARTITION = "This server does not host this topic-partition."  # Kafka's text
_DONE = (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED)


def lag(state: ShareState, end_offset: int) -> int:
    """Records of [start offset, end_offset) not yet done."""
    done = 0
    for batch in state.batches:
        if batch.delivery_state in _DONE:
            first = max(batch.first_offset, state.start_offset)
            last = min(batch.last_offset, end_offset - 1)
            done += max(0, last - first + 1)
    return max(0, end_offset - state.start_offset - done)


def end_offset(replicas: ReplicaManager, topic: str, partition: int, read_committed: bool) -> int:
    """The high watermark (last stable offset) of the local replica; -1 when this broker has
    no replica of the partition (its lag is then unknown)."""
    replica = replicas.partitions.get((topic, partition))
    if replica is None:
        return -1
    return replica.last_stable_offset if read_committed else replica.high_watermark


async def gather(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T | KafkaError]:
    """Run the calls concurrently: each one's result or the KafkaError it raised."""
    results: list[T | KafkaError] = [KafkaError(ErrorCode.unknown_server_error)] * len(calls)

    async def run(i: int) -> None:
        try:
            results[i] = await calls[i]()
        except KafkaError as e:
            results[i] = e

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(run, i)
    return results


def empty_share_group(shard: GroupShard, group_id: str) -> ShareGroupAdapter:
    """The share group, which must have no member (NON_EMPTY_GROUP): offsets are altered or
    deleted only while nobody consumes (Kafka's GROUP_NOT_EMPTY check)."""
    group = share_group(shard, group_id)
    if not group.group.is_empty:
        log.info(
            "share group %s has members: its offsets are altered or deleted only once its "
            "consumers are stopped",
            group_id,
        )
        raise KafkaError(ErrorCode.non_empty_group, "The group is not empty.")  # Kafka's text
    return group


def share_group_to_alter(shard: GroupShard, group_id: str) -> ShareGroupAdapter:
    """The empty share group whose offsets AlterShareGroupOffsets sets; as Kafka's
    getOrMaybeCreateShareGroup, a new one when the id has no group (it exists once
    `record_state_partitions` wrote its first record)."""
    if group_id in shard.groups:
        return empty_share_group(shard, group_id)
    services = shard.services
    return ShareGroupAdapter(ShareGroup(group_id, services.config.share), services)


async def record_state_partitions(
    shard: GroupShard, group: ShareGroupAdapter, partitions: dict[bytes, tuple[str, frozenset[int]]]
) -> None:
    """Make `partitions` the group's share-partitions with state (replicated record); a
    group `share_group_to_alter` made enters the shard with it."""
    if partitions == group.group.state_partitions:
        return
    reply: Reply[ErrorCode] = Reply()
    record = group.group.state_partitions_record(partitions)

    def done(error: ErrorCode) -> None:
        reply.complete(error)

    creating = group.group_id not in shard.groups
    if creating:
        shard.groups[group.group_id] = group  # the record's replay applies to it
    refused = shard.services.write(group.group_id, [record], replay=True, done=done)
    if creating and refused is None:
        shard.add_group(group)
        log.info("share group %s created by AlterShareGroupOffsets", group.group_id)
    elif creating:
        shard.groups.pop(group.group_id, None)
    error = refused if refused is not None else await reply.wait()
    if error != ErrorCode.none:
        raise KafkaError(map_append_error(error))


def key(group_id: str, topic_id: bytes, partition: int) -> SharePartitionKey:
    return SharePartitionKey(group_id, uuid.UUID(bytes=topic_id), partition)


async def delete_group_state(
    delete: Callable[[SharePartitionKey], Awaitable[None]], group: ShareGroupAdapter
) -> ErrorCode:
    """Before a share group's deletion: forget the state of its share-partitions (as Kafka's
    deleteShareGroups asks the persister first, so a failure leaves the group whole)."""
    keys = group.state_keys()
    results = await gather([lambda k=k: delete(k) for k in keys])  # type: ignore[misc]
    for k, result in zip(keys, results, strict=True):
        if isinstance(result, KafkaError):
            log.warning(
                "share group %s: deleting the state of %s-%d failed (%s); the group is kept, "
                "retry DeleteGroups",
                group.group_id,
                k.topic_id,
                k.partition,
                result,
            )
            return result.code
    return ErrorCode.none
