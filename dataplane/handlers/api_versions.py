"""ApiVersions (18): the APIs and version ranges this broker implements, nothing more, and (v3+)
its features.

Advertising an API we do not implement makes clients call it (librdkafka calls
GetTelemetrySubscriptions whenever key 71 is listed), so the list is the handler registry.

The one feature is `transaction.version` (supported 0-2, finalized at the broker setting, 2 by
default): Kafka 4 clients use transactions version 2 (KIP-890 part 2: EndTxn v5, an epoch bump
per transaction, partitions added by their leaders) only when the broker finalizes level 2.
"""

from __future__ import annotations

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder

API_KEY = 18
VERSIONS = (0, 4)

TRANSACTION_VERSION = "transaction.version"
TRANSACTION_VERSIONS = (0, 2)  # the levels this broker implements


async def handle(ctx: RequestContext, req: Request) -> Response:
    name = getattr(req, "client_software_name", "")
    if name:
        ctx.conn.client_software = (name, req.client_software_version)
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    level = ctx.services.config.transaction_version
    return b.ApiVersionsResponse(
        error_code=0,
        api_keys=tuple(
            b.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ctx.supported.items())
        ),
        throttle_time=0,
        supported_features=(
            b.SupportedFeatureKey(
                name=TRANSACTION_VERSION,
                min_version=TRANSACTION_VERSIONS[0],
                max_version=TRANSACTION_VERSIONS[1],
            ),
        ),
        # the metadata offset the feature levels were read at, as Kafka's epoch is
        finalized_features_epoch=max(ctx.services.cache.offset, 0),
        # Kafka lists no finalized feature at level 0 (off)
        finalized_features=(
            (
                b.FinalizedFeatureKey(
                    name=TRANSACTION_VERSION, max_version_level=level, min_version_level=level
                ),
            )
            if level > 0
            else ()
        ),
    )
