"""KIP-848 consumer groups (the consumer group protocol) on real brokers: every version of
ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) decoded with kio, Kafka's errors for
bad input, three confluent-kafka consumers with group.protocol=consumer sharing a 6-partition
topic and handing partitions over, commits with member epochs that survive kill -9 of the
coordinator's broker, and a Java 4.3.0 consumer in the same kind of group."""

from __future__ import annotations

import itertools
import uuid
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
from tests.integration.kafka_wire import WireClient, builder, topic_metadata

COMMIT, FETCH, FIND, JOIN, API_VERSIONS, LIST = 8, 9, 10, 11, 18, 16
HEARTBEAT, DESCRIBE = 68, 69
PARTITIONS = 6
OFFSETS_PARTITIONS = 10
HEARTBEAT_INTERVAL_MS = 1000  # group.consumer.heartbeat.interval.ms of the test cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("kip848"),
        brokers=3,
        metas=1,
        group_initial_rebalance_delay_ms=0,
        offsets_topic_num_partitions=OFFSETS_PARTITIONS,
        group_consumer_heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        group_consumer_session_timeout_ms=15_000,
    ) as c:
        yield c


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: LocalCluster) -> Iterator[None]:
    yield
    cluster.start()  # starts again whatever a test stopped


def new_topic(cluster: LocalCluster, prefix: str, partitions: int = PARTITIONS) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    return name


def coordinator(cluster: LocalCluster, group: str) -> tuple[int, int]:
    """(node id, port) of the group's coordinator, once it serves the group."""

    def probe(w: WireClient, group: str) -> int:
        d = w.call(DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False)
        return d.groups[0].error_code

    return groups.coordinator(cluster, group, probe)


def same_coordinator(group: str, prefix: str) -> str:
    """A group id of the same `__consumer_offsets` partition as `group`."""
    want = partition_for(group, OFFSETS_PARTITIONS)
    return next(
        f"{prefix}-{i}"
        for i in itertools.count()
        if partition_for(f"{prefix}-{i}", OFFSETS_PARTITIONS) == want
    )


def topic_id(w: WireClient, topic: str) -> uuid.UUID:
    t = topic_metadata(w, topic)
    assert t.error_code == ErrorCode.none
    return t.topic_id


class WireMember:
    """A consumer group member speaking ConsumerGroupHeartbeat to the coordinator."""

    def __init__(
        self, w: WireClient, group: str, member_id: str | None = None, version: int = 1
    ) -> None:
        self.w = w
        self.group = group
        self.member_id = str(uuid.uuid4()) if member_id is None else member_id
        self.version = version
        self.epoch = 0
        self.owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] = ()  # (topic id, partitions)

    def heartbeat(self, **kw: Any) -> Any:
        b = builder(HEARTBEAT, self.version)
        fields: dict[str, Any] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": -1,
            "subscribed_topic_names": None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": tuple(
                b.TopicPartitions(topic_id=t, partitions=ps) for t, ps in self.owned
            ),
        } | kw
        return self.w.call(HEARTBEAT, self.version, **fields)

    def join(self, topics: tuple[str, ...], **kw: Any) -> Any:
        r = self.heartbeat(
            member_epoch=0,
            rebalance_timeout=30_000,
            subscribed_topic_names=topics,
            topic_partitions=(),
            **kw,
        )
        self.take(r)
        return r

    def take(self, r: Any) -> None:
        if r.error_code == ErrorCode.none:
            self.member_id = r.member_id
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = tuple(
                    (tp.topic_id, tuple(tp.partitions)) for tp in r.assignment.topic_partitions
                )


def describe(w: WireClient, *groups: str, version: int = 1) -> Any:
    return w.call(DESCRIBE, version, group_ids=groups, include_authorized_operations=True)


# ---------------------------------------------------------------- every version, raw


def test_api_versions_advertise_both_apis(cluster: LocalCluster) -> None:
    with WireClient(broker_ports(cluster)[0]) as w:
        r = w.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    got = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert got[HEARTBEAT] == SUPPORTED_VERSIONS[HEARTBEAT] == (0, 1)
    assert got[DESCRIBE] == SUPPORTED_VERSIONS[DESCRIBE] == (0, 1)


def test_every_version_of_heartbeat_and_describe(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "wire", 4)
    for version in (0, 1):
        group = f"wire-v{version}-{uuid.uuid4().hex[:6]}"
        _node, port = coordinator(cluster, group)
        with WireClient(port) as w:
            tid = topic_id(w, topic)
            # v0: the coordinator generates the member id; v1 (KIP-1082): the client does
            a = WireMember(w, group, "" if version == 0 else None, version)
            r = a.join((topic,))
            assert r.error_code == ErrorCode.none, r
            assert r.error_message is None, r
            # Kafka 4.4: a new group is at epoch 1, the first join bumps it to 2
            assert r.member_id
            assert r.member_epoch == 2
            assert r.heartbeat_interval.total_seconds() * 1000 == HEARTBEAT_INTERVAL_MS
            assert [
                (tp.topic_id, sorted(tp.partitions)) for tp in r.assignment.topic_partitions
            ] == [(tid, [0, 1, 2, 3])]
            # a steady heartbeat: same epoch, no assignment sent
            r = a.heartbeat()
            assert (r.error_code, r.member_epoch, r.assignment) == (ErrorCode.none, 2, None)
            # a second member: the first gives up half, then the second gets it
            b = WireMember(w, group, "" if version == 0 else None, version)
            b.join((topic,))
            assert b.epoch == 3
            assert not b.owned  # its partitions are still a's
            a.take(a.heartbeat())
            assert len(a.owned[0][1]) == 2
            assert a.epoch == 2  # revoke first, at the old epoch
            for _ in range(3):
                a.take(a.heartbeat())
                b.take(b.heartbeat())
            assert sorted(a.owned[0][1] + b.owned[0][1]) == [0, 1, 2, 3]
            assert not set(a.owned[0][1]) & set(b.owned[0][1])

            for dv in (0, 1):
                d = describe(w, group, same_coordinator(group, "missing"), "", version=dv)
                g, missing, empty = d.groups
                assert g.error_code == ErrorCode.none
                assert g.group_state == "Stable"
                assert (g.group_epoch, g.assignment_epoch) == (3, 3)
                assert g.assignor_name == "uniform"
                assert g.authorized_operations > 0
                members = {m.member_id: m for m in g.members}
                assert set(members) == {a.member_id, b.member_id}
                for m, wm in ((members[a.member_id], a), (members[b.member_id], b)):
                    assert m.member_epoch == 3
                    assert m.client_id == "wire"
                    assert m.client_host == "/127.0.0.1"
                    assert m.subscribed_topic_names == (topic,)
                    (tp,) = m.assignment.topic_partitions
                    assert (tp.topic_id, tp.topic_name) == (tid, topic)
                    assert sorted(tp.partitions) == sorted(wm.owned[0][1])
                    assert m.target_assignment == m.assignment
                    if dv >= 1:
                        assert m.member_type == 1
                assert missing.error_code == ErrorCode.group_id_not_found
                assert empty.error_code == ErrorCode.invalid_group_id

            # ListGroups: a group of type and protocol type "consumer"
            for lv in range(SUPPORTED_VERSIONS[LIST][1] + 1):
                listed = {
                    g.group_id: g
                    for g in w.call(LIST, lv, states_filter=(), types_filter=()).groups
                }
                assert listed[group].protocol_type == "consumer", lv
                if lv >= 4:
                    assert listed[group].group_state == "Stable"
                if lv >= 5:
                    assert listed[group].group_type == "consumer"
            r = w.call(LIST, 5, states_filter=(), types_filter=("classic",))
            assert group not in {g.group_id for g in r.groups}

            # leaving: epoch -1 back, the other member gets everything
            r = a.heartbeat(member_epoch=-1)
            assert (r.error_code, r.member_id, r.member_epoch) == (
                ErrorCode.none,
                a.member_id,
                -1,
            )
            for _ in range(2):
                b.take(b.heartbeat())
            assert sorted(b.owned[0][1]) == [0, 1, 2, 3]
            assert describe(w, group).groups[0].group_epoch == 4
        # another broker is not the coordinator
        other = next(p for p in broker_ports(cluster) if p != port)
        with WireClient(other) as o:
            r = WireMember(o, group).join((topic,))
            assert r.error_code == ErrorCode.not_coordinator
            assert describe(o, group).groups[0].error_code == ErrorCode.not_coordinator


def test_bad_input_gets_kafkas_errors(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "bad", 2)
    group = f"bad-{uuid.uuid4().hex[:6]}"
    _node, port = coordinator(cluster, group)
    with WireClient(port) as w:
        a = WireMember(w, group)
        assert a.join((topic,)).error_code == ErrorCode.none
        # a wrong member epoch
        r = a.heartbeat(member_epoch=a.epoch + 5)
        assert r.error_code == ErrorCode.fenced_member_epoch
        assert r.error_message
        assert (r.member_id, r.member_epoch) == (None, 0)
        # an unknown member
        r = WireMember(w, group).heartbeat(member_epoch=1)
        assert r.error_code == ErrorCode.unknown_member_id
        # a first heartbeat without the fields a join needs
        for missing, message in (
            ({"rebalance_timeout": -1}, "RebalanceTimeoutMs must be provided in first request."),
            ({"topic_partitions": None}, "TopicPartitions must be empty when (re-)joining."),
            (
                {"subscribed_topic_names": None},
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining.",
            ),
        ):
            fields = {
                "member_epoch": 0,
                "rebalance_timeout": 30_000,
                "subscribed_topic_names": (topic,),
                "topic_partitions": (),
            } | missing
            r = WireMember(w, group).heartbeat(**fields)
            assert (r.error_code, r.error_message) == (ErrorCode.invalid_request, message)
        r = WireMember(w, group, member_id="").heartbeat(
            member_id="", member_epoch=0, rebalance_timeout=1, subscribed_topic_names=(topic,)
        )
        assert (r.error_code, r.error_message) == (
            ErrorCode.invalid_request,
            "MemberId can't be empty.",
        )
        r = WireMember(w, "").join((topic,))
        assert (r.error_code, r.error_message) == (
            ErrorCode.invalid_request,
            "GroupId can't be empty.",
        )
        r = WireMember(w, group).join((topic,), server_assignor="sticky")
        assert r.error_code == ErrorCode.unsupported_assignor
        assert a.heartbeat().error_code == ErrorCode.none  # the group is unharmed

        # OffsetCommit/OffsetFetch of a consumer group check member epochs
        b = builder(COMMIT, 9)
        part = b.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=""
        )
        topics = (b.OffsetCommitRequestTopic(name=topic, partitions=(part,)),)

        def commit(version: int = 9, **kw: Any) -> ErrorCode:
            fields = {
                "group_id": group,
                "generation_id_or_member_epoch": a.epoch,
                "member_id": a.member_id,
                "group_instance_id": None,
                "retention_time": -1,
                "topics": topics,
            } | kw
            return w.call(COMMIT, version, **fields).topics[0].partitions[0].error_code

        assert commit() == ErrorCode.none
        assert commit(generation_id_or_member_epoch=a.epoch - 1) == ErrorCode.stale_member_epoch
        assert commit(member_id="ghost") == ErrorCode.unknown_member_id
        assert commit(8) == ErrorCode.unsupported_version
        fb = builder(FETCH, 9)

        def fetch(member_epoch: int) -> Any:
            req = fb.OffsetFetchRequestGroup(
                group_id=group,
                member_id=a.member_id,
                member_epoch=member_epoch,
                topics=(fb.OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),),
            )
            return w.call(FETCH, 9, groups=(req,), require_stable=True).groups[0]

        ok = fetch(a.epoch)
        assert ok.error_code == ErrorCode.none
        assert ok.topics[0].partitions[0].committed_offset == 1
        assert fetch(a.epoch + 1).error_code == ErrorCode.stale_member_epoch

        # a classic group is not a consumer group (and the other way round)
        classic = f"classic-{uuid.uuid4().hex[:6]}"
        cport = coordinator(cluster, classic)[1]
        with WireClient(cport) as cw:
            jb = builder(JOIN, 9)
            fields = {
                "group_id": classic,
                "session_timeout": 10_000,
                "rebalance_timeout": 10_000,
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": (jb.JoinGroupRequestProtocol(name="range", metadata=b""),),
                "reason": None,
            }
            first = cw.call(JOIN, 9, **fields)
            assert first.error_code == ErrorCode.member_id_required
            joined = cw.call(JOIN, 9, **(fields | {"member_id": first.member_id}))
            assert joined.error_code == ErrorCode.none
            r = WireMember(cw, classic).join((topic,))
            # Kafka would upgrade the live group online; Rafka answers as Kafka does with
            # group.consumer.migration.policy=disabled
            assert (r.error_code, r.error_message) == (
                ErrorCode.group_id_not_found,
                f"Cannot upgrade classic group {classic} to consumer group because online "
                "upgrade is disabled.",
            )
            d = describe(cw, classic).groups[0]
            assert d.error_code == ErrorCode.group_id_not_found
        r = w.call(JOIN, 9, **(fields | {"group_id": group, "member_id": ""}))
        assert r.error_code == ErrorCode.inconsistent_group_protocol


# ---------------------------------------------------------------- real clients


def consumer(cluster: LocalCluster, group: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        | conf
    )


def poll_all(consumers: list[Consumer]) -> None:
    """Serve each consumer's callbacks (rebalances) once."""
    for c in consumers:
        c.poll(0.05)


def assignments(consumers: list[Consumer]) -> list[set[int]]:
    return [{tp.partition for tp in c.assignment()} for c in consumers]


def balanced(consumers: list[Consumer], partitions: int = PARTITIONS) -> list[set[int]] | None:
    """Every consumer's partitions once they are disjoint, complete and even."""
    poll_all(consumers)
    got = assignments(consumers)
    union = set().union(*got)
    if sum(map(len, got)) != partitions or union != set(range(partitions)):
        return None
    if max(map(len, got)) - min(map(len, got)) > 1:
        return None
    return got


def test_three_confluent_consumers_share_and_hand_over(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "share")
    group = f"share-{uuid.uuid4().hex[:6]}"
    values = [b"m%d" % i for i in range(300)]
    consumers = [consumer(cluster, group) for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe([topic])
        split = wait_for(lambda: balanced(consumers), what="2 partitions each")
        assert sorted(map(len, split)) == [2, 2, 2]
        produce(cluster, topic, values)
        got = drain(consumers, len(values))
        assert sorted(v for part in got for v in part) == sorted(values)
        for c in consumers:
            c.commit(asynchronous=False)  # OffsetCommit v9 with the member epoch

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        d = admin.describe_consumer_groups([group])[group].result(30)
        assert len(d.members) == 3
        assert str(d.state).endswith("STABLE")
        assert str(getattr(d, "type", "CONSUMER")).endswith("CONSUMER")
        by_member = {
            m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members
        }
        assert sorted(map(sorted, by_member.values())) == sorted(map(sorted, split))
        _node, port = coordinator(cluster, group)
        with WireClient(port) as w:
            g = describe(w, group).groups[0]
            assert g.group_state == "Stable"
            assert len(g.members) == 3
            assert {m.member_epoch for m in g.members} == {g.assignment_epoch}
            assert g.assignment_epoch == g.group_epoch
            assert {m.member_id for m in g.members} == {c.memberid() for c in consumers}

        # one leaves: its partitions move to the two others, nobody owns one twice
        leaving = consumers.pop(0)
        leaving.close()
        split = wait_for(lambda: balanced(consumers), what="3 partitions each")
        assert sorted(map(len, split)) == [3, 3]
        committed = consumers[0].committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10
        )
        assert sum(tp.offset for tp in committed) == len(values)
        more = [b"n%d" % i for i in range(60)]
        produce(cluster, topic, more)
        got = drain(consumers, len(more))
        assert sorted(v for part in got for v in part) == sorted(more)
    finally:
        for c in consumers:
            c.close()


def test_member_epoch_commits_survive_kill_9_of_the_coordinator(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "failover")
    group = f"failover-{uuid.uuid4().hex[:6]}"
    first = [b"a%d" % i for i in range(120)]
    second = [b"b%d" % i for i in range(120)]
    consumers = [consumer(cluster, group) for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe([topic])
        wait_for(lambda: balanced(consumers), what="3 partitions each")
        produce(cluster, topic, first)
        got = drain(consumers, len(first))
        assert sorted(v for part in got for v in part) == sorted(first)
        for c in consumers:
            c.commit(asynchronous=False)
        node, port = coordinator(cluster, group)
        with WireClient(port) as w:  # the group's records and offsets are on 3 replicas
            t = topic_metadata(w, "__consumer_offsets")
            index = partition_for(group, OFFSETS_PARTITIONS)
            (p,) = [p for p in t.partitions if p.partition_index == index]
            assert len(p.replica_nodes) == 3
            assert p.leader_id == node
        cluster.kill(f"broker-{node}")
        produce(cluster, topic, second)
        got = drain(consumers, len(second), timeout=90)
        # the committed offsets survived: nothing of the first batch comes again (records of
        # the second may, if the group rebalanced before they were committed)
        assert {v for part in got for v in part} == set(second)
        new_node, port = coordinator(cluster, group)
        assert new_node != node
        for c in consumers:
            c.commit(asynchronous=False)
        with WireClient(port) as w:
            g = describe(w, group).groups[0]  # rebuilt from __consumer_offsets
            assert g.error_code == ErrorCode.none
            assert len(g.members) == 2
            fb = builder(FETCH, 9)
            req = fb.OffsetFetchRequestGroup(
                group_id=group,
                member_id=None,
                member_epoch=-1,
                topics=(
                    fb.OffsetFetchRequestTopics(
                        name=topic, partition_indexes=tuple(range(PARTITIONS))
                    ),
                ),
            )
            r = w.call(FETCH, 9, groups=(req,), require_stable=True)
            offsets = [p.committed_offset for p in r.groups[0].topics[0].partitions]
        assert sum(offsets) == len(first) + len(second)
    finally:
        for c in consumers:
            c.close()


def test_java_consumer_joins_a_consumer_group(cluster: LocalCluster) -> None:
    from tests.integration.clients.drivers import ensure_setup
    from tests.integration.clients.group_member import Member

    ensure_setup()
    topic = new_topic(cluster, "java")
    group = f"java-{uuid.uuid4().hex[:6]}"
    produce(cluster, topic, [b"j%d" % i for i in range(60)])
    java = Member(
        "java-4.3.0",
        cluster.bootstrap,
        topic,
        group,
        "--protocol",
        "consumer",
        "--commit",
        "sync",
    )
    confluent = consumer(cluster, group)
    try:
        java.wait_for(
            lambda evs: len({r["offset"] for r in evs if r["event"] == "record"}) > 0,
            60,
            "records",
        )
        assert java.owned() == set(range(PARTITIONS))
        confluent.subscribe([topic])

        def shared() -> tuple[set[int], set[int]] | None:
            confluent.poll(0.05)
            mine, theirs = {tp.partition for tp in confluent.assignment()}, java.owned()
            if mine and theirs and not mine & theirs and mine | theirs == set(range(PARTITIONS)):
                return mine, theirs
            return None

        wait_for(shared, 60, "the Java and librdkafka members to share")
        _node, port = coordinator(cluster, group)
        with WireClient(port) as w:
            g = describe(w, group).groups[0]
        assert len(g.members) == 2
        assert g.group_state in ("Stable", "Reconciling")
        clients = {m.client_id for m in g.members}
        assert len(clients) == 2
        java_member = next(m for m in g.members if m.member_id != confluent.memberid())
        assert java_member.member_epoch > 0
        assert java.stop() == 0
        wait_for(
            lambda: (
                (confluent.poll(0.05) or True)
                and {tp.partition for tp in confluent.assignment()} == set(range(PARTITIONS))
            ),
            30,
            "the Java member's partitions to move",
        )
        assert not java.of("error"), java.describe()
    finally:
        confluent.close()
        java.close()
