"""SaslHandshake (17): the client picks a SASL mechanism of the listener (see
dataplane.security.sasl). After v0 the client sends bare SASL tokens, after v1 SaslAuthenticate
requests; on an authenticated connection a v1 handshake starts re-authentication (KIP-368)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.request_context import RequestContext, Response

if TYPE_CHECKING:
    from kio.schema.sasl_handshake import v0, v1

SaslHandshakeRequest: TypeAlias = "v0.SaslHandshakeRequest | v1.SaslHandshakeRequest"
"""The kio classes of the versions served."""

API_KEY = 17
VERSIONS = (0, 1)


async def handle(ctx: RequestContext, req: SaslHandshakeRequest) -> Response:
    error, mechanisms = ctx.services.sasl.handshake(ctx.conn, req.mechanism, ctx.header.api_version)
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    return b.SaslHandshakeResponse(error_code=error, mechanisms=mechanisms)
