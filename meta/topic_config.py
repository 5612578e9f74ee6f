"""Kafka's topic-level config names and the checks Kafka applies to their values.

Topics store only the overrides a user set; defaults live in the brokers' configs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

Check = Callable[[str, str], str | None]
"""A value check: (config name, value) -> Kafka's whole INVALID_CONFIG message, or None."""


def invalid(name: str, value: str, why: str) -> str:
    """Kafka's ConfigException(name, value, message) text."""
    return f"Invalid value {value} for configuration {name}: {why}"


_INTEGER = re.compile(r"[+-]?\d+")
_TYPE_BITS = {"SHORT": 16, "INT": 32, "LONG": 64}


def number_problem(
    kind: str, value: str, low: float | None = None, high: float | None = None
) -> str | None:
    """Why `value` is not a number of Kafka type `kind` (SHORT, INT, LONG, DOUBLE) within
    ConfigDef.Range's bounds: Kafka's message, or None."""
    text = value.strip()
    try:
        if kind == "DOUBLE":
            number: float = float(text)
        else:
            bits = _TYPE_BITS[kind]
            number = int(text) if _INTEGER.fullmatch(text) else 2**bits
            if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
                raise ValueError(text)
    except ValueError:
        return f"Not a number of type {kind}"
    if low is not None and number < low:
        return f"Value must be at least {low}"
    if high is not None and number > high:
        return f"Value must be no more than {high}"
    return None


def _number(kind: str, low: float | None = None, high: float | None = None) -> Check:
    def check(name: str, value: str) -> str | None:
        why = number_problem(kind, value, low, high)
        return None if why is None else invalid(name, value, why)

    return check


def _bool(name: str, value: str) -> str | None:
    if value.strip().lower() in ("true", "false"):
        return None
    return invalid(name, value, "Expected value to be either true or false")


def _one_of(*choices: str) -> Check:
    """ConfigDef.ValidString.in."""

    def check(name: str, value: str) -> str | None:
        if value.strip() in choices:
            return None
        return invalid(name, value, f"String must be one of: {', '.join(choices)}")

    return check


def list_items(value: str) -> list[str]:
    """A LIST value's items as Kafka parses them (an empty text is the empty list)."""
    text = value.strip()
    return [item.strip() for item in text.split(",")] if text else []


def _list_of(*choices: str) -> Check:
    """ConfigDef.ValidList.in as Kafka 4.4 applies it to topic configs: the empty list is
    allowed (and an item named twice), an item may not be empty, each must be one of
    `choices`."""

    def check(name: str, value: str) -> str | None:
        for item in list_items(value):
            if not item:
                return f"Configuration '{name}' values must not be empty."
            if item not in choices:
                return invalid(name, item, f"String must be one of: {', '.join(choices)}")
        return None

    return check


_REPLICA = re.compile(r"\d+:\d+")


def _throttled_replicas(name: str, value: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: "*" or partition:broker pairs (may be empty)."""
    items = list_items(value)
    if items in ([], ["*"]) or all(map(_REPLICA.fullmatch, items)):
        return None
    return invalid(
        name,
        f"[{', '.join(items)}]",  # the parsed list, as Java prints it
        f"{name} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
    )


# name -> value check; types and ranges as in Kafka 4's LogConfig.
TOPIC_CONFIGS: dict[str, Check] = {
    "cleanup.policy": _list_of("compact", "delete"),
    "compression.type": _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "delete.retention.ms": _number("LONG", 0),
    "file.delete.delay.ms": _number("LONG", 0),
    "flush.messages": _number("LONG", 1),
    "flush.ms": _number("LONG", 0),
    # the replicas leader.replication.throttled.rate / follower.replication.throttled.rate
    # (broker configs) limit, as Kafka's reassignment tools set them
    "follower.replication.throttled.replicas": _throttled_replicas,
    "index.interval.bytes": _number("INT", 0),
    "leader.replication.throttled.replicas": _throttled_replicas,
    "max.compaction.lag.ms": _number("LONG", 1),
    "max.message.bytes": _number("INT", 0),
    "message.timestamp.after.max.ms": _number("LONG", 0),
    "message.timestamp.before.max.ms": _number("LONG", 0),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "min.cleanable.dirty.ratio": _number("DOUBLE", 0, 1),
    "min.compaction.lag.ms": _number("LONG", 0),
    "min.insync.replicas": _number("INT", 1),
    "preallocate": _bool,
    "retention.bytes": _number("LONG"),
    "retention.ms": _number("LONG", -1),
    # Kafka 4 wants at least 1 MiB (its tests use internal.segment.bytes); Rafka keeps
    # accepting small segments, which its tests and small deployments use.
    "segment.bytes": _number("INT", 14),
    "segment.index.bytes": _number("INT", 4),
    "segment.jitter.ms": _number("LONG", 0),
    "segment.ms": _number("LONG", 1),
    "unclean.leader.election.enable": _bool,
}

# Topic configs Kafka 4 removed. The broker refuses them in new requests, as Kafka does; the
# meta service still accepts them, so a topic that has one keeps it and the Raft log entries
# that set one replay as they were applied.
REMOVED_TOPIC_CONFIGS: dict[str, Check] = {
    "message.downconversion.enable": _bool,
    "message.timestamp.difference.max.ms": _number("LONG", 0),
}


def unknown_topic_config(names: Iterable[str]) -> str | None:
    """Kafka's INVALID_CONFIG message for the first name that is not a topic config of
    Kafka 4 (the removed ones included), or None."""
    for name in names:
        if name not in TOPIC_CONFIGS:
            return f"Unknown topic config name: {name}"
    return None


def validate_topic_configs(configs: Mapping[str, str]) -> str | None:
    """Kafka's INVALID_CONFIG message for the first bad entry, or None when all are valid
    (REMOVED_TOPIC_CONFIGS are valid here: see there)."""
    for name, value in configs.items():
        check = TOPIC_CONFIGS.get(name) or REMOVED_TOPIC_CONFIGS.get(name)
        if check is None:
            return f"Unknown topic config name: {name}"
        if problem := check(name, value):
            return problem
    return None


def unclean_election_enabled(configs: Mapping[str, str], default: bool) -> bool:
    """The topic's ``unclean.leader.election.enable``, else the cluster default."""
    value = configs.get("unclean.leader.election.enable")
    return default if value is None else value.strip().lower() == "true"
