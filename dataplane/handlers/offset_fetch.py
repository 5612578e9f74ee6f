"""OffsetFetch (9) v1-v9: a group's committed offsets (-1 where none); null topics = every
committed partition (v2+); several groups per request (v8+).

v0 (offsets kept in ZooKeeper) is not offered, as in Kafka 4 (KIP-896). require_stable (v7+)
would answer UNSTABLE_OFFSET_COMMIT while transactional offsets are pending; there are none
without transactions, so it never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dataplane.coordinator.shard import FetchedTopic
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from dataplane.server import RequestContext

API_KEY = 9
VERSIONS = (1, 9)

Wanted = list[tuple[str, list[int]]] | None


async def handle(ctx: RequestContext, req: Any) -> Any:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    if version < 8:
        wanted = _wanted(req.topics)
        error, fetched = _fetch(ctx, req.group_id, wanted, None, -1)
        if version < 2:  # no request-level error: every partition carries it
            if error != ErrorCode.none:
                fetched = [FetchedTopic(t, tuple((p, None) for p in ps)) for t, ps in wanted or []]
            return b.OffsetFetchResponse(topics=_topics(b, version, fetched, error))
        return b.OffsetFetchResponse(
            throttle_time=0,
            topics=_topics(b, version, fetched if error == ErrorCode.none else [], error),
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
        )
        groups.append(
            b.OffsetFetchResponseGroup(
                group_id=group.group_id,
                topics=_topics(b, version, fetched if error == ErrorCode.none else [], error),
                error_code=error,
            )
        )
    return b.OffsetFetchResponse(throttle_time=0, groups=tuple(groups))


def _wanted(topics: Any) -> Wanted:
    if topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in topics]


def _fetch(
    ctx: RequestContext, group_id: str, wanted: Wanted, member_id: str | None, member_epoch: int
) -> tuple[ErrorCode, list[FetchedTopic]]:
    if not group_id:
        return ErrorCode.invalid_group_id, []
    try:
        shard = ctx.broker.group_coordinator.shard(group_id)
    except KafkaError as e:
        return e.code, []
    return shard.fetch_offsets(group_id, wanted, member_id, member_epoch)


def _topics(b: EntityBuilder, version: int, fetched: list[FetchedTopic], error: ErrorCode) -> tuple:
    partition_error = error if version < 2 else ErrorCode.none
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
                    error_code=partition_error,
                )
                for p, o in t.partitions
            ),
        )
        for t in fetched
    )
