"""OffsetFetch (9) v0-v10: a group's committed offsets (-1 where none); null topics = every
committed partition (v2+); several groups per request (v8+); topics by id instead of name
(v10, KIP-848): an unknown id answers UNKNOWN_TOPIC_ID for its partitions, and "every committed
partition" leaves out the topics that no longer exist (no id names them), as Kafka does.

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

from typing import Any, NamedTuple

from dataplane.coordinator.offsets import FetchedPartition
from dataplane.handlers.context import Request
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 9
VERSIONS = (0, 10)

_TOPIC_ID_VERSION = 10  # v10+: topics by id (KIP-848)


class Wanted(NamedTuple):
    """A topic asked for: its name (None: no topic has the id it was asked by), its id as the
    request gave it (v10+), and its partitions."""

    name: str | None
    topic_id: bytes
    partitions: list[int]


class Answer(NamedTuple):
    """A topic of the answer, with the id v10 names it by."""

    name: str
    topic_id: bytes
    partitions: tuple[FetchedPartition, ...]


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    require_stable = version >= 7 and req.require_stable
    if version < 8:
        wanted = _wanted(ctx, version, req.topics)
        error, answers = _fetch(ctx, version, req.group_id, wanted, None, -1, require_stable)
        if version < 2:  # no request-level error: every partition carries it
            if error != ErrorCode.none:
                answers = [_failed(w, error) for w in wanted or []]
            return b.OffsetFetchResponse(topics=_topics(b, version, answers))
        return b.OffsetFetchResponse(
            throttle_time=0,
            topics=_topics(b, version, answers if error == ErrorCode.none else []),
            error_code=error,
        )
    groups = []
    for group in req.groups:
        error, answers = _fetch(
            ctx,
            version,
            group.group_id,
            _wanted(ctx, version, group.topics),
            group.member_id if version >= 9 else None,
            group.member_epoch if version >= 9 else -1,
            require_stable,
        )
        groups.append(
            b.OffsetFetchResponseGroup(
                group_id=group.group_id,
                topics=_topics(b, version, answers if error == ErrorCode.none else []),
                error_code=error,
            )
        )
    return b.OffsetFetchResponse(throttle_time=0, groups=tuple(groups))


def _wanted(ctx: RequestContext, version: int, topics: Any) -> list[Wanted] | None:
    if topics is None:
        return None
    if version < _TOPIC_ID_VERSION:
        return [Wanted(t.name, bytes(16), list(t.partition_indexes)) for t in topics]
    cache = ctx.services.cache
    return [
        Wanted(
            cache.topic_name(t.topic_id),
            t.topic_id.bytes if t.topic_id else bytes(16),
            list(t.partition_indexes),
        )
        for t in topics
    ]


def _failed(wanted: Wanted, error: ErrorCode) -> Answer:
    partitions = tuple(FetchedPartition(p, None, error) for p in wanted.partitions)
    return Answer(wanted.name or "", wanted.topic_id, partitions)


def _fetch(
    ctx: RequestContext,
    version: int,
    group_id: str,
    wanted: list[Wanted] | None,
    member_id: str | None,
    member_epoch: int,
    require_stable: bool,
) -> tuple[ErrorCode, list[Answer]]:
    """The group's error, and the answer's topics: those read from the group, then, in request
    order, those refused (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID), as Kafka orders them."""
    authorizer = ctx.services.authorizer
    if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    try:
        shard = ctx.services.group_coordinator.shard(group_id)
    except KafkaError as e:
        return e.code, []
    topic, describe = ResourceType.TOPIC, AclOperation.DESCRIBE
    cache = ctx.services.cache
    if wanted is None:
        error, fetched = shard.fetch_offsets(
            group_id, None, member_id, member_epoch, require_stable
        )
        hidden = authorizer.denied(
            ctx.conn, describe, topic, (t.topic for t in fetched), log_denied=False
        )
        answers = [
            Answer(t.topic, cache.topic_id(t.topic), t.partitions)
            for t in fetched
            if t.topic not in hidden
        ]
        if version >= _TOPIC_ID_VERSION:  # a deleted topic has no id to be named by
            answers = [a for a in answers if a.topic_id != bytes(16)]
        return error, answers
    denied = authorizer.denied(ctx.conn, describe, topic, (w.name for w in wanted if w.name))
    allowed = [
        (w.name, w.partitions) for w in wanted if w.name is not None and w.name not in denied
    ]
    error, fetched = shard.fetch_offsets(group_id, allowed, member_id, member_epoch, require_stable)
    answers = [Answer(t.topic, cache.topic_id(t.topic), t.partitions) for t in fetched]
    for w in wanted:
        if w.name is None:
            answers.append(_failed(w, ErrorCode.unknown_topic_id))
        elif w.name in denied:
            answers.append(_failed(w, ErrorCode.topic_authorization_failed))
    return error, answers


def _topics(b: EntityBuilder, version: int, answers: list[Answer]) -> tuple:
    topic_cls = b.OffsetFetchResponseTopics if version >= 8 else b.OffsetFetchResponseTopic
    partition_cls = (
        b.OffsetFetchResponsePartitions if version >= 8 else b.OffsetFetchResponsePartition
    )

    def ids(t: Answer) -> dict[str, bytes]:
        """v0-v7's topic struct has no topic id in any version (the builder refuses it)."""
        return {"topic_id": t.topic_id} if version >= 8 else {}

    return tuple(
        topic_cls(
            name=t.name,
            **ids(t),
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
        for t in answers
    )
