"""AlterClientQuotas (49) v0-v1: set or remove client quotas in the meta service's Raft state,
from where every broker's quota managers get them (Kafka forwards it to its controller).

The meta service validates each entity as Kafka's ClientQuotaControlManager does (entity
types and combinations, keys, values; INVALID_REQUEST with Kafka's messages); validate_only
changes nothing. ALTER_CONFIGS on the cluster is required (CLUSTER_AUTHORIZATION_FAILED for
every entity otherwise). A successful answer waits, briefly, until this broker's cache shows
the change, so a DescribeClientQuotas right after sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError
from meta.quotas import QuotaAlteration, QuotaEntity, entity_of

if TYPE_CHECKING:
    from kio.schema.alter_client_quotas import v0, v1

AlterClientQuotasRequest: TypeAlias = "v0.AlterClientQuotasRequest | v1.AlterClientQuotasRequest"
"""The kio classes of the versions served."""

API_KEY = 49
VERSIONS = (0, 1)

# How long a successful alteration waits for this broker's cache to show it.
_PROPAGATION_WAIT_S = 2.0

log = logging.getLogger("rafka.quotas")


async def handle(ctx: RequestContext, req: AlterClientQuotasRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    alterations = [
        QuotaAlteration(
            entity_of((e.entity_type, e.entity_name) for e in entry.entity),
            tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops),
        )
        for entry in req.entries
    ]
    results: list[tuple[int, str]]
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        results = [(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")]
        results *= len(alterations)
    elif not alterations:
        results = []
    else:
        try:
            results = await ctx.services.meta.alter_client_quotas(alterations, req.validate_only)
        except MetaError as e:
            log.warning("altering client quotas failed: the meta service did not answer (%s)", e)
            results = [(ErrorCode.request_timed_out, f"meta service unavailable: {e}")]
            results *= len(alterations)
        if not req.validate_only:
            done = [a for a, (code, _) in zip(alterations, results, strict=True) if code == 0]
            await _wait_until_cached(ctx.services.cache, done)
    # one entry per entity, as Kafka answers from a map keyed by entity (the last one wins)
    by_entity: dict[QuotaEntity, tuple[int, str]] = {}
    for alteration, result in zip(alterations, results, strict=True):
        by_entity[alteration.entity] = result
    return b.AlterClientQuotasResponse(
        throttle_time=0,
        entries=tuple(
            b.EntryData(
                error_code=code,
                error_message=message or None,
                entity=tuple(
                    b.EntityData(entity_type=kind, entity_name=name) for kind, name in entity
                ),
            )
            for entity, (code, message) in by_entity.items()
        ),
    )


async def _wait_until_cached(cache: MetadataCache, done: Sequence[QuotaAlteration]) -> None:
    def shown() -> bool:
        for alteration in done:
            values = cache.client_quotas.get(alteration.entity, {})
            for key, value in alteration.ops:
                if (value is None and key in values) or (
                    value is not None and values.get(key) != value
                ):
                    return False
        return True

    if done and not await cache.wait_until(shown, _PROPAGATION_WAIT_S):
        log.warning(
            "client quotas altered, but this broker's metadata did not show them within %.0fs; "
            "they apply as soon as the meta service's watch stream delivers them",
            _PROPAGATION_WAIT_S,
        )
