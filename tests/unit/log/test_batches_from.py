"""PartitionLog.batches_from (header walks across segments), roll_count, state_key, and the
validate / append_as_leader(validated=...) split used by the producer state."""

from __future__ import annotations

import tempfile
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.log import ErrorCode, LogConfig, LogError, PartitionLog, StateStore, validate
from dataplane.log.segment import LogSegment
from tests.unit.log.batches import make_batch, values_of
from tests.unit.log.conftest import OpenLog
from tests.unit.log.helpers import append, read_all

SMALL = {"segment_bytes": 2_000, "index_interval_bytes": 300}


def header_fields(infos: list) -> list[tuple[int, int, int, int]]:
    """What must match between a header walk and the stored bytes (positions differ)."""
    return [(i.base_offset, i.last_offset, i.size, i.max_timestamp) for i in infos]


def stored_headers(log: PartitionLog) -> list:
    return validate(read_all(log), None, from_client=False)


def test_walks_every_segment_from_the_start(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    append(log, 30)
    assert log.roll_count > 3
    walked = list(log.batches_from(0))
    assert header_fields(walked) == header_fields(stored_headers(log))
    bases = {segment.base_offset for segment in log._segments}
    for prev, info in pairwise(walked):  # positions within each segment
        expected = 0 if info.base_offset in bases else prev.position + prev.size
        assert info.position == expected


def test_starts_at_the_batch_holding_the_offset(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    append(log, 30)  # batches of 3 records: [0,2] [3,5] ...
    all_batches = header_fields(stored_headers(log))
    for offset in (0, 1, 3, 40, 44, 89):
        walked = header_fields(list(log.batches_from(offset)))
        assert walked == [b for b in all_batches if b[1] >= offset]
        assert walked[0][0] <= offset <= walked[0][1]


def test_empty_at_and_past_the_end(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    assert list(log.batches_from(0)) == []
    append(log, 3)
    assert list(log.batches_from(9)) == []
    assert list(log.batches_from(100)) == []


def test_clamps_to_the_log_start(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    append(log, 30)
    expected = [b for b in header_fields(stored_headers(log)) if b[1] >= 31]
    log.delete_records_before(31)  # inside the batch [30, 32]
    assert header_fields(list(log.batches_from(0))) == expected
    assert log.enforce_retention(0, log.log_end_offset) > 0  # whole segments below the start go
    assert header_fields(list(log.batches_from(0))) == expected


def test_follows_truncation_and_reopen(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    append(log, 30)
    log.truncate_to(50)
    assert header_fields(list(log.batches_from(0))) == header_fields(stored_headers(log))
    log.close()
    log = open_log(**SMALL)
    assert log.roll_count == 0  # counts rolls since open
    assert header_fields(list(log.batches_from(0))) == header_fields(stored_headers(log))


def test_scan_headers_reports_a_torn_header(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, 4096, 0)
    data = make_batch(values_of(2))
    segment.append(data, validate(data, None))
    segment.size += 10  # pretend the file holds a torn header after the batch
    walk = segment.scan_headers(0)
    assert next(walk).base_offset == 0
    with pytest.raises(LogError) as e:
        next(walk)
    assert e.value.code == ErrorCode.corrupt_message
    segment.close()


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(
        st.tuples(st.integers(1, 5), st.sampled_from([10, 300, 30_000])), min_size=1, max_size=25
    ),
    segment_bytes=st.sampled_from([500, 20_000, 1 << 20]),
    start=st.integers(0, 200),
)
def test_walk_matches_the_log(sizes: list[tuple[int, int]], segment_bytes: int, start: int) -> None:
    """Batches from tiny to larger than the 64 KiB read window, one or many segments."""
    with tempfile.TemporaryDirectory() as tmp, StateStore(Path(tmp) / "state") as store:
        config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=1000)
        log = PartitionLog.open(Path(tmp) / "p", config, store, "p")
        for count, size in sizes:
            append(log, 1, count, size=size)
        expected = [b for b in header_fields(stored_headers(log)) if b[1] >= start]
        assert header_fields(list(log.batches_from(start))) == expected
        log.close()


def test_validate_then_append_validated(open_log: OpenLog) -> None:
    log = open_log()
    batch = bytearray(make_batch(values_of(4)))
    infos = log.validate(batch, 1_000)
    assert [i.record_count for i in infos] == [4]
    result = log.append_as_leader(batch, 2, 1_000, validated=infos)
    assert (result.base_offset, result.last_offset) == (0, 3)
    assert read_all(log) == batch
    with pytest.raises(LogError) as e:
        log.validate(b"", 1_000)
    assert e.value.code == ErrorCode.invalid_record
    log.config = LogConfig(max_message_bytes=100)
    with pytest.raises(LogError) as e:
        log.validate(make_batch(values_of(5, 1000)), 1_000)
    assert e.value.code == ErrorCode.message_too_large


def test_state_keys_live_under_the_log_and_go_with_it(open_log: OpenLog, store: StateStore) -> None:
    log = open_log()
    key = log.state_key("producer-snapshot/1")
    assert log.store is store
    store.put_int(key, 7)
    log.close()
    log = open_log()
    assert store.get_int(key) == 7
    log.delete()
    assert store.get_int(key) is None
