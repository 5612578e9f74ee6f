"""Fetch (1): serve raw batches up to the high watermark, with long polling.

The hot path: batches are read from the segment files and sent as stored. When less than
min_bytes is available the handler returns an awaitable that parks on the partitions' high
watermark until data arrives or max_wait_ms passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from dataplane.log import LogError
from dataplane.protocol.encoders import FetchPartition, FetchTopic, encode_fetch_response
from dataplane.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from dataplane.replica.partition import Partition
    from dataplane.server import RequestContext

API_KEY = 1
VERSIONS = (4, 16)

READ_COMMITTED = 1


class _Read:
    """One pass over the requested partitions: what was read and which partitions to watch."""

    def __init__(self) -> None:
        self.topics: list[FetchTopic] = []
        self.bytes = 0
        self.errors = False
        self.partitions: list[Partition] = []


def _read(ctx: RequestContext, req: Any) -> _Read:
    cache, replicas = ctx.broker.cache, ctx.broker.replicas
    by_id = ctx.header.api_version >= 13  # topic ids replace names from v13 (KIP-516)
    budget = req.max_bytes
    result = _Read()
    for topic in req.topics:
        topic_id = topic.topic_id.bytes if by_id and topic.topic_id else bytes(16)
        info = cache.topics_by_id.get(topic_id) if by_id else cache.topics.get(topic.topic)
        unknown = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
        out: list[FetchPartition] = []
        for p in topic.partitions:
            try:
                if info is None:
                    raise KafkaError(unknown)
                partition = replicas.leader_partition(
                    info.name, p.partition, getattr(p, "current_leader_epoch", -1)
                )
                hw = partition.high_watermark
                start = partition.log.log_start_offset
                try:
                    records = partition.log.read(
                        p.fetch_offset, min(p.partition_max_bytes, budget), hw, result.bytes == 0
                    )
                except LogError as e:
                    result.errors = True
                    out.append(FetchPartition(p.partition, e.code, hw, hw, start, None, -1, b""))
                    continue
            except KafkaError as e:
                result.errors = True
                out.append(FetchPartition(p.partition, e.code, -1, -1, -1, None, -1, b""))
                continue
            budget = max(0, budget - len(records))
            result.bytes += len(records)
            result.partitions.append(partition)
            aborted = [] if req.isolation_level == READ_COMMITTED else None
            out.append(
                FetchPartition(p.partition, ErrorCode.none, hw, hw, start, aborted, -1, records)
            )
        name = info.name if info else (None if by_id else topic.topic)
        result.topics.append(FetchTopic(name, info.topic_id if info else topic_id, out))
    return result


async def handle(ctx: RequestContext, req: Any) -> Any:
    read = _read(ctx, req)
    wait_s = req.max_wait.total_seconds()
    if read.bytes >= req.min_bytes or read.errors or wait_s <= 0 or not read.partitions:
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
        if read.bytes >= req.min_bytes or read.errors or anyio.current_time() >= deadline:
            return _encode(ctx, read)


def _encode(ctx: RequestContext, read: _Read) -> list:
    return encode_fetch_response(ctx.header.api_version, read.topics)
