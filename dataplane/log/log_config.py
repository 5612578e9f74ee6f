"""Per-partition log settings: Kafka's topic-level configs over the broker's log.* defaults."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from dataplane.config import BrokerConfig
from dataplane.log.compression import inflation_limit
from dataplane.log.recompress import CODECS, PRODUCER
from dataplane.topic_configs import effective_topic_configs

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
_NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE: "never" (flush.*, max.compaction.lag.ms)
_MAX_SEGMENT_BYTES = 2**31 - 1  # positions are u32 in the index; Kafka caps segment.bytes at an int

# LogConfig field -> the topic config that sets it, and how its text value is read
_FIELDS: dict[str, tuple[str, Callable[[str], object]]] = {
    "segment_bytes": ("segment.bytes", int),
    "segment_ms": ("segment.ms", int),
    "index_interval_bytes": ("index.interval.bytes", int),
    "max_message_bytes": ("max.message.bytes", int),
    "flush_messages": ("flush.messages", int),
    "flush_ms": ("flush.ms", int),
    "message_timestamp_type": ("message.timestamp.type", str),
    "message_timestamp_before_max_ms": ("message.timestamp.before.max.ms", int),
    "message_timestamp_after_max_ms": ("message.timestamp.after.max.ms", int),
    "retention_ms": ("retention.ms", int),
    "retention_bytes": ("retention.bytes", int),
    "cleanup_policy": ("cleanup.policy", str),
    "delete_retention_ms": ("delete.retention.ms", int),
    "min_compaction_lag_ms": ("min.compaction.lag.ms", int),
    "max_compaction_lag_ms": ("max.compaction.lag.ms", int),
    "min_cleanable_dirty_ratio": ("min.cleanable.dirty.ratio", float),
    "compression_type": ("compression.type", str),
}


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
    # KIP-937: how far a CreateTime timestamp may lie before / after the broker's clock (Kafka
    # 4's defaults; Kafka 4 removed the older message.timestamp.difference.max.ms).
    message_timestamp_before_max_ms: int = _NEVER
    message_timestamp_after_max_ms: int = 3_600_000
    retention_ms: int = 7 * 24 * 3600 * 1000  # negative: no time limit
    retention_bytes: int = -1  # negative: no size limit
    cleanup_policy: str = "delete"  # "delete", "compact" or both (comma-separated)
    # Compaction (cleaner.py); Kafka's topic configs of the same names.
    delete_retention_ms: int = 24 * 3600 * 1000  # how long tombstones outlive their cleaning
    min_compaction_lag_ms: int = 0  # records younger than this are not compacted yet
    max_compaction_lag_ms: int = _NEVER  # a dirty record older than this forces a cleaning
    min_cleanable_dirty_ratio: float = 0.5  # clean once dirty bytes / all bytes exceed this
    # "producer": batches stored as produced; else the codec they are stored in (recompress.py)
    compression_type: str = PRODUCER

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"message.timestamp.type: {self.message_timestamp_type!r}")
        if not 0 < self.segment_bytes <= _MAX_SEGMENT_BYTES:
            raise ValueError(f"segment.bytes out of range: {self.segment_bytes}")
        for name in (
            "segment_ms",
            "index_interval_bytes",
            "max_message_bytes",
            "message_timestamp_before_max_ms",
            "message_timestamp_after_max_ms",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', '.')} must be >= 0")
        for name in ("flush_messages", "flush_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '.')} must be >= 1")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(f"min.cleanable.dirty.ratio: {self.min_cleanable_dirty_ratio}")
        if self.compression_type != PRODUCER and self.compression_type not in CODECS:
            raise ValueError(f"compression.type: {self.compression_type!r}")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    def timestamp_bounds(self, now_ms: int) -> tuple[int, int] | None:
        """The CreateTime timestamps a produced record may carry at ``now_ms``, as
        [earliest, latest]; None under LogAppendTime (the broker stamps its own)."""
        margins = self._timestamp_margins
        return None if margins is None else (now_ms - margins[0], now_ms + margins[1])

    @cached_property
    def _timestamp_margins(self) -> tuple[int, int] | None:
        """(before, after): read on every produce, so worked out once."""
        if self.log_append_time:
            return None
        return self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms

    @cached_property
    def stored_codec(self) -> int | None:
        """The codec batches are stored in, None to store them as produced (read on every
        produce: worked out once)."""
        return None if self.compression_type == PRODUCER else CODECS[self.compression_type]

    @property
    def inflation_limit(self) -> int:
        """The most bytes one batch's records may inflate to (compression.py)."""
        return inflation_limit(self.max_message_bytes)

    @cached_property
    def _policies(self) -> frozenset[str]:
        return frozenset(p.strip() for p in self.cleanup_policy.split(","))

    @property
    def compact(self) -> bool:
        """cleanup.policy includes "compact": the log cleaner keeps the latest record per key
        (read on every produce to the log: parsed once)."""
        return "compact" in self._policies

    @property
    def delete(self) -> bool:
        """cleanup.policy includes "delete": retention.ms and retention.bytes apply."""
        return "delete" in self._policies

    @classmethod
    def from_configs(cls, broker: BrokerConfig, topic_configs: dict[str, str]) -> LogConfig:
        """The broker's defaults with the topic's overrides; other topic configs are ignored."""
        effective = effective_topic_configs(broker, topic_configs)
        values = {field: read(effective[name].value) for field, (name, read) in _FIELDS.items()}
        return cls(**values)  # type: ignore[arg-type]
