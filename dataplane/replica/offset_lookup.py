"""A partition's offset for a ListOffsets timestamp, as Kafka's Partition.fetchOffsetForTimestamp.

The special timestamps (latest, earliest, max timestamp, the tiered-storage ones) and what each
answers; the isolation level sets what a consumer could read: "latest" is the high watermark, or
for read_committed the last stable offset, and a timestamp lookup finds nothing at or past that
bound. ListOffsets and the share-partitions' start offsets (share.auto.offset.reset) use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataplane.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from dataplane.replica.partition import Partition

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -5, -6
READ_COMMITTED = 1


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
