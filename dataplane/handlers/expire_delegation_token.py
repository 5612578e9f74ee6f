"""ExpireDelegationToken (40): its owner, requester or a renewer makes a token expire after the
given period (a negative one removes it at once)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.request_context import RequestContext, Response
from dataplane.security.sasl import tokens

if TYPE_CHECKING:
    from kio.schema.expire_delegation_token import v1, v2

ExpireDelegationTokenRequest: TypeAlias = (
    "v1.ExpireDelegationTokenRequest | v2.ExpireDelegationTokenRequest"
)
"""The kio classes of the versions served."""

API_KEY = 40
VERSIONS = (1, 2)


async def handle(ctx: RequestContext, req: ExpireDelegationTokenRequest) -> Response:
    period = tokens.milliseconds(req.expiry_time_period)
    error, expiry_ms = await tokens.update_expiry(ctx, False, req.hmac, period)
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    return b.ExpireDelegationTokenResponse(
        error_code=error, expiry_timestamp=tokens.timestamp(expiry_ms), throttle_time=0
    )
