"""AlterShareGroupOffsets (91) v0: set the start offset of share-partitions of an empty share
group (`kafka-share-groups --reset-offsets`): each is re-initialised at the given offset in the
share coordinator (its state epoch moves on, its in-flight records are forgotten), and the group
records that it has state for it. A group with members is NON_EMPTY_GROUP; an id without a group
gets a new share group, as in Kafka.

Authorization as Kafka's: READ on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic
(TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.protocol import Payload

from dataplane.coordinator.share import offsets
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.alter_share_group_offsets import v0

AlterShareGroupOffsetsRequest: TypeAlias = "v0.AlterShareGroupOffsetsRequest"
"""The kio classes of the versions served."""

API_KEY = 91
VERSIONS = (0, 0)

log = logging.getLogger("rafka.coordinator.share_group")


async def handle(ctx: RequestContext, req: AlterShareGroupOffsetsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    try:
        topics = await _alter(ctx, b, req)
    except KafkaError as e:
        return b.AlterShareGroupOffsetsResponse(
            throttle_time=0, error_code=e.code, error_message=e.message, responses=()
        )
    return b.AlterShareGroupOffsetsResponse(
        throttle_time=0, error_code=ErrorCode.none, responses=topics
    )


async def _alter(ctx: RequestContext, b: EntityBuilder, req: Any) -> tuple[Payload, ...]:
    services = ctx.services
    gid = req.group_id
    authorizer = services.authorizer
    if not authorizer.authorize(ctx.conn, AclOperation.READ, ResourceType.GROUP, gid):
        raise KafkaError(ErrorCode.group_authorization_failed)
    if not gid:
        raise KafkaError(ErrorCode.invalid_group_id, "The group id is invalid.")  # Kafka's text
    shard = services.group_coordinator.shard(gid)
    group = offsets.share_group_to_alter(shard, gid)
    denied = authorizer.denied(
        ctx.conn, AclOperation.READ, ResourceType.TOPIC, [t.topic_name for t in req.topics]
    )
    cache = services.cache
    calls, slots = [], []
    for t in req.topics:
        topic = cache.topics.get(t.topic_name)
        for p in t.partitions:
            index = p.partition_index
            if t.topic_name in denied:
                slots.append((t.topic_name, index, ErrorCode.topic_authorization_failed))
            elif topic is None or not 0 <= index < len(topic.partitions):
                slots.append((t.topic_name, index, ErrorCode.unknown_topic_or_partition))
            elif p.start_offset < 0:
                slots.append((t.topic_name, index, ErrorCode.invalid_request))
            else:
                key = offsets.key(gid, topic.topic_id, index)
                calls.append(
                    lambda k=key, o=p.start_offset: services.share_persister.initialize(k, o)
                )
                slots.append((t.topic_name, index, ErrorCode.none))
    results = iter(await offsets.gather(calls))
    partitions = dict(group.group.state_partitions)
    by_topic: dict[str, list[Any]] = {t.topic_name: [] for t in req.topics}
    for name, index, code in slots:
        message = (
            offsets.UNKNOWN_PARTITION if code == ErrorCode.unknown_topic_or_partition else None
        )
        if code == ErrorCode.none:
            result = next(results)
            if isinstance(result, KafkaError):
                code, message = result.code, result.message
            else:
                topic_id = cache.topics[name].topic_id
                old = partitions.get(topic_id, (name, frozenset()))[1]
                partitions[topic_id] = (name, old | {index})
                log.info(
                    "share group %s: %s-%d reset to offset %d",
                    gid,
                    name,
                    index,
                    result.start_offset,
                )
        by_topic[name].append(
            b.AlterShareGroupOffsetsResponsePartition(
                partition_index=index, error_code=code, error_message=message
            )
        )
    await offsets.record_state_partitions(shard, group, partitions)
    return tuple(
        b.AlterShareGroupOffsetsResponseTopic(
            topic_name=name,
            topic_id=cache.topics[name].topic_id if name in cache.topics else bytes(16),
            partitions=tuple(parts),
        )
        for name, parts in by_topic.items()
    )
