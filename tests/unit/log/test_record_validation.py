"""What a produce append refuses record by record, as Kafka's LogValidator does, with the records
at fault listed (KIP-467): keys on compacted topics, timestamps out of
message.timestamp.before/after.max.ms (KIP-937), batches whose records do not number their
declared count, and compressed records that inflate past the bound. Nothing refused is
appended; the hot path (a topic not compacted, timestamps in range) decodes no record."""

from __future__ import annotations

import tracemalloc

import pytest

from dataplane.config import BrokerConfig
from dataplane.log import Compression, ErrorCode, LogConfig, PartitionLog
from dataplane.log.batch import RecordError, encode_batch
from dataplane.log.compression import InflatedTooLarge
from tests.unit.log.batches import make_batch, values_of
from tests.unit.log.conftest import OpenLog
from tests.unit.log.test_compression import zstd_bomb

NOW = 1_700_000_000_000
HOUR = 3_600_000
LONG_MAX = 2**63 - 1
KEYLESS = "Compacted topic cannot accept message without key in topic partition topic-0"


def refused(log: PartitionLog, batch: bytes, now: int = NOW) -> RecordError:
    end = log.log_end_offset
    with pytest.raises(RecordError) as e:
        log.append_as_leader(bytearray(batch), 0, now)
    assert log.log_end_offset == end  # nothing appended
    return e.value


@pytest.mark.parametrize("codec", list(Compression))
def test_keyless_records_on_a_compacted_topic_are_listed(
    open_log: OpenLog, codec: Compression
) -> None:
    """librdkafka's test 0011: 100 records, every 10th without a key, in one batch."""
    log = open_log(cleanup_policy="compact")
    keys = [None if i % 10 == 0 else f"k{i}".encode() for i in range(100)]
    batch = make_batch(values_of(100), keys=keys, timestamps=[NOW] * 100, codec=codec)
    error = refused(log, batch)
    assert error.code == ErrorCode.invalid_record
    assert error.record_errors == tuple((i, KEYLESS) for i in range(0, 100, 10))
    assert error.message == (
        "One or more records have been rejected due to 10 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=0, message='{KEYLESS}'), "
        f"RecordError(batchIndex=10, message='{KEYLESS}'), "
        f"RecordError(batchIndex=20, message='{KEYLESS}')]"
    )
    keyed = make_batch(values_of(3), keys=[b"a", b"b", b"c"], timestamps=[NOW] * 3, codec=codec)
    assert log.append_as_leader(bytearray(keyed), 0, NOW).last_offset == 2


def test_a_future_timestamp_is_refused_with_the_records_at_fault(open_log: OpenLog) -> None:
    """message.timestamp.after.max.ms defaults to one hour (Kafka 4)."""
    log = open_log()
    stamps = [NOW, NOW + 2 * HOUR, NOW + 1, NOW + HOUR + 1]
    error = refused(log, make_batch(values_of(4), timestamps=stamps))
    assert error.code == ErrorCode.invalid_timestamp
    assert error.message == "One or more records have been rejected due to invalid timestamp"
    window = f"[{NOW - LONG_MAX}, {NOW + HOUR}]"
    assert error.record_errors == (
        (1, f"Timestamp {NOW + 2 * HOUR} of message with offset 1 is out of range. "
            f"The timestamp should be within {window}"),
        (3, f"Timestamp {NOW + HOUR + 1} of message with offset 3 is out of range. "
            f"The timestamp should be within {window}"),
    )  # fmt: skip
    at_the_bound = make_batch(values_of(2), timestamps=[NOW - 10**12, NOW + HOUR])
    assert log.append_as_leader(bytearray(at_the_bound), 0, NOW).last_offset == 1


def test_before_max_ms_refuses_old_timestamps(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_before_max_ms=60_000)
    error = refused(log, make_batch(values_of(3), timestamps=[NOW - 60_001, NOW, NOW]))
    assert error.code == ErrorCode.invalid_timestamp
    assert [i for i, _ in error.record_errors] == [0]
    assert f"within [{NOW - 60_000}, {NOW + HOUR}]" in error.record_errors[0][1]
    # records without a timestamp (-1) are not checked, as in Kafka
    assert log.append_as_leader(bytearray(make_batch([b"x"], timestamps=[-1])), 0, NOW)
    log.append_as_leader(bytearray(make_batch(values_of(2), timestamps=[NOW - 60_000] * 2)), 0, NOW)


def test_log_append_time_topics_check_no_timestamp(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=0)
    far = make_batch(values_of(2), timestamps=[NOW + 10 * HOUR, 1])
    assert log.append_as_leader(bytearray(far), 0, NOW).log_append_time == NOW


def test_the_hot_path_reads_headers_only(open_log: OpenLog) -> None:
    """A batch whose header timestamps are in range is not decoded: records the header cannot
    show (one older than the first, a compressed payload that does not decode) pass, unless the
    topic is compacted, where every record is decoded and checked."""
    log = open_log(message_timestamp_before_max_ms=60_000)
    older_than_the_first = make_batch(values_of(2), timestamps=[NOW, NOW - HOUR])
    undecodable = encode_batch(
        b"\x28\xb5\x2f\xfd not zstd",
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=Compression.ZSTD,
        last_offset_delta=0,
        base_timestamp=NOW,
        max_timestamp=NOW,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=1,
    )
    log.append_as_leader(bytearray(older_than_the_first + undecodable), 0, NOW)
    compacted = open_log(cleanup_policy="compact", message_timestamp_before_max_ms=60_000)
    keyed = make_batch(values_of(2), keys=[b"a", b"b"], timestamps=[NOW, NOW - HOUR])
    error = refused(compacted, keyed)
    assert error.code == ErrorCode.invalid_timestamp
    assert [i for i, _ in error.record_errors] == [1]
    error = refused(compacted, undecodable)
    assert error.code == ErrorCode.corrupt_message


def test_a_header_out_of_range_is_refused_even_if_its_records_are_not(
    open_log: OpenLog,
) -> None:
    """maxTimestamp is what the time index and retention go by (Kafka would rewrite it)."""
    log = open_log()
    batch = bytearray(make_batch(values_of(2), timestamps=[NOW, NOW]))
    lying = encode_batch(
        bytes(batch[61:]),
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=0,
        last_offset_delta=1,
        base_timestamp=NOW,
        max_timestamp=NOW + 2 * HOUR,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=2,
    )
    error = refused(log, lying)
    assert error.code == ErrorCode.invalid_timestamp
    assert error.record_errors == ()
    assert error.message == (
        f"Batch maxTimestamp {NOW + 2 * HOUR} is out of range. The timestamp should be within "
        f"[{NOW - LONG_MAX}, {NOW + HOUR}]"
    )


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize(
    ("records", "declared", "message"),
    [
        (3, 4, "Incorrect declared batch size, premature EOF reached"),
        (4, 3, "Incorrect declared batch size, records still remaining in file"),
    ],
)
def test_a_record_count_that_disagrees_with_the_records(
    open_log: OpenLog, codec: Compression, records: int, declared: int, message: str
) -> None:
    """Where the broker decodes the records (here: a compacted topic), as Kafka's
    DefaultRecordBatch iterator: INVALID_RECORD."""
    log = open_log(cleanup_policy="compact")
    keys = [f"k{i}".encode() for i in range(records)]
    batch = make_batch(
        values_of(records),
        keys=keys,
        timestamps=[NOW] * records,
        codec=codec,
        record_count=declared,
        last_offset_delta=declared - 1,
    )
    error = refused(log, batch)
    assert error.code == ErrorCode.invalid_record
    assert error.message == f"batch at offset 0: {message}"


def test_a_zstd_bomb_to_a_compacted_topic_is_refused_within_the_bound(open_log: OpenLog) -> None:
    """A 8 KiB batch whose records would inflate to 256 MiB: refused (INVALID_RECORD) without
    inflating them; the bound is ~100 MiB (100 x max.message.bytes)."""
    log = open_log(cleanup_policy="compact")
    bomb = encode_batch(
        zstd_bomb(2048),
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=Compression.ZSTD,
        last_offset_delta=0,
        base_timestamp=NOW,
        max_timestamp=NOW,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=1,
    )
    tracemalloc.start()
    try:
        error = refused(log, bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(error, InflatedTooLarge)
    assert error.code == ErrorCode.invalid_record
    assert peak < LogConfig().inflation_limit + (16 << 20)  # not the 256 MiB it inflates to


def test_a_timestamp_lookup_on_a_batch_that_does_not_decode(open_log: OpenLog) -> None:
    """ListOffsets by time decodes the batch it lands in: a batch stored by the hot path that
    holds more records than it declares is answered INVALID_RECORD (not a crash)."""
    log = open_log()
    log.append_as_leader(bytearray(make_batch(values_of(2), timestamps=[NOW, NOW + 1])), 0, NOW)
    stamps = [NOW + 5, NOW + 6, NOW + 7]
    extra = make_batch(values_of(3), timestamps=stamps, record_count=2, last_offset_delta=1)
    log.append_as_leader(bytearray(extra), 0, NOW)
    assert log.offset_for_timestamp(NOW + 1) == (1, NOW + 1)
    with pytest.raises(RecordError) as e:
        log.offset_for_timestamp(NOW + 7)
    assert e.value.code == ErrorCode.invalid_record
    assert "records still remaining" in str(e.value.message)


def test_timestamp_limits_come_from_the_topic_over_the_broker() -> None:
    """Kafka's names and defaults: message.timestamp.{before,after}.max.ms over
    log.message.timestamp.{before,after}.max.ms (Long.MAX_VALUE and 1 hour)."""
    default = LogConfig.from_configs(BrokerConfig(), {})
    assert default.timestamp_bounds(NOW) == (NOW - LONG_MAX, NOW + HOUR)
    broker = BrokerConfig(
        log_message_timestamp_before_max_ms=5_000, log_message_timestamp_after_max_ms=6_000
    )
    assert LogConfig.from_configs(broker, {}).timestamp_bounds(NOW) == (NOW - 5_000, NOW + 6_000)
    topic = {"message.timestamp.after.max.ms": "7000", "message.timestamp.type": "CreateTime"}
    assert LogConfig.from_configs(broker, topic).timestamp_bounds(NOW) == (NOW - 5_000, NOW + 7_000)
    append_time = {"message.timestamp.type": "LogAppendTime"}
    assert LogConfig.from_configs(broker, append_time).timestamp_bounds(NOW) is None


def test_refusals_are_logged_with_what_to_do(
    open_log: OpenLog, caplog: pytest.LogCaptureFixture
) -> None:
    """One line per partition every few seconds: a producer retrying must not flood the log."""
    log = open_log()
    future = make_batch([b"x"], timestamps=[NOW + 2 * HOUR])
    with caplog.at_level("WARNING", logger="dataplane.log.partition_log"):
        for _ in range(3):
            refused(log, future)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("partition topic-0: produce refused with INVALID_TIMESTAMP: ")
    assert "check the producer's clock" in line
