"""DescribeDelegationToken (41): the tokens of the given owners (null: all) that the requester
may see — its own (as owner, requester or renewer), or with DESCRIBE on the token or
DESCRIBE_TOKENS on its owner (Kafka's DelegationTokenManager.filterToken)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TypeAlias

from kio.static.protocol import Payload

from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.security.sasl import tokens
from meta.acl import AclOperation, ResourceType
from meta.model import DelegationToken

if TYPE_CHECKING:
    from kio.schema.describe_delegation_token import v1, v2, v3

DescribeDelegationTokenRequest: TypeAlias = (
    "v1.DescribeDelegationTokenRequest | v2.DescribeDelegationTokenRequest"
    " | v3.DescribeDelegationTokenRequest"
)
"""The kio classes of the versions served."""

API_KEY = 41
VERSIONS = (1, 3)


async def handle(ctx: RequestContext, req: DescribeDelegationTokenRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    conn, services = ctx.conn, ctx.services
    found: list[DelegationToken] = []
    if not tokens.requests_allowed(conn):
        error = ErrorCode.delegation_token_request_not_allowed
    elif not tokens.enabled(services.config):
        error = ErrorCode.delegation_token_auth_disabled
    else:
        error = ErrorCode.none
        owners = (
            None
            if req.owners is None
            else [tokens.principal(o.principal_type, o.principal_name) for o in req.owners]
        )
        now = int(time.time() * 1000)
        for token in services.cache.delegation_tokens.values():
            if min(token.expiry_ms, token.max_ms) < now:
                continue  # expired: the meta service removes it
            if owners is not None and not any(tokens.owner_or_renewer(token, o) for o in owners):
                continue
            if (
                tokens.owner_or_renewer(token, conn.principal)
                or services.authorizer.authorize(
                    conn, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id
                )
                or services.authorizer.authorize(
                    conn, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, token.owner
                )
            ):
                found.append(token)
    return b.DescribeDelegationTokenResponse(
        error_code=error,
        tokens=tuple(_described(b, t) for t in sorted(found, key=lambda t: t.issue_ms)),
        throttle_time=0,
    )


def _described(b: EntityBuilder, token: DelegationToken) -> Payload:
    owner_type, owner_name = tokens.split_principal(token.owner)
    requester_type, requester_name = tokens.split_principal(token.requester)
    return b.DescribedDelegationToken(
        principal_type=owner_type,
        principal_name=owner_name,
        token_requester_principal_type=requester_type,
        token_requester_principal_name=requester_name,
        issue_timestamp=token.issue_ms,
        expiry_timestamp=token.expiry_ms,
        max_timestamp=token.max_ms,
        token_id=token.token_id,
        hmac=token.hmac,
        renewers=tuple(
            b.DescribedDelegationTokenRenewer(principal_type=kind, principal_name=name)
            for kind, name in map(tokens.split_principal, token.renewers)
        ),
    )
