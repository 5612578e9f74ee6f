"""Record-level encoding and decoding, off the fetch path.

Fetch never comes here, nor produce but to a compacted topic (every record needs a key,
`first_keyless_record`). ListOffsets by timestamp needs each record's timestamp and offset
(`record_timestamps`); the coordinators read and write whole records of their internal topics
(`decode_records`, `build_batch`); the log cleaner rewrites batches keeping some of their records
as they were encoded (`raw_records`, `encode_record`, `compress`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import cramjam

from dataplane.log.batch import HEADER_SIZE, BatchInfo, Compression, encode_batch, header_at

# Java producers frame snappy the xerial way: this header, then [length i32][raw snappy block]...
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_XERIAL_VERSIONS = struct.pack(">ii", 1, 1)  # version, compatible version
_BLOCK_LENGTH = struct.Struct(">i")
# Kafka's LZ4 framing (KafkaLZ4BlockOutputStream): the LZ4 frame magic, FLG (version 1,
# independent blocks, no checksums), BD (64 KiB blocks) and the descriptor's checksum byte.
_LZ4_FRAME_HEADER = bytes.fromhex("04224d18604082")
_LZ4_BLOCK = 64 << 10
_LZ4_UNCOMPRESSED = 0x80000000  # high bit of a block's length: stored as is
_LZ4_BLOCK_LENGTH = struct.Struct("<I")


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


def decompress(codec: int, data: bytes) -> bytes:
    """A payload compressed with one of Kafka's codecs (``codec`` = CompressionType id) in any
    framing clients use; also for pushed client telemetry (KIP-714)."""
    return _decompress(codec, data)


def _xerial(data: bytes) -> bytes:
    """One block in Java's snappy framing (what Java producers send)."""
    block = bytes(cramjam.snappy.compress_raw(data))
    return _XERIAL_MAGIC + _XERIAL_VERSIONS + _BLOCK_LENGTH.pack(len(block)) + block


def _lz4_frame(data: bytes) -> bytes:
    """An LZ4 frame as Kafka's own producer writes it, which every client reads (cramjam's
    frame links its blocks, which Kafka's reader does not support)."""
    out = [_LZ4_FRAME_HEADER]
    for start in range(0, len(data), _LZ4_BLOCK):
        raw = data[start : start + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):
            out += [_LZ4_BLOCK_LENGTH.pack(len(raw) | _LZ4_UNCOMPRESSED), raw]
        else:
            out += [_LZ4_BLOCK_LENGTH.pack(len(block)), block]
    out.append(_LZ4_BLOCK_LENGTH.pack(0))  # end mark
    return b"".join(out)


def is_xerial(payload: bytes | memoryview) -> bool:
    """Whether a snappy payload uses Java's framing (to write it back the same way)."""
    return bytes(payload[: len(_XERIAL_MAGIC)]) == _XERIAL_MAGIC


def compress(codec: int, data: bytes, *, xerial: bool = False) -> bytes:
    """Records compressed with ``codec`` in the framing clients read; ``xerial`` for snappy in
    Java's framing rather than a raw block."""
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        return _xerial(data) if xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec == Compression.LZ4:
        return _lz4_frame(data)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
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


def raw_records(batch: bytes | memoryview, info: BatchInfo | None = None) -> Iterator[RawRecord]:
    """Every record of one whole batch (decompressed), keys decoded, values left in place.
    ``info``: the batch's header, if the caller has it."""
    if info is None:
        info = header_at(batch, 0)
    data = _decompress(info.compression, bytes(batch[HEADER_SIZE : info.size]))
    pos = 0
    for _ in range(info.record_count):
        length, pos = _varint(data, pos)
        end = pos + length
        ts_delta, p = _varint(data, pos + 1)  # skip the record's attributes byte
        offset_delta, body = _varint(data, p)
        key, value_pos = _bytes_at(data, body)
        value_length = _varint(data, value_pos)[0]
        yield RawRecord(offset_delta, ts_delta, key, value_length < 0, data, body, value_pos, end)
        pos = end


def decode_records(batch: bytes) -> Iterator[Record]:
    """Every record of one whole batch (decompressed), with absolute offsets and timestamps."""
    info = header_at(batch, 0)
    for raw in raw_records(batch, info):
        data = raw.data
        value, p = _bytes_at(data, raw.value_start)
        count, p = _varint(data, p)
        headers = []
        for _ in range(count):
            name, p = _bytes_at(data, p)
            header_value, p = _bytes_at(data, p)
            headers.append(((name or b"").decode(), header_value))
        timestamp = (
            info.max_timestamp
            if info.is_log_append_time
            else info.base_timestamp + raw.timestamp_delta
        )
        yield Record(info.base_offset + raw.offset_delta, timestamp, raw.key, value, tuple(headers))


def first_keyless_record(
    records: bytes | bytearray | memoryview, infos: list[BatchInfo]
) -> int | None:
    """Index in ``infos`` of the first batch holding a record without a key, or None."""
    for i, info in enumerate(infos):
        batch = memoryview(records)[info.position : info.position + info.size]
        if any(raw.key is None for raw in raw_records(batch, info)):
            return i
    return None


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


def record_timestamps(batch: bytes) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of one whole batch, in order. Under LogAppendTime
    every record's timestamp is the batch's maxTimestamp, as Kafka reports it."""
    for record in decode_records(batch):
        yield record.offset, record.timestamp
