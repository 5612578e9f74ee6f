"""UpdateFeatures (57) v0-v2: change the cluster's finalized feature levels (KIP-584), kept in
the meta service's Raft state and advertised by every broker's ApiVersions
(dataplane/features.py). ALTER on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED.

As Kafka's controller (QuorumController.updateFeatures): the updates apply all together or
not at all; a refused one fails the request with its error (INVALID_UPDATE_VERSION, ...) at the
top level, "The update failed for all features since the following feature had an error: ...";
on success v0-v1 list each feature with NONE, v2 nothing. v0's allow_downgrade is a safe
downgrade; v1+ name the upgrade type (1 upgrade, 2 safe downgrade, 3 unsafe downgrade) and may
only validate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from dataplane import features
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError

if TYPE_CHECKING:
    from kio.schema.update_features import v0, v1, v2

KioUpdateFeaturesRequest: TypeAlias = (
    "v0.UpdateFeaturesRequest | v1.UpdateFeaturesRequest | v2.UpdateFeaturesRequest"
)
"""The kio classes of the versions served."""

API_KEY = 57
VERSIONS = (0, 2)

log = logging.getLogger("rafka.features")

_UPGRADE, _SAFE_DOWNGRADE = 1, 2
_RESULTS_UP_TO = 1  # v2 answers without per-feature results
_PROPAGATION_WAIT_S = 2.0  # for this broker's cache to show the new levels


async def handle(ctx: RequestContext, req: KioUpdateFeaturesRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    version = ctx.header.api_version

    def answer(code: ErrorCode, message: str | None, names: tuple[str, ...] = ()) -> Response:
        return b.UpdateFeaturesResponse(
            throttle_time=0,
            error_code=code,
            error_message=message,
            results=tuple(
                b.UpdatableFeatureResult(feature=name, error_code=code, error_message=None)
                for name in (names if version <= _RESULTS_UP_TO else ())
            ),
        )

    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return answer(
            ErrorCode.cluster_authorization_failed,
            f"{ctx.conn.principal} may not ALTER the cluster (UpdateFeatures)",
        )
    updates = [(u.feature, u.max_version_level, _upgrade_type(u)) for u in req.feature_updates]
    validate_only = bool(getattr(req, "validate_only", False))
    try:
        results = await ctx.services.meta.update_features(updates, validate_only)
    except MetaError as e:
        log.warning("UpdateFeatures failed: the meta service did not answer (%s)", e)
        return answer(ErrorCode.request_timed_out, f"meta service unavailable: {e}")
    for name, code, message in results:
        if code != ErrorCode.none:
            log.info("UpdateFeatures refused: %s: %s", name, message)
            return answer(
                ErrorCode(code),
                "The update failed for all features since the following feature had an "
                f"error: {message}",
            )
    if not validate_only:
        log.info(
            "finalized feature levels changed: %s",
            ", ".join(f"{name}={level}" for name, level, _ in updates),
        )
        await _wait_until_cached(ctx, updates)
    return answer(ErrorCode.none, None, tuple(name for name, _, _ in updates))


def _upgrade_type(update: object) -> int:
    """v1+: as sent; v0: allow_downgrade means a safe downgrade (Kafka's UpdateFeaturesRequest)."""
    upgrade_type = getattr(update, "upgrade_type", None)
    if upgrade_type is not None:
        return int(upgrade_type)
    return _SAFE_DOWNGRADE if getattr(update, "allow_downgrade", False) else _UPGRADE


async def _wait_until_cached(ctx: RequestContext, updates: Sequence[tuple[str, int, int]]) -> None:
    """So that this broker's next ApiVersions shows the new levels (gives up after a while:
    the change is made, only this broker's copy lags)."""
    cache = ctx.services.cache
    bootstrap = ctx.services.config.transaction_version

    def applied() -> bool:
        levels = features.levels(cache, bootstrap)
        return all(levels.get(name, 0) == max(level, 0) for name, level, _ in updates)

    await cache.wait_until(applied, _PROPAGATION_WAIT_S)
