"""Metadata's cached topic encodings: an all-topics answer from a metadata cache filled by
hand, decoded with kio's readers, stays right across leader changes, fenced brokers, deleted
topics and versions, while unchanged topics are not encoded again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kio.schema.metadata.v4.request import MetadataRequest as MetadataV4
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.serial import entity_reader
from kio.static.constants import EntityType
from kio.static.protocol import Entity

from dataplane.connection import Connection
from dataplane.handlers import metadata
from dataplane.metadata_cache import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from dataplane.protocol import encoders
from dataplane.protocol.codec import entity_class
from dataplane.request_context import RequestContext


def topic(name: str, leader: int = 1, epoch: int = 0) -> TopicInfo:
    partitions = tuple(PartitionInfo(i, (1, 2, 3), (1, 2, 3), leader, epoch, 0) for i in range(3))
    return TopicInfo(name, name.encode().ljust(16, b"\0"), partitions, {}, False)


def broker(node: int, fenced: bool = False) -> BrokerInfo:
    return BrokerInfo(
        node, "h", 9000 + node, None, fenced, 1, "", {"PLAINTEXT": ("h", 9000 + node)}
    )


def filled_cache() -> MetadataCache:
    cache = MetadataCache()
    for node in (1, 2, 3):
        cache.brokers[node] = broker(node)
    for name in ("a", "b"):
        cache.topics[name] = topic(name)
    return cache


def ask(cache: MetadataCache, version: int = 12) -> Any:
    """An all-topics Metadata request of ``version``, decoded."""
    services = SimpleNamespace(
        cache=cache,
        authorizer=SimpleNamespace(enabled=False),
        config=SimpleNamespace(auto_create_topics_enable=False),
    )
    header = SimpleNamespace(api_version=version, client_id="test")
    ctx = RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]
    request: Entity = (
        MetadataV12(
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        if version == 12
        else MetadataV4(topics=None, allow_auto_topic_creation=False)
    )
    body = anyio.run(metadata.handle, ctx, request)
    assert isinstance(body, bytes)
    decoded, _ = entity_reader(entity_class(3, version, EntityType.response))(body, 0)
    return decoded


def leaders(response: Any) -> dict[tuple[str, int], tuple[int, tuple[int, ...]]]:
    return {
        (t.name, p.partition_index): (p.leader_id, tuple(getattr(p, "offline_replicas", ())))
        for t in response.topics
        for p in t.partitions
    }


def test_unchanged_topics_are_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = filled_cache()
    encoded: list[str] = []
    original = encoders.encode_metadata_topic

    def counting(version: int, described: encoders.MetadataTopic) -> bytes:
        encoded.append(described.name or "")
        return original(version, described)

    monkeypatch.setattr(metadata, "encode_metadata_topic", counting)
    first = ask(cache)
    assert ask(cache) == first
    assert sorted(encoded) == ["a", "b"]
    cache.topics["b"] = topic("b", leader=2, epoch=1)  # a leader change replaces the entry
    changed = ask(cache)
    assert sorted(encoded) == ["a", "b", "b"]
    assert leaders(changed)[("b", 0)] == (2, ())
    assert leaders(changed)[("a", 0)] == (1, ())


def test_fenced_broker_shows_as_offline_replica() -> None:
    cache = filled_cache()
    ask(cache)
    cache.brokers[3] = broker(3, fenced=True)
    response = ask(cache)
    assert {offline for _, offline in leaders(response).values()} == {(3,)}
    assert sorted(b.node_id for b in response.brokers) == [1, 2]


def test_versions_are_cached_apart_and_deleted_topics_go() -> None:
    cache = filled_cache()
    v12, v4 = ask(cache, 12), ask(cache, 4)
    assert leaders(v12).keys() == leaders(v4).keys()
    assert v12.topics[0].topic_id is not None
    del cache.topics["a"]
    assert [t.name for t in ask(cache).topics] == ["b"]
