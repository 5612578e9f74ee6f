from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.log.batch import Compression, RecordError, encode_batch
from dataplane.log.compression import MAX_INFLATED_BYTES, compress, inflate, is_xerial
from dataplane.log.errors import ErrorCode
from dataplane.log.records import (
    bytes_field,
    decode_records,
    encode_record,
    raw_records,
    record_timestamps,
    zigzag_varint,
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
    assert inflate(codec, compressed, len(data)) == data
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
    assert rebuilt == inflate(Compression.ZSTD, batch[61:], MAX_INFLATED_BYTES)
    assert [(r.offset, r.key, r.value) for r in decode_records(batch)] == [
        (5, b"k0", b"v0"),
        (6, b"k1", None),
        (7, None, b"v2"),
    ]


def _batch_of(payload: bytes, count: int) -> bytes:
    return encode_batch(
        payload,
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=1_000,
        max_timestamp=1_000,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=count,
    )


GOOD = encode_record(0, 0, bytes_field(b"k") + bytes_field(b"v") + zigzag_varint(0))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (GOOD[:-2], "Invalid record size: expected"),  # the record runs past the data
        (zigzag_varint(-5) + GOOD[1:], "Invalid record size: expected -5"),
        (b"\xff" * 11, "varint too long"),  # Kafka's "Varlong is too long"
        (
            zigzag_varint(3) + b"\x00\x00\x00" + GOOD[4:],  # key and value beyond its 3 bytes
            "key or value past the record's end",
        ),
        (GOOD + b"\x00", "records still remaining"),
    ],
)
def test_records_that_do_not_decode_are_invalid(payload: bytes, message: str) -> None:
    """Kafka's DefaultRecord checks (INVALID_RECORD), never an IndexError or a runaway loop."""
    with pytest.raises(RecordError) as e:
        list(raw_records(_batch_of(payload, 1)))
    assert e.value.code == ErrorCode.invalid_record
    assert message in str(e.value.message)


@pytest.mark.parametrize(
    "body",
    [
        bytes_field(b"k") + bytes_field(b"v") + zigzag_varint(1_000),  # more headers than bytes
        bytes_field(b"k") + bytes_field(b"v") + zigzag_varint(0) + b"\x00",  # bytes left over
    ],
)
def test_record_headers_must_end_with_the_record(body: bytes) -> None:
    batch = _batch_of(encode_record(0, 0, body), 1)
    with pytest.raises(RecordError) as e:
        list(decode_records(batch))
    assert e.value.code == ErrorCode.invalid_record
    assert "Found invalid record structure" in str(e.value.message)


def test_a_declared_count_of_two_billion_stops_at_the_data() -> None:
    """Each record takes at least a byte: the loop ends at the data's end, whatever the count."""
    with pytest.raises(RecordError) as e:
        list(raw_records(_batch_of(GOOD * 3, 2**31 - 1)))
    assert "premature EOF" in str(e.value.message)
