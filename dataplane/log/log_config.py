"""Per-partition log settings: Kafka's topic-level configs over the broker's log.* defaults."""

from __future__ import annotations

from dataclasses import dataclass

from dataplane.config import BrokerConfig
from dataplane.topic_configs import effective_topic_configs

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
_NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE: "never" for flush.messages and flush.ms
_MAX_SEGMENT_BYTES = 2**31 - 1  # positions are u32 in the index; Kafka caps segment.bytes at an int

# LogConfig field -> the topic config that sets it
_FIELDS = {
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "index_interval_bytes": "index.interval.bytes",
    "max_message_bytes": "max.message.bytes",
    "flush_messages": "flush.messages",
    "flush_ms": "flush.ms",
    "message_timestamp_type": "message.timestamp.type",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "cleanup_policy": "cleanup.policy",
}
_TEXT_FIELDS = ("message_timestamp_type", "cleanup_policy")


@dataclass(frozen=True)
class LogConfig:
    """Defaults are Kafka's. To apply a topic config change, replace `PartitionLog.config`."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    flush_messages: int = _NEVER
    flush_ms: int = _NEVER
    message_timestamp_type: str = CREATE_TIME
    retention_ms: int = 7 * 24 * 3600 * 1000  # negative: no time limit
    retention_bytes: int = -1  # negative: no size limit
    cleanup_policy: str = "delete"  # "compact" alone: keep every segment (no compaction yet)

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"message.timestamp.type: {self.message_timestamp_type!r}")
        if not 0 < self.segment_bytes <= _MAX_SEGMENT_BYTES:
            raise ValueError(f"segment.bytes out of range: {self.segment_bytes}")
        for name in ("segment_ms", "index_interval_bytes", "max_message_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', '.')} must be >= 0")
        for name in ("flush_messages", "flush_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '.')} must be >= 1")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def from_configs(cls, broker: BrokerConfig, topic_configs: dict[str, str]) -> LogConfig:
        """The broker's defaults with the topic's overrides; other topic configs are ignored."""
        effective = effective_topic_configs(broker, topic_configs)
        values = {field: effective[name].value for field, name in _FIELDS.items()}
        return cls(**{f: v if f in _TEXT_FIELDS else int(v) for f, v in values.items()})  # type: ignore[arg-type]
