"""OffsetFetch (9) v0-v9: a group's committed offsets (-1 where none); null topics = every
committed partition (v2+); several groups per request (v8+).

v0 read ZooKeeper in Kafka before 0.9 and was removed by Kafka 4 (KIP-896); here it answers
like v1, from `__consumer_offsets` (its schema is v1's, see `dataplane.protocol.legacy`). An
offset committed but not yet replicated is not returned: the previous one is, or with
require_stable (v7+) UNSTABLE_OFFSET_COMMIT for that partition, which the client retries. The
same holds for an offset committed in a transaction (TxnOffsetCommit) until the transaction
ends: read_committed consumers ask with require_stable, so they never start from offsets of a
transaction that may still abort (KIP-447).

Authorization as Kafka's: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED); a named topic the
principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED, and is left out of "every
committed partition".
"""

from __future__ import annotations

from typing import Any

from dataplane.coordinator.offsets import FetchedPartition, FetchedTopic
from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import AclOperation, ResourceType

API_KEY = 9
VERSIONS = (0, 9)

Wanted = list[tuple[str, list[int]]] | None


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    require_stable = version >= 7 and req.require_stable
    if version < 8:
        wanted = _wanted(req.topics)
        error, fetched = _fetch(ctx, req.group_id, wanted, None, -1, require_stable)
        if version < 2:  # no request-level error: every partition carries it
            if error != ErrorCode.none:
                fetched = [
                    FetchedTopic(t, tuple(FetchedPartition(p, None, error) for p in ps))
                    for t, ps in wanted or []
                ]
            return b.OffsetFetchResponse(topics=_topics(b, version, fetched))
        return b.OffsetFetchResponse(
            throttle_time=0,
            topics=_topics(b, version, fetched if error == ErrorCode.none else []),
            error_code=error,
        )
    groups = []
    for group in req.groups:
        error, fetched = _fetch(
            ctx,
            group.group_id,
            _wanted(group.topics),
            group.member_id if version >= 9 else None,
            group.member_epoch if version >= 9 else -1,
            require_stable,
        )
        groups.append(
            b.OffsetFetchResponseGroup(
                group_id=group.group_id,
                topics=_topics(b, version, fetched if error == ErrorCode.none else []),
                error_code=error,
            )
        )
    return b.OffsetFetchResponse(throttle_time=0, groups=tuple(groups))


def _wanted(topics: Any) -> Wanted:
    if topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in topics]


def _fetch(
    ctx: RequestContext,
    group_id: str,
    wanted: Wanted,
    member_id: str | None,
    member_epoch: int,
    require_stable: bool,
) -> tuple[ErrorCode, list[FetchedTopic]]:
    authorizer = ctx.services.authorizer
    if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    try:
        shard = ctx.services.group_coordinator.shard(group_id)
    except KafkaError as e:
        return e.code, []
    if not authorizer.enabled:
        return shard.fetch_offsets(group_id, wanted, member_id, member_epoch, require_stable)
    topic, describe = ResourceType.TOPIC, AclOperation.DESCRIBE
    if wanted is None:
        error, fetched = shard.fetch_offsets(
            group_id, None, member_id, member_epoch, require_stable
        )
        hidden = authorizer.denied(
            ctx.conn, describe, topic, (t.topic for t in fetched), log_denied=False
        )
        return error, [t for t in fetched if t.topic not in hidden]
    denied = authorizer.denied(ctx.conn, describe, topic, (name for name, _ in wanted))
    allowed = [(name, parts) for name, parts in wanted if name not in denied]
    error, fetched = shard.fetch_offsets(group_id, allowed, member_id, member_epoch, require_stable)
    refused = ErrorCode.topic_authorization_failed
    return error, fetched + [
        FetchedTopic(name, tuple(FetchedPartition(p, None, refused) for p in parts))
        for name, parts in wanted
        if name in denied
    ]


def _topics(b: EntityBuilder, version: int, fetched: list[FetchedTopic]) -> tuple:
    topic_cls = b.OffsetFetchResponseTopics if version >= 8 else b.OffsetFetchResponseTopic
    partition_cls = (
        b.OffsetFetchResponsePartitions if version >= 8 else b.OffsetFetchResponsePartition
    )
    return tuple(
        topic_cls(
            name=t.topic,
            partitions=tuple(
                partition_cls(
                    partition_index=p,
                    committed_offset=-1 if o is None else o.offset,
                    committed_leader_epoch=-1 if o is None else o.leader_epoch,
                    metadata="" if o is None else o.metadata,
                    error_code=error,
                )
                for p, o, error in t.partitions
            ),
        )
        for t in fetched
    )
