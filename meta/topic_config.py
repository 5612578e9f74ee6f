"""Kafka's topic-level config names and the checks Kafka applies to their values.

Topics store only the overrides a user set; defaults live in the brokers' configs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


def _int(low: int, high: int = INT_MAX, kind: str = "INT") -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            number = int(value.strip())
        except ValueError:
            return f"Not a number of type {kind}"
        return None if low <= number <= high else f"Value must be between {low} and {high}"

    return check


def _long(low: int) -> Callable[[str], str | None]:
    return _int(low, LONG_MAX, "LONG")


def _ratio(value: str) -> str | None:
    try:
        number = float(value.strip())
    except ValueError:
        return "Not a number of type DOUBLE"
    return None if 0.0 <= number <= 1.0 else "Value must be between 0 and 1"


def _bool(value: str) -> str | None:
    if value.strip().lower() in ("true", "false"):
        return None
    return "Expected value to be true or false"


def _one_of(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value.strip() in choices else f"String must be one of: {', '.join(choices)}"

    return check


def _list_of(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        items = [item.strip() for item in value.split(",")]
        if items and all(item in choices for item in items):
            return None
        return f"Must be a list of: {', '.join(choices)}"

    return check


_REPLICA = re.compile(r"\d+:\d+")


def _throttled_replicas(value: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: "*" or partition:broker pairs (may be empty)."""
    items = [item.strip() for item in value.split(",")]
    if value.strip() == "*" or value.strip() == "" or all(map(_REPLICA.fullmatch, items)):
        return None
    return (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


# name -> value check returning an error message (None: valid); ranges as in Kafka's LogConfig.
TOPIC_CONFIGS: dict[str, Callable[[str], str | None]] = {
    "cleanup.policy": _list_of("delete", "compact"),
    "compression.type": _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "delete.retention.ms": _long(0),
    "file.delete.delay.ms": _long(0),
    "flush.messages": _long(1),
    "flush.ms": _long(0),
    # the replicas leader.replication.throttled.rate / follower.replication.throttled.rate
    # (broker configs) limit, as Kafka's reassignment tools set them
    "follower.replication.throttled.replicas": _throttled_replicas,
    "index.interval.bytes": _int(0),
    "leader.replication.throttled.replicas": _throttled_replicas,
    "max.compaction.lag.ms": _long(1),
    "max.message.bytes": _int(0),
    "message.downconversion.enable": _bool,
    "message.timestamp.after.max.ms": _long(0),
    "message.timestamp.before.max.ms": _long(0),
    "message.timestamp.difference.max.ms": _long(0),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "min.cleanable.dirty.ratio": _ratio,
    "min.compaction.lag.ms": _long(0),
    "min.insync.replicas": _int(1),
    "preallocate": _bool,
    "retention.bytes": _long(-1),
    "retention.ms": _long(-1),
    "segment.bytes": _int(14),
    "segment.index.bytes": _int(4),
    "segment.jitter.ms": _long(0),
    "segment.ms": _long(1),
    "unclean.leader.election.enable": _bool,
}


def validate_topic_configs(configs: Mapping[str, str]) -> str | None:
    """Kafka's INVALID_CONFIG message for the first bad entry, or None when all are valid."""
    for name, value in configs.items():
        check = TOPIC_CONFIGS.get(name)
        if check is None:
            return f"Unknown topic config name: {name}"
        problem = check(value)
        if problem is not None:
            return f"Invalid value {value} for configuration {name}: {problem}"
    return None


def unclean_election_enabled(configs: Mapping[str, str], default: bool) -> bool:
    """The topic's ``unclean.leader.election.enable``, else the cluster default."""
    value = configs.get("unclean.leader.election.enable")
    return default if value is None else value.strip().lower() == "true"
