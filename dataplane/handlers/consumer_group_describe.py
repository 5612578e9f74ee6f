"""ConsumerGroupDescribe (69) v0-v1: members, assignments and epochs of KIP-848 consumer groups
this broker coordinates. A group that does not exist, or is not a consumer group, is
GROUP_ID_NOT_FOUND (admin clients then try DescribeGroups); an empty id INVALID_GROUP_ID.
DESCRIBE on each group is needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypeAlias

from dataplane.coordinator.consumer.group import DescribedGroup
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.consumer_group_describe import v0, v1

ConsumerGroupDescribeRequest: TypeAlias = (
    "v0.ConsumerGroupDescribeRequest | v1.ConsumerGroupDescribeRequest"
)
"""The kio classes of the versions served."""

API_KEY = 69
VERSIONS = (0, 1)


def _failed(group_id: str, code: ErrorCode) -> DescribedGroup:
    return DescribedGroup(group_id, "", 0, 0, "", (), error_code=code)


async def handle(ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    coordinator, authorizer = ctx.services.group_coordinator, ctx.services.authorizer
    described = []
    for group_id in req.group_ids:
        if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            d = _failed(group_id, ErrorCode.group_authorization_failed)
        elif not group_id:
            d = _failed(group_id, ErrorCode.invalid_group_id)
        else:
            try:
                (d,) = coordinator.shard(group_id).consumer_group_describe([group_id])
            except KafkaError as e:
                d = _failed(group_id, e.code)
        if d.error_code == ErrorCode.none and req.include_authorized_operations:
            operations = authorizer.authorized_operations(ctx.conn, ResourceType.GROUP, group_id)
            d = dataclasses.replace(d, authorized_operations=operations)
        described.append(d.to_kio(b))
    return b.ConsumerGroupDescribeResponse(throttle_time=0, groups=tuple(described))
