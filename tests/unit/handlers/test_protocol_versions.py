"""Kafka 4.4's new versions, the checks that need no broker: ListOffsets' special timestamps
by version, ApiVersions v5's cluster and node check (KIP-1242) and the software-name check, and
Produce v13's topics by id, over fake services (tests/compat compares them with Kafka)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kio.static.constants import EntityType

from dataplane.connection import Connection
from dataplane.handlers import api_versions, produce
from dataplane.handlers.list_offsets import timestamp_unsupported
from dataplane.metadata_cache import MetadataCache, TopicInfo
from dataplane.protocol.codec import EntityBuilder, entity_class
from dataplane.protocol.encoders import PRODUCE_VERSIONS
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext
from tests.unit.handlers.answers import encoded, entity
from tests.unit.protocol import kio_models


@pytest.mark.parametrize(
    ("timestamp", "lowest"),
    [(-1, 1), (-2, 1), (-3, 7), (-4, 8), (-5, 9), (-6, 11), (-7, None), (-100, None)],
)
def test_special_timestamps_by_version(timestamp: int, lowest: int | None) -> None:
    """Kafka's ReplicaManager.timestampMinSupportedVersion; real timestamps at any version."""
    for version in range(1, 12):
        unsupported = lowest is None or version < lowest
        assert timestamp_unsupported(timestamp, version) is unsupported, (timestamp, version)
        assert not timestamp_unsupported(1_700_000_000_000, version)


def context(api_key: int, version: int, cache: MetadataCache, **services: Any) -> RequestContext:
    config = SimpleNamespace(node_id=1, transaction_version=0)
    header = SimpleNamespace(api_key=api_key, api_version=version, client_id="t")
    all_services = SimpleNamespace(cache=cache, config=config, **services)
    return RequestContext(all_services, header, Connection(peer="1.2.3.4:5"), {18: (0, 5)})  # type: ignore[arg-type]


def ask_api_versions(version: int, **fields: Any) -> tuple[Any, Connection]:
    cache = MetadataCache()
    cache.cluster_id = "our-cluster"
    ctx = context(18, version, cache)
    software = {"client_software_name": "librdkafka", "client_software_version": "2.16.0"}
    req = EntityBuilder(18, version, EntityType.request).ApiVersionsRequest(**(software | fields))
    return anyio.run(api_versions.handle, ctx, req), ctx.conn


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({}, ErrorCode.none),
        ({"cluster_id": "our-cluster", "node_id": 1}, ErrorCode.none),
        ({"cluster_id": "our-cluster", "node_id": 2}, ErrorCode.rebootstrap_required),
        ({"cluster_id": "another", "node_id": 1}, ErrorCode.rebootstrap_required),
        ({"cluster_id": "our-cluster"}, ErrorCode.invalid_request),  # node id -1
        ({"node_id": 1}, ErrorCode.invalid_request),  # no cluster id
        ({"client_software_name": "-librdkafka"}, ErrorCode.invalid_request),
        ({"client_software_version": "2.16 beta"}, ErrorCode.invalid_request),
    ],
)
def test_api_versions_v5_checks(fields: dict[str, Any], code: ErrorCode) -> None:
    answer, conn = ask_api_versions(5, **fields)
    assert answer.error_code == code
    assert bool(answer.api_keys) is (code == ErrorCode.none)  # error answers list no API
    remembered = ("librdkafka", "2.16.0") if code == ErrorCode.none else ("", "")
    assert conn.client_software == remembered


def test_produce_is_listed_from_v0_as_kafka_lists_it() -> None:
    """KAFKA-18659: librdkafka needs Produce v0 listed; v0-v2 are still refused (closed)."""
    ctx = context(18, 4, MetadataCache())
    ctx.supported = {0: (3, 13), 18: (0, 5)}
    req = EntityBuilder(18, 4, EntityType.request).ApiVersionsRequest(
        client_software_name="librdkafka", client_software_version="2.16.0"
    )
    answer = entity(anyio.run(api_versions.handle, ctx, req))
    assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == [
        (0, 0, 13),
        (18, 0, 5),
    ]


def test_api_versions_before_v5_ignore_the_target() -> None:
    answer, _ = ask_api_versions(4)
    assert answer.error_code == ErrorCode.none
    assert answer.api_keys
    answer, _ = ask_api_versions(3, client_software_name="bad name")
    assert answer.error_code == ErrorCode.invalid_request


class Authorizer:
    enabled = False

    def denied(self, *_: Any, **__: Any) -> frozenset[str]:
        return frozenset()


def test_produce_v13_names_topics_by_id_and_refuses_unknown_ids() -> None:
    """Each id is looked up once; an unknown one answers UNKNOWN_TOPIC_ID for its partitions
    (before anything else is checked), the answer naming topics by the ids asked by."""
    cache = MetadataCache()
    known = uuid.uuid4()
    cache.topics_by_id[known.bytes] = TopicInfo("orders", known.bytes, (), {}, False)
    unknown = uuid.uuid4()
    b = EntityBuilder(0, 13, EntityType.request)
    req: Any = b.ProduceRequest(  # a Payload to the builder, a ProduceRequest to the handler
        transactional_id=None,
        acks=1,
        timeout=1000,
        topic_data=tuple(
            b.TopicProduceData(
                topic_id=tid, partition_data=(b.PartitionProduceData(index=0, records=None),)
            )
            for tid in (known, unknown, None)
        ),
    )
    appended: list[tuple[str, int]] = []

    class Replicas:
        def leader_partition(self, topic: str, index: int) -> Any:
            appended.append((topic, index))
            raise produce.KafkaError(ErrorCode.not_leader_or_follower)

    quotas = SimpleNamespace(produce=SimpleNamespace(enabled=False))
    ctx = context(0, 13, cache, replicas=Replicas(), authorizer=Authorizer(), quotas=quotas)
    body = encoded(anyio.run(produce.handle, ctx, req))
    answer = kio_models.decode(entity_class(0, 13, EntityType.response), body)
    assert appended == [("orders", 0)]
    assert [(t.topic_id, t.partition_responses[0].error_code) for t in answer.responses] == [
        (known, ErrorCode.not_leader_or_follower),
        (unknown, ErrorCode.unknown_topic_id),
        (None, ErrorCode.unknown_topic_id),
    ]
    assert PRODUCE_VERSIONS.stop - 1 == produce.VERSIONS[1] == 13
