"""Bounded inflation of client payloads (compression.py): a small payload that inflates past the
bound is refused without the broker allocating what it would inflate to, whatever the codec and
framing, and legal payloads inflate whole however well they compress."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable

import cramjam
import pytest

from dataplane.log.batch import Compression, RecordError
from dataplane.log.compression import (
    MAX_INFLATED_BYTES,
    InflatedTooLarge,
    compress,
    inflate,
    inflation_limit,
)
from dataplane.log.errors import ErrorCode
from tests.unit.log.batches import compress as client_compress

MiB = 1 << 20


def zstd_bomb(blocks: int, *, declared: int | None = None) -> bytes:
    """A zstd frame of ``blocks`` RLE blocks of 128 KiB of zeros: 4 bytes each. With
    ``declared``, the frame header states that content size (as librdkafka's frames do)."""
    if declared is None:
        frame = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")  # no content size, 128 KiB window
    else:
        frame = bytearray(b"\x28\xb5\x2f\xfd\xc0") + declared.to_bytes(8, "little")
    rle_block = (128 << 10) << 3 | 1 << 1
    for i in range(blocks):
        frame += (rle_block | (i == blocks - 1)).to_bytes(3, "little") + b"\x00"
    return bytes(frame)


def test_a_zstd_bomb_rle_frame_is_what_it_claims() -> None:
    assert inflate(Compression.ZSTD, zstd_bomb(8), MiB) == bytes(MiB)


# Payloads of a few KiB (zstd: 4 KiB) that inflate to 64 MiB, in every codec and framing.
BOMBS: dict[str, tuple[Compression, Callable[[], bytes]]] = {
    "zstd": (Compression.ZSTD, lambda: zstd_bomb(512)),
    "zstd-declared": (Compression.ZSTD, lambda: zstd_bomb(512, declared=64 * MiB)),
    "gzip": (Compression.GZIP, lambda: compress(Compression.GZIP, bytes(64 * MiB))),
    "lz4-kafka": (Compression.LZ4, lambda: compress(Compression.LZ4, bytes(64 * MiB))),
    "lz4-frame": (Compression.LZ4, lambda: bytes(cramjam.lz4.compress(bytes(64 * MiB)))),
    "snappy": (Compression.SNAPPY, lambda: compress(Compression.SNAPPY, bytes(64 * MiB))),
    "snappy-xerial": (
        Compression.SNAPPY,
        lambda: client_compress(Compression.SNAPPY, bytes(64 * MiB), xerial=True),
    ),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_bomb_is_refused_without_inflating_it(name: str) -> None:
    codec, make = BOMBS[name]
    payload = make()
    limit = 4 * MiB
    tracemalloc.start()
    try:
        with pytest.raises(InflatedTooLarge) as e:
            inflate(codec, payload, limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.value.code == ErrorCode.invalid_record
    assert f"inflates past {limit} bytes" in str(e.value.message)
    assert peak < limit + MiB  # never more than the bound (64 MiB if inflated)


@pytest.mark.parametrize("name", ["zstd-declared", "snappy", "snappy-xerial"])
def test_a_declared_size_past_the_bound_is_refused_before_any_inflation(name: str) -> None:
    codec, make = BOMBS[name]
    payload = make()
    tracemalloc.start()
    try:
        with pytest.raises(InflatedTooLarge):
            inflate(codec, payload, 4 * MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MiB


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("xerial", [False, True])
def test_legal_payloads_inflate_whole_within_the_bound(codec: Compression, xerial: bool) -> None:
    """Even at several hundred to one (the first guess is 8:1: the buffer grows), and up to
    exactly the bound."""
    repetitive = b"0123456789abcdef" * (3 * MiB // 16)
    for data in (b"", os.urandom(100_000), repetitive):
        payload = client_compress(codec, data, xerial=xerial)
        assert inflate(codec, payload, len(data)) == data
        if data:
            with pytest.raises(InflatedTooLarge):
                inflate(codec, payload, len(data) - 1)


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_a_payload_the_codec_cannot_read_is_corrupt(codec: Compression) -> None:
    data = os.urandom(50_000)
    payload = client_compress(codec, data)
    for bad in (payload[: len(payload) // 2], b"\x00garbage" * 10):
        with pytest.raises(RecordError) as e:
            inflate(codec, bad, MAX_INFLATED_BYTES)
        assert e.value.code == ErrorCode.corrupt_message
        assert not isinstance(e.value, InflatedTooLarge)


def test_bad_xerial_block_lengths_are_corrupt() -> None:
    header = b"\x82SNAPPY\x00" + bytes.fromhex("0000000100000001")
    for bad in (header + b"\x00\x00", header + b"\xff\xff\xff\xff", header + b"\x00\x00\x01\x00"):
        with pytest.raises(RecordError) as e:
            inflate(Compression.SNAPPY, bad, MiB)
        assert e.value.code == ErrorCode.corrupt_message


def test_inflation_limit_scales_with_max_message_bytes() -> None:
    assert inflation_limit(1048588) == MAX_INFLATED_BYTES == 104_858_800  # ~100 MiB
    assert inflation_limit(1000) == MAX_INFLATED_BYTES  # never below Kafka's default's
    assert inflation_limit(10 * 1048588) == 10 * MAX_INFLATED_BYTES
