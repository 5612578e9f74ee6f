"""DescribeClientQuotas (48) v0-v1: the client quotas a filter selects, from this broker's copy
of the meta service's quotas (Kafka's ClientQuotasImage.describe).

Each filter component names an entity type (user, client-id, ip) and a match: exact name (0),
the default entity (1) or any entity of the type (2). An entity matches when every component
matches one of its components; ``strict`` also excludes entities with more components than the
filter. DESCRIBE_CONFIGS on the cluster is required (CLUSTER_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.quotas import CLIENT_ID, IP, USER, QuotaEntity

if TYPE_CHECKING:
    from kio.schema.describe_client_quotas import v0, v1

DescribeClientQuotasRequest: TypeAlias = (
    "v0.DescribeClientQuotasRequest | v1.DescribeClientQuotasRequest"
)
"""The kio classes of the versions served."""

API_KEY = 48
VERSIONS = (0, 1)

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


async def handle(ctx: RequestContext, req: DescribeClientQuotasRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    try:
        if not ctx.services.authorizer.authorize(
            ctx.conn, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            raise KafkaError(
                ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
            )
        exact, specified = parse_filter(req.components)
    except KafkaError as e:
        return b.DescribeClientQuotasResponse(
            throttle_time=0, error_code=e.code, error_message=e.message, entries=None
        )
    matched = matching(ctx.services.cache.client_quotas, exact, specified, req.strict)
    return b.DescribeClientQuotasResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message="",  # Kafka's success carries the field's default, "" (not null)
        entries=tuple(
            b.EntryData(
                entity=tuple(
                    b.EntityData(entity_type=kind, entity_name=name) for kind, name in entity
                ),
                values=tuple(b.ValueData(key=k, value=v) for k, v in values.items()),
            )
            for entity, values in matched
        ),
    )


def parse_filter(components: Iterable[Any]) -> tuple[dict[str, str | None], set[str]]:
    """(entity type -> exact name or None for the default, the types any name matches);
    KafkaError with Kafka's INVALID_REQUEST / UNSUPPORTED_VERSION message for a bad filter."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise KafkaError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Entity type {kind} cannot appear more than once in the filter.",
            )
        if kind not in (IP, USER, CLIENT_ID):
            raise KafkaError(ErrorCode.unsupported_version, f"Unsupported entity type {kind}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[kind] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[kind] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            specified.add(kind)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown match type {c.match_type}")
    named = exact.keys() | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise KafkaError(
            ErrorCode.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    return exact, specified


def matching(
    quotas: Mapping[QuotaEntity, Mapping[str, float]],
    exact: Mapping[str, str | None],
    specified: set[str],
    strict: bool,
) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """The entities (with their quotas) the filter selects, in the state's order."""
    selected = []
    for entity, values in quotas.items():
        components = dict(entity)
        if strict and len(components) != len(exact) + len(specified):
            continue
        if any(kind not in components or components[kind] != name for kind, name in exact.items()):
            continue
        if any(kind not in components for kind in specified):
            continue
        selected.append((entity, values))
    return selected
