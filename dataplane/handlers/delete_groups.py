"""DeleteGroups (42) v0-v3: delete empty groups (NON_EMPTY_GROUP otherwise) with their
offsets: tombstones appended to `__consumer_offsets`, answered once replicated; the group
leaves the meta service's registry and its GROUP configs are removed. A share group's
share-partition state is deleted first (share coordinator), as Kafka does: a failure there keeps
the group. DELETE on each group is needed (GROUP_AUTHORIZATION_FAILED). v3 (Kafka 4.4) gives
each failed group a message saying why (`_why`), where Kafka sets one only for its streams
plugin's failures."""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from kio.static.protocol import Payload

from dataplane.coordinator.base import map_append_error
from dataplane.coordinator.shard import GroupShard
from dataplane.coordinator.share.adapter import ShareGroupAdapter
from dataplane.coordinator.share.offsets import delete_group_state
from dataplane.handlers.context import Request
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType
from meta.client import MetaError
from meta.resource_configs import GROUP, ResourceConfigAlteration

log = logging.getLogger("rafka.coordinator")

API_KEY = 42
VERSIONS = (0, 3)


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
        try:
            shard = coordinator.shard(group_id)
        except KafkaError as e:
            results[group_id] = e.code
            continue
        by_shard.setdefault(shard.partition_index, (shard, []))[1].append(group_id)
    for shard, group_ids in by_shard.values():
        for group_id in list(group_ids):
            group = shard.groups.get(group_id)
            if isinstance(group, ShareGroupAdapter) and group.validate_delete() == ErrorCode.none:
                error = await delete_group_state(ctx.services.share_persister.delete, group)
                if error != ErrorCode.none:
                    results[group_id] = error
                    group_ids.remove(group_id)
    writes: list[tuple[list[str], Awaitable[None]]] = []
    for shard, group_ids in by_shard.values():
        if not group_ids:
            continue
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
    return _replicated(ctx, b, order, results, writes)


async def _replicated(
    ctx: RequestContext,
    b: EntityBuilder,
    order: list[str],
    results: dict[str, ErrorCode],
    writes: list[tuple[list[str], Awaitable[None]]],
) -> Payload:
    coordinator = ctx.services.group_coordinator
    for deleted, waiter in writes:
        try:
            await waiter
        except KafkaError as e:
            results |= dict.fromkeys(deleted, map_append_error(e.code))
            continue
        coordinator.registry.remove(deleted)
        await _delete_configs(ctx, deleted)
    return _response(b, order, results)


async def _delete_configs(ctx: RequestContext, group_ids: list[str]) -> None:
    """Remove the GROUP configs of deleted groups (a new group of the id starts afresh)."""
    cache, meta = ctx.services.cache, ctx.services.meta
    with_configs = [g for g in group_ids if cache.resource_configs(GROUP, g)]
    if not with_configs:
        return
    try:
        await meta.alter_resource_configs(
            [ResourceConfigAlteration(GROUP, g, replace=True) for g in with_configs]
        )
    except MetaError as e:
        log.warning(
            "the configs of deleted group(s) %s could not be removed (%s): remove them with "
            "IncrementalAlterConfigs (DELETE) on the GROUP resource",
            ", ".join(with_configs),
            e,
        )


def _response(b: EntityBuilder, order: list[str], results: dict[str, ErrorCode]) -> Payload:
    return b.DeleteGroupsResponse(
        throttle_time=0,
        results=tuple(
            b.DeletableGroupResult(
                group_id=group_id,
                error_code=results[group_id],
                error_message=_why(group_id, results[group_id]),
            )
            for group_id in order
        ),
    )


def _why(group_id: str, code: ErrorCode) -> str | None:
    """The message of a group's error (v3+); None for success."""
    if code == ErrorCode.none:
        return None
    if code == ErrorCode.group_id_not_found:
        return f"Group {group_id} not found."
    if code == ErrorCode.non_empty_group:
        return f"Group {group_id} is not empty: stop its members, then delete it."
    if code == ErrorCode.group_authorization_failed:
        return f"Not authorized to DELETE group {group_id}."
    return f"Group {group_id} was not deleted: {code.name.upper()}."
