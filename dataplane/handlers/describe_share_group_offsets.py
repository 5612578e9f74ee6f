"""DescribeShareGroupOffsets (90) v0-v1: per share-partition of a share group, its start offset
(the first offset not yet acknowledged or archived), the leader epoch of its state and (v1,
KIP-1226) its lag, from the share coordinator's state summary. Without topics, every topic the
group has share-partition state for. A partition without state has start offset -1.

The lag needs the partition's high watermark: this broker's replica of it (every broker has one
with RF = brokers); -1 when it has none. Authorization as Kafka's: DESCRIBE on the group
(GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from dataplane.coordinator import share_group_offsets as offsets
from dataplane.coordinator.share_group_adapter import share_group
from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import AclOperation, ResourceType

API_KEY = 90
VERSIONS = (0, 1)


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    groups = []
    for group in req.groups:
        try:
            topics = await _describe(ctx, b, group)
            groups.append(
                b.DescribeShareGroupOffsetsResponseGroup(
                    group_id=group.group_id, topics=topics, error_code=ErrorCode.none
                )
            )
        except KafkaError as e:
            groups.append(
                b.DescribeShareGroupOffsetsResponseGroup(
                    group_id=group.group_id, topics=(), error_code=e.code, error_message=e.message
                )
            )
    return b.DescribeShareGroupOffsetsResponse(throttle_time=0, groups=tuple(groups))


async def _describe(ctx: RequestContext, b: EntityBuilder, request: Any) -> tuple[Any, ...]:
    services = ctx.services
    gid = request.group_id
    authorizer = services.authorizer
    if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
        raise KafkaError(ErrorCode.group_authorization_failed)
    group = share_group(services.group_coordinator.shard(gid), gid)
    cache = services.cache
    if request.topics is None:
        wanted = [
            (cache.topics_by_id[t].name if t in cache.topics_by_id else name, sorted(ps))
            for t, (name, ps) in sorted(group.group.state_partitions.items())
        ]
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in request.topics]
    denied = authorizer.denied(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, [name for name, _ in wanted]
    )
    read_committed = services.group_settings.share(gid).isolation_level == 1
    calls, slots = [], []
    for name, parts in wanted:
        topic = cache.topics.get(name)
        for p in parts:
            if name in denied:
                slots.append((name, p, ErrorCode.topic_authorization_failed))
            elif topic is None or not 0 <= p < len(topic.partitions):
                slots.append((name, p, ErrorCode.unknown_topic_or_partition))
            else:
                key = offsets.key(gid, topic.topic_id, p)
                calls.append(lambda k=key: services.share_persister.summary(k))
                slots.append((name, p, ErrorCode.none))
    results = iter(await offsets.gather(calls))
    by_topic: dict[str, list[Any]] = {name: [] for name, _ in wanted}
    for name, p, code in slots:
        start, epoch, lag, message = -1, -1, -1, None
        if code == ErrorCode.none:
            state = next(results)
            if isinstance(state, KafkaError):
                code, message = state.code, state.message
            elif state is not None:
                start, epoch = state.start_offset, state.leader_epoch
                end = offsets.end_offset(services.replicas, name, p, read_committed)
                lag = offsets.lag(state, end) if end >= 0 else -1
        by_topic[name].append(
            b.DescribeShareGroupOffsetsResponsePartition(
                partition_index=p,
                start_offset=start,
                leader_epoch=epoch,
                lag=lag,
                error_code=code,
                error_message=message,
            )
        )
    return tuple(
        b.DescribeShareGroupOffsetsResponseTopic(
            topic_name=name,
            topic_id=cache.topics[name].topic_id if name in cache.topics else bytes(16),
            partitions=tuple(partitions),
        )
        for name, partitions in by_topic.items()
    )
