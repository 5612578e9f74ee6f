from __future__ import annotations

import errno
import logging
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.records.readers import read_batch

from dataplane.log import LogConfig, PartitionLog, StateStore, validate
from dataplane.log.recovery import load_segments
from dataplane.log.segment import LogSegment
from tests.unit.log import appender
from tests.unit.log.conftest import OpenLog
from tests.unit.log.helpers import (
    append,
    crash,
    descriptors_left,
    open_descriptors,
    read_all,
)

CONFIG: dict[str, Any] = {"segment_bytes": 2_000, "index_interval_bytes": 300}
REPO = Path(__file__).resolve().parents[3]


def active_log_file(log: PartitionLog) -> Path:
    return max(log.directory.glob("*.log"))


def test_torn_tail_is_cut_with_a_warning(
    open_log: OpenLog, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(**CONFIG)
    written = append(log, 12)
    crash(log)
    path = active_log_file(log)
    os.truncate(path, path.stat().st_size - 10)  # the last write() was cut short
    with caplog.at_level(logging.WARNING):
        log = open_log(**CONFIG)
    assert log.log_end_offset == 33
    assert read_all(log) == b"".join(written[:11])
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "topic-0" in warning
    assert "offset 33" in warning
    assert f"cut {len(written[-1]) - 10}" in warning
    assert append(log, 1)
    assert log.log_end_offset == 36


def test_corrupt_last_batch_is_cut(open_log: OpenLog) -> None:
    log = open_log(**CONFIG)
    written = append(log, 12)
    crash(log)
    path = active_log_file(log)
    with open(path, "r+b") as f:
        f.seek(-5, os.SEEK_END)
        f.write(b"XXXXX")
    log = open_log(**CONFIG)
    assert log.log_end_offset == 33
    assert read_all(log) == b"".join(written[:11])


def test_corruption_in_an_unflushed_segment_drops_the_later_ones(open_log: OpenLog) -> None:
    log = open_log(**CONFIG, flush_messages=1)
    written = append(log, 4)  # fsynced: before the recovery point
    log.config = LogConfig(**CONFIG)  # back to never fsyncing
    written += append(log, 12)
    log._wait_for_fsync()
    assert len(log._segments) > 3
    crash(log)
    # make the recovery point lag (as if the rolls' fsyncs had not happened) and corrupt the
    # first segment after it
    damaged = log._segments[1]
    log._store.put_int("log/topic-0/recovery-point", damaged.base_offset)
    with open(damaged.path, "r+b") as f:
        f.seek(100)
        f.write(b"\xff" * 4)
    log = open_log(**CONFIG)
    assert len(log._segments) == 2
    assert log.log_end_offset == damaged.base_offset  # its first batch was the damaged one
    assert read_all(log) == b"".join(written)[: os.path.getsize(log._segments[0].path)]


@pytest.mark.parametrize("damage", ["missing", "garbage", "stray-entry", "bad-size"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_bad_index_is_rebuilt(open_log: OpenLog, damage: str, suffix: str) -> None:
    log = open_log(**CONFIG)
    written = append(log, 30)
    log.close()
    first = log._segments[0]
    good = first.offset_index.path.read_bytes(), first.time_index.path.read_bytes()
    assert good[0]
    assert good[1]
    path = first.path.with_suffix(suffix)
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(bytes(range(200, 248)))
    elif damage == "stray-entry":  # an entry past the end of the log
        entry = struct.pack(">II", 10_000, 1 << 20) if suffix == ".index" else b""
        entry = entry or struct.pack(">qI", 1 << 50, 10_000)
        path.write_bytes(path.read_bytes() + entry)
    else:
        path.write_bytes(path.read_bytes() + b"\x00")
    log = open_log(**CONFIG)
    assert read_all(log) == b"".join(written)
    rebuilt = log._segments[0]
    assert (rebuilt.offset_index.path.read_bytes(), rebuilt.time_index.path.read_bytes()) == good


@pytest.mark.parametrize("clean", [True, False], ids=["closed", "crashed"])
@pytest.mark.parametrize("opening", [True, False], ids=["opening", "loading"])
def test_segments_opened_before_descriptors_ran_out_are_closed(
    open_log: OpenLog, clean: bool, opening: bool
) -> None:
    # Descriptors run out part-way: while opening the segments (3 to spare), or once they are
    # all open (one each), while reading their indexes or scanning them.
    log = open_log(**CONFIG)
    append(log, 30)
    if clean:
        log.close()
    else:
        crash(log)
    segments = len(log._segments)
    assert segments > 5
    before = open_descriptors()
    with (
        descriptors_left(3 if opening else segments),
        pytest.raises(OSError, match="Too many open files") as refused,
    ):
        load_segments(log.directory, 300, 0, clean, "topic-0", 10_000)
    assert refused.value.errno == errno.EMFILE
    assert open_descriptors() == before
    log = open_log(**CONFIG)  # the files are fine: it opens once descriptors are free
    assert len(log._segments) == segments


def test_clean_close_skips_the_scan(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(**CONFIG)
    written = append(log, 30)
    log.close()

    def no_scan(self: LogSegment) -> int:
        raise AssertionError(f"scanned {self.path.name}")

    monkeypatch.setattr(LogSegment, "recover", no_scan)
    log = open_log(**CONFIG)
    assert read_all(log) == b"".join(written)
    assert log.offset_for_timestamp(0) == (0, 1_000)


def test_unclean_open_scans_from_the_recovery_point(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(**CONFIG)
    written = append(log, 30)
    log._wait_for_fsync()
    assert log.recovery_point == log._bases[-1]
    crash(log)
    scanned = []
    recover = LogSegment.recover

    def spy(self: LogSegment) -> int:
        scanned.append(self.base_offset)
        return recover(self)

    monkeypatch.setattr(LogSegment, "recover", spy)
    log = open_log(**CONFIG)
    assert scanned == [log._bases[-1]]
    assert read_all(log) == b"".join(written)


def test_lost_log_start_offset_data(open_log: OpenLog) -> None:
    """The log ends before its recorded start: Kafka starts afresh at the start offset."""
    log = open_log(**CONFIG)
    append(log, 10)
    log.delete_records_before(30)
    crash(log)
    for path in log.directory.glob("*.log"):
        os.truncate(path, 0)
    log = open_log(**CONFIG)
    assert (log.log_start_offset, log.log_end_offset) == (30, 30)


EPOCHS_KEY = "log/topic-0/leader-epochs"


@pytest.mark.parametrize(
    "damage",
    [
        lambda store: store.delete(EPOCHS_KEY),  # a lost state store
        lambda store: store.put_bytes(EPOCHS_KEY, b"[[1,0],[3,"),
        lambda store: store.put_json(EPOCHS_KEY, [[3, 6], [1, 0]]),  # not increasing
        lambda store: store.put_json(EPOCHS_KEY, {"1": 0}),
    ],
    ids=["missing", "torn", "unordered", "not-a-list"],
)
@pytest.mark.parametrize("clean", [True, False], ids=["closed", "crashed"])
def test_a_lost_leader_epoch_checkpoint_is_rebuilt_from_the_batches(
    open_log: OpenLog,
    store: StateStore,
    damage: Callable[[StateStore], None],
    clean: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """OffsetForLeaderEpoch and the divergence checks of followers' fetches answer from the
    cache: without it a leader would tell every follower its log diverged before any epoch."""
    log = open_log(**CONFIG)
    append(log, 2, epoch=1)  # offsets 0-5
    append(log, 2, epoch=3)  # 6-11
    append(log, 3, epoch=4)  # 12-20
    log.start_epoch(5)
    append(log, 1, epoch=5)  # 21-23
    assert len(log._segments) > 1
    entries = [(1, 0), (3, 6), (4, 12), (5, 21)]
    assert log._epochs.entries == entries
    answers = [log.end_offset_for_epoch(epoch) for epoch in range(-1, 8)]
    owners = [log.epoch_for_offset(offset) for offset in range(24)]
    if clean:
        log.close()
    else:
        crash(log)
    damage(store)
    with caplog.at_level(logging.WARNING):
        log = open_log(**CONFIG)
    assert log._epochs.entries == entries
    assert [log.end_offset_for_epoch(epoch) for epoch in range(-1, 8)] == answers
    assert [log.epoch_for_offset(offset) for offset in range(24)] == owners
    assert "topic-0: no usable leader-epoch checkpoint; rebuilt" in caplog.text
    log.close()
    assert open_log(**CONFIG)._epochs.entries == entries  # stored again


def test_a_new_log_has_nothing_to_rebuild(
    open_log: OpenLog, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        log = open_log(**CONFIG)
    assert log._epochs.entries == []
    assert not caplog.text


@pytest.mark.timeout(120)
def test_kill_9_loses_nothing_acknowledged(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.unit.log.appender", str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acknowledged = []
    try:
        for line in proc.stdout:
            acknowledged.append(line)
            if len(acknowledged) == 3_000:  # ~12 MB: dozens of segments, mid-append
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    acknowledged += proc.stdout.readlines()  # printed before the kill, still in the pipe
    reports = [line.split() for line in acknowledged if line.endswith("\n")]
    assert len(reports) >= 3_000

    with StateStore(tmp_path / "state") as store:
        log = PartitionLog.open(tmp_path / "log", appender.CONFIG, store, "p")
        assert log.log_end_offset >= int(reports[-1][1]) + 1
        for base, last, first_value in reports:
            data = log.read(int(base), 1, log.log_end_offset, True)
            info = validate(data, None)[0]  # intact: CRC checked
            assert (info.base_offset, info.last_offset) == (int(base), int(last))
            batch, _ = read_batch(data, 0)
            assert len(batch.records) == appender.RECORDS_PER_BATCH
            assert batch.records[0].value == first_value.encode()
        log.close()
