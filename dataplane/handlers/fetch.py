"""Fetch (1): serve raw batches up to the high watermark, with long polling.

The hot path: batches are read from the segment files and sent as stored. When less than
min_bytes is available the handler returns an awaitable that parks on the partitions' high
watermark until data arrives or max_wait_ms passes. READ is authorized per topic
(TOPIC_AUTHORIZATION_FAILED); followers replicate over their own RPC, not through here.

isolation_level=1 (read_committed) reads up to the last stable offset instead, below every
open transaction, and lists the aborted transactions the records may hold so the client drops
their batches (it filters; the broker sends batches as stored). Every answer carries the real
LSO, as Kafka's does. A waiting read_committed fetch re-reads whenever the high watermark
moves: a transaction's marker is appended (and replicated) like any batch, so its commit or
abort moves the high watermark past it and wakes the wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.log import LogError
from dataplane.protocol.encoders import (
    AbortedTransaction,
    FetchPartition,
    FetchTopic,
    encode_fetch_response,
)
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from dataplane.replica.partition import Partition

API_KEY = 1
VERSIONS = (4, 16)

READ_COMMITTED = 1


RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


class _Read:
    """One pass over the requested partitions: what was read and which partitions to watch."""

    def __init__(self) -> None:
        self.topics: list[FetchTopic] = []
        self.bytes = 0
        self.respond_now = False  # an error or a redirect to another replica
        self.partitions: list[Partition] = []


def _read(ctx: RequestContext, req: Any) -> _Read:
    cache, replicas = ctx.services.cache, ctx.services.replicas
    version = ctx.header.api_version
    by_id = version >= 13  # topic ids replace names from v13 (KIP-516)
    # KIP-392: consumers that name their rack (v11+) may read from a follower.
    from_follower = version >= 11 and bool(req.rack_id)
    budget = req.max_bytes
    authorizer = ctx.services.authorizer
    result = _Read()
    for topic in req.topics:
        topic_id = topic.topic_id.bytes if by_id and topic.topic_id else bytes(16)
        info = cache.topics_by_id.get(topic_id) if by_id else cache.topics.get(topic.topic)
        unknown = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
        name = info.name if info else (None if by_id else topic.topic)
        if (
            authorizer.enabled
            and name is not None
            and not authorizer.authorize(ctx.conn, AclOperation.READ, ResourceType.TOPIC, name)
        ):  # even an unknown one: Kafka checks READ before existence
            info, unknown = None, ErrorCode.topic_authorization_failed
        out: list[FetchPartition] = []
        for p in topic.partitions:
            try:
                if info is None:
                    raise KafkaError(unknown)
                epoch = getattr(p, "current_leader_epoch", -1)
                partition = replicas.readable_partition(
                    info.name, p.partition, epoch, from_follower
                )
            except KafkaError as e:
                result.respond_now = True
                out.append(FetchPartition(p.partition, e.code, -1, -1, -1, None, -1, b""))
                continue
            data = _partition_data(ctx, req, partition, p, budget, result.bytes == 0)
            out.append(data)
            if data.error_code or data.preferred_read_replica >= 0:
                result.respond_now = True
                continue
            size = len(data.records or b"")
            budget = max(0, budget - size)
            result.bytes += size
            result.partitions.append(partition)
        result.topics.append(FetchTopic(name, info.topic_id if info else topic_id, out))
    return result


def _partition_data(
    ctx: RequestContext, req: Any, partition: Partition, p: Any, budget: int, first: bool
) -> FetchPartition:
    hw, lso, start = (
        partition.high_watermark,
        partition.last_stable_offset,
        partition.log.log_start_offset,
    )
    committed = req.isolation_level == READ_COMMITTED
    replica = _preferred_read_replica(ctx, req, partition)
    if replica >= 0:
        no_aborts: list[AbortedTransaction] | None = [] if committed else None
        return FetchPartition(p.partition, ErrorCode.none, hw, lso, start, no_aborts, replica, b"")
    try:
        records = partition.log.read(
            p.fetch_offset, min(p.partition_max_bytes, budget), lso if committed else hw, first
        )
    except LogError as e:
        return FetchPartition(p.partition, e.code, hw, lso, start, None, -1, b"")
    aborted = aborted_transactions(partition, p.fetch_offset, lso, records) if committed else None
    return FetchPartition(p.partition, ErrorCode.none, hw, lso, start, aborted, -1, records)


def aborted_transactions(
    partition: Partition, fetch_offset: int, lso: int, records: Any
) -> list[AbortedTransaction]:
    """What a read_committed consumer needs to drop the aborted batches among ``records``
    (Kafka's LocalLog.addAbortedTransactions); nothing read, nothing to drop. The bound is the
    LSO rather than the end of the read: a transaction listed that the records do not reach
    is ignored by the client, and finding that end would mean walking every batch header."""
    if not records:
        return []
    return [
        AbortedTransaction(producer_id, first_offset)
        for producer_id, first_offset in partition.log.aborted_transactions(fetch_offset, lso)
    ]


def _preferred_read_replica(ctx: RequestContext, req: Any, partition: Partition) -> int:
    """With replica.selector.class=RackAwareReplicaSelector, the leader sends a consumer from
    another rack to an in-sync replica on the consumer's rack (KIP-392); -1: read here."""
    services = ctx.services
    rack = getattr(req, "rack_id", "")
    if not (rack and partition.is_leader and services.config.replica_selector_class == RACK_AWARE):
        return -1
    if services.config.broker_rack == rack:
        return -1
    for replica in partition.isr:
        info = services.cache.brokers.get(replica)
        if info is not None and info.rack == rack and not info.fenced:
            return replica
    return -1


async def handle(ctx: RequestContext, req: Request) -> Response:
    read = _read(ctx, req)
    wait_s = req.max_wait.total_seconds()
    if read.bytes >= req.min_bytes or read.respond_now or wait_s <= 0 or not read.partitions:
        return _encode(ctx, read)
    return _long_poll(ctx, req, read, anyio.current_time() + wait_s)


async def _long_poll(ctx: RequestContext, req: Any, read: _Read, deadline: float) -> list:
    """Wait until min_bytes are available, an error shows up, or max_wait_ms has passed."""
    while True:
        event = anyio.Event()
        for partition in read.partitions:
            partition.watch(event)
        with anyio.move_on_after(deadline - anyio.current_time()):
            await event.wait()
        for partition in read.partitions:
            partition.unwatch(event)
        read = _read(ctx, req)
        if read.bytes >= req.min_bytes or read.respond_now or anyio.current_time() >= deadline:
            return _encode(ctx, read)


def _encode(ctx: RequestContext, read: _Read) -> list:
    return encode_fetch_response(ctx.header.api_version, read.topics)
