"""Transaction indexes: the ``.txnindex`` file format, the search a read_committed fetch makes,
and how the indexes follow the log through rolls, truncation, retention and reopening."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from dataplane.log import PartitionLog
from dataplane.log.control import build_marker_batch
from dataplane.log.index import CorruptIndexError
from dataplane.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from tests.unit.log.conftest import OpenLog
from tests.unit.log.helpers import append, crash

SMALL = {"segment_bytes": 1_000, "index_interval_bytes": 200}


# -- the file ----------------------------------------------------------------------------------


def test_entries_are_kafkas_34_bytes_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}.txnindex"
    index = TransactionIndex(path)
    assert len(index) == 0
    assert not path.exists()  # no file until the first entry
    index.append(AbortedTxn(7, 10, 20, 21))
    index.append(AbortedTxn(8, 15, 30, 40))
    raw = path.read_bytes()
    assert len(raw) == 2 * ENTRY_SIZE == 68
    assert struct.unpack_from(">hqqqq", raw, 0) == (0, 7, 10, 20, 21)
    index.close()
    again = TransactionIndex(path)
    assert again.entries == [AbortedTxn(7, 10, 20, 21), AbortedTxn(8, 15, 30, 40)]
    assert again.last_offset == 30


def test_entries_must_come_in_marker_order(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "x.txnindex")
    index.append(AbortedTxn(1, 0, 10, 11))
    with pytest.raises(ValueError, match="does not follow"):
        index.append(AbortedTxn(2, 0, 10, 11))


@pytest.mark.parametrize(
    "data",
    [b"\x00" * 33, struct.pack(">hqqqq", 1, 7, 0, 1, 2), struct.pack(">hqqqq", 0, 7, 5, 1, 2)],
)
def test_a_corrupt_file_is_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.txnindex"
    path.write_bytes(data)
    with pytest.raises(CorruptIndexError):
        _ = TransactionIndex(path).entries


def test_collect_finds_the_overlapping_entries_and_knows_when_to_stop(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "x.txnindex")
    a, b, c = AbortedTxn(1, 0, 10, 5), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 25, 30, 31)
    for txn in (a, b, c):
        index.append(txn)
    assert index.collect(0, 100) == ([a, b, c], False)
    assert index.collect(11, 100) == ([b, c], False)  # a ended before the fetch
    assert index.collect(0, 5) == ([a], True)  # b starts at the bound; a's LSO reaches it
    assert index.collect(0, 6) == ([a, b], True)
    # b's LSO (21) reaches the bound: nothing after it can start below 21.
    assert index.collect(0, 21) == ([a, b], True)
    assert index.collect(31, 40) == ([], False)
    # An entry before the fetch offset may still complete the search.
    assert index.collect(25, 21) == ([], True)


def test_truncate_drops_entries_from_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    index = TransactionIndex(path)
    for i in range(3):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.truncate_to(15)  # the marker at 15 goes
    assert [t.last_offset for t in index.entries] == [5]
    assert path.stat().st_size == ENTRY_SIZE
    index.append(AbortedTxn(9, 12, 16, 17))
    assert [t.last_offset for t in TransactionIndex(path).entries] == [5, 16]
    index.truncate_to(0)
    assert not path.exists()
    assert len(index) == 0


# -- in the log --------------------------------------------------------------------------------


def _txn_files(log: PartitionLog) -> list[str]:
    return sorted(p.name for p in log.directory.glob("*.txnindex"))


def test_entries_go_to_the_segment_of_their_marker(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    append(log, 20)  # several segments of 3-record batches
    assert len(log._bases) > 3
    marker_a, marker_b = log._bases[1] + 1, log._bases[-1] + 1
    assert log.append_aborted_txn(7, 2, marker_a, 10)  # LSO at 10: txn of pid 8 open then
    assert log.append_aborted_txn(8, 10, marker_b, marker_b + 1)
    assert _txn_files(log) == [f"{log._bases[1]:020d}.txnindex", f"{log._bases[-1]:020d}.txnindex"]
    end = log.log_end_offset
    assert log.aborted_transactions(0, end) == [(7, 2), (8, 10)]
    assert log.aborted_transactions(marker_a + 1, end) == [(8, 10)]
    assert log.aborted_transactions(0, 10) == [(7, 2)]  # 8's data starts at the bound
    assert log.aborted_transactions(0, 2) == []
    assert log.aborted_transactions(end, end) == []


def test_a_search_from_an_early_segment_reaches_a_later_marker(open_log: OpenLog) -> None:
    """A long transaction: its data in segment 0, its marker segments later."""
    log = open_log(**SMALL)
    append(log, 20)
    marker = log._bases[-1] + 2
    log.append_aborted_txn(5, 1, marker, marker + 1)
    assert log.aborted_transactions(3, 4) == [(5, 1)]


def test_an_entry_already_indexed_is_skipped(open_log: OpenLog) -> None:
    """What makes a producer-state replay index each abort once."""
    log = open_log(**SMALL)
    append(log, 10)
    assert log.append_aborted_txn(1, 0, 10, 11)
    assert not log.append_aborted_txn(1, 0, 10, 11)
    assert not log.append_aborted_txn(2, 0, 5, 6)  # older than the newest entry
    assert not log.append_aborted_txn(2, 0, log.log_end_offset, 99)  # no such marker
    assert log.aborted_transactions(0, log.log_end_offset) == [(1, 0)]


def test_indexes_survive_a_clean_reopen(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    append(log, 20)
    log.append_aborted_txn(1, 0, 4, 5)
    log.append_aborted_txn(2, 7, log._bases[-1], log._bases[-1] + 1)
    expected = log.aborted_transactions(0, log.log_end_offset)
    log.close()
    log = open_log(**SMALL)
    assert log.txn_index_rebuild_from is None
    assert log.aborted_transactions(0, log.log_end_offset) == expected
    assert not log.append_aborted_txn(2, 7, log._bases[-1], 0)


def test_truncation_drops_the_entries_of_the_markers_it_removes(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    append(log, 20)
    bases = list(log._bases)
    log.append_aborted_txn(1, 0, 4, 5)
    log.append_aborted_txn(2, 5, bases[2] + 1, bases[2] + 2)
    log.append_aborted_txn(3, 6, bases[-1] + 1, bases[-1] + 2)
    log.truncate_to(bases[2] + 1)  # the batch holding bases[2]+1 goes too
    assert log.aborted_transactions(0, 1 << 40) == [(1, 0)]
    assert _txn_files(log) == [f"{0:020d}.txnindex"]
    # The same offsets, appended again, are indexed again.
    append(log, 3)
    assert log.append_aborted_txn(2, 5, bases[2] + 1, bases[2] + 2)
    log.truncate_fully_and_start_at(500)
    assert _txn_files(log) == []
    assert log.aborted_transactions(500, 600) == []


def test_retention_deletes_indexes_with_their_segments(open_log: OpenLog) -> None:
    log = open_log(retention_bytes=3_000, **SMALL)
    append(log, 30)
    log.append_aborted_txn(1, 0, 4, 5)
    log.append_aborted_txn(2, 5, log._bases[-1], log._bases[-1] + 1)
    assert log.enforce_retention(10_000, log.log_end_offset) > 0
    assert log.aborted_transactions(log.log_start_offset, log.log_end_offset) == [(2, 5)]
    assert _txn_files(log) == [f"{log._bases[-1]:020d}.txnindex"]


def test_crash_recovery_drops_the_indexes_it_cannot_trust(open_log: OpenLog) -> None:
    """Indexes of recovered segments go; the offset to rebuild from is that of the first one
    holding a marker (segments without one have no entry to lose)."""
    log = open_log(**SMALL)
    append(log, 10)
    log.flush()
    trusted_end = log.log_end_offset
    log.append_aborted_txn(1, 0, 4, 5)  # in a trusted segment: kept
    append(log, 5)
    crash(log)
    log = open_log(**SMALL)
    assert log.txn_index_rebuild_from is None  # no marker past the recovery point
    assert log.aborted_transactions(0, 1 << 40) == [(1, 0)]
    log.append_as_leader(build_marker_batch(9, 0, False, 0, 10_000), 0, 10_000, from_client=False)
    marker = log.log_end_offset - 1
    assert log.append_aborted_txn(9, trusted_end, marker, marker + 1)
    crash(log)
    log = open_log(**SMALL)
    recovered = log._bases[[i for i, b in enumerate(log._bases) if b <= marker][-1]]
    assert log.txn_index_rebuild_from is not None
    assert log.txn_index_rebuild_from <= recovered
    assert log.aborted_transactions(0, 1 << 40) == [(1, 0)]  # 9's entry awaits the rebuild
    assert log.append_aborted_txn(9, trusted_end, marker, marker + 1)
    log.txn_index_rebuilt()
    assert log.txn_index_rebuild_from is None


def test_a_torn_index_of_a_trusted_segment_is_rebuilt(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    append(log, 20)
    log.append_aborted_txn(1, 0, 4, 5)
    log.close()
    path = log.directory / f"{0:020d}.txnindex"
    path.write_bytes(path.read_bytes()[:-1])
    log = open_log(**SMALL)
    assert log.txn_index_rebuild_from == 0
    assert not path.exists()
