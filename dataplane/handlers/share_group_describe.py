"""ShareGroupDescribe (77) v1: members, assignments and epochs of KIP-932 share groups this
broker coordinates. A group that does not exist, or is not a share group, is GROUP_ID_NOT_FOUND;
an empty id INVALID_GROUP_ID. DESCRIBE on each group is needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, TypeAlias

from kio.static.protocol import Payload

from dataplane.coordinator.share.group import DescribedGroup
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.primitives import AUTHORIZED_OPERATIONS_OMITTED
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.share_group_describe import v1

ShareGroupDescribeRequest: TypeAlias = "v1.ShareGroupDescribeRequest"
"""The kio classes of the versions served."""

API_KEY = 77
VERSIONS = (1, 1)


async def handle(ctx: RequestContext, req: ShareGroupDescribeRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    coordinator, authorizer = ctx.services.group_coordinator, ctx.services.authorizer
    described = []
    for group_id in req.group_ids:
        if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            found: DescribedGroup | KafkaError = KafkaError(ErrorCode.group_authorization_failed)
        elif not group_id:
            found = KafkaError(ErrorCode.invalid_group_id)
        else:
            try:
                (found,) = coordinator.shard(group_id).share_group_describe([group_id])
            except KafkaError as e:
                found = e
        if isinstance(found, KafkaError):
            described.append(_failed(b, group_id, found))
            continue
        operations = AUTHORIZED_OPERATIONS_OMITTED
        if req.include_authorized_operations:
            operations = authorizer.authorized_operations(ctx.conn, ResourceType.GROUP, group_id)
        described.append(_described(b, found, operations))
    return b.ShareGroupDescribeResponse(throttle_time=0, groups=tuple(described))


def _failed(b: EntityBuilder, group_id: str, e: KafkaError) -> Payload:
    return b.DescribedGroup(
        error_code=e.code,
        error_message=e.message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=(),
    )


def _described(b: EntityBuilder, d: DescribedGroup, operations: int) -> Payload:
    return b.DescribedGroup(
        error_code=ErrorCode.none,
        error_message=None,
        group_id=d.group_id,
        group_state=d.state,
        group_epoch=d.group_epoch,
        assignment_epoch=d.assignment_epoch,
        assignor_name=d.assignor_name,
        members=tuple(
            b.Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                assignment=b.Assignment(
                    topic_partitions=tuple(
                        b.TopicPartitions(
                            topic_id=uuid.UUID(bytes=t), topic_name=name, partitions=ps
                        )
                        for t, name, ps in m.assignment
                    )
                ),
            )
            for m in d.members
        ),
        authorized_operations=operations,
    )
