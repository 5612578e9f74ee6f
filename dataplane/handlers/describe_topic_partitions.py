"""DescribeTopicPartitions (75): topics' partitions, a page at a time (KIP-966), from the cache.

As Kafka's DescribeTopicPartitionsRequestHandler: the named topics (or all, when none is
named) from the cursor's topic on, in name order; at most response_partition_limit partitions
(capped by max.request.partition.size.limit, at least 1) per answer, and next_cursor names
the first partition left out. A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION
(INVALID_TOPIC_EXCEPTION for an illegal name); in an all-topics answer it is left out. A
cursor whose topic is not among the named ones, or with a negative partition, is
INVALID_REQUEST. Eligible leader replicas (KIP-966) are not kept by Rafka: always empty.

Authorization as Kafka's: DESCRIBE on each topic; a named topic the principal may not describe
is TOPIC_AUTHORIZATION_FAILED without its id, and left out of an all-topics answer. Each
topic carries the principal's authorized operations on it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.protocol import Payload

from dataplane.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.primitives import AUTHORIZED_OPERATIONS_OMITTED
from dataplane.request_context import RequestContext, Response
from dataplane.topic_admin import valid_topic_name
from meta.acl import AclOperation, ResourceType

log = logging.getLogger("rafka.describe_topic_partitions")

if TYPE_CHECKING:
    from kio.schema.describe_topic_partitions import v0

DescribeTopicPartitionsRequest: TypeAlias = "v0.DescribeTopicPartitionsRequest"
"""The kio classes of the versions served."""

API_KEY = 75
VERSIONS = (0, 0)

_NO_ID = bytes(16)


async def handle(ctx: RequestContext, req: DescribeTopicPartitionsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    cache, authorizer = ctx.services.cache, ctx.services.authorizer
    all_topics = not req.topics
    cursor = req.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    names = list(cache.topics) if all_topics else {t.name for t in req.topics}
    wanted = sorted(n for n in names if n >= start_topic)
    problem = _invalid_cursor(cursor, wanted, all_topics)
    if problem:
        log.info("DescribeTopicPartitions from %s refused: %s", ctx.conn.peer, problem)
        return b.DescribeTopicPartitionsResponse(
            throttle_time=0,
            topics=tuple(
                _topic(b, ErrorCode.invalid_request, t.name, _NO_ID, False, ()) for t in req.topics
            ),
        )
    allowed = [
        n
        for n in wanted
        if authorizer.authorize(
            ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, n, log_denied=not all_topics
        )
    ]
    refused = [
        _topic(b, ErrorCode.topic_authorization_failed, n, _NO_ID, False, ())
        for n in wanted
        if not all_topics and n not in allowed
    ]
    limit = max(
        min(ctx.services.config.max_request_partition_size_limit, req.response_partition_limit),
        1,
    )
    topics, next_cursor = _page(cache, allowed, cursor, limit, all_topics)
    answered = tuple(
        _topic(
            b,
            code,
            name,
            info.topic_id if info else _NO_ID,
            info.internal if info else False,
            tuple(_partition(b, cache, p, ctx.conn.listener) for p in parts),
            authorizer.authorized_operations(ctx.conn, ResourceType.TOPIC, name),
        )
        for code, name, info, parts in topics
    )
    return b.DescribeTopicPartitionsResponse(
        throttle_time=0,
        topics=answered + tuple(refused),
        next_cursor=None
        if next_cursor is None
        else b.Cursor(topic_name=next_cursor[0], partition_index=next_cursor[1]),
    )


def _invalid_cursor(cursor: Any, wanted: list[str], all_topics: bool) -> str | None:
    """Why the cursor is not acceptable (Kafka's InvalidRequestException), or None."""
    if cursor is None:
        return None
    if not all_topics and cursor.topic_name not in wanted:
        return f"the topic list should contain the cursor topic {cursor.topic_name!r}"
    if cursor.partition_index < 0:
        return f"the cursor partition must be valid, not {cursor.partition_index}"
    return None


Page = list[tuple[int, str, TopicInfo | None, list[PartitionInfo]]]


def _page(
    cache: MetadataCache,
    names: Iterable[str],
    cursor: Any,
    limit: int,
    all_topics: bool,
) -> tuple[Page, tuple[str, int] | None]:
    """Kafka's getTopicMetadataForDescribeTopicResponse: (error, name, topic, partitions) of
    each topic answered, and the (topic, partition) to continue from, None at the end."""
    out: Page = []
    remaining = limit
    for name in names:
        if remaining == 0:
            return out, (name, 0)  # the previous topic is complete: go on at this one
        info = cache.topics.get(name)
        if info is None:
            if not all_topics:
                code = (
                    ErrorCode.unknown_topic_or_partition
                    if valid_topic_name(name)
                    else ErrorCode.invalid_topic_exception
                )
                out.append((code, name, None, []))
            continue
        first = cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
        upper = min(len(info.partitions), first + remaining)
        out.append((ErrorCode.none, name, info, list(info.partitions[first:upper])))
        if upper < len(info.partitions):
            return out, (name, upper)
        remaining -= max(0, upper - first)
    return out, None


def _partition(b: EntityBuilder, cache: MetadataCache, p: PartitionInfo, listener: str) -> Payload:
    def reachable(broker_id: int) -> bool:
        broker = cache.brokers.get(broker_id)
        return broker is not None and listener in broker.endpoints

    def offline(broker_id: int) -> bool:
        broker = cache.brokers.get(broker_id)
        return broker is None or broker.fenced or listener not in broker.endpoints

    return b.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.none,
        partition_index=p.index,
        leader_id=p.leader if p.leader >= 0 and reachable(p.leader) else -1,
        leader_epoch=p.leader_epoch,
        replica_nodes=p.replicas,
        isr_nodes=p.isr,
        eligible_leader_replicas=(),
        last_known_elr=(),
        offline_replicas=tuple(r for r in p.replicas if offline(r)),
    )


def _topic(
    b: EntityBuilder,
    code: int,
    name: str,
    topic_id: bytes,
    internal: bool,
    partitions: tuple[Any, ...],
    operations: int = AUTHORIZED_OPERATIONS_OMITTED,
) -> Payload:
    return b.DescribeTopicPartitionsResponseTopic(
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )
