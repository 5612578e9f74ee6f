"""AlterUserScramCredentials (51): create, change or delete users' SCRAM credentials. The
client sends a salted password; the broker derives the stored and server keys (RFC 5802) and
only those reach the meta service's Raft state, and from there every broker's cache. Needs
ALTER on the cluster. Validation is Kafka's ScramControlManager's."""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.security.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_BY_TYPE
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError
from meta.model import ScramCredential

if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials import v0

AlterUserScramCredentialsRequest: TypeAlias = "v0.AlterUserScramCredentialsRequest"
"""The kio classes of the versions served."""

API_KEY = 51
VERSIONS = (0, 0)

log = logging.getLogger("rafka.sasl")

_PROPAGATION_S = 5.0  # wait this long for our own cache to show the change


async def handle(ctx: RequestContext, req: AlterUserScramCredentialsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    users = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        errors = {user: (ErrorCode.cluster_authorization_failed, None) for user in users}
    else:
        errors = await _alter(ctx, req)
    return b.AlterUserScramCredentialsResponse(
        throttle_time=0,
        results=tuple(
            b.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
            for user in users
            for code, message in [errors.get(user, (ErrorCode.none, None))]
        ),
    )


async def _alter(
    ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> dict[str, tuple[ErrorCode, str | None]]:
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    counts = Counter([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    for user, n in counts.items():
        if n > 1:
            errors[user] = (
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
    deletions: list[tuple[str, str]] = []
    for d in req.deletions:
        if d.name not in errors and not _refused(errors, d.name, d.mechanism):
            deletions.append((d.name, SCRAM_BY_TYPE[d.mechanism].name))
    upserts: list[tuple[str, str, ScramCredential]] = []
    for u in req.upsertions:
        if u.name in errors or _refused(errors, u.name, u.mechanism):
            continue
        if u.iterations < MIN_ITERATIONS or u.iterations > MAX_ITERATIONS:
            few = u.iterations < MIN_ITERATIONS
            errors[u.name] = (
                ErrorCode.unacceptable_credential,
                "Too few iterations" if few else "Too many iterations",
            )
        elif not u.salt or not u.salted_password:
            errors[u.name] = (ErrorCode.unacceptable_credential, "Salt and password must be set")
        else:
            mechanism = SCRAM_BY_TYPE[u.mechanism]
            credential = mechanism.credential(u.salted_password, u.salt, u.iterations)
            upserts.append((u.name, mechanism.name, credential))
    if not upserts and not deletions:
        return errors
    try:
        results = await ctx.services.meta.alter_scram_credentials(upserts, deletions)
    except MetaError as e:
        log.warning("altering SCRAM credentials failed: the meta service did not answer (%s)", e)
        for user in [u[0] for u in upserts] + [d[0] for d in deletions]:
            errors[user] = (ErrorCode.request_timed_out, f"meta service unavailable: {e}")
        return errors
    for user, code, message in results:
        errors[user] = (ErrorCode(code), message or None)
    done = {user for user, code, _ in results if code == 0}
    cache = ctx.services.cache
    await cache.wait_until(  # so this broker authenticates with the new credential at once
        lambda: (
            all(
                cache.scram_credentials.get((user, m)) == c
                for user, m, c in upserts
                if user in done
            )
            and not any(
                (user, m) in cache.scram_credentials for user, m in deletions if user in done
            )
        ),
        _PROPAGATION_S,
    )
    return errors


def _refused(errors: dict[str, tuple[ErrorCode, str | None]], user: str, mechanism: int) -> bool:
    """Kafka's validateScramUsernameAndMechanism; records the error."""
    if not user:
        errors[user] = (ErrorCode.unacceptable_credential, "Username must not be empty")
    elif mechanism not in SCRAM_BY_TYPE:
        errors[user] = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    else:
        return False
    return True
