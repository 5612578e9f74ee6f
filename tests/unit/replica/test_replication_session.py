"""Replication fetch sessions: what the follower sends (changes only, removals, retries, the
throttle), what the leader's session holds and marks dirty (fed by the partitions' changes), and
the ISR standing of a follower whose fetch stands in a live session, on real partitions."""

from __future__ import annotations

from collections.abc import Callable

from dataplane.replica.partition import now_ms
from dataplane.replica.replication_session import FetchState, FollowerSession, Key, LeaderSession
from tests.unit.replica.test_partition import LAG_MS, B, C, Replica, leader, replica_at

__all__ = ["leader", "replica_at"]  # fixtures

P0: Key = (b"\x01" * 16, 0)  # the partition of test_partition's Replica
P1: Key = (b"\x02" * 16, 1)
P2: Key = (b"\x02" * 16, 2)


def state(offset: int, epoch: int = 1, log_start: int = 0) -> FetchState:
    return FetchState(epoch, offset, epoch if offset else -1, log_start, 1 << 20)


class Follower:
    """A follower's partitions (their states) and throttle, around a FollowerSession."""

    def __init__(self, *keys: Key) -> None:
        self.states: dict[Key, FetchState] = {k: state(0) for k in keys}
        self.held: set[Key] = set()
        self.session = FollowerSession()

    def request(self, now: float = 0.0) -> tuple[dict[Key, FetchState], list[Key], bool]:
        send, removed, full = self.session.next_request(
            self.states, self.states.get, self.held.__contains__, now
        )
        return dict(send), removed, full


# -- follower ------------------------------------------------------------------------------------


def test_the_first_request_is_full_then_only_changes_go() -> None:
    f = Follower(P1, P2)
    assert f.request() == ({P1: state(0), P2: state(0)}, [], True)
    f.session.confirm(True)
    assert f.request() == ({}, [], False)  # nothing changed: an empty request (a long poll)
    f.states[P1] = state(5)
    f.session.changed(P1)
    f.session.changed(P2)  # a candidate whose state is unchanged is not sent
    assert f.request() == ({P1: state(5)}, [], False)
    assert f.session.expected_epoch(P1) == 1
    assert f.session.expected_epoch(P0) is None


def test_an_older_leader_that_keeps_no_session_gets_full_requests() -> None:
    f = Follower(P1, P2)
    f.request()
    f.session.confirm(False)
    assert f.request() == ({P1: state(0), P2: state(0)}, [], True)


def test_added_and_removed_partitions() -> None:
    f = Follower(P1)
    f.request()
    f.session.confirm(True)
    f.states[P2] = state(0)
    f.session.changed(P2)
    del f.states[P1]
    f.session.changed(P1)
    assert f.request() == ({P2: state(0)}, [P1], False)
    f.session.changed(P1)  # removed twice: said once
    assert f.request() == ({}, [], False)


def test_a_new_epoch_is_a_change() -> None:
    f = Follower(P1)
    f.request()
    f.session.confirm(True)
    f.states[P1] = state(0, epoch=2)
    f.session.changed(P1)
    assert f.request() == ({P1: state(0, epoch=2)}, [], False)
    assert f.session.expected_epoch(P1) == 2


def test_an_unusable_answer_is_retried_when_due_even_unchanged() -> None:
    f = Follower(P1, P2)
    f.request()
    f.session.confirm(True)
    f.session.retry(P1, at=10.0)
    assert f.request(now=9.0) == ({}, [], False)
    assert f.request(now=10.0) == ({P1: state(0)}, [], False)
    assert f.request(now=11.0) == ({}, [], False)  # once


def test_a_partition_held_back_by_the_throttle_leaves_the_session_until_released() -> None:
    f = Follower(P1, P2)
    f.held.add(P2)
    assert f.request() == ({P1: state(0)}, [], True)
    f.session.confirm(True)
    assert f.session.holds_back
    assert f.request() == ({}, [], False)  # checked again each round
    f.held.clear()
    assert f.request() == ({P2: state(0)}, [], False)
    assert not f.session.holds_back
    f.held.add(P1)
    f.session.changed(P1)
    assert f.request() == ({}, [P1], False)  # dropped: the leader stops answering it


def test_a_refused_request_makes_the_next_one_full() -> None:
    f = Follower(P1)
    f.request()
    f.session.confirm(True)
    f.session.reset()
    assert f.request() == ({P1: state(0)}, [], True)


# -- leader --------------------------------------------------------------------------------------


def test_a_full_request_replaces_the_session_and_an_incremental_one_updates_it() -> None:
    s = LeaderSession(B)
    s.receive([(P1, state(0)), (P2, state(0))], [], full=True, now=1)
    assert list(s.entries) == s.to_evaluate(False) == [P1, P2]
    s.settled(P1)
    s.answered(P2, 0, 0, 0, keep=False)
    s.receive([(P1, state(3))], [], full=False, now=2)
    assert s.to_evaluate(False) == [P1]
    assert s.to_evaluate(True) == [P1, P2]
    assert s.entries[P1].state == state(3)
    assert s.entries[P1].fresh
    assert s.last_request_ms == 2
    s.receive([], [P2], full=False, now=3)
    assert list(s.entries) == [P1]
    s.receive([(P2, state(0))], [], full=True, now=4)
    assert list(s.entries) == [P2]


def test_answered_partitions_stay_dirty_only_when_kept() -> None:
    s = LeaderSession(B)
    s.receive([(P1, state(0)), (P2, state(0))], [], full=True, now=1)
    s.answered(P1, 7, 1, 9, keep=True)  # records still to send
    s.answered(P2, 7, 1, 9, keep=False)
    assert s.to_evaluate(False) == [P1]
    entry = s.entries[P2]
    assert (entry.high_watermark, entry.log_start_offset, entry.answer) == (7, 1, False)


def test_changes_of_a_bound_partition_mark_it_dirty_and_urgent_ones_end_the_long_poll(
    leader: Replica,
) -> None:
    p = leader.partition
    s = LeaderSession(B)
    s.receive([(P0, state(0))], [], full=True, now=now_ms())
    s.bind(s.entries[P0], p)
    s.settled(P0)
    p.record_follower_fetch(C, 0, now_ms())  # nothing moves
    assert s.to_evaluate(False) == []
    assert not s.event.is_set()
    leader.append(2)  # urgent
    assert s.to_evaluate(False) == [P0]
    assert s.event.is_set()
    s.settled(P0)
    s.receive([], [], full=False, now=now_ms())  # a new request: a new long poll
    p.record_follower_fetch(B, 2, now_ms())
    p.record_follower_fetch(C, 2, now_ms())  # the high watermark moves: not urgent
    assert p.high_watermark == 2
    assert s.to_evaluate(False) == [P0]
    assert not s.event.is_set()


def test_a_removed_partition_or_a_closed_session_stops_listening(leader: Replica) -> None:
    p = leader.partition
    s = LeaderSession(B)
    s.receive([(P0, state(0))], [], full=True, now=now_ms())
    s.bind(s.entries[P0], p)
    s.close()
    leader.append(1)
    assert s.to_evaluate(False) == []
    assert not s.event.is_set()
    s.receive([(P0, state(0))], [], full=True, now=now_ms())
    s.bind(s.entries[P0], p)
    s.receive([], [P0], full=False, now=now_ms())
    leader.append(1)
    assert s.to_evaluate(False) == []
    assert not s.event.is_set()


def test_out_of_sync_partitions_are_recorded_again_at_every_request() -> None:
    s = LeaderSession(B)
    s.receive([(P1, state(0)), (P2, state(0))], [], full=True, now=1)
    s.entries[P1].fresh = s.entries[P2].fresh = False
    s.set_in_sync(P1, False)
    s.set_in_sync(P2, True)
    s.settled(P1)
    s.settled(P2)
    s.receive([], [], full=False, now=2)
    assert s.to_evaluate(False) == [P1]
    assert s.entries[P1].fresh
    assert not s.entries[P2].fresh
    s.set_in_sync(P1, True)
    s.settled(P1)
    s.receive([], [], full=False, now=3)
    assert s.to_evaluate(False) == []


def test_a_new_broker_epoch_records_every_partition_again() -> None:
    """KIP-903: the leader sends each member's broker epoch with an ISR change, as recorded
    with its fetches; a follower that registered again must have them recorded anew, standing
    fetches included."""
    s = LeaderSession(B)
    s.receive([(P1, state(0)), (P2, state(0))], [], full=True, now=1, broker_epoch=7)
    for key in (P1, P2):
        s.entries[key].fresh = False
        s.settled(key)
    s.receive([], [], full=False, now=2, broker_epoch=7)
    assert s.to_evaluate(False) == []
    s.receive([], [], full=False, now=3, broker_epoch=8)
    assert s.broker_epoch == 8
    assert s.to_evaluate(False) == [P1, P2]
    assert all(e.fresh for e in s.entries.values())


# -- ISR standing of a standing fetch ------------------------------------------------------------


def _standing(leader: Replica, session: LeaderSession, replica: int, offset: int) -> None:
    leader.partition.record_follower_fetch(replica, offset, session.last_request_ms, 0, session)


def test_an_idle_follower_at_the_log_end_stays_in_the_isr_while_its_session_asks(
    leader: Replica,
) -> None:
    p = leader.partition
    start = now_ms()
    b, c = LeaderSession(B, last_request_ms=start), LeaderSession(C, last_request_ms=start)
    end = leader.append(2)
    _standing(leader, b, B, end)
    _standing(leader, c, C, end)
    b.last_request_ms = c.last_request_ms = start + 3 * LAG_MS  # empty requests: still asking
    assert p.lagging_followers(start + 3 * LAG_MS + 1, LAG_MS) == []
    assert p.high_watermark == end


def test_a_follower_whose_session_stops_asking_leaves_the_isr(leader: Replica) -> None:
    """A paused follower (SIGSTOP) keeps its connection, not its requests."""
    p = leader.partition
    start = now_ms()
    b, c = LeaderSession(B, last_request_ms=start), LeaderSession(C, last_request_ms=start)
    end = leader.append(1)
    _standing(leader, b, B, end)
    _standing(leader, c, C, end)
    c.last_request_ms = start + 2 * LAG_MS
    assert p.lagging_followers(start + 2 * LAG_MS, LAG_MS) == [B]


def test_an_append_past_a_standing_follower_starts_its_lag(leader: Replica) -> None:
    p = leader.partition
    start = now_ms()
    b = LeaderSession(B, last_request_ms=start)
    end = leader.append(1)
    _standing(leader, b, B, end)
    p.record_follower_fetch(C, end, start)
    b.last_request_ms = start + LAG_MS  # asked at the end just before the append
    leader.append(1)  # B does not fetch it, and goes on asking for the old end
    b.last_request_ms = start + 3 * LAG_MS
    assert p.followers[B].last_caught_up_ms == start + LAG_MS
    assert B in p.lagging_followers(start + 2 * LAG_MS + 1, LAG_MS)


def test_a_closed_session_ends_the_standing_fetch_at_its_last_request(leader: Replica) -> None:
    p = leader.partition
    start = now_ms()
    b = LeaderSession(B, last_request_ms=start)
    end = leader.append(1)
    b.receive([(P0, state(end))], [], full=True, now=start + LAG_MS)
    b.bind(b.entries[P0], p)
    _standing(leader, b, B, end)
    assert p.has_standing_fetch(B, b)
    b.close()
    assert not p.has_standing_fetch(B, b)
    assert p.followers[B].last_caught_up_ms == start + LAG_MS
    assert B in p.lagging_followers(start + 2 * LAG_MS + 1, LAG_MS)


def test_a_new_leader_epoch_forgets_the_standing_fetches(
    leader: Replica, replica_at: Callable[..., Replica]
) -> None:
    p = leader.partition
    b = LeaderSession(B, last_request_ms=now_ms())
    _standing(leader, b, B, leader.append(1))
    leader.update(leader=C, new_leader_epoch=True)
    leader.update(new_leader_epoch=True)  # leads again: what it knows of followers restarts
    assert not p.has_standing_fetch(B, b)
