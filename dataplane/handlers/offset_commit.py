"""OffsetCommit (8) v0-v10: a group's committed offsets, appended to `__consumer_offsets` and
answered once replicated (OffsetFetch sees them from then on, see `GroupShard.store_offsets`).
v10 names topics by id (KIP-848): an id no topic has answers UNKNOWN_TOPIC_ID.

v0-v1 (pre-0.9 clients) are stored like the others, as Kafka 3.x stores v1 (Kafka 4 removed
them, KIP-896; their schemas are in `dataplane.protocol.legacy`): v0 carries no generation nor
member id (a commit from outside any group); v1's per-partition commit timestamp (-1: now) is
stored as the offset's commit time, which offsets retention may count from.

Checks, in Kafka's order: without READ on the group every partition fails
(GROUP_AUTHORIZATION_FAILED); topics without READ get TOPIC_AUTHORIZATION_FAILED (after
UNKNOWN_TOPIC_ID), unknown topics or partitions UNKNOWN_TOPIC_OR_PARTITION; the
rest go to the group's coordinator, whose member/generation checks (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS, ...) apply to all of them, then
OFFSET_METADATA_TOO_LARGE per partition.
A commit with generation -1 and no member id is accepted while the group is empty or absent
(consumers using assign(), admin tools). As in Kafka, the empty group id is a group like any
other here (and in OffsetFetch, DescribeGroups, DeleteGroups): pre-0.9 clients committed to it.
"""

from __future__ import annotations

from typing import NamedTuple

from kio.static.protocol import Payload

from dataplane.coordinator.api import ms
from dataplane.coordinator.base import Reply, map_append_error
from dataplane.coordinator.offsets import CommitPartition
from dataplane.coordinator.timer import wall_ms
from dataplane.handlers.context import Request
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 8
VERSIONS = (0, 10)

_TOPIC_ID_VERSION = 10  # v10+: topics by id (KIP-848)

_DEFAULT_RETENTION = -1


class Topic(NamedTuple):
    """A topic of the request, as answered: its name ("" for an unknown id), its id (v10
    answers by it) and partitions, and the error all of them get when no lookup is needed."""

    name: str
    topic_id: bytes
    partitions: list[int]
    error: ErrorCode = ErrorCode.none


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    # (topic, partition) -> error, in request order
    results: dict[tuple[str, int], ErrorCode] = {}
    order: list[Topic] = []
    candidates: list[CommitPartition] = []
    cache = ctx.services.cache
    authorizer = ctx.services.authorizer
    group_error = ErrorCode.none
    if not authorizer.authorize(ctx.conn, AclOperation.READ, ResourceType.GROUP, req.group_id):
        group_error = ErrorCode.group_authorization_failed
    names = [
        cache.topic_name(t.topic_id) if version >= _TOPIC_ID_VERSION else t.name for t in req.topics
    ]
    denied = authorizer.denied(
        ctx.conn, AclOperation.READ, ResourceType.TOPIC, (n for n in names if n is not None)
    )
    for topic, name in zip(req.topics, names, strict=True):
        indexes = [p.partition_index for p in topic.partitions]
        if name is None:  # v10: no topic has this id
            topic_id = topic.topic_id.bytes if topic.topic_id else bytes(16)
            order.append(Topic("", topic_id, indexes, group_error or ErrorCode.unknown_topic_id))
            continue
        order.append(Topic(name, cache.topic_id(name), indexes))
        info = cache.topics.get(name)
        for p in topic.partitions:
            if group_error != ErrorCode.none:
                results[name, p.partition_index] = group_error
            elif name in denied:
                results[name, p.partition_index] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= p.partition_index < len(info.partitions):
                results[name, p.partition_index] = ErrorCode.unknown_topic_or_partition
            else:
                candidates.append(
                    CommitPartition(
                        name,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch if version >= 6 else -1,
                        p.committed_metadata,
                        p.commit_timestamp if version == 1 else -1,
                    )
                )
    if not candidates:
        return _response(b, order, results)
    coordinator = ctx.services.group_coordinator
    try:
        shard = coordinator.shard(req.group_id)
    except KafkaError as e:
        return _response(b, order, results | {(c.topic, c.partition): e.code for c in candidates})
    retention = ms(req.retention_time) if 2 <= version <= 4 else _DEFAULT_RETENTION
    error, errors, records = shard.commit_offsets(
        req.group_id,
        req.member_id if version >= 1 else "",
        req.group_instance_id if version >= 7 else None,
        req.generation_id_or_member_epoch if version >= 1 else -1,
        version,
        candidates,
        expire_timestamp=-1 if retention == _DEFAULT_RETENTION else wall_ms() + retention,
    )
    if error != ErrorCode.none:
        return _response(b, order, results | {(c.topic, c.partition): error for c in candidates})
    results |= errors
    if not records:
        return _response(b, order, results)
    return _stored(b, order, results, errors, shard.store_offsets(req.group_id, records))


async def _stored(
    b: EntityBuilder,
    order: list[Topic],
    results: dict[tuple[str, int], ErrorCode],
    errors: dict[tuple[str, int], ErrorCode],
    stored: Reply[ErrorCode],
) -> Payload:
    code = await stored.wait()
    if code != ErrorCode.none:
        failed = map_append_error(code)
        results = results | {tp: failed for tp, e in errors.items() if e == ErrorCode.none}
    return _response(b, order, results)


def _response(
    b: EntityBuilder, order: list[Topic], results: dict[tuple[str, int], ErrorCode]
) -> Payload:
    return b.OffsetCommitResponse(
        throttle_time=0,
        topics=tuple(
            b.OffsetCommitResponseTopic(
                name=t.name,
                topic_id=t.topic_id,
                partitions=tuple(
                    b.OffsetCommitResponsePartition(
                        partition_index=p, error_code=t.error or results[t.name, p]
                    )
                    for p in t.partitions
                ),
            )
            for t in order
        ),
    )
