"""Metadata: the shapes of its answers at every version, and the errors a client can provoke."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic

from cluster.kafka_client import builder
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair

METADATA = 3
TOPIC = "compat-metadata"


@pytest.fixture(scope="module", autouse=True)
def topic(pair: Pair) -> None:
    create_topics(pair, NewTopic(TOPIC, 3, 1))


def _topics(version: int, *names: str) -> tuple:
    b = builder(METADATA, version)
    if version >= 10:
        return tuple(b.MetadataRequestTopic(topic_id=None, name=n) for n in names)
    return tuple(b.MetadataRequestTopic(name=n) for n in names)


def _request(version: int, *names: str, auto_create: bool = False) -> dict:
    fields: dict = {"topics": _topics(version, *names)}
    if version >= 4:
        fields["allow_auto_topic_creation"] = auto_create
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = False
    if version >= 8:
        fields["include_topic_authorized_operations"] = False
    return fields


@pytest.mark.parametrize("version", range(0, 13))
def test_existing_topic(pair: Pair, version: int) -> None:
    pair.call(
        f"Metadata v{version}: a topic of 3 partitions",
        METADATA,
        version,
        **_request(version, TOPIC),
    )


@pytest.mark.parametrize("version", [4, 9, 12])
def test_unknown_topic(pair: Pair, version: int) -> None:
    pair.call(
        f"Metadata v{version}: unknown topic, no auto-creation",
        METADATA,
        version,
        **_request(version, "compat-no-such-topic"),
    )


@pytest.mark.parametrize("version", [1, 12])
def test_auto_creation(pair: Pair, version: int) -> None:
    """v1-3 always ask for auto-creation (auto.create.topics.enable is true on both)."""
    pair.call(
        f"Metadata v{version}: unknown topic, auto-created",
        METADATA,
        version,
        **_request(version, f"compat-auto-{version}", auto_create=True),
    )


@pytest.mark.parametrize("name", ["bad name!", "a" * 250, "..", "."])
def test_invalid_topic_name(pair: Pair, name: str) -> None:
    pair.call(
        f"Metadata v12: invalid topic name {name[:12]!r}",
        METADATA,
        12,
        **_request(12, name, auto_create=True),
    )


def test_authorized_operations(pair: Pair) -> None:
    fields = _request(10, TOPIC)
    fields["include_cluster_authorized_operations"] = True
    fields["include_topic_authorized_operations"] = True
    pair.call("Metadata v10: authorized operations requested", METADATA, 10, **fields)


def test_brokers_only(pair: Pair) -> None:
    pair.call("Metadata v12: no topics (brokers only)", METADATA, 12, **_request(12))
