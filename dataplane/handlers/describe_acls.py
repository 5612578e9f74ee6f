"""DescribeAcls (29) v1-v3: the ACL bindings a filter selects, from this broker's copy of the
meta service's ACLs, grouped by resource pattern (Kafka's AclApis.handleDescribeAcls; v0,
which Kafka 4 removed, is not served)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.security.acl_requests import filter_from_wire, refusal
from meta.acl import (
    AclBinding,
    AclOperation,
    PatternType,
    ResourceType,
    filter_matches,
    invalid_filter,
)

if TYPE_CHECKING:
    from kio.schema.describe_acls import v1, v2, v3

DescribeAclsRequest: TypeAlias = (
    "v1.DescribeAclsRequest | v2.DescribeAclsRequest | v3.DescribeAclsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 29
VERSIONS = (1, 3)


async def handle(ctx: RequestContext, req: DescribeAclsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    f = filter_from_wire(req)
    refused = refusal(ctx, AclOperation.DESCRIBE)
    if refused is None and (invalid := invalid_filter(f)):
        refused = ErrorCode.invalid_request, invalid
    if refused is not None:
        code, message = refused
        return b.DescribeAclsResponse(
            throttle_time=0, error_code=code, error_message=message, resources=()
        )
    by_pattern: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for acl in ctx.services.cache.acls:
        if filter_matches(f, acl):
            key = (acl.resource_type, acl.resource_name, acl.pattern_type)
            by_pattern.setdefault(key, []).append(acl)
    return b.DescribeAclsResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message="",  # Kafka's success carries the field's default, "" (not null)
        resources=tuple(
            b.DescribeAclsResource(
                resource_type=rtype,
                resource_name=name,
                pattern_type=pattern,
                acls=tuple(
                    b.AclDescription(
                        principal=acl.principal,
                        host=acl.host,
                        operation=acl.operation,
                        permission_type=acl.permission_type,
                    )
                    for acl in acls
                ),
            )
            for (rtype, name, pattern), acls in by_pattern.items()
        ),
    )
