"""A topic's compression.type applied to what its leader appends, as Kafka's LogValidator does.

With ``producer`` (the default) batches are stored as the producer compressed them, and nothing
here runs: the append path checks one attribute of the config. With a codec (``gzip``,
``snappy``, ``lz4``, ``zstd``) or ``uncompressed``, a batch in another codec is decoded and
built again in the topic's (Kafka's buildRecordsAndAssignOffsets): the same records (keys,
values, headers, timestamps), their offset deltas renumbered from 0, the first record's
timestamp as the batch's base timestamp, and the producer id, epoch, base sequence and
transactional flag kept, so idempotence and transactions see the batch they were sent; a new
CRC follows. A batch already in the topic's codec is stored as it came. Control batches are
stored as written (Kafka compresses no control batch written uncompressed). Snappy is written
in the framing Java's producers use (xerial), as Kafka's broker writes it.

The rebuilt batch must fit max.message.bytes too: a batch that grows past it (recompressed
with a weaker codec, or stored uncompressed) is MESSAGE_TOO_LARGE, in Kafka's words.
"""

from __future__ import annotations

from dataplane.log.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_DELETE_HORIZON,
    BatchInfo,
    Compression,
    RecordError,
    encode_batch,
    header_at,
)
from dataplane.log.compression import compress
from dataplane.log.errors import ErrorCode
from dataplane.log.records import encode_record, raw_records

PRODUCER = "producer"
CODECS: dict[str, Compression] = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
"""compression.type -> the codec batches are stored in (``producer``: as they come)."""


def needs_recompression(infos: list[BatchInfo], codec: int) -> bool:
    """Whether a batch of ``infos`` is to be built again in ``codec``."""
    return any(_rebuilt(info, codec) for info in infos)


def _rebuilt(info: BatchInfo, codec: int) -> bool:
    """A batch in another codec, with records, and not a control batch."""
    return info.compression != codec and not info.is_control and info.record_count > 0


def recompress(
    records: bytes | bytearray | memoryview,
    infos: list[BatchInfo],
    codec: int,
    inflation_limit: int,
    max_batch_bytes: int,
    partition: str,
) -> tuple[bytearray, list[BatchInfo]]:
    """``records`` (whose batch headers are ``infos``) with every batch not in ``codec`` built
    again in it (module docstring), and the headers of the result. Raises `RecordError` for
    records that do not decode, and MESSAGE_TOO_LARGE for a rebuilt batch over
    ``max_batch_bytes``."""
    view = memoryview(records)
    out = bytearray()
    for info in infos:
        batch = view[info.position : info.position + info.size]
        if not _rebuilt(info, codec):
            out += batch
            continue
        rebuilt = _rebuild(batch, info, codec, inflation_limit)
        if len(rebuilt) > max_batch_bytes:
            raise RecordError(
                ErrorCode.message_too_large,
                f"Message batch size is {len(rebuilt)} bytes in append to partition "
                f"{partition} which exceeds the maximum configured size of {max_batch_bytes}.",
            )
        out += rebuilt
    found, pos = [], 0
    while pos < len(out):
        found.append(header_at(out, pos))
        pos += found[-1].size
    return out, found


def _rebuild(batch: memoryview, info: BatchInfo, codec: int, inflation_limit: int) -> bytes:
    """One batch built again in ``codec``, as Kafka's MemoryRecordsBuilder writes it."""
    records = list(raw_records(batch, info, inflation_limit))
    timestamps = [info.base_timestamp + r.timestamp_delta for r in records]
    base_timestamp = timestamps[0]
    body = b"".join(
        encode_record(delta, timestamp - base_timestamp, r.body)
        for delta, (r, timestamp) in enumerate(zip(records, timestamps, strict=True))
    )
    attributes = info.attributes & ~(ATTR_COMPRESSION_MASK | ATTR_DELETE_HORIZON) | codec
    return encode_batch(
        compress(codec, body, xerial=True),
        base_offset=info.base_offset,
        partition_leader_epoch=info.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max(timestamps),
        producer_id=info.producer_id,
        producer_epoch=info.producer_epoch,
        base_sequence=info.base_sequence,
        record_count=len(records),
    )
