"""ApiVersions (18): the APIs and version ranges this broker implements, nothing more.

Advertising an API we do not implement makes clients call it (librdkafka calls
GetTelemetrySubscriptions whenever key 71 is listed), so the list is the handler registry.
"""

from __future__ import annotations

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder

API_KEY = 18
VERSIONS = (0, 4)


async def handle(ctx: RequestContext, req: Request) -> Response:
    name = getattr(req, "client_software_name", "")
    if name:
        ctx.conn.client_software = (name, req.client_software_version)
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    return b.ApiVersionsResponse(
        error_code=0,
        api_keys=tuple(
            b.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ctx.supported.items())
        ),
        throttle_time=0,
    )
