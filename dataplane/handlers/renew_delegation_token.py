"""RenewDelegationToken (39): its owner, requester or a renewer moves a token's expiry (by the
requested period, at most delegation.token.expiry.time.ms, never past its max lifetime)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.request_context import RequestContext, Response
from dataplane.security.sasl import tokens

if TYPE_CHECKING:
    from kio.schema.renew_delegation_token import v1, v2

RenewDelegationTokenRequest: TypeAlias = (
    "v1.RenewDelegationTokenRequest | v2.RenewDelegationTokenRequest"
)
"""The kio classes of the versions served."""

API_KEY = 39
VERSIONS = (1, 2)


async def handle(ctx: RequestContext, req: RenewDelegationTokenRequest) -> Response:
    period = tokens.renew_period_ms(ctx.services.config, tokens.milliseconds(req.renew_period))
    error, expiry_ms = await tokens.update_expiry(ctx, True, req.hmac, period)
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    return b.RenewDelegationTokenResponse(
        error_code=error, expiry_timestamp=tokens.timestamp(expiry_ms), throttle_time=0
    )
