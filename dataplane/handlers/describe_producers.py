"""DescribeProducers (61): the producers a partition replica knows, for operators.

What `kafka-transactions.sh describe-producers` and the Admin client's describeProducers show,
mainly to find a hanging transaction (its start offset holds the last stable offset back) and
the producer to abort it for. As Kafka's KafkaApis.handleDescribeProducersRequest: READ on the
topic (TOPIC_AUTHORIZATION_FAILED), an invalid name is INVALID_TOPIC_EXCEPTION, an unknown one
UNKNOWN_TOPIC_OR_PARTITION, and any replica hosting the partition answers from its own producer
state (the Admin client asks the leader unless told a broker); NOT_LEADER_OR_FOLLOWER elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from kio.static.protocol import Payload

from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType
from meta.topic_planning import validate_topic_name

if TYPE_CHECKING:
    from kio.schema.describe_producers import v0

    from dataplane.replica.manager import ReplicaManager
    from dataplane.replica.producer_state import ProducerStateManager

DescribeProducersRequest: TypeAlias = "v0.DescribeProducersRequest"
"""The kio classes of the versions served."""

API_KEY = 61
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, req: DescribeProducersRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    denied = ctx.services.authorizer.denied(
        ctx.conn, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    topics = []
    for topic in req.topics:
        error = _topic_error(ctx, topic.name, denied)
        partitions = tuple(
            _partition(b, ctx.services.replicas, topic.name, index)
            if error is None
            else b.PartitionResponse(
                partition_index=index,
                error_code=error[0],
                error_message=error[1],
                active_producers=(),
            )
            for index in topic.partition_indexes
        )
        topics.append(b.TopicResponse(name=topic.name, partitions=partitions))
    return b.DescribeProducersResponse(throttle_time=0, topics=tuple(topics))


def _topic_error(
    ctx: RequestContext, name: str, denied: frozenset[str]
) -> tuple[ErrorCode, str] | None:
    """A topic's error for each of its partitions, with Kafka's message (its ApiError's:
    Topic.validate's words, or the error's default text)."""
    if (invalid := validate_topic_name(name)) is not None:
        return ErrorCode.invalid_topic_exception, invalid
    if name in denied:
        return ErrorCode.topic_authorization_failed, "Topic authorization failed."
    if name not in ctx.services.cache.topics:
        return (
            ErrorCode.unknown_topic_or_partition,
            "This server does not host this topic-partition.",
        )
    return None


def _partition(b: EntityBuilder, replicas: ReplicaManager, topic: str, index: int) -> Payload:
    partition = replicas.partitions.get((topic, index))
    if partition is None:
        info = replicas.cache.topics.get(topic)
        known = info is not None and 0 <= index < len(info.partitions)
        code = ErrorCode.not_leader_or_follower if known else ErrorCode.unknown_topic_or_partition
        return b.PartitionResponse(partition_index=index, error_code=code, active_producers=())
    return b.PartitionResponse(
        partition_index=index,
        error_code=ErrorCode.none,
        active_producers=active_producers(b, partition.producers),
    )


def active_producers(b: EntityBuilder, producers: ProducerStateManager) -> tuple[Payload, ...]:
    """Kafka's UnifiedLog.activeProducers: one entry per producer id the partition keeps."""
    return tuple(
        b.ProducerState(
            producer_id=producer_id,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=entry.current_txn_first_offset,
        )
        for producer_id, entry in producers.producers.items()
    )
