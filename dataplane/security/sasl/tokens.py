"""Delegation tokens (KIP-48) as a broker sees them: how one is made, who may ask for and see
them. The tokens themselves live in the meta service's Raft state (``MetaClient``), and every
broker's cache holds them, so any broker authenticates with any token (SCRAM tokenauth)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import logging
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dataplane.protocol.errors import ErrorCode
from meta.client import MetaError
from meta.model import DelegationToken

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.connection import Connection
    from dataplane.request_context import RequestContext

log = logging.getLogger("rafka.sasl")

ERROR_TIMESTAMP = -1  # Kafka's DelegationTokenManager.ErrorTimestamp


def enabled(config: BrokerConfig) -> bool:
    """Tokens need delegation.token.secret.key (the same on every broker) to be signed."""
    return bool(config.delegation_token_secret_key)


def requests_allowed(conn: Connection) -> bool:
    """Kafka's allowTokenRequests: not over a token-authenticated connection (a token must not
    beget tokens), not over PLAINTEXT, not anonymously over one-way TLS."""
    return not (
        (conn.sasl is not None and conn.sasl.token_authenticated)
        or conn.security_protocol == "PLAINTEXT"
        or (conn.security_protocol == "SSL" and conn.principal == "User:ANONYMOUS")
    )


def token_hmac(secret_key: str, token_id: str) -> bytes:
    """A token's password: HMAC-SHA512 of its id with the cluster's secret key."""
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def new_token(
    config: BrokerConfig,
    owner: str,
    requester: str,
    renewers: Sequence[str],
    max_lifetime_ms: int,
    now_ms: int,
) -> DelegationToken:
    """A fresh token with Kafka's lifetimes: it lasts at most delegation.token.max.lifetime.ms
    (or less, as the request asks) and expires after delegation.token.expiry.time.ms unless
    renewed."""
    lifetime = config.delegation_token_max_lifetime_ms
    if max_lifetime_ms > 0:
        lifetime = min(lifetime, max_lifetime_ms)
    max_ms = now_ms + lifetime
    # Kafka's token ids are its Uuid's string form: url-safe base64 of 16 random bytes.
    token_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    return DelegationToken(
        token_id=token_id,
        hmac=token_hmac(config.delegation_token_secret_key, token_id),
        owner=owner,
        requester=requester,
        renewers=tuple(renewers),
        issue_ms=now_ms,
        expiry_ms=min(max_ms, now_ms + config.delegation_token_expiry_time_ms),
        max_ms=max_ms,
    )


def renew_period_ms(config: BrokerConfig, requested_ms: int) -> int:
    """A renewal extends by the requested period, at most delegation.token.expiry.time.ms."""
    default = config.delegation_token_expiry_time_ms
    return min(default, requested_ms) if requested_ms > 0 else default


def owner_or_renewer(token: DelegationToken, principal: str) -> bool:
    """Kafka's TokenInformation.ownerOrRenewer (the requester counts too)."""
    return principal in (token.owner, token.requester) or principal in token.renewers


def principal(principal_type: str, name: str) -> str:
    return f"{principal_type}:{name}"


def split_principal(value: str) -> tuple[str, str]:
    """ "User:alice" -> ("User", "alice")."""
    kind, _, name = value.partition(":")
    return kind, name


def milliseconds(value: int | datetime.timedelta) -> int:
    """A request's i64 duration as kio decodes it."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return value


def timestamp(ms: int) -> datetime.datetime:
    """Wall-clock ms as the datetime kio encodes back to the same ms (also -1)."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


async def update_expiry(
    ctx: RequestContext, renew: bool, hmac_value: bytes, period_ms: int
) -> tuple[ErrorCode, int]:
    """Renew (``renew``) or expire the token with this HMAC, for the connection's principal:
    (error, new expiry ms; ERROR_TIMESTAMP when the request is not allowed, 0 when refused).
    The meta service applies Kafka's ownership and expiry rules."""
    what = "RenewDelegationToken" if renew else "ExpireDelegationToken"
    conn, services = ctx.conn, ctx.services
    if not requests_allowed(conn):
        log.info(
            "refused %s from %s (%s over %s): tokens may not be managed over PLAINTEXT, "
            "anonymously, or with a token",
            what,
            conn.peer,
            conn.principal,
            conn.security_protocol,
        )
        return ErrorCode.delegation_token_request_not_allowed, ERROR_TIMESTAMP
    # Kafka's controller leaves the expiry of its refusals at the field's default, 0
    if not enabled(services.config):
        return ErrorCode.delegation_token_auth_disabled, 0
    call = services.meta.renew_delegation_token if renew else services.meta.expire_delegation_token
    now_ms = int(time.time() * 1000)
    try:
        code, message, expiry_ms = await call(hmac_value, conn.principal, period_ms, now_ms)
    except MetaError as e:
        log.warning("%s failed: the meta service did not answer (%s)", what, e)
        return ErrorCode.request_timed_out, ERROR_TIMESTAMP
    if code:
        log.info("%s from %s (%s) refused: %s", what, conn.peer, conn.principal, message)
        return ErrorCode(code), 0
    return ErrorCode.none, expiry_ms
