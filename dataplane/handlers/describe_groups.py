"""DescribeGroups (15): state, protocol and members of the classic groups this broker
coordinates. DESCRIBE on each group is needed (GROUP_AUTHORIZATION_FAILED).

A group that is absent, or not a classic group (a KIP-848 consumer group or a share group,
described by their own APIs), is "Dead" with no members; from v6 also with GROUP_ID_NOT_FOUND
and the reason (KIP-1043), as Kafka's GroupMetadataManager.describeGroups answers."""

from __future__ import annotations

from dataclasses import replace

from dataplane.coordinator.base import DescribedGroup
from dataplane.coordinator.classic.group import ClassicGroup
from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.primitives import AUTHORIZED_OPERATIONS_OMITTED
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 15
VERSIONS = (0, 6)

_NOT_FOUND_VERSION = 6  # v6+: GROUP_ID_NOT_FOUND for a group that is not a classic group


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    include_operations = version >= 3 and req.include_authorized_operations
    authorizer = ctx.services.authorizer
    described = []
    for group_id in req.groups:
        message = None
        if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            d = DescribedGroup(group_id, "", "", "", error=ErrorCode.group_authorization_failed)
        else:
            try:
                shard = ctx.services.group_coordinator.shard(group_id)
                d = shard.describe_group(group_id)
            except KafkaError as e:
                d = DescribedGroup(group_id, "", "", "", error=e.code)
            else:
                group = shard.groups.get(group_id)
                if version >= _NOT_FOUND_VERSION and not isinstance(group, ClassicGroup):
                    d = replace(d, error=ErrorCode.group_id_not_found)
                    message = _not_found(group_id, group is None)
        described.append(
            b.DescribedGroup(
                error_code=d.error,
                error_message=message,
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


def _not_found(group_id: str, absent: bool) -> str:
    """Kafka's GroupIdNotFoundException message."""
    return f"Group {group_id} not found." if absent else f"Group {group_id} is not a classic group."
