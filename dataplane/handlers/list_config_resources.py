"""ListConfigResources (74): the names of config resources, by type (KIP-1142; v0 was
ListClientMetricsResources, CLIENT_METRICS only).

v1 lists TOPIC (2), BROKER (4), BROKER_LOGGER (8), CLIENT_METRICS (16) and GROUP (32); no type
asked means all of them; an other type is UNSUPPORTED_VERSION, as from Kafka. Needs
DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger("rafka.list_config_resources")

if TYPE_CHECKING:
    from kio.schema.list_config_resources import v0, v1

ListConfigResourcesRequest: TypeAlias = (
    "v0.ListConfigResourcesRequest | v1.ListConfigResourcesRequest"
)
"""The kio classes of the versions served."""

API_KEY = 74
VERSIONS = (0, 1)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_V1_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


async def handle(ctx: RequestContext, req: ListConfigResourcesRequest) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return b.ListConfigResourcesResponse(
            throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, config_resources=()
        )
    requested = tuple(getattr(req, "resource_types", ())) if version >= 1 else (CLIENT_METRICS,)
    types = requested or _V1_TYPES
    if unsupported := sorted(set(types) - set(_V1_TYPES)):
        log.info(
            "ListConfigResources from %s asked for unsupported resource types %s; supported: %s",
            ctx.conn.peer,
            unsupported,
            _V1_TYPES,
        )
        return b.ListConfigResourcesResponse(
            throttle_time=0, error_code=ErrorCode.unsupported_version, config_resources=()
        )
    resources = [
        b.ConfigResource(resource_name=name, resource_type=kind)
        for kind in sorted(set(types))
        for name in _names(ctx, kind)
    ]
    return b.ListConfigResourcesResponse(
        throttle_time=0, error_code=ErrorCode.none, config_resources=tuple(resources)
    )


def _names(ctx: RequestContext, kind: int) -> list[str]:
    cache = ctx.services.cache
    if kind == TOPIC:
        return sorted(cache.topics)
    if kind in (BROKER, BROKER_LOGGER):
        return [str(broker.id) for broker in cache.live_brokers()]
    return sorted(cache.resource_names(kind))
