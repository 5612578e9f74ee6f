"""TransactionMetadata's state machine: Kafka's prepare/complete transitions (TV1 and TV2)."""

from __future__ import annotations

import pytest

from dataplane.protocol.errors import ErrorCode
from dataplane.transaction.state import (
    MAX_EPOCH,
    TV_0,
    TV_2,
    VALID_PREVIOUS_STATES,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
)

S = TransactionState
NOW = 1_700_000_000_000


def metadata(state: S = S.EMPTY, epoch: int = 0, partitions=()) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id="t",
        producer_id=7,
        producer_epoch=epoch,
        txn_timeout_ms=60_000,
        state=state,
        txn_last_update_timestamp=NOW,
        partitions=set(partitions),
        txn_start_timestamp=NOW if partitions else -1,
    )


def apply(meta: TransactionMetadata, transit) -> TransactionMetadata:
    meta.complete_transition_to(transit)
    return meta


def test_names_round_trip_and_ids_are_kafkas() -> None:
    assert [s.value for s in S] == list(range(8))
    for state in S:
        assert S.from_name(state.kafka_name) is state
    assert S.from_name("Bogus") is None
    assert S.PREPARE_EPOCH_FENCE.kafka_name == "PrepareEpochFence"


def test_init_bumps_epoch_and_clears_last() -> None:
    meta = metadata(epoch=-1)
    transit = meta.prepare_increment_producer_epoch(30_000, None, NOW + 1)
    assert not isinstance(transit, ErrorCode)
    assert meta.pending_state == S.EMPTY
    apply(meta, transit)
    assert (meta.producer_epoch, meta.last_producer_epoch, meta.txn_timeout_ms) == (0, -1, 30_000)
    assert meta.pending_state is None


def test_kip360_retry_and_fencing() -> None:
    meta = metadata(epoch=3)
    transit = meta.prepare_increment_producer_epoch(1000, 3, NOW)  # the current epoch: bump
    assert not isinstance(transit, ErrorCode)
    apply(meta, transit)
    assert (meta.producer_epoch, meta.last_producer_epoch) == (4, 3)
    again = meta.prepare_increment_producer_epoch(1000, 3, NOW)  # a retry of that call
    assert not isinstance(again, ErrorCode)
    assert (again.producer_epoch, again.last_producer_epoch) == (4, 3)
    meta.pending_state = None
    assert meta.prepare_increment_producer_epoch(1000, 1, NOW) == ErrorCode.producer_fenced


def test_transaction_tv1_keeps_epoch() -> None:
    meta = metadata(epoch=2)
    apply(meta, meta.prepare_add_partitions([("a", 0)], NOW + 5, TV_0))
    assert meta.state == S.ONGOING
    assert meta.txn_start_timestamp == NOW + 5
    apply(meta, meta.prepare_add_partitions([("b", 1)], NOW + 6, TV_0))
    assert meta.partitions == {("a", 0), ("b", 1)}
    assert meta.txn_start_timestamp == NOW + 5
    apply(meta, meta.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, -1, NOW + 7, False))
    assert meta.state == S.PREPARE_COMMIT
    assert meta.producer_epoch == 2
    apply(meta, meta.prepare_complete(NOW + 8))
    assert meta.state == S.COMPLETE_COMMIT
    assert not meta.partitions
    assert meta.producer_epoch == 2


def test_transaction_tv2_bumps_epoch_at_end() -> None:
    meta = metadata(epoch=2)
    apply(meta, meta.prepare_add_partitions([("a", 0)], NOW, TV_0))
    apply(meta, meta.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, -1, NOW, False))
    assert (meta.producer_epoch, meta.last_producer_epoch) == (3, 2)
    done = meta.prepare_complete(NOW)
    assert (done.producer_id, done.producer_epoch) == (7, 3)
    apply(meta, done)
    assert meta.state == S.COMPLETE_ABORT
    assert meta.client_transaction_version == TV_2


def test_tv2_overflow_rotates_producer_id_at_complete() -> None:
    meta = metadata(epoch=MAX_EPOCH - 1, partitions=[("a", 0)], state=S.ONGOING)
    assert meta.epoch_exhausted
    apply(meta, meta.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, 99, NOW, False))
    assert meta.next_producer_id == 99
    done = meta.prepare_complete(NOW)
    assert (done.producer_id, done.producer_epoch, done.prev_producer_id) == (99, 0, 7)
    apply(meta, done)
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (99, 0, 7)


def test_tv2_abort_of_nothing_starts_now() -> None:
    meta = metadata(epoch=1, state=S.COMPLETE_COMMIT)
    apply(meta, meta.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, -1, NOW + 9, True))
    assert meta.state == S.PREPARE_ABORT
    assert meta.txn_start_timestamp == NOW + 9


def test_fence_bumps_once_after_a_failed_fence() -> None:
    meta = metadata(epoch=4, partitions=[("a", 0)], state=S.ONGOING)
    assert meta.prepare_fence_producer_epoch().producer_epoch == 5
    meta.pending_state = None
    meta.has_failed_epoch_fence = True
    assert meta.prepare_fence_producer_epoch().producer_epoch == 4


def test_rotation_on_exhausted_epoch() -> None:
    meta = metadata(epoch=MAX_EPOCH - 1, state=S.COMPLETE_ABORT)
    transit = meta.prepare_producer_id_rotation(12, 1000, NOW, record_last_epoch=True)
    apply(meta, transit)
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_epoch) == (
        12,
        0,
        MAX_EPOCH - 1,
    )


def test_illegal_transitions_raise() -> None:
    meta = metadata()
    with pytest.raises(IllegalTransition):
        meta.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, -1, NOW, False)  # Empty -> commit
    meta.prepare_add_partitions([("a", 0)], NOW, TV_0)
    with pytest.raises(IllegalTransition):  # a second transition while one is pending
        meta.prepare_add_partitions([("a", 1)], NOW, TV_0)
    wrong = metadata().prepare_increment_producer_epoch(1000, None, NOW)
    with pytest.raises(IllegalTransition):  # completing what is not pending
        meta.complete_transition_to(wrong)  # type: ignore[arg-type]


def test_valid_previous_states_are_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert S.EMPTY in VALID_PREVIOUS_STATES[S.PREPARE_ABORT]  # TV2 abort of nothing
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}
    expirable = {s for s in S if s.expiration_allowed}
    assert expirable == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
