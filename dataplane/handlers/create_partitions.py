"""CreatePartitions (37): raise topics' partition counts, with or without explicit assignments.

The meta service validates (UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS for a count not above
the current one, INVALID_REPLICA_ASSIGNMENT) and places the new partitions, as Kafka's
controller does. A request adds at most Kafka's MAX_RECORDS_PER_USER_OP (10,000) partitions
over all its topics: a topic that would take it past that gets POLICY_VIOLATION. Without
validate_only the answer waits, up to the request's timeout, until this broker's metadata shows
them with leaders, so the client's next Metadata request here already sees them. Producers and
consumers find them in their next metadata refresh, and consumer groups rebalance onto them
(the group coordinator follows partition counts).

Authorization as Kafka's: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED); a topic named
twice is INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
from kio.static.protocol import Payload

from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.quota import throttle as quota
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType
from meta.client import MetaError
from meta.topic_planning import too_many_new_partitions

log = logging.getLogger("rafka.topics")

if TYPE_CHECKING:
    from kio.schema.create_partitions import v0, v1, v2, v3

CreatePartitionsRequest: TypeAlias = (
    "v0.CreatePartitionsRequest | v1.CreatePartitionsRequest | v2.CreatePartitionsRequest"
    " | v3.CreatePartitionsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 37
VERSIONS = (0, 3)
_STRICT_QUOTA_VERSION = 3  # KIP-599: from v3 a mutation over the quota is refused


async def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    counts = Counter(t.name for t in req.topics)
    denied = ctx.services.authorizer.denied(
        ctx.conn, AclOperation.ALTER, ResourceType.TOPIC, list(counts)
    )
    timeout = max(0.0, req.timeout.total_seconds())
    deadline = anyio.current_time() + timeout
    results: dict[str, Any] = {}
    records = 0  # PartitionRecords this request writes so far (Kafka's MAX_RECORDS_PER_USER_OP)
    for t in req.topics:
        if t.name in results:
            continue
        added = _added(ctx.services.cache, t.name, t.count)
        if counts[t.name] > 1:
            results[t.name] = _result(b, t.name, ErrorCode.invalid_request, "Duplicate topic name.")
        elif t.name in denied:
            results[t.name] = _result(
                b, t.name, ErrorCode.topic_authorization_failed, "Authorization failed."
            )
        elif too_many := too_many_new_partitions(records + added):
            log.warning(
                "adding partitions to %s (to %d) refused: %s",
                t.name,
                t.count,
                too_many.message,
            )
            results[t.name] = _result(b, t.name, too_many.error_code, too_many.message)
        elif not _within_mutation_quota(ctx, added, req.validate_only):
            results[t.name] = _result(
                b, t.name, ErrorCode.throttling_quota_exceeded, quota.THROTTLED
            )
        else:
            assignments: list[list[int]] | None = (
                None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            )
            code, message = await _create(
                ctx, t.name, t.count, assignments, req.validate_only, deadline
            )
            results[t.name] = _result(b, t.name, code, message)
            records += added if code == ErrorCode.none else 0
    return b.CreatePartitionsResponse(throttle_time=0, results=tuple(results.values()))


def _added(cache: MetadataCache, topic: str, count: int) -> int:
    """The partitions a change adds, as this broker's metadata shows the topic (an unknown
    topic or a count not above the current one adds none: the meta service refuses it)."""
    info = cache.topics.get(topic)
    return max(0, count - len(info.partitions)) if info is not None else 0


def _within_mutation_quota(ctx: RequestContext, added: int, validate_only: bool) -> bool:
    """controller_mutation_rate: the partitions added are mutations."""
    if not ctx.services.quotas.mutation.enabled or validate_only:
        return True
    return added <= 0 or quota.mutations(ctx, added, _STRICT_QUOTA_VERSION)


async def _create(
    ctx: RequestContext,
    topic: str,
    count: int,
    assignments: list[list[int]] | None,
    validate_only: bool,
    deadline: float,
) -> tuple[int, str | None]:
    """(error code, message) of one topic's change, once this broker's cache shows it."""
    try:
        code, message = await ctx.services.meta.create_partitions(
            topic, count, assignments, validate_only
        )
    except MetaError as e:
        log.warning(
            "adding partitions to %s failed: the meta service did not answer (%s)", topic, e
        )
        return ErrorCode.request_timed_out, f"meta service unavailable: {e}"
    if code != ErrorCode.none:
        log.info(
            "adding partitions to %s (to %d) refused: %s: %s",
            topic,
            count,
            ErrorCode(code).name.upper(),
            message,
        )
        return code, message or None
    if validate_only:
        return ErrorCode.none, None
    cache = ctx.services.cache
    remaining = max(0.0, deadline - anyio.current_time())
    if not await cache.wait_until(lambda: _has_leaders(cache, topic, count), remaining):
        log.warning(
            "%s now has %d partitions, but this broker's metadata did not show all of them "
            "with a leader within the request's timeout; clients see them shortly",
            topic,
            count,
        )
    else:
        log.info("%s now has %d partitions", topic, count)
    return ErrorCode.none, None


def _has_leaders(cache: MetadataCache, topic: str, count: int) -> bool:
    info = cache.topics.get(topic)
    return (
        info is not None
        and len(info.partitions) >= count
        and all(p.leader >= 0 for p in info.partitions)
    )


def _result(b: EntityBuilder, name: str, code: int, message: str | None) -> Payload:
    return b.CreatePartitionsTopicResult(name=name, error_code=code, error_message=message)
