"""The broker's client quota managers (Kafka's QuotaFactory: produce, fetch, request,
controller mutation; ConnectionQuotas for the per-IP connection creation rate).

Each manager holds the quotas of its key from the metadata cache and one sensor per metric
tags (see ``resolve``); the cache calls ``QuotaManagers.update`` after every quota change, so a
new or lifted quota applies from the next request. ``enabled`` is False while no quota of the
type exists anywhere in the cluster: hot paths test that one attribute and do nothing else,
as Kafka's ``quotasEnabled`` spares them the sensors.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from dataplane.quota.resolve import Tags, by_key, limit, metric_tags
from dataplane.quota.sensor import RateSensor, TokenBucket, WindowConfig
from meta.quotas import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
)

log = logging.getLogger("rafka.quota")

# Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds: a sensor nobody recorded to
# for this long is dropped (it is recreated, empty, on the client's next request).
INACTIVE_SENSOR_EXPIRY_MS = 3600 * 1000
_SWEEP_EVERY_MS = 60 * 1000

S = TypeVar("S", RateSensor, TokenBucket)


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class _Sensors(Generic[S]):
    """Sensors by key, the idle ones dropped after INACTIVE_SENSOR_EXPIRY_MS (so a broker
    that saw many client ids does not keep a sensor for each forever)."""

    def __init__(self) -> None:
        self.by_key: dict[object, S] = {}
        self._next_sweep_ms = 0

    def get(self, key: object, create: Callable[[], S], now: int) -> S:
        sensor = self.by_key.get(key)
        if sensor is None:
            if now >= self._next_sweep_ms:
                self._sweep(now)
            sensor = self.by_key[key] = create()
        return sensor

    def _sweep(self, now: int) -> None:
        self._next_sweep_ms = now + _SWEEP_EVERY_MS
        idle = [
            k for k, s in self.by_key.items() if now - s.last_record_ms > INACTIVE_SENSOR_EXPIRY_MS
        ]
        for key in idle:
            del self.by_key[key]


class ClientQuotas:
    """One (user, client-id) quota type with rate sensors: producer_byte_rate,
    consumer_byte_rate or request_percentage (Kafka's ClientQuotaManager)."""

    def __init__(self, key: str, window: WindowConfig, max_throttle_ms: int | None) -> None:
        self.key = key
        self.enabled = False
        self._window = window
        # Kafka bounds the request quota's throttle by one window; bandwidth ones are unbounded
        self._max_throttle_ms = max_throttle_ms if max_throttle_ms is not None else 2**31 - 1
        self._quotas: dict[QuotaEntity, float] = {}
        self._tags: dict[tuple[str, str], Tags] = {}  # (user, client id) -> its sensor's tags
        self._sensors: _Sensors[RateSensor] = _Sensors()

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self._quotas = by_key(quotas, self.key)
        self.enabled = bool(self._quotas)
        self._tags.clear()
        for tags, sensor in self._sensors.by_key.items():
            sensor.bound = limit(self._quotas, tags)  # type: ignore[arg-type]

    def tags(self, user: str, client_id: str) -> Tags:
        found = self._tags.get((user, client_id))
        if found is None:
            if len(self._tags) > 100_000:  # client ids are the clients' choice: stay bounded
                self._tags.clear()
            found = self._tags[user, client_id] = metric_tags(self._quotas, user, client_id)
        return found

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota in force for the client (None: unlimited)."""
        return limit(self._quotas, self.tags(user, client_id))

    def _sensor(self, user: str, client_id: str, now: int) -> RateSensor:
        tags = self.tags(user, client_id)
        return self._sensors.get(
            tags,
            lambda: RateSensor(self._window, limit(self._quotas, tags), self._max_throttle_ms),
            now,
        )

    def record(self, user: str, client_id: str, value: float, now: int | None = None) -> int:
        """Record ``value`` for the client; the throttle time in ms it earns (0: none)."""
        now = now_ms() if now is None else now
        return self._sensor(user, client_id, now).record(value, now)

    def unrecord(self, user: str, client_id: str, value: float, now: int | None = None) -> None:
        """Take back a recorded value (a throttled fetch returns no data: Kafka's
        unrecordQuotaSensor)."""
        now = now_ms() if now is None else now
        self._sensor(user, client_id, now).record(-value, now, check=False)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """The most one request may take without being throttled for certain (Kafka's
        getMaxValueInQuotaWindow): a fetch asks for no more than this."""
        quota = self.quota(user, client_id)
        if quota is None:
            return float("inf")
        return quota * (self._window.samples - 1) * self._window.window_ms / 1000.0


class MutationQuotas:
    """controller_mutation_rate (KIP-599): partitions created, added or deleted, against a
    token bucket per metric tags (Kafka's ControllerMutationQuotaManager)."""

    def __init__(self, window: WindowConfig) -> None:
        self.key = CONTROLLER_MUTATION_RATE
        self.enabled = False
        self._window = window
        self._quotas: dict[QuotaEntity, float] = {}
        self._buckets: _Sensors[TokenBucket] = _Sensors()

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self._quotas = by_key(quotas, self.key)
        self.enabled = bool(self._quotas)
        for tags, bucket in list(self._buckets.by_key.items()):
            bound = limit(self._quotas, tags)  # type: ignore[arg-type]
            if bound is None:
                del self._buckets.by_key[tags]
            else:
                bucket.bound = bound

    def _bucket(self, user: str, client_id: str, now: int) -> TokenBucket | None:
        tags = metric_tags(self._quotas, user, client_id)
        bound = limit(self._quotas, tags)
        if bound is None:
            return None
        return self._buckets.get(tags, lambda: TokenBucket(self._window, bound, now), now)

    def record(
        self, user: str, client_id: str, permits: float, strict: bool, now: int | None = None
    ) -> tuple[bool, int]:
        """Spend ``permits`` mutations: (accepted, throttle ms). Strict (the request versions
        that know THROTTLING_QUOTA_EXCEEDED) refuses them while the bucket is in debt;
        permissive (older versions) accepts them and only throttles."""
        now = now_ms() if now is None else now
        bucket = self._bucket(user, client_id, now)
        if bucket is None:
            return True, 0
        if strict:
            throttle = bucket.throttle_ms(now)
            if throttle > 0:
                return False, throttle
            bucket.record(permits, now)
            return True, 0
        bucket.record(permits, now)
        return True, bucket.throttle_ms(now)

    def throttle_ms(self, user: str, client_id: str, now: int | None = None) -> int:
        """The time until the client's bucket is out of debt (0: not in debt)."""
        now = now_ms() if now is None else now
        bucket = self._bucket(user, client_id, now)
        return 0 if bucket is None else bucket.throttle_ms(now)


def canonical_ip(name: str) -> str:
    """One spelling per address, so an ``ip`` entity matches the peer address however written."""
    try:
        return ipaddress.ip_address(name).compressed
    except ValueError:
        return name


class ConnectionQuotas:
    """connection_creation_rate per client IP (KIP-612, Kafka's ConnectionQuotas): a new
    connection over the IP's rate is not served and is closed after the throttle time."""

    def __init__(self, window: WindowConfig) -> None:
        self.enabled = False
        self._window = window
        self._by_ip: dict[str, float] = {}
        self._default: float | None = None
        self._sensors: _Sensors[RateSensor] = _Sensors()

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self._by_ip, self._default = {}, None
        for entity, value in by_key(quotas, CONNECTION_CREATION_RATE).items():
            ip = dict(entity).get(IP)
            if ip is None:
                self._default = value
            else:
                self._by_ip[canonical_ip(ip)] = value
        self.enabled = bool(self._by_ip) or self._default is not None
        for key, sensor in self._sensors.by_key.items():
            sensor.bound = self._bound(str(key))

    def _bound(self, ip: str) -> float | None:
        bound = self._by_ip.get(ip)
        return self._default if bound is None else bound

    def record(self, host: str, now: int | None = None) -> int:
        """Count a new connection from ``host``; the throttle ms if it is over the rate (then
        it is not counted: Kafka unrecords a connection it does not accept)."""
        now = now_ms() if now is None else now
        ip = canonical_ip(host)
        bound = self._bound(ip)
        if bound is None:
            return 0
        sensor = self._sensors.get(
            ip, lambda: RateSensor(self._window, bound, self._window.window_ms), now
        )
        throttle = sensor.record(1.0, now)
        if throttle > 0:
            sensor.record(-1.0, now, check=False)
        return throttle


class QuotaManagers:
    """Every quota manager of a broker, fed by the metadata cache's client quotas."""

    def __init__(self, window: WindowConfig, controller_window: WindowConfig) -> None:
        self.produce = ClientQuotas(PRODUCER_BYTE_RATE, window, None)
        self.fetch = ClientQuotas(CONSUMER_BYTE_RATE, window, None)
        self.request = ClientQuotas(REQUEST_PERCENTAGE, window, window.window_ms)
        self.mutation = MutationQuotas(controller_window)
        self.connections = ConnectionQuotas(window)

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        for manager in (self.produce, self.fetch, self.request, self.mutation, self.connections):
            manager.update(quotas)
        log.info(
            "client quotas in force: %d entities (%s)",
            len(quotas),
            ", ".join(
                name
                for name, on in (
                    (PRODUCER_BYTE_RATE, self.produce.enabled),
                    (CONSUMER_BYTE_RATE, self.fetch.enabled),
                    (REQUEST_PERCENTAGE, self.request.enabled),
                    (CONTROLLER_MUTATION_RATE, self.mutation.enabled),
                    (CONNECTION_CREATION_RATE, self.connections.enabled),
                )
                if on
            )
            or "none",
        )
