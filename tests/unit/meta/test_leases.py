"""Broker leases kept by the Raft leader."""

from __future__ import annotations

from meta.leases import BrokerLeases


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_unknown_brokers_get_a_fresh_lease_then_expire() -> None:
    clock = Clock()
    leases = BrokerLeases(session_timeout_s=9, clock=clock)
    assert leases.expired({1: 5}) == []  # first seen: lease starts now
    clock.now += 9
    assert leases.expired({1: 5}) == []
    clock.now += 0.1
    assert leases.expired({1: 5}) == [(1, 5)]


def test_heartbeats_renew_the_lease() -> None:
    clock = Clock()
    leases = BrokerLeases(session_timeout_s=9, clock=clock)
    leases.expired({1: 5})
    clock.now += 8
    leases.renew(1, 5)
    clock.now += 8
    assert leases.expired({1: 5}) == []


def test_a_new_registration_epoch_starts_a_fresh_lease() -> None:
    clock = Clock()
    leases = BrokerLeases(session_timeout_s=9, clock=clock)
    leases.renew(1, 5)
    clock.now += 10
    assert leases.expired({1: 6}) == []  # registered again (epoch 6) through another node
    clock.now += 10
    assert leases.expired({1: 6}) == [(1, 6)]


def test_a_new_leader_starts_every_lease_fresh() -> None:
    clock = Clock()
    leases = BrokerLeases(session_timeout_s=9, clock=clock)
    leases.renew(1, 5)
    clock.now += 10
    leases.clear()
    assert leases.expired({1: 5}) == []


def test_fenced_brokers_are_not_tracked() -> None:
    clock = Clock()
    leases = BrokerLeases(session_timeout_s=9, clock=clock)
    leases.renew(1, 5)
    assert leases.expired({}) == []  # broker 1 is fenced now
    clock.now += 10
    assert leases.expired({1: 5}) == []  # unfenced again: a fresh lease
