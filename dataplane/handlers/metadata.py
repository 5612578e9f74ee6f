"""Metadata (3): brokers, controller and topic/partition leadership from the local cache.

Unknown topics are created on the fly when the client allows it and auto.create.topics.enable
is on, as Kafka does; the response then already carries the new topic's partitions.
"""

from __future__ import annotations

from typing import Any

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.metadata_cache import TopicInfo
from dataplane.protocol.encoders import (
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
)
from dataplane.protocol.errors import ErrorCode
from dataplane.topic_admin import NewTopic, valid_topic_name

API_KEY = 3
VERSIONS = (0, 13)

_UNKNOWN_OPS = -2147483648  # "authorized operations not requested"
# Without ACLs every topic operation is allowed: READ WRITE CREATE DELETE ALTER DESCRIBE
# DESCRIBE_CONFIGS ALTER_CONFIGS (bit = Kafka's AclOperation code).
_ALL_TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


async def handle(ctx: RequestContext, req: Request) -> Response:
    services, version = ctx.services, ctx.header.api_version
    cache = services.cache
    if req.topics is None or (version == 0 and not req.topics):
        wanted: list[tuple[str | None, Any]] = [(name, None) for name in sorted(cache.topics)]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in req.topics]

    missing = [n for n, _ in wanted if n is not None and n not in cache.topics]
    if (
        missing
        and getattr(req, "allow_auto_topic_creation", True)
        and services.config.auto_create_topics_enable
    ):
        await services.topic_admin.create_topics(
            [NewTopic(n, -1, -1) for n in dict.fromkeys(missing) if valid_topic_name(n)],
            validate_only=False,
        )

    ops = (
        _ALL_TOPIC_OPS
        if getattr(req, "include_topic_authorized_operations", False)
        else _UNKNOWN_OPS
    )
    topics = [_topic(cache, name, topic_id, ops) for name, topic_id in wanted]
    live = cache.live_brokers()
    return encode_metadata_response(
        version,
        [MetadataBroker(b.id, b.host, b.port, b.rack) for b in live],
        topics,
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id(),
    )


def _topic(cache: Any, name: str | None, topic_id: Any, ops: int) -> MetadataTopic:
    info: TopicInfo | None = cache.topics.get(name) if name is not None else None
    if info is None and topic_id is not None:
        info = cache.topics_by_id.get(topic_id.bytes)
    if info is None:
        code = (
            ErrorCode.invalid_topic_exception
            if name is not None and not valid_topic_name(name)
            else (
                ErrorCode.unknown_topic_or_partition
                if name is not None
                else ErrorCode.unknown_topic_id
            )
        )
        return MetadataTopic(code, name, topic_id.bytes if topic_id else bytes(16), False, [], ops)
    live = {b.id for b in cache.live_brokers()}
    partitions = [
        MetadataPartition(
            ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available,
            p.index,
            p.leader,
            p.leader_epoch,
            list(p.replicas),
            list(p.isr),
            [r for r in p.replicas if r not in live],
        )
        for p in info.partitions
    ]
    return MetadataTopic(ErrorCode.none, info.name, info.topic_id, info.internal, partitions, ops)
