"""Share group membership and administration (KIP-932) on real brokers: GROUP config resources
through confluent-kafka's and Java 4.3.0's admin clients, ShareGroupHeartbeat (76) and
ShareGroupDescribe (77) as raw requests (join, the simple assignor sharing one partition among
four members, leave, session expiry), share groups in ListGroups / DescribeGroups /
ConsumerGroupDescribe, the offsets APIs (90-92) and DeleteGroups, and `rafka groups describe`.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from tests.integration import groups
from tests.integration.clients.drivers import run_driver
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.groups import produce
from tests.integration.kafka_wire import WireClient, builder

LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS = 16, 15, 42
CONSUMER_HEARTBEAT, CONSUMER_DESCRIBE = 68, 69
HEARTBEAT, DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 76, 77, 90, 91, 92
SESSION_TIMEOUT_MS = 6000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("share-groups"),
        brokers=3,
        metas=1,
        offsets_topic_num_partitions=6,
        group_share_session_timeout_ms=SESSION_TIMEOUT_MS,
        group_share_min_session_timeout_ms=1000,
        group_share_heartbeat_interval_ms=1000,
        group_share_min_heartbeat_interval_ms=500,
    ) as c:
        yield c


def new_topic(cluster: LocalCluster, partitions: int = 1) -> str:
    name = f"share-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    return name


def coordinator(cluster: LocalCluster, group: str) -> int:
    """The port of the group's coordinator, once it serves the group."""

    def probe(w: WireClient, group: str) -> int:
        d = w.call(DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False)
        return d.groups[0].error_code

    return groups.coordinator(cluster, group, probe)[1]


def heartbeat(w: WireClient, group: str, member: str, epoch: int, topics: Any = None) -> Any:
    return w.call(
        HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=topics,
    )


def describe(w: WireClient, group: str) -> Any:
    (g,) = w.call(DESCRIBE, 1, group_ids=(group,), include_authorized_operations=True).groups
    return g


def offsets(w: WireClient, group: str, version: int = 1) -> Any:
    b = builder(DESCRIBE_OFFSETS, version)
    request = b.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
    (g,) = w.call(DESCRIBE_OFFSETS, version, groups=(request,)).groups
    return g


# ---------------------------------------------------------------- GROUP config resources


def test_group_configs_through_confluent_and_java_admins(cluster: LocalCluster) -> None:
    group = f"cfg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.record.lock.duration.ms",
                "20000",
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, group)])
    configs = next(iter(described.values())).result(30)
    assert configs["share.record.lock.duration.ms"].value == "20000"
    assert configs["share.auto.offset.reset"].value == "earliest"
    assert configs["share.isolation.level"].value == "read_uncommitted"  # the default
    assert configs["share.isolation.level"].is_default

    # Kafka's GroupConfig checks: INVALID_CONFIG
    bad = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.record.lock.duration.ms", "100", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    with pytest.raises(Exception, match=r"INVALID_CONFIG|[Ii]nvalid"):
        admin.incremental_alter_configs([bad])[bad].result(30)

    # the Java admin sees what confluent-kafka set, and changes it
    res = run_driver(
        "java-4.3.0", "admin", "alter-configs", "--group", group,
        "--set", "share.delivery.count.limit=3", "--bootstrap", cluster.bootstrap,
    )  # fmt: skip
    assert res.returncode == 0, res
    assert res.lines[0]["error"] is None, res
    res = run_driver(
        "java-4.3.0", "admin", "describe-configs", "--group", group,
        "--bootstrap", cluster.bootstrap,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    java = res.lines[0]["configs"]
    assert java["share.delivery.count.limit"]["value"] == "3"
    assert java["share.delivery.count.limit"]["source"] == "DYNAMIC_GROUP_CONFIG"
    assert java["share.record.lock.duration.ms"]["value"] == "20000"
    res = run_driver(
        "java-4.3.0", "admin", "alter-configs", "--group", group,
        "--set", "no.such.config=1", "--bootstrap", cluster.bootstrap,
    )  # fmt: skip
    assert res.lines[0]["error"] == "INVALID_CONFIG", res


# ---------------------------------------------------------------- membership


def test_four_members_share_one_partition_then_leave_and_expire(cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    group = f"members-{uuid.uuid4().hex[:6]}"
    members = [uuid.uuid4().hex for _ in range(4)]
    for port in groups.broker_ports(cluster):  # any broker: FindCoordinator first
        with WireClient(port) as w:
            r = heartbeat(w, group, members[0], 0, (topic,))
        if r.error_code != ErrorCode.not_coordinator:
            break
    port = coordinator(cluster, group)
    with WireClient(port) as w:
        joined = {m: heartbeat(w, group, m, 0, (topic,)) for m in members}
        assert all(r.error_code == ErrorCode.none for r in joined.values()), joined
        assert joined[members[0]].heartbeat_interval.total_seconds() == 1.0
        # each member's next heartbeat brings it to the group's latest assignment
        epochs = {m: heartbeat(w, group, m, joined[m].member_epoch).member_epoch for m in members}
        d = describe(w, group)
        assert d.error_code == ErrorCode.none
        assert d.group_state == "Stable"
        assert d.assignor_name == "simple"
        assert len(d.members) == 4
        for m in d.members:
            assert m.member_epoch == d.group_epoch == epochs[m.member_id]
            ((tp),) = m.assignment.topic_partitions
            assert (tp.topic_name, tuple(tp.partitions)) == (topic, (0,))
        assert d.authorized_operations > 0

        # the group id is a share group's: other group APIs answer as Kafka does
        (listed,) = [
            g
            for g in w.call(LIST_GROUPS, 5, states_filter=(), types_filter=("share",)).groups
            if g.group_id == group
        ]
        assert (listed.group_type, listed.protocol_type, listed.group_state) == (
            "share",
            "share",
            "Stable",
        )
        consumers = w.call(LIST_GROUPS, 5, states_filter=(), types_filter=("consumer",)).groups
        assert group not in {g.group_id for g in consumers}
        (classic,) = w.call(
            DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False
        ).groups
        assert classic.group_state == "Dead"
        (cg,) = w.call(
            CONSUMER_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False
        ).groups
        assert cg.error_code == ErrorCode.group_id_not_found
        r = w.call(
            CONSUMER_HEARTBEAT, 1, group_id=group, member_id=uuid.uuid4().hex, member_epoch=0,
            instance_id=None, rack_id=None, rebalance_timeout=30000,
            subscribed_topic_names=(topic,), subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=(),
        )  # fmt: skip
        assert r.error_code == ErrorCode.group_id_not_found
        assert heartbeat(w, group, "", 0, (topic,)).error_code == ErrorCode.invalid_request
        stale = heartbeat(w, group, members[0], 99)
        assert stale.error_code == ErrorCode.fenced_member_epoch

        # one leaves (epoch -1); the others stop heartbeating and their sessions expire
        left = heartbeat(w, group, members[0], -1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        assert len(describe(w, group).members) == 3

        def expired() -> bool:
            return describe(w, group).group_state == "Empty"

        wait_for(expired, timeout=SESSION_TIMEOUT_MS / 1000 + 15, what="the sessions' expiry")
        gone = heartbeat(w, group, members[1], epochs[members[1]])
        assert gone.error_code == ErrorCode.unknown_member_id


# ---------------------------------------------------------------- offsets and deletion


def test_offsets_apis_and_delete_group(cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    produce(cluster, topic, [str(i).encode() for i in range(10)])
    group = f"offsets-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    setting = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([setting])[setting].result(30)
    member = uuid.uuid4().hex
    port = None
    for candidate in groups.broker_ports(cluster):
        with WireClient(candidate) as w:
            if heartbeat(w, group, member, 0, (topic,)).error_code == ErrorCode.none:
                port = candidate
                break
    port = port or coordinator(cluster, group)
    alter_b = builder(ALTER_OFFSETS, 0)
    alter_request = (
        alter_b.AlterShareGroupOffsetsRequestTopic(
            topic_name=topic,
            partitions=(
                alter_b.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=4),
            ),
        ),
    )
    with WireClient(port) as w:
        if not describe(w, group).members:
            assert heartbeat(w, group, member, 0, (topic,)).error_code == ErrorCode.none
        r = w.call(ALTER_OFFSETS, 0, group_id=group, topics=alter_request)
        assert r.error_code == ErrorCode.non_empty_group
        assert heartbeat(w, group, member, -1).error_code == ErrorCode.none

        r = w.call(ALTER_OFFSETS, 0, group_id=group, topics=alter_request)
        assert r.error_code == ErrorCode.none, r
        ((t,),) = [r.responses]
        assert t.partitions[0].error_code == ErrorCode.none

        def described() -> Any:
            g = offsets(w, group)
            return g if g.topics and g.topics[0].partitions[0].lag == 6 else None

        g = wait_for(described, what="the start offset and lag of the share-partition")
        (p,) = g.topics[0].partitions
        assert (p.partition_index, p.start_offset, p.lag) == (0, 4, 6)
        v0 = offsets(w, group, version=0)
        assert v0.topics[0].partitions[0].start_offset == 4

        # the CLI shows the share group with its start offset and lag
        cli = subprocess.run(
            [sys.executable, "-m", "cluster.cli", "groups", "describe", group,
             "-b", cluster.bootstrap],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        assert f"group {group} (share): Empty" in cli.stdout
        assert topic in cli.stdout
        assert " 4 " in cli.stdout
        assert " 6 " in cli.stdout

        delete_b = builder(DELETE_OFFSETS, 0)
        r = w.call(
            DELETE_OFFSETS,
            0,
            group_id=group,
            topics=(delete_b.DeleteShareGroupOffsetsRequestTopic(topic_name=topic),),
        )
        assert r.error_code == ErrorCode.none
        assert r.responses[0].error_code == ErrorCode.none
        assert offsets(w, group).topics == ()

        (deleted,) = w.call(DELETE_GROUPS, 2, groups_names=(group,)).results
        assert deleted.error_code == ErrorCode.none
        assert describe(w, group).error_code == ErrorCode.group_id_not_found

    # the group's configs went with it
    def configs_gone() -> bool:
        found = admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, group)])
        entries = next(iter(found.values())).result(30)
        return entries["share.auto.offset.reset"].value == "latest"

    wait_for(configs_gone, what="the deleted group's configs to go")
