"""ListGroups (16) v0-v5: the groups this broker coordinates, like Kafka (an admin client asks
every broker); v4+ filter by state, v5+ by type. The whole cluster's groups are also in the
meta service's registry (`MetaClient.list_groups`). Without DESCRIBE on the cluster, only the
groups the principal may DESCRIBE are listed, as in Kafka."""

from __future__ import annotations

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 16
VERSIONS = (0, 5)


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    coordinator = ctx.services.group_coordinator
    if coordinator.is_loading():
        return b.ListGroupsResponse(
            throttle_time=0, error_code=ErrorCode.coordinator_load_in_progress, groups=()
        )
    states = req.states_filter if version >= 4 else ()
    types = req.types_filter if version >= 5 else ()
    listed = sorted(
        (g for shard in coordinator.loaded_shards() for g in shard.list_groups(states, types)),
        key=lambda g: g.group_id,
    )
    authorizer = ctx.services.authorizer
    if authorizer.enabled and not authorizer.authorize(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ):
        hidden = authorizer.denied(
            ctx.conn,
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            (g.group_id for g in listed),
            log_denied=False,
        )
        listed = [g for g in listed if g.group_id not in hidden]
    return b.ListGroupsResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        groups=tuple(
            b.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.type,
            )
            for g in listed
        ),
    )
