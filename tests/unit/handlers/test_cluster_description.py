"""DescribeTopicPartitions' pages and cursors and DescribeCluster's brokers, endpoint types and
controller, from a metadata cache filled by hand, with kio's request objects of each version."""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest as ClusterV0
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest as ClusterV1
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest as ClusterV2
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.types import TopicName

from dataplane.connection import Connection
from dataplane.handlers import describe_cluster, describe_topic_partitions
from dataplane.metadata_cache import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext
from meta.acl import AclOperation, ResourceType

ALL_OPS = 0b1111


class FakeAuthorizer:
    """Allows everything but DESCRIBE on the `hidden` topics and on the cluster if asked."""

    def __init__(self, hidden: Iterable[str] = (), cluster: bool = True) -> None:
        self.hidden = set(hidden)
        self.cluster = cluster

    def authorize(
        self, conn: Any, op: AclOperation, kind: ResourceType, name: str, **_: Any
    ) -> bool:
        if kind == ResourceType.CLUSTER:
            return self.cluster
        return not (op == AclOperation.DESCRIBE and name in self.hidden)

    def authorized_operations(self, conn: Any, kind: ResourceType, name: str) -> int:
        return ALL_OPS if self.authorize(conn, AclOperation.DESCRIBE, kind, name) else 0


def topic(name: str, partitions: int, replicas: tuple[int, ...] = (1, 2)) -> TopicInfo:
    return TopicInfo(
        name,
        name.encode().ljust(16, b"\0"),
        tuple(PartitionInfo(i, replicas, replicas, replicas[0], 3, 5) for i in range(partitions)),
        {},
        False,
    )


def broker(node: int, fenced: bool = False, listeners: tuple[str, ...] = ("PLAINTEXT",)) -> Any:
    return BrokerInfo(
        node,
        f"h{node}",
        9000 + node,
        f"r{node}",
        fenced,
        1,
        "",
        {name: (f"{name.lower()}{node}", 9000 + node) for name in listeners},
    )


def context(cache: MetadataCache, authorizer: Any, version: int = 0, limit: int = 2000) -> Any:
    services = SimpleNamespace(
        cache=cache,
        authorizer=authorizer,
        config=SimpleNamespace(max_request_partition_size_limit=limit),
    )
    header = SimpleNamespace(api_version=version, client_id="test")
    return RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]


@pytest.fixture
def cache() -> MetadataCache:
    c = MetadataCache()
    c.cluster_id = "cid"
    for t in (topic("a", 2), topic("b", 3), topic("c", 1)):
        c.topics[t.name] = t
    for b in (broker(1), broker(2)):
        c.brokers[b.id] = b
    return c


# -- DescribeTopicPartitions ---------------------------------------------------------------------


def describe(
    cache: MetadataCache,
    names: Iterable[str] = (),
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
    authorizer: Any = None,
    broker_limit: int = 2000,
) -> Any:
    req = DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=TopicName(n)) for n in names),
        response_partition_limit=limit,  # type: ignore[arg-type]
        cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=cursor[1]),  # type: ignore[arg-type]
    )
    ctx = context(cache, authorizer or FakeAuthorizer(), limit=broker_limit)
    return anyio.run(describe_topic_partitions.handle, ctx, req)


def pages(response: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def cursor_of(response: Any) -> tuple[str, int] | None:
    c = response.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


def test_all_topics_in_name_order_a_page_at_a_time(cache: MetadataCache) -> None:
    first = describe(cache, limit=3)
    assert pages(first) == [("a", [0, 1]), ("b", [0])]
    assert cursor_of(first) == ("b", 1)
    second = describe(cache, limit=3, cursor=("b", 1))
    assert pages(second) == [("b", [1, 2]), ("c", [0])]
    assert cursor_of(second) is None


def test_a_page_ending_with_a_topic_points_to_the_next_topic(cache: MetadataCache) -> None:
    response = describe(cache, limit=2)
    assert pages(response) == [("a", [0, 1])]
    assert cursor_of(response) == ("b", 0)


def test_the_broker_caps_the_page_and_a_page_holds_at_least_one(cache: MetadataCache) -> None:
    assert pages(describe(cache, limit=100, broker_limit=1)) == [("a", [0])]
    assert pages(describe(cache, limit=0)) == [("a", [0])]


def test_named_topics_unknown_and_illegal_names(cache: MetadataCache) -> None:
    response = describe(cache, names=["c", "nope", "bad/name"])
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {
        "c": ErrorCode.none,
        "nope": ErrorCode.unknown_topic_or_partition,
        "bad/name": ErrorCode.invalid_topic_exception,
    }
    known = next(t for t in response.topics if t.name == "c")
    assert known.topic_id.bytes == b"c".ljust(16, b"\0")
    assert known.topic_authorized_operations == ALL_OPS
    (p,) = known.partitions
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (1, 3, (1, 2), (1, 2))
    assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ((), (), ())


def test_a_cursor_must_name_a_requested_topic_and_a_partition(cache: MetadataCache) -> None:
    for cursor in (("c", 0), ("a", -1)):
        response = describe(cache, names=["a", "b"], cursor=cursor)
        assert [(t.name, t.error_code) for t in response.topics] == [
            ("a", ErrorCode.invalid_request),
            ("b", ErrorCode.invalid_request),
        ]


def test_topics_the_principal_may_not_describe(cache: MetadataCache) -> None:
    authorizer = FakeAuthorizer(hidden=["b"])
    assert [t.name for t in describe(cache, authorizer=authorizer).topics] == ["a", "c"]
    named = describe(cache, names=["b", "a"], authorizer=authorizer)
    refused = next(t for t in named.topics if t.name == "b")
    assert refused.error_code == ErrorCode.topic_authorization_failed
    assert refused.topic_id is None  # kio writes the zero UUID
    assert refused.partitions == ()


def test_offline_replicas_and_a_leader_without_this_listener(cache: MetadataCache) -> None:
    """Offline: unknown, fenced, or without the client's listener; the leader is -1 when it
    has no endpoint on that listener (a fenced one keeps its endpoint, as in Kafka)."""
    cache.topics["d"] = topic("d", 1, replicas=(1, 3, 4))
    cache.topics["e"] = topic("e", 1, replicas=(3, 2))
    cache.brokers[3] = broker(3, fenced=True)
    cache.brokers[1] = broker(1, listeners=("SSL",))
    d, e = describe(cache, names=["d", "e"]).topics
    assert (d.partitions[0].leader_id, d.partitions[0].offline_replicas) == (-1, (1, 3, 4))
    assert (e.partitions[0].leader_id, e.partitions[0].offline_replicas) == (3, (3,))


# -- DescribeCluster -----------------------------------------------------------------------------


def cluster(cache: MetadataCache, req: Any, version: int, authorizer: Any = None) -> Any:
    ctx = context(cache, authorizer or FakeAuthorizer(), version=version)
    return anyio.run(describe_cluster.handle, ctx, req)


def test_describe_cluster_lists_the_live_brokers_on_the_clients_listener(
    cache: MetadataCache,
) -> None:
    cache.brokers[3] = broker(3, fenced=True)
    cache.brokers[4] = broker(4, listeners=("SSL",))
    r = cluster(cache, ClusterV1(include_cluster_authorized_operations=False), 1)
    assert r.error_code == ErrorCode.none
    assert (r.cluster_id, r.controller_id, r.endpoint_type) == ("cid", 1, 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [
        (1, "plaintext1", 9001, "r1"),
        (2, "plaintext2", 9002, "r2"),
    ]
    assert r.cluster_authorized_operations == -2147483648  # not asked


def test_describe_cluster_v2_includes_fenced_brokers_when_asked(cache: MetadataCache) -> None:
    cache.brokers[3] = broker(3, fenced=True)
    req = ClusterV2(include_cluster_authorized_operations=False, include_fenced_brokers=True)
    r = cluster(cache, req, 2)
    assert [(b.broker_id, b.is_fenced) for b in r.brokers] == [(1, False), (2, False), (3, True)]


def test_describe_cluster_without_live_brokers_has_no_controller(cache: MetadataCache) -> None:
    for node in (1, 2):
        cache.brokers[node] = broker(node, fenced=True)
    r = cluster(cache, ClusterV0(include_cluster_authorized_operations=False), 0)
    assert (r.controller_id, r.brokers) == (-1, ())


@pytest.mark.parametrize(
    ("version", "endpoint_type", "code"),
    [
        (1, 2, ErrorCode.mismatched_endpoint_type),
        (1, 7, ErrorCode.unsupported_endpoint_type),
        (2, 2, ErrorCode.mismatched_endpoint_type),
    ],
)
def test_describe_cluster_serves_the_broker_endpoint_type_only(
    cache: MetadataCache, version: int, endpoint_type: int, code: ErrorCode
) -> None:
    cls = ClusterV1 if version == 1 else ClusterV2
    fields: dict[str, Any] = {"include_cluster_authorized_operations": False}
    if version == 2:
        fields["include_fenced_brokers"] = False
    r = cluster(cache, cls(endpoint_type=endpoint_type, **fields), version)  # type: ignore[arg-type]
    assert r.error_code == code
    assert r.brokers == ()


@pytest.mark.parametrize(("allowed", "ops"), [(True, ALL_OPS), (False, 0)])
def test_describe_cluster_authorized_operations_need_describe(
    cache: MetadataCache, allowed: bool, ops: int
) -> None:
    req = ClusterV0(include_cluster_authorized_operations=True)
    r = cluster(cache, req, 0, FakeAuthorizer(cluster=allowed))
    assert r.cluster_authorized_operations == ops
