"""DescribeUserScramCredentials (50): the SCRAM mechanisms and iterations each user has (never
the keys), from the metadata cache, as Kafka's ScramImage.describe. Needs DESCRIBE on the
cluster."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.security.sasl.scram import SCRAM_MECHANISMS
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.describe_user_scram_credentials import v0

DescribeUserScramCredentialsRequest: TypeAlias = "v0.DescribeUserScramCredentialsRequest"
"""The kio classes of the versions served."""

API_KEY = 50
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, req: DescribeUserScramCredentialsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        # Kafka's getErrorResponse: the error again for each user asked, its name left out
        refused = b.DescribeUserScramCredentialsResult(
            user="",
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=None,
            credential_infos=(),
        )
        return b.DescribeUserScramCredentialsResponse(
            throttle_time=0,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=None,
            results=(refused,) * len(req.users or ()),
        )
    by_user: dict[str, list[tuple[str, int]]] = {}
    for (user, mechanism), credential in ctx.services.cache.scram_credentials.items():
        by_user.setdefault(user, []).append((mechanism, credential.iterations))
    asked = Counter(u.name for u in req.users or ())
    results = []
    for user in asked or sorted(by_user):
        # Kafka's success carries the message field's default, "" (not null)
        error, message, infos = ErrorCode.none, "", by_user.get(user, [])
        if asked[user] > 1:
            error = ErrorCode.duplicate_resource
            message = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}"
            )
        elif not infos:
            error = ErrorCode.resource_not_found
            message = f"Attempt to describe a user credential that does not exist: {user}"
        results.append(
            b.DescribeUserScramCredentialsResult(
                user=user,
                error_code=error,
                error_message=message,
                credential_infos=tuple(
                    b.CredentialInfo(mechanism=SCRAM_MECHANISMS[m].type_code, iterations=iterations)
                    for m, iterations in sorted(infos)
                    if error == ErrorCode.none and m in SCRAM_MECHANISMS
                ),
            )
        )
    return b.DescribeUserScramCredentialsResponse(
        throttle_time=0, error_code=ErrorCode.none, error_message="", results=tuple(results)
    )
