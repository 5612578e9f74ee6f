"""The broker's view of its meta lease: coordinating stops one heartbeat interval before the
meta service may fence the broker, and resumes once a heartbeat succeeds again."""

from __future__ import annotations

import logging

import pytest

from dataplane.replica.meta_lease import MetaLease


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_lease_lapses_a_heartbeat_interval_before_the_session_timeout() -> None:
    clock = _Clock()
    lease = MetaLease(3000, 500, clock)
    clock.now += 2.5
    assert not lease.lapsed()  # 3000 - 500 ms: not yet
    clock.now += 0.01
    assert lease.lapsed()


def test_the_lapse_counts_from_when_the_last_successful_heartbeat_was_sent() -> None:
    clock = _Clock()
    lease = MetaLease(3000, 500, clock)
    lease.applied(5)
    clock.now += 2.0
    sent = lease.now()
    clock.now += 1.0  # the heartbeat took 1 s to succeed
    lease.renewed(sent, metadata_offset=5)
    clock.now += 1.4  # 2.4 s after it was sent
    assert not lease.lapsed()
    clock.now += 0.2  # 2.6 s after it was sent, 1.6 s after it succeeded
    assert lease.lapsed()


def test_an_older_success_never_moves_the_lease_back() -> None:
    clock = _Clock()
    lease = MetaLease(3000, 500, clock)
    early = lease.now()
    clock.now += 1.0
    lease.renewed(lease.now())
    lease.renewed(early)  # a slow heartbeat answered after a later one
    clock.now += 2.0
    assert not lease.lapsed()


def test_a_success_after_the_lapse_resumes_serving_and_both_changes_are_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    lease = MetaLease(3000, 500, clock)
    lease.applied(5)
    clock.now += 10
    with caplog.at_level(logging.WARNING, "rafka.meta_lease"):
        assert lease.lapsed()
        assert lease.lapsed()
        lease.renewed(lease.now(), metadata_offset=5)
        assert not lease.lapsed()
        lease.renewed(lease.now(), metadata_offset=5)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "NOT_COORDINATOR" in messages[0]
    assert "meta nodes" in messages[0]
    assert "succeeded again" in messages[1]


def test_the_margin_never_takes_the_whole_session() -> None:
    clock = _Clock()
    lease = MetaLease(1000, 2000, clock)  # an interval longer than the session: half of it
    clock.now += 0.5
    assert not lease.lapsed()
    clock.now += 0.01
    assert lease.lapsed()


def test_after_a_lapse_coordinating_resumes_once_the_missed_metadata_is_applied() -> None:
    """The meta service may have fenced the broker and moved its leaderships while it was cut
    off: the heartbeat that renews the lease tells the offset to apply before answering as a
    coordinator again."""
    clock = _Clock()
    lease = MetaLease(3000, 500, clock)
    lease.applied(40)
    clock.now += 10
    assert lease.lapsed()
    lease.renewed(lease.now(), metadata_offset=42)
    assert lease.lapsed()  # the moves at 41-42 not seen yet
    lease.applied(41)
    assert lease.lapsed()
    lease.applied(42)
    assert not lease.lapsed()


def test_a_heartbeat_within_the_lease_asks_no_catch_up() -> None:
    """In the normal course the cache trails the meta leader a little: no NOT_COORDINATOR then."""
    clock = _Clock()
    lease = MetaLease(3000, 500, clock)
    lease.applied(40)
    clock.now += 1
    lease.renewed(lease.now(), metadata_offset=45)
    assert not lease.lapsed()


def test_a_registration_does_not_renew_a_lease_that_ran_out() -> None:
    """A registration tells no metadata offset: the next heartbeat renews the lease with one."""
    clock = _Clock()
    lease = MetaLease(3000, 500, clock)
    clock.now += 10
    lease.renewed(lease.now())
    assert lease.lapsed()
    lease.renewed(lease.now(), metadata_offset=7)
    lease.applied(7)
    assert not lease.lapsed()
