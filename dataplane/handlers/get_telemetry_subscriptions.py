"""GetTelemetrySubscriptions (71): which metrics a client should push, and how often (KIP-714).

The client's attributes (client id, software name and version from ApiVersions, source address
and port) are matched against the CLIENT_METRICS subscriptions by the broker's
ClientMetricsManager (dataplane/telemetry). No authorization, as in Kafka: every client may ask.
Monotonic sums are asked for as cumulative values (delta_temporality false), the form a
Prometheus counter takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.telemetry.otlp import ACCEPTED_COMPRESSION

if TYPE_CHECKING:
    from kio.schema.get_telemetry_subscriptions import v0

GetTelemetrySubscriptionsRequest: TypeAlias = "v0.GetTelemetrySubscriptionsRequest"
"""The kio classes of the versions served."""

API_KEY = 71
VERSIONS = (0, 0)


def client_attributes(ctx: RequestContext) -> Mapping[str, str]:
    """What CLIENT_METRICS `match` selectors test (but client_instance_id, added by the
    manager)."""
    name, version = ctx.conn.client_software
    _, _, port = ctx.conn.peer.rpartition(":")
    return {
        "client_id": ctx.header.client_id or "",
        "client_software_name": name,
        "client_software_version": version,
        "client_source_address": ctx.conn.host,
        "client_source_port": port,
    }


async def handle(ctx: RequestContext, req: GetTelemetrySubscriptionsRequest) -> Response:
    manager = ctx.services.telemetry
    answer = manager.get_subscriptions(req.client_instance_id, client_attributes(ctx))
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    ok = answer.error == ErrorCode.none
    return b.GetTelemetrySubscriptionsResponse(
        throttle_time=0,
        error_code=answer.error,
        client_instance_id=answer.instance_id,
        subscription_id=answer.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION if ok else (),
        push_interval=answer.interval_ms,
        telemetry_max_bytes=manager.max_bytes,
        delta_temporality=False,
        requested_metrics=answer.metrics,
    )
