"""Kafka's record codecs: compressing in the framings clients read, and inflating client data
within a bound.

Whatever the broker inflates came from a client (a produced batch, a pushed telemetry payload, or
a batch stored as produced), and a few bytes of zstd or gzip can inflate to gigabytes. `inflate`
never allocates past its ``limit``: it decompresses into a buffer of a guessed size (the size a
zstd or LZ4 frame declares, else a multiple of the input), grows it while the codec reports it
full, and refuses a payload that needs more than ``limit`` (`InflatedTooLarge`, INVALID_RECORD:
what Kafka answers when a batch's records end before its inflated bytes do). A payload the codec
cannot read is CORRUPT_MESSAGE. Snappy blocks declare their size, so nothing is guessed there.

The bound for record batches is `inflation_limit`: 100 times the topic's max.message.bytes, and
never below 100 times Kafka's default (about 100 MiB). That is the order of librdkafka's
receive.message.max.bytes (100 MB by default), past which librdkafka's consumers refuse to
inflate a batch themselves; Kafka's producers fill batches by their compressed size, so a legal
batch may inflate much more than max.message.bytes, but not a hundredfold of it.
"""

from __future__ import annotations

import struct
from typing import Any

import cramjam

from dataplane.log.batch import Compression, RecordError
from dataplane.log.errors import ErrorCode

DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's max.message.bytes default
INFLATION_RATIO = 100

# Java producers frame snappy the xerial way: this header, then [length i32][raw snappy block]...
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_XERIAL_VERSIONS = struct.pack(">ii", 1, 1)  # version, compatible version
_BLOCK_LENGTH = struct.Struct(">i")
# Kafka's LZ4 framing (KafkaLZ4BlockOutputStream): the LZ4 frame magic, FLG (version 1,
# independent blocks, no checksums), BD (64 KiB blocks) and the descriptor's checksum byte.
_LZ4_FRAME_HEADER = bytes.fromhex("04224d18604082")
_LZ4_MAGIC = _LZ4_FRAME_HEADER[:4]
_LZ4_CONTENT_SIZE_FLAG = 0x08  # FLG bit 3: an 8-byte content size follows BD
_LZ4_BLOCK = 64 << 10
_LZ4_UNCOMPRESSED = 0x80000000  # high bit of a block's length: stored as is
_LZ4_BLOCK_LENGTH = struct.Struct("<I")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_STREAMED: dict[int, Any] = {
    Compression.GZIP: cramjam.gzip,
    Compression.LZ4: cramjam.lz4,
    Compression.ZSTD: cramjam.zstd,
}
# cramjam's error when the output buffer is full (Rust's io::ErrorKind::WriteZero)
_OUTPUT_FULL = "failed to write whole buffer"
_FIRST_GUESS_RATIO = 8  # without a declared size, first try 8 times the input
_MIN_GUESS = 64 << 10
_GROWTH = 4


class InflatedTooLarge(RecordError):
    """A payload that would inflate past the limit (INVALID_RECORD)."""

    def __init__(self, codec: int, size: int, limit: int) -> None:
        super().__init__(
            ErrorCode.invalid_record,
            f"{Compression(codec).name.lower()} payload of {size} bytes inflates past "
            f"{limit} bytes: refused",
        )


def inflation_limit(max_message_bytes: int) -> int:
    """The most bytes the records of one batch may inflate to, for a topic whose
    max.message.bytes is ``max_message_bytes``."""
    return INFLATION_RATIO * max(max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES)


MAX_INFLATED_BYTES = inflation_limit(DEFAULT_MAX_MESSAGE_BYTES)
"""The bound for batches read without their topic's config (coordinators' internal topics)."""


def inflate(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """A payload compressed with one of Kafka's codecs (``codec`` = CompressionType id), in any
    framing clients use, if it inflates to at most ``limit`` bytes. Raises `InflatedTooLarge`
    past it, `RecordError` CORRUPT_MESSAGE for a payload the codec cannot read."""
    if codec == Compression.NONE:
        if len(data) > limit:
            raise InflatedTooLarge(codec, len(data), limit)
        return bytes(data)
    if codec == Compression.SNAPPY:
        return _inflate_snappy(data, limit)
    module = _STREAMED.get(codec)
    if module is None:
        raise RecordError(ErrorCode.corrupt_message, f"unknown compression codec {codec}")
    declared = _declared_size(codec, data)
    if declared is not None and declared > limit:
        raise InflatedTooLarge(codec, len(data), limit)
    size = declared if declared is not None else max(_MIN_GUESS, _FIRST_GUESS_RATIO * len(data))
    size = min(limit, size)
    while True:
        out = bytearray(size)
        try:
            written = module.decompress_into(data, out)
        except cramjam.DecompressionError as e:
            del out
            if _OUTPUT_FULL not in str(e):
                raise _corrupt(codec, e) from e
            if size >= limit:
                raise InflatedTooLarge(codec, len(data), limit) from None
            size = min(limit, size * _GROWTH)
            continue
        del out[written:]
        return bytes(out)


def _corrupt(codec: int, error: Exception) -> RecordError:
    name = Compression(codec).name.lower()
    return RecordError(ErrorCode.corrupt_message, f"cannot decompress the {name} payload: {error}")


def _declared_size(codec: int, data: bytes | memoryview) -> int | None:
    """The content size the first zstd or LZ4 frame declares, if it does (librdkafka's do):
    its decoder holds the frame to it."""
    if codec == Compression.ZSTD and len(data) >= 6 and data[:4] == _ZSTD_MAGIC:
        descriptor = data[4]
        single_segment = descriptor >> 5 & 1
        pos = 5 + (1 - single_segment) + (0, 1, 2, 4)[descriptor & 3]
        width = (single_segment, 2, 4, 8)[descriptor >> 6]
        if width == 0 or len(data) < pos + width:
            return None
        size = int.from_bytes(data[pos : pos + width], "little")
        return size + 256 if width == 2 else size
    lz4_frame = codec == Compression.LZ4 and len(data) >= 14 and data[:4] == _LZ4_MAGIC
    if lz4_frame and data[4] & _LZ4_CONTENT_SIZE_FLAG:
        return int.from_bytes(data[6:14], "little")
    return None


def _inflate_snappy(data: bytes | memoryview, limit: int) -> bytes:
    """A raw snappy block, or Java's xerial framing of several: each declares its size."""
    blocks = _xerial_blocks(data) if is_xerial(data) else [memoryview(data)]
    try:
        sizes = [cramjam.snappy.decompress_raw_len(block) for block in blocks]
        total = sum(sizes)
        if total > limit:
            raise InflatedTooLarge(Compression.SNAPPY, len(data), limit)
        out = bytearray(total)
        view, pos = memoryview(out), 0
        for block, size in zip(blocks, sizes, strict=True):
            cramjam.snappy.decompress_raw_into(block, view[pos : pos + size])
            pos += size
        view.release()
    except cramjam.DecompressionError as e:
        raise _corrupt(Compression.SNAPPY, e) from e
    return bytes(out)


def _xerial_blocks(data: bytes | memoryview) -> list[memoryview]:
    """The raw snappy blocks of a xerial payload, uncopied."""
    view = memoryview(data)
    blocks = []
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + _BLOCK_LENGTH.size > len(data):
            raise RecordError(ErrorCode.corrupt_message, "truncated xerial snappy block length")
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += _BLOCK_LENGTH.size
        if not 0 <= length <= len(data) - pos:
            raise RecordError(ErrorCode.corrupt_message, f"bad xerial snappy block length {length}")
        blocks.append(view[pos : pos + length])
        pos += length
    return blocks


def is_xerial(payload: bytes | memoryview) -> bool:
    """Whether a snappy payload uses Java's framing (to write it back the same way)."""
    return bytes(payload[: len(_XERIAL_MAGIC)]) == _XERIAL_MAGIC


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
