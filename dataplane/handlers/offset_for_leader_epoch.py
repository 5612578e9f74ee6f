"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, for log truncation checks.

Consumers use it (KIP-320) to detect that the log they read was truncated after a leader
change; followers' truncation uses the same lookup over the replication RPC.
"""

from __future__ import annotations

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError

API_KEY = 23
VERSIONS = (2, 4)


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    replicas = ctx.services.replicas
    topics = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            try:
                partition = replicas.leader_partition(
                    topic.topic, p.partition, p.current_leader_epoch
                )
                epoch, end = partition.log.end_offset_for_epoch(p.leader_epoch)
                parts.append(
                    b.EpochEndOffset(
                        error_code=ErrorCode.none,
                        partition=p.partition,
                        leader_epoch=epoch,
                        end_offset=end,
                    )
                )
            except KafkaError as e:
                parts.append(b.EpochEndOffset(error_code=e.code, partition=p.partition))
        topics.append(b.OffsetForLeaderTopicResult(topic=topic.topic, partitions=tuple(parts)))
    return b.OffsetForLeaderEpochResponse(throttle_time=0, topics=tuple(topics))
