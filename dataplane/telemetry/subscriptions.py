"""Client metrics subscriptions per client instance (Kafka's ClientMetricsManager).

A client asks GetTelemetrySubscriptions for the metrics it should push; the broker gives it an
instance id on its first request, the union of the CLIENT_METRICS subscriptions that match its
attributes (client id, software, address...), their shortest interval and a subscription id
derived from them. The client then pushes every interval; a push with an older subscription id
(the subscriptions changed) gets UNKNOWN_SUBSCRIPTION_ID so it asks again, one arriving before
the interval has passed THROTTLING_QUOTA_EXCEEDED, an oversized one TELEMETRY_TOO_LARGE.

Instances live in memory on the broker the client talks to: another broker rebuilds the same
subscription id from the same inputs, so a client moving between brokers keeps pushing.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import crc32c

from dataplane.protocol.errors import ErrorCode
from dataplane.telemetry.catalog import (
    ALL_METRICS,
    CLIENT_METRICS,
    INTERVAL_MS_DEFAULT,
    InvalidClientMetricsConfig,
    Subscription,
    parse,
)
from dataplane.telemetry.otlp import Family, InvalidPayload, PayloadTooLarge, decode

log = logging.getLogger("rafka.telemetry")

CACHE_EXPIRY_MS = 60_000  # Kafka's DEFAULT_CACHE_EXPIRY_MS: an idle instance lives this long
CACHE_MAX_SIZE = 16_384
_RESERVED = {uuid.UUID(int=0), uuid.UUID(int=1)}  # Kafka's Uuid.ZERO_UUID, METADATA_TOPIC_ID


class ResourceConfigs(Protocol):
    """What the manager reads of the metadata: CLIENT_METRICS resources and their settings
    (the MetadataCache)."""

    def resource_names(self, resource_type: int) -> list[str]: ...

    def resource_configs(self, resource_type: int, name: str) -> Mapping[str, str]: ...


@dataclass
class ClientInstance:
    """One client instance's subscription and the times of its last requests."""

    instance_id: uuid.UUID
    attributes: Mapping[str, str]
    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.none
    families: list[Family] = field(default_factory=list)  # its latest push, decoded
    seen_ms: int = 0

    @property
    def expiry_ms(self) -> int:
        return max(CACHE_EXPIRY_MS, 3 * self.interval_ms)


@dataclass(frozen=True)
class SubscriptionAnswer:
    error: ErrorCode
    instance_id: uuid.UUID
    subscription_id: int = 0
    metrics: tuple[str, ...] = ()
    interval_ms: int = INTERVAL_MS_DEFAULT


def subscription_id(metrics: Iterable[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """CRC32C of the metrics and interval XORed with the instance id's hash, as Kafka derives
    it: equal inputs give the same id on every broker; a change of either gives another."""
    digest = crc32c.crc32c(f"{sorted(metrics)}{interval_ms}".encode())
    value = uuid_hash(instance_id) ^ digest
    return ((value + 2**31) % 2**32) - 2**31  # an int32


def uuid_hash(instance_id: uuid.UUID) -> int:
    """Java's Uuid.hashCode: the 64-bit xor of both halves folded to 32 bits (as unsigned)."""
    h = (instance_id.int >> 64) ^ (instance_id.int & (2**64 - 1))
    return (h ^ (h >> 32)) & 0xFFFFFFFF


class ClientMetricsManager:
    """Subscriptions and latest pushes of the client instances talking to this broker."""

    def __init__(
        self,
        configs: ResourceConfigs,
        max_bytes: int,
        clock_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
    ) -> None:
        self._configs = configs
        self.max_bytes = max_bytes
        self._clock_ms = clock_ms
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    # -- subscriptions ---------------------------------------------------------------------

    def subscriptions(self) -> list[Subscription]:
        """The valid CLIENT_METRICS resources (an invalid one is logged and skipped)."""
        out = []
        for name in self._configs.resource_names(CLIENT_METRICS):
            try:
                out.append(parse(name, self._configs.resource_configs(CLIENT_METRICS, name)))
            except InvalidClientMetricsConfig as e:
                log.warning(
                    "ignoring client metrics subscription %s: %s; fix it with "
                    "kafka-client-metrics.sh --alter",
                    name,
                    e,
                )
        return out

    def _evaluate(
        self, instance_id: uuid.UUID, attributes: Mapping[str, str]
    ) -> tuple[int, tuple[str, ...], int]:
        """(subscription id, metrics, interval) of a client from the subscriptions now."""
        metrics: set[str] = set()
        interval = INTERVAL_MS_DEFAULT
        for sub in self.subscriptions():
            if sub.matches(attributes):
                metrics.update(sub.metrics)
                interval = min(interval, sub.interval_ms)
        if ALL_METRICS in metrics:
            metrics = {ALL_METRICS}
        ordered = tuple(sorted(metrics))
        return subscription_id(ordered, interval, instance_id), ordered, interval

    def _instance(self, instance_id: uuid.UUID, attributes: Mapping[str, str]) -> ClientInstance:
        """The instance, re-evaluated against the current subscriptions: a changed
        subscription resets its timers, so the client gets the new one at once."""
        now = self._clock_ms()
        self._expire(now)
        attributes = {**attributes, "client_instance_id": str(instance_id)}
        sub_id, metrics, interval = self._evaluate(instance_id, attributes)
        instance = self.instances.get(instance_id)
        if instance is None or instance.subscription_id != sub_id:
            previous = instance
            instance = ClientInstance(instance_id, attributes, sub_id, metrics, interval)
            if previous is not None:
                instance.families = previous.families
                instance.terminating = previous.terminating
                instance.last_error = previous.last_error
            self.instances[instance_id] = instance
            while len(self.instances) > CACHE_MAX_SIZE:
                self.instances.popitem(last=False)
        self.instances.move_to_end(instance_id)
        instance.seen_ms = now
        return instance

    def _expire(self, now: int) -> None:
        for instance_id, instance in list(self.instances.items()):
            if now - instance.seen_ms > instance.expiry_ms:
                del self.instances[instance_id]

    # -- the two APIs ----------------------------------------------------------------------

    def get_subscriptions(
        self, instance_id: uuid.UUID | None, attributes: Mapping[str, str]
    ) -> SubscriptionAnswer:
        """GetTelemetrySubscriptions: a new instance id for a client without one."""
        if instance_id is None or instance_id.int == 0:
            instance_id = uuid.uuid4()
            while instance_id in self.instances or instance_id in _RESERVED:
                instance_id = uuid.uuid4()
        instance = self._instance(instance_id, attributes)
        now = self._clock_ms()
        last = max(instance.last_get_ms, instance.last_push_ms)
        if not last or now - last >= instance.interval_ms:
            instance.last_get_ms = now
        elif instance.last_error not in (
            ErrorCode.unknown_subscription_id,
            ErrorCode.unsupported_compression_type,
        ):  # asked again within the interval, without a push error to recover from
            return SubscriptionAnswer(ErrorCode.throttling_quota_exceeded, instance_id)
        instance.last_error = ErrorCode.none
        return SubscriptionAnswer(
            ErrorCode.none,
            instance_id,
            instance.subscription_id,
            instance.metrics,
            instance.interval_ms,
        )

    def push(
        self,
        instance_id: uuid.UUID | None,
        attributes: Mapping[str, str],
        sub_id: int,
        terminating: bool,
        compression: int,
        payload: bytes,
    ) -> ErrorCode:
        """PushTelemetry: validate, then keep the decoded payload as the client's latest."""
        if instance_id is None or instance_id in _RESERVED:
            return ErrorCode.invalid_request
        instance = self._instance(instance_id, attributes)
        error = self._check_push(instance, sub_id, terminating, compression, len(payload))
        instance.terminating = instance.terminating or terminating
        if error == ErrorCode.none and payload:
            labels = {
                "client_instance_id": str(instance_id),
                "client_id": instance.attributes.get("client_id", ""),
                "client_software_name": instance.attributes.get("client_software_name", ""),
                "client_software_version": instance.attributes.get("client_software_version", ""),
            }
            try:
                instance.families = decode(payload, compression, self.max_bytes, labels)
            except PayloadTooLarge as e:
                log.warning("telemetry push of client %s refused: %s", instance_id, e)
                error = ErrorCode.telemetry_too_large
            except InvalidPayload as e:
                log.warning(
                    "telemetry push of client %s dropped: %s; the client stops pushing "
                    "(INVALID_RECORD) — check its OTLP encoding",
                    instance_id,
                    e,
                )
                error = ErrorCode.invalid_record
        instance.last_error = error
        return error

    def _check_push(
        self, instance: ClientInstance, sub_id: int, terminating: bool, compression: int, size: int
    ) -> ErrorCode:
        """Kafka's validatePushRequest, in its order."""
        if instance.terminating:
            return ErrorCode.invalid_request
        now = self._clock_ms()
        accept = instance.last_get_ms > instance.last_push_ms or (
            now - instance.last_push_ms >= instance.interval_ms or not instance.last_push_ms
        )
        if not accept and not terminating:
            return ErrorCode.throttling_quota_exceeded
        if accept:
            instance.last_push_ms = now
        if sub_id != instance.subscription_id:
            return ErrorCode.unknown_subscription_id
        if compression not in (0, 1, 2, 3, 4):
            return ErrorCode.unsupported_compression_type
        if size > self.max_bytes:
            return ErrorCode.telemetry_too_large
        return ErrorCode.none

    def latest(self) -> list[list[Family]]:
        """The latest decoded push of each live instance (read by the Prometheus collector
        from its own thread: a snapshot, expired instances left out)."""
        now = self._clock_ms()
        return [
            i.families
            for i in list(self.instances.values())
            if i.families and now - i.seen_ms <= i.expiry_ms
        ]
