"""RecordBatch v2 headers: validation, offset assignment and header-only parsing.

Like Kafka's broker, the log never decodes records on the produce or fetch path: a batch is checked
through its 61-byte header and its CRC-32C, then stored and served byte for byte, compressed or not.
The fields the broker rewrites (base offset, partition leader epoch) lie outside the CRC, so
assigning them costs two small writes per batch. Only LogAppendTime touches covered bytes
(attributes, maxTimestamp) and so recomputes the batch CRC, still without decoding a record.

Kafka's LogValidator walks every record of a produced batch; here only what the header shows is
checked on the hot path, since walking records is per-record Python work. The record count must
match lastOffsetDelta (two header fields), but whether the records really number recordCount is
checked only where the broker decodes them anyway (records.py: compacted topics, timestamp
lookups and refusals, markers, the cleaner, coordinator loads), with Kafka's INVALID_RECORD.
Even an uncompressed batch would need one varint read per record to count them. A producer that
miscounts (its CRC vouches that the bytes are its own) harms only the consumers of its batch,
which refuse it as they would from Kafka's log. Timestamps are checked on baseTimestamp and
maxTimestamp (record_validation.py says which records that covers).

Header layout (big-endian)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32

``batchLength`` counts the bytes after itself; the CRC covers ``attributes`` to the end.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from crc32c import crc32c

from dataplane.log.errors import ErrorCode, LogError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes that batchLength does not count
MAGIC = 2

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
_LENGTH_POS = 8
_EPOCH_POS = 12
_MAGIC_POS = 16
_CRC_POS = 17
_ATTRIBUTES_POS = 21  # start of the bytes covered by the CRC
_MAX_TIMESTAMP_POS = 35
_LEGACY_MIN_LENGTH = 14  # smallest v0 message: Kafka's bound before it reads the magic byte

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40  # KIP-534: baseTimestamp holds when the batch's tombstones may go

NO_TIMESTAMP = -1


class RecordError(LogError):
    """Records refused on append; ``code`` is the Kafka error for the produce response.
    ``record_errors``: the records at fault, as (index in their batch, why) (KIP-467), when the
    refusal is theirs (Kafka's RecordValidationException)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str | None = None,
        record_errors: tuple[tuple[int, str], ...] = (),
    ) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


class Compression(IntEnum):
    """Codec ids of the attributes' low three bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class BatchInfo(NamedTuple):
    """What the log and the broker need from one batch header; no record is decoded for it."""

    position: int  # byte position of the batch in the buffer or segment it was read from
    size: int  # whole batch, log overhead included
    base_offset: int
    last_offset_delta: int
    partition_leader_epoch: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        """Codec id (see `Compression`); not checked on data already in the log."""
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def delete_horizon_ms(self) -> int | None:
        """Set by the log cleaner on batches it kept tombstones in (KIP-534), else None."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None


def header_at(buf: bytes | bytearray | memoryview, pos: int) -> BatchInfo:
    """The header fields of the batch at ``pos``, unchecked: for bytes already in the log."""
    (base, length, epoch, _magic, _crc, attrs, delta, base_ts, max_ts, pid, pepoch, seq, count) = (
        HEADER.unpack_from(buf, pos)
    )
    size = length + LOG_OVERHEAD
    return BatchInfo(pos, size, base, delta, epoch, attrs, base_ts, max_ts, pid, pepoch, seq, count)


def encode_batch(
    payload: bytes,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
) -> bytes:
    """A whole v2 batch around ``payload`` (its records, compressed as ``attributes`` say),
    with its length and CRC."""
    header = bytearray(
        HEADER.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
    )
    crc = crc32c(payload, crc32c(memoryview(header)[_ATTRIBUTES_POS:]))
    _UINT32.pack_into(header, _CRC_POS, crc)
    return bytes(header) + payload


def batch_size_at(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Whole size of the batch at ``pos`` read from its length field alone (needs 12 bytes)."""
    length: int = _INT32.unpack_from(buf, pos + _LENGTH_POS)[0]
    return length + LOG_OVERHEAD


def _framed_size(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Size of the batch at ``pos`` if Kafka's batch iterator (ByteBufferLogInputStream) would
    give one there: a sane length and magic, the whole batch present. None otherwise (a torn
    tail, or a frame the log's own checks refuse)."""
    left = len(buf) - pos
    if left <= _MAGIC_POS:
        return None
    length = _INT32.unpack_from(buf, pos + _LENGTH_POS)[0]
    if length < _LEGACY_MIN_LENGTH or buf[pos + _MAGIC_POS] > MAGIC:
        return None
    size: int = length + LOG_OVERHEAD
    return size if size <= left else None


def holds_several_batches(buf: bytes | bytearray | memoryview) -> bool:
    """Whether a partition's records hold a whole batch after the first one, as Kafka frames
    them (ProduceRequest.validateRecords refuses that): two length fields read, no more."""
    first = _framed_size(buf, 0)
    return first is not None and first < len(buf) and _framed_size(buf, first) is not None


def check_batch(buf: memoryview, pos: int, max_batch_bytes: int | None = None) -> BatchInfo:
    """The batch at ``pos`` after checking its framing, magic, size and CRC, in Kafka's order.

    Raises `RecordError`: CORRUPT_MESSAGE for a truncated or inconsistent length, an unknown
    magic or a bad CRC; INVALID_RECORD for magic 0/1 (Kafka's ProduceRequest.validateRecords:
    Produce v3+ carries magic 2 batches only); MESSAGE_TOO_LARGE above the limit.
    """
    left = len(buf) - pos
    if left <= _MAGIC_POS:
        raise RecordError(ErrorCode.corrupt_message, f"truncated batch at byte {pos}: {left} bytes")
    length = _INT32.unpack_from(buf, pos + _LENGTH_POS)[0]
    if length < _LEGACY_MIN_LENGTH:
        raise RecordError(ErrorCode.corrupt_message, f"batch at byte {pos}: bad length {length}")
    magic = buf[pos + _MAGIC_POS]
    if magic in (0, 1):
        raise RecordError(
            ErrorCode.invalid_record,
            f"batch at byte {pos}: magic {magic}; Produce v3+ carries only magic 2 batches",
        )
    if magic != MAGIC:
        raise RecordError(ErrorCode.corrupt_message, f"Invalid magic found in record: {magic}")
    size = length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise RecordError(ErrorCode.corrupt_message, f"batch at byte {pos}: length {length}")
    if size > left:
        raise RecordError(
            ErrorCode.corrupt_message, f"truncated batch at byte {pos}: {size} bytes, {left} left"
        )
    if max_batch_bytes is not None and size > max_batch_bytes:
        raise RecordError(
            ErrorCode.message_too_large,
            f"batch of {size} bytes exceeds max.message.bytes={max_batch_bytes}",
        )
    stored = _UINT32.unpack_from(buf, pos + _CRC_POS)[0]
    if crc32c(buf[pos + _ATTRIBUTES_POS : pos + size]) != stored:
        raise RecordError(ErrorCode.corrupt_message, f"batch at byte {pos}: CRC mismatch")
    return header_at(buf, pos)


def _check_client_batch(info: BatchInfo) -> None:
    """Kafka's LogValidator checks on batches written by producers (not by replication)."""
    if info.record_count < 1 or info.last_offset_delta != info.record_count - 1:
        raise RecordError(
            ErrorCode.invalid_record,
            f"record count {info.record_count} does not match lastOffsetDelta "
            f"{info.last_offset_delta}",
        )
    if info.is_control:
        raise RecordError(ErrorCode.invalid_record, "clients may not write control batches")
    if info.producer_id >= 0 and info.base_sequence < 0:
        raise RecordError(
            ErrorCode.invalid_record,
            f"invalid sequence {info.base_sequence} for producer id {info.producer_id}",
        )
    if info.compression > Compression.ZSTD:
        raise RecordError(ErrorCode.invalid_record, f"unknown compression codec {info.compression}")
    if info.is_log_append_time:
        raise RecordError(
            ErrorCode.invalid_timestamp, "producers may not set the LogAppendTime timestamp type"
        )


def validate(
    records: bytes | bytearray | memoryview,
    max_batch_bytes: int | None,
    *,
    from_client: bool = True,
) -> list[BatchInfo]:
    """Check a records field made of whole v2 batches; return their headers.

    ``from_client`` adds the checks Kafka applies to producer data: a consistent record count, no
    control batch, a sequence for idempotent batches, no LogAppendTime set by the producer, and
    at least one batch. Replicated data (``from_client=False``) only gets framing and CRC checks,
    and ``max_batch_bytes=None`` skips the size limit as Kafka does for followers.
    """
    view = memoryview(records)
    infos: list[BatchInfo] = []
    pos, end = 0, len(view)
    while pos < end:
        info = check_batch(view, pos, max_batch_bytes)
        if from_client:
            _check_client_batch(info)
        infos.append(info)
        pos += info.size
    if from_client and not infos:
        raise RecordError(ErrorCode.invalid_record, "produce request without a record batch")
    return infos


def assign_offsets(
    buf: bytearray | memoryview,
    infos: list[BatchInfo],
    first_offset: int,
    leader_epoch: int,
    log_append_time: int | None,
) -> list[BatchInfo]:
    """Write offsets and the leader epoch into each header of ``buf`` (in place); with
    ``log_append_time`` also stamp LogAppendTime and recompute the CRC. Returns updated headers."""
    out: list[BatchInfo] = []
    offset = first_offset
    for info in infos:
        pos = info.position
        _INT64.pack_into(buf, pos, offset)
        _INT32.pack_into(buf, pos + _EPOCH_POS, leader_epoch)
        if log_append_time is not None:
            attributes = info.attributes | ATTR_LOG_APPEND_TIME
            _INT16.pack_into(buf, pos + _ATTRIBUTES_POS, attributes)
            _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_POS, log_append_time)
            crc = crc32c(memoryview(buf)[pos + _ATTRIBUTES_POS : pos + info.size])
            _UINT32.pack_into(buf, pos + _CRC_POS, crc)
            info = info._replace(attributes=attributes, max_timestamp=log_append_time)
        out.append(info._replace(base_offset=offset, partition_leader_epoch=leader_epoch))
        offset += info.last_offset_delta + 1
    return out
