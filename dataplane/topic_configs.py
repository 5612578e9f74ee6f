"""Effective topic configs: a topic's overrides over the broker's settings over Kafka's defaults.

Kafka reports each topic config with where its value came from (CreateTopics v5+ and
DescribeConfigs), and the log reads its settings from the same values, so both go through
`ConfigLayers.topic_entries` (dataplane/config_catalog.py, where each topic config's broker
synonyms are written down).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from dataplane.config import BrokerConfig
from dataplane.config_catalog import ConfigLayers, ConfigSource

# Kafka's DescribeConfigs config_source values.
DYNAMIC_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG
STATIC_BROKER_CONFIG = ConfigSource.STATIC_BROKER_CONFIG
DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG


class ConfigValue(NamedTuple):
    value: str
    source: int


def effective_topic_configs(
    broker: BrokerConfig | ConfigLayers, overrides: Mapping[str, str]
) -> dict[str, ConfigValue]:
    """Every topic config with its value and where it came from, sorted by name. `broker` is
    the broker's settings in force (a `BrokerConfig` with no dynamic layer, or its layers)."""
    layers = broker if isinstance(broker, ConfigLayers) else ConfigLayers(broker)
    return {
        e.key.name: ConfigValue(e.value or "", int(e.source))
        for e in layers.topic_entries(overrides)
    }
