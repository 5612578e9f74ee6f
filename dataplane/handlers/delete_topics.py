"""DeleteTopics (20): by name (v0-v5) or by name or topic id (v6, KIP-516).

Authorization as Kafka's: DELETE on each topic (TOPIC_AUTHORIZATION_FAILED); a topic named by
id that the principal may not even DESCRIBE is refused without its name.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.protocol import Payload

from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.quota import throttle as quota
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.delete_topics import v1, v2, v3, v4, v5, v6

DeleteTopicsRequest: TypeAlias = (
    "v1.DeleteTopicsRequest | v2.DeleteTopicsRequest | v3.DeleteTopicsRequest"
    " | v4.DeleteTopicsRequest | v5.DeleteTopicsRequest | v6.DeleteTopicsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 20
VERSIONS = (1, 6)
_STRICT_QUOTA_VERSION = 5  # KIP-599: from v5 a mutation over the quota is refused


async def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    names, ids, refused = _named(ctx, b, req)
    if ctx.services.authorizer.enabled:
        names, ids, denied = _authorized(ctx, b, names, ids)
        refused += denied
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


def _named(
    ctx: RequestContext, b: EntityBuilder, req: Any
) -> tuple[list[str], list[bytes], list[Any]]:
    """Kafka's checks of what a request names (ControllerApis.deleteTopics): the names and ids
    to delete, and INVALID_REQUEST for an entry with neither or both, a name or id given twice
    (none of its entries is deleted) and a name whose topic's id is given too."""
    refused: list[Any] = []

    def invalid(name: str | None, topic_id: bytes | None, message: str) -> None:
        refused.append(_refused(b, name, topic_id, ErrorCode.invalid_request, message))

    names: list[str] = [] if ctx.header.api_version >= 6 else list(req.topic_names)
    ids: list[bytes] = []
    for t in req.topics if ctx.header.api_version >= 6 else ():
        topic_id = t.topic_id.bytes if t.topic_id is not None else _NO_ID
        if t.name is not None and topic_id != _NO_ID:
            invalid(t.name, topic_id, "You may not specify both topic name and topic id.")
        elif t.name is not None:
            names.append(t.name)
        elif topic_id != _NO_ID:
            ids.append(topic_id)
        else:
            invalid(None, None, "Neither topic name nor id were specified.")
    names, twice = _once(names)
    for name in twice:
        invalid(name, None, "Duplicate topic name.")
    ids, twice = _once(ids)
    for topic_id in twice:
        invalid(None, topic_id, "Duplicate topic id.")
    topics = ctx.services.cache.topics
    for name in [n for n in names if n in topics and topics[n].topic_id in ids]:
        names.remove(name)
        ids.remove(topics[name].topic_id)
        invalid(
            name,
            topics[name].topic_id,
            "The provided topic name maps to an ID that was already supplied.",
        )
    return names, ids, refused


_NO_ID = bytes(16)


def _once(items: list[Any]) -> tuple[list[Any], list[Any]]:
    """(the items named once, in order; those named more than once)."""
    counts = Counter(items)
    return [i for i in items if counts[i] == 1], [i for i in counts if counts[i] > 1]


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
    message: str | None = None,
) -> Payload:
    """A topic's refusal: `message`, else the one of `code` (authorization or quota)."""
    if message is None:
        message = (
            "Topic authorization failed."  # Kafka's default text of the error
            if code == ErrorCode.topic_authorization_failed
            else quota.THROTTLED
        )
    return b.DeletableTopicResult(
        name=name, topic_id=topic_id, error_code=code, error_message=message
    )
