"""ShareGroupHeartbeat (76) v1: a member of a KIP-932 share group joins (epoch 0), heartbeats,
gets its assignment or leaves (epoch -1); see dataplane/coordinator/share/group.py.

As in Kafka the request is validated before it is routed (INVALID_REQUEST on any broker); the
coordinator answers once the records the heartbeat caused are replicated. Authorization as
Kafka's: READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on every subscribed topic
(TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, TypeAlias

from kio.static.protocol import Payload

from dataplane.coordinator.api import client_host
from dataplane.coordinator.base import Reply
from dataplane.coordinator.share.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    validate_heartbeat,
)
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.share_group_heartbeat import v1

ShareGroupHeartbeatRequest: TypeAlias = "v1.ShareGroupHeartbeatRequest"
"""The kio classes of the versions served."""

API_KEY = 76
VERSIONS = (1, 1)


async def handle(ctx: RequestContext, req: ShareGroupHeartbeatRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    request = HeartbeatRequest(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.rack_id,
        None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names),
    )
    try:
        _authorize(ctx, request)
        validate_heartbeat(request)
        shard = ctx.services.group_coordinator.shard(request.group_id)
    except KafkaError as e:
        return _kio(b, HeartbeatResponse.error(e))
    reply = shard.share_group_heartbeat(request, ctx.header.client_id or "", client_host(ctx))
    if reply.done:
        return _kio(b, reply.value)
    return _replicated(b, reply)


async def _replicated(b: EntityBuilder, reply: Reply[HeartbeatResponse]) -> Payload:
    return _kio(b, await reply.wait())


def _kio(b: EntityBuilder, r: HeartbeatResponse) -> Payload:
    assignment = None
    if r.assignment is not None:
        assignment = b.Assignment(
            topic_partitions=tuple(
                b.TopicPartitions(topic_id=uuid.UUID(bytes=t), partitions=ps)
                for t, ps in r.assignment
            )
        )
    return b.ShareGroupHeartbeatResponse(
        throttle_time=0,
        error_code=ErrorCode(r.error_code),
        error_message=r.error_message,
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval=r.heartbeat_interval_ms,
        assignment=assignment,
    )


def _authorize(ctx: RequestContext, request: HeartbeatRequest) -> None:
    authorizer = ctx.services.authorizer
    if not authorizer.enabled:
        return
    if not authorizer.authorize(ctx.conn, AclOperation.READ, ResourceType.GROUP, request.group_id):
        raise KafkaError(ErrorCode.group_authorization_failed)
    topics = request.subscribed_topic_names or ()
    if denied := authorizer.denied(ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, topics):
        raise KafkaError(
            ErrorCode.topic_authorization_failed,
            f"Not authorized to describe subscribed topics: {', '.join(sorted(denied))}",
        )
