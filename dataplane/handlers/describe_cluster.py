"""DescribeCluster (60): cluster id, controller and brokers, as Kafka's brokers answer it.

The brokers are those with an endpoint on the listener the client came in through (its
advertised host and port there), unfenced ones only unless v2's include_fenced_brokers asks
for all. The controller is a live broker, as Kafka's KRaft brokers name one to clients (the
meta service is not reachable over the Kafka protocol); -1 when none is live. v1+'s endpoint
type must be 1 (brokers): 2 (controllers) is MISMATCHED_ENDPOINT_TYPE, as from a Kafka broker,
anything else UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0).

Authorization as Kafka's: none to describe; the cluster's authorized operations, when asked,
need DESCRIBE on the cluster (0 otherwise).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.security.authorizer import cluster_operations

log = logging.getLogger("rafka.describe_cluster")

if TYPE_CHECKING:
    from kio.schema.describe_cluster import v0, v1, v2

DescribeClusterRequest: TypeAlias = (
    "v0.DescribeClusterRequest | v1.DescribeClusterRequest | v2.DescribeClusterRequest"
)
"""The kio classes of the versions served."""

API_KEY = 60
VERSIONS = (0, 2)

BROKERS, CONTROLLERS = 1, 2


async def handle(ctx: RequestContext, req: DescribeClusterRequest) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    cache = ctx.services.cache
    endpoint_type = getattr(req, "endpoint_type", BROKERS)
    if endpoint_type != BROKERS:
        code = (
            ErrorCode.invalid_request
            if version == 0
            else ErrorCode.mismatched_endpoint_type
            if endpoint_type == CONTROLLERS
            else ErrorCode.unsupported_endpoint_type
        )
        message = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            "type CONTROLLER: Rafka's controllers (the meta service) do not speak the Kafka "
            "protocol"
            if endpoint_type == CONTROLLERS
            else f"Unsupported endpoint type {endpoint_type}"
        )
        log.info("DescribeCluster from %s refused: %s", ctx.conn.peer, message)
        return b.DescribeClusterResponse(
            throttle_time=0,
            error_code=code,
            error_message=message,
            cluster_id="",
            brokers=(),
        )
    with_fenced = getattr(req, "include_fenced_brokers", False)
    brokers = []
    listed = set()
    for broker in sorted(cache.brokers.values(), key=lambda b: b.id):
        endpoint = broker.endpoints.get(ctx.conn.listener)
        if endpoint is None or (broker.fenced and not with_fenced):
            continue
        listed.add(broker.id)
        brokers.append(
            b.DescribeClusterBroker(
                broker_id=broker.id,
                host=endpoint[0],
                port=endpoint[1],
                rack=broker.rack,
                is_fenced=broker.fenced,
            )
        )
    controller = cache.controller_id()
    return b.DescribeClusterResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=cache.cluster_id,
        # Kafka's: a controller id that is not among the brokers is -1, not to confuse clients
        controller_id=controller if controller in listed else -1,
        brokers=tuple(brokers),
        cluster_authorized_operations=cluster_operations(
            ctx.services.authorizer, ctx.conn, req.include_cluster_authorized_operations
        ),
    )
