"""The quota managers: enabled flags, quota changes applied to live sensors, strict and
permissive mutation quotas, per-IP connection rates."""

from __future__ import annotations

from dataplane.quota.manager import INACTIVE_SENSOR_EXPIRY_MS, QuotaManagers
from dataplane.quota.sensor import WindowConfig
from meta.quotas import CLIENT_ID, IP, USER

T0 = 5_000_000
WINDOW = WindowConfig(11, 1000)


def managers(quotas: dict) -> QuotaManagers:
    m = QuotaManagers(WINDOW, WINDOW)
    m.update(quotas)
    return m


def test_no_quota_no_manager_enabled() -> None:
    m = managers({})
    assert not any(x.enabled for x in (m.produce, m.fetch, m.request, m.mutation, m.connections))


def test_only_the_types_with_quotas_are_enabled() -> None:
    m = managers({((CLIENT_ID, "app"),): {"producer_byte_rate": 100.0}})
    assert m.produce.enabled
    assert not m.fetch.enabled
    assert not m.request.enabled
    assert not m.connections.enabled


def test_clients_of_one_user_share_the_users_rate() -> None:
    m = managers({((USER, "alice"),): {"producer_byte_rate": 100.0}})
    assert m.produce.record("alice", "a", 900.0, T0) == 0
    assert m.produce.record("alice", "b", 900.0, T0) > 0  # 1800/10 s > 100/s
    assert m.produce.record("bob", "b", 900.0, T0) == 0  # no quota


def test_a_lifted_quota_stops_throttling_at_once() -> None:
    quotas = {((CLIENT_ID, "app"),): {"consumer_byte_rate": 100.0}}
    m = managers(quotas)
    assert m.fetch.record("ANONYMOUS", "app", 5000.0, T0) > 0
    m.update({})
    assert not m.fetch.enabled
    assert m.fetch.record("ANONYMOUS", "app", 5000.0, T0) == 0


def test_a_changed_quota_applies_to_the_existing_sensor() -> None:
    entity = ((CLIENT_ID, "app"),)
    m = managers({entity: {"consumer_byte_rate": 100.0}})
    assert m.fetch.record("u", "app", 1500.0, T0) > 0
    m.update({entity: {"consumer_byte_rate": 1000.0}})
    assert m.fetch.record("u", "app", 0.0, T0) == 0  # 150/s under the new 1000/s


def test_a_fetch_asks_for_at_most_one_quota_window() -> None:
    m = managers({((CLIENT_ID, None),): {"consumer_byte_rate": 1000.0}})
    assert m.fetch.max_value_in_window("u", "c") == 10_000.0
    assert m.produce.max_value_in_window("u", "c") == float("inf")


def test_the_request_quota_throttles_for_one_window_at_most() -> None:
    m = managers({((USER, None),): {"request_percentage": 10.0}})
    # 50 s of handler time in percent-seconds (100 per second): far over 10 %
    assert m.request.record("u", "c", 5000.0, T0) == 1000


def test_strict_mutations_are_refused_while_in_debt_permissive_ones_throttled() -> None:
    m = managers({((CLIENT_ID, "admin"),): {"controller_mutation_rate": 2.0}})
    assert m.mutation.record("u", "admin", 30, strict=True, now=T0) == (True, 0)  # burst 22
    accepted, throttle = m.mutation.record("u", "admin", 1, strict=True, now=T0)
    assert not accepted
    assert throttle == 4000  # 8 in debt at 2/s
    assert m.mutation.record("u", "admin", 1, strict=False, now=T0) == (True, 4500)
    assert m.mutation.record("u", "other", 100, strict=True, now=T0) == (True, 0)  # no quota


def test_connections_over_the_ip_rate_are_refused_and_not_counted() -> None:
    m = managers({((IP, "10.0.0.1"),): {"connection_creation_rate": 1.0}})
    accepted = [m.connections.record("10.0.0.1", T0) for _ in range(12)]
    assert accepted[:10] == [0] * 10  # 10 connections over the minimum window of 10 s
    assert all(0 < t <= 1000 for t in accepted[10:])
    assert m.connections.record("10.0.0.2", T0) == 0  # no quota for it


def test_the_default_ip_quota_applies_to_addresses_however_spelled() -> None:
    m = managers({((IP, None),): {"connection_creation_rate": 1.0}})
    for _ in range(10):
        assert m.connections.record("::ffff:0:1", T0) == 0
    assert m.connections.record("0:0:0:0:0:ffff:0:1", T0) > 0


def test_idle_sensors_are_dropped() -> None:
    m = managers({((CLIENT_ID, None),): {"producer_byte_rate": 100.0}})
    m.produce.record("u", "old", 1.0, T0)
    later = T0 + INACTIVE_SENSOR_EXPIRY_MS + 120_000
    m.produce.record("u", "new", 1.0, later)
    assert ("", "old") not in m.produce._sensors.by_key
