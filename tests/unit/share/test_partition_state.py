"""The share-partition state machine: acquisition from batch headers, acknowledgements,
release, lock expiry, the delivery limit, the start offset and the durable form."""

from __future__ import annotations

import pytest

from dataplane.protocol.errors import ErrorCode
from dataplane.share.model import AcknowledgeType as A
from dataplane.share.model import DeliveryState as S
from dataplane.share.model import ShareState, StateBatch
from dataplane.share.partition_state import (
    AckBatch,
    Acquired,
    Candidate,
    SharePartitionState,
    check_ack_batches,
)

LIMIT = 3


def new(
    start: int = 0, locks: int = 1000, batches: tuple[StateBatch, ...] = ()
) -> SharePartitionState:
    return SharePartitionState(start, LIMIT, locks, batches)


def batches(*ranges: tuple[int, int]) -> list[Candidate]:
    return [Candidate(first, last) for first, last in ranges]


def acquire(
    sp: SharePartitionState,
    member: str,
    cands: list[Candidate],
    n: int = 500,
    *,
    deadline: int = 100,
    strict: bool = False,
) -> list[Acquired]:
    return sp.acquire(member, cands, sp.next_fetch_offset(), n, deadline, strict)


def ack(sp: SharePartitionState, member: str, *items: tuple[int, int, tuple[int, ...]]):
    return sp.acknowledge(
        member, [AckBatch(first, last, t) for first, last, t in items], renew_deadline=999
    )


def test_acquire_whole_batches_as_one_range():
    sp = new()
    got = acquire(sp, "m1", batches((0, 9), (10, 19), (20, 29)))
    assert got == [Acquired(0, 29, 1)]
    assert sp.runs() == [(0, 29, S.ACQUIRED, 1, "m1")]
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 30, 30)


def test_max_records_rounds_up_to_the_batch_in_batch_mode():
    sp = new()
    assert acquire(sp, "m1", batches((0, 9), (10, 19), (20, 29)), n=15) == [Acquired(0, 19, 1)]
    assert sp.end_offset == 20


def test_max_records_cuts_a_batch_in_record_limit_mode():
    sp = new()
    assert acquire(sp, "m1", batches((0, 9), (10, 19)), n=15, strict=True) == [Acquired(0, 14, 1)]
    # the rest of the batch is acquired by the next member from the middle of the log batch
    assert acquire(sp, "m2", batches((10, 19), (20, 29))) == [Acquired(15, 29, 1)]
    assert sp.runs() == [(0, 14, S.ACQUIRED, 1, "m1"), (15, 29, S.ACQUIRED, 1, "m2")]


def test_control_and_aborted_batches_are_archived_not_delivered():
    sp = new()
    got = acquire(sp, "m1", [Candidate(0, 4), Candidate(5, 5, False), Candidate(6, 9)])
    assert got == [Acquired(0, 4, 1), Acquired(6, 9, 1)]
    assert sp.runs()[1] == (5, 5, S.ARCHIVED, 0, "")


def test_offsets_without_a_batch_are_archived():
    sp = new()
    # compaction removed 5-9; the log read started at 0
    assert acquire(sp, "m1", batches((0, 4), (10, 14))) == [Acquired(0, 4, 1), Acquired(10, 14, 1)]
    assert sp.runs()[1] == (5, 9, S.ARCHIVED, 0, "")


def test_accept_moves_the_start_offset():
    sp = new()
    acquire(sp, "m1", batches((0, 9), (10, 19)))
    assert ack(sp, "m1", (0, 9, (A.ACCEPT,))).durable
    assert sp.start_offset == 10
    assert sp.runs() == [(10, 19, S.ACQUIRED, 1, "m1")]
    ack(sp, "m1", (10, 19, (A.ACCEPT,)))
    assert (sp.start_offset, sp.end_offset, sp.runs()) == (20, 20, [])


def test_only_acks_that_free_a_full_window_make_room():
    """Waiting fetches are woken for released records or room in a full window, not for
    every acknowledgement (a window with room leaves them waiting for new records)."""
    sp = new(locks=20)
    acquire(sp, "m1", batches((0, 9)))
    accepted = ack(sp, "m1", (0, 4, (A.ACCEPT,)))
    assert accepted.durable
    assert not accepted.room
    assert not accepted.released
    acquire(sp, "m1", batches((10, 19), (20, 29)))  # whole batches: the window is 5-29
    assert not sp.can_acquire()
    assert not ack(sp, "m1", (6, 9, (A.ACCEPT,))).room  # 5 is still in flight
    assert not ack(sp, "m1", (5, 5, (A.ACCEPT,))).room  # 10-29: still 20 in flight
    freed = ack(sp, "m1", (10, 14, (A.ACCEPT,)))
    assert freed.room
    assert sp.start_offset == 15
    assert sp.can_acquire()


def test_release_makes_records_available_again_and_redelivers_with_a_higher_count():
    sp = new()
    acquire(sp, "m1", batches((0, 9)))
    outcome = ack(sp, "m1", (3, 5, (A.RELEASE,)))
    assert outcome.released
    assert sp.next_fetch_offset() == 3
    assert sp.runs() == [
        (0, 2, S.ACQUIRED, 1, "m1"),
        (3, 5, S.AVAILABLE, 1, ""),
        (6, 9, S.ACQUIRED, 1, "m1"),
    ]
    assert acquire(sp, "m2", batches((0, 9))) == [Acquired(3, 5, 2)]


def test_per_offset_types_split_only_where_they_differ():
    sp = new()
    acquire(sp, "m1", batches((0, 5)))
    types = (A.ACCEPT, A.ACCEPT, A.REJECT, A.GAP, A.RELEASE, A.ACCEPT)
    ack(sp, "m1", (0, 5, types))
    assert sp.start_offset == 4
    assert sp.runs() == [(4, 4, S.AVAILABLE, 1, ""), (5, 5, S.ACKNOWLEDGED, 1, "")]


def test_reject_is_never_redelivered():
    sp = new()
    acquire(sp, "m1", batches((0, 9)))
    ack(sp, "m1", (0, 0, (A.REJECT,)), (1, 9, (A.RELEASE,)))
    assert acquire(sp, "m2", batches((0, 9))) == [Acquired(1, 9, 2)]


def test_ack_by_another_member_is_invalid_record_state_and_changes_nothing():
    sp = new()
    acquire(sp, "m1", batches((0, 9)))
    acquire(sp, "m2", batches((10, 19)))
    before = sp.runs()
    outcome = ack(sp, "m1", (0, 9, (A.ACCEPT,)), (10, 12, (A.ACCEPT,)))
    assert outcome.error == ErrorCode.invalid_record_state
    assert sp.runs() == before


def test_ack_of_records_not_acquired():
    sp = new()
    acquire(sp, "m1", batches((0, 9)))
    ack(sp, "m1", (5, 9, (A.RELEASE,)))
    assert ack(sp, "m1", (5, 5, (A.ACCEPT,))).error == ErrorCode.invalid_record_state
    assert ack(sp, "m1", (0, 20, (A.ACCEPT,))).error == ErrorCode.invalid_request
    assert new().acknowledge("m1", [AckBatch(0, 0, (1,))]).error == ErrorCode.invalid_record_state
    # Kafka's texts: a batch past the acquired records, wholly or from its last offset
    assert ack(sp, "m1", (12, 14, (A.ACCEPT,))).message == (
        "Batch record not found. The first offset in request is past acquired records."
    )
    assert ack(sp, "m1", (8, 14, (A.ACCEPT,))).message == (
        "Batch record not found. The last offset in request is past acquired records."
    )


def test_ack_below_the_start_offset_is_ignored():
    sp = new()
    acquire(sp, "m1", batches((0, 9)))
    ack(sp, "m1", (0, 4, (A.ACCEPT,)))
    assert ack(sp, "m1", (0, 4, (A.ACCEPT,))).error == ErrorCode.none
    assert ack(sp, "m1", (2, 9, (A.ACCEPT,))).error == ErrorCode.none
    assert sp.start_offset == 10


def test_renew_extends_the_lock_without_a_durable_change():
    sp = new()
    acquire(sp, "m1", batches((0, 9)), deadline=100)
    outcome = ack(sp, "m1", (0, 9, (A.RENEW,)))
    assert not outcome.durable
    assert sp.next_deadline() == 999
    assert not sp.expire_locks(500).durable


def test_lock_expiry_releases_and_the_delivery_limit_archives():
    sp = new()
    for delivery in range(1, LIMIT + 1):
        assert acquire(sp, f"m{delivery}", batches((0, 0)), deadline=delivery * 10) == [
            Acquired(0, 0, delivery)
        ]
        outcome = sp.expire_locks(delivery * 10)
        assert outcome.durable
        assert outcome.released == (delivery < LIMIT)
    # the third delivery reached the limit of 3: archived, and the start offset moves past it
    assert (sp.start_offset, sp.runs()) == (1, [])


def test_the_last_delivery_of_a_record_is_alone():
    sp = new()
    for delivery in range(1, LIMIT):
        assert acquire(sp, "m1", batches((0, 4)), deadline=0) == [Acquired(0, 4, delivery)]
        sp.expire_locks(0)
    # a poison record among them: each one's last chance comes alone, so only it is archived
    assert acquire(sp, "m1", batches((0, 4))) == [Acquired(0, 0, LIMIT)]
    ack(sp, "m1", (0, 0, (A.RELEASE,)))
    assert acquire(sp, "m2", batches((0, 4))) == [Acquired(1, 1, LIMIT)]
    ack(sp, "m2", (1, 1, (A.ACCEPT,)))
    assert sp.start_offset == 2
    assert sp.runs()[0] == (2, 4, S.AVAILABLE, LIMIT - 1, "")


def test_expiry_only_touches_expired_locks():
    sp = new()
    acquire(sp, "m1", batches((0, 4)), deadline=10)
    acquire(sp, "m2", batches((5, 9)), deadline=20)
    assert sp.next_deadline() == 10
    sp.expire_locks(15)
    assert sp.runs() == [(0, 4, S.AVAILABLE, 1, ""), (5, 9, S.ACQUIRED, 1, "m2")]
    assert sp.next_deadline() == 20


def test_release_member_on_session_close():
    sp = new()
    acquire(sp, "m1", batches((0, 4)))
    acquire(sp, "m2", batches((5, 9)))
    outcome = sp.release_member("m1")
    assert outcome.durable
    assert outcome.released
    assert sp.runs() == [(0, 4, S.AVAILABLE, 1, ""), (5, 9, S.ACQUIRED, 1, "m2")]
    assert not sp.release_member("m3").durable


def test_release_at_the_limit_archives():
    sp = new()
    for delivery in range(1, LIMIT + 1):
        assert acquire(sp, "m1", batches((0, 0))) == [Acquired(0, 0, delivery)]
        assert ack(sp, "m1", (0, 0, (A.RELEASE,))).released == (delivery < LIMIT)
    assert (sp.start_offset, sp.runs()) == (1, [])


def test_window_is_bounded_by_max_record_locks():
    sp = new(locks=20)
    assert acquire(sp, "m1", batches((0, 14), (15, 29), (30, 39))) == [Acquired(0, 29, 1)]
    assert not sp.can_acquire()
    assert acquire(sp, "m2", batches((30, 39))) == []
    ack(sp, "m1", (0, 14, (A.ACCEPT,)))
    assert sp.can_acquire()
    assert acquire(sp, "m2", batches((30, 39))) == [Acquired(30, 39, 1)]


def test_available_records_are_acquired_even_when_the_window_is_full():
    sp = new(locks=10)
    acquire(sp, "m1", batches((0, 9)))
    ack(sp, "m1", (0, 9, (A.RELEASE,)))
    assert sp.can_acquire()
    assert acquire(sp, "m2", batches((0, 9), (10, 19))) == [Acquired(0, 9, 2)]


def test_log_start_moving_past_the_window():
    sp = new()
    acquire(sp, "m1", batches((0, 9)))
    assert sp.advance_log_start(5)
    assert (sp.start_offset, sp.runs()) == (5, [(5, 9, S.ACQUIRED, 1, "m1")])
    assert ack(sp, "m1", (0, 9, (A.ACCEPT,))).error == ErrorCode.none
    assert sp.advance_log_start(50)
    assert (sp.start_offset, sp.end_offset) == (50, 50)
    assert not sp.advance_log_start(40)


def test_durable_form_leaves_out_acquisition_and_never_delivered_offsets():
    sp = new()
    acquire(sp, "m1", batches((0, 9), (10, 19), (20, 29)))
    ack(sp, "m1", (0, 4, (A.ACCEPT,)), (10, 14, (A.REJECT,)), (15, 19, (A.RELEASE,)))
    state = sp.to_share_state(state_epoch=2, leader_epoch=7)
    assert state == ShareState(
        2,
        7,
        5,
        (
            StateBatch(10, 14, S.ARCHIVED, 1),
            StateBatch(15, 19, S.AVAILABLE, 1),
        ),
    )


def test_round_trip_through_the_durable_form():
    sp = new()
    acquire(sp, "m1", batches((0, 9), (10, 19)))
    ack(sp, "m1", (5, 5, (A.ACCEPT,)), (6, 9, (A.RELEASE,)))
    sp.expire_locks(10_000)
    restored = SharePartitionState.from_share_state(sp.to_share_state(0, 0), LIMIT, 1000)
    assert restored.runs() == sp.runs()
    assert (restored.start_offset, restored.end_offset) == (sp.start_offset, sp.end_offset)


def test_initial_state_fills_gaps_with_available_and_drops_the_done_prefix():
    sp = new(
        start=10,
        batches=(
            StateBatch(10, 12, S.ACKNOWLEDGED, 1),
            StateBatch(15, 16, S.AVAILABLE, 1),
            StateBatch(18, 18, S.ARCHIVED, 1),
        ),
    )
    assert sp.start_offset == 13
    assert sp.runs() == [
        (13, 14, S.AVAILABLE, 0, ""),
        (15, 16, S.AVAILABLE, 1, ""),
        (17, 17, S.AVAILABLE, 0, ""),
        (18, 18, S.ARCHIVED, 1, ""),
    ]
    assert sp.next_fetch_offset() == 13
    got = acquire(sp, "m1", batches((13, 17), (18, 18), (19, 25)))
    assert got == [
        Acquired(13, 14, 1),
        Acquired(15, 16, 2),
        Acquired(17, 17, 1),
        Acquired(19, 25, 1),
    ]


def test_reacquire_from_the_middle_of_a_log_batch():
    sp = new()
    acquire(sp, "m1", batches((0, 9)))
    ack(sp, "m1", (0, 3, (A.ACCEPT,)), (4, 9, (A.RELEASE,)))
    # the log read from 4 returns the batch holding it, 0-9
    assert acquire(sp, "m2", batches((0, 9))) == [Acquired(4, 9, 2)]


def test_uniform_traffic_keeps_few_runs():
    sp = new(locks=100_000)
    for i in range(100):
        acquire(sp, f"m{i % 4}", batches((i * 100, i * 100 + 99)), deadline=i)
    assert len(sp.runs()) == 100
    for i in range(100):
        ack(sp, f"m{i % 4}", (i * 100, i * 100 + 99, (A.ACCEPT,)))
    assert (sp.start_offset, sp.runs()) == (10_000, [])


@pytest.mark.parametrize(
    ("items", "valid"),
    [
        ([AckBatch(0, 4, (1,)), AckBatch(5, 6, (2, 3))], True),
        ([AckBatch(5, 4, (1,))], False),
        ([AckBatch(0, 4, (1,)), AckBatch(4, 6, (1,))], True),  # as Kafka: may touch
        ([AckBatch(0, 4, (1,)), AckBatch(3, 6, (1,))], False),
        ([AckBatch(0, 4, ())], False),
        ([AckBatch(0, 4, (1, 1))], False),
        ([AckBatch(0, 0, (4,))], False),
    ],
)
def test_check_ack_batches(items, valid):
    assert (check_ack_batches(items, max_type=3) is None) == valid


def test_batches_sharing_an_offset():
    """Kafka takes batches that share their boundary offset, one after the other: the shared
    record is no longer acquired at the second (unless it is below the start offset)."""
    sp = new()
    acquire(sp, "m1", batches((0, 9)))
    before = sp.runs()
    outcome = ack(sp, "m1", (0, 4, (A.ACCEPT,)), (4, 6, (A.ACCEPT,)))
    assert outcome.error == ErrorCode.invalid_record_state
    assert sp.runs() == before
    ack(sp, "m1", (0, 4, (A.ACCEPT,)))
    assert ack(sp, "m1", (3, 4, (A.ACCEPT,)), (4, 6, (A.ACCEPT,))).error == ErrorCode.none


def test_renew_allowed_where_the_version_has_it():
    assert check_ack_batches([AckBatch(0, 0, (4,))], max_type=4) is None
