"""LeaveGroup (13) v0-v5: members leave a classic group (v3+: several at once, and static
members by group instance id, KIP-345). READ on the group is needed
(GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 13
VERSIONS = (0, 5)


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    if version < 3:
        members = [(req.member_id, None, None)]
    else:
        members = [
            (m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
            for m in req.members
        ]
    errors: list[ErrorCode] = []
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.READ, ResourceType.GROUP, req.group_id
    ):
        top = ErrorCode.group_authorization_failed
    elif not req.group_id:
        top = ErrorCode.invalid_group_id
    else:
        try:
            shard = ctx.services.group_coordinator.shard(req.group_id)
        except KafkaError as e:
            top = e.code
        else:
            top, errors = shard.leave_group(req.group_id, members)
    if version < 3:
        # one member: its error is the response's (Kafka's LeaveGroupResponse for v0-v2)
        code = (
            top
            if top != ErrorCode.none
            else next((e for e in errors if e != ErrorCode.none), ErrorCode.none)
        )
        return b.LeaveGroupResponse(throttle_time=0, error_code=code)
    return b.LeaveGroupResponse(
        throttle_time=0,
        error_code=top,
        members=tuple(
            b.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=error)
            for (member_id, instance_id, _), error in zip(members, errors, strict=False)
        )
        if top == ErrorCode.none
        else (),
    )
