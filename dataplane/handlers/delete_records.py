"""DeleteRecords (21): move partitions' log start offsets, on the leader and then every replica.

As Kafka's ReplicaManager.deleteRecords: each partition's leader moves its log start (offset
-1: to the high watermark; OFFSET_OUT_OF_RANGE beyond it; POLICY_VIOLATION when the topic's
cleanup.policy lacks delete; INVALID_TOPIC_EXCEPTION on an internal topic), then the answer
waits, up to the request's timeout, until the low watermark (the lowest log start of the
replicas on live brokers) reached it: followers take the leader's log start from their fetches
and report theirs in the next one (Kafka's DelayedDeleteRecords; REQUEST_TIMED_OUT otherwise).
ListOffsets(earliest) and fetches then start there; the segments wholly below it are deleted
at the next retention check (log.retention.check.interval.ms), as in Kafka.

Authorization as Kafka's: DELETE on the topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
from kio.static.protocol import Payload

from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.partition import Partition
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

log = logging.getLogger("rafka.delete_records")

if TYPE_CHECKING:
    from kio.schema.delete_records import v0, v1, v2

DeleteRecordsRequest: TypeAlias = (
    "v0.DeleteRecordsRequest | v1.DeleteRecordsRequest | v2.DeleteRecordsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 21
VERSIONS = (0, 2)

INVALID_LOW_WATERMARK = -1

# (partition, offset its replicas' log starts must reach, leader epoch, results, slot)
Wait = tuple[Partition, int, int, list[Any], int]
Alive = Callable[[int], bool]


async def handle(ctx: RequestContext, req: DeleteRecordsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    services = ctx.services
    cache = services.cache
    denied = services.authorizer.denied(
        ctx.conn, AclOperation.DELETE, ResourceType.TOPIC, [t.name for t in req.topics]
    )
    alive = _alive(cache)
    results: dict[str, list[Any]] = {}  # the partitions of a topic named twice go together
    waits: list[Wait] = []
    for topic in req.topics:
        out = results.setdefault(topic.name, [])
        info = cache.topics.get(topic.name)
        for p in topic.partitions:
            index = p.partition_index
            if topic.name in denied:
                out.append(_result(b, index, ErrorCode.topic_authorization_failed))
                continue
            if info is None or not 0 <= index < len(info.partitions):
                out.append(_result(b, index, ErrorCode.unknown_topic_or_partition))
                continue
            if info.internal:
                log.warning(
                    "DeleteRecords from %s refused on %s-%d: records of the internal topic "
                    "cannot be deleted",
                    ctx.conn.peer,
                    topic.name,
                    index,
                )
                out.append(_result(b, index, ErrorCode.invalid_topic_exception))
                continue
            try:
                partition = services.replicas.leader_partition(topic.name, index)
                required = partition.delete_records_on_leader(p.offset)
            except KafkaError as e:
                if e.code != ErrorCode.not_leader_or_follower:  # the client retries at the leader
                    log.warning(
                        "DeleteRecords from %s on %s-%d before offset %d failed: %s",
                        ctx.conn.peer,
                        topic.name,
                        index,
                        p.offset,
                        e,
                    )
                out.append(_result(b, index, e.code))
                continue
            low = partition.low_watermark(alive)
            if low < required:
                waits.append((partition, required, partition.leader_epoch, out, len(out)))
            out.append(_result(b, index, ErrorCode.none, low))
    if not waits:
        return _response(b, results)
    return _await_replicas(b, results, waits, req.timeout.total_seconds(), alive)


def _alive(cache: MetadataCache) -> Alive:
    """Whether a broker is registered and unfenced (Kafka's hasAliveBroker)."""

    def alive(broker_id: int) -> bool:
        broker = cache.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    return alive


async def _await_replicas(
    b: EntityBuilder, results: dict[str, list[Any]], waits: list[Wait], timeout: float, alive: Alive
) -> Payload:
    """Complete once every waiting partition's low watermark reached its deletion point."""
    deadline = anyio.current_time() + timeout
    for partition, required, epoch, out, slot in waits:
        remaining = max(0.0, deadline - anyio.current_time())
        code, low = await partition.wait_for_low_watermark(required, epoch, remaining, alive)
        if code == ErrorCode.request_timed_out:
            log.warning(
                "DeleteRecords on %r: not every replica's log start reached %d within %.1fs "
                "(low watermark %d); a follower is lagging or cannot fetch from the leader",
                partition,
                required,
                timeout,
                low,
            )
        out[slot] = _result(b, partition.index, code, low)
    return _response(b, results)


def _result(b: EntityBuilder, index: int, code: int, low: int = INVALID_LOW_WATERMARK) -> Payload:
    return b.DeleteRecordsPartitionResult(partition_index=index, low_watermark=low, error_code=code)


def _response(b: EntityBuilder, results: dict[str, list[Any]]) -> Payload:
    return b.DeleteRecordsResponse(
        throttle_time=0,
        topics=tuple(
            b.DeleteRecordsTopicResult(name=name, partitions=tuple(parts))
            for name, parts in results.items()
        ),
    )
