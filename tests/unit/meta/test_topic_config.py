"""Topic config values checked as Kafka 4.4's LogConfig checks them, with its messages."""

from __future__ import annotations

import pytest

from meta.topic_config import unknown_topic_config, validate_topic_configs


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            {"cleanup.policy": "delete,sometimes"},
            "Invalid value sometimes for configuration cleanup.policy: String must be one of: "
            "compact, delete",
        ),
        ({"cleanup.policy": "delete,"}, "Configuration 'cleanup.policy' values must not be empty."),
        (
            {"min.insync.replicas": "0"},
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            {"min.cleanable.dirty.ratio": "1.5"},
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no "
            "more than 1",
        ),
        (
            {"max.message.bytes": str(2**31)},
            f"Invalid value {2**31} for configuration max.message.bytes: Not a number of type INT",
        ),
        (
            {"retention.ms": "1_000"},
            "Invalid value 1_000 for configuration retention.ms: Not a number of type LONG",
        ),
        (
            {"preallocate": "yes"},
            "Invalid value yes for configuration preallocate: Expected value to be either true "
            "or false",
        ),
        (
            {"compression.type": "brotli"},
            "Invalid value brotli for configuration compression.type: String must be one of: "
            "uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            {"leader.replication.throttled.replicas": "0:1, x"},
            "Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: "
            "leader.replication.throttled.replicas must be the literal '*' or a list of replicas "
            "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
        ),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else "",
)
def test_refused_values_get_kafkas_messages(configs: dict[str, str], message: str) -> None:
    assert validate_topic_configs(configs) == message


@pytest.mark.parametrize(
    "configs",
    [
        {"cleanup.policy": ""},  # no cleanup at all: infinite retention
        {"cleanup.policy": "delete, delete"},
        {"retention.bytes": "-5"},  # no lower bound in Kafka
        {"segment.ms": str(2**40)},  # a LONG
        {"min.cleanable.dirty.ratio": "0"},
        {"leader.replication.throttled.replicas": "*"},
    ],
    ids=repr,
)
def test_values_kafka_accepts(configs: dict[str, str]) -> None:
    assert validate_topic_configs(configs) is None


def test_configs_kafka_4_removed_are_unknown_to_new_requests_only() -> None:
    """A topic created before keeps them (and its Raft entries replay), a new request may not
    set them."""
    removed = {"message.downconversion.enable": "true", "message.timestamp.difference.max.ms": "1"}
    assert validate_topic_configs(removed) is None
    assert unknown_topic_config(removed) == (
        "Unknown topic config name: message.downconversion.enable"
    )
    assert unknown_topic_config(["retention.ms", "cleanup.policy"]) is None
