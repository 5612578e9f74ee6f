"""DeleteTopics (20): by name (v0-v5) or by name or topic id (v6, KIP-516).

Authorization as Kafka's: DELETE on each topic (TOPIC_AUTHORIZATION_FAILED); a topic named by
id that the principal may not even DESCRIBE is refused without its name.
"""

from __future__ import annotations

from typing import Any

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.quota import throttle as quota
from meta.acl import AclOperation, ResourceType

API_KEY = 20
VERSIONS = (1, 6)
_STRICT_QUOTA_VERSION = 5  # KIP-599: from v5 a mutation over the quota is refused


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    if ctx.header.api_version >= 6:
        names = [t.name for t in req.topics if t.name is not None]
        ids = [t.topic_id.bytes for t in req.topics if t.name is None and t.topic_id is not None]
    else:
        names, ids = list(req.topic_names), []
    refused: list[Any] = []
    if ctx.services.authorizer.enabled:
        names, ids, refused = _authorized(ctx, b, names, ids)
    if ctx.services.quotas.mutation.enabled:
        names, ids, throttled = _within_mutation_quota(ctx, b, names, ids)
        refused += throttled
    results = await ctx.services.topic_admin.delete_topics(names, ids) if names or ids else []
    return b.DeleteTopicsResponse(
        throttle_time=0,
        responses=tuple(
            b.DeletableTopicResult(
                name=r.name or None,
                topic_id=bytes(r.topic_id) if r.topic_id else None,
                error_code=r.error_code,
                error_message=r.error_message or None,
            )
            for r in results
        )
        + tuple(refused),
    )


def _authorized(
    ctx: RequestContext, b: EntityBuilder, names: list[str], ids: list[bytes]
) -> tuple[list[str], list[bytes], list[Any]]:
    """The names and ids the principal may delete, and the refusals of the others (an id
    this broker does not know goes on: the meta service answers UNKNOWN_TOPIC_ID)."""
    authorizer, conn, topic = ctx.services.authorizer, ctx.conn, ResourceType.TOPIC
    by_id = {i: info.name for i in ids if (info := ctx.services.cache.topics_by_id.get(i))}
    hidden = authorizer.denied(conn, AclOperation.DESCRIBE, topic, by_id.values())
    denied = authorizer.denied(conn, AclOperation.DELETE, topic, [*names, *by_id.values()])
    refused_ids = {i: n for i, n in by_id.items() if n in hidden or n in denied}
    refused = [_refused(b, n, None) for n in dict.fromkeys(names) if n in denied] + [
        _refused(b, None if n in hidden else n, i) for i, n in refused_ids.items()
    ]
    return (
        [n for n in names if n not in denied],
        [i for i in ids if i not in refused_ids],
        refused,
    )


def _within_mutation_quota(
    ctx: RequestContext, b: EntityBuilder, names: list[str], ids: list[bytes]
) -> tuple[list[str], list[bytes], list[Any]]:
    """controller_mutation_rate: a topic's partitions are mutations; the names and ids
    within the quota, and THROTTLING_QUOTA_EXCEEDED for the others (unknown topics cost
    nothing: the meta service refuses them)."""
    cache, kept_names, kept_ids, throttled = ctx.services.cache, [], [], []
    for name in dict.fromkeys(names):
        info = cache.topics.get(name)
        if info is None or quota.mutations(ctx, len(info.partitions), _STRICT_QUOTA_VERSION):
            kept_names.append(name)
        else:
            throttled.append(_refused(b, name, info.topic_id, ErrorCode.throttling_quota_exceeded))
    for topic_id in dict.fromkeys(ids):
        info = cache.topics_by_id.get(topic_id)
        if info is None or quota.mutations(ctx, len(info.partitions), _STRICT_QUOTA_VERSION):
            kept_ids.append(topic_id)
        else:
            throttled.append(_refused(b, info.name, topic_id, ErrorCode.throttling_quota_exceeded))
    return kept_names, kept_ids, throttled


def _refused(
    b: EntityBuilder,
    name: str | None,
    topic_id: bytes | None,
    code: ErrorCode = ErrorCode.topic_authorization_failed,
) -> Any:
    return b.DeletableTopicResult(
        name=name,
        topic_id=topic_id,
        error_code=code,
        error_message="The topic authorization is failed."
        if code == ErrorCode.topic_authorization_failed
        else quota.THROTTLED,
    )
