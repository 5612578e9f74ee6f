"""CreateDelegationToken (38): a token for the requester or, with CREATE_TOKENS on that user,
for another owner; its HMAC is signed with delegation.token.secret.key and it is stored in the
meta service's Raft state (Kafka's KafkaApis.handleCreateTokenRequest and
DelegationTokenControlManager)."""

from __future__ import annotations

import logging
import time

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.security.sasl import tokens
from meta.acl import AclOperation, ResourceType
from meta.client import MetaError
from meta.model import DelegationToken

API_KEY = 38
VERSIONS = (1, 3)

log = logging.getLogger("rafka.sasl")

_PROPAGATION_S = 5.0  # wait this long for our own cache to hold the new token


async def handle(ctx: RequestContext, req: Request) -> Response:
    conn, services = ctx.conn, ctx.services
    requester = conn.principal
    owner_name = getattr(req, "owner_principal_name", None)
    owner = tokens.principal(req.owner_principal_type, owner_name) if owner_name else requester
    renewers = [tokens.principal(r.principal_type, r.principal_name) for r in req.renewers]
    token: DelegationToken | None = None
    if not tokens.requests_allowed(conn):
        error = ErrorCode.delegation_token_request_not_allowed
        log.info(
            "refused CreateDelegationToken from %s (%s over %s): tokens may not be requested "
            "over PLAINTEXT, anonymously, or with a token",
            conn.peer,
            requester,
            conn.security_protocol,
        )
    elif owner != requester and not services.authorizer.authorize(
        conn, AclOperation.CREATE_TOKENS, ResourceType.USER, owner
    ):
        error = ErrorCode.delegation_token_authorization_failed
    elif any(tokens.split_principal(r)[0] != "User" for r in renewers):
        error = ErrorCode.invalid_principal_type
    elif not tokens.enabled(services.config):
        error = ErrorCode.delegation_token_auth_disabled
        log.info(
            "CreateDelegationToken from %s: delegation tokens are disabled; set "
            "delegation.token.secret.key (the same on every broker) to enable them",
            conn.peer,
        )
    else:
        token = tokens.new_token(
            services.config,
            owner,
            requester,
            renewers,
            tokens.milliseconds(req.max_lifetime),
            int(time.time() * 1000),
        )
        error = await _store(ctx, token)
    return _response(ctx, error, owner, requester, token if error == ErrorCode.none else None)


async def _store(ctx: RequestContext, token: DelegationToken) -> ErrorCode:
    try:
        code, message = await ctx.services.meta.create_delegation_token(token)
    except MetaError as e:
        log.warning("creating a delegation token failed: the meta service did not answer (%s)", e)
        return ErrorCode.request_timed_out
    if code:
        log.info("the meta service refused a delegation token for %s: %s", token.owner, message)
        return ErrorCode(code)
    cache = ctx.services.cache  # so the token authenticates on this broker at once
    await cache.wait_until(lambda: token.token_id in cache.delegation_tokens, _PROPAGATION_S)
    return ErrorCode.none


def _response(
    ctx: RequestContext, error: ErrorCode, owner: str, requester: str, token: DelegationToken | None
) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    owner_type, owner_name = tokens.split_principal(owner)
    requester_type, requester_name = tokens.split_principal(requester)
    none = tokens.ERROR_TIMESTAMP
    return b.CreateDelegationTokenResponse(
        error_code=error,
        principal_type=owner_type,
        principal_name=owner_name,
        token_requester_principal_type=requester_type,
        token_requester_principal_name=requester_name,
        issue_timestamp=tokens.timestamp(token.issue_ms if token else none),
        expiry_timestamp=tokens.timestamp(token.expiry_ms if token else none),
        max_timestamp=tokens.timestamp(token.max_ms if token else none),
        token_id=token.token_id if token else "",
        hmac=token.hmac if token else b"",
        throttle_time=0,
    )
