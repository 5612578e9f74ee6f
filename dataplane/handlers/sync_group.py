"""SyncGroup (14) v0-v5: the leader hands in the assignment, every member receives its share
(a long poll until the leader's assignment is persisted). READ on the group is needed
(GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kio.static.protocol import Payload

from dataplane.coordinator.base import Reply, SyncResult
from dataplane.handlers.context import Request
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 14
VERSIONS = (0, 5)


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    protocol_type = req.protocol_type if version >= 5 else None
    protocol_name = req.protocol_name if version >= 5 else None
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.READ, ResourceType.GROUP, req.group_id
    ):
        return _response(b, SyncResult(ErrorCode.group_authorization_failed))
    if not req.group_id:
        return _response(b, SyncResult(ErrorCode.invalid_group_id))
    if version >= 5 and (protocol_type is None or protocol_name is None):
        return _response(b, SyncResult(ErrorCode.inconsistent_group_protocol))
    try:
        shard = ctx.services.group_coordinator.shard(req.group_id)
    except KafkaError as e:
        # a loading coordinator lost the rebalance in progress: the members must rejoin (older
        # clients do not expect COORDINATOR_LOAD_IN_PROGRESS here)
        code = e.code
        if code == ErrorCode.coordinator_load_in_progress:
            code = ErrorCode.rebalance_in_progress
        return _response(b, SyncResult(code))
    reply = shard.sync_group(
        req.group_id,
        req.member_id,
        req.group_instance_id if version >= 3 else None,
        req.generation_id,
        protocol_type,
        protocol_name,
        {a.member_id: a.assignment for a in req.assignments},
    )
    if reply.done:
        return _response(b, reply.value)
    return _parked(b, reply)


async def _parked(b: EntityBuilder, reply: Reply[SyncResult]) -> Payload:
    return _response(b, await reply.wait())


def _response(b: EntityBuilder, r: SyncResult) -> Payload:
    return b.SyncGroupResponse(
        throttle_time=0,
        error_code=r.error,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=r.assignment,
    )
