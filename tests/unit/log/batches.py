"""Build real RecordBatch v2 bytes for tests, compressed ones included (cramjam codecs)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import cramjam
from crc32c import crc32c

from dataplane.log import compression
from dataplane.log.batch import HEADER, HEADER_SIZE, LOG_OVERHEAD, Compression
from dataplane.log.records import bytes_field, encode_record, zigzag_varint


def _xerial(data: bytes) -> bytes:
    """Java's snappy framing: magic, version 1, compatible 1, then [length][raw block]s."""
    out = [b"\x82SNAPPY\x00", struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), 32 * 1024):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + 32 * 1024]))
        out += [struct.pack(">i", len(block)), block]
    return b"".join(out)


def compress(codec: Compression, data: bytes, *, xerial: bool = False) -> bytes:
    """As clients send it: Java's snappy framing in 32 KiB blocks, LZ4 in a frame of linked,
    checksummed blocks (cramjam's, not the broker's own framing); the rest as the broker
    writes it."""
    if codec == Compression.SNAPPY and xerial:
        return _xerial(data)
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    return compression.compress(codec, data)


def make_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamps: list[int] | None = None,
    base_offset: int = 0,
    codec: Compression = Compression.NONE,
    xerial: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    extra_attributes: int = 0,
    partition_leader_epoch: int = -1,
    magic: int = 2,
    record_count: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """One batch as a producer sends it (no keys unless given; a None value is a tombstone);
    the keyword overrides build deliberately bad ones."""
    timestamps = timestamps if timestamps is not None else [1_000 + i for i in range(len(values))]
    keys = keys if keys is not None else [None] * len(values)
    base_ts = timestamps[0] if timestamps else -1
    records = b"".join(
        encode_record(i, ts - base_ts, bytes_field(k) + bytes_field(v) + zigzag_varint(0))
        for i, (k, v, ts) in enumerate(zip(keys, values, timestamps, strict=True))
    )
    payload = compress(codec, records, xerial=xerial)
    attributes = int(codec) | extra_attributes
    count = len(values) if record_count is None else record_count
    delta = len(values) - 1 if last_offset_delta is None else last_offset_delta
    max_ts = max(timestamps, default=-1)
    header = bytearray(
        HEADER.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            magic,
            0,
            attributes,
            delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = crc32c(bytes(header[21:]) + payload)
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + payload


def values_of(n: int, size: int = 100, start: int = 0) -> list[bytes]:
    """``n`` distinct record values of ``size`` bytes."""
    return [f"{start + i:08d}".encode().ljust(size, b"x") for i in range(n)]
