"""SaslAuthenticate (36): one SASL token of the mechanism chosen by SaslHandshake; from v1 the
answer carries the session lifetime (KIP-368), after which the client must re-authenticate."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.request_context import RequestContext, Response

if TYPE_CHECKING:
    from kio.schema.sasl_authenticate import v0, v1, v2

SaslAuthenticateRequest: TypeAlias = (
    "v0.SaslAuthenticateRequest | v1.SaslAuthenticateRequest | v2.SaslAuthenticateRequest"
)
"""The kio classes of the versions served."""

API_KEY = 36
VERSIONS = (0, 2)


async def handle(ctx: RequestContext, req: SaslAuthenticateRequest) -> Response:
    result = await ctx.services.sasl.authenticate(ctx.conn, req.auth_bytes, ctx.header.api_version)
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    return b.SaslAuthenticateResponse(
        error_code=result.error,
        # Kafka's success carries the field's default, "" (not null)
        error_message=result.message if result.error else "",
        auth_bytes=result.auth_bytes,
        session_lifetime=result.session_lifetime_ms,
    )
