"""Compaction of transactional data (Kafka's CleanedTransactionMetadata): aborted records go,
markers go a delete.retention.ms after their transaction has no batch left, and nothing at or
above the last stable offset is touched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.log import LogConfig, StateStore, validate
from dataplane.log.batch import ATTR_TRANSACTIONAL, BatchInfo
from dataplane.log.cleaner import CleaningJob
from dataplane.log.control import build_marker_batch
from tests.unit.log.batches import make_batch
from tests.unit.log.helpers import clean, read_all, records_in
from tests.unit.replica.producers import Replica

RETENTION_MS = 1_000
CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=700,
    index_interval_bytes=100,
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=RETENTION_MS,
)
NOW = 1_000_000


class Writer:
    """Keyed writes to a compacted partition, transactional or not."""

    def __init__(self, replica: Replica) -> None:
        self.r = replica
        self.seqs: dict[int, int] = {}
        self.filler = 0

    def put(self, key: bytes, value: bytes, pid: int = -1, *, txn: bool = False) -> int:
        seq = self.seqs.get(pid, 0) if pid >= 0 else -1
        if pid >= 0:
            self.seqs[pid] = seq + 1
        batch = make_batch(
            [value],
            keys=[key],
            timestamps=[NOW],
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq,
            extra_attributes=ATTR_TRANSACTIONAL if txn else 0,
        )
        return self.r.produce(batch, NOW).base_offset

    def end(self, pid: int, commit: bool) -> int:
        self.r.write_as_coordinator(build_marker_batch(pid, 0, commit, 0, NOW), NOW)
        return self.r.log.log_end_offset - 1

    def fill(self, count: int = 12) -> None:
        """Distinct keys, to roll segments and make the log dirty."""
        for _ in range(count):
            self.filler += 1
            self.put(f"f{self.filler}".encode(), b"x" * 40)


def compact(r: Replica, now_ms: int = NOW) -> CleaningJob | None:
    """What the broker's cleaner does: bounded by the LSO, keeping active producers' state."""
    producers = {
        pid: (e.batches[-1].last_offset if e.batches else -1, e.epoch)
        for pid, e in r.producers.producers.items()
    }
    first = r.producers.first_unstable_offset
    bound = r.log.log_end_offset if first is None else first
    return clean(r.log, now_ms, upper_bound=bound, producers=producers)


def markers(r: Replica) -> dict[int, BatchInfo]:
    return {
        b.base_offset: b for b in validate(read_all(r.log), None, from_client=False) if b.is_control
    }


@pytest.fixture
def replica(tmp_path: Path) -> Iterator[Replica]:
    store = StateStore(tmp_path / "state")
    r = Replica(tmp_path / "p", store, "p", CONFIG)
    yield r
    r.close()
    store.close()


def test_aborted_data_goes_and_its_marker_after_the_delete_horizon(replica: Replica) -> None:
    w = Writer(replica)
    w.put(b"a", b"old")
    aborted = w.put(b"a", b"aborted", 1, txn=True)
    w.put(b"b", b"aborted", 1, txn=True)
    w.put(b"c", b"committed", 2, txn=True)
    abort = w.end(1, commit=False)
    commit = w.end(2, commit=True)
    w.fill()
    w.put(b"later", b"1", 1)  # the producers' last batches, past the cleaned range
    w.put(b"later", b"2", 2)
    w.fill()
    assert replica.log.aborted_transactions(0, abort + 1) == [(1, aborted)]

    assert compact(replica) is not None
    kept = {(k, v) for _, k, v in records_in(read_all(replica.log))}
    assert (b"a", b"old") in kept  # the aborted write did not shadow it
    assert (b"c", b"committed") in kept
    assert not {(b"a", b"aborted"), (b"b", b"aborted")} & kept
    # Both markers stay this time: the cleaning met batches of their transactions. The aborted
    # transaction stays indexed in the cleaned segment.
    assert {abort, commit} <= set(markers(replica))
    assert replica.log.aborted_transactions(0, abort + 1) == [(1, aborted)]

    w.fill()
    assert compact(replica) is not None
    found = markers(replica)
    assert found[abort].delete_horizon_ms == NOW + RETENTION_MS  # its transaction is empty now
    assert found[commit].delete_horizon_ms is None  # its record is still there
    assert replica.log.aborted_transactions(0, abort + 1) == []

    w.fill()
    assert compact(replica, NOW + RETENTION_MS - 1) is not None
    assert abort in markers(replica)
    w.fill()
    assert compact(replica, NOW + RETENTION_MS) is not None
    found = markers(replica)
    assert abort not in found or found[abort].record_count == 0
    assert commit in found
    # The producer state rebuilt from the cleaned log has no open transaction.
    replica.reopen(clean=False)
    assert replica.producers.first_unstable_offset is None


def test_a_commit_marker_goes_once_its_records_are_compacted_away(replica: Replica) -> None:
    w = Writer(replica)
    w.put(b"k", b"1", 1, txn=True)
    commit = w.end(1, commit=True)
    w.put(b"k", b"2")  # shadows the transaction's only record
    w.put(b"later", b"x", 1)
    w.fill()
    compact(replica)  # the emptied batch goes; the marker saw it, so it stays
    assert markers(replica)[commit].delete_horizon_ms is None
    w.fill()
    compact(replica)
    assert markers(replica)[commit].delete_horizon_ms == NOW + RETENTION_MS
    w.fill()
    compact(replica, NOW + RETENTION_MS)
    assert commit not in markers(replica) or markers(replica)[commit].record_count == 0


def test_nothing_at_or_above_the_lso_is_cleaned(replica: Replica) -> None:
    w = Writer(replica)
    w.fill(6)
    first = w.put(b"a", b"open", 1, txn=True)  # never ends
    w.fill(30)
    assert len(replica.log._bases) > 3
    job = compact(replica)
    assert job is not None
    assert job.end_offset <= first
    assert (first, b"a", b"open") in records_in(read_all(replica.log))
    assert replica.producers.open_transactions() == [(1, 0, first)]
