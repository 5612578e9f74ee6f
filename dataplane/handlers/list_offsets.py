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
Kafka's asynchronous reads from remote storage (KIP-1075): every lookup here is local."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from dataplane.replica.partition import Partition

API_KEY = 2
VERSIONS = (1, 11)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -5, -6
READ_COMMITTED = 1

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


def lookup(partition: Partition, timestamp: int, isolation_level: int = 0) -> tuple[int, int]:
    """(offset, timestamp) for a ListOffsets query; (-1, -1) when no record matches."""
    log = partition.log
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1  # nothing is in remote storage
    readable = (
        partition.last_stable_offset
        if isolation_level == READ_COMMITTED
        else partition.high_watermark
    )
    if timestamp == LATEST:
        return readable, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp()
    elif timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= readable:
        return -1, -1
    return found


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    replicas = ctx.services.replicas
    denied = ctx.services.authorizer.denied(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    isolation_level = getattr(req, "isolation_level", 0)  # v2+
    version = ctx.header.api_version
    topics = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            try:
                if topic.name in denied:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                if timestamp_unsupported(p.timestamp, version):
                    raise KafkaError(ErrorCode.unsupported_version)
                partition = replicas.leader_partition(
                    topic.name, p.partition_index, getattr(p, "current_leader_epoch", -1)
                )
                offset, ts = lookup(partition, p.timestamp, isolation_level)
                epoch = partition.log.epoch_for_offset(offset) if offset >= 0 else -1
                parts.append(
                    b.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.none,
                        timestamp=ts,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                )
            except KafkaError as e:
                parts.append(
                    b.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=e.code
                    )
                )
        topics.append(b.ListOffsetsTopicResponse(name=topic.name, partitions=tuple(parts)))
    return b.ListOffsetsResponse(throttle_time=0, topics=tuple(topics))
