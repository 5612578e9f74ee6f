"""DeleteGroups (42) v0-v2: delete empty groups (NON_EMPTY_GROUP otherwise) with their
offsets: tombstones appended to `__consumer_offsets`, answered once replicated; the group
leaves the meta service's registry. DELETE on each group is needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from dataplane.coordinator.base import map_append_error
from dataplane.coordinator.shard import GroupShard
from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from dataplane.coordinator.service import GroupCoordinator

API_KEY = 42
VERSIONS = (0, 2)


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    coordinator = ctx.services.group_coordinator
    order = list(dict.fromkeys(req.groups_names))
    results: dict[str, ErrorCode] = {}
    by_shard: dict[int, tuple[GroupShard, list[str]]] = {}
    denied = ctx.services.authorizer.denied(
        ctx.conn, AclOperation.DELETE, ResourceType.GROUP, order
    )
    for group_id in order:
        if group_id in denied:
            results[group_id] = ErrorCode.group_authorization_failed
            continue
        if not group_id:
            results[group_id] = ErrorCode.invalid_group_id
            continue
        try:
            shard = coordinator.shard(group_id)
        except KafkaError as e:
            results[group_id] = e.code
            continue
        by_shard.setdefault(shard.partition_index, (shard, []))[1].append(group_id)
    writes: list[tuple[list[str], Awaitable[None]]] = []
    for shard, group_ids in by_shard.values():
        errors, records = shard.delete_groups(group_ids)
        results |= errors
        deleted = [g for g in group_ids if errors[g] == ErrorCode.none]
        if not records:
            continue
        try:
            writes.append((deleted, coordinator.append(group_ids[0], records)))
        except KafkaError as e:
            results |= dict.fromkeys(deleted, map_append_error(e.code))
    if not writes:
        return _response(b, order, results)
    return _replicated(b, coordinator, order, results, writes)


async def _replicated(
    b: EntityBuilder,
    coordinator: GroupCoordinator,
    order: list[str],
    results: dict[str, ErrorCode],
    writes: list[tuple[list[str], Awaitable[None]]],
) -> Any:
    for deleted, waiter in writes:
        try:
            await waiter
        except KafkaError as e:
            results |= dict.fromkeys(deleted, map_append_error(e.code))
            continue
        coordinator.registry.remove(deleted)
    return _response(b, order, results)


def _response(b: EntityBuilder, order: list[str], results: dict[str, ErrorCode]) -> Any:
    return b.DeleteGroupsResponse(
        throttle_time=0,
        results=tuple(
            b.DeletableGroupResult(group_id=group_id, error_code=results[group_id])
            for group_id in order
        ),
    )
