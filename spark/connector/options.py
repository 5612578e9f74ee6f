"""The Kafka source/sink options, parsed and validated as Spark's official connector
(spark-sql-kafka-0-10, `KafkaSourceProvider`) does, with the same error messages.

Option names are case-insensitive (Spark hands Python data sources a CaseInsensitiveDict whose
keys are lower-cased). Offsets follow the connector's JSON: {"topic": {"0": 23, "1": -1}} where
-2 means earliest and -1 latest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

EARLIEST = -2
LATEST = -1

ASSIGN = "assign"
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribepattern"
# The order of the official connector's Set(SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN).mkString.
STRATEGY_OPTION_KEYS = (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN)


class IllegalArgumentException(ValueError):
    """Raised for bad options, with the official connector's message (there it is a
    java.lang.IllegalArgumentException)."""


class KafkaDataLossException(RuntimeError):
    """[KAFKA_DATA_LOSS.*]: data that should be read is no longer in Kafka."""

    def __init__(self, sub_class: str, reason: str) -> None:
        super().__init__(
            f"[KAFKA_DATA_LOSS.{sub_class}] Some data may have been lost because they are not "
            "available in Kafka any more; either the data was aged out by Kafka or the topic may "
            "have been deleted before all the data in the topic was processed. If you don't want "
            "your streaming query to fail on such cases, set the source option failOnDataLoss to "
            f"false. Reason: {reason} SQLSTATE: 22000"
        )


TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, before it is resolved against the cluster.

    kind: "earliest" | "latest" | "offsets" (per-partition, -2/-1 allowed) | "timestamp" (one
    timestamp for every partition) | "timestamps" (per-partition timestamps).
    """

    kind: str
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    # startingOffsetsByTimestampStrategy: what to do when no offset has a timestamp >= the given
    # one: "error" (official default) or "latest".
    no_match: str = "error"


@dataclass(frozen=True)
class Strategy:
    kind: str  # ASSIGN | SUBSCRIBE | SUBSCRIBE_PATTERN
    topics: tuple[str, ...] = ()
    partitions: tuple[TopicPartition, ...] = ()
    pattern: str = ""

    def matches(self, topic: str) -> bool:
        if self.kind == SUBSCRIBE:
            return topic in self.topics
        if self.kind == SUBSCRIBE_PATTERN:
            # Kafka's internal topics (__consumer_offsets, ...) are excluded as the Java
            # consumer's exclude.internal.topics=true does; Java's Pattern.matches() is a full
            # match.
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.partitions)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """The kafka.* options without their prefix (the client configuration)."""
    return {k[6:]: v for k, v in _lower(options).items() if k.startswith("kafka.")}


def parse_bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = _lower(options).get(key)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        # Scala's String.toBoolean message
        raise IllegalArgumentException(f"For input string: \"{raw}\" (option '{key}')")
    return value == "true"


def parse_int(options: Mapping[str, str], key: str, name: str | None = None) -> int | None:
    raw = _lower(options).get(key)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        raise IllegalArgumentException(
            f"For input string: \"{raw}\" (option '{name or key}' must be a number)"
        ) from None


# -- strategy ------------------------------------------------------------------------------------


def strategy(options: Mapping[str, str]) -> Strategy:
    params = _lower(options)
    given = [k for k in STRATEGY_OPTION_KEYS if k in params]
    keys = ", ".join(STRATEGY_OPTION_KEYS)
    if not given:
        raise IllegalArgumentException(
            f"One of the following options must be specified for Kafka source: {keys}. "
            "See the docs for more details."
        )
    if len(given) > 1:
        raise IllegalArgumentException(
            f"Only one of the following options can be specified for Kafka source: {keys}. "
            "See the docs for more details."
        )
    key = given[0]
    value = params[key]
    if key == ASSIGN:
        if not value.strip().startswith("{"):
            raise IllegalArgumentException(
                f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
            )
        return Strategy(ASSIGN, partitions=tuple(parse_partitions(value)))
    if key == SUBSCRIBE:
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise IllegalArgumentException(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return Strategy(SUBSCRIBE, topics=topics)
    pattern = value.strip()
    if not pattern:
        raise IllegalArgumentException(
            "Pattern to subscribe is empty as specified value for option 'subscribePattern' is "
            f"'{value}'"
        )
    try:
        re.compile(pattern)
    except re.error as e:
        raise IllegalArgumentException(
            f"Invalid pattern for option 'subscribePattern': '{value}' ({e})"
        ) from None
    return Strategy(SUBSCRIBE_PATTERN, pattern=pattern)


def parse_partitions(text: str) -> list[TopicPartition]:
    """{"topicA":[0,1],"topicB":[0,1]}"""
    try:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise ValueError
        out = []
        for topic, parts in parsed.items():
            if not isinstance(parts, list):
                raise ValueError
            for p in parts:
                if isinstance(p, bool) or not isinstance(p, int):
                    raise ValueError
                out.append((topic, p))
        return out
    except ValueError:
        raise IllegalArgumentException(
            f'Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {text}'
        ) from None


def _partition_longs(text: str) -> dict[TopicPartition, int]:
    parsed = json.loads(text)
    if not isinstance(parsed, dict):
        raise ValueError
    out: dict[TopicPartition, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise ValueError
        for p, off in parts.items():
            if isinstance(off, bool) or not isinstance(off, int):
                raise ValueError
            out[(topic, int(p))] = off
    return out


def parse_partition_offsets(text: str) -> dict[TopicPartition, int]:
    """{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}"""
    try:
        return _partition_longs(text)
    except ValueError:
        raise IllegalArgumentException(
            f'Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {text}'
        ) from None


def parse_partition_timestamps(text: str) -> dict[TopicPartition, int]:
    try:
        return _partition_longs(text)
    except ValueError:
        raise IllegalArgumentException(
            'Expected e.g. {"topicA": {"0": 123456789, "1": 123456789},\n'
            f'"topicB": {{"0": 123456789, "1": 123456789}}}}, got {text}'
        ) from None


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(topic, p): off} -> the connector's JSON shape (as a dict), sorted for determinism."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = off
    return out


def offsets_from_json(obj: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(t, int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}


def offset_range_limit(
    options: Mapping[str, str], global_ts_key: str, by_ts_key: str, offsets_key: str, default: str
) -> OffsetSpec:
    """KafkaSourceProvider.getKafkaOffsetRangeLimit: a global timestamp beats per-partition
    timestamps, which beat offsets."""
    params = _lower(options)
    raw_strategy = params.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if raw_strategy not in ("error", "latest"):
        raise IllegalArgumentException(
            f"Invalid value '{params['startingoffsetsbytimestampstrategy']}' for option "
            "'startingOffsetsByTimestampStrategy': expected 'error' or 'latest'"
        )
    if global_ts_key in params:
        ts = params[global_ts_key].strip()
        try:
            return OffsetSpec("timestamp", timestamp=int(ts), no_match=raw_strategy)
        except ValueError:
            raise IllegalArgumentException(f"Expected a single long value, got {ts}") from None
    if by_ts_key in params:
        return OffsetSpec(
            "timestamps",
            offsets=parse_partition_timestamps(params[by_ts_key].strip()),
            no_match=raw_strategy,
        )
    if offsets_key in params:
        value = params[offsets_key].strip()
        if value.lower() == "latest":
            return OffsetSpec("latest")
        if value.lower() == "earliest":
            return OffsetSpec("earliest")
        return OffsetSpec("offsets", offsets=parse_partition_offsets(value))
    return OffsetSpec(default)


def starting_offsets(options: Mapping[str, str], default: str) -> OffsetSpec:
    return offset_range_limit(
        options, "startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets", default
    )


def ending_offsets(options: Mapping[str, str]) -> OffsetSpec:
    return offset_range_limit(
        options, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets", "latest"
    )


# -- validation, as KafkaSourceProvider.validate{General,Batch,Stream}Options -------------------

_AUTO_OFFSET_RESET_MESSAGE = (
    "\nKafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingoffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details.\n"
)


def validate_general(options: Mapping[str, str]) -> Strategy:
    params = _lower(options)
    strat = strategy(params)
    min_parts = parse_int(params, "minpartitions", "minPartitions")
    if min_parts is not None and min_parts <= 0:
        raise IllegalArgumentException("minPartitions must be positive")
    max_records = parse_int(params, "maxrecordsperpartition", "maxRecordsPerPartition")
    if max_records is not None and max_records <= 0:
        raise IllegalArgumentException("maxrecordsperpartition must be positive")
    if "kafka.auto.offset.reset" in params:
        raise IllegalArgumentException(_AUTO_OFFSET_RESET_MESSAGE)
    if "kafka.key.deserializer" in params:
        raise IllegalArgumentException(
            "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
            "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
            "deserialize the keys."
        )
    if "kafka.value.deserializer" in params:
        raise IllegalArgumentException(
            "Kafka option 'value.deserializer' is not supported as values are deserialized as "
            "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
            "deserialize the values."
        )
    for c in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{c}" in params:
            raise IllegalArgumentException(f"Kafka option '{c}' is not supported")
    if "kafka.bootstrap.servers" not in params:
        raise IllegalArgumentException(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    max_per_trigger = parse_int(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    if max_per_trigger is not None and max_per_trigger <= 0:
        raise IllegalArgumentException("maxOffsetsPerTrigger must be positive")
    parse_bool(params, "failondataloss", True)
    parse_bool(params, "includeheaders", False)
    # Parse (and so validate) the offset options whatever the read kind.
    starting_offsets(params, "earliest")
    if "endingoffsets" in params or "endingtimestamp" in params:
        ending_offsets(params)
    return strat


def validate_batch(options: Mapping[str, str]) -> tuple[OffsetSpec, OffsetSpec]:
    params = _lower(options)
    start = starting_offsets(params, "earliest")
    if start.kind == "latest":
        raise IllegalArgumentException("starting offset can't be latest for batch queries on Kafka")
    if start.kind == "offsets":
        for (topic, p), off in start.offsets.items():
            if off == LATEST:
                raise IllegalArgumentException(
                    f"startingOffsets for {topic}-{p} can't be latest for batch queries on Kafka"
                )
    end = ending_offsets(params)
    if end.kind == "earliest":
        raise IllegalArgumentException("ending offset can't be earliest for batch queries on Kafka")
    if end.kind == "offsets":
        for (topic, p), off in end.offsets.items():
            if off == EARLIEST:
                raise IllegalArgumentException(
                    f"ending offset for {topic}-{p} can't be earliest for batch queries on Kafka"
                )
    validate_general(params)
    check_offset_limit_validity(start, end)
    return start, end


def validate_stream(options: Mapping[str, str]) -> OffsetSpec:
    params = _lower(options)
    if "endingoffsets" in params:
        raise IllegalArgumentException("ending offset not valid in streaming queries")
    if "endingoffsetsbytimestamp" in params:
        raise IllegalArgumentException("ending timestamp not valid in streaming queries")
    validate_general(params)
    return starting_offsets(params, "latest")


def format_partitions(tps: Iterable[TopicPartition]) -> str:
    """Topic-partitions as the official connector's messages show them (a Scala Set)."""
    return "Set(" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + ")"


def check_offset_limit_validity(start: OffsetSpec, end: OffsetSpec) -> None:
    same_kind = (start.kind, end.kind) in (("offsets", "offsets"), ("timestamps", "timestamps"))
    if not same_kind:
        return
    if start.offsets.keys() != end.offsets.keys():
        raise IllegalArgumentException(
            "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified "
            "start offset and end offset should have the same topic-partitions. Topic-partitions "
            f"for start offset: {format_partitions(start.offsets)}, topic-partitions for end "
            f"offset: {format_partitions(end.offsets)}."
        )
    for (topic, p), s in start.offsets.items():
        e = end.offsets[(topic, p)]
        if s > e and s >= 0 and e >= 0:
            what = "offset" if start.kind == "offsets" else "timestamp"
            raise IllegalArgumentException(
                f"[UNRESOLVED_START_{what.upper()}_GREATER_THAN_END_{what.upper()}] The specified "
                f"start {what} {s} is greater than the end {what} {e} for topic {topic} "
                f"partition {p}."
            )


# -- sink ---------------------------------------------------------------------------------------


def validate_sink(options: Mapping[str, str]) -> None:
    params = _lower(options)
    if "kafka.key.serializer" in params:
        raise IllegalArgumentException(
            "Kafka option 'key.serializer' is not supported as keys are serialized with "
            "ByteArraySerializer."
        )
    if "kafka.value.serializer" in params:
        raise IllegalArgumentException(
            "Kafka option 'value.serializer' is not supported as value are serialized with "
            "ByteArraySerializer."
        )
    if "kafka.bootstrap.servers" not in params:
        raise IllegalArgumentException(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
        )
