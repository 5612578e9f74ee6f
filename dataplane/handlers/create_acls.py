"""CreateAcls (30) v1-v3: store ACL bindings in the meta service's Raft state, from where
every broker's authorizer gets them (Kafka's AclApis.handleCreateAcls; v0, which Kafka 4
removed, is not served). Each binding succeeds or fails on its own; one already stored
succeeds."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.security.acl_requests import binding_from_wire, refusal, wait_until_cached
from meta.acl import AclOperation
from meta.client import MetaError

if TYPE_CHECKING:
    from kio.schema.create_acls import v1, v2, v3

CreateAclsRequest: TypeAlias = "v1.CreateAclsRequest | v2.CreateAclsRequest | v3.CreateAclsRequest"
"""The kio classes of the versions served."""

API_KEY = 30
VERSIONS = (1, 3)

log = logging.getLogger("rafka.acls")


async def handle(ctx: RequestContext, req: CreateAclsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    bindings = [binding_from_wire(c) for c in req.creations]
    results: list[tuple[int, str]]
    if (refused := refusal(ctx, AclOperation.ALTER)) is not None:
        results = [refused] * len(bindings)
    elif not bindings:
        results = []
    else:
        try:
            results = await ctx.services.meta.create_acls(bindings)
        except MetaError as e:
            log.warning("creating ACLs failed: the meta service did not answer (%s)", e)
            results = [(ErrorCode.request_timed_out, f"meta service unavailable: {e}")] * len(
                bindings
            )
        created = [acl for acl, (code, _) in zip(bindings, results, strict=True) if code == 0]
        await wait_until_cached(ctx.services.cache, created, [])
    return b.CreateAclsResponse(
        throttle_time=0,
        results=tuple(
            # Kafka's success carries the field's default, "" (not null)
            b.AclCreationResult(error_code=code, error_message=message or None if code else "")
            for code, message in results
        ),
    )
