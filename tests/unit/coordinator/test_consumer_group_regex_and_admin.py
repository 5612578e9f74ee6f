"""The consumer group protocol (KIP-848): regex subscriptions, describe, offset commits,
deletion and the records' kio round trip."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.consumer.group import (
    ConsumerGroup,
    HeartbeatRequest,
    HeartbeatResponse,
)
from dataplane.protocol.errors import ErrorCode, KafkaError

from .harness import (
    GROUP,
    Client,
    Harness,
    T,
    all_parts,
    assert_disjoint,
    assert_replay_equal,
    consumer_group,
    parts,
    raises,
    settle,
    tid,
    topic,
)

# -- regular expressions ------------------------------------------------------------------------


def test_regex_subscription() -> None:
    h = Harness([topic("t1", 2), topic("t2", 2), topic("x", 2), topic("__consumer_offsets", 50)])
    a = Client(h, "a")
    r = a.heartbeat(subscribed_topic_names=None, subscribed_topic_regex="t.*|__.*")
    assert parts(r.assignment) == all_parts(2, "t1") | all_parts(2, "t2")
    g = h.consumer_group()
    assert g.resolved_regexes["t.*|__.*"].topics == {"t1", "t2"}
    assert g.members["a"].subscribed_topic_regex == "t.*|__.*"

    # A new matching topic is picked up at the next refresh.
    h.set_topics([*h.topics.values(), topic("t3", 1)])
    a.heartbeat()
    assert (tid("t3"), 0) not in a.owned  # too early
    h.now += 10_000
    a.heartbeat()
    a.heartbeat()
    assert (tid("t3"), 0) in a.owned
    assert_replay_equal(h)

    # A second member with the same regex shares the work; leaving drops the resolution.
    b = Client(h, "b")
    b.heartbeat(subscribed_topic_names=None, subscribed_topic_regex="t.*|__.*")
    settle([a, b])
    assert_disjoint([a, b])
    assert set().union(a.owned, b.owned) == (
        all_parts(2, "t1") | all_parts(2, "t2") | all_parts(1, "t3")
    )
    b.leave()
    a.leave()
    assert h.consumer_group().resolved_regexes == {}
    assert_replay_equal(h)


def test_regex_change_to_names() -> None:
    h = Harness([topic("t1", 1), topic("x", 1)])
    a = Client(h, "a")
    a.heartbeat(subscribed_topic_names=None, subscribed_topic_regex="t.*")
    a.heartbeat(subscribed_topic_regex="", subscribed_topic_names=("x",))
    a.heartbeat()
    assert a.owned == {(tid("x"), 0)}
    assert h.consumer_group().resolved_regexes == {}


# -- describe, offsets, deletion, kio ------------------------------------------------------------


def test_describe() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a", instance_id="ia")
    a.heartbeat(rack_id="r1")
    d = h.consumer_group().describe(h.topics)
    assert (d.group_id, d.group_state, d.group_epoch, d.assignment_epoch) == (
        GROUP,
        "Stable",
        2,
        2,
    )
    assert d.assignor_name == "uniform"
    assert d.error_code == 0
    (m,) = d.members
    assert (m.member_id, m.instance_id, m.rack_id, m.member_epoch) == ("a", "ia", "r1", 2)
    assert (m.client_id, m.client_host, m.subscribed_topic_names) == ("cli", "/h", ("t",))
    assert m.assignment == m.target_assignment
    assert m.assignment[0].topic_name == "t"
    assert m.assignment[0].partitions == (0, 1)
    missing = ConsumerGroup("nope").describe(h.topics)
    assert missing.error_code == ErrorCode.group_id_not_found


def test_offset_commit_validation() -> None:
    h = Harness([topic("t", 2)])
    empty = ConsumerGroup("x")
    empty.validate_offset_commit(None, -1)  # admin commit on an empty group
    a = Client(h, "a")
    a.heartbeat()
    g = h.consumer_group()
    g.validate_offset_commit("a", 2)
    with raises(ErrorCode.stale_member_epoch):
        g.validate_offset_commit("a", 1)
    with raises(ErrorCode.unknown_member_id):
        g.validate_offset_commit("b", 2)
    with raises(ErrorCode.unknown_member_id):
        g.validate_offset_commit(None, -1)  # the group has members now
    with raises(ErrorCode.unsupported_version):
        g.validate_offset_commit("a", 2, api_version=8)
    g.validate_offset_commit("a", 2, api_version=8, is_transactional=True)
    g.validate_offset_fetch(None, -1)
    g.validate_offset_fetch("a", 2)
    with raises(ErrorCode.stale_member_epoch):
        g.validate_offset_fetch("a", 3)
    with raises(ErrorCode.non_empty_group):
        g.validate_delete()


def test_group_deletion() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a")
    a.heartbeat()
    a.leave()
    h.consumer_group().validate_delete()
    h.apply(h.consumer_group().tombstones())
    assert consumer_group(h.shard) is None
    assert h.replayed_consumer_group() is None
    # A non-empty group's tombstones contradict its state on replay? No: they delete it all.
    h2 = Harness([topic("t", 2)])
    Client(h2, "a").heartbeat()
    h2.apply(h2.consumer_group().tombstones())
    assert consumer_group(h2.shard) is None


def test_legacy_partition_metadata_is_tombstoned() -> None:
    h = Harness([topic("t", 2)])
    Client(h, "a").heartbeat()
    legacy = rec.PartitionMetadataValue((rec.TopicMetadataEntry(T, "t", 2),))
    h.apply([rec.encode(rec.GroupKey(rec.PARTITION_METADATA, GROUP), legacy)])
    assert h.consumer_group().legacy_partition_metadata == legacy
    Client(h, "b").heartbeat()
    assert h.consumer_group().legacy_partition_metadata is None


def test_kio_round_trip() -> None:
    from kio.schema.consumer_group_heartbeat.v1.request import (
        ConsumerGroupHeartbeatRequest,
        TopicPartitions,
    )
    from kio.schema.types import GroupId, TopicName
    from kio.static.primitive import i32, i32Timedelta

    from dataplane.protocol.codec import ResponseBuilder, encode_with_kio

    topic_uuid = uuid.UUID(bytes=T)
    req = ConsumerGroupHeartbeatRequest(
        group_id=GroupId(GROUP),
        member_id="a",
        member_epoch=i32(0),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=30_000)),
        subscribed_topic_names=(TopicName("t"),),
        topic_partitions=(),
    )
    parsed = HeartbeatRequest.from_kio(req)
    assert parsed.rebalance_timeout_ms == 30_000
    assert parsed.topic_partitions == ()
    later = HeartbeatRequest.from_kio(
        dataclasses.replace(
            req,
            member_epoch=i32(1),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=-1)),
            subscribed_topic_names=None,
            topic_partitions=(TopicPartitions(topic_id=topic_uuid, partitions=(i32(0), i32(1))),),
        )
    )
    assert later.rebalance_timeout_ms == -1
    assert later.topic_partitions == ((T, (0, 1)),)

    h = Harness([topic("t", 2)])
    group = ConsumerGroup(GROUP, h.shard.config.consumer)
    response, records = group.heartbeat(parsed, h.now, h.topics)
    h.apply(records)
    for version in (0, 1):
        kio_response: Any = response.to_kio(ResponseBuilder(68, version))
        assert kio_response.assignment.topic_partitions[0].topic_id == topic_uuid
        assert encode_with_kio(kio_response)
        error = HeartbeatResponse.error(KafkaError(ErrorCode.fenced_member_epoch, "no"))
        assert encode_with_kio(error.to_kio(ResponseBuilder(68, version)))
    for version in (0, 1):
        b = ResponseBuilder(69, version)
        described = h.consumer_group().describe(h.topics).to_kio(b)
        assert encode_with_kio(
            b.ConsumerGroupDescribeResponse(throttle_time=0, groups=(described,))
        )
