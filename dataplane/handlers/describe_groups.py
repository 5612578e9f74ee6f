"""DescribeGroups (15) v0-v5: state, protocol and members of groups this broker coordinates
(an unknown group is "Dead" with no members, as in Kafka before v6). DESCRIBE on each group is
needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from dataplane.coordinator.api import AUTHORIZED_OPERATIONS_OMITTED
from dataplane.coordinator.base import DescribedGroup
from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import AclOperation, ResourceType

API_KEY = 15
VERSIONS = (0, 5)


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    include_operations = version >= 3 and req.include_authorized_operations
    authorizer = ctx.services.authorizer
    described = []
    for group_id in req.groups:
        if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            d = DescribedGroup(group_id, "", "", "", error=ErrorCode.group_authorization_failed)
        else:
            try:
                d = ctx.services.group_coordinator.shard(group_id).describe_group(group_id)
            except KafkaError as e:
                d = DescribedGroup(group_id, "", "", "", error=e.code)
        described.append(
            b.DescribedGroup(
                error_code=d.error,
                group_id=d.group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_data,
                members=tuple(
                    b.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ),
                authorized_operations=authorizer.authorized_operations(
                    ctx.conn, ResourceType.GROUP, group_id
                )
                if include_operations and d.error == ErrorCode.none
                else AUTHORIZED_OPERATIONS_OMITTED,
            )
        )
    return b.DescribeGroupsResponse(throttle_time=0, groups=tuple(described))
