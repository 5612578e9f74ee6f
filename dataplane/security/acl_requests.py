"""What the ACL APIs (CreateAcls 30, DescribeAcls 29, DeleteAcls 31) share: reading bindings
and filters off the wire, and the check Kafka's AclApis makes before any of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dataplane.protocol.errors import ErrorCode
from meta.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    enum_code,
)

if TYPE_CHECKING:
    from dataplane.metadata_cache import MetadataCache
    from dataplane.request_context import RequestContext

# After the meta service has stored a change, how long the handler waits for this broker's
# cache to show it (so that a DescribeAcls or a request right after sees it); it answers
# anyway once this has passed.
PROPAGATION_WAIT_S = 2.0


def refusal(ctx: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """Why the request may not touch ACLs at all: no authorizer configured
    (SECURITY_DISABLED), or no `operation` (ALTER, DESCRIBE) right on the cluster."""
    authorizer = ctx.services.authorizer
    if not authorizer.enabled:
        return ErrorCode.security_disabled, "No Authorizer is configured on the broker"
    if not authorizer.authorize(ctx.conn, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return (
            ErrorCode.cluster_authorization_failed,
            f"{ctx.conn.principal} may not {operation.name} the cluster's ACLs",
        )
    return None


def binding_from_wire(c: Any) -> AclBinding:
    """An AclCreation as a binding; codes Kafka does not define become UNKNOWN, which the
    meta service refuses with INVALID_REQUEST."""
    return AclBinding(
        resource_type=enum_code(ResourceType, c.resource_type),
        resource_name=c.resource_name,
        pattern_type=enum_code(PatternType, c.resource_pattern_type),
        principal=c.principal,
        host=c.host,
        operation=enum_code(AclOperation, c.operation),
        permission_type=enum_code(AclPermissionType, c.permission_type),
    )


def filter_from_wire(f: Any) -> AclBindingFilter:
    """A DescribeAclsRequest or DeleteAclsFilter (the same fields) as a filter."""
    return AclBindingFilter(
        resource_type=enum_code(ResourceType, f.resource_type_filter),
        resource_name=f.resource_name_filter,
        pattern_type=enum_code(PatternType, f.pattern_type_filter),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=enum_code(AclOperation, f.operation),
        permission_type=enum_code(AclPermissionType, f.permission_type),
    )


async def wait_until_cached(
    cache: MetadataCache, present: list[AclBinding], absent: list[AclBinding]
) -> None:
    """Wait (at most PROPAGATION_WAIT_S) for the local cache to hold `present` and none of
    `absent`."""
    if not present and not absent:
        return

    def applied() -> bool:
        acls = set(cache.acls)
        return acls.issuperset(present) and acls.isdisjoint(absent)

    await cache.wait_until(applied, PROPAGATION_WAIT_S)
