"""JoinGroup (11) v0-v9: a member joins a classic group (a long poll until the rebalance's join
phase completes; see dataplane/coordinator/classic/group.py). READ on the group is needed
(GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kio.static.protocol import Payload

from dataplane.coordinator.api import client_host, ms
from dataplane.coordinator.base import JoinRequest, JoinResult, Reply
from dataplane.handlers.context import Request
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 11
VERSIONS = (0, 9)


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    coordinator = ctx.services.group_coordinator
    config = coordinator.config
    session_ms = ms(req.session_timeout)
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.READ, ResourceType.GROUP, req.group_id
    ):
        return _response(b, version, JoinResult(ErrorCode.group_authorization_failed, ""))
    if not req.group_id:
        return _response(b, version, JoinResult(ErrorCode.invalid_group_id, req.member_id))
    if not config.min_session_timeout_ms <= session_ms <= config.max_session_timeout_ms:
        return _response(b, version, JoinResult(ErrorCode.invalid_session_timeout, req.member_id))
    try:
        shard = coordinator.shard(req.group_id)
    except KafkaError as e:
        return _response(b, version, JoinResult(e.code, req.member_id))
    reply = shard.join_group(
        JoinRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id if version >= 5 else None,
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=ms(req.rebalance_timeout) if version >= 1 else session_ms,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in req.protocols),
            api_version=version,
            reason=req.reason if version >= 8 else None,
        )
    )
    if reply.done:
        return _response(b, version, reply.value)
    return _parked(b, version, reply)


async def _parked(b: EntityBuilder, version: int, reply: Reply[JoinResult]) -> Payload:
    return _response(b, version, await reply.wait())


def _response(b: EntityBuilder, version: int, r: JoinResult) -> Payload:
    protocol_name = r.protocol_name
    if version < 7:
        protocol_name = protocol_name or ""  # not nullable before v7
    elif protocol_name == "":
        protocol_name = None
    return b.JoinGroupResponse(
        throttle_time=0,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=protocol_name,
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=tuple(
            b.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in r.members
        ),
    )
