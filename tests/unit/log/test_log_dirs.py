"""log.dirs: placement, start-up clean-up of interrupted moves, the incremental copy a move
makes, and a log whose directory fails (KAFKA_STORAGE_ERROR, the owner told once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.log import ErrorCode, LogConfig, LogError, PartitionLog, StateStore
from dataplane.log.log_dirs import (
    LogDirs,
    copy_round,
    delete_name,
    future_name,
    list_log_files,
    parse_log_dirs,
    pending_bytes,
)
from tests.unit.log.helpers import append, read_all


def test_log_dirs_parse_place_and_keep_the_state_store_in_the_first(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert parse_log_dirs(f" {a}, {b},{a}") == [a, b]
    with pytest.raises(ValueError, match="no directory"):
        parse_log_dirs(" , ")
    dirs = LogDirs.from_config(f"{a},{b}")
    dirs.create_all()
    assert dirs.state_dir == a / ".state"
    counts = {dirs.dirs[0].path: 2, dirs.dirs[1].path: 1}
    assert dirs.choose("t-0", lambda d: counts[d.path]).path == b  # the fewest logs
    counts[b] = 2
    assert dirs.choose("t-0", lambda d: counts[d.path]).path == a  # a tie: the first
    dirs.preferred["t-1"] = dirs.dirs[1]  # AlterReplicaLogDirs before the replica existed
    assert dirs.choose("t-1", lambda d: counts[d.path]).path == b
    (b / "t-2").mkdir()
    assert dirs.locate("t-2") is dirs.dirs[1]
    assert dirs.locate("t-3") is None
    assert dirs.fail(dirs.dirs[1], OSError("disk gone"))
    assert not dirs.fail(dirs.dirs[1], OSError())
    assert dirs.locate("t-2") is None  # an offline directory holds nothing anymore
    assert [d.path for d in dirs.online()] == [a]
    assert dirs.choose("t-4", lambda d: 0).path == a


def test_a_dir_that_cannot_be_created_is_offline_unless_it_is_the_first(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    dirs = LogDirs.from_config(f"{tmp_path / 'a'},{blocker / 'b'}")
    dirs.create_all()
    assert [d.online for d in dirs.dirs] == [True, False]
    with pytest.raises(OSError, match="Not a directory"):
        LogDirs.from_config(f"{blocker / 'a'}").create_all()


def test_start_up_finishes_or_drops_interrupted_moves(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    dirs = LogDirs([a, b])
    dirs.create_all()
    (a / "t-0").mkdir()  # source still there: the copy in b is unfinished
    (b / future_name("t-0")).mkdir()
    (b / future_name("t-1")).mkdir()  # source renamed away: the copy is the log
    (a / delete_name("t-1")).mkdir()
    dirs.clean_up_moves()
    assert sorted(p.name for p in a.iterdir()) == ["t-0"]
    assert sorted(p.name for p in b.iterdir()) == ["t-1"]


def test_copy_rounds_converge_and_start_over_after_a_truncation(
    tmp_path: Path, store: StateStore
) -> None:
    source = tmp_path / "a" / "t-0"
    dest = tmp_path / "b" / "t-0.x-future"
    plog = PartitionLog.open(source, LogConfig(segment_bytes=4000), store, "t-0")
    append(plog, 20)
    copied: dict = {}
    listing = list_log_files(source)
    assert pending_bytes(listing, copied, False) >= plog.size
    copy_round(source, dest, listing, copied, False)
    assert pending_bytes(list_log_files(source), copied, True) == 0
    append(plog, 1)  # only the active segment's log grew: only its new bytes are pending
    grown = pending_bytes(list_log_files(source), copied, True)
    assert 0 < grown < 1000
    rewrites = plog.rewrites
    plog.truncate_to(plog.log_end_offset - 10)
    append(plog, 2)
    assert plog.rewrites == rewrites + 1  # a move must then copy changed files whole
    plog.close()
    copy_round(source, dest, list_log_files(source), copied, False)
    for name, stat in list_log_files(source).items():
        assert (dest / name).read_bytes() == (source / name).read_bytes(), name
        assert copied[name] == stat
    moved = PartitionLog.open(dest, LogConfig(segment_bytes=4000), store, "t-0")
    reopened = PartitionLog.open(source, LogConfig(segment_bytes=4000), store, "t-1")
    assert read_all(moved) == read_all(reopened)
    moved.close()
    reopened.close()


def test_an_io_error_fails_the_log_once_and_every_later_call(
    tmp_path: Path, store: StateStore
) -> None:
    directory = tmp_path / "a" / "t-0"
    plog = PartitionLog.open(directory, LogConfig(segment_bytes=1000), store, "t-0")
    failures: list[OSError] = []
    plog.on_failure = lambda log, error: failures.append(error)
    append(plog, 1)
    directory.rename(tmp_path / "gone")  # the next segment cannot be created
    with pytest.raises(LogError) as e:
        append(plog, 5)
    assert e.value.code == ErrorCode.kafka_storage_error
    assert len(failures) == 1
    assert isinstance(plog.failure, OSError)
    for call in (
        lambda: plog.read(0, 100, 1, True),
        lambda: plog.truncate_to(0),
        lambda: plog.enforce_retention(0, 0),
        plog.flush,
    ):
        with pytest.raises(LogError) as e:
            call()
        assert e.value.code == ErrorCode.kafka_storage_error
    assert len(failures) == 1
    plog.close()  # abandons it: nothing written
