"""ListPartitionReassignments (46) v0: the reassignments in progress (current replicas, the
replicas being added and those being removed), from the meta service's state.

As in Kafka's ControllerApis: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED; null
topics lists every ongoing reassignment; partitions that are not being reassigned (or do not
exist) are left out.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from dataplane.handlers.context import Request
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError

if TYPE_CHECKING:
    from kio.schema.list_partition_reassignments import v0

KioListPartitionReassignmentsRequest: TypeAlias = "v0.ListPartitionReassignmentsRequest"
"""The kio classes of the versions served."""

API_KEY = 46
VERSIONS = (0, 0)

log = logging.getLogger("rafka.reassignment")


async def handle(ctx: RequestContext, req: KioListPartitionReassignmentsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    wanted = (
        None
        if req.topics is None
        else [(t.name, i) for t in req.topics for i in t.partition_indexes]
    )
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return _failed(b, req, ErrorCode.cluster_authorization_failed, None)
    try:
        ongoing = await ctx.services.meta.list_partition_reassignments(wanted)
    except MetaError as e:
        log.warning(
            "ListPartitionReassignments failed: the meta service did not answer (%s); check "
            "that the meta quorum is up, then retry",
            e,
        )
        return _failed(b, req, ErrorCode.request_timed_out, f"meta service unavailable: {e}")
    by_topic: dict[str, list[object]] = {}
    for r in ongoing:
        by_topic.setdefault(r.topic, []).append(
            b.OngoingPartitionReassignment(
                partition_index=r.partition,
                replicas=tuple(r.replicas),
                adding_replicas=tuple(r.adding_replicas),
                removing_replicas=tuple(r.removing_replicas),
            )
        )
    return b.ListPartitionReassignmentsResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(
            b.OngoingTopicReassignment(name=topic, partitions=tuple(partitions))
            for topic, partitions in by_topic.items()
        ),
    )


def _failed(b: EntityBuilder, req: Request, code: ErrorCode, message: str | None) -> Response:
    """Kafka's ListPartitionReassignmentsRequest.getErrorResponse: the requested partitions,
    without replicas, under a top-level error."""
    return b.ListPartitionReassignmentsResponse(
        throttle_time=0,
        error_code=code,
        error_message=message,
        topics=tuple(
            b.OngoingTopicReassignment(
                name=t.name,
                partitions=tuple(
                    b.OngoingPartitionReassignment(partition_index=i) for i in t.partition_indexes
                ),
            )
            for t in req.topics or ()
        ),
    )
