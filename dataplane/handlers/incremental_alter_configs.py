"""IncrementalAlterConfigs (44) v0-v1: SET, DELETE, APPEND and SUBTRACT (LIST settings) on the
dynamic configs of topics and brokers, and on this broker's logger levels (BROKER_LOGGER). The
checks and the meta service call are config_admin.py's."""

from __future__ import annotations

from dataplane.config_admin import Change, alter
from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.request_context import RequestContext, Response

API_KEY = 44
VERSIONS = (0, 1)


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    changes = [
        Change(
            r.resource_type,
            r.resource_name,
            tuple((c.name, c.config_operation, c.value) for c in r.configs),
        )
        for r in req.resources
    ]
    results = await alter(ctx, changes, req.validate_only)
    return b.IncrementalAlterConfigsResponse(
        throttle_time=0,
        responses=tuple(
            b.AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r, (code, message) in zip(req.resources, results, strict=True)
        ),
    )
