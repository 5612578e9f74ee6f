"""TxnOffsetCommit (28) v0-v6: a transactional producer commits a consumer group's offsets as
part of its transaction (`sendOffsetsToTransaction`). They are written to the group's
`__consumer_offsets` partition at once but become the group's committed offsets only when the
transaction commits (and are dropped if it aborts): see `GroupCoordinator.txn_offset_commit`.

Checks, in Kafka's order: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for every partition), READ on the group (GROUP_AUTHORIZATION_FAILED), an empty group id
(INVALID_GROUP_ID); then per topic READ (TOPIC_AUTHORIZATION_FAILED) and existence
(UNKNOWN_TOPIC_OR_PARTITION). The rest go to the group's coordinator: KIP-890 verification that
the group's partition is in the transaction (v5, transaction version 2, adds it; earlier
versions only check that AddOffsetsToTxn added it), then the member checks of v3+ (generation,
member id, instance id: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and
OFFSET_METADATA_TOO_LARGE per partition. v0-v1 clients get COORDINATOR_NOT_AVAILABLE for
COORDINATOR_LOAD_IN_PROGRESS, which they do not know (KAFKA-7296). v6 (KIP-1319) names
topics by id, in the request and the answer: an id no topic has is UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from dataplane.coordinator.offsets import CommitPartition
from dataplane.handlers.context import Request
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 28
VERSIONS = (0, 6)

_MEMBER_CHECKS_VERSION = 3  # v3+ carry the member id, generation and instance id (KIP-447)
_GENERIC_ERROR_VERSION = 4  # v4+ clients know TRANSACTION_ABORTABLE (KIP-890)
_TV2_VERSION = 5  # transaction version 2 (KIP-890 part 2): the coordinator adds the partition
_TOPIC_IDS_VERSION = 6  # topics by id (KIP-1319)


@dataclass(frozen=True, slots=True)
class _Topic:
    """A requested topic: its name (None for an id no topic has) and, from v6, its id."""

    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[int]


def _topics(ctx: RequestContext, req: Request, version: int) -> list[_Topic]:
    if version < _TOPIC_IDS_VERSION:
        return [_Topic(t.name, None, [p.partition_index for p in t.partitions]) for t in req.topics]
    by_id = ctx.services.cache.topics_by_id
    out = []
    for t in req.topics:
        info = by_id.get(t.topic_id.bytes) if t.topic_id is not None else None
        name = info.name if info is not None else None
        out.append(_Topic(name, t.topic_id, [p.partition_index for p in t.partitions]))
    return out


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    order = _topics(ctx, req, version)
    authorizer = ctx.services.authorizer
    request_error = ErrorCode.none
    if not authorizer.authorize(
        ctx.conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
    ):
        request_error = ErrorCode.transactional_id_authorization_failed
    elif not authorizer.authorize(ctx.conn, AclOperation.READ, ResourceType.GROUP, req.group_id):
        request_error = ErrorCode.group_authorization_failed
    elif not req.group_id:
        request_error = ErrorCode.invalid_group_id
    results: dict[tuple[str, int], ErrorCode] = {}
    if request_error != ErrorCode.none:
        return _response(b, version, order, results, request_error)
    denied = authorizer.denied(
        ctx.conn, AclOperation.READ, ResourceType.TOPIC, (t.name for t in order if t.name)
    )
    topics = ctx.services.cache.topics
    candidates = []
    for topic, wanted in zip(order, req.topics, strict=True):
        if topic.name is None:
            continue  # an unknown topic id
        info = topics.get(topic.name)
        for p in wanted.partitions:
            if topic.name in denied:
                results[topic.name, p.partition_index] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= p.partition_index < len(info.partitions):
                results[topic.name, p.partition_index] = ErrorCode.unknown_topic_or_partition
            else:
                candidates.append(
                    CommitPartition(
                        topic.name,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch if version >= 2 else -1,
                        p.committed_metadata,
                    )
                )
    if candidates:
        verifier = ctx.services.txn_verifier

        async def verify(topic: str, partition: int) -> ErrorCode:
            code = await verifier.verify(
                req.transactional_id,
                req.producer_id,
                req.producer_epoch,
                topic,
                partition,
                add=version >= _TV2_VERSION,
            )
            if code == ErrorCode.transaction_abortable and version < _GENERIC_ERROR_VERSION:
                return ErrorCode.invalid_txn_state  # older clients do not know it
            return code

        member_checks = version >= _MEMBER_CHECKS_VERSION
        results |= await ctx.services.group_coordinator.txn_offset_commit(
            req.group_id,
            req.producer_id,
            req.producer_epoch,
            req.member_id if member_checks else "",
            req.group_instance_id if member_checks else None,
            _generation(req) if member_checks else -1,
            candidates,
            verify=verify,
        )
    return _response(b, version, order, results)


def _generation(req: Request) -> int:
    """The member's generation: v6 is Kafka 4.4's schema, which names it for KIP-848's member
    epoch too; kio's v3-v5 name it generation_id."""
    if hasattr(req, "generation_id_or_member_epoch"):
        return int(req.generation_id_or_member_epoch)
    return int(req.generation_id)


def _response(
    b: EntityBuilder,
    version: int,
    order: list[_Topic],
    results: dict[tuple[str, int], ErrorCode],
    request_error: ErrorCode = ErrorCode.none,
) -> Response:
    def code(topic: _Topic, partition: int) -> ErrorCode:
        if request_error != ErrorCode.none:
            return request_error
        if topic.name is None:
            return ErrorCode.unknown_topic_id
        error = results[topic.name, partition]
        if version < 2 and error == ErrorCode.coordinator_load_in_progress:
            return ErrorCode.coordinator_not_available
        return error

    return b.TxnOffsetCommitResponse(
        throttle_time=0,
        topics=tuple(
            b.TxnOffsetCommitResponseTopic(
                name=topic.name,  # up to v5
                topic_id=topic.topic_id,  # v6
                partitions=tuple(
                    b.TxnOffsetCommitResponsePartition(partition_index=p, error_code=code(topic, p))
                    for p in topic.partitions
                ),
            )
            for topic in order
        ),
    )
