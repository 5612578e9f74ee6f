"""Metadata (3): brokers, controller and topic/partition leadership from the local cache.

Unknown topics are created on the fly when the client allows it and auto.create.topics.enable
is on, as Kafka does; the response then already carries the new topic's partitions. An internal
topic's name creates it as its coordinators do (their partitions, replication factor and configs;
not at all with fewer live brokers than its replication factor), as Kafka's
AutoTopicCreationManager does, never as an ordinary topic its coordinators could not use.

Authorization, as Kafka's KafkaApis.handleTopicMetadataRequest: a topic needs DESCRIBE; one
the principal may not describe is left out of an all-topics answer and is
TOPIC_AUTHORIZATION_FAILED when named (nothing says whether it exists). Auto-creation needs
CREATE on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple
from weakref import WeakKeyDictionary

from dataplane.handlers.context import Request
from dataplane.metadata_cache import MetadataCache, TopicInfo
from dataplane.protocol.encoders import (
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
    encode_metadata_topic,
)
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.primitives import AUTHORIZED_OPERATIONS_OMITTED
from dataplane.request_context import BrokerServices, RequestContext, Response
from dataplane.security.authorizer import cluster_operations
from dataplane.topic_admin import INTERNAL_TOPICS, NewTopic, valid_topic_name
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 3
VERSIONS = (0, 13)

_REFUSED = ErrorCode.topic_authorization_failed

Wanted = list[tuple[str | None, Any]]  # (name, topic id) as asked


class _Encoded(NamedTuple):
    info: TopicInfo  # the cache's entry it was encoded from (entries are replaced on change)
    live: frozenset[int]  # the live brokers then (they decide the offline replicas)
    body: bytes


class _TopicEncodings:
    """Each topic's encoded part of a Metadata response, by version, kept until the topic or
    the set of live brokers changes: encoding 5,000 partitions on every all-topics request
    cost tens of milliseconds of the event loop."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, int], _Encoded] = {}

    def get(self, cache: MetadataCache, info: TopicInfo, version: int) -> bytes:
        live = frozenset(b.id for b in cache.brokers.values() if not b.fenced)
        key = (info.name, version)
        entry = self._entries.get(key)
        if entry is None or entry.info is not info or entry.live != live:
            if len(self._entries) > 4 * len(cache.topics) + 64:
                self._forget_stale(cache)
            entry = _Encoded(info, live, encode_metadata_topic(version, _described(info, live)))
            self._entries[key] = entry
        return entry.body

    def _forget_stale(self, cache: MetadataCache) -> None:
        """Drop the encodings of deleted or changed topics."""
        self._entries = {
            key: e for key, e in self._entries.items() if cache.topics.get(key[0]) is e.info
        }


_ENCODINGS: WeakKeyDictionary[MetadataCache, _TopicEncodings] = WeakKeyDictionary()


async def handle(ctx: RequestContext, req: Request) -> Response:
    services, version = ctx.services, ctx.header.api_version
    cache = services.cache
    all_topics = req.topics is None or (version == 0 and not req.topics)
    if all_topics:
        wanted: Wanted = [(name, None) for name in sorted(cache.topics)]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in req.topics]
    refused: list[MetadataTopic] = []
    if services.authorizer.enabled:
        wanted, refused = _describable(ctx, wanted, all_topics)

    missing = [n for n, _ in wanted if n is not None and n not in cache.topics]
    if (
        missing
        and getattr(req, "allow_auto_topic_creation", True)
        and services.config.auto_create_topics_enable
    ):
        denied = _create_denied(ctx, missing)
        if denied:
            wanted = [(n, i) for n, i in wanted if n not in denied]
            refused += [_refused(n) for n in dict.fromkeys(missing) if n in denied]
        await _auto_create(
            services, [n for n in dict.fromkeys(missing) if n not in denied and valid_topic_name(n)]
        )

    with_ops = getattr(req, "include_topic_authorized_operations", False)
    topics = [_topic(ctx, name, topic_id, with_ops) for name, topic_id in wanted]
    topics += refused
    live = cache.live_brokers()
    return encode_metadata_response(
        version,
        [
            MetadataBroker(b.id, *b.endpoints.get(ctx.conn.listener, (b.host, b.port)), b.rack)
            for b in live
        ],
        topics,
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id(),
        cluster_authorized_operations=cluster_operations(
            ctx.services.authorizer,
            ctx.conn,
            getattr(req, "include_cluster_authorized_operations", False),
        ),
    )


async def _auto_create(services: BrokerServices, names: list[str]) -> None:
    internal = {
        t.name: t
        for t in (services.offsets_topic, services.transactions_topic, services.share_state_topic)
    }
    for name in names:
        if (topic := internal.get(name)) is not None:
            # too few live brokers (logged): the topic stays unknown, as in Kafka
            with contextlib.suppress(KafkaError):
                await topic.create()
    await services.topic_admin.create_topics(
        [NewTopic(n, -1, -1) for n in names if n not in internal], validate_only=False
    )


def _describable(
    ctx: RequestContext, wanted: Wanted, all_topics: bool
) -> tuple[Wanted, list[MetadataTopic]]:
    """The topics the principal may describe, and the refusals of the others it named."""
    cache, authorizer = ctx.services.cache, ctx.services.authorizer
    allowed: Wanted = []
    refused: list[MetadataTopic] = []
    for name, topic_id in wanted:
        by_id = cache.topics_by_id.get(topic_id.bytes) if name is None and topic_id else None
        resolved = by_id.name if by_id is not None else name
        if resolved is None or authorizer.authorize(
            ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, resolved, log_denied=not all_topics
        ):
            allowed.append((name, topic_id))
        elif not all_topics:  # by id: the id is not secret, the name is
            refused.append(_refused(name, topic_id.bytes if by_id is not None else bytes(16)))
    return allowed, refused


def _create_denied(ctx: RequestContext, missing: list[str]) -> frozenset[str]:
    """The missing topics the principal may not have auto-created: without CREATE on the
    cluster, those it may not CREATE."""
    authorizer = ctx.services.authorizer
    if not authorizer.enabled or authorizer.authorize(
        ctx.conn, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ):
        return frozenset()
    return authorizer.denied(ctx.conn, AclOperation.CREATE, ResourceType.TOPIC, missing)


def _refused(name: str | None, topic_id: bytes = bytes(16)) -> MetadataTopic:
    return MetadataTopic(_REFUSED, name, topic_id, False, [], AUTHORIZED_OPERATIONS_OMITTED)


def _topic(
    ctx: RequestContext, name: str | None, topic_id: Any, with_ops: bool
) -> MetadataTopic | bytes:
    cache = ctx.services.cache
    info: TopicInfo | None = cache.topics.get(name) if name is not None else None
    if info is None and topic_id is not None:
        info = cache.topics_by_id.get(topic_id.bytes)
    known = info.name if info is not None else name
    ops = AUTHORIZED_OPERATIONS_OMITTED
    if with_ops and known is not None:
        ops = ctx.services.authorizer.authorized_operations(ctx.conn, ResourceType.TOPIC, known)
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
        internal = name in INTERNAL_TOPICS  # Kafka's Topic.isInternal, also for an unknown one
        topic_id_bytes = topic_id.bytes if topic_id else bytes(16)
        return MetadataTopic(code, name, topic_id_bytes, internal, [], ops)
    if not with_ops:
        encodings = _ENCODINGS.get(cache)
        if encodings is None:
            encodings = _ENCODINGS[cache] = _TopicEncodings()
        return encodings.get(cache, info, ctx.header.api_version)
    return _described(info, frozenset(b.id for b in cache.live_brokers()), ops)


def _described(
    info: TopicInfo, live: frozenset[int], ops: int = AUTHORIZED_OPERATIONS_OMITTED
) -> MetadataTopic:
    """A known topic as Metadata describes it, given the live brokers."""
    partitions = [
        MetadataPartition(
            ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available,
            p.index,
            p.leader,
            p.leader_epoch,
            p.replicas,
            p.isr,
            [r for r in p.replicas if r not in live],
        )
        for p in info.partitions
    ]
    return MetadataTopic(ErrorCode.none, info.name, info.topic_id, info.internal, partitions, ops)
