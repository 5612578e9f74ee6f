"""PushTelemetry (72): a client's metrics, OTLP-encoded and maybe compressed (KIP-714).

The broker's ClientMetricsManager checks the push (subscription id, interval, size,
compression) with Kafka's errors and keeps the decoded metrics as the client's latest, which
the broker's Prometheus endpoint exports. No authorization, as in Kafka.
"""

from __future__ import annotations

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.handlers.get_telemetry_subscriptions import client_attributes
from dataplane.protocol.codec import ResponseBuilder

API_KEY = 72
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, req: Request) -> Response:
    error = ctx.services.telemetry.push(
        req.client_instance_id,
        client_attributes(ctx),
        req.subscription_id,
        req.terminating,
        req.compression_type,
        req.metrics or b"",
    )
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    return b.PushTelemetryResponse(throttle_time=0, error_code=error)
