"""Heartbeat (12) v0-v4: a classic group member is alive; REBALANCE_IN_PROGRESS asks it to
rejoin. READ on the group is needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 12
VERSIONS = (0, 4)


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.READ, ResourceType.GROUP, req.group_id
    ):
        code = ErrorCode.group_authorization_failed
    elif not req.group_id:
        code = ErrorCode.invalid_group_id
    else:
        try:
            shard = ctx.services.group_coordinator.shard(req.group_id)
        except KafkaError as e:
            # while loading, answer blindly (as Kafka): the member learns more on its next beat
            code = ErrorCode.none if e.code == ErrorCode.coordinator_load_in_progress else e.code
        else:
            code = shard.heartbeat(
                req.group_id,
                req.member_id,
                req.group_instance_id if version >= 3 else None,
                req.generation_id,
            )
    return b.HeartbeatResponse(throttle_time=0, error_code=code)
