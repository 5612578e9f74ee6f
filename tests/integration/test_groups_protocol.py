"""The group coordinator on real brokers: every version of the classic group and offset APIs
(decoded with kio; those Kafka 4 removed also with kafka-python's codec), Kafka's error
semantics, the meta service's group registry, a real confluent-kafka group balancing a topic
(and kafka-python committing), and a kill -9 of the coordinator's broker that the group
survives with its committed offsets."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from dataplane.coordinator.runtime import partition_for
from dataplane.handlers import SUPPORTED_VERSIONS
from tests.integration import groups
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.groups import broker_ports, drain, produce
from tests.integration.kafka_wire import WireClient, builder, request_bytes

FIND, JOIN, SYNC, HEARTBEAT, LEAVE = 10, 11, 14, 12, 13
COMMIT, FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 8, 9, 15, 16, 42, 47
OFFSETS_PARTITIONS = 10


def versions(api_key: int, below: int | None = None) -> range:
    """The versions the brokers serve (those before `below` when given)."""
    lo, hi = SUPPORTED_VERSIONS[api_key]
    return range(lo, hi + 1 if below is None else min(hi + 1, below))


BY_NAME = 10  # OffsetCommit/OffsetFetch v10 name topics by id: tests/compat/test_protocol_versions


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: what the "range" protocol's member metadata holds."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("groups"),
        brokers=3,
        metas=1,
        group_initial_rebalance_delay_ms=0,
        offsets_topic_num_partitions=OFFSETS_PARTITIONS,
    ) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for f in admin.create_topics([NewTopic("conf", 2, 3), NewTopic("six", 6, 3)]).values():
            f.result(30)
        yield c


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: LocalCluster) -> Iterator[None]:
    yield
    cluster.start()  # starts again whatever a test stopped


def coordinator(cluster: LocalCluster, group: str) -> tuple[int, int]:
    """(node id, port) of the group's coordinator, once it serves the group."""

    def probe(w: WireClient, group: str) -> int:
        return w.call(HEARTBEAT, 0, group_id=group, generation_id=-1, member_id="x").error_code

    return groups.coordinator(cluster, group, probe)


class Member:
    """A group member speaking the raw protocol to the coordinator."""

    def __init__(self, port: int, group: str, instance: str | None = None) -> None:
        self.w = WireClient(port)
        self.group = group
        self.instance = instance
        self.member_id = ""
        self.generation = -1

    def close(self) -> None:
        self.w.sock.close()

    def join(self, version: int = 9, **kw: Any) -> Any:
        b = builder(JOIN, version)
        fields = {
            "group_id": self.group,
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": self.member_id,
            "group_instance_id": self.instance,
            "protocol_type": "consumer",
            "protocols": (b.JoinGroupRequestProtocol(name="range", metadata=subscription("conf")),),
            "reason": None,
        } | kw
        r = self.w.call(JOIN, version, **fields)
        if r.error_code == ErrorCode.member_id_required:
            self.member_id = r.member_id
            r = self.w.call(JOIN, version, **(fields | {"member_id": r.member_id}))
        if r.error_code == ErrorCode.none:
            self.member_id, self.generation = r.member_id, r.generation_id
        return r

    def sync(self, version: int = 5, assignments: dict[str, bytes] | None = None, **kw: Any) -> Any:
        b = builder(SYNC, version)
        fields = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": tuple(
                b.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ),
        } | kw
        return self.w.call(SYNC, version, **fields)

    def heartbeat(self, version: int = 4, **kw: Any) -> Any:
        fields = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance,
        } | kw
        return self.w.call(HEARTBEAT, version, **fields)

    def stable(self, version: int = 9) -> None:
        """Join alone and sync: the group becomes Stable with this member."""
        r = self.join(version)
        assert r.error_code == ErrorCode.none, r
        s = self.sync(assignments={self.member_id: b"mine"})
        assert s.error_code == ErrorCode.none, s
        assert s.assignment == b"mine", s


def commit(w: WireClient, version: int, group: str, offsets: dict[tuple[str, int], int], **kw: Any):
    b = builder(COMMIT, version)
    metadata = kw.pop("metadata", None)
    topics: dict[str, list] = {}
    for (topic, p), offset in offsets.items():
        topics.setdefault(topic, []).append(
            b.OffsetCommitRequestPartition(
                partition_index=p,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=f"m{offset}" if metadata is None else metadata,
            )
        )
    fields = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": tuple(
            b.OffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()
        ),
    } | kw
    r = w.call(COMMIT, version, **fields)
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def fetch(w: WireClient, version: int, group: str, topics: dict[str, list[int]] | None) -> Any:
    b = builder(FETCH, version)
    if version >= 8:
        req_topics = (
            None
            if topics is None
            else tuple(
                b.OffsetFetchRequestTopics(name=t, partition_indexes=tuple(ps))
                for t, ps in topics.items()
            )
        )
        group_req = b.OffsetFetchRequestGroup(
            group_id=group, member_id=None, member_epoch=-1, topics=req_topics
        )
        return w.call(FETCH, version, groups=(group_req,), require_stable=True)
    req_topics = (
        None
        if topics is None
        else tuple(
            b.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps))
            for t, ps in topics.items()
        )
    )
    return w.call(FETCH, version, group_id=group, topics=req_topics, require_stable=False)


def fetched_offsets(r: Any) -> dict[tuple[str, int], tuple[int, str]]:
    topics = r.groups[0].topics if hasattr(r, "groups") else r.topics
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata)
        for t in topics
        for p in t.partitions
    }


# ---------------------------------------------------------------- every version


def test_join_sync_heartbeat_leave_every_version(cluster: LocalCluster) -> None:
    for v in versions(JOIN):
        group = f"join-v{v}"
        member = Member(coordinator(cluster, group)[1], group)
        r = member.join(v)
        assert r.error_code == ErrorCode.none, (v, r)
        assert r.generation_id == 1
        assert r.leader == r.member_id == member.member_id
        assert [m.member_id for m in r.members] == [member.member_id]
        assert r.members[0].metadata == subscription("conf")
        assert r.protocol_name == "range"
        if v >= 7:
            assert r.protocol_type == "consumer"
        member.close()
    for v in versions(SYNC):
        group = f"sync-v{v}"
        member = Member(coordinator(cluster, group)[1], group)
        assert member.join(5).error_code == ErrorCode.none
        s = member.sync(v, {member.member_id: b"assigned"})
        assert s.error_code == ErrorCode.none, (v, s)
        assert s.assignment == b"assigned", (v, s)
        if v >= 5:
            assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
        member.close()
    group = "heartbeats"
    member = Member(coordinator(cluster, group)[1], group)
    member.stable()
    for v in versions(HEARTBEAT):
        assert member.heartbeat(v).error_code == ErrorCode.none, v
        stale = member.heartbeat(v, generation_id=member.generation - 1)
        assert stale.error_code == ErrorCode.illegal_generation, v
    member.close()
    for v in versions(LEAVE):
        group = f"leave-v{v}"
        member = Member(coordinator(cluster, group)[1], group)
        member.stable()
        b = builder(LEAVE, v)
        ident = b.MemberIdentity(member_id=member.member_id, group_instance_id=None, reason="done")
        r = member.w.call(LEAVE, v, group_id=group, member_id=member.member_id, members=(ident,))
        assert r.error_code == ErrorCode.none, (v, r)
        if v >= 3:
            assert [(m.member_id, m.error_code) for m in r.members] == [
                (member.member_id, ErrorCode.none)
            ]
        again = member.w.call(
            LEAVE, v, group_id=group, member_id=member.member_id, members=(ident,)
        )
        if v >= 3:
            assert again.members[0].error_code == ErrorCode.unknown_member_id
        else:
            assert again.error_code == ErrorCode.unknown_member_id
        member.close()


def test_offset_commit_and_fetch_every_version(cluster: LocalCluster) -> None:
    for v in versions(COMMIT, BY_NAME):
        group = f"commit-v{v}"
        with WireClient(coordinator(cluster, group)[1]) as w:
            errors = commit(w, v, group, {("conf", 0): 10 + v, ("conf", 1): 20 + v, ("nope", 0): 1})
            assert errors == {
                ("conf", 0): ErrorCode.none,
                ("conf", 1): ErrorCode.none,
                ("nope", 0): ErrorCode.unknown_topic_or_partition,
            }, v
            assert commit(w, v, group, {("conf", 5): 1})[("conf", 5)] == (
                ErrorCode.unknown_topic_or_partition
            )
            for fv in versions(FETCH, BY_NAME):
                r = fetch(w, fv, group, {"conf": [0, 1], "other": [0]})
                assert fetched_offsets(r) == {
                    ("conf", 0): (10 + v, f"m{10 + v}"),
                    ("conf", 1): (20 + v, f"m{20 + v}"),
                    ("other", 0): (-1, ""),
                }, (v, fv)
    with WireClient(coordinator(cluster, "commit-v9")[1]) as w:
        for fv in versions(FETCH, BY_NAME):
            if fv >= 2:  # null topics: every committed partition
                assert set(fetched_offsets(fetch(w, fv, "commit-v9", None))) == {
                    ("conf", 0),
                    ("conf", 1),
                }
        # v8+: several groups in one request
        b = builder(FETCH, 8)
        groups = tuple(
            b.OffsetFetchRequestGroup(
                group_id=g,
                topics=(b.OffsetFetchRequestTopics(name="conf", partition_indexes=(0,)),),
            )
            for g in ("commit-v9", "never-committed")
        )
        r = w.call(FETCH, 8, groups=groups, require_stable=False)
        got = {g.group_id: g for g in r.groups}
        assert got["commit-v9"].error_code == ErrorCode.none
        assert got["commit-v9"].topics[0].partitions[0].committed_offset == 19
        # a group another broker coordinates answers NOT_COORDINATOR for itself only
        never = got["never-committed"]
        assert never.error_code in (ErrorCode.none, ErrorCode.not_coordinator)
        if never.error_code == ErrorCode.none:
            assert never.topics[0].partitions[0].committed_offset == -1


def kafka_python_call(w: WireClient, version: int, request: Any, response: Any) -> Any:
    """`request` (a kafka-python protocol object: another implementation of Kafka's JSON
    messages) sent raw; the answer decoded by kafka-python's `response[version]`."""
    w.sock.sendall(request_bytes(request.API_KEY, version, 9999, request.encode(), b"wire"))
    frame = w.recv_frame()
    assert struct.unpack_from(">i", frame)[0] == 9999
    return response[version].decode(frame[4:])


def test_offset_versions_kafka_4_removed_as_kafka_python_speaks_them(
    cluster: LocalCluster,
) -> None:
    """OffsetCommit v0-v1 and OffsetFetch v0 (KIP-896 removed them from Kafka 4) encoded and
    decoded by kafka-python's protocol classes, not by our schemas: v0 commits from outside any
    group, v1 with the member's generation; and kafka-python's consumer told it talks to a
    0.8.2 broker (OffsetCommit v1 and OffsetFetch v1 without ApiVersions)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.protocol.consumer import (
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
    )
    from kafka.structs import OffsetAndMetadata

    commit_topic = OffsetCommitRequest[1].OffsetCommitRequestTopic
    commit_partition = commit_topic.OffsetCommitRequestPartition

    def old_commit(w: WireClient, version: int, group: str, offsets: dict, **member: Any) -> dict:
        partitions = [
            commit_partition(partition_index=p, committed_offset=o, committed_metadata=m)
            for p, (o, m) in offsets.items()
        ]
        request = OffsetCommitRequest[version](
            group_id=group,
            topics=[commit_topic(name="conf", partitions=partitions)],
            **member,
        )
        r = kafka_python_call(w, version, request, OffsetCommitResponse)
        return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}

    def old_fetch(w: WireClient, group: str) -> dict:
        topic = OffsetFetchRequest[0].OffsetFetchRequestTopic
        request = OffsetFetchRequest[0](
            group_id=group, topics=[topic(name="conf", partition_indexes=[0, 1])]
        )
        r = kafka_python_call(w, 0, request, OffsetFetchResponse)
        return {
            p.partition_index: (p.committed_offset, p.metadata, p.error_code)
            for t in r.topics
            for p in t.partitions
        }

    group = "old-simple"
    with WireClient(coordinator(cluster, group)[1]) as w:
        assert old_commit(w, 0, group, {0: (11, "m11"), 1: (12, None)}) == {0: 0, 1: 0}
        assert old_fetch(w, group) == {0: (11, "m11", 0), 1: (12, "", 0)}
        assert fetched_offsets(fetch(w, 9, group, {"conf": [0, 1]})) == {
            ("conf", 0): (11, "m11"),
            ("conf", 1): (12, ""),
        }

    group = "old-member"
    member = Member(coordinator(cluster, group)[1], group)
    member.stable()
    mine = {"member_id": member.member_id}
    generation = member.generation
    errors = old_commit(
        member.w, 1, group, {0: (21, "a")}, generation_id_or_member_epoch=generation, **mine
    )
    assert errors == {0: ErrorCode.none}
    stale = old_commit(
        member.w, 1, group, {0: (22, "b")}, generation_id_or_member_epoch=generation - 1, **mine
    )
    assert stale == {0: ErrorCode.illegal_generation}
    # v0 has no member id: refused while the group has members
    assert old_commit(member.w, 0, group, {0: (23, "c")}) == {0: ErrorCode.unknown_member_id}
    assert old_fetch(member.w, group)[0] == (21, "a", ErrorCode.none)
    member.close()

    c = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        group_id="kafka-python-0.8.2",
        api_version=(0, 8, 2),
        enable_auto_commit=False,
    )
    try:
        tp = KafkaTopicPartition("conf", 1)
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(7, "old client", -1)})
        assert c.committed(tp) == 7
    finally:
        c.close()


def test_describe_list_delete_every_version(cluster: LocalCluster) -> None:
    group = "admin-stable"
    _node, port = coordinator(cluster, group)
    member = Member(port, group)
    member.stable()
    for v in versions(DESCRIBE):
        r = member.w.call(
            DESCRIBE, v, groups=(group, "admin-unknown", ""), include_authorized_operations=True
        )
        stable, unknown, empty = r.groups
        assert stable.error_code == ErrorCode.none
        assert stable.group_state == "Stable"
        assert (stable.protocol_type, stable.protocol_data) == ("consumer", "range")
        (m,) = stable.members
        assert m.member_id == member.member_id
        assert m.client_id == "wire"
        assert m.client_host == "/127.0.0.1"
        assert m.member_metadata == subscription("conf")
        assert m.member_assignment == b"mine"
        assert unknown.group_state in ("Dead", "")
        assert unknown.members == ()
        # as Kafka: the empty group id is described as any group nobody joined (Dead; from v6
        # GROUP_ID_NOT_FOUND)
        expected = ErrorCode.group_id_not_found if v >= 6 else ErrorCode.none
        assert (empty.error_code, empty.group_state) == (expected, "Dead")
        if v >= 3:
            assert stable.authorized_operations > 0
    for v in versions(LIST):
        listed: dict[str, Any] = {}
        for p in broker_ports(cluster):  # like an admin client: every broker lists its own groups
            with WireClient(p) as w:
                r = w.call(LIST, v, states_filter=(), types_filter=())
                assert r.error_code == ErrorCode.none
                listed |= {g.group_id: g for g in r.groups}
        assert listed[group].protocol_type == "consumer"
        if v >= 4:
            assert listed[group].group_state == "Stable"
            r = member.w.call(LIST, v, states_filter=("empty",), types_filter=())
            assert group not in {g.group_id for g in r.groups}
        if v >= 5:
            assert listed[group].group_type == "classic"
    for v in versions(DELETE):
        victim = f"delete-v{v}"
        with WireClient(coordinator(cluster, victim)[1]) as w:
            commit(w, 9, victim, {("conf", 0): 5})
            r = w.call(DELETE, v, groups_names=(victim, "delete-never", ""))
            results = {x.group_id: x.error_code for x in r.results}
            assert results[victim] == ErrorCode.none
            assert results[""] in (ErrorCode.group_id_not_found, ErrorCode.not_coordinator)
            assert results["delete-never"] in (
                ErrorCode.group_id_not_found,
                ErrorCode.not_coordinator,
            )
            assert fetched_offsets(fetch(w, 9, victim, {"conf": [0]})) == {("conf", 0): (-1, "")}
        r = member.w.call(DELETE, v, groups_names=(group,))
        assert r.results[0].error_code == ErrorCode.non_empty_group
    member.close()


def test_offset_delete(cluster: LocalCluster) -> None:
    group = "offset-delete"
    member = Member(coordinator(cluster, group)[1], group)
    member.stable()
    b = builder(OFFSET_DELETE, 0)
    w = member.w
    assert commit(
        w,
        9,
        group,
        {("conf", 0): 3, ("six", 1): 4},
        member_id=member.member_id,
        generation_id_or_member_epoch=member.generation,
    ) == {
        ("conf", 0): ErrorCode.none,
        ("six", 1): ErrorCode.none,
    }
    r = w.call(
        OFFSET_DELETE,
        0,
        group_id=group,
        topics=tuple(
            b.OffsetDeleteRequestTopic(
                name=t, partitions=(b.OffsetDeleteRequestPartition(partition_index=p),)
            )
            for t, p in (("conf", 0), ("six", 1), ("nope", 0))
        ),
    )
    assert r.error_code == ErrorCode.none
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == {
        ("conf", 0): ErrorCode.group_subscribed_to_topic,  # the member subscribes to "conf"
        ("six", 1): ErrorCode.none,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert fetched_offsets(fetch(w, 9, group, {"conf": [0], "six": [1]})) == {
        ("conf", 0): (3, "m3"),
        ("six", 1): (-1, ""),
    }
    missing = w.call(OFFSET_DELETE, 0, group_id="offset-delete-none", topics=())
    assert missing.error_code in (ErrorCode.group_id_not_found, ErrorCode.not_coordinator)
    assert w.call(OFFSET_DELETE, 0, group_id="", topics=()).error_code == ErrorCode.invalid_group_id
    member.close()


# ---------------------------------------------------------------- semantics and bad input


def test_bad_input_gets_kafkas_errors(cluster: LocalCluster) -> None:
    group = "bad-input"
    _node, port = coordinator(cluster, group)
    member = Member(port, group)
    member.stable()
    w = member.w
    # stale generation
    assert member.heartbeat(generation_id=0).error_code == ErrorCode.illegal_generation
    assert member.sync(generation_id=0).error_code == ErrorCode.illegal_generation
    stale = commit(
        w, 9, group, {("conf", 0): 1}, member_id=member.member_id, generation_id_or_member_epoch=0
    )
    assert stale == {("conf", 0): ErrorCode.illegal_generation}
    # unknown member
    assert member.heartbeat(member_id="ghost").error_code == ErrorCode.unknown_member_id
    assert member.sync(member_id="ghost").error_code == ErrorCode.unknown_member_id
    ghost = Member(port, group)
    ghost.member_id = "ghost"
    assert ghost.join().error_code == ErrorCode.unknown_member_id
    unknown = commit(
        w,
        9,
        group,
        {("conf", 0): 1},
        member_id="ghost",
        generation_id_or_member_epoch=member.generation,
    )
    assert unknown == {("conf", 0): ErrorCode.unknown_member_id}
    # a commit from outside a group that has members
    assert commit(w, 9, group, {("conf", 0): 1}) == {("conf", 0): ErrorCode.unknown_member_id}
    # empty group id: refused by the membership APIs; as Kafka, offsets of the group "" may
    # be committed and fetched (pre-0.9 clients used it)
    empty = Member(port, "")
    assert empty.join().error_code == ErrorCode.invalid_group_id
    assert empty.sync().error_code == ErrorCode.invalid_group_id
    assert empty.heartbeat().error_code == ErrorCode.invalid_group_id
    assert w.call(LEAVE, 0, group_id="", member_id="m").error_code == ErrorCode.invalid_group_id
    with WireClient(coordinator(cluster, "")[1]) as ew:
        assert commit(ew, 9, "", {("conf", 0): 1, ("nope", 0): 1}) == {
            ("conf", 0): ErrorCode.none,
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
        }
        assert fetched_offsets(fetch(ew, 7, "", {"conf": [0]})) == {("conf", 0): (1, "m1")}
        assert fetch(ew, 8, "", {"conf": [0]}).groups[0].error_code == ErrorCode.none
    # session timeouts out of group.min/max.session.timeout.ms
    too_short = Member(port, group).join(session_timeout=10)
    assert too_short.error_code == ErrorCode.invalid_session_timeout
    # a protocol the group does not share
    other = Member(port, group)
    b = builder(JOIN, 9)
    r = other.join(protocols=(b.JoinGroupRequestProtocol(name="sticky", metadata=b""),))
    assert r.error_code == ErrorCode.inconsistent_group_protocol
    # metadata over offset.metadata.max.bytes
    big = commit(
        w,
        9,
        group,
        {("conf", 0): 1},
        member_id=member.member_id,
        generation_id_or_member_epoch=member.generation,
        metadata="x" * 4097,
    )
    assert big == {("conf", 0): ErrorCode.offset_metadata_too_large}
    # another broker is not the coordinator
    other_port = next(p for p in broker_ports(cluster) if p != port)
    with WireClient(other_port) as o:
        r = o.call(
            HEARTBEAT,
            4,
            group_id=group,
            generation_id=1,
            member_id=member.member_id,
            group_instance_id=None,
        )
        assert r.error_code == ErrorCode.not_coordinator
        assert commit(o, 9, group, {("conf", 0): 1}) == {("conf", 0): ErrorCode.not_coordinator}
        r = o.call(DELETE, 2, groups_names=(group,))
        assert r.results[0].error_code == ErrorCode.not_coordinator
    for m in (member, ghost, empty, other):
        m.close()


def test_static_member_restart_without_rebalance(cluster: LocalCluster) -> None:
    group = "static"
    port = coordinator(cluster, group)[1]
    first = Member(port, group, instance="host-1")
    first.stable()
    old_id, generation = first.member_id, first.generation
    first.close()
    restarted = Member(port, group, instance="host-1")
    r = restarted.join()
    assert r.error_code == ErrorCode.none
    assert r.generation_id == generation
    assert restarted.member_id != old_id
    assert restarted.sync().assignment == b"mine"  # the old assignment, no rebalance
    fenced = Member(port, group, instance="host-1")
    fenced.member_id, fenced.generation = old_id, generation
    assert fenced.heartbeat().error_code == ErrorCode.fenced_instance_id
    assert restarted.heartbeat().error_code == ErrorCode.none
    for m in (restarted, fenced):
        m.close()


def test_group_registry_in_the_meta_service(cluster: LocalCluster) -> None:
    group = "registered"
    with WireClient(coordinator(cluster, group)[1]) as w:
        commit(w, 9, group, {("conf", 0): 1})

        async def registry() -> dict[str, int]:
            async with cluster.meta_client() as meta:
                return dict(await meta.list_groups())

        expected = partition_for(group, OFFSETS_PARTITIONS)
        wait_for(lambda: asyncio.run(registry()).get(group) == expected, what="registration")
        assert w.call(DELETE, 2, groups_names=(group,)).results[0].error_code == ErrorCode.none
        wait_for(lambda: group not in asyncio.run(registry()), what="unregistration")


# ---------------------------------------------------------------- real clients


def consumer(cluster: LocalCluster, group: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
        }
        | conf
    )


def test_three_confluent_consumers_balance_six_partitions(cluster: LocalCluster) -> None:
    values = [b"m%d" % i for i in range(300)]
    consumers = [consumer(cluster, "balanced") for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe(["six"])
        assignments = wait_for(
            lambda: (
                [len(c.assignment()) for c in consumers]
                if [c.poll(0.05) for c in consumers] and all(c.assignment() for c in consumers)
                else None
            ),
            what="every consumer to own partitions",
        )
        assert assignments == [2, 2, 2]
        produce(cluster, "six", values)
        got = drain(consumers, len(values))
        # no rebalance while reading: each record is read once, by the owner of its partition
        assert sorted(v for part in got for v in part) == sorted(values)
        for c in consumers:
            c.commit(asynchronous=False)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        d = admin.describe_consumer_groups(["balanced"])["balanced"].result(30)
        assert len(d.members) == 3
        assert d.partition_assignor == "range"
        committed = consumers[0].committed([TopicPartition("six", p) for p in range(6)], timeout=10)
        assert sum(tp.offset for tp in committed) == len(values)
    finally:
        for c in consumers:
            c.close()


def test_kafka_python_commits_and_reads_back(cluster: LocalCluster) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    c = KafkaConsumer(
        "conf",
        bootstrap_servers=cluster.bootstrap,
        group_id="kafka-python",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
    )
    try:
        produce(cluster, "conf", [b"kp%d" % i for i in range(10)])
        for seen, _ in enumerate(c, 1):
            if seen >= 10:
                break
        c.commit()
        positions = {tp.partition: c.position(tp) for tp in c.assignment()}
        assert {p: c.committed(KafkaTopicPartition("conf", p)) for p in positions} == positions
    finally:
        c.close()


def test_group_survives_kill_9_of_its_coordinator(cluster: LocalCluster) -> None:
    group = "failover"
    first = [b"a%d" % i for i in range(120)]
    second = [b"b%d" % i for i in range(120)]
    consumers = [consumer(cluster, group, **{"auto.offset.reset": "latest"}) for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe(["six"])
        wait_for(
            lambda: [c.poll(0.1) for c in consumers] and all(c.assignment() for c in consumers),
            what="the group to form",
        )
        for c in consumers:  # pin the start: position = end of log, committed
            c.commit(
                offsets=[
                    TopicPartition(tp.topic, tp.partition, c.get_watermark_offsets(tp)[1])
                    for tp in c.assignment()
                ],
                asynchronous=False,
            )
        produce(cluster, "six", first)
        got = drain(consumers, len(first))
        assert sorted(v for part in got for v in part) == sorted(first)
        for c in consumers:
            c.commit(asynchronous=False)
        node, _ = coordinator(cluster, group)
        cluster.kill(f"broker-{node}")
        produce(cluster, "six", second)
        got = drain(consumers, len(second), timeout=90)
        # the committed offsets survived: nothing of the first batch comes again (records of
        # the second may, if the group rebalanced before they were committed)
        assert {v for part in got for v in part} == set(second)
        new_node, port = coordinator(cluster, group)
        assert new_node != node
        with WireClient(port) as w:
            offsets = fetched_offsets(fetch(w, 9, group, {"six": list(range(6))}))
        for c in consumers:
            c.commit(asynchronous=False)
        with WireClient(port) as w:
            after = fetched_offsets(fetch(w, 9, group, {"six": list(range(6))}))
        moved = sum(after[("six", p)][0] - offsets[("six", p)][0] for p in range(6))
        assert moved == len(second)
    finally:
        for c in consumers:
            c.close()
