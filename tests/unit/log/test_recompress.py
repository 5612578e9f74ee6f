"""A topic's compression.type (recompress.py): a produced batch in another codec is stored in
the topic's, with the same records, offsets and producer fields; one already in it, and every
batch of a topic left at ``producer``, is stored as it came."""

from __future__ import annotations

import pytest

from dataplane.log import LogConfig, PartitionLog, validate
from dataplane.log.batch import ATTR_TRANSACTIONAL, Compression, RecordError, header_at
from dataplane.log.errors import ErrorCode
from dataplane.log.records import Record, decode_records
from tests.unit.log.batches import make_batch
from tests.unit.log.conftest import OpenLog

TIMESTAMPS = [5_000, 5_003, 5_001, 5_002]  # out of order, as a producer may set them


def produced(codec: Compression, **kw: object) -> bytearray:
    return bytearray(
        make_batch(
            [b"value-%d" % i * 20 for i in range(4)],
            keys=[b"k%d" % i for i in range(4)],
            timestamps=TIMESTAMPS,
            codec=codec,
            **kw,  # type: ignore[arg-type]
        )
    )


def stored(log: PartitionLog) -> bytes:
    return log.read(log.log_start_offset, 1 << 20, log.log_end_offset, True)


def records(data: bytes) -> list[Record]:
    return list(decode_records(data))


@pytest.mark.parametrize(
    ("topic", "sent", "kept"),
    [
        ("zstd", Compression.GZIP, Compression.ZSTD),
        ("gzip", Compression.NONE, Compression.GZIP),
        ("snappy", Compression.LZ4, Compression.SNAPPY),
        ("lz4", Compression.SNAPPY, Compression.LZ4),
        ("uncompressed", Compression.ZSTD, Compression.NONE),
    ],
)
def test_a_batch_in_another_codec_is_stored_in_the_topics(
    open_log: OpenLog, topic: str, sent: Compression, kept: Compression
) -> None:
    log = open_log(compression_type=topic)
    log.append_as_leader(produced(Compression.NONE), 3, 6_000)  # offsets 0-3: NONE->topic too
    result = log.append_as_leader(
        produced(sent, producer_id=7, producer_epoch=2, base_sequence=0), 3, 6_000
    )
    assert (result.base_offset, result.last_offset) == (4, 7)
    data = stored(log)
    first, second = validate(data, None, from_client=False)  # intact: lengths and CRCs
    assert first.compression == second.compression == kept
    assert (second.base_offset, second.last_offset, second.partition_leader_epoch) == (4, 7, 3)
    assert (second.producer_id, second.producer_epoch, second.base_sequence) == (7, 2, 0)
    assert (second.base_timestamp, second.max_timestamp) == (5_000, 5_003)
    batch = data[second.position : second.position + second.size]
    expected = [(offset + 4, *rest) for offset, *rest in records(bytes(produced(sent)))]
    assert records(batch) == expected  # keys, values, headers and timestamps as produced


def test_a_batch_already_in_the_codec_is_stored_as_it_came(open_log: OpenLog) -> None:
    sent = produced(Compression.GZIP)
    log = open_log(compression_type="gzip")
    log.append_as_leader(bytearray(sent), 0, 6_000)
    # all but the offset and leader epoch, which the log assigns
    assert stored(log)[16:] == bytes(sent)[16:]


def test_producer_keeps_every_codec(open_log: OpenLog) -> None:
    log = open_log()
    for codec in Compression:
        log.append_as_leader(produced(codec), 0, 6_000)
    codecs = [i.compression for i in validate(stored(log), None, from_client=False)]
    assert codecs == list(Compression)


def test_transactional_batches_keep_their_producer_fields(open_log: OpenLog) -> None:
    log = open_log(compression_type="zstd")
    batch = produced(
        Compression.NONE,
        producer_id=9,
        producer_epoch=1,
        base_sequence=12,
        extra_attributes=ATTR_TRANSACTIONAL,
    )
    log.append_as_leader(batch, 0, 6_000)
    info = header_at(stored(log), 0)
    assert info.is_transactional
    assert info.compression == Compression.ZSTD
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (9, 1, 12)


def test_log_append_time_stamps_the_rebuilt_batch(open_log: OpenLog) -> None:
    log = open_log(compression_type="lz4", message_timestamp_type="LogAppendTime")
    result = log.append_as_leader(produced(Compression.NONE), 0, 6_000)
    info = header_at(stored(log), 0)
    assert info.is_log_append_time
    assert info.max_timestamp == 6_000
    assert result.log_append_time == 6_000
    assert {r.timestamp for r in decode_records(stored(log))} == {6_000}


def test_a_batch_that_outgrows_max_message_bytes_is_refused(open_log: OpenLog) -> None:
    sent = make_batch([b"x" * 5_000], timestamps=[5_000], codec=Compression.ZSTD)
    log = open_log(compression_type="uncompressed", max_message_bytes=1_000)
    with pytest.raises(RecordError) as e:
        log.append_as_leader(bytearray(sent), 0, 6_000)
    assert e.value.code == ErrorCode.message_too_large
    assert "exceeds the maximum configured size of 1000" in str(e.value.message)
    assert log.log_end_offset == 0


def test_an_unknown_compression_type_is_refused() -> None:
    with pytest.raises(ValueError, match=r"compression\.type"):
        LogConfig(compression_type="brotli")
