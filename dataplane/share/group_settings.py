"""A group's settings: its GROUP configs (IncrementalAlterConfigs on the group, kept by the meta
service) over the broker's `group.consumer.*` / `group.share.*` / `group.streams.*` defaults.

As Kafka's GroupConfigManager with GroupConfig.evaluate: a stored value outside the broker's
current min/max bounds (the bounds may have changed after it was set) is capped to them, with a
warning; a value that does not parse is ignored (the config APIs validate before storing).
Resolving is a dict lookup: results are cached until the metadata cache's resource configs
change (`MetadataCache.resource_configs_version`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dataplane.config import BrokerConfig
from dataplane.config_resources import (
    GROUP,
    ISOLATION_LEVELS,
    auto_offset_reset_problem,
    group_bounds,
    group_defaults,
)
from dataplane.share.model import ShareGroupSettings

if TYPE_CHECKING:
    from dataplane.metadata_cache import MetadataCache

log = logging.getLogger("rafka.share.group_settings")

__all__ = ["GroupConfigs"]


class GroupConfigs:
    """The `GroupSettings` of model.py, and the membership settings of consumer, share and
    streams groups. Construct once per broker: `GroupConfigs(config, cache)`."""

    def __init__(self, config: BrokerConfig, cache: MetadataCache) -> None:
        self._config = config
        self._cache = cache
        self._defaults = group_defaults(config)
        self._version = -1
        self._resolved: dict[str, dict[str, str]] = {}
        self._share: dict[str, ShareGroupSettings] = {}

    def _values(self, group_id: str) -> Mapping[str, str]:
        """The group's effective config values (every GROUP config, as strings)."""
        version = self._cache.resource_configs_version
        if version != self._version:
            self._version = version
            self._resolved.clear()
            self._share.clear()
        values = self._resolved.get(group_id)
        if values is None:
            values = self._evaluate(group_id, self._cache.resource_configs(GROUP, group_id))
            self._resolved[group_id] = values
        return values

    def _evaluate(self, group_id: str, own: Mapping[str, str]) -> dict[str, str]:
        values = dict(self._defaults)
        for name, value in own.items():
            if name not in values:
                continue
            if name == "share.auto.offset.reset":
                if auto_offset_reset_problem(value) is None:
                    values[name] = value.strip()
                continue
            if name == "share.isolation.level":
                if value.strip() in ISOLATION_LEVELS:
                    values[name] = value.strip()
                continue
            try:
                number = int(value.strip())
            except ValueError:
                continue
            low, high = group_bounds(self._config, name)
            capped = min(max(number, low), high)
            if capped != number:
                log.warning(
                    "The group config '%s' for group '%s' has value %d outside the broker's "
                    "allowed range [%d, %d]: %d applies (change the group config or the "
                    "broker's bounds)",
                    name,
                    group_id,
                    number,
                    low,
                    high,
                    capped,
                )
            values[name] = str(capped)
        return values

    def share(self, group_id: str) -> ShareGroupSettings:
        settings = self._share.get(group_id)
        if settings is None or self._version != self._cache.resource_configs_version:
            values = self._values(group_id)
            settings = ShareGroupSettings(
                record_lock_duration_ms=int(values["share.record.lock.duration.ms"]),
                delivery_count_limit=int(values["share.delivery.count.limit"]),
                auto_offset_reset=_strategy(values["share.auto.offset.reset"]),
                isolation_level=ISOLATION_LEVELS[values["share.isolation.level"]],
                partition_max_record_locks=int(values["share.partition.max.record.locks"]),
            )
            self._share[group_id] = settings
        return settings

    def share_session_timeout_ms(self, group_id: str) -> int:
        return int(self._values(group_id)["share.session.timeout.ms"])

    def share_heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self._values(group_id)["share.heartbeat.interval.ms"])

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        return int(self._values(group_id)["consumer.session.timeout.ms"])

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self._values(group_id)["consumer.heartbeat.interval.ms"])

    def streams_session_timeout_ms(self, group_id: str) -> int:
        return int(self._values(group_id)["streams.session.timeout.ms"])

    def streams_heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self._values(group_id)["streams.heartbeat.interval.ms"])

    def streams_num_standby_replicas(self, group_id: str) -> int:
        return int(self._values(group_id)["streams.num.standby.replicas"])

    def streams_initial_rebalance_delay_ms(self, group_id: str) -> int:
        return int(self._values(group_id)["streams.initial.rebalance.delay.ms"])


def _strategy(value: str) -> str:
    """ "earliest", "latest" or "by_duration:<duration>" (the prefix lower-cased as Kafka
    compares it; the duration as given)."""
    head, sep, duration = value.partition(":")
    return f"{head.lower()}{sep}{duration}"
