"""PushTelemetry (72): a client's metrics, OTLP-encoded and maybe compressed (KIP-714).

The broker's ClientMetricsManager checks the push (subscription id, interval, size,
compression) with Kafka's errors and keeps the decoded metrics as the client's latest, which
the broker's Prometheus endpoint exports. No authorization, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.handlers.get_telemetry_subscriptions import client_attributes
from dataplane.protocol.codec import ResponseBuilder
from dataplane.request_context import RequestContext, Response

if TYPE_CHECKING:
    from kio.schema.push_telemetry import v0

PushTelemetryRequest: TypeAlias = "v0.PushTelemetryRequest"
"""The kio classes of the versions served."""

API_KEY = 72
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, req: PushTelemetryRequest) -> Response:
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
