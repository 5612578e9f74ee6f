"""Metadata's auto-creation of an internal topic's name (issue 25), as Kafka's
AutoTopicCreationManager does it: the topic its coordinators would create (their partition
count, replication factor and configs, internal), not an ordinary topic of the broker's defaults
— one partition, not compacted, which its coordinators could never use. With fewer live brokers
than its replication factor nothing is created and the answer is UNKNOWN_TOPIC_OR_PARTITION,
flagged internal, as Kafka 4.4 answers."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.constants import EntityType

from dataplane.connection import Connection
from dataplane.coordinator.runtime import InternalTopic
from dataplane.handlers import metadata
from dataplane.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from dataplane.protocol.codec import entity_class
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext
from dataplane.topic_admin import NewTopic
from proto import meta_pb2
from tests.unit.handlers.answers import encoded
from tests.unit.handlers.test_metadata_handler import broker


class Brokers:
    """A metadata cache of `live` brokers and the topics created through the meta service."""

    def __init__(self, live: int) -> None:
        self.cache = MetadataCache()
        for node in range(1, live + 1):
            self.cache.brokers[node] = broker(node)
        self.created: list[NewTopic] = []

    async def create_topics(self, topics: Sequence[NewTopic], validate_only: bool = False) -> Any:
        for t in topics:
            self.created.append(t)
            parts = tuple(PartitionInfo(i, (1,), (1,), 1, 0, 0) for i in range(t.num_partitions))
            self.cache.topics[t.name] = TopicInfo(
                t.name, t.name.encode().ljust(16, b"\0")[:16], parts, t.configs, t.internal
            )
        return [meta_pb2.CreateTopicResult(name=t.name) for t in topics]


def _internal(brokers: Brokers, name: str) -> InternalTopic:
    return InternalTopic(
        brokers.cache, brokers.create_topics, name, 50, 3, {"cleanup.policy": "compact"}
    )


def _ask(brokers: Brokers, *names: str) -> Any:
    services = SimpleNamespace(
        cache=brokers.cache,
        authorizer=SimpleNamespace(enabled=False),
        config=SimpleNamespace(auto_create_topics_enable=True),
        topic_admin=brokers,
        offsets_topic=_internal(brokers, "__consumer_offsets"),
        transactions_topic=_internal(brokers, "__transaction_state"),
        share_state_topic=_internal(brokers, "__share_group_state"),
    )
    header = SimpleNamespace(api_version=12, client_id="test")
    ctx = RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]
    request = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(n)) for n in names),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    body = encoded(anyio.run(metadata.handle, ctx, request))
    decoded, _ = entity_reader(entity_class(3, 12, EntityType.response))(body, 0)
    return {t.name: t for t in decoded.topics}


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state"])
def test_an_internal_name_creates_the_internal_topic(name: str) -> None:
    brokers = Brokers(live=3)
    answers = _ask(brokers, name, "plain")
    by_name = {t.name: t for t in brokers.created}
    assert by_name[name].num_partitions == 50
    assert by_name[name].replication_factor == 3
    assert by_name[name].internal
    assert by_name[name].configs["cleanup.policy"] == "compact"
    assert by_name["plain"].num_partitions == -1
    assert not by_name["plain"].internal
    assert answers[name].error_code == ErrorCode.none
    assert answers[name].is_internal
    assert len(answers[name].partitions) == 50


def test_too_few_brokers_leave_it_unknown() -> None:
    brokers = Brokers(live=1)
    answers = _ask(brokers, "__consumer_offsets")
    assert brokers.created == []
    assert answers["__consumer_offsets"].error_code == ErrorCode.unknown_topic_or_partition
    assert answers["__consumer_offsets"].is_internal
