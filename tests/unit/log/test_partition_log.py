from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane.config import BrokerConfig
from dataplane.log import (
    Compression,
    ErrorCode,
    LogConfig,
    LogError,
    PartitionLog,
    StateStore,
    UnexpectedAppendOffsetError,
    validate,
)
from dataplane.log.records import record_timestamps
from tests.unit.log.batches import make_batch, values_of
from tests.unit.log.conftest import OpenLog
from tests.unit.log.helpers import append, crash, descriptors_left, offsets_in, read_all


def test_new_log_is_empty(open_log: OpenLog) -> None:
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (0, 0, -1)
    assert log.epoch_for_offset(0) == -1
    assert log.read(0, 100, 0, True) == b""
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() is None


def test_append_assigns_offsets_and_reads_back_verbatim(open_log: OpenLog) -> None:
    log = open_log()
    result = log.append_as_leader(make_batch(values_of(5)), 3, 1_000)
    assert (result.base_offset, result.last_offset, result.log_append_time) == (0, 4, -1)
    assert result.batches[0].partition_leader_epoch == 3
    written = append(log, 4, 2)
    data = log.read(5, 1 << 20, log.log_end_offset, True)
    assert data == b"".join(written)
    assert offsets_in(data) == [(5, 6), (7, 8), (9, 10), (11, 12)]


@pytest.mark.parametrize("codec", list(Compression))
def test_compressed_batches_stored_as_received(open_log: OpenLog, codec: Compression) -> None:
    log = open_log()
    batch = bytearray(make_batch(values_of(50), codec=codec))
    payload = bytes(batch[61:])
    log.append_as_leader(batch, 0, 1)
    data = log.read(0, 1 << 20, 1 << 62, True)
    assert data == batch
    assert data[61:] == payload  # records never recompressed


def test_bytes_input_is_not_modified(open_log: OpenLog) -> None:
    log = open_log()
    append(log, 1)
    batch = make_batch(values_of(2))
    log.append_as_leader(batch, 0, 1)
    assert offsets_in(batch) == [(0, 1)]
    assert offsets_in(log.read(3, 1000, 100, True)) == [(3, 4)]


def test_log_append_time(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    result = log.append_as_leader(make_batch(values_of(3), timestamps=[1, 2, 3]), 0, 77_000)
    assert result.log_append_time == 77_000
    (info,) = validate(log.read(0, 1 << 20, 3, True), None, from_client=False)
    assert info.is_log_append_time
    assert info.max_timestamp == 77_000
    assert log.offset_for_timestamp(50_000) == (0, 77_000)
    assert log.max_timestamp() == (0, 77_000)


def test_invalid_records_are_refused_and_not_written(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes=500)
    with pytest.raises(LogError) as e:
        log.append_as_leader(make_batch(values_of(10)), 0, 1)
    assert e.value.code == ErrorCode.message_too_large
    with pytest.raises(LogError) as e:
        log.append_as_leader(b"", 0, 1)
    assert e.value.code == ErrorCode.invalid_record
    assert log.log_end_offset == 0


def test_roll_by_size(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2_000)
    written = append(log, 30)
    segments = sorted(p.name for p in log.directory.glob("*.log"))
    assert len(segments) > 5
    assert all(p.stat().st_size <= 2_000 for p in log.directory.glob("*.log"))
    assert read_all(log) == b"".join(written)
    # a read goes on into the next segments while its budget lasts, whole batches only
    assert log.read(0, 1 << 20, log.log_end_offset, True) == b"".join(written)
    first = (log.directory / segments[0]).stat().st_size
    two = first + (log.directory / segments[1]).stat().st_size
    assert log.read(0, first, log.log_end_offset, True) == read_all(log)[:first]
    assert len(log.read(0, two - 1, log.log_end_offset, True)) < two


def test_append_larger_than_segment_goes_into_a_fresh_segment(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000)
    append(log, 1)
    append(log, 1, 30)  # ~3.5 kB batch
    append(log, 1)
    assert [p.stat().st_size > 1_000 for p in sorted(log.directory.glob("*.log"))] == [
        False,
        True,
        False,
    ]


def test_roll_by_age_of_first_batch_timestamp(open_log: OpenLog) -> None:
    log = open_log(segment_ms=100)
    log.append_as_leader(make_batch(values_of(1), timestamps=[1_000]), 0, 5)
    log.append_as_leader(make_batch(values_of(1), timestamps=[1_100]), 0, 5)
    assert len(list(log.directory.glob("*.log"))) == 1
    log.append_as_leader(make_batch(values_of(1), timestamps=[1_101]), 0, 5)
    assert sorted(p.name for p in log.directory.glob("*.log"))[-1] == f"{2:020d}.log"


def test_roll_by_age_without_timestamps_uses_the_clock(open_log: OpenLog) -> None:
    log = open_log(segment_ms=100)
    now = log._segments[-1].created_ms
    log.append_as_leader(make_batch(values_of(1), timestamps=[-1]), 0, now)
    log.append_as_leader(make_batch(values_of(1), timestamps=[-1]), 0, now + 100)
    assert len(list(log.directory.glob("*.log"))) == 1
    log.append_as_leader(make_batch(values_of(1), timestamps=[-1]), 0, now + 101)
    assert len(list(log.directory.glob("*.log"))) == 2


def test_read_limits(open_log: OpenLog) -> None:
    log = open_log()
    written = append(log, 5)  # offsets 0-14, three per batch
    size = len(written[0])
    end = log.log_end_offset
    assert log.read(0, size - 1, end, False) == b""
    assert log.read(0, size - 1, end, True) == written[0]  # KIP-74
    assert log.read(0, 2 * size + size // 2, end, False) == b"".join(written[:2])
    assert log.read(4, 1 << 20, end, False) == b"".join(written[1:])  # mid-batch offset
    assert log.read(0, 1 << 20, 6, True) == b"".join(written[:2])  # high watermark
    assert log.read(0, 1 << 20, 5, True) == b"".join(written[:2])  # batch 3-5 starts below
    assert log.read(6, 1 << 20, 6, True) == b""
    assert log.read(end, 1 << 20, end, True) == b""
    for bad in (-1, end + 1):
        with pytest.raises(LogError) as e:
            log.read(bad, 100, end, True)
        assert e.value.code == ErrorCode.offset_out_of_range


def test_index_lookups_on_a_large_log(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=60_000, index_interval_bytes=1_000)
    append(log, 3_000, per_batch=2, size=20)
    assert len(list(log.directory.glob("*.log"))) > 3
    assert all(len(s.offset_index) > 10 for s in log._segments[:-1])
    end = log.log_end_offset
    rng = random.Random(1)
    for offset in [0, end - 1, *rng.sample(range(end), 300)]:
        data = log.read(offset, 500, end, True)
        first, last = offsets_in(data)[0]
        assert first <= offset <= last
        assert len(data) <= 500


def test_index_keeps_header_walks_short(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(index_interval_bytes=4_096)
    append(log, 2_000, per_batch=1, size=10)
    segment = log._segments[-1]
    calls = 0
    original = segment._header

    def counting(pos: int):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return original(pos)

    monkeypatch.setattr(segment, "_header", counting)
    log.read(1_500, 50_000, log.log_end_offset, True)
    assert calls < 150  # ~4 KiB of 80-byte batches per index step, twice


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_time_lookups_match_a_record_by_record_model(tmp_path: Path, data: st.DataObject) -> None:
    directory = tmp_path / uuid.uuid4().hex
    with StateStore(directory / "state") as store:
        log = PartitionLog.open(
            directory / "log", LogConfig(segment_bytes=1_500, index_interval_bytes=300), store, "p"
        )
        model: list[tuple[int, int]] = []  # (offset, timestamp) of every record
        for _ in range(data.draw(st.integers(1, 25))):
            stamps = data.draw(st.lists(st.integers(0, 1_000), min_size=1, max_size=6))
            codec = data.draw(st.sampled_from(list(Compression)))
            result = log.append_as_leader(
                make_batch(values_of(len(stamps), 30), timestamps=stamps, codec=codec), 0, 1
            )
            model += [(result.base_offset + i, ts) for i, ts in enumerate(stamps)]
        for target in data.draw(st.lists(st.integers(-1, 1_001), min_size=1, max_size=10)):
            expected = next(((o, t) for o, t in model if t >= target), None)
            assert log.offset_for_timestamp(target) == expected
        top = max(t for _, t in model)
        assert log.max_timestamp() == next((o, t) for o, t in model if t == top)
        log.close()


def test_time_lookup_respects_log_start_offset(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(values_of(4), timestamps=[10, 20, 30, 40]), 0, 1)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == (2, 30)


def test_epoch_cache(open_log: OpenLog) -> None:
    log = open_log()
    append(log, 2, epoch=1)  # offsets 0-5
    append(log, 1, epoch=3)  # 6-8
    append(log, 1, epoch=3)  # 9-11
    append(log, 1, epoch=4)  # 12-14
    assert log.latest_epoch == 4
    assert log._epochs.entries == [(1, 0), (3, 6), (4, 12)]
    assert log.end_offset_for_epoch(4) == (4, 15)
    assert log.end_offset_for_epoch(3) == (3, 12)
    assert log.end_offset_for_epoch(2) == (1, 6)  # epoch 2 never wrote: answer for epoch 1
    assert log.end_offset_for_epoch(0) == (0, 0)  # older than everything known
    assert log.end_offset_for_epoch(9) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert [log.epoch_for_offset(o) for o in (0, 5, 6, 14)] == [1, 1, 3, 4]
    log.truncate_to(9)
    assert log._epochs.entries == [(1, 0), (3, 6)]
    log.close()
    assert open_log()._epochs.entries == [(1, 0), (3, 6)]


def test_truncate_to(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000, index_interval_bytes=200)
    written = append(log, 20)  # 60 records, several segments
    log.truncate_to(31)  # inside the batch 30-32: the whole batch goes
    assert log.log_end_offset == 30
    assert read_all(log) == b"".join(written[:10])
    assert max(int(p.stem) for p in log.directory.glob("*.log")) <= 30
    more = append(log, 3)
    assert offsets_in(b"".join(more)) == [(30, 32), (33, 35), (36, 38)]
    log.close()
    log = open_log(segment_bytes=1_000, index_interval_bytes=200)
    assert read_all(log) == b"".join(written[:10] + more)


def test_truncate_to_a_segment_boundary_and_past_the_end(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000)
    append(log, 10)
    boundary = log._bases[2]
    log.truncate_to(boundary)
    assert log.log_end_offset == boundary
    log.truncate_to(10_000)  # nothing to do
    assert log.log_end_offset == boundary
    assert log.offset_for_timestamp(0) == (0, 1000)


def test_truncating_at_the_end_drops_an_epoch_that_wrote_nothing(open_log: OpenLog) -> None:
    """A replica that became leader (epoch started at its log end) and lost leadership before
    appending: the new leader says its log ends where ours does, and the empty epoch must go,
    or every fetch reports the same divergence again."""
    log = open_log()
    append(log, 2, epoch=1)
    end = log.log_end_offset
    log.start_epoch(4)
    assert log._epochs.entries[-1] == (4, end)
    log.truncate_to(end)
    assert log._epochs.entries[-1][0] == 1
    assert log.log_end_offset == end


def test_truncate_fully_and_start_at(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000)
    append(log, 10, epoch=2)
    log.truncate_fully_and_start_at(1_000)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (1_000, 1_000, -1)
    assert [p.name for p in log.directory.glob("*.log")] == [f"{1_000:020d}.log"]
    assert append(log, 1)
    assert log.log_end_offset == 1_003
    with pytest.raises(LogError):
        log.read(999, 100, 2_000, True)


def test_delete_records_before(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000)
    written = append(log, 10)
    assert log.delete_records_before(7) == 7
    assert log.delete_records_before(3) == 7  # never moves back
    with pytest.raises(LogError) as e:
        log.read(6, 100, 30, True)
    assert e.value.code == ErrorCode.offset_out_of_range
    assert log.read(7, 1 << 20, 30, True).startswith(written[2])  # batch 6-8 served whole
    with pytest.raises(LogError):
        log.delete_records_before(31)
    log.close()
    log = open_log(segment_bytes=1_000)
    assert log.log_start_offset == 7


def test_retention_by_time(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000, retention_ms=1_000)
    for ts in range(0, 10_000, 1_000):
        log.append_as_leader(make_batch(values_of(3), timestamps=[ts] * 3), 0, ts)
    segments_before = len(log._segments)
    end = log.log_end_offset
    assert log.enforce_retention(500, end) == 0
    deleted = log.enforce_retention(10_000, end)
    assert 0 < deleted < segments_before
    assert all(s.max_timestamp >= 9_000 for s in log._segments[:-1])
    assert log.log_start_offset == log._bases[0]


def test_retention_deletes_an_expired_active_segment(open_log: OpenLog) -> None:
    """Kafka's deletableSegments: the active segment goes too, rolled first; the log restarts
    empty at its end, and an empty active segment is never deleted."""
    log = open_log(segment_bytes=1_000, retention_ms=1_000)
    for ts in range(0, 10_000, 1_000):
        log.append_as_leader(make_batch(values_of(3), timestamps=[ts] * 3), 0, ts)
    end = log.log_end_offset
    assert log.enforce_retention(10**12, end) > 1
    assert (log.log_start_offset, log.log_end_offset, log._bases) == (end, end, [end])
    assert log._segments[0].size == 0
    assert log.enforce_retention(10**12, end) == 0  # the new, empty, active segment stays
    assert append(log, 1)
    assert log.log_end_offset == end + 3
    log.close()
    log = open_log(segment_bytes=1_000, retention_ms=1_000)
    assert (log.log_start_offset, log.log_end_offset) == (end, end + 3)


def test_retention_stops_at_the_high_watermark(open_log: OpenLog) -> None:
    """No segment holding an offset at or past the high watermark goes (the log start never
    passes it), however old."""
    log = open_log(segment_bytes=1_000, retention_ms=1_000)
    append(log, 20)
    bases = list(log._bases)
    assert log.enforce_retention(10**12, bases[2] + 1) == 2  # segment 2 holds the watermark
    assert log.log_start_offset == bases[2]
    assert log.enforce_retention(10**12, bases[3]) == 1  # segment 2 is now wholly below it
    assert log.enforce_retention(10**12, log.log_end_offset - 1) == len(bases) - 4
    assert log._bases == [bases[-1]]  # the active segment holds the watermark


def test_retention_by_size(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000, retention_bytes=2_500)
    append(log, 20)
    log.enforce_retention(10_000, log.log_end_offset)
    total = sum(p.stat().st_size for p in log.directory.glob("*.log"))
    assert total - log._segments[0].size < 2_500 < total  # only whole segments go
    log.close()
    assert open_log().log_start_offset == log._bases[0]


def test_retention_of_segments_below_log_start(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000, retention_ms=-1)
    append(log, 20)
    log.delete_records_before(log._bases[3])
    assert log.enforce_retention(10**15, log.log_end_offset) == 3


def test_follower_append(open_log: OpenLog, tmp_path: Path) -> None:
    leader = open_log()
    append(leader, 2, epoch=1)
    append(leader, 2, epoch=2)
    data = leader.read(0, 1 << 20, leader.log_end_offset, True)
    with StateStore(tmp_path / "follower-state") as store:
        follower = PartitionLog.open(tmp_path / "follower", LogConfig(), store, "f")
        result = follower.append_as_follower(data)
        assert (result.base_offset, result.last_offset) == (0, 11)
        assert follower.read(0, 1 << 20, 12, True) == data
        assert follower._epochs.entries == [(1, 0), (2, 6)]
        with pytest.raises(UnexpectedAppendOffsetError):
            follower.append_as_follower(data)
        assert follower.append_as_follower(b"").batches == []
        follower.close()


def test_flush_messages_fsyncs_and_moves_recovery_point(open_log: OpenLog) -> None:
    log = open_log(flush_messages=4)
    append(log, 1)
    assert log.recovery_point == 0
    append(log, 1)
    assert log.recovery_point == 6


def test_flush_ms(open_log: OpenLog) -> None:
    log = open_log(flush_ms=1_000)
    append(log, 1, now_ms=5_000)
    append(log, 1, now_ms=5_999)
    assert log.recovery_point == 0
    append(log, 1, now_ms=6_000)
    assert log.recovery_point == 9


def test_roll_fsyncs_in_the_background_and_moves_recovery_point(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000)
    append(log, 10)
    log._wait_for_fsync()
    assert log.recovery_point == log._bases[-1]


def test_delete(open_log: OpenLog, store: StateStore) -> None:
    log = open_log(segment_bytes=1_000)
    append(log, 10, epoch=1)
    log.delete()
    assert not log.directory.exists()
    assert list(store.scan_prefix("log/topic-0/")) == []


def test_reopen_after_clean_close(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1_000, index_interval_bytes=100)
    written = append(log, 15, epoch=2)
    log.close()
    log = open_log(segment_bytes=1_000, index_interval_bytes=100)
    assert (log.log_end_offset, log.recovery_point, log.latest_epoch) == (45, 45, 2)
    assert read_all(log) == b"".join(written)
    assert append(log, 1)
    assert log.log_end_offset == 48


def test_log_config_from_broker_and_topic() -> None:
    broker = BrokerConfig(log_segment_bytes=1234, log_retention_ms=5, message_max_bytes=99)
    config = LogConfig.from_configs(
        broker,
        {"segment.bytes": "4096", "message.timestamp.type": "LogAppendTime", "cleanup.policy": "x"},
    )
    assert config.segment_bytes == 4096
    assert config.retention_ms == 5
    assert config.max_message_bytes == 99
    assert config.log_append_time
    assert config.flush_messages == 2**63 - 1
    with pytest.raises(ValueError, match=r"message\.timestamp\.type"):
        LogConfig.from_configs(broker, {"message.timestamp.type": "Never"})


def test_records_decoder_reports_log_append_time() -> None:
    from dataplane.log.batch import assign_offsets

    buf = bytearray(make_batch(values_of(3), timestamps=[1, 2, 3], codec=Compression.SNAPPY))
    assign_offsets(buf, validate(buf, None), 10, 0, 500)
    assert list(record_timestamps(bytes(buf))) == [(10, 500), (11, 500), (12, 500)]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_log_behaves_like_a_list_of_batches(tmp_path: Path, data: st.DataObject) -> None:
    """Random appends, truncations, deletions, retention, clean and unclean reopens against a
    model: the batches as written, the log start and the log end."""
    root = tmp_path / uuid.uuid4().hex
    config = LogConfig(segment_bytes=1_200, index_interval_bytes=250, retention_bytes=4_000)
    with StateStore(root / "state") as store:

        def reopen() -> PartitionLog:
            return PartitionLog.open(root / "log", config, store, "p")

        log = reopen()
        model: list[tuple[int, bytes]] = []  # (last offset, batch as written)
        start = end = epoch = 0
        for _ in range(data.draw(st.integers(1, 25))):
            op = data.draw(st.sampled_from(["append", "truncate", "delete", "retain", "reopen"]))
            if op == "append":
                epoch += data.draw(st.integers(0, 1))
                for _ in range(data.draw(st.integers(1, 3))):
                    n = data.draw(st.integers(1, 5))
                    codec = data.draw(st.sampled_from(list(Compression)))
                    buf = bytearray(make_batch(values_of(n, 40, end), codec=codec))
                    log.append_as_leader(buf, epoch, 1)
                    model.append((end + n - 1, bytes(buf)))
                    end += n
            elif op == "truncate":
                target = data.draw(st.integers(0, end))
                first_base = log._bases[0]
                if target < end:
                    model = [(last, b) for last, b in model if last < target]
                    end = model[-1][0] + 1 if model else min(first_base, target)
                    if target < first_base:
                        start = end = target
                    start = min(start, end)
                log.truncate_to(target)
            elif op == "delete":
                start = max(start, data.draw(st.integers(0, end)))
                log.delete_records_before(start)
            elif op == "retain":
                log.enforce_retention(10, log.log_end_offset)
                assert start <= log.log_start_offset <= end
                start = log.log_start_offset
            elif data.draw(st.booleans()):
                log.close()
                log = reopen()
            else:
                crash(log)
                log = reopen()
            assert (log.log_start_offset, log.log_end_offset) == (start, end)
            assert read_all(log) == b"".join(b for last, b in model if last >= start)
        log.close()


def test_an_append_out_of_descriptors_fails_and_leaves_the_log_usable(open_log: OpenLog) -> None:
    # A roll opens a segment and its indexes: without a descriptor the append fails with a
    # Kafka error before writing anything, and the log is not failed (no KAFKA_STORAGE_ERROR,
    # its directory stays online).
    log = open_log(segment_bytes=2_000)
    written = append(log, 5)
    failures: list[OSError] = []
    log.on_failure = lambda _log, error: failures.append(error)

    def fill_until_roll() -> None:
        for _ in range(100):  # the active segment fills up, then must roll
            written.extend(append(log, 1))

    with descriptors_left():
        with pytest.raises(LogError) as refused:
            fill_until_roll()
        assert refused.value.code == ErrorCode.unknown_server_error
        assert "Too many open files" in str(refused.value)
    assert log.failure is None
    assert not failures
    assert read_all(log) == b"".join(written)
    written += append(log, 30)
    assert read_all(log) == b"".join(written)
    assert len(list(log.directory.glob("*.log"))) > 3
