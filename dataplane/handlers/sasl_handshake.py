"""SaslHandshake (17): the client picks a SASL mechanism of the listener (see
dataplane.security.sasl). After v0 the client sends bare SASL tokens, after v1 SaslAuthenticate
requests; on an authenticated connection a v1 handshake starts re-authentication (KIP-368)."""

from __future__ import annotations

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder

API_KEY = 17
VERSIONS = (0, 1)


async def handle(ctx: RequestContext, req: Request) -> Response:
    error, mechanisms = ctx.services.sasl.handshake(ctx.conn, req.mechanism, ctx.header.api_version)
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    return b.SaslHandshakeResponse(error_code=error, mechanisms=mechanisms)
