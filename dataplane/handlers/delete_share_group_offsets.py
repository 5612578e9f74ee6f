"""DeleteShareGroupOffsets (92) v0: forget the share-partition state of topics of an empty
share group (its consumers would then start again from share.auto.offset.reset): the share
coordinator deletes each partition's state and the group stops recording the topic. A group
with members is NON_EMPTY_GROUP; a topic the cluster does not have UNKNOWN_TOPIC_OR_PARTITION.

Authorization as Kafka's: DELETE on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic
(TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.protocol import Payload

from dataplane.coordinator.share import offsets
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.delete_share_group_offsets import v0

DeleteShareGroupOffsetsRequest: TypeAlias = "v0.DeleteShareGroupOffsetsRequest"
"""The kio classes of the versions served."""

API_KEY = 92
VERSIONS = (0, 0)

log = logging.getLogger("rafka.coordinator.share_group")


async def handle(ctx: RequestContext, req: DeleteShareGroupOffsetsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    try:
        topics = await _delete(ctx, b, req)
    except KafkaError as e:
        return b.DeleteShareGroupOffsetsResponse(
            throttle_time=0, error_code=e.code, error_message=e.message, responses=()
        )
    return b.DeleteShareGroupOffsetsResponse(
        throttle_time=0, error_code=ErrorCode.none, responses=topics
    )


async def _delete(ctx: RequestContext, b: EntityBuilder, req: Any) -> tuple[Payload, ...]:
    services = ctx.services
    gid = req.group_id
    authorizer = services.authorizer
    if not authorizer.authorize(ctx.conn, AclOperation.DELETE, ResourceType.GROUP, gid):
        raise KafkaError(ErrorCode.group_authorization_failed)
    if not gid:
        raise KafkaError(ErrorCode.invalid_group_id, "The group id is invalid.")  # Kafka's text
    shard = services.group_coordinator.shard(gid)
    group = offsets.empty_share_group(shard, gid)
    names = [t.topic_name for t in req.topics]
    denied = authorizer.denied(ctx.conn, AclOperation.READ, ResourceType.TOPIC, names)
    cache = services.cache
    partitions = dict(group.group.state_partitions)
    results: dict[str, tuple[ErrorCode, str | None]] = {}
    for name in dict.fromkeys(names):
        topic = cache.topics.get(name)
        if name in denied:
            results[name] = (ErrorCode.topic_authorization_failed, None)
            continue
        if topic is None:
            results[name] = (ErrorCode.unknown_topic_or_partition, offsets.UNKNOWN_PARTITION)
            continue
        parts = sorted(partitions.get(topic.topic_id, (name, frozenset()))[1])
        keys = [offsets.key(gid, topic.topic_id, p) for p in parts]
        deletes = [partial(services.share_persister.delete, k) for k in keys]
        failed = [r for r in await offsets.gather(deletes) if isinstance(r, KafkaError)]
        if failed:
            results[name] = (failed[0].code, failed[0].message)
            continue
        partitions.pop(topic.topic_id, None)
        results[name] = (ErrorCode.none, None)
        log.info("share group %s: the share-partition state of %s deleted", gid, name)
    await offsets.record_state_partitions(shard, group, partitions)
    return tuple(
        b.DeleteShareGroupOffsetsResponseTopic(
            topic_name=name,
            topic_id=cache.topics[name].topic_id if name in cache.topics else bytes(16),
            error_code=code,
            error_message=message,
        )
        for name, (code, message) in results.items()
    )
