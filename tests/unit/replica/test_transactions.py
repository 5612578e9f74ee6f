"""Transactions in a partition: markers written by the leader and replicated to followers, the
last stable offset, the aborted-transaction index a read_committed fetch reads, and how all of
it survives restarts, crashes and truncation, and the KIP-890 verification guard that keeps a
late batch from opening a transaction that already ended."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from dataplane.log import LogConfig, PartitionLog, StateStore
from dataplane.log.control import build_marker_batch
from dataplane.metadata_cache import PartitionInfo
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.partition import Partition, now_ms
from dataplane.replica.producer_state import ProducerStateManager
from tests.unit.log.helpers import crash
from tests.unit.replica.producers import NEVER, NOW, idem, plain

ME, B = 1, 2
SMALL = LogConfig(segment_bytes=600, index_interval_bytes=100)


class Node:
    """A Partition over a real log that can be closed, crashed and reopened."""

    def __init__(self, directory: Path, store: StateStore, *, isr: tuple[int, ...] = (ME,)):
        self.directory, self.store = directory, store
        self.isr = isr
        self.leader = ME
        self.epoch = 0
        self.open()

    def open(self) -> None:
        plog = PartitionLog.open(self.directory, SMALL, self.store, self.directory.name)
        producers = ProducerStateManager.load(plog, NEVER)
        self.p = Partition("t", b"\x01" * 16, 0, plog, producers, ME, lambda *_: None)
        self.epoch += 1
        self.p.update(PartitionInfo(0, (ME, B), self.isr, self.leader, self.epoch, self.epoch))

    def reopen(self, *, clean: bool = True) -> None:
        if clean:
            self.p.close()
        else:
            crash(self.p.log)
        self.open()

    def txn(self, pid: int, seq: int, count: int = 1, epoch: int = 0) -> int:
        """A transactional batch, verified as the produce handler does; its base offset."""
        guard = self.p.maybe_start_transaction_verification(pid, seq, epoch)
        return self.p.append(txn_batch(pid, seq, count, epoch), NOW, guard)[0]

    def end(self, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        """The coordinator's marker; its offset."""
        return self.p.write_marker(pid, epoch, commit, coordinator_epoch, now_ms()).base_offset

    def aborted(self, start: int = 0) -> list[tuple[int, int]]:
        return self.p.log.aborted_transactions(start, self.p.last_stable_offset)

    def index_entries(self) -> int:
        return sum(p.stat().st_size for p in self.directory.glob("*.txnindex")) // 34


def txn_batch(pid: int, seq: int, count: int = 1, epoch: int = 0) -> bytearray:
    return bytearray(idem(pid, epoch, seq, count, transactional=True))


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Callable[..., Node]]:
    store = StateStore(tmp_path / "state")
    made: list[Node] = []

    def make(name: str = "leader", **kwargs: object) -> Node:
        made.append(Node(tmp_path / f"{name}-0", store, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for n in made:
        if not n.p.log._closed:
            n.p.close()
    store.close()


def test_lso_stops_at_the_oldest_open_transaction(node: Callable[..., Node]) -> None:
    n = node()
    p = n.p
    first1 = n.txn(1, 0, 2)  # offsets 0-1
    p.append(bytearray(plain(2)), NOW)  # 2-3: not transactional, readable once committed below
    first2 = n.txn(2, 0)  # 4
    n.txn(1, 2)  # 5
    assert p.high_watermark == p.log.log_end_offset == 6
    assert p.last_stable_offset == first1 == 0
    assert p.producers.open_transactions() == [(1, 0, first1), (2, 0, first2)]
    n.end(1, commit=True)  # 6
    assert p.last_stable_offset == first2 == 4
    assert n.aborted() == []
    n.end(2, commit=False)  # 7
    assert p.last_stable_offset == p.high_watermark == 8
    assert p.producers.first_unstable_offset is None
    assert n.aborted() == [(2, first2)]
    assert n.aborted(start=5) == [(2, first2)]  # the marker at 7 is past 5
    assert n.aborted(start=8) == []


def test_a_completed_transaction_holds_the_lso_until_its_marker_is_replicated(
    node: Callable[..., Node],
) -> None:
    n = node(isr=(ME, B))
    p = n.p
    p.record_follower_fetch(B, 0, now_ms())
    first = n.txn(1, 0, 3)
    p.record_follower_fetch(B, 2, now_ms())
    assert (p.high_watermark, p.last_stable_offset) == (2, 0)
    marker = n.end(1, commit=True)
    p.record_follower_fetch(B, marker, now_ms())  # the follower has the data, not the marker
    assert (p.high_watermark, p.last_stable_offset) == (marker, first)
    p.record_follower_fetch(B, marker + 1, now_ms())
    assert p.last_stable_offset == p.high_watermark == marker + 1


def test_write_marker_checks(node: Callable[..., Node]) -> None:
    n = node()
    p = n.p
    n.txn(1, 0, epoch=3)
    end = p.log.log_end_offset

    def refused(pid: int, epoch: int, coordinator_epoch: int) -> ErrorCode:
        with pytest.raises(KafkaError) as e:
            p.write_marker(pid, epoch, True, coordinator_epoch, 0)
        assert p.log.log_end_offset == end  # nothing written
        return e.value.code

    assert refused(1, 2, 0) == ErrorCode.invalid_producer_epoch
    n.end(1, commit=False, epoch=3, coordinator_epoch=5)
    end += 1
    assert refused(1, 3, 4) == ErrorCode.transaction_coordinator_fenced
    n.end(1, commit=True, epoch=4, coordinator_epoch=5)  # a bumped epoch (TV2) is fine
    end += 1
    entry = p.producers.last_entry(1)
    assert entry is not None
    assert (entry.epoch, entry.coordinator_epoch) == (4, 5)
    # A marker for a producer this partition never saw is written (nothing to end).
    n.end(9, commit=False)
    assert n.aborted() == [(1, 0)]
    p.update(PartitionInfo(0, (ME, B), (ME, B), B, n.epoch + 1, n.epoch + 1))
    with pytest.raises(KafkaError) as e:
        p.write_marker(1, 4, True, 5, 0)
    assert e.value.code == ErrorCode.not_leader_or_follower


def test_open_transaction_checks(node: Callable[..., Node]) -> None:
    n = node()
    p = n.p
    assert not p.has_open_transaction(1, 0)
    n.txn(1, 0)
    assert p.has_open_transaction(1, 0)
    assert not p.has_open_transaction(1, 1)
    with pytest.raises(KafkaError) as e:  # Kafka: a transactional producer stays transactional
        p.append(bytearray(idem(1, 0, 1)), NOW)
    assert e.value.code == ErrorCode.invalid_txn_state
    n.end(1, commit=True)
    assert not p.has_open_transaction(1, 0)
    p.append(bytearray(idem(1, 0, 1)), NOW)


def test_a_marker_wakes_read_committed_polls(node: Callable[..., Node]) -> None:
    n = node()
    n.txn(1, 0)
    event = anyio.Event()
    n.p.watch(event)
    n.end(1, commit=True)
    assert event.is_set()


def test_open_transactions_and_the_index_survive_a_clean_restart(
    node: Callable[..., Node],
) -> None:
    n = node()
    n.txn(1, 0)
    n.txn(2, 0)
    n.end(2, commit=False, coordinator_epoch=7)
    n.txn(3, 0, 5)
    lso, opened = n.p.last_stable_offset, n.p.producers.open_transactions()
    n.reopen()
    assert n.p.producers.open_transactions() == opened == [(1, 0, 0), (3, 0, 3)]
    assert n.p.last_stable_offset == lso == 0
    entry = n.p.producers.last_entry(2)
    assert entry is not None
    assert entry.coordinator_epoch == 7
    n.end(1, commit=True)
    assert n.p.last_stable_offset == 3
    assert n.p.log.aborted_transactions(0, 100) == [(2, 1)]
    assert n.index_entries() == 1


def test_crash_recovery_rebuilds_the_index_once(node: Callable[..., Node]) -> None:
    n = node()
    for pid in range(1, 31):  # enough to roll segments; every third transaction aborts
        n.txn(pid, 0, 2)
        n.end(pid, commit=pid % 3 != 0)
        if pid == 10:
            n.p.producers.snapshot()
    expected = n.p.log.aborted_transactions(0, n.p.last_stable_offset)
    assert len(expected) == 10
    assert n.index_entries() == 10
    assert len(n.p.log._bases) > 3
    crash(n.p.log)
    plog = PartitionLog.open(n.directory, SMALL, n.store, n.directory.name)
    assert plog.txn_index_rebuild_from is not None  # recovery dropped the last indexes...
    assert n.index_entries() < 10
    crash(plog)
    n.open()  # ...and the producer state's load put them back
    assert n.p.log.txn_index_rebuild_from is None
    assert n.aborted() == expected
    assert n.index_entries() == 10
    n.reopen(clean=False)
    n.reopen()
    assert n.aborted() == expected
    assert n.index_entries() == 10


def test_crash_with_an_open_transaction(node: Callable[..., Node]) -> None:
    n = node()
    n.txn(1, 0)
    n.txn(2, 0)
    n.end(2, commit=False)
    n.reopen(clean=False)
    assert n.p.producers.open_transactions() == [(1, 0, 0)]
    n.end(1, commit=False)
    assert n.aborted() == [(2, 1), (1, 0)]
    assert n.index_entries() == 2  # marker order


def test_followers_apply_markers_and_truncate_them(node: Callable[..., Node]) -> None:
    leader, follower = node(), node("follower")
    follower.p.update(PartitionInfo(0, (ME, B), (ME, B), B, 5, 5))
    leader.txn(1, 0, 2)
    leader.txn(2, 0)
    leader.end(1, commit=False)
    leader.txn(2, 1)
    leader.end(2, commit=True)
    data = leader.p.log.read(0, 1 << 20, leader.p.log.log_end_offset, True)
    fp = follower.p
    fp.append_as_follower(data)
    fp.follow_high_watermark(leader.p.high_watermark)
    assert fp.last_stable_offset == leader.p.last_stable_offset == 6
    assert follower.aborted() == leader.aborted() == [(1, 0)]
    fp.truncate_to(3)  # drops the abort marker at 3
    assert fp.log.aborted_transactions(0, 100) == []
    assert fp.producers.open_transactions() == [(1, 0, 0), (2, 0, 2)]
    assert fp.last_stable_offset == 0
    fp.append_as_follower(leader.p.log.read(3, 1 << 20, 6, True))
    fp.follow_high_watermark(6)
    assert follower.aborted() == [(1, 0)]
    assert follower.index_entries() == 1


def test_a_replay_after_a_truncation_does_not_index_twice(node: Callable[..., Node]) -> None:
    n = node()
    for pid in range(1, 8):
        n.txn(pid, 0)
        n.end(pid, commit=False)
        if pid == 2:
            n.p.producers.snapshot()  # at 4: truncating below the newest replays from it
    n.p.truncate_to(12)
    assert [pid for pid, _ in n.aborted()] == list(range(1, 7))
    assert n.index_entries() == 6


def test_retention_passes_open_transactions(node: Callable[..., Node]) -> None:
    """Only the high watermark bounds retention, as in Kafka: an open transaction's records go
    like any, and the last stable offset is then the log start until its marker."""
    n = node()
    n.p.log.config = LogConfig(segment_bytes=600, index_interval_bytes=100, retention_bytes=0)
    for i in range(30):
        n.p.append(bytearray(plain(3)), NOW)
        if i == 12:
            first = n.txn(1, 0)
    assert len(n.p.log._bases) > 4
    assert n.p.last_stable_offset == first
    n.p.log.enforce_retention(now_ms(), n.p.high_watermark)
    start = n.p.log.log_start_offset
    assert start > first
    assert n.p.last_stable_offset == start
    n.end(1, commit=True)
    assert n.p.last_stable_offset == n.p.high_watermark == n.p.log.log_end_offset


def test_delete_records_passes_an_open_transaction(node: Callable[..., Node]) -> None:
    """DeleteRecords moves the log start past an open transaction's first records, as Kafka's
    does (librdkafka's 0103 deletes a committed transaction whose markers may still be on
    their way, and expects its records gone); the last stable offset is then the log start
    until the marker."""
    n = node()
    n.p.append(bytearray(plain(3)), NOW)
    first = n.txn(1, 0, count=2)
    n.p.append(bytearray(plain(3)), NOW)
    assert n.p.last_stable_offset == first
    assert n.p.delete_records_before(first + 1) == first + 1
    assert n.p.last_stable_offset == first + 1  # the log start, until the marker
    n.end(1, commit=True)
    assert n.p.last_stable_offset == n.p.high_watermark == n.p.log.log_end_offset


def test_markers_in_a_producer_append_are_refused() -> None:
    """Clients cannot write markers: only the coordinator, through `write_marker`."""
    from dataplane.log import RecordError, validate

    with pytest.raises(RecordError):
        validate(build_marker_batch(1, 0, True, 0, 0), None)


# -- KIP-890 part 1: the verification guard ----------------------------------------------------


def refused_append(p: Partition, records: bytearray, guard: object = None) -> ErrorCode:
    end = p.log.log_end_offset
    with pytest.raises(KafkaError) as e:
        p.append(records, NOW, guard)  # type: ignore[arg-type]
    assert p.log.log_end_offset == end  # nothing written
    return e.value.code


def test_a_marker_during_verification_voids_the_guard(node: Callable[..., Node]) -> None:
    """The race: the coordinator confirmed the partition, then the transaction ended (timed
    out and aborted) before the batch was appended; the batch must not open a transaction."""
    n = node()
    p = n.p
    guard = p.maybe_start_transaction_verification(1, 0, 0)
    assert guard is not None
    # ... the transaction coordinator is asked and says yes; meanwhile the abort lands:
    n.end(1, commit=False)
    assert refused_append(p, txn_batch(1, 0), guard) == ErrorCode.invalid_txn_state
    assert not p.has_open_transaction(1, 0)
    assert p.producers.first_unstable_offset is None
    # The producer's retry verifies again and gets a new guard: the old one stays void (ABA).
    fresh = p.maybe_start_transaction_verification(1, 0, 0)
    assert fresh is not None
    assert fresh is not guard
    assert refused_append(p, txn_batch(1, 0), guard) == ErrorCode.invalid_txn_state
    p.append(txn_batch(1, 0), NOW, fresh)
    assert p.has_open_transaction(1, 0)


def test_verification_asks_again_when_the_previous_transactions_marker_lands(
    node: Callable[..., Node],
) -> None:
    """Transaction version 2: the producer's next transaction starts (same, bumped epoch)
    while the markers of its previous one are still being written; the coordinator answers
    only once they are, so the marker voids the guard before the answer. The partition asks
    again with a fresh guard instead of refusing the batch; a really late batch (its
    transaction ended, the coordinator says so) is refused by the coordinator's answer."""
    n = node()
    p = n.p
    n.txn(1, 0, epoch=1)  # the previous transaction, still open here
    answers = [ErrorCode.none, ErrorCode.none]
    asked = 0

    async def ask() -> ErrorCode:
        nonlocal asked
        asked += 1
        if asked == 1:
            n.end(1, commit=True, epoch=2)  # its marker lands while the coordinator is asked
        return answers[asked - 1]

    code, guard = anyio.run(p.verify_transaction, 1, 0, 2, ask)
    assert (code, asked) == (ErrorCode.none, 2)
    assert guard is not None
    p.append(txn_batch(1, 0, epoch=2), NOW, guard)  # a new epoch starts at sequence 0
    assert p.has_open_transaction(1, 2)

    # A late batch: the coordinator confirmed the partition, then the transaction ended (its
    # marker lands here, with nothing of it written yet); asked again, it refuses.
    late = iter([ErrorCode.none, ErrorCode.invalid_txn_state])

    async def ended() -> ErrorCode:
        answer = next(late)
        if answer == ErrorCode.none:
            n.end(5, commit=False)
        return answer

    assert anyio.run(p.verify_transaction, 5, 0, 0, ended)[0] == ErrorCode.invalid_txn_state
    assert not p.has_open_transaction(5, 0)


def test_a_verified_batch_opens_the_transaction_and_the_next_needs_no_guard(
    node: Callable[..., Node],
) -> None:
    n = node()
    p = n.p
    guard = p.maybe_start_transaction_verification(1, 0, 0)
    assert guard is not None
    assert p.producers.verification_guard(1) is guard
    n.end(2, commit=True)  # another producer's marker leaves this guard alone
    first = p.append(txn_batch(1, 0, 2), NOW, guard).base_offset
    assert p.has_open_transaction(1, 0)
    assert p.last_stable_offset == first
    assert p.producers.verification_guard(1) is None  # written: the guard is dropped
    assert p.maybe_start_transaction_verification(1, 2, 0) is None  # open: no check
    p.append(txn_batch(1, 2), NOW)
    # A retry of a written batch is still answered as a duplicate.
    assert p.append(txn_batch(1, 0, 2), NOW).base_offset == first


def test_an_unverified_batch_cannot_open_a_transaction(node: Callable[..., Node]) -> None:
    n = node()
    p = n.p
    assert refused_append(p, txn_batch(1, 0)) == ErrorCode.invalid_txn_state
    # after the transaction ended, the next one is verified again
    n.txn(1, 0)
    n.end(1, commit=True)
    assert refused_append(p, txn_batch(1, 1)) == ErrorCode.invalid_txn_state
    n.txn(1, 1)
    # several batches of the producer in one request share the guard
    n.end(1, commit=True)
    guard = p.maybe_start_transaction_verification(1, 2, 0)
    two = txn_batch(1, 2) + txn_batch(1, 3)
    assert p.append(two, NOW, guard).last_offset == p.log.log_end_offset - 1
    # followers replicate transactional batches without guards
    follower = node("follower")
    follower.p.update(PartitionInfo(0, (ME, B), (ME, B), B, 5, 5))
    follower.p.append_as_follower(p.log.read(0, 1 << 20, p.log.log_end_offset, True))
    assert follower.p.producers.open_transactions() == p.producers.open_transactions()


def test_verification_keeps_the_lowest_sequence_and_newest_epoch(
    node: Callable[..., Node],
) -> None:
    """Kafka's VerificationStateEntry: while batch 0 waits for (or failed) verification, a
    later batch of the producer is not written ahead of it, nor one of an older epoch."""
    n = node()
    p = n.p
    guard = p.maybe_start_transaction_verification(1, 3, 1)
    assert p.maybe_start_transaction_verification(1, 0, 1) is guard  # one guard per producer
    assert p.maybe_start_transaction_verification(1, 5, 1) is guard
    assert refused_append(p, txn_batch(1, 3, epoch=1), guard) == (
        ErrorCode.out_of_order_sequence_number
    )
    assert refused_append(p, txn_batch(1, 0, epoch=0), guard) == ErrorCode.invalid_producer_epoch
    p.append(txn_batch(1, 0, 3, epoch=1), NOW, guard)
    p.append(txn_batch(1, 3, epoch=1), NOW)  # the check ends with the first batch
    # a newer epoch resets the lowest sequence
    n.end(1, commit=True, epoch=2)
    guard = p.maybe_start_transaction_verification(1, 4, 2)
    assert p.maybe_start_transaction_verification(1, 0, 3) is guard
    assert refused_append(p, txn_batch(1, 0, epoch=2), guard) == ErrorCode.invalid_producer_epoch
    p.append(txn_batch(1, 0, epoch=3), NOW, guard)


def test_unused_guards_expire_with_idle_producers(node: Callable[..., Node]) -> None:
    producers = node().p.producers
    producers.expiration_ms = 1_000
    guard = producers.start_verification(1, 0, 0, now_ms=5_000)
    producers.remove_expired(5_999)
    assert producers.verification_guard(1) is guard
    producers.remove_expired(6_000)
    assert producers.verification_guard(1) is None


def test_a_transaction_version_2_producer_starts_a_partition_at_sequence_0(
    node: Callable[..., Node],
) -> None:
    """Kafka's checkSequence for a transaction version 2 producer (Produce v12+) with nothing
    of it in the partition: its first batch must be at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER
    otherwise). An older producer may start anywhere (KIP-360: its state may be gone)."""
    p = node().p
    guard = p.maybe_start_transaction_verification(1, 2, 0, supports_epoch_bump=True)
    assert refused_append(p, txn_batch(1, 2), guard) == ErrorCode.out_of_order_sequence_number
    p.append(txn_batch(1, 0, 2), NOW, guard)
    guard = p.maybe_start_transaction_verification(2, 2, 0)
    p.append(txn_batch(2, 2), NOW, guard)
