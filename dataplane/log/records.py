"""Record-level encoding and decoding, off the produce and fetch paths.

Produce and fetch never come here. ListOffsets by timestamp needs each record's timestamp and
offset (`record_timestamps` walks the varint headers without copying keys and values); the
coordinators read and write whole records of their internal topics (`decode_records`,
`build_batch`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import cramjam
from crc32c import crc32c

from dataplane.log.batch import HEADER, HEADER_SIZE, LOG_OVERHEAD, Compression, header_at

# Java producers frame snappy the xerial way: this header, then [length i32][raw snappy block]...
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_BLOCK_LENGTH = struct.Struct(">i")


def _unxerial(data: bytes) -> bytes:
    blocks = []
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += _BLOCK_LENGTH.size
        blocks.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(blocks)


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec == Compression.SNAPPY:
        if data.startswith(_XERIAL_MAGIC):
            return _unxerial(data)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


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


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _bytes_at(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _varint(data, pos)
    if length < 0:
        return None, pos
    return data[pos : pos + length], pos + length


def decode_records(batch: bytes) -> Iterator[Record]:
    """Every record of one whole batch (decompressed), with absolute offsets and timestamps."""
    info = header_at(batch, 0)
    data = _decompress(info.compression, batch[HEADER_SIZE : info.size])
    pos = 0
    for _ in range(info.record_count):
        length, pos = _varint(data, pos)
        end = pos + length
        ts_delta, p = _varint(data, pos + 1)  # skip the record's attributes byte
        offset_delta, p = _varint(data, p)
        key, p = _bytes_at(data, p)
        value, p = _bytes_at(data, p)
        count, p = _varint(data, p)
        headers = []
        for _ in range(count):
            name, p = _bytes_at(data, p)
            header_value, p = _bytes_at(data, p)
            headers.append(((name or b"").decode(), header_value))
        timestamp = (
            info.max_timestamp if info.is_log_append_time else info.base_timestamp + ts_delta
        )
        yield Record(info.base_offset + offset_delta, timestamp, key, value, tuple(headers))
        pos = end


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
        zigzag_varint(len(r)) + r
        for r in (
            b"\x00"
            + zigzag_varint(0)
            + zigzag_varint(i)
            + bytes_field(key)
            + bytes_field(value)
            + zigzag_varint(0)
            for i, (key, value) in enumerate(records)
        )
    )
    header = bytearray(
        HEADER.pack(
            0,
            HEADER_SIZE - LOG_OVERHEAD + len(body),
            -1,
            2,
            0,
            attributes,
            len(records) - 1,
            timestamp,
            timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    struct.pack_into(">I", header, 17, crc32c(bytes(header[21:]) + body))
    return bytes(header) + body


def record_timestamps(batch: bytes) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of one whole batch, in order. Under LogAppendTime
    every record's timestamp is the batch's maxTimestamp, as Kafka reports it."""
    for record in decode_records(batch):
        yield record.offset, record.timestamp
