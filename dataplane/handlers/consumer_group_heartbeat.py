"""ConsumerGroupHeartbeat (68) v0-v1: a member of a KIP-848 consumer group joins, heartbeats,
reconciles its assignment or leaves (see dataplane/coordinator/consumer/group.py).

As in Kafka, the request is validated before it is routed (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR
on any broker); the coordinator answers once the records the heartbeat caused are replicated.
v1 (KIP-1082): the client generates its member id; v0 lets a first heartbeat send an empty one.
Authorization as Kafka's: READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on every
subscribed topic name (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from kio.static.protocol import Payload

from dataplane.coordinator.api import client_host
from dataplane.coordinator.base import Reply
from dataplane.coordinator.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    validate_heartbeat_request,
)
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.consumer_group_heartbeat import v0, v1

ConsumerGroupHeartbeatRequest: TypeAlias = (
    "v0.ConsumerGroupHeartbeatRequest | v1.ConsumerGroupHeartbeatRequest"
)
"""The kio classes of the versions served."""

API_KEY = 68
VERSIONS = (0, 1)


async def handle(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    coordinator = ctx.services.group_coordinator
    request = HeartbeatRequest.from_kio(req)
    try:
        _authorize(ctx, request)
        validate_heartbeat_request(request, version, coordinator.config.consumer.assignors)
        shard = coordinator.shard(request.group_id)
    except KafkaError as e:
        return HeartbeatResponse.error(e).to_kio(b)
    reply = shard.consumer_group_heartbeat(
        request, version, ctx.header.client_id or "", client_host(ctx)
    )
    if reply.done:
        return reply.value.to_kio(b)
    return _replicated(b, reply)


async def _replicated(b: EntityBuilder, reply: Reply[HeartbeatResponse]) -> Payload:
    return (await reply.wait()).to_kio(b)


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
