from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.log.batch import Compression, validate
from dataplane.log.records import (
    _decompress,
    compress,
    decode_records,
    encode_record,
    first_keyless_record,
    is_xerial,
    raw_records,
    record_timestamps,
)
from tests.unit.log.batches import make_batch


@pytest.mark.parametrize("xerial", [False, True])
@pytest.mark.parametrize("codec", list(Compression))
def test_record_timestamps_of_every_codec(codec: Compression, xerial: bool) -> None:
    values = [bytes([i]) * 5_000 for i in range(20)]  # > one 32 KiB xerial block
    stamps = [1_000 + (i * 7919) % 500 for i in range(20)]
    batch = make_batch(values, timestamps=stamps, base_offset=40, codec=codec, xerial=xerial)
    assert list(record_timestamps(batch)) == [(40 + i, ts) for i, ts in enumerate(stamps)]


@given(
    st.lists(st.tuples(st.binary(max_size=300), st.integers(0, 2**40)), min_size=1, max_size=20),
    st.sampled_from(list(Compression)),
)
def test_record_timestamps_roundtrip(records: list[tuple[bytes, int]], codec: Compression) -> None:
    values, stamps = [v for v, _ in records], [t for _, t in records]
    batch = make_batch(values, timestamps=stamps, codec=codec)
    assert list(record_timestamps(batch)) == list(enumerate(stamps))


@pytest.mark.parametrize("xerial", [False, True])
@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("data", [b"", b"abc" * 50_000, os.urandom(150_000)], ids=len)
def test_compress_roundtrip(codec: Compression, xerial: bool, data: bytes) -> None:
    """What the cleaner writes back decompresses as clients would (several LZ4 blocks, some
    stored uncompressed)."""
    compressed = compress(codec, data, xerial=xerial)
    assert _decompress(codec, compressed) == data
    assert is_xerial(compressed) == (xerial and codec == Compression.SNAPPY)
    if codec == Compression.LZ4:
        assert compressed.startswith(bytes.fromhex("04224d186040"))  # independent 64 KiB blocks


def test_raw_records_and_keys() -> None:
    batch = make_batch(
        [b"v0", None, b"v2"], keys=[b"k0", b"k1", None], base_offset=5, codec=Compression.ZSTD
    )
    raw = list(raw_records(batch))
    assert [(r.offset_delta, r.key, r.is_tombstone) for r in raw] == [
        (0, b"k0", False),
        (1, b"k1", True),
        (2, None, False),
    ]
    rebuilt = b"".join(encode_record(r.offset_delta, r.timestamp_delta, r.body) for r in raw)
    assert rebuilt == _decompress(Compression.ZSTD, batch[61:])
    assert [(r.offset, r.key, r.value) for r in decode_records(batch)] == [
        (5, b"k0", b"v0"),
        (6, b"k1", None),
        (7, None, b"v2"),
    ]


def test_first_keyless_record() -> None:
    keyed = make_batch([b"a", b"b"], keys=[b"1", b"2"], codec=Compression.GZIP)
    keyless = make_batch([b"a", b"b"], keys=[b"1", None], codec=Compression.LZ4)
    records = keyed + keyless
    infos = validate(records, None)
    assert first_keyless_record(records, infos) == 1
    assert first_keyless_record(keyed, validate(keyed, None)) is None
