"""Kafka's quota measurements: a sampled ``Rate`` and the ``TokenBucket`` of KIP-599.

Ports of org.apache.kafka.common.metrics.stats.{SampledStat, Rate, TokenBucket} and of the
quota check of ``Sensor.record(value, timeMs, checkQuotas)``, so a client is throttled for the
same amounts, after the same windows, as by Kafka. Times are milliseconds of a monotonic clock
passed in by the caller (tests drive them by hand).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WindowConfig:
    """Kafka's MetricConfig of a quota sensor: ``quota.window.num`` samples of
    ``quota.window.size.seconds`` each."""

    samples: int = 11
    window_ms: int = 1000


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class Rate:
    """Kafka's Rate over a WindowedSum: the sum of the retained samples divided by the time
    they span, with at least ``samples - 1`` full windows assumed (so a first burst is not
    measured over a few milliseconds). One extra sample slot holds the overlapping one."""

    __slots__ = ("_config", "_current", "_samples")

    def __init__(self, config: WindowConfig) -> None:
        self._config = config
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self._config.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Per second."""
        self._purge(now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size(now_ms) / 1000.0)

    def window_size(self, now_ms: int) -> int:
        """The span the rate is measured over, in ms (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self._config.window_ms
        min_full_windows = self._config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self._config.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self._config.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def _purge(self, now_ms: int) -> None:
        """Reset samples without events inside the monitored window."""
        expire_age = self._config.samples * self._config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


class RateSensor:
    """A Rate with an upper-bound quota: ``record`` returns the throttle time Kafka gives when
    the recorded value takes the rate over the bound (QuotaUtils.throttleTime: the delay that
    brings the observed rate O back to the bound T over the window W, (O - T) / T * W), capped
    at ``max_throttle_ms`` where Kafka caps it (request and connection quotas)."""

    __slots__ = ("bound", "last_record_ms", "max_throttle_ms", "rate")

    def __init__(self, config: WindowConfig, bound: float | None, max_throttle_ms: int) -> None:
        self.rate = Rate(config)
        self.bound = bound  # None: no quota, only measured
        self.max_throttle_ms = max_throttle_ms
        self.last_record_ms = 0

    def record(self, value: float, now_ms: int, check: bool = True) -> int:
        """Record ``value``; the throttle time in ms if that violates the quota, else 0."""
        self.rate.record(value, now_ms)
        self.last_record_ms = now_ms
        if not check or self.bound is None:
            return 0
        observed = self.rate.measure(now_ms)
        if observed <= self.bound:
            return 0
        throttle = (observed - self.bound) / self.bound * self.rate.window_size(now_ms)
        return min(round(throttle), self.max_throttle_ms)


class TokenBucket:
    """KIP-599's token bucket: ``bound`` tokens per second refill it, up to a burst of
    ``samples * window * bound``; a client may spend while it holds tokens (even into debt)
    and then waits until the debt is repaid."""

    __slots__ = ("_burst_s", "bound", "last_record_ms", "last_update_ms", "tokens")

    def __init__(self, config: WindowConfig, bound: float, now_ms: int) -> None:
        self._burst_s = config.samples * config.window_ms / 1000.0
        self.bound = bound
        # a new bucket is full, as Kafka's first refill (from time 0) makes it
        self.tokens = self._burst_s * bound
        self.last_update_ms = now_ms
        self.last_record_ms = now_ms

    @property
    def _burst(self) -> float:
        return self._burst_s * self.bound

    def _refill(self, now_ms: int) -> None:
        elapsed_s = (now_ms - self.last_update_ms) / 1000.0
        self.tokens = min(self._burst, self.tokens + self.bound * elapsed_s)
        self.last_update_ms = now_ms

    def throttle_ms(self, now_ms: int) -> int:
        """0 while the bucket holds tokens; else the time to repay the debt (Kafka's
        ControllerMutationQuotaManager.throttleTimeMs: -tokens / rate * 1000)."""
        self._refill(now_ms)
        if self.tokens >= 0:
            return 0
        return round(-self.tokens / self.bound * 1000)

    def record(self, value: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens = min(self._burst, self.tokens - value)
        self.last_record_ms = now_ms
