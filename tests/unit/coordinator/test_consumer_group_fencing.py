"""The consumer group protocol (KIP-848): fencing by member epoch, request validation, static
members, session and rebalance timeouts."""

from __future__ import annotations

from typing import Any

import pytest

from dataplane.coordinator.consumer.group import (
    ConsumerGroupConfig,
    GroupState,
    MemberState,
)
from dataplane.protocol.errors import ErrorCode
from tests.expect import present

from .harness import (
    GROUP,
    Client,
    Harness,
    T,
    all_parts,
    assert_disjoint,
    assert_replay_equal,
    consumer_group,
    owned_list,
    parts,
    raises,
    settle,
    topic,
)

# -- fencing and validation ----------------------------------------------------------------------


def test_fencing_by_member_epoch() -> None:
    h = Harness([topic("t", 4)])
    a, b = Client(h, "a"), Client(h, "b")
    a.heartbeat()
    b.heartbeat()
    settle([a, b])
    epoch = a.epoch
    with raises(ErrorCode.fenced_member_epoch):
        h.consumer_group_heartbeat(member_id="a", member_epoch=epoch + 1)
    assert epoch == 3
    assert h.consumer_group().members["a"].previous_member_epoch == 2
    # Rejoining with epoch 0 while still a member (Kafka: only the previous epoch is accepted).
    with raises(ErrorCode.fenced_member_epoch):
        h.consumer_join("a")
    with raises(ErrorCode.unknown_member_id, f"Member zz is not a member of group {GROUP}."):
        h.consumer_group_heartbeat(member_id="zz", member_epoch=1)


def test_lost_response_previous_epoch_is_accepted() -> None:
    h = Harness([topic("t", 4)])
    a = Client(h, "a")
    a.heartbeat()
    b = Client(h, "b")
    b.heartbeat()
    a.heartbeat()  # revoke 2, then:
    old_epoch = a.epoch
    r = a.heartbeat()  # a moves to epoch 2 ... but the response is "lost"
    assert r.member_epoch == old_epoch + 1
    # a retries with its previous epoch and a subset of its assignment: accepted.
    r = h.consumer_group_heartbeat(
        member_id="a", member_epoch=old_epoch, topic_partitions=owned_list(a.owned)
    )
    assert r.member_epoch == old_epoch + 1
    # With a partition it is not assigned: fenced.
    with raises(ErrorCode.fenced_member_epoch):
        h.consumer_group_heartbeat(
            member_id="a", member_epoch=old_epoch, topic_partitions=((T, (0, 1, 2, 3)),)
        )
    # Without its owned partitions: fenced too.
    with raises(ErrorCode.fenced_member_epoch):
        h.consumer_group_heartbeat(member_id="a", member_epoch=old_epoch)


def test_lost_revocation_is_learnt_from_the_full_heartbeat_that_follows() -> None:
    """The steps the property test found. The response asking a to revoke is lost; a learns
    the revocation only because its next heartbeat is full: like Kafka's coordinator, a
    heartbeat without owned partitions is incremental and gets no assignment unless it
    changed, so a consumer that left them out would keep all of t and a stay UNREVOKED."""
    h = Harness([topic("t", 4), topic("u", 3)])
    a = Client(h, "a-0", eager=False)
    a.heartbeat()
    s1 = Client(h, "s1-1", instance_id="s1", eager=False)
    s1.heartbeat()
    a.reconcile()
    assert a.owned == all_parts(4)
    h.consumer_group_heartbeat(member_id="s1-1", member_epoch=-2, instance_id="s1")  # s1 restarts
    a.lose_response()  # the coordinator now waits for a to revoke half of t
    assert h.consumer_group().members["a-0"].state == MemberState.UNREVOKED_PARTITIONS
    full: dict[str, Any] = dict(rebalance_timeout_ms=30_000, subscribed_topic_names=("t",))
    r = h.consumer_group_heartbeat(member_id="a-0", member_epoch=2, **full)
    assert r.assignment is None  # not a full heartbeat: no owned partitions

    r = a.heartbeat(report=False)  # the consumer's full heartbeat lists them anyway
    revoking = parts(h.consumer_group().members["a-0"].partitions_pending_revocation)
    assert len(revoking) == 2
    assert a.assignment == all_parts(4) - revoking

    h.fence("s1-1")  # s1 never comes back
    for _ in range(2):
        a.heartbeat()
        a.reconcile()
    assert h.consumer_group().state == GroupState.STABLE
    assert a.owned == all_parts(4) == parts(h.consumer_group().members["a-0"].assigned_partitions)
    assert_replay_equal(h)


def test_unknown_group() -> None:
    h = Harness([topic("t", 1)])
    with raises(ErrorCode.group_id_not_found, f"Consumer group {GROUP} not found."):
        h.consumer_group_heartbeat(member_id="a", member_epoch=3)
    with raises(ErrorCode.group_id_not_found):
        h.consumer_group_heartbeat(member_id="a", member_epoch=-1)
    assert consumer_group(h.shard) is None
    assert h.log == []


@pytest.mark.parametrize(
    ("fields", "code", "message"),
    [
        (dict(member_id=""), ErrorCode.invalid_request, "MemberId can't be empty."),
        (dict(group_id=" "), ErrorCode.invalid_request, "GroupId can't be empty."),
        (dict(instance_id=""), ErrorCode.invalid_request, "InstanceId can't be empty."),
        (dict(rack_id=" "), ErrorCode.invalid_request, "RackId can't be empty."),
        (
            dict(rebalance_timeout_ms=-1),
            ErrorCode.invalid_request,
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            dict(topic_partitions=None),
            ErrorCode.invalid_request,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            dict(topic_partitions=((T, (0,)),)),
            ErrorCode.invalid_request,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            dict(subscribed_topic_names=None),
            ErrorCode.invalid_request,
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
            "(re-)joining.",
        ),
        (dict(member_epoch=-3), ErrorCode.invalid_request, "MemberEpoch is invalid."),
        (dict(member_epoch=-2), ErrorCode.invalid_request, "InstanceId can't be null."),
        (
            dict(server_assignor="sticky"),
            ErrorCode.unsupported_assignor,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
        ),
        (
            dict(subscribed_topic_regex="t(", subscribed_topic_names=None),
            ErrorCode.invalid_regular_expression,
            None,
        ),
    ],
)
def test_validation(fields, code, message) -> None:
    h = Harness([topic("t", 1)])
    base: dict[str, Any] = dict(
        member_id="a",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",),
        topic_partitions=(),
    )
    base.update(fields)
    with raises(code, message):
        h.consumer_group_heartbeat(**base)
    assert h.log == []


def test_v0_generates_the_member_id() -> None:
    h = Harness([topic("t", 1)])
    r = h.consumer_join("", api_version=0)
    member_id = present(r.member_id)
    assert len(member_id) == 22  # a base64 Uuid
    assert member_id in h.consumer_group().members
    with raises(ErrorCode.invalid_request, "MemberId can't be empty."):
        h.consumer_join("", api_version=1)


def test_group_max_size() -> None:
    h = Harness([topic("t", 3)], ConsumerGroupConfig(max_size=2))
    h.consumer_join("a")
    h.consumer_join("b")
    with raises(
        ErrorCode.group_max_size_reached,
        "The consumer group has reached its maximum capacity of 2 members.",
    ):
        h.consumer_join("c")
    # Members already in keep heartbeating.
    h.consumer_group_heartbeat(
        member_id="a", member_epoch=h.consumer_group().members["a"].member_epoch
    )


# -- static membership --------------------------------------------------------------------------


def test_static_member_restart_keeps_its_assignment() -> None:
    h = Harness([topic("t", 6)])
    a = Client(h, "a1", instance_id="ia")
    b = Client(h, "b1", instance_id="ib")
    settle([a, b])
    before = set(a.owned)
    epoch = h.consumer_group().group_epoch

    r = h.consumer_group_heartbeat(member_id="a1", member_epoch=-2, instance_id="ia")
    assert r.member_epoch == -2
    m = h.consumer_group().members["a1"]
    assert m.member_epoch == -2
    assert parts(m.assigned_partitions) == before
    assert h.consumer_group().group_epoch == epoch  # no rebalance while it restarts
    b.heartbeat()
    assert b.owned.isdisjoint(before)

    # The restarted instance comes back with a new member id and gets the same partitions.
    a2 = Client(h, "a2", instance_id="ia")
    r = a2.heartbeat()
    assert parts(r.assignment) == before
    assert r.member_epoch == epoch
    assert "a1" not in h.consumer_group().members
    assert h.consumer_group().static_members["ia"] == "a2"
    assert h.consumer_group().group_epoch == epoch
    settle([a2, b])
    assert h.consumer_group().state == GroupState.STABLE
    assert a2.owned == before
    assert_replay_equal(h)


def test_static_member_errors() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a1", instance_id="ia")
    a.heartbeat()
    with raises(
        ErrorCode.unreleased_instance_id,
        "Static member a2 with instance id ia cannot join the group because the instance id "
        "is owned by a1 member.",
    ):
        h.consumer_join("a2", instance_id="ia")
    with raises(
        ErrorCode.fenced_instance_id,
        "Static member a2 with instance id ia was fenced by member a1.",
    ):
        h.consumer_group_heartbeat(member_id="a2", member_epoch=1, instance_id="ia")
    with raises(ErrorCode.unknown_member_id, "Instance id nope is unknown."):
        h.consumer_group_heartbeat(member_id="a1", member_epoch=1, instance_id="nope")
    with raises(ErrorCode.fenced_instance_id):
        h.consumer_group_heartbeat(member_id="x", member_epoch=-2, instance_id="ia")


def test_static_member_leaving_for_good() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a1", instance_id="ia")
    a.heartbeat()
    r = a.leave()
    assert r.member_epoch == -1
    assert h.consumer_group().members == {}
    assert h.consumer_group().static_members == {}


def test_static_member_that_never_returns_is_expired() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a1", instance_id="ia")
    b = Client(h, "b1")
    settle([a, b])
    h.consumer_group_heartbeat(member_id="a1", member_epoch=-2, instance_id="ia")
    h.now += 45_000
    b.heartbeat()
    assert h.consumer_group().expired_members(h.now) == ["a1"]
    h.fence("a1")
    settle([b])
    assert b.owned == all_parts(2)


# -- timeouts ---------------------------------------------------------------------------------


def test_session_expiry() -> None:
    h = Harness([topic("t", 4)])
    a, b = Client(h, "a"), Client(h, "b")
    settle([a, b])
    t0 = h.now
    assert h.consumer_group().deadlines.session_ms("a") == t0 + 45_000
    assert h.consumer_group().next_deadline_ms() == t0 + 45_000
    h.now = t0 + 44_999
    b.heartbeat()
    assert h.consumer_group().expired_members(h.now) == []
    h.now = t0 + 45_000
    assert h.consumer_group().expired_members(h.now) == ["a"]
    h.fence("a")
    assert h.consumer_group().expired_members(h.now) == []
    settle([b])
    assert b.owned == all_parts(4)
    with raises(ErrorCode.unknown_member_id):
        a.heartbeat()
    # The fenced consumer rejoins from scratch.
    a.epoch, a.owned = 0, set()
    a.heartbeat()
    settle([a, b])
    assert_disjoint([a, b])
    assert set().union(a.owned, b.owned) == all_parts(4)


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h = Harness([topic("t", 4)])
    a = Client(h, "a", eager=False)
    a.heartbeat()
    a.reconcile()
    b = Client(h, "b")
    b.heartbeat()
    a.heartbeat(rebalance_timeout_ms=10_000)  # told to revoke, does not
    assert h.consumer_group().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    deadline = h.consumer_group().deadlines.rebalance_ms("a")
    assert deadline == h.now + 10_000
    h.now = deadline - 1
    a.heartbeat()
    b.heartbeat()
    assert h.consumer_group().expired_members(h.now) == []
    h.now = deadline
    assert h.consumer_group().expired_members(h.now) == ["a"]
    h.fence("a")
    settle([b])
    assert b.owned == all_parts(4)


def test_deadlines_after_load() -> None:
    h = Harness([topic("t", 4)])
    a = Client(h, "a", eager=False)
    a.heartbeat()
    a.reconcile()
    Client(h, "b").heartbeat()
    a.heartbeat()  # a is revoking
    shard = h.replayed(loaded=False, now=5_000)
    g = consumer_group(shard)
    assert g is not None
    assert g.next_deadline_ms() is None
    shard.on_loaded()
    assert g.deadlines.session_ms("a") == 5_000 + 45_000
    assert g.deadlines.rebalance_ms("a") == 5_000 + 30_000
    assert g.deadlines.rebalance_ms("b") is None
    assert g.next_deadline_ms() == 35_000
    assert shard.timer.next_deadline() == 35_000
    assert g.expired_members(35_000) == ["a"]
