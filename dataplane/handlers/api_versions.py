"""ApiVersions (18): the APIs and version ranges this broker implements, nothing more, and (v3+)
its features.

Advertising an API we do not implement makes clients call it (librdkafka calls
GetTelemetrySubscriptions whenever key 71 is listed), so the list is the handler registry.

Features (dataplane/features.py): the supported ranges (`transaction.version` 0-2,
`group.version` 0-1) and the levels finalized in the meta service's Raft state (UpdateFeatures),
with their epoch; before any was set there, `transaction.version` at the broker setting. Kafka 4
clients use transactions version 2 (KIP-890 part 2: EndTxn v5, an epoch bump per transaction,
partitions added by their leaders) only when the cluster finalizes level 2.
"""

from __future__ import annotations

from dataplane import features
from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder

API_KEY = 18
VERSIONS = (0, 4)

_FEATURE_LEVEL_0_VERSION = 4  # below it, features supported from level 0 are left out


async def handle(ctx: RequestContext, req: Request) -> Response:
    name = getattr(req, "client_software_name", "")
    if name:
        ctx.conn.client_software = (name, req.client_software_version)
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    finalized, epoch = features.finalized(
        ctx.services.cache, ctx.services.config.transaction_version
    )
    return b.ApiVersionsResponse(
        error_code=0,
        api_keys=tuple(
            b.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ctx.supported.items())
        ),
        throttle_time=0,
        # Kafka omits a feature supported from level 0 below v4: older clients fail to read
        # a minimum of 0 (KAFKA-17492)
        supported_features=tuple(
            b.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(features.SUPPORTED_FEATURES.items())
            if low > 0 or ctx.header.api_version >= _FEATURE_LEVEL_0_VERSION
        ),
        # the metadata offset the levels were last changed at, as Kafka's epoch is
        finalized_features_epoch=epoch,
        # Kafka lists no finalized feature at level 0 (off)
        finalized_features=tuple(
            b.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in sorted(finalized.items())
            if level > 0
        ),
    )
