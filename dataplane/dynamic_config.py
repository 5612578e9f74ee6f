"""The broker's settings in force, kept in step with the dynamic broker configs in the metadata.

Kafka's DynamicBrokerConfig: a dynamic config of this broker, then the cluster-wide default,
override the static settings. Components that read a dynamic setting at runtime get the new
`BrokerConfig` through `listeners` when it changes, and precompute what they need from it
(ReplicaManager re-derives each open log's LogConfig), so no request path looks settings up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from dataplane.config import BrokerConfig
from dataplane.config_catalog import ConfigLayers
from dataplane.metadata_cache import MetadataCache

log = logging.getLogger("rafka.config")


class DynamicBrokerConfig:
    def __init__(self, static: BrokerConfig, cache: MetadataCache) -> None:
        self.static = static
        self._cache = cache
        self.layers = ConfigLayers(static)
        self.current = self.layers.effective
        self._ignored: list[tuple[str, str]] = []
        self.listeners: list[Callable[[BrokerConfig], None]] = []
        cache.config_listeners.append(self._on_change)

    def _on_change(self) -> None:
        layers = ConfigLayers.of(self.static, self._cache.broker_configs)
        if (layers.per_broker, layers.cluster) == (self.layers.per_broker, self.layers.cluster):
            return
        previous, self.layers = self.layers.applied, layers
        if layers.ignored != self._ignored:
            self._ignored = layers.ignored
            for name, value in layers.ignored:
                log.warning(
                    "ignoring the dynamic broker config %s=%r: not a setting Rafka changes at "
                    "runtime, or not a valid value (remove it with rafka configs alter "
                    "--delete-config %s)",
                    name,
                    value,
                    name,
                )
        if layers.applied == previous:
            return
        self.current = layers.effective
        log.info(
            "dynamic broker configs now in force: %s",
            ", ".join(f"{k}={v}" for k, v in sorted(layers.applied.items())) or "none",
        )
        for listener in self.listeners:
            try:
                listener(self.current)
            except Exception:
                log.exception("applying the dynamic broker configs failed in %r", listener)
