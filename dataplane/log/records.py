"""Record-level encoding and decoding, off the fetch path.

Fetch never comes here, nor produce but to a compacted topic (every record needs a key) or a
batch refused for its timestamps (its records at fault are listed): record_validation.py.
ListOffsets by timestamp needs each record's timestamp and offset (`record_timestamps`); the
coordinators read and write whole records of their internal topics (`decode_records`,
`build_batch`); the log cleaner rewrites batches keeping some of their records as they were
encoded (`raw_records`, `encode_record`).

Decoding checks what Kafka's DefaultRecordBatch and DefaultRecord iterators check, with their
messages (INVALID_RECORD): each record within the inflated bytes and its fields within the
record, and exactly ``recordCount`` records (none missing, none left over). The records inflate
within a bound (compression.py), so a small batch cannot make the broker allocate gigabytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from dataplane.log.batch import (
    HEADER_SIZE,
    BatchInfo,
    RecordError,
    encode_batch,
    header_at,
)
from dataplane.log.compression import MAX_INFLATED_BYTES, inflate
from dataplane.log.errors import ErrorCode

_MAX_VARINT_SHIFT = 63  # a varlong has at most 10 bytes (Kafka: "Varlong is too long")


class _Malformed(ValueError):
    """A record field that does not parse (Kafka's "Found invalid record structure")."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's signed varint and varlong) at ``pos``: (value, next position)."""
    raw = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > _MAX_VARINT_SHIFT:
            raise _Malformed("varint too long")


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RawRecord(NamedTuple):
    """One record of a batch as encoded, with what the log cleaner decides on."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    is_tombstone: bool  # a null value
    data: bytes  # the batch's records, decompressed
    body_start: int  # where the key field starts in ``data``
    value_start: int
    end: int

    @property
    def body(self) -> bytes:
        """Key, value and headers as encoded: what `encode_record` puts back."""
        return self.data[self.body_start : self.end]


def _bytes_at(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _varint(data, pos)
    if length < 0:
        return None, pos
    return data[pos : pos + length], pos + length


def _invalid(info: BatchInfo, message: str) -> RecordError:
    return RecordError(ErrorCode.invalid_record, f"batch at offset {info.base_offset}: {message}")


def raw_records(
    batch: bytes | memoryview, info: BatchInfo | None = None, limit: int = MAX_INFLATED_BYTES
) -> Iterator[RawRecord]:
    """Every record of one whole batch (inflated to at most ``limit`` bytes), keys decoded,
    values left in place. ``info``: the batch's header, if the caller has it. Raises
    `RecordError` (INVALID_RECORD, CORRUPT_MESSAGE) for records that do not decode."""
    if info is None:
        info = header_at(batch, 0)
    data = inflate(info.compression, batch[HEADER_SIZE : info.size], limit)
    size = len(data)
    pos = 0
    try:
        for _ in range(info.record_count):
            length, pos = _varint(data, pos)
            end = pos + length
            if length < 0 or end > size:
                raise _invalid(
                    info,
                    f"Invalid record size: expected {length} bytes in record payload, but "
                    f"instead the buffer has only {size - pos} remaining bytes.",
                )
            ts_delta, p = _varint(data, pos + 1)  # skip the record's attributes byte
            offset_delta, body = _varint(data, p)
            key, value_pos = _bytes_at(data, body)
            value_length, value_data = _varint(data, value_pos)
            if max(value_data, value_data + value_length) > end:
                raise _Malformed("key or value past the record's end")
            yield RawRecord(
                offset_delta, ts_delta, key, value_length < 0, data, body, value_pos, end
            )
            pos = end
    except IndexError:
        raise _invalid(info, "Incorrect declared batch size, premature EOF reached") from None
    except _Malformed as e:
        raise _invalid(info, f"Found invalid record structure ({e})") from None
    if pos != size:
        raise _invalid(info, "Incorrect declared batch size, records still remaining in file")


def decode_records(batch: bytes, limit: int = MAX_INFLATED_BYTES) -> Iterator[Record]:
    """Every record of one whole batch (inflated to at most ``limit`` bytes), with absolute
    offsets and timestamps. Raises `RecordError` for records that do not decode."""
    info = header_at(batch, 0)
    for raw in raw_records(batch, info, limit):
        try:
            value, headers = _value_and_headers(raw)
        except (IndexError, _Malformed) as e:
            raise _invalid(info, f"Found invalid record structure ({e})") from None
        timestamp = (
            info.max_timestamp
            if info.is_log_append_time
            else info.base_timestamp + raw.timestamp_delta
        )
        yield Record(info.base_offset + raw.offset_delta, timestamp, raw.key, value, headers)


def _value_and_headers(
    raw: RawRecord,
) -> tuple[bytes | None, tuple[tuple[str, bytes | None], ...]]:
    data = raw.data
    value, p = _bytes_at(data, raw.value_start)
    count, p = _varint(data, p)
    if not 0 <= count <= raw.end - p:  # Kafka's "invalid number of record headers"
        raise _Malformed(f"{count} headers")
    headers = []
    for _ in range(count):
        name, p = _bytes_at(data, p)
        header_value, p = _bytes_at(data, p)
        # as Java's String(bytes, UTF_8): malformed bytes become U+FFFD, never an error
        headers.append(((name or b"").decode("utf-8", "replace"), header_value))
    if p != raw.end:
        raise _Malformed("its headers do not end where the record does")
    return value, tuple(headers)


def zigzag_varint(value: int) -> bytes:
    """Kafka's signed varint/varlong encoding."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def bytes_field(value: bytes | None) -> bytes:
    """A record's nullable bytes: varint length (-1: null), then the bytes."""
    return zigzag_varint(-1) if value is None else zigzag_varint(len(value)) + value


def encode_record(offset_delta: int, timestamp_delta: int, body: bytes) -> bytes:
    """One record: its length, attributes (none), deltas, then ``body`` (key, value, headers)."""
    record = b"\x00" + zigzag_varint(timestamp_delta) + zigzag_varint(offset_delta) + body
    return zigzag_varint(len(record)) + record


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    timestamp: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """An uncompressed RecordBatch v2 of (key, value) records, all stamped `timestamp`, as a
    producer would send it (base offset 0; the log assigns offsets)."""
    body = b"".join(
        encode_record(i, 0, bytes_field(key) + bytes_field(value) + zigzag_varint(0))
        for i, (key, value) in enumerate(records)
    )
    return encode_batch(
        body,
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
    )


def record_timestamps(batch: bytes, limit: int = MAX_INFLATED_BYTES) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of one whole batch, in order. Under LogAppendTime
    every record's timestamp is the batch's maxTimestamp, as Kafka reports it."""
    for record in decode_records(batch, limit):
        yield record.offset, record.timestamp
