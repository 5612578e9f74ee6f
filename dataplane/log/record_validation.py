"""Kafka's LogValidator checks on the records of produced batches, refused with the records at
fault (KIP-467 ``record_errors``): a key on every record of a compacted topic, and under
CreateTime a timestamp within message.timestamp.before.max.ms before and
message.timestamp.after.max.ms after the broker's clock (KIP-937).

Kafka checks every record's timestamp; the produce hot path here decodes no record and checks
each batch's header instead. Every client writes baseTimestamp as its first record's timestamp
and maxTimestamp as the largest, so the header shows the newest record and the first one. A
batch whose header is out of range is refused (INVALID_TIMESTAMP), and only then decoded, to list
its records at fault as Kafka does. What the header cannot show is a record older than the first
(a negative timestamp delta: a producer that set out-of-order timestamps): before.max.ms misses
it, unless the topic is compacted (its records are all decoded anyway, and checked each). A batch
whose header is out of range while its records are not (a header Kafka would rewrite) is refused
all the same: the log's time index and retention go by the header.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from dataplane.log.batch import NO_TIMESTAMP, BatchInfo, RecordError
from dataplane.log.errors import ErrorCode
from dataplane.log.records import raw_records


class RecordChecks(NamedTuple):
    """What `check_records` checks on one partition's produced batches."""

    partition: str  # topic-partition, as Kafka's messages name it
    compacted: bool
    timestamps: tuple[int, int] | None  # [earliest, latest] accepted, None: not checked
    inflation_limit: int  # compression.inflation_limit of the topic


def headers_in_range(infos: list[BatchInfo], bounds: tuple[int, int] | None) -> bool:
    """Whether every batch's baseTimestamp and maxTimestamp lie within ``bounds`` (None: not
    checked): the produce hot path's check, with nothing to decode when it holds."""
    if bounds is None:
        return True
    earliest, latest = bounds
    for info in infos:  # a loop, not all(): one batch is the common case
        if not (
            earliest <= info.base_timestamp <= latest and earliest <= info.max_timestamp <= latest
        ):
            return False
    return True


def check_records(
    records: bytes | bytearray | memoryview, infos: list[BatchInfo], checks: RecordChecks
) -> None:
    """Raise `RecordError` for the first batch of ``records`` (headers ``infos``) holding a
    record Kafka refuses, with the records at fault; decodes the batches of a compacted topic
    and those whose header timestamps are out of range, no other."""
    bounds = checks.timestamps
    view = memoryview(records)
    for info in infos:
        header_fault = None if bounds is None else _header_fault(info, *bounds)
        if not (checks.compacted or header_fault):
            continue
        batch = view[info.position : info.position + info.size]
        errors = list(_record_errors(batch, info, checks))
        if errors:
            raise _refusal(errors)
        if header_fault:
            raise RecordError(ErrorCode.invalid_timestamp, header_fault)


def _header_fault(info: BatchInfo, earliest: int, latest: int) -> str | None:
    """Why the batch's header timestamps are out of [earliest, latest], or None."""
    base, newest = info.base_timestamp, info.max_timestamp
    for name, timestamp in (("baseTimestamp", base), ("maxTimestamp", newest)):
        if timestamp != NO_TIMESTAMP and not earliest <= timestamp <= latest:
            return (
                f"Batch {name} {timestamp} is out of range. The timestamp should be within "
                f"[{earliest}, {latest}]"
            )
    return None


def _record_errors(
    batch: memoryview, info: BatchInfo, checks: RecordChecks
) -> Iterator[tuple[int, ErrorCode, str]]:
    """(index in the batch, error, message) of each record at fault, in Kafka's words
    (LogValidator.validateKey, validateTimestamp). Every record is read: the last one checks
    that the batch holds exactly its declared count."""
    bounds = checks.timestamps
    for index, raw in enumerate(raw_records(batch, info, checks.inflation_limit)):
        if checks.compacted and raw.key is None:
            yield (
                index,
                ErrorCode.invalid_record,
                "Compacted topic cannot accept message without key in topic partition "
                f"{checks.partition}",
            )
        elif bounds is not None:
            timestamp = info.base_timestamp + raw.timestamp_delta
            if timestamp != NO_TIMESTAMP and not bounds[0] <= timestamp <= bounds[1]:
                yield (
                    index,
                    ErrorCode.invalid_timestamp,
                    f"Timestamp {timestamp} of message with offset "
                    f"{info.base_offset + raw.offset_delta} is out of range. The timestamp "
                    f"should be within [{bounds[0]}, {bounds[1]}]",
                )


def _refusal(errors: list[tuple[int, ErrorCode, str]]) -> RecordError:
    """Kafka's processRecordErrors: INVALID_TIMESTAMP if any timestamp is at fault, else
    INVALID_RECORD, with its summary as the partition's error message."""
    record_errors = tuple((index, message) for index, _, message in errors)
    if any(code == ErrorCode.invalid_timestamp for _, code, _ in errors):
        return RecordError(
            ErrorCode.invalid_timestamp,
            "One or more records have been rejected due to invalid timestamp",
            record_errors,
        )
    shown = ", ".join(
        f"RecordError(batchIndex={index}, message='{message}')"
        for index, message in record_errors[:3]
    )
    return RecordError(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        record_errors,
    )
