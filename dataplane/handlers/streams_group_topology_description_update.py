"""StreamsGroupTopologyDescriptionUpdate (93) v0 (KIP-1331): a streams member pushes its
topology's description for the broker's topology description plugin
(group.streams.topology.description.plugin.class). No plugin is configured here (Kafka's
default), so the answer is Kafka 4.4's without one: UNSUPPORTED_VERSION "The broker has no streams
group topology description plugin configured." (StreamsGroupHeartbeat v1 never asks for a
description: its TopologyDescriptionRequired stays false)."""

from __future__ import annotations

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response

API_KEY = 93
VERSIONS = (0, 0)

NO_PLUGIN = "The broker has no streams group topology description plugin configured."


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    return b.StreamsGroupTopologyDescriptionUpdateResponse(
        throttle_time=0, error_code=ErrorCode.unsupported_version, error_message=NO_PLUGIN
    )
