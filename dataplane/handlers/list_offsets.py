"""ListOffsets (2): earliest, latest, by timestamp and max timestamp (KIP-734); DESCRIBE on
each topic, as Kafka checks (TOPIC_AUTHORIZATION_FAILED).

The isolation level (v2+) sets what a consumer could read, as Kafka's
Partition.fetchOffsetForTimestamp does: "latest" is the high watermark, or for read_committed the
last stable offset, and a timestamp lookup finds nothing at or past that bound.

The tiered-storage queries answer as Kafka's UnifiedLog does for a topic without remote storage
(none has it here): earliest-local (-4, v8+) is the log start, last-tiered (-5, v9+, KIP-1005)
and earliest-pending-upload (-6, v11+, KIP-1023) are offset -1 with leader epoch -1. A special
timestamp below its version, or one Kafka does not know, is UNSUPPORTED_VERSION for that
partition (Kafka's ReplicaManager.isListOffsetsTimestampUnsupported). v10's timeout bounds
Kafka's asynchronous reads from remote storage (KIP-1075): every lookup here is local.

A partition the request names twice is answered once, INVALID_REQUEST, and each topic once
(Kafka's ReplicaManager.fetchOffset answers by partition), the refused topics last. The lookup
itself is the replica layer's (replica/offset_lookup.py): share groups use it too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.protocol import Payload

from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.offset_lookup import (
    EARLIEST,
    EARLIEST_LOCAL,
    EARLIEST_PENDING_UPLOAD,
    LATEST,
    LATEST_TIERED,
    MAX_TIMESTAMP,
    lookup,
)
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.list_offsets import v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11

KioListOffsetsRequest: TypeAlias = (
    "v1.ListOffsetsRequest | v2.ListOffsetsRequest | v3.ListOffsetsRequest"
    " | v4.ListOffsetsRequest | v5.ListOffsetsRequest | v6.ListOffsetsRequest"
    " | v7.ListOffsetsRequest | v8.ListOffsetsRequest | v9.ListOffsetsRequest"
    " | v10.ListOffsetsRequest | v11.ListOffsetsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 2
VERSIONS = (1, 11)

# The first version that may ask for each special timestamp (Kafka's
# ReplicaManager.timestampMinSupportedVersion).
_MIN_VERSION = {
    EARLIEST: 1,
    LATEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}


def timestamp_unsupported(timestamp: int, version: int) -> bool:
    """Whether a request of this version may not ask for this (special) timestamp."""
    return timestamp < 0 and version < _MIN_VERSION.get(timestamp, version + 1)


async def handle(ctx: RequestContext, req: KioListOffsetsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    denied = ctx.services.authorizer.denied(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    duplicated = _duplicated(req)
    isolation_level = getattr(req, "isolation_level", 0)  # v2+
    # Kafka's answer: one entry per topic and partition asked for (a partition named twice
    # is answered once, INVALID_REQUEST), then the topics refused, as the request lists them
    answered: dict[str, dict[int, object]] = {}
    refused = []
    for topic in req.topics:
        if topic.name in denied:
            parts = tuple(
                _error(b, p, ErrorCode.topic_authorization_failed) for p in topic.partitions
            )
            refused.append(b.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
            continue
        parts_of = answered.setdefault(topic.name, {})
        for p in topic.partitions:
            if (topic.name, p.partition_index) in duplicated:
                parts_of[p.partition_index] = _error(b, p, ErrorCode.invalid_request)
            else:
                parts_of[p.partition_index] = _answer(ctx, b, topic.name, p, isolation_level)
    topics = [
        b.ListOffsetsTopicResponse(name=name, partitions=tuple(parts.values()))
        for name, parts in answered.items()
    ]
    return b.ListOffsetsResponse(throttle_time=0, topics=(*topics, *refused))


def _duplicated(req: KioListOffsetsRequest) -> set[tuple[str, int]]:
    """The partitions the request names more than once (Kafka's
    ListOffsetsRequest.duplicatePartitions)."""
    seen: set[tuple[str, int]] = set()
    twice: set[tuple[str, int]] = set()
    for topic in req.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            (twice if key in seen else seen).add(key)
    return twice


def _answer(
    ctx: RequestContext, b: EntityBuilder, topic: str, p: Any, isolation_level: int
) -> Payload:
    """One partition's offset, or its error."""
    version = ctx.header.api_version
    try:
        if timestamp_unsupported(p.timestamp, version):
            raise KafkaError(ErrorCode.unsupported_version)
        partition = ctx.services.replicas.leader_partition(
            topic, p.partition_index, getattr(p, "current_leader_epoch", -1)
        )
        offset, ts = lookup(partition, p.timestamp, isolation_level)
        epoch = partition.log.epoch_for_offset(offset) if offset >= 0 else -1
    except KafkaError as e:
        return _error(b, p, e.code)
    return b.ListOffsetsPartitionResponse(
        partition_index=p.partition_index,
        error_code=ErrorCode.none,
        timestamp=ts,
        offset=offset,
        leader_epoch=epoch,
    )


def _error(b: EntityBuilder, p: Any, code: ErrorCode) -> Payload:
    return b.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code)
