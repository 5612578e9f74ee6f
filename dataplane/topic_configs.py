"""Effective topic configs: a topic's overrides over the broker's defaults over Kafka's.

Kafka reports each topic config with where its value came from (CreateTopics v5+ and
DescribeConfigs), and the log reads its settings from the same table, so the broker-config
synonym of each topic config is written down once, here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from dataplane.config import BrokerConfig

# Kafka's DescribeConfigs config_source values.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

_LONG_MAX = str(2**63 - 1)

# topic config -> broker config field holding its default, or Kafka's default as a literal
TOPIC_CONFIG_DEFAULTS: dict[str, tuple[str, str | None]] = {
    "cleanup.policy": ("", "delete"),
    "compression.type": ("", "producer"),
    "delete.retention.ms": ("log_cleaner_delete_retention_ms", None),
    "file.delete.delay.ms": ("", "60000"),
    "flush.messages": ("log_flush_interval_messages", None),
    "flush.ms": ("log_flush_interval_ms", None),
    "index.interval.bytes": ("log_index_interval_bytes", None),
    "max.compaction.lag.ms": ("log_cleaner_max_compaction_lag_ms", None),
    "max.message.bytes": ("message_max_bytes", None),
    "message.timestamp.after.max.ms": ("", _LONG_MAX),
    "message.timestamp.before.max.ms": ("", _LONG_MAX),
    "message.timestamp.type": ("log_message_timestamp_type", None),
    "min.cleanable.dirty.ratio": ("log_cleaner_min_cleanable_ratio", None),
    "min.compaction.lag.ms": ("log_cleaner_min_compaction_lag_ms", None),
    "min.insync.replicas": ("min_insync_replicas", None),
    "preallocate": ("", "false"),
    "retention.bytes": ("log_retention_bytes", None),
    "retention.ms": ("log_retention_ms", None),
    "segment.bytes": ("log_segment_bytes", None),
    "segment.index.bytes": ("", str(10 << 20)),
    "segment.jitter.ms": ("", "0"),
    "segment.ms": ("log_roll_ms", None),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", None),
}


class ConfigValue(NamedTuple):
    value: str
    source: int


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def effective_topic_configs(
    broker: BrokerConfig, overrides: Mapping[str, str]
) -> dict[str, ConfigValue]:
    """Every topic config with its value and where it came from, sorted by name."""
    out: dict[str, ConfigValue] = {}
    for name, (broker_field, default) in sorted(TOPIC_CONFIG_DEFAULTS.items()):
        if name in overrides:
            out[name] = ConfigValue(overrides[name], DYNAMIC_TOPIC_CONFIG)
        elif broker_field:
            source = (
                STATIC_BROKER_CONFIG if broker_field in broker.model_fields_set else DEFAULT_CONFIG
            )
            out[name] = ConfigValue(_text(getattr(broker, broker_field)), source)
        else:
            out[name] = ConfigValue(default or "", DEFAULT_CONFIG)
    return out
