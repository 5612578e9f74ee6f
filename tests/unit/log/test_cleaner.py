"""Log compaction on real segment files: what stays, what goes, and crashes in the middle."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

from dataplane.config import BrokerConfig
from dataplane.log import (
    Compression,
    ErrorCode,
    LogConfig,
    PartitionLog,
    RecordError,
    StateStore,
    UnexpectedAppendOffsetError,
    validate,
)
from dataplane.log.batch import BatchInfo
from dataplane.log.cleaner import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    CleaningAborted,
    plan_cleaning,
)
from dataplane.log.compression import is_xerial
from dataplane.log.segment import segment_files
from dataplane.replica.producer_state import ProducerStateManager
from tests.unit.log.batches import make_batch
from tests.unit.log.conftest import OpenLog
from tests.unit.log.helpers import clean, crash, read_all, records_in, run_cleaning

COMPACT: dict[str, Any] = {
    "cleanup_policy": "compact",
    "segment_bytes": 1_000,
    "index_interval_bytes": 200,
}
Record = tuple[int, bytes | None, bytes | None]


def put(
    log: PartitionLog,
    pairs: list[tuple[bytes | None, bytes | None]],
    *,
    codec: Compression = Compression.NONE,
    xerial: bool = False,
    timestamp: int = 1_000,
    producer: tuple[int, int] | None = None,  # (producer id, base sequence), epoch 0
) -> BatchInfo:
    """Append one batch of (key, value) records; return its header as written."""
    pid, seq = producer if producer is not None else (-1, -1)
    batch = make_batch(
        [v for _, v in pairs],
        keys=[k for k, _ in pairs],
        timestamps=[timestamp] * len(pairs),
        codec=codec,
        xerial=xerial,
        producer_id=pid,
        producer_epoch=0 if producer else -1,
        base_sequence=seq,
    )
    return log.append_as_leader(batch, 0, 10_000).batches[0]


def fill(log: PartitionLog, count: int, keys: int = 5, size: int = 50) -> None:
    """``count`` one-record batches cycling over ``keys`` keys."""
    for i in range(count):
        put(log, [(f"k{i % keys}".encode(), f"v{i}".encode().ljust(size, b"."))])


def compacted(before: list[Record], end: int) -> list[Record]:
    """What compaction of the offsets below ``end`` leaves: the latest record of each key
    (tombstones included), and everything from ``end`` on."""
    latest = {key: offset for offset, key, _ in before if offset < end}
    return [r for r in before if r[0] >= end or latest[r[1]] == r[0]]


def log_bytes(log: PartitionLog) -> int:
    return sum(p.stat().st_size for p in log.directory.glob("*.log"))


def batches(log: PartitionLog) -> list[BatchInfo]:
    return validate(read_all(log), None, from_client=False)


def test_keeps_the_latest_record_of_each_key_at_its_offset(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill(log, 60)
    before, size_before = records_in(read_all(log)), log_bytes(log)
    active_base = log._bases[-1]
    job = clean(log)
    assert job is not None
    assert job.end_offset == active_base == log.cleaner_checkpoint
    expected = compacted(before, active_base)
    assert records_in(read_all(log)) == expected
    assert len([r for r in expected if r[0] < active_base]) == 5
    assert log_bytes(log) < size_before / 3
    assert (job.bytes_before, job.records_kept) == (size_before - log._segments[-1].size, 5)
    assert clean(log) is None  # nothing dirty any more
    log.close()
    assert records_in(read_all(open_log(**COMPACT))) == expected  # clean reopen
    crash(log := open_log(**COMPACT))
    assert records_in(read_all(open_log(**COMPACT))) == expected  # unclean reopen: rescanned


def test_small_cleaned_segments_are_grouped(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill(log, 60, keys=30)
    clean(log)  # each segment shrinks to about half, none merged: each was ~segment.bytes
    fill(log, 60, keys=30)
    before, bases = records_in(read_all(log)), list(log._bases)
    clean(log, now_ms=20_000)
    assert len(log._segments) < len(bases)
    assert log._bases[1] > bases[1]  # halves merged
    assert records_in(read_all(log)) == compacted(before, log._bases[-1])
    assert all(s.size <= 1_000 for s in log._segments)


@pytest.mark.parametrize(
    ("codec", "xerial"), [(c, False) for c in Compression] + [(Compression.SNAPPY, True)]
)
def test_compressed_batches_are_rewritten_with_their_codec(
    open_log: OpenLog, codec: Compression, xerial: bool
) -> None:
    log = open_log(**COMPACT)
    written = [
        put(log, [(b"shared", b"x%d" % i), (b"own%d" % i, b"y" * 80)], codec=codec, xerial=xerial)
        for i in range(30)
    ]
    before = records_in(read_all(log))
    expected = compacted(before, log._bases[-1])
    clean(log)
    assert records_in(read_all(log)) == expected
    data = read_all(log)
    for info in validate(data, None, from_client=False):  # CRCs checked
        original = next(w for w in written if w.base_offset == info.base_offset)
        assert info.compression == codec
        assert is_xerial(data[info.position + 61 : info.position + info.size]) == xerial
        assert (info.last_offset_delta, info.max_timestamp) == (1, original.max_timestamp)
        kept = [r for r in expected if info.base_offset <= r[0] <= info.last_offset]
        assert info.record_count == len(kept) > 0


def test_uncompressed_rewrite_reads_back_with_an_independent_decoder(open_log: OpenLog) -> None:
    from kio.records.readers import read_batch

    log = open_log(**COMPACT)
    for i in range(30):
        put(log, [(b"shared", b"x%d" % i), (b"own%d" % i, b"y" * 80)], timestamp=5_000 + i)
    clean(log)
    data = read_all(log)
    first = validate(data, None, from_client=False)[0]
    batch, _ = read_batch(data, first.position)
    assert [(r.offset, r.key, r.value) for r in batch.records] == [(1, b"own0", b"y" * 80)]
    assert batch.records[0].timestamp.timestamp() * 1000 == first.max_timestamp == 5_000


def test_tombstones_go_delete_retention_ms_after_their_first_cleaning(open_log: OpenLog) -> None:
    config = COMPACT | {"delete_retention_ms": 1_000, "min_cleanable_dirty_ratio": 0.0}
    log = open_log(**config)
    put(log, [(b"gone", b"v1"), (b"kept", b"v2")])
    put(log, [(b"gone", None)])
    tombstone = log.log_end_offset - 1

    def round_(now_ms: int, n: int) -> list[Record]:
        fill(log, 10, keys=10, size=80 + n)  # roll: the tombstone's segment becomes cleanable
        assert clean(log, now_ms) is not None
        return records_in(read_all(log))

    after = round_(10_000, 0)
    assert (0, b"gone", b"v1") not in after
    assert (tombstone, b"gone", None) in after
    horizon_batch = next(b for b in batches(log) if b.base_offset == tombstone)
    assert horizon_batch.delete_horizon_ms == 11_000  # now + delete.retention.ms
    assert (tombstone, b"gone", None) in round_(10_999, 1)
    assert next(b for b in batches(log) if b.base_offset == tombstone).delete_horizon_ms == 11_000
    after = round_(11_000, 2)
    assert all(key != b"gone" for _, key, _ in after)
    assert (1, b"kept", b"v2") in after


def test_records_without_a_key_are_dropped(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill(log, 20)
    log.config = dataclasses.replace(log.config, cleanup_policy="delete")  # accepts them
    put(log, [(None, b"no key")])
    log.config = dataclasses.replace(log.config, cleanup_policy="compact")
    fill(log, 20)
    clean(log)
    assert all(key is not None for _, key, _ in records_in(read_all(log)))


def test_idempotent_producers_keep_their_last_batch(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    first = put(log, [(b"a", b"1")], producer=(7, 0))
    last7 = put(log, [(b"a", b"2")], producer=(7, 1))
    last8 = put(log, [(b"a", b"3"), (b"b", b"4")], producer=(8, 0))
    fill(log, 12, keys=1, size=100)  # key k0, but also...
    put(log, [(b"a", b"5")])  # ...a newer a
    fill(log, 10, keys=1, size=100)
    assert last8.last_offset < log._bases[1]
    clean(log, producers={7: (last7.last_offset, 0), 8: (last8.last_offset, 0)})
    kept = {b.base_offset: b for b in batches(log)}
    assert first.base_offset not in kept  # not a producer's last batch: gone with its records
    empty = kept[last7.base_offset]
    assert (empty.record_count, empty.producer_id, empty.producer_epoch) == (0, 7, 0)
    assert (empty.base_sequence, empty.last_offset, empty.max_timestamp) == (1, 1, 1_000)
    partial = kept[last8.base_offset]
    assert (partial.record_count, partial.last_offset_delta) == (1, 1)
    assert (partial.producer_id, partial.base_sequence) == (8, 0)
    assert (last8.last_offset, b"b", b"4") in records_in(read_all(log))
    # State rebuilt from the compacted log alone still answers a retry with its offsets.
    producers = ProducerStateManager.load(log, now_ms=10_000)
    retry = make_batch([b"2"], keys=[b"a"], producer_id=7, producer_epoch=0, base_sequence=1)
    duplicate = producers.check(validate(retry, None))
    assert duplicate is not None
    assert duplicate.first_offset == last7.base_offset


def test_reads_go_on_across_a_swap(open_log: OpenLog) -> None:
    """A consumer in the middle of the cleaned range keeps going: offsets only move forward and
    a removed offset reads as the next batch kept."""
    log = open_log(**COMPACT)
    fill(log, 60)
    before = records_in(read_all(log))
    first = log.read(0, 300, log.log_end_offset, True)
    seen = records_in(first)
    clean(log)
    offset = seen[-1][0] + 1
    while offset < log.log_end_offset:
        data = log.read(offset, 300, log.log_end_offset, True)
        infos = validate(data, None, from_client=False)
        seen += [r for r in records_in(data) if r[0] >= offset]
        offset = infos[-1].last_offset + 1
    offsets = [r[0] for r in seen]
    assert offsets == sorted(set(offsets))
    assert set(seen) <= set(before)
    assert set(compacted(before, log._bases[-1])) <= set(seen)


def test_nothing_above_the_high_watermark_or_younger_than_the_lag(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill(log, 60)
    bases = list(log._bases)
    job = clean(log, upper_bound=bases[2] + 1)  # segment 2 not wholly below it
    assert job is not None
    assert job.end_offset == bases[2]
    log.config = dataclasses.replace(log.config, min_compaction_lag_ms=5_000)
    for _ in range(10):
        put(log, [(b"young", b"x" * 100)], timestamp=6_000)
    job = clean(log, now_ms=10_000)  # the first new segment's records are 4 s old
    assert job is not None
    assert job.end_offset == bases[-1]


def test_max_compaction_lag_forces_a_cleaning(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill(log, 60, keys=60)  # nothing to remove: the clean part stays large
    clean(log)
    for _ in range(10):
        put(log, [(b"k1", b"x" * 100)], timestamp=1_000)
    assert log.plan_cleaning(10_000, log.log_end_offset, {}) is None  # dirty ratio below 0.5
    log.config = dataclasses.replace(log.config, max_compaction_lag_ms=8_000)
    assert log.plan_cleaning(9_000, log.log_end_offset, {}) is None
    assert clean(log, 9_001) is not None


def test_a_full_offset_map_cleans_in_several_passes(open_log: OpenLog) -> None:
    log = open_log(**COMPACT, min_cleanable_dirty_ratio=0.0)
    fill(log, 80, keys=12)
    before, end = records_in(read_all(log)), log._bases[-1]
    passes = 0
    while True:
        job = plan_cleaning(
            log.directory, log.config, log._segments, 0, log.cleaner_checkpoint,
            end, 10_000, {}, max_keys=4,
        )  # fmt: skip
        if job is None:
            break
        run_cleaning(job, log)
        passes += 1
    assert passes > 2
    assert log.cleaner_checkpoint == end
    assert records_in(read_all(log)) == compacted(before, end)


def test_truncation_lowers_the_checkpoint(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill(log, 60)
    clean(log)
    log.truncate_to(log._bases[1] + 1)
    assert log.cleaner_checkpoint == log._bases[1] + 1


def test_a_log_changed_during_its_cleaning_is_left_alone(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill(log, 60)
    before = records_in(read_all(log))
    job = log.plan_cleaning(10_000, log.log_end_offset, {})
    assert job is not None
    job.build_offset_map()
    cleaned = job.clean_group(job.groups[0])
    log.delete_records_before(log._bases[1])
    assert log.enforce_retention(10_000, log.log_end_offset) == 1
    with pytest.raises(CleaningAborted):
        log.swap_cleaned(job, cleaned)
    assert not list(log.directory.glob(f"*{CLEANED_SUFFIX}"))
    assert records_in(read_all(log)) == [r for r in before if r[0] >= log._bases[0]]
    job.stop()
    with pytest.raises(CleaningAborted):
        job.clean_group(job.groups[1])
    assert not list(log.directory.glob(f"*{CLEANED_SUFFIX}"))


def _one_group_cleaned(open_log: OpenLog) -> tuple[PartitionLog, list[Record], int]:
    """A log of one sealed segment and the active one, the sealed one cleaned (not swapped)."""
    log = open_log(**COMPACT)
    fill(log, 9)
    assert len(log._segments) == 2
    before = records_in(read_all(log))
    job = log.plan_cleaning(10_000, log.log_end_offset, {})
    assert job is not None
    job.build_offset_map()
    (group,) = job.groups
    job.clean_group(group)
    crash(log)
    return log, before, log._bases[1]


def test_crash_before_the_swap_commits_drops_the_cleaned_files(
    open_log: OpenLog, caplog: pytest.LogCaptureFixture
) -> None:
    log, before, _ = _one_group_cleaned(open_log)
    with caplog.at_level(logging.INFO):
        log = open_log(**COMPACT)
    assert records_in(read_all(log)) == before
    assert not list(log.directory.glob(f"*{CLEANED_SUFFIX}"))
    assert "interrupted cleaning" in caplog.text


@pytest.mark.parametrize("stage", ["committed", "old deleted", "index renamed"])
def test_crash_after_the_swap_commits_completes_it(
    open_log: OpenLog, caplog: pytest.LogCaptureFixture, stage: str
) -> None:
    log, before, end = _one_group_cleaned(open_log)
    directory = log.directory
    cleaned = segment_files(directory, 0, CLEANED_SUFFIX)
    swap = segment_files(directory, 0, SWAP_SUFFIX)
    for path, to in zip(cleaned, swap, strict=True):
        if path.exists():  # no txn index: no aborted transaction
            path.rename(to)
    if stage != "committed":
        for path in segment_files(directory, 0):
            path.unlink(missing_ok=True)
    if stage == "index renamed":
        swap[0].rename(segment_files(directory, 0)[0])
    with caplog.at_level(logging.WARNING):
        log = open_log(**COMPACT)
    assert records_in(read_all(log)) == compacted(before, end)
    assert not list(directory.glob(f"*{SWAP_SUFFIX}"))
    assert "completed the swap" in caplog.text
    assert log.log_end_offset == before[-1][0] + 1


def test_compacted_topics_refuse_records_without_a_key(open_log: OpenLog) -> None:
    for policy in ("compact", "delete,compact"):
        log = open_log(cleanup_policy=policy)
        end = log.log_end_offset
        for keys in ([None], [b"k", None]):
            batch = make_batch([b"v"] * len(keys), keys=keys, codec=Compression.GZIP)
            with pytest.raises(RecordError) as e:
                log.append_as_leader(batch, 0, 1)
            assert e.value.code == ErrorCode.invalid_record
            assert "Compacted topic cannot accept message without key in topic partition " in str(
                e.value.message
            )
        assert log.log_end_offset == end
        assert log.append_as_leader(make_batch([b"v"], keys=[b"k"]), 0, 1).base_offset == end
        log.close()
    assert open_log(cleanup_policy="delete").append_as_leader(make_batch([b"v"]), 0, 1)


def test_followers_take_the_gaps_of_a_compacted_leader(open_log: OpenLog, tmp_path: Path) -> None:
    leader = open_log(**COMPACT)
    fill(leader, 60)
    clean(leader)
    with StateStore(tmp_path / "follower-state") as store:
        follower = PartitionLog.open(tmp_path / "follower", LogConfig(**COMPACT), store, "f")
        offset = 0
        while offset < leader.log_end_offset:
            data = leader.read(offset, 500, leader.log_end_offset, True)
            follower.append_as_follower(data)
            offset = follower.log_end_offset
        assert records_in(read_all(follower)) == records_in(read_all(leader))
        with pytest.raises(UnexpectedAppendOffsetError):
            follower.append_as_follower(leader.read(0, 500, leader.log_end_offset, True))
        follower.close()


def test_plan_needs_a_compacted_log_with_dirty_sealed_segments(open_log: OpenLog) -> None:
    log = open_log(cleanup_policy="compact")
    fill(log, 30)  # all in the active segment
    assert log.plan_cleaning(10_000, log.log_end_offset, {}) is None
    log.config = dataclasses.replace(log.config, segment_bytes=1_000)
    fill(log, 30)
    assert log.plan_cleaning(10_000, log.log_end_offset, {}) is not None
    log.config = dataclasses.replace(log.config, cleanup_policy="delete")
    assert log.plan_cleaning(10_000, log.log_end_offset, {}) is None


def test_log_config_reads_the_compaction_settings() -> None:
    config = LogConfig.from_configs(
        BrokerConfig(),
        {
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.25",
            "delete.retention.ms": "5",
            "min.compaction.lag.ms": "6",
            "max.compaction.lag.ms": "7",
        },
    )
    assert config.compact
    assert config.delete
    assert config.min_cleanable_dirty_ratio == 0.25
    assert (config.delete_retention_ms, config.min_compaction_lag_ms) == (5, 6)
    assert config.max_compaction_lag_ms == 7
    defaults = LogConfig.from_configs(BrokerConfig(), {"cleanup.policy": "compact"})
    assert (defaults.min_cleanable_dirty_ratio, defaults.delete_retention_ms) == (0.5, 86400000)
    assert defaults.compact
    assert not defaults.delete
    with pytest.raises(ValueError, match=r"min\.cleanable\.dirty\.ratio"):
        LogConfig(min_cleanable_dirty_ratio=1.5)
