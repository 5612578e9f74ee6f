"""DescribeShareGroupOffsets (90) v0-v1: per share-partition of a share group, its start offset
(the first offset not yet acknowledged or archived), the leader epoch of its state and (v1,
KIP-1226) its lag, from the share coordinator's state summary. Without topics, every topic the
group has share-partition state for. A partition without state has start offset -1 and leader
epoch 0, whether its group exists or not (Kafka reads the state without looking the group up).

The lag needs the partition's high watermark: this broker's replica of it (every broker has one
with RF = brokers); -1 when it has none. Authorization as Kafka's: DESCRIBE on the group
(GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.protocol import Payload

from dataplane.coordinator.share import offsets
from dataplane.coordinator.share.adapter import ShareGroupAdapter
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.describe_share_group_offsets import v0, v1

DescribeShareGroupOffsetsRequest: TypeAlias = (
    "v0.DescribeShareGroupOffsetsRequest | v1.DescribeShareGroupOffsetsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 90
VERSIONS = (0, 1)

log = logging.getLogger("rafka.share")
UNKNOWN_SERVER_ERROR = "The server experienced an unexpected error when processing the request."


async def handle(ctx: RequestContext, req: DescribeShareGroupOffsetsRequest) -> Response:
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


async def _describe(ctx: RequestContext, b: EntityBuilder, request: Any) -> tuple[Payload, ...]:
    """As Kafka's describeShareGroupOffsets: the persister's summary of each named partition,
    whether the group exists or not (-1 where there is no state); unknown topics first, with
    a zero topic id, and topics the principal may not DESCRIBE last, refused."""
    services = ctx.services
    gid = request.group_id
    authorizer = services.authorizer
    if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
        raise KafkaError(ErrorCode.group_authorization_failed)
    cache = services.cache
    if request.topics is None:
        group = services.group_coordinator.shard(gid).groups.get(gid)
        partitions = group.group.state_partitions if isinstance(group, ShareGroupAdapter) else {}
        wanted = [
            (cache.topics_by_id[t].name if t in cache.topics_by_id else name, sorted(ps))
            for t, (name, ps) in sorted(partitions.items())
        ]
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in request.topics]
    denied = authorizer.denied(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, [name for name, _ in wanted]
    )
    unknown = [(n, ps) for n, ps in wanted if n not in denied and n not in cache.topics]
    known = [(n, ps) for n, ps in wanted if n not in denied and n in cache.topics]
    keys = [offsets.key(gid, cache.topics[n].topic_id, p) for n, ps in known for p in ps]
    if keys and not gid.strip():  # Kafka's persister refuses the key: the group fails
        log.info("DescribeShareGroupOffsets refused: the group id is empty")
        raise KafkaError(ErrorCode.unknown_server_error, UNKNOWN_SERVER_ERROR)
    states = iter(
        await offsets.gather([partial(services.share_persister.summary, k) for k in keys])
    )
    read_committed = services.group_settings.share(gid).isolation_level == 1

    def partition(name: str, p: int) -> Payload:
        # without state: start offset and lag unknown, leader epoch 0 (Kafka's defaults)
        start, epoch, lag, code, message = -1, 0, -1, ErrorCode.none, None
        state = next(states)
        if isinstance(state, KafkaError):
            code, message = state.code, state.message
        elif state is not None:
            start, epoch = state.start_offset, state.leader_epoch
            end = offsets.end_offset(services.replicas, name, p, read_committed)
            lag = offsets.lag(state, end) if end >= 0 else -1
        return b.DescribeShareGroupOffsetsResponsePartition(
            partition_index=p,
            start_offset=start,
            leader_epoch=epoch,
            lag=lag,
            error_code=code,
            error_message=message,
        )

    def refused(p: int, code: ErrorCode, message: str | None) -> Payload:
        return b.DescribeShareGroupOffsetsResponsePartition(
            partition_index=p,
            start_offset=-1,
            leader_epoch=0,
            lag=-1,
            error_code=code,
            error_message=message,
        )

    out = [
        b.DescribeShareGroupOffsetsResponseTopic(
            topic_name=n,
            topic_id=bytes(16),
            partitions=tuple(refused(p, ErrorCode.none, None) for p in ps),
        )
        for n, ps in unknown
    ]
    out += [
        b.DescribeShareGroupOffsetsResponseTopic(
            topic_name=n,
            topic_id=cache.topics[n].topic_id,
            partitions=tuple(partition(n, p) for p in ps),
        )
        for n, ps in known
    ]
    if request.topics is not None:  # Kafka leaves them out of "every topic"
        out += [
            b.DescribeShareGroupOffsetsResponseTopic(
                topic_name=n,
                topic_id=bytes(16),
                partitions=tuple(
                    refused(p, ErrorCode.topic_authorization_failed, "Topic authorization failed.")
                    for p in ps
                ),
            )
            for n, ps in wanted
            if n in denied
        ]
    return tuple(out)
