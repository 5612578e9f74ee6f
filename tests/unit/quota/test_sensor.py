"""Kafka's quota Rate and KIP-599 token bucket: the figures Kafka's own formulas give."""

from __future__ import annotations

from dataplane.quota.sensor import Rate, RateSensor, TokenBucket, WindowConfig

WINDOW = WindowConfig(samples=11, window_ms=1000)
T0 = 1_000_000


def test_a_first_burst_is_measured_over_the_minimum_window() -> None:
    rate = Rate(WINDOW)
    rate.record(1000.0, T0)
    # samples - 1 full windows are assumed: 1000 bytes over 10 s
    assert rate.window_size(T0) == 10_000
    assert rate.measure(T0) == 100.0


def test_the_window_grows_to_the_retained_samples_then_old_samples_expire() -> None:
    rate = Rate(WINDOW)
    for second in range(20):
        rate.record(100.0, T0 + second * 1000)
    now = T0 + 19 * 1000
    # 11 samples (seconds 9-19) are retained, over the 10 s since the oldest started: Kafka's
    # rate reads 110/s right as a sample starts, and 100/s as it ends
    assert rate.measure(now) == 110.0
    assert rate.measure(now + 999) == 1100 / 10.999
    # nothing recorded for samples * window: every sample is reset
    assert rate.measure(now + 11_000) == 0.0


def test_throttle_time_brings_the_observed_rate_back_to_the_quota() -> None:
    sensor = RateSensor(WINDOW, bound=50.0, max_throttle_ms=2**31 - 1)
    assert sensor.record(400.0, T0) == 0  # 40/s: within the quota
    # 1000/10 s = 100/s against 50/s: (100 - 50) / 50 * 10 s
    assert sensor.record(600.0, T0) == 10_000


def test_throttle_time_is_capped_where_kafka_caps_it() -> None:
    sensor = RateSensor(WINDOW, bound=50.0, max_throttle_ms=1000)
    assert sensor.record(1000.0, T0) == 1000


def test_an_unrecorded_value_no_longer_counts() -> None:
    sensor = RateSensor(WINDOW, bound=50.0, max_throttle_ms=2**31 - 1)
    assert sensor.record(1000.0, T0) > 0
    sensor.record(-1000.0, T0, check=False)
    assert sensor.record(100.0, T0) == 0


def test_a_sensor_without_a_bound_only_measures() -> None:
    sensor = RateSensor(WINDOW, bound=None, max_throttle_ms=1000)
    assert sensor.record(1e12, T0) == 0
    assert sensor.rate.measure(T0) == 1e11


def test_a_token_bucket_lets_a_burst_through_then_makes_the_debt_wait() -> None:
    bucket = TokenBucket(WINDOW, bound=2.0, now_ms=T0)  # burst: 11 windows * 2/s = 22
    assert bucket.throttle_ms(T0) == 0
    bucket.record(30.0, T0)  # accepted while tokens remained: 8 in debt
    assert bucket.tokens == -8.0
    assert bucket.throttle_ms(T0) == 4000  # 8 tokens at 2/s
    assert bucket.throttle_ms(T0 + 1000) == 3000
    assert bucket.throttle_ms(T0 + 4000) == 0


def test_a_token_bucket_refills_up_to_its_burst_only() -> None:
    bucket = TokenBucket(WINDOW, bound=2.0, now_ms=T0)
    bucket.record(10.0, T0)
    bucket.record(0.0, T0 + 3_600_000)
    assert bucket.tokens == 22.0
