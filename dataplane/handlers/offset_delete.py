"""OffsetDelete (47) v0: delete a group's committed offsets of some partitions
(GROUP_SUBSCRIBED_TO_TOPIC while a member of the group subscribes to the topic). As in Kafka,
DELETE on the group (GROUP_AUTHORIZATION_FAILED) and READ on each topic
(TOPIC_AUTHORIZATION_FAILED) are needed."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeAlias

from kio.static.protocol import Payload

from dataplane.coordinator.base import map_append_error
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.offset_delete import v0

OffsetDeleteRequest: TypeAlias = "v0.OffsetDeleteRequest"
"""The kio classes of the versions served."""

API_KEY = 47
VERSIONS = (0, 0)

Results = dict[tuple[str, int], ErrorCode]


async def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    authorizer = ctx.services.authorizer
    if not authorizer.authorize(ctx.conn, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return _error(b, ErrorCode.group_authorization_failed)
    if not req.group_id:
        return _error(b, ErrorCode.invalid_group_id)
    coordinator = ctx.services.group_coordinator
    try:
        shard = coordinator.shard(req.group_id)
    except KafkaError as e:
        return _error(b, e.code)
    requested: list[tuple[str, list[int]]] = [
        (t.name, [p.partition_index for p in t.partitions]) for t in req.topics
    ]
    denied = authorizer.denied(
        ctx.conn, AclOperation.READ, ResourceType.TOPIC, (n for n, _ in requested)
    )
    topics = ctx.services.cache.topics
    results: Results = {}
    known: list[tuple[str, list[int]]] = []
    for name, parts in requested:
        info = topics.get(name)
        if name in denied or info is None:
            early = (
                ErrorCode.topic_authorization_failed
                if name in denied
                else ErrorCode.unknown_topic_or_partition
            )
            results |= {(name, p): early for p in parts}
            continue
        valid = [p for p in parts if 0 <= p < len(info.partitions)]
        results |= {
            (name, p): ErrorCode.unknown_topic_or_partition for p in parts if p not in valid
        }
        if valid:
            known.append((name, valid))
    order = _kafka_order(requested, results)
    error, errors, records = shard.delete_offsets(req.group_id, known)
    if error != ErrorCode.none:
        return _error(b, error)
    results |= errors
    if not records:
        return _response(b, order, results)
    try:
        waiter = coordinator.append(req.group_id, records)
    except KafkaError as e:
        return _error(b, map_append_error(e.code))
    return _replicated(b, order, results, waiter)


async def _replicated(
    b: EntityBuilder, order: list[tuple[str, list[int]]], results: Results, waiter: Awaitable[None]
) -> Payload:
    try:
        await waiter
    except KafkaError as e:
        return _error(b, map_append_error(e.code))
    return _response(b, order, results)


def _kafka_order(
    requested: list[tuple[str, list[int]]], early: Results
) -> list[tuple[str, list[int]]]:
    """The topics and partitions as Kafka's response lists them: those refused before the
    coordinator (no READ, unknown) first, then the coordinator's answers, each in request
    order (clients find their partitions by name; this keeps the answers identical)."""
    order: dict[str, list[int]] = {}
    for refused in (True, False):
        for name, parts in requested:
            for p in parts:
                if ((name, p) in early) == refused:
                    order.setdefault(name, []).append(p)
    return list(order.items())


def _error(b: EntityBuilder, code: ErrorCode) -> Payload:
    return b.OffsetDeleteResponse(error_code=code, throttle_time=0, topics=())


def _response(b: EntityBuilder, order: list[tuple[str, list[int]]], results: Results) -> Payload:
    return b.OffsetDeleteResponse(
        error_code=ErrorCode.none,
        throttle_time=0,
        topics=tuple(
            b.OffsetDeleteResponseTopic(
                name=name,
                partitions=tuple(
                    b.OffsetDeleteResponsePartition(partition_index=p, error_code=results[name, p])
                    for p in parts
                ),
            )
            for name, parts in order
        ),
    )
