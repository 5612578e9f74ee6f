"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, for log truncation checks.

Consumers use it (KIP-320) to detect that the log they read was truncated after a leader
change; followers' truncation uses the same lookup over the replication RPC. As in Kafka,
CLUSTER_ACTION on the cluster or DESCRIBE on each topic is needed (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.offset_for_leader_epoch import v2, v3, v4

OffsetForLeaderEpochRequest: TypeAlias = (
    "v2.OffsetForLeaderEpochRequest | v3.OffsetForLeaderEpochRequest"
    " | v4.OffsetForLeaderEpochRequest"
)
"""The kio classes of the versions served."""

API_KEY = 23
VERSIONS = (2, 4)


async def handle(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    replicas = ctx.services.replicas
    authorizer = ctx.services.authorizer
    denied: frozenset[str] = frozenset()
    if authorizer.enabled and not authorizer.authorize(
        ctx.conn, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ):
        denied = authorizer.denied(
            ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in req.topics)
        )
    topics = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            try:
                if topic.topic in denied:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
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
