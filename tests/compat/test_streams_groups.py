"""Streams groups (KIP-1071): StreamsGroupHeartbeat, StreamsGroupDescribe and
StreamsGroupTopologyDescriptionUpdate sent to Apache Kafka 4.4 and to Rafka, answers compared.

A member joins a fresh group (one per case, same ids on both sides) with a one-subtopology
topology whose changelog does not exist yet: the answer carries its epoch, no tasks and the
statuses (assignment delayed by the initial rebalance delay, internal topics missing), and the
describe right after shows the group NotReady with the member. Then the errors a heartbeat can
get (unknown member, fenced epoch, unknown group, a group of another type, invalid requests,
invalid topologies) and the leave, at both versions.
"""

from __future__ import annotations

import datetime
import itertools
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from cluster.kafka_client import builder
from cluster.polling import wait_for
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, Side
from tests.compat.streams_requests import HEARTBEAT, SOURCE, heartbeat, topology

DESCRIBE, TOPOLOGY_UPDATE, CONSUMER_HEARTBEAT, FIND_COORDINATOR = 89, 93, 68, 10
LIST_GROUPS, DESCRIBE_GROUPS = 16, 15
_ids = itertools.count()


@pytest.fixture(scope="module", autouse=True)
def topics(pair: Pair) -> None:
    """The source topic, and each side's group coordinator loaded (FindCoordinator answers)."""
    create_topics(pair, NewTopic(SOURCE, 2, 1))
    for side in pair.sides:

        def loaded(side: Side = side) -> bool:
            return (
                side.conn()
                .call(FIND_COORDINATOR, 6, key_type=0, coordinator_keys=("g",))
                .coordinators[0]
                .error_code
                == ErrorCode.none
            )

        wait_for(
            loaded,
            60,
            f"the group coordinator of {side.name}",
        )


def _group(pair: Pair, name: str) -> str:
    """A fresh group id whose coordinator is loaded on both sides (`__consumer_offsets`
    partitions load one by one: a describe of the id no longer answers "not yet")."""
    group = f"compat-sg-{name}-{next(_ids)}"
    not_yet = {ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress}
    for side in pair.sides:

        def answers(side: Side = side) -> bool:
            return (
                side.conn()
                .call(DESCRIBE, 0, group_ids=(group,), include_authorized_operations=False)
                .groups[0]
                .error_code
                not in not_yet
            )

        wait_for(
            answers,
            60,
            f"the coordinator of {group} on {side.name}",
        )
    return group


def _join(pair: Pair, case: str, group: str, version: int) -> None:
    pair.call(case, HEARTBEAT, version, **heartbeat(group, "member-1", 0, version))


@pytest.mark.parametrize("version", [0, 1])
def test_join_describe_and_leave(pair: Pair, version: int) -> None:
    group = _group(pair, "join")
    _join(pair, f"StreamsGroupHeartbeat v{version}: join with a topology", group, version)
    for describe_version in (0, 1):
        pair.call(
            f"StreamsGroupDescribe v{describe_version} (heartbeat v{version}): a joined member",
            DESCRIBE,
            describe_version,
            group_ids=(group,),
            include_authorized_operations=False,
            include_topology_description=False,
        )
    pair.call(
        f"StreamsGroupHeartbeat v{version}: an unknown member",
        HEARTBEAT,
        version,
        **heartbeat(group, "nobody", 1, version),
    )
    pair.call(
        f"StreamsGroupHeartbeat v{version}: an epoch ahead of the member's (fenced)",
        HEARTBEAT,
        version,
        **heartbeat(group, "member-1", 7, version),
    )
    pair.call(
        f"StreamsGroupHeartbeat v{version}: leave (epoch -1)",
        HEARTBEAT,
        version,
        **heartbeat(group, "member-1", -1, version),
    )
    pair.call(
        f"StreamsGroupDescribe v{version}: the group its last member left",
        DESCRIBE,
        version,
        group_ids=(group,),
        include_authorized_operations=True,
        include_topology_description=True,
    )


@pytest.mark.parametrize(
    ("case", "epoch", "fields"),
    [
        ("a heartbeat to a group that does not exist", 1, {}),
        ("epoch 0 without a topology", 0, {"topology": None}),
        ("epoch 0 without a rebalance timeout", 0, {"rebalance_timeout_ms": -1}),
        ("an empty member id", 0, {"member_id": ""}),
        ("an epoch below -2", -3, {}),
        ("an empty instance id", 0, {"instance_id": ""}),
        ("a static member's temporary leave without an instance id", -2, {}),
        ("a topology with a changelog's partition count", 0, {"changelog_partitions": 4}),
        ("a topology reading an internal topic", 0, {"sources": ("__consumer_offsets",)}),
        ("a topology naming an invalid topic", 0, {"sources": ("bad topic!",)}),
        ("tasks reported when joining", 0, {"active_tasks": "one"}),
    ],
)
def test_heartbeat_errors(pair: Pair, case: str, epoch: int, fields: dict) -> None:
    version = 1
    group = _group(pair, "error")
    values = heartbeat(group, fields.pop("member_id", "member-1"), epoch, version)
    topology_changes = {
        k: fields.pop(k) for k in ("changelog_partitions", "sources") if k in fields
    }
    if topology_changes:
        values["topology"] = topology(version, group, **topology_changes)
    if fields.get("rebalance_timeout_ms") == -1:
        values["rebalance_timeout"] = datetime.timedelta(milliseconds=-1)
    if fields.get("active_tasks") == "one":
        b = builder(HEARTBEAT, version)
        fields["active_tasks"] = (b.TaskIds(subtopology_id="0", partitions=(0,)),)
    pair.call(f"StreamsGroupHeartbeat: {case}", HEARTBEAT, version, **(values | fields))


def test_a_consumer_group_is_not_a_streams_group(pair: Pair) -> None:
    group = _group(pair, "consumer")
    pair.send(
        CONSUMER_HEARTBEAT,
        1,
        group_id=group,
        member_id="consumer-1",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(minutes=5),
        subscribed_topic_names=(SOURCE,),
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )
    pair.call(
        "StreamsGroupHeartbeat: a join to a consumer group's id",
        HEARTBEAT,
        1,
        **heartbeat(group, "member-1", 0, 1),
    )
    pair.call(
        "StreamsGroupDescribe: a consumer group",
        DESCRIBE,
        1,
        group_ids=(group,),
        include_authorized_operations=False,
        include_topology_description=False,
    )


def test_list_and_describe_groups_show_a_streams_group(pair: Pair) -> None:
    group = _group(pair, "listed")
    _join(pair, "StreamsGroupHeartbeat: join (to list)", group, 1)

    def listed(side: Any) -> Any:
        answer = side.conn().call(
            LIST_GROUPS, 5, states_filter=("not_ready",), types_filter=("streams",)
        )
        return [g for g in answer.groups if g.group_id == group]

    kafka, rafka = pair.both(listed)
    pair.compare("ListGroups v5: a streams group by its type and state (not_ready)", kafka, rafka)
    for version in (5, 6):
        pair.call(
            f"DescribeGroups v{version}: a streams group",
            DESCRIBE_GROUPS,
            version,
            groups=(group,),
            include_authorized_operations=False,
        )


def test_describe_unknown_and_empty_ids(pair: Pair) -> None:
    pair.call(
        "StreamsGroupDescribe: a group that does not exist and an empty id",
        DESCRIBE,
        1,
        group_ids=(_group(pair, "none"), ""),
        include_authorized_operations=False,
        include_topology_description=False,
    )


def test_topology_description_update_without_plugin(pair: Pair) -> None:
    b = builder(TOPOLOGY_UPDATE, 0)
    pair.call(
        "StreamsGroupTopologyDescriptionUpdate: no topology description plugin",
        TOPOLOGY_UPDATE,
        0,
        group_id=_group(pair, "describe"),
        member_id="member-1",
        topology_epoch=0,
        topology_description=b.TopologyDescription(subtopologies=(), global_stores=()),
    )
