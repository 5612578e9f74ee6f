"""Record-level decoding, for ListOffsets by timestamp only.

Produce and fetch never come here. Finding "the first record with timestamp >= T" (or the record
with the largest timestamp, KIP-734) needs each record's timestamp and offset, so this module
decompresses one batch (cramjam) and walks its records' varint headers, skipping keys, values and
headers without copying them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import cramjam

from dataplane.log.batch import HEADER_SIZE, Compression, header_at

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


def record_timestamps(batch: bytes) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of one whole batch, in order.

    Under LogAppendTime every record's timestamp is the batch's maxTimestamp, as Kafka reports it.
    """
    info = header_at(batch, 0)
    data = _decompress(info.compression, batch[HEADER_SIZE : info.size])
    pos = 0
    for _ in range(info.record_count):
        length, pos = _varint(data, pos)
        end = pos + length
        ts_delta, p = _varint(data, pos + 1)  # skip the record's attributes byte
        offset_delta, _ = _varint(data, p)
        if info.is_log_append_time:
            yield info.base_offset + offset_delta, info.max_timestamp
        else:
            yield info.base_offset + offset_delta, info.base_timestamp + ts_delta
        pos = end
