"""What CreateTopics, DeleteTopics and DescribeConfigs refuse before the meta service is asked,
as Kafka's ControllerApis and ConfigHelper do: names given twice, both or neither of a name and
an id, the metadata log's name, null or unknown topic configs and conflicting values, and
topic names Kafka's Topic.validate refuses."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import anyio
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.delete_topics.v6 import request as delete_v6
from kio.schema.describe_configs.v4 import request as describe_v4
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta

from dataplane.config import BrokerConfig
from dataplane.connection import Connection
from dataplane.handlers import create_topics, delete_topics, describe_configs
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext
from proto import meta_pb2

KNOWN_ID = uuid.UUID(int=7)
FIVE_SECONDS = i32Timedelta.parse(datetime.timedelta(seconds=5))


class FakeTopicAdmin:
    """Records what reaches the meta service; every topic it is asked about is fine."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.deleted: list[tuple[list[str], list[bytes]]] = []

    async def create_topics(self, topics: Sequence[Any], validate_only: bool) -> list[Any]:
        self.created += [t.name for t in topics]
        return [meta_pb2.CreateTopicResult(name=t.name, error_code=0) for t in topics]

    async def delete_topics(self, names: Sequence[str], ids: Sequence[bytes]) -> list[Any]:
        self.deleted.append((list(names), list(ids)))
        return [meta_pb2.DeleteTopicResult(name=n) for n in names] + [
            meta_pb2.DeleteTopicResult(topic_id=i) for i in ids
        ]


def call(module: Any, version: int, request: Any) -> tuple[Any, FakeTopicAdmin]:
    admin = FakeTopicAdmin()
    known = SimpleNamespace(name="known", topic_id=KNOWN_ID.bytes, configs={}, partitions=())
    services = SimpleNamespace(
        config=BrokerConfig.load(overrides={"node.id": "1"}),
        cache=SimpleNamespace(
            topics={"known": known}, topics_by_id={KNOWN_ID.bytes: known}, broker_configs={}
        ),
        authorizer=SimpleNamespace(enabled=False, authorize=lambda *a, **k: True),
        quotas=SimpleNamespace(mutation=SimpleNamespace(enabled=False)),
        topic_admin=admin,
    )
    header = SimpleNamespace(api_version=version, client_id="test")
    ctx = RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]
    return anyio.run(module.handle, ctx, request), admin


def delete(*topics: tuple[str | None, uuid.UUID | None]) -> tuple[dict[Any, Any], Any]:
    request = delete_v6.DeleteTopicsRequest(
        topics=tuple(
            delete_v6.DeleteTopicState(name=None if n is None else TopicName(n), topic_id=i)
            for n, i in topics
        ),
        timeout=FIVE_SECONDS,
    )
    response, admin = call(delete_topics, 6, request)
    return {
        (r.name, r.topic_id): (r.error_code, r.error_message) for r in response.responses
    }, admin


def test_delete_refuses_what_kafka_refuses_and_deletes_the_rest() -> None:
    other = uuid.UUID(int=9)
    answers, admin = delete(
        ("twice", None),
        ("twice", None),
        ("both", other),
        (None, None),
        ("known", None),
        (None, KNOWN_ID),
        ("fine", None),
    )
    invalid = ErrorCode.invalid_request
    assert answers[("twice", None)] == (invalid, "Duplicate topic name.")
    assert answers[("both", other)] == (
        invalid,
        "You may not specify both topic name and topic id.",
    )
    assert answers[(None, None)] == (invalid, "Neither topic name nor id were specified.")
    assert answers[("known", KNOWN_ID)] == (
        invalid,
        "The provided topic name maps to an ID that was already supplied.",
    )
    assert admin.deleted == [(["fine"], [])]  # nothing else reaches the meta service


def create(*topics: tuple[str, dict[str, str | None]]) -> tuple[dict[str, Any], Any]:
    request = create_v7.CreateTopicsRequest(
        topics=tuple(
            create_v7.CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(1),
                replication_factor=i16(1),
                assignments=(),
                configs=tuple(
                    create_v7.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()
                ),
            )
            for name, configs in topics
        ),
        timeout=FIVE_SECONDS,
        validate_only=True,
    )
    response, admin = call(create_topics, 7, request)
    return {t.name: (t.error_code, t.error_message) for t in response.topics}, admin


def test_create_refuses_what_kafka_refuses() -> None:
    answers, admin = create(
        ("twice", {}),
        ("twice", {}),
        ("__cluster_metadata", {}),
        ("nulls", {"retention.ms": None, "segment.ms": None}),
        ("removed", {"message.downconversion.enable": "true"}),
        ("lags", {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}),
        ("bad name!", {"retention.ms": None}),  # the name is the meta service's to refuse
        ("fine", {"cleanup.policy": ""}),
    )
    invalid, config = ErrorCode.invalid_request, ErrorCode.invalid_config
    assert answers["twice"] == (invalid, "Duplicate topic name.")
    assert answers["__cluster_metadata"] == (
        invalid,
        "Creation of internal topic __cluster_metadata is prohibited.",
    )
    assert answers["nulls"] == (
        config,
        "Null value not supported for topic configs: retention.ms,segment.ms",
    )
    assert answers["removed"] == (
        config,
        "Unknown topic config name: message.downconversion.enable",
    )
    assert answers["lags"] == (
        config,
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
    )
    assert admin.created == ["bad name!", "fine"]


def describe(name: str) -> Any:
    request = describe_v4.DescribeConfigsRequest(
        resources=(
            describe_v4.DescribeConfigsResource(
                resource_type=i8(2), resource_name=name, configuration_keys=("retention.ms",)
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    response, _ = call(describe_configs, 4, request)
    (result,) = response.results
    return result


def test_describe_configs_of_topic_names_as_kafka() -> None:
    bad = describe("bad name!")
    assert bad.error_code == ErrorCode.invalid_topic_exception
    assert bad.error_message.startswith("Topic name is invalid: 'bad name!' contains")
    unknown, known = describe("unknown"), describe("known")
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.unknown_topic_or_partition, "")
    assert (known.error_code, known.error_message) == (ErrorCode.none, "")  # Kafka's default
    assert [c.name for c in known.configs] == ["retention.ms"]
