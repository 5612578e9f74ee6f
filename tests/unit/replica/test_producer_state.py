"""ProducerStateManager: Kafka's idempotent-producer rules on real batches in a real log, and
its snapshots, rebuilds, truncation and expiry."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dataplane.log import LogConfig, StateStore
from dataplane.log.control import build_marker_batch
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateError,
    ProducerStateManager,
    in_sequence,
    increment_sequence,
)
from tests.unit.replica.producers import NEVER, NOW, Replica, export, headers, idem, plain

OUT_OF_ORDER = ErrorCode.out_of_order_sequence_number
INVALID_EPOCH = ErrorCode.invalid_producer_epoch


def refused(replica: Replica, records: bytes) -> ErrorCode:
    """The error the leader answers ``records`` with; asserts that nothing was appended."""
    end, state = replica.log.log_end_offset, replica.state()
    with pytest.raises(ProducerStateError) as e:
        replica.produce(records)
    assert isinstance(e.value, KafkaError)
    assert (replica.log.log_end_offset, replica.state()) == (end, state)  # no side effect
    return e.value.code


# -- sequence arithmetic -------------------------------------------------------------------------


def test_sequences_wrap_at_int32_max() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 0) == INT32_MAX
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 4) == 2
    assert in_sequence(4, 5)
    assert in_sequence(INT32_MAX, 0)
    assert in_sequence(-1, 0)
    assert not in_sequence(4, 6)
    assert not in_sequence(INT32_MAX, 1)
    assert not in_sequence(5, 5)


# -- the rules ---------------------------------------------------------------------------------


def test_unknown_producer_may_start_at_any_sequence_and_epoch(leader: Replica) -> None:
    assert leader.produce(idem(1, 0, 0, 2)).base_offset == 0
    assert leader.produce(idem(2, 7, 42, 3)).base_offset == 2
    entry = leader.producers.last_entry(2)
    assert entry is not None
    assert (entry.epoch, entry.last_seq) == (7, 44)
    assert list(entry.batches) == [BatchMetadata(42, 44, 2, 4, NOW)]


def test_in_order_batches_are_appended(leader: Replica) -> None:
    offsets = [leader.produce(idem(1, 0, seq, 2)).base_offset for seq in range(0, 20, 2)]
    assert offsets == list(range(0, 20, 2))
    entry = leader.producers.last_entry(1)
    assert entry is not None
    assert entry.last_seq == 19
    assert len(entry.batches) == 5


def test_gap_is_out_of_order(leader: Replica) -> None:
    leader.produce(idem(1, 0, 0, 3))
    assert refused(leader, idem(1, 0, 4)) == OUT_OF_ORDER  # 3 is missing
    assert refused(leader, idem(1, 0, 2)) == OUT_OF_ORDER  # overlaps, not a known batch
    assert leader.produce(idem(1, 0, 3)).base_offset == 3


def test_older_epoch_is_fenced(leader: Replica) -> None:
    leader.produce(idem(1, 0, 0))
    leader.produce(idem(1, 1, 0))
    assert refused(leader, idem(1, 0, 1)) == INVALID_EPOCH
    assert refused(leader, idem(1, 0, 0)) == INVALID_EPOCH  # even a retry of the old batch


def test_new_epoch_must_start_at_sequence_zero(leader: Replica) -> None:
    leader.produce(idem(1, 0, 0, 5))
    assert refused(leader, idem(1, 1, 5)) == OUT_OF_ORDER
    assert refused(leader, idem(1, 3, 1)) == OUT_OF_ORDER
    assert leader.produce(idem(1, 3, 0)).base_offset == 5
    entry = leader.producers.last_entry(1)
    assert entry is not None
    assert entry.epoch == 3
    assert len(entry.batches) == 1  # old ones dropped


def test_retry_of_each_of_the_last_five_batches_gets_its_original_offsets(leader: Replica) -> None:
    sent = [idem(1, 0, seq, 2) for seq in range(0, 14, 2)]  # 7 batches of 2
    original = [leader.produce(batch) for batch in sent]
    end = leader.log.log_end_offset
    for batch, first in zip(sent[2:], original[2:], strict=True):
        retry = leader.produce(batch)
        assert retry.duplicate
        assert (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset)
    assert leader.log.log_end_offset == end  # nothing written twice
    # Older than the last 5: Kafka cannot tell it from a gap.
    assert refused(leader, sent[1]) == OUT_OF_ORDER
    assert refused(leader, sent[0]) == OUT_OF_ORDER


def test_duplicate_needs_the_same_epoch_and_range(leader: Replica) -> None:
    leader.produce(idem(1, 0, 0, 3))
    leader.produce(idem(1, 0, 3, 3))
    assert refused(leader, idem(1, 0, 3, 2)) == OUT_OF_ORDER  # same first, other last seq
    leader.produce(idem(1, 1, 0, 3))
    assert refused(leader, idem(1, 0, 3, 3)) == INVALID_EPOCH
    assert leader.produce(idem(1, 1, 0, 3)).duplicate


def test_duplicate_reports_the_batch_timestamp(leader: Replica) -> None:
    leader.produce(idem(1, 0, 0, ts=123))
    dup = leader.producers.check(headers(idem(1, 0, 0)))
    assert dup == BatchMetadata(0, 0, 0, 0, 123)


def test_sequence_wraps_after_int32_max(leader: Replica) -> None:
    leader.produce(idem(1, 0, INT32_MAX - 1, 2))  # unknown producer: any start
    assert refused(leader, idem(1, 0, INT32_MAX + 0)) == OUT_OF_ORDER
    assert leader.produce(idem(1, 0, 0)).base_offset == 2
    assert leader.produce(idem(1, 0, 1)).base_offset == 3
    # A batch whose range crosses the wrap: last sequence is 1, so 2 comes next.
    leader.produce(idem(2, 0, INT32_MAX - 1, 4))
    entry = leader.producers.last_entry(2)
    assert entry is not None
    assert entry.last_seq == 1
    assert leader.produce(idem(2, 0, INT32_MAX - 1, 4)).duplicate
    assert refused(leader, idem(2, 0, 0)) == OUT_OF_ORDER
    assert leader.produce(idem(2, 0, 2)).base_offset == 8


def test_batches_without_producer_id_are_ignored(leader: Replica) -> None:
    leader.produce(plain(3))
    leader.produce(idem(1, 0, 0))
    leader.produce(plain(2))
    assert set(leader.state()) == {1}
    assert leader.producers.end_offset == leader.log.log_end_offset == 6
    assert leader.producers.check(headers(plain(1))) is None


def test_several_batches_in_one_request(leader: Replica) -> None:
    """Each batch is checked against the state the request's earlier batches leave."""
    leader.produce(idem(1, 0, 0))
    assert not leader.produce(idem(1, 0, 1) + idem(1, 0, 2, 2)).duplicate
    assert refused(leader, idem(1, 0, 4) + idem(1, 0, 6)) == OUT_OF_ORDER  # gap in the second
    assert refused(leader, idem(1, 0, 4) + idem(1, 0, 4)) == OUT_OF_ORDER  # repeats the first
    assert refused(leader, idem(1, 1, 0) + idem(1, 0, 4)) == INVALID_EPOCH  # fenced by the first
    # ... but a retry of a retained batch is found before any epoch check, as in Kafka.
    assert leader.produce(idem(1, 1, 0) + idem(1, 0, 1)).duplicate
    assert refused(leader, idem(1, 1, 0) + idem(1, 2, 3)) == OUT_OF_ORDER
    assert not leader.produce(idem(1, 1, 0) + idem(1, 2, 0) + idem(2, 0, 9)).duplicate
    # A retry found anywhere in the request answers the request (Kafka's analyzeAndValidate).
    assert leader.produce(idem(3, 0, 0) + idem(1, 2, 0)).duplicate
    # An unknown producer takes any sequence, in every batch of the request (Kafka's rule
    # looks at the state before the request).
    assert not leader.produce(idem(4, 0, 5) + idem(4, 0, 50)).duplicate


def test_control_batch_only_moves_the_epoch(leader: Replica, follower: Replica) -> None:
    for data in (
        leader.produce(idem(1, 0, 0, 2)).written,
        leader.write_as_coordinator(build_marker_batch(1, 1, True, 0, NOW)),
    ):
        follower.replicate(data)
    entry = leader.producers.last_entry(1)
    assert entry is not None
    assert (entry.epoch, list(entry.batches)) == (1, [])
    assert follower.state() == leader.state()
    assert refused(leader, idem(1, 0, 2)) == INVALID_EPOCH
    assert refused(leader, idem(1, 1, 2)) == OUT_OF_ORDER  # same epoch, no batch: needs 0
    assert leader.produce(idem(1, 1, 0)).base_offset == 3


def test_transaction_start_is_tracked_and_ended_by_a_marker(leader: Replica) -> None:
    leader.write_as_coordinator(idem(1, 0, 0, transactional=True))
    leader.write_as_coordinator(idem(1, 0, 1, transactional=True))
    entry = leader.producers.last_entry(1)
    assert entry is not None
    assert entry.current_txn_first_offset == 0
    leader.producers.expiration_ms = 1
    assert leader.producers.remove_expired(NOW + 10) == 0  # an open transaction never expires
    assert leader.producers.open_transactions() == [(1, 0, 0)]
    assert leader.producers.first_unstable_offset == 0
    leader.reopen()  # the snapshot keeps the open transaction
    assert leader.producers.open_transactions() == [(1, 0, 0)]
    leader.write_as_coordinator(build_marker_batch(1, 0, False, 3, NOW))
    entry = leader.producers.last_entry(1)
    assert entry is not None
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (
        -1,
        3,
    )
    assert leader.producers.first_unstable_offset is None
    assert leader.log.aborted_transactions(0, 3) == [(1, 0)]
    leader.reopen(clean=False)
    assert leader.producers.last_entry(1) == entry
    assert leader.log.aborted_transactions(0, 3) == [(1, 0)]


def test_marker_checks(leader: Replica) -> None:
    """Kafka's appendEndTxnMarker checks, made before the leader writes a marker."""
    producers = leader.producers
    producers.check_marker(1, 0, 0)  # an unknown producer: nothing to check against
    leader.write_as_coordinator(idem(1, 2, 0, transactional=True))
    leader.write_as_coordinator(build_marker_batch(1, 2, True, 5, NOW))
    with pytest.raises(ProducerStateError) as e:
        producers.check_marker(1, 1, 5)
    assert e.value.code == INVALID_EPOCH
    with pytest.raises(ProducerStateError) as e:
        producers.check_marker(1, 2, 4)
    assert e.value.code == ErrorCode.transaction_coordinator_fenced
    producers.check_marker(1, 3, 5)
    producers.check_marker(1, 2, 6)


def test_an_unreadable_marker_ends_the_transaction(
    leader: Replica, caplog: pytest.LogCaptureFixture
) -> None:
    leader.write_as_coordinator(idem(1, 0, 0, transactional=True))
    with caplog.at_level(logging.WARNING):
        leader.write_as_coordinator(idem(1, 0, -1, transactional=True, control=True))
    assert "unreadable transaction marker" in caplog.text
    assert leader.producers.open_transactions() == []


# -- expiry ------------------------------------------------------------------------------------


def test_idle_producers_expire(tmp_path: Path, store: StateStore) -> None:
    replica = Replica(tmp_path / "p", store, "p", expiration_ms=1_000)
    replica.produce(idem(1, 0, 0, ts=NOW))
    replica.produce(idem(2, 0, 0, ts=NOW + 500))
    assert replica.producers.remove_expired(NOW + 999) == 0
    assert replica.producers.remove_expired(NOW + 1_000) == 1  # Kafka: idle >= expiration
    assert set(replica.state()) == {2}
    assert replica.produce(idem(1, 0, 17, ts=NOW + 1_000)).base_offset == 2  # unknown again
    replica.producers.snapshot()
    replica.reopen(now_ms=NOW + 1_500)  # loading drops what expired meanwhile
    assert set(replica.state()) == {1}
    replica.close()


# -- snapshots, reload, truncation ---------------------------------------------------------------


def fill(replica: Replica, producers: int = 3, batches: int = 8, start: int = 0) -> None:
    """Rounds of one 2-record batch per producer (epoch pid % 2) and a plain batch."""
    for i in range(start, start + batches):
        for pid in range(1, producers + 1):
            assert not replica.produce(idem(pid, pid % 2, i * 2, 2, ts=NOW + i)).duplicate
            replica.produce(plain())


def rebuilt_from_scratch(replica: Replica) -> dict:
    """The state of the same log replayed from its start, ignoring every snapshot."""
    scratch = ProducerStateManager(replica.log, NEVER)
    scratch._snapshots = []
    scratch._rebuild(NOW, clear_if_empty=False)
    return export(scratch)


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_reopen(leader: Replica, clean: bool) -> None:
    fill(leader)
    before = leader.state()
    leader.reopen(clean=clean)
    assert leader.state() == before
    assert leader.produce(idem(1, 1, 14, 2)).duplicate  # the last five batches are all kept
    assert leader.produce(idem(1, 1, 6, 2)).duplicate


def test_reload_replays_from_the_newest_snapshot(
    leader: Replica, caplog: pytest.LogCaptureFixture
) -> None:
    fill(leader, batches=4)
    leader.producers.snapshot()
    snap = leader.log.log_end_offset
    fill(leader, batches=2, start=4)
    before = leader.state()
    with caplog.at_level(logging.INFO, logger="dataplane.replica.producer_state"):
        leader.reopen(clean=False)
    assert leader.state() == before
    assert f"rebuilt from offset {snap} (" in caplog.text
    assert leader.producers.snapshot_offsets[-1] == leader.log.log_end_offset


def test_segment_roll_takes_a_snapshot(tmp_path: Path, store: StateStore) -> None:
    replica = Replica(tmp_path / "p", store, "p", LogConfig(segment_bytes=1_000))
    rolled_at = []
    for seq in range(30):
        rolls = replica.log.roll_count
        replica.produce(idem(1, 0, seq * 3, 3))
        if replica.log.roll_count != rolls:
            rolled_at.append(replica.log.log_end_offset)
            assert replica.producers.snapshot_offsets[-1] == replica.log.log_end_offset
    assert len(rolled_at) > 3
    assert replica.producers.snapshot_offsets == rolled_at[-3:]
    replica.close()


def test_only_the_newest_snapshots_are_kept(leader: Replica, store: StateStore) -> None:
    for i in range(6):
        leader.produce(idem(1, 0, i))
        leader.producers.snapshot()
    assert leader.producers.snapshot_offsets == [4, 5, 6]
    keys = [k for k, _ in store.scan_prefix(leader.log.state_key("producer-snapshot/"))]
    assert len(keys) == 3
    leader.producers.snapshot()  # same offset: nothing new
    assert leader.producers.snapshot_offsets == [4, 5, 6]
    with pytest.raises(ValueError, match="the state is as of 6"):
        leader.producers.snapshot(3)


def test_snapshots_below_the_log_start_go(tmp_path: Path, store: StateStore) -> None:
    replica = Replica(tmp_path / "p", store, "p", LogConfig(segment_bytes=1_000))
    replica.produce(idem(1, 0, 0))
    replica.producers.snapshot()
    fill(replica, 2, 6)
    replica.producers.snapshot()
    state = replica.state()
    replica.log.delete_records_before(replica.log.log_end_offset - 2)
    replica.log.enforce_retention(NOW, replica.log.log_end_offset)
    replica.producers.snapshot()
    assert min(replica.producers.snapshot_offsets) >= replica.log.log_start_offset
    replica.reopen()
    assert replica.state() == state  # producers whose data is gone are kept (until expiry)
    replica.close()


def test_truncation_rebuilds_and_drops_later_snapshots(leader: Replica) -> None:
    fill(leader, 2, 3)
    leader.producers.snapshot()
    mid = leader.log.log_end_offset
    fill(leader, 2, 3, start=3)
    leader.producers.snapshot()
    late = leader.log.log_end_offset
    leader.truncate_to(mid + 3)
    assert late not in leader.producers.snapshot_offsets
    assert leader.producers.snapshot_offsets[-1] == leader.log.log_end_offset
    assert leader.state() == rebuilt_from_scratch(leader)
    assert leader.producers.end_offset == leader.log.log_end_offset
    # What was truncated away is no longer a duplicate: the retry is appended again.
    leader.truncate_to(2)
    assert leader.state() == rebuilt_from_scratch(leader)
    assert not leader.produce(idem(2, 0, 0, 2, ts=NOW)).duplicate


def test_truncating_past_the_end_changes_nothing(leader: Replica) -> None:
    fill(leader, 2, 2)
    state, snaps = leader.state(), leader.producers.snapshot_offsets
    leader.truncate_to(leader.log.log_end_offset + 5)
    assert (leader.state(), leader.producers.snapshot_offsets) == (state, snaps)


def test_full_truncation_empties_the_state(leader: Replica) -> None:
    fill(leader, 2, 2)
    leader.producers.snapshot()
    leader.log.truncate_fully_and_start_at(100)
    leader.producers.truncate_and_reload()
    assert leader.state() == {}
    assert leader.producers.snapshot_offsets == []
    assert leader.producers.end_offset == 100
    assert leader.produce(idem(1, 0, 7)).base_offset == 100  # unknown again


def test_corrupt_snapshot_is_dropped(
    leader: Replica, store: StateStore, caplog: pytest.LogCaptureFixture
) -> None:
    fill(leader, 2, 3)
    leader.producers.snapshot()
    fill(leader, 2, 2, start=3)
    leader.producers.snapshot()
    state, newest = leader.state(), leader.producers.snapshot_offsets[-1]
    key = leader.log.state_key(f"producer-snapshot/{newest:020d}")
    raw = bytearray(store.get_bytes(key) or b"")
    raw[-1] ^= 1
    store.put_bytes(key, bytes(raw))
    with caplog.at_level(logging.WARNING):
        leader.reopen(clean=False)
    assert "CRC mismatch" in caplog.text
    assert leader.state() == state


def test_snapshots_go_with_the_partition(leader: Replica, store: StateStore) -> None:
    fill(leader, 1, 2)
    leader.producers.snapshot()
    prefix = leader.log.state_key("producer-snapshot/")
    assert list(store.scan_prefix(prefix))
    leader.log.delete()
    assert not list(store.scan_prefix(prefix))
    leader.open()
    assert leader.state() == {}


# -- leader and follower -------------------------------------------------------------------------


def test_follower_keeps_the_same_state_and_dedups_after_failover(
    leader: Replica, follower: Replica
) -> None:
    sent = []
    for seq in range(6):
        for pid in (1, 2):
            batch = idem(pid, 0, seq * 3, 3)
            sent.append(batch)
            follower.replicate(leader.produce(batch).written)
        follower.replicate(leader.produce(plain()).written)
    assert follower.state() == leader.state()
    follower.reopen(clean=False)
    assert follower.state() == leader.state()
    # The follower takes over: a retry of the last batch, whose answer was lost, is not
    # written twice; the producer carries on where it was.
    retry = follower.produce(sent[-1])
    assert retry.duplicate
    assert retry.base_offset == leader.producers.producers[2].batches[-1][2]
    assert not follower.produce(idem(2, 0, 18)).duplicate
    assert refused(follower, idem(1, 0, 19)) == OUT_OF_ORDER


def test_follower_mirrors_the_log_even_when_the_epoch_goes_down(follower: Replica) -> None:
    """Replication is not checked (Kafka only warns): after an unclean election the log can
    carry an older epoch, and the state follows the log so a rebuild gives the same."""
    follower.replicate(idem(1, 3, 0, 2, base_offset=0))
    follower.replicate(idem(1, 2, 5, base_offset=2))
    entry = follower.producers.last_entry(1)
    assert entry is not None
    assert entry.epoch == 2
    assert list(entry.batches) == [BatchMetadata(5, 5, 2, 2, NOW)]
    before = follower.state()
    follower.reopen(clean=False)
    assert follower.state() == before
