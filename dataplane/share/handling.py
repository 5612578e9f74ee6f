"""What ShareFetch and ShareAcknowledge share: resolving topic ids, READ on the topics, the
acknowledgements of a request (checked, applied, persisted), and the current leader and node
endpoints a client needs after NOT_LEADER_OR_FOLLOWER (KIP-951)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from dataplane.protocol.encoders import NodeEndpoint
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.share.partition_state import AckBatch, check_ack_batches
from dataplane.share.wire import UNSET_LEADER
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from dataplane.metadata_cache import MetadataCache
    from dataplane.request_context import RequestContext
    from dataplane.share.manager import SharePartitionManager

TopicPartition = tuple[bytes, int]
Result = tuple[ErrorCode, str | None]


class Topics:
    """The request's topic ids resolved to names, READ checked once per topic."""

    def __init__(self, ctx: RequestContext, topic_ids: Iterable[bytes]) -> None:
        cache = ctx.services.cache
        self.names: dict[bytes, str] = {}
        self.errors: dict[bytes, ErrorCode] = {}
        for topic_id in set(topic_ids):
            info = cache.topics_by_id.get(topic_id)
            if info is None:
                self.errors[topic_id] = ErrorCode.unknown_topic_id
            elif not ctx.services.authorizer.authorize(
                ctx.conn, AclOperation.READ, ResourceType.TOPIC, info.name
            ):
                self.errors[topic_id] = ErrorCode.topic_authorization_failed
            else:
                self.names[topic_id] = info.name


MAX_MEMBER_ID = 36  # Kafka's isMemberIdValid


def identify(ctx: RequestContext, req: Any) -> tuple[str, str]:
    """Kafka's first checks of both APIs, in its order: a group id, READ on the group, a
    member id of 1 to 36 characters; (group id, member id), else raises the KafkaError."""
    if req.group_id is None:
        raise KafkaError(ErrorCode.invalid_request, "Invalid group id in the request.")
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.READ, ResourceType.GROUP, req.group_id
    ):
        raise KafkaError(ErrorCode.group_authorization_failed)
    if not req.member_id or len(req.member_id) > MAX_MEMBER_ID:
        raise KafkaError(ErrorCode.invalid_request, "Invalid member id in the request.")
    return req.group_id, req.member_id


def ack_batches(partition: Any) -> list[AckBatch]:
    return [
        AckBatch(b.first_offset, b.last_offset, b.acknowledge_types)
        for b in partition.acknowledgement_batches
    ]


async def acknowledge(
    manager: SharePartitionManager,
    topics: Topics,
    group_id: str,
    member_id: str,
    acks: dict[TopicPartition, list[AckBatch]],
    max_type: int,
) -> dict[TopicPartition, Result]:
    """Check, apply and persist a request's acknowledgements, the partitions in parallel."""
    results: dict[TopicPartition, Result] = {}

    async def one(tp: TopicPartition, batches: list[AckBatch]) -> None:
        results[tp] = await _acknowledge_one(
            manager, topics, group_id, member_id, tp, batches, max_type
        )

    async with anyio.create_task_group() as tg:
        for tp, batches in acks.items():
            tg.start_soon(one, tp, batches)
    return results


async def _acknowledge_one(
    manager: SharePartitionManager,
    topics: Topics,
    group_id: str,
    member_id: str,
    tp: TopicPartition,
    batches: list[AckBatch],
    max_type: int,
) -> Result:
    topic_id, index = tp
    if topic_id in topics.errors:
        return topics.errors[topic_id], None
    problem = check_ack_batches(batches, max_type)
    if problem is not None:
        return ErrorCode.invalid_request, problem
    try:
        sp = manager.loaded(group_id, topics.names[topic_id], topic_id, index)
    except KafkaError as e:
        return e.code, e.message
    return await manager.acknowledge(sp, member_id, batches)


LEADERSHIP_ERRORS = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)
"""The errors after which an answer names the partition's current leader (KIP-951)."""


def leader_after(
    ctx: RequestContext, topics: Topics | None, tp: TopicPartition, code: ErrorCode
) -> tuple[int, int]:
    """A partition's current_leader in an answer of `code`: where the client should go after
    a leadership error, else unset."""
    if code not in LEADERSHIP_ERRORS:
        return UNSET_LEADER
    topic = topics.names.get(tp[0]) if topics is not None else None
    return current_leader(ctx.services.cache, topic, tp[1])


def current_leader(cache: MetadataCache, topic: str | None, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) as the metadata cache knows them; (-1, -1) if unknown."""
    info = cache.topics.get(topic) if topic is not None else None
    if info is None or not 0 <= index < len(info.partitions):
        return -1, -1
    p = info.partitions[index]
    return p.leader, p.leader_epoch


def leader_endpoints(ctx: RequestContext, leaders: Sequence[int]) -> list[NodeEndpoint]:
    """The endpoints, on the client's listener, of the leaders named in the response."""
    out = []
    for node_id in sorted(set(leaders)):
        broker = ctx.services.cache.brokers.get(node_id)
        if broker is None or node_id < 0:
            continue
        host, port = broker.endpoints.get(ctx.conn.listener, (broker.host, broker.port))
        out.append(NodeEndpoint(node_id, host, port, broker.rack))
    return out
