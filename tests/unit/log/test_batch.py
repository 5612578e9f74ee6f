from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.records.readers import read_batch

from dataplane.log.batch import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    Compression,
    RecordError,
    assign_offsets,
    check_batch,
    holds_several_batches,
    validate,
)
from dataplane.log.errors import ErrorCode
from tests.unit.log.batches import make_batch, values_of


def code_of(records: bytes, max_bytes: int | None = None) -> ErrorCode:
    with pytest.raises(RecordError) as e:
        validate(records, max_bytes)
    return e.value.code


def test_header_fields() -> None:
    batch = make_batch(
        values_of(3),
        timestamps=[5, 9, 7],
        codec=Compression.LZ4,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        extra_attributes=ATTR_TRANSACTIONAL,
    )
    (info,) = validate(batch, None)
    assert (info.position, info.size, info.record_count, info.last_offset_delta) == (
        0,
        len(batch),
        3,
        2,
    )
    assert (info.base_timestamp, info.max_timestamp) == (5, 9)
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (42, 3, 10)
    assert info.compression == Compression.LZ4
    assert info.is_transactional
    assert not info.is_control
    assert not info.is_log_append_time


def test_several_batches() -> None:
    a, b = make_batch(values_of(2)), make_batch(values_of(4), codec=Compression.GZIP)
    infos = validate(a + b, None)
    assert [(i.position, i.size, i.record_count) for i in infos] == [
        (0, len(a), 2),
        (len(a), len(b), 4),
    ]


def test_a_second_whole_batch_is_found_as_kafka_frames_it() -> None:
    """What Produce refuses (Kafka's ProduceRequest.validateRecords): a whole second batch, of
    any magic; not a torn or insane tail (the log's own checks answer those)."""
    one = make_batch(values_of(3))
    assert not holds_several_batches(one)
    assert not holds_several_batches(b"")
    assert holds_several_batches(one + one)
    assert holds_several_batches(one + make_batch(values_of(1), magic=1))
    assert not holds_several_batches(one + one[:-1])  # torn: Kafka's iterator stops there
    assert not holds_several_batches(one + one[:16])
    insane = bytearray(one)
    insane[16] = 3  # magic
    assert not holds_several_batches(one + insane)
    insane[8:12] = (13).to_bytes(4, "big")  # length under Kafka's smallest record
    assert not holds_several_batches(one + bytes(insane))


def test_produce_without_a_batch_is_invalid() -> None:
    assert code_of(b"") == ErrorCode.invalid_record
    assert validate(b"", None, from_client=False) == []


@pytest.mark.parametrize("cut", [1, 5, 16, 30, 61, 100])
def test_truncated_batch_is_corrupt(cut: int) -> None:
    batch = make_batch(values_of(3))
    assert code_of(batch[:-cut] if cut < len(batch) else batch[:1]) == ErrorCode.corrupt_message


def test_truncated_second_batch_is_corrupt() -> None:
    a = make_batch(values_of(2))
    assert code_of(a + a[:40]) == ErrorCode.corrupt_message


def test_bad_crc_is_corrupt() -> None:
    batch = bytearray(make_batch(values_of(3)))
    batch[-1] ^= 0xFF
    assert code_of(bytes(batch)) == ErrorCode.corrupt_message


def test_length_too_small_is_corrupt() -> None:
    batch = bytearray(make_batch(values_of(1)))
    batch[8:12] = (10).to_bytes(4, "big")
    assert code_of(bytes(batch)) == ErrorCode.corrupt_message


@pytest.mark.parametrize("magic", [0, 1])
def test_old_magic_is_an_invalid_record(magic: int) -> None:
    assert code_of(make_batch(values_of(1), magic=magic)) == ErrorCode.invalid_record


def test_unknown_magic_is_corrupt() -> None:
    assert code_of(make_batch(values_of(1), magic=3)) == ErrorCode.corrupt_message


def test_too_large() -> None:
    batch = make_batch(values_of(10))
    assert code_of(batch, max_bytes=len(batch) - 1) == ErrorCode.message_too_large
    assert validate(batch, len(batch))


@pytest.mark.parametrize(
    "overrides",
    [
        {"record_count": 0, "last_offset_delta": -1},
        {"record_count": 2},  # 3 records claimed by lastOffsetDelta
        {"last_offset_delta": 5},
        {"extra_attributes": ATTR_CONTROL},
        {"producer_id": 7, "producer_epoch": 0, "base_sequence": -1},
        {"extra_attributes": 6},  # compression codec 6 does not exist
    ],
)
def test_invalid_record(overrides: dict) -> None:
    assert code_of(make_batch(values_of(3), **overrides)) == ErrorCode.invalid_record


def test_producer_may_not_set_log_append_time() -> None:
    batch = make_batch(values_of(1), extra_attributes=ATTR_LOG_APPEND_TIME)
    assert code_of(batch) == ErrorCode.invalid_timestamp


def test_replicated_batches_skip_client_checks() -> None:
    batch = make_batch(values_of(3), extra_attributes=ATTR_CONTROL | ATTR_LOG_APPEND_TIME)
    assert validate(batch, None, from_client=False)[0].is_control


def test_assign_offsets_keeps_crc_valid() -> None:
    a, b = make_batch(values_of(2)), make_batch(values_of(3), codec=Compression.ZSTD)
    buf = bytearray(a + b)
    infos = assign_offsets(buf, validate(buf, None), 100, 7, None)
    assert [(i.base_offset, i.last_offset, i.partition_leader_epoch) for i in infos] == [
        (100, 101, 7),
        (102, 104, 7),
    ]
    assert validate(buf, None) == infos  # CRC still valid, headers as reported
    parsed, _ = read_batch(bytes(buf), 0)  # an independent decoder agrees
    assert [r.offset for r in parsed.records] == [100, 101]
    assert parsed.partition_leader_epoch == 7


def test_assign_log_append_time_recomputes_crc() -> None:
    buf = bytearray(make_batch(values_of(3), timestamps=[1, 2, 3]))
    (info,) = assign_offsets(buf, validate(buf, None), 0, 0, 99_000)
    assert info.max_timestamp == 99_000
    assert info.is_log_append_time
    (again,) = validate(buf, None, from_client=False)
    assert again == info
    assert again.base_timestamp == 1  # Kafka leaves baseTimestamp alone


@given(st.data())
def test_any_damage_to_crc_covered_bytes_is_detected(data: st.DataObject) -> None:
    values = data.draw(st.lists(st.binary(max_size=50), min_size=1, max_size=5))
    codec = data.draw(st.sampled_from(list(Compression)))
    batch = bytearray(make_batch(values, codec=codec))
    pos = data.draw(st.integers(21, len(batch) - 1))
    batch[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(RecordError) as e:
        check_batch(memoryview(batch), 0)
    assert e.value.code == ErrorCode.corrupt_message


@given(st.lists(st.binary(max_size=30), min_size=1, max_size=4), st.data())
def test_any_truncation_is_detected(values: list[bytes], data: st.DataObject) -> None:
    batch = make_batch(values)
    cut = data.draw(st.integers(1, len(batch) - 1))
    assert code_of(batch[:cut]) == ErrorCode.corrupt_message
