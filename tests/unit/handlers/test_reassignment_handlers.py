"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments handlers over a fake
meta client: what they ask the meta service, Kafka's response shapes per version, CLUSTER
authorization, and a meta service that does not answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest as AlterV1,
)
from kio.schema.alter_partition_reassignments.v1.request import (
    ReassignablePartition as ReassignablePartitionV1,
)
from kio.schema.alter_partition_reassignments.v1.request import (
    ReassignableTopic as ReassignableTopicV1,
)
from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as ElectV0
from kio.schema.elect_leaders.v0.request import TopicPartitions as TopicPartitionsV0
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest as ElectV2
from kio.schema.elect_leaders.v2.request import TopicPartitions as TopicPartitionsV2
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32

from dataplane.connection import Connection
from dataplane.handlers import (
    alter_partition_reassignments,
    elect_leaders,
    list_partition_reassignments,
)
from dataplane.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext
from meta.acl import AclOperation, ResourceType
from meta.client import MetaError
from meta.model import ReassignmentInfo
from proto import meta_pb2


class FakeAuthorizer:
    def __init__(self, allowed: bool = True) -> None:
        self.allowed = allowed
        self.asked: list[tuple[AclOperation, ResourceType, str]] = []

    def authorize(
        self, conn: Any, op: AclOperation, kind: ResourceType, name: str, **_: Any
    ) -> bool:
        self.asked.append((op, kind, name))
        return self.allowed


class FakeMeta:
    """Answers as the meta service would, and applies elections and reassignments to the
    broker's cache (as its watch stream would)."""

    def __init__(self, cache: MetadataCache, fail: bool = False) -> None:
        self.cache = cache
        self.fail = fail
        self.calls: list[tuple[str, Any]] = []
        self.kept: list[bool] = []  # each reassignment's keep_replication_factor

    async def elect_leaders(
        self, election_type: int, topic_partitions: Mapping[str, Sequence[int]] | None
    ) -> list[meta_pb2.ReplicaElectionResult]:
        self.calls.append(("elect", (election_type, topic_partitions)))
        if self.fail:
            raise MetaError("no meta node answered")
        wanted = topic_partitions or {"a": [0]}
        results = []
        for topic, indexes in wanted.items():
            result = meta_pb2.ReplicaElectionResult(topic=topic)
            for i in indexes:
                code = ErrorCode.none if topic == "a" and i == 0 else ErrorCode.election_not_needed
                result.partition_results.add(partition_id=i, error_code=code)
                if code == ErrorCode.none:
                    self._bump("a", 0, leader=1)
            results.append(result)
        return results

    async def alter_partition_reassignments(
        self,
        changes: Sequence[tuple[str, int, Sequence[int] | None]],
        keep_replication_factor: bool = False,
    ) -> list[tuple[int, str]]:
        self.calls.append(("alter", list(changes)))
        self.kept.append(keep_replication_factor)
        if self.fail:
            raise MetaError("no meta node answered")
        out = []
        for topic, index, target in changes:
            if topic != "a":
                out.append((int(ErrorCode.unknown_topic_or_partition), f"No such topic {topic}"))
            elif target is None:
                out.append((int(ErrorCode.no_reassignment_in_progress), ""))
            else:
                self._bump(topic, index, replicas=(*target, 1), adding=tuple(target))
                out.append((0, ""))
        return out

    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> list[ReassignmentInfo]:
        self.calls.append(("list", partitions))
        if self.fail:
            raise MetaError("no meta node answered")
        return [ReassignmentInfo("a", 1, (2, 3, 4, 1), (4,), (1,))]

    def _bump(
        self,
        topic: str,
        index: int,
        leader: int | None = None,
        replicas: tuple[int, ...] | None = None,
        adding: tuple[int, ...] = (),
    ) -> None:
        info = self.cache.topics[topic]
        parts = list(info.partitions)
        p = parts[index]
        parts[index] = replace(
            p,
            leader=p.leader if leader is None else leader,
            leader_epoch=p.leader_epoch + (leader is not None),
            partition_epoch=p.partition_epoch + 1,
            replicas=p.replicas if replicas is None else replicas,
            adding_replicas=adding,
        )
        self.cache.topics[topic] = replace(info, partitions=tuple(parts))


@pytest.fixture
def cache() -> MetadataCache:
    c = MetadataCache()
    c.topics["a"] = TopicInfo(
        "a",
        b"a".ljust(16, b"\0"),
        tuple(PartitionInfo(i, (1, 2, 3), (1, 2, 3), 2, 5, 7) for i in range(2)),
        {},
        False,
    )
    return c


def run(module: Any, req: Any, version: int, meta: FakeMeta, authorizer: FakeAuthorizer) -> Any:
    services = SimpleNamespace(cache=meta.cache, meta=meta, authorizer=authorizer)
    header = SimpleNamespace(api_version=version, client_id="test")
    ctx = RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]
    return anyio.run(module.handle, ctx, req)


def results(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (r.topic, p.partition_id): p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }


# -- ElectLeaders ------------------------------------------------------------------------------


def test_elect_named_partitions_v2(cache: MetadataCache) -> None:
    meta, authorizer = FakeMeta(cache), FakeAuthorizer()
    req = ElectV2(
        election_type=i8(1),
        topic_partitions=(
            TopicPartitionsV2(topic=TopicName("a"), partitions=(i32(0), i32(1), i32(0))),
            TopicPartitionsV2(topic=TopicName("b"), partitions=(i32(3),)),
        ),
    )
    response = run(elect_leaders, req, 2, meta, authorizer)
    assert meta.calls == [("elect", (1, {"a": [0, 1], "b": [3]}))]
    assert authorizer.asked == [(AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")]
    assert response.error_code == ErrorCode.none
    assert results(response) == {
        ("a", 0): ErrorCode.none,
        ("a", 1): ErrorCode.election_not_needed,
        ("b", 3): ErrorCode.election_not_needed,
    }
    assert cache.topics["a"].partitions[0].leader == 1  # the handler waited for it


def test_elect_v0_is_preferred_and_null_means_every_partition(cache: MetadataCache) -> None:
    meta = FakeMeta(cache)
    response = run(elect_leaders, ElectV0(topic_partitions=None), 0, meta, FakeAuthorizer())
    assert meta.calls == [("elect", (0, None))]
    assert not hasattr(response, "error_code")
    assert results(response) == {("a", 0): ErrorCode.none}


def test_elect_refused_without_alter_on_the_cluster(cache: MetadataCache) -> None:
    meta = FakeMeta(cache)
    req = ElectV2(
        election_type=i8(0),
        topic_partitions=(TopicPartitionsV2(topic=TopicName("a"), partitions=(i32(0),)),),
    )
    response = run(elect_leaders, req, 2, meta, FakeAuthorizer(allowed=False))
    assert meta.calls == []
    assert response.error_code == ErrorCode.cluster_authorization_failed
    assert results(response) == {("a", 0): ErrorCode.cluster_authorization_failed}
    everything = run(
        elect_leaders,
        ElectV0(topic_partitions=None),
        0,
        meta,
        FakeAuthorizer(allowed=False),
    )
    assert everything.replica_election_results == ()


def test_elect_unknown_type_and_meta_unavailable(cache: MetadataCache) -> None:
    req = ElectV2(
        election_type=i8(2),
        topic_partitions=(TopicPartitionsV2(topic=TopicName("a"), partitions=(i32(0),)),),
    )
    bad = run(elect_leaders, req, 2, FakeMeta(cache), FakeAuthorizer())
    assert bad.error_code == ErrorCode.invalid_request
    assert results(bad) == {("a", 0): ErrorCode.invalid_request}
    req = replace(req, election_type=i8(0))
    down = run(elect_leaders, req, 1, FakeMeta(cache, fail=True), FakeAuthorizer())
    assert down.error_code == ErrorCode.request_timed_out
    assert results(down) == {("a", 0): ErrorCode.request_timed_out}


def test_elect_v0_request_has_no_type() -> None:
    assert "election_type" not in ElectV0.__dataclass_fields__
    assert TopicPartitionsV0(topic=TopicName("a"), partitions=(i32(0),)).partitions == (0,)


# -- AlterPartitionReassignments -----------------------------------------------------------------


def alter_request(*changes: tuple[str, int, tuple[int, ...] | None]) -> Any:
    topics: dict[str, list[ReassignablePartition]] = {}
    for topic, index, replicas in changes:
        topics.setdefault(topic, []).append(
            ReassignablePartition(
                partition_index=i32(index),
                replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
            )
        )
    return AlterPartitionReassignmentsRequest(
        topics=tuple(
            ReassignableTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in topics.items()
        )
    )


def test_reassign_start_cancel_and_unknown(cache: MetadataCache) -> None:
    meta = FakeMeta(cache)
    req = alter_request(("a", 0, (2, 3, 4)), ("a", 1, None), ("zz", 0, (1,)))
    response = run(alter_partition_reassignments, req, 0, meta, FakeAuthorizer())
    assert meta.calls == [("alter", [("a", 0, [2, 3, 4]), ("a", 1, None), ("zz", 0, [1])])]
    assert response.error_code == ErrorCode.none
    codes = {
        (t.name, p.partition_index): p.error_code for t in response.responses for p in t.partitions
    }
    assert codes == {
        ("a", 0): ErrorCode.none,
        ("a", 1): ErrorCode.no_reassignment_in_progress,
        ("zz", 0): ErrorCode.unknown_topic_or_partition,
    }
    messages = {
        p.partition_index: p.error_message for t in response.responses for p in t.partitions
    }
    assert messages[1] is None  # Kafka sends null, not "", when there is no message
    assert cache.topics["a"].partitions[0].replicas == (2, 3, 4, 1)


@pytest.mark.parametrize("allow", [True, False])
def test_reassign_v1_passes_and_echoes_allow_replication_factor_change(
    cache: MetadataCache, allow: bool
) -> None:
    """KIP-860: the controller refuses a change of the replication factor when the request does
    not allow it, and its answer echoes the flag (v0 has no such field: always allowed)."""
    meta = FakeMeta(cache)
    req = AlterV1(
        allow_replication_factor_change=allow,
        topics=(
            ReassignableTopicV1(
                name=TopicName("a"),
                partitions=(
                    ReassignablePartitionV1(partition_index=i32(0), replicas=(BrokerId(2),)),
                ),
            ),
        ),
    )
    response = run(alter_partition_reassignments, req, 1, meta, FakeAuthorizer())
    assert meta.kept == [not allow]
    assert response.allow_replication_factor_change is allow
    run(alter_partition_reassignments, alter_request(("a", 0, (2,))), 0, meta, FakeAuthorizer())
    assert meta.kept[-1] is False


def test_reassign_refused_and_meta_unavailable(cache: MetadataCache) -> None:
    req = alter_request(("a", 0, (2, 3, 4)))
    meta = FakeMeta(cache)
    refused = run(alter_partition_reassignments, req, 0, meta, FakeAuthorizer(allowed=False))
    assert meta.calls == []
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert refused.responses[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
    down = run(alter_partition_reassignments, req, 0, FakeMeta(cache, True), FakeAuthorizer())
    assert down.error_code == ErrorCode.request_timed_out
    assert down.responses[0].partitions[0].error_code == ErrorCode.request_timed_out


# -- ListPartitionReassignments ------------------------------------------------------------------


def test_list_reassignments(cache: MetadataCache) -> None:
    meta, authorizer = FakeMeta(cache), FakeAuthorizer()
    everything = run(
        list_partition_reassignments,
        ListPartitionReassignmentsRequest(topics=None),
        0,
        meta,
        authorizer,
    )
    assert authorizer.asked == [(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")]
    (topic,) = everything.topics
    (p,) = topic.partitions
    assert (topic.name, p.partition_index, p.replicas) == ("a", 1, (2, 3, 4, 1))
    assert (p.adding_replicas, p.removing_replicas) == ((4,), (1,))
    named = ListPartitionReassignmentsRequest(
        topics=(
            ListPartitionReassignmentsTopics(
                name=TopicName("a"), partition_indexes=(i32(1), i32(0))
            ),
        )
    )
    run(list_partition_reassignments, named, 0, meta, authorizer)
    assert meta.calls == [("list", None), ("list", [("a", 1), ("a", 0)])]


def test_list_refused_and_meta_unavailable(cache: MetadataCache) -> None:
    named = ListPartitionReassignmentsRequest(
        topics=(ListPartitionReassignmentsTopics(name=TopicName("a"), partition_indexes=(i32(1),)),)
    )
    refused = run(
        list_partition_reassignments, named, 0, FakeMeta(cache), FakeAuthorizer(allowed=False)
    )
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in refused.topics] == [
        ("a", [1])
    ]
    down = run(list_partition_reassignments, named, 0, FakeMeta(cache, True), FakeAuthorizer())
    assert down.error_code == ErrorCode.request_timed_out
