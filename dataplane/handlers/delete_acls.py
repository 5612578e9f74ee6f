"""DeleteAcls (31) v1-v3: remove from the meta service's Raft state every ACL binding one of
the filters selects, and say which (Kafka's AclApis.handleDeleteAcls; v0, which Kafka 4
removed, is not served). Filters are checked one by one: an invalid one fails alone."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.security.acl_requests import filter_from_wire, refusal, wait_until_cached
from meta.acl import AclBinding, AclOperation
from meta.client import MetaError

if TYPE_CHECKING:
    from kio.schema.delete_acls import v1, v2, v3

DeleteAclsRequest: TypeAlias = "v1.DeleteAclsRequest | v2.DeleteAclsRequest | v3.DeleteAclsRequest"
"""The kio classes of the versions served."""

API_KEY = 31
VERSIONS = (1, 3)

log = logging.getLogger("rafka.acls")


async def handle(ctx: RequestContext, req: DeleteAclsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    filters = [filter_from_wire(f) for f in req.filters]
    results: list[tuple[int, str, list[AclBinding]]]
    if (refused := refusal(ctx, AclOperation.ALTER)) is not None:
        results = [(*refused, [])] * len(filters)
    elif not filters:
        results = []
    else:
        try:
            results = await ctx.services.meta.delete_acls(filters)
        except MetaError as e:
            log.warning("deleting ACLs failed: the meta service did not answer (%s)", e)
            failed: tuple[int, str, list[AclBinding]] = (
                ErrorCode.request_timed_out,
                f"meta service unavailable: {e}",
                [],
            )
            results = [failed] * len(filters)
        deleted = [acl for _, _, acls in results for acl in acls]
        await wait_until_cached(ctx.services.cache, [], deleted)
    return b.DeleteAclsResponse(
        throttle_time=0,
        filter_results=tuple(
            b.DeleteAclsFilterResult(
                error_code=code,
                error_message=message or None,
                matching_acls=tuple(
                    b.DeleteAclsMatchingAcl(
                        error_code=ErrorCode.none,
                        error_message=None,
                        resource_type=acl.resource_type,
                        resource_name=acl.resource_name,
                        pattern_type=acl.pattern_type,
                        principal=acl.principal,
                        host=acl.host,
                        operation=acl.operation,
                        permission_type=acl.permission_type,
                    )
                    for acl in acls
                ),
            )
            for code, message, acls in results
        ),
    )
