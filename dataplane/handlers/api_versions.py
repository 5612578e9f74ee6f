"""ApiVersions (18): the APIs and version ranges this broker implements, nothing more, and (v3+)
its features.

Advertising an API we do not implement makes clients call it (librdkafka calls
GetTelemetrySubscriptions whenever key 71 is listed), so the list is the handler registry.

Checks, as Kafka's KafkaApis and ApiVersionsRequest.isValid: from v3 the client's software name
and version must be letters, digits, '-' and '.' (starting and ending with a letter or digit),
else INVALID_REQUEST; v5 (KIP-1242) may name the cluster and node the client means to reach,
both or neither (else INVALID_REQUEST), and a broker that is not that node of that cluster
answers REBOOTSTRAP_REQUIRED, so a client whose bootstrap address now leads to another cluster or
broker starts over from its bootstrap servers. These error answers list no API.

Features (dataplane/features.py): the supported ranges (`transaction.version` 0-2,
`group.version` 0-1) and the levels finalized in the meta service's Raft state (UpdateFeatures),
with their epoch; before any was set there, `transaction.version` at the broker setting. Kafka 4
clients use transactions version 2 (KIP-890 part 2: EndTxn v5, an epoch bump per transaction,
partitions added by their leaders) only when the cluster finalizes level 2.
"""

from __future__ import annotations

import logging
import re

from dataplane import features
from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response

API_KEY = 18
VERSIONS = (0, 5)

log = logging.getLogger("rafka.api_versions")

_FEATURE_LEVEL_0_VERSION = 4  # below it, features supported from level 0 are left out
_SOFTWARE_VERSION = 3  # v3+: the client's software name and version
_TARGET_VERSION = 5  # v5+: the cluster id and node id the client means to reach (KIP-1242)
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
# Kafka 4 lists Produce from v0 though it serves v3+ only (a request below is refused as any
# unsupported version is): librdkafka cannot produce compressed batches to a broker that does
# not list v0 (KAFKA-18659, Kafka's ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION).
ADVERTISED_MIN_VERSIONS = {0: 0}


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    error = _check(ctx, req, version)
    if error != ErrorCode.none:
        return b.ApiVersionsResponse(error_code=error, api_keys=(), throttle_time=0)
    if version >= _SOFTWARE_VERSION:
        ctx.conn.client_software = (req.client_software_name, req.client_software_version)
    finalized, epoch = features.finalized(
        ctx.services.cache, ctx.services.config.transaction_version
    )
    return b.ApiVersionsResponse(
        error_code=0,
        api_keys=tuple(
            b.ApiVersion(api_key=k, min_version=ADVERTISED_MIN_VERSIONS.get(k, lo), max_version=hi)
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


def _check(ctx: RequestContext, req: Request, version: int) -> ErrorCode:
    """INVALID_REQUEST, REBOOTSTRAP_REQUIRED or NONE (module docstring)."""
    if version >= _SOFTWARE_VERSION and not (
        _SOFTWARE.fullmatch(req.client_software_name)
        and _SOFTWARE.fullmatch(req.client_software_version)
    ):
        log.warning(
            "ApiVersions from %s names its software %r version %r: only letters, digits, '-' "
            "and '.' may (INVALID_REQUEST); fix the client's software name",
            ctx.conn.peer,
            req.client_software_name,
            req.client_software_version,
        )
        return ErrorCode.invalid_request
    if version < _TARGET_VERSION:
        return ErrorCode.none
    cluster_id, node_id = req.cluster_id, req.node_id
    if (cluster_id is None) != (node_id == -1):
        log.warning(
            "ApiVersions from %s names cluster %r and node %d: a client names both or neither "
            "(INVALID_REQUEST)",
            ctx.conn.peer,
            cluster_id,
            node_id,
        )
        return ErrorCode.invalid_request
    ours = (ctx.services.cache.cluster_id, ctx.services.config.node_id)
    if cluster_id is not None and (cluster_id, node_id) != ours:
        log.info(
            "ApiVersions from %s means node %d of cluster %s, but this is node %d of cluster "
            "%s: answered REBOOTSTRAP_REQUIRED (the client goes back to its bootstrap servers)",
            ctx.conn.peer,
            node_id,
            cluster_id,
            *reversed(ours),
        )
        return ErrorCode.rebootstrap_required
    return ErrorCode.none
