"""The consumer group protocol (KIP-848): heartbeats, reconciliation, fencing, static members,
timeouts, regex subscriptions, replay."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest

from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.consumer.group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    GroupState,
    HeartbeatRequest,
    HeartbeatResponse,
    Member,
    MemberState,
    reconcile,
)
from dataplane.protocol.errors import ErrorCode, KafkaError
from tests.expect import present

from .harness import GROUP, Client, Harness, consumer_group, owned_list, parts, tid, topic

T = tid("t")


def all_parts(n: int, name: str = "t") -> set[tuple[bytes, int]]:
    return {(tid(name), p) for p in range(n)}


def settle(clients, rounds: int = 10) -> None:
    for _ in range(rounds):
        for c in clients:
            c.heartbeat()


def assert_disjoint(clients) -> None:
    seen: set[tuple[bytes, int]] = set()
    for c in clients:
        assert not (c.owned & seen), "a partition is owned twice"
        seen |= c.owned


def assert_replay_equal(h: Harness) -> None:
    rebuilt = h.replayed_consumer_group()
    assert rebuilt is not None
    assert rebuilt.snapshot() == h.consumer_group().snapshot()


def raises(code: ErrorCode, message: str | None = None):
    class Ctx:
        def __enter__(self):
            self.cm = pytest.raises(KafkaError)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.cm.__exit__(*exc)
            assert self.info.value.code == code, self.info.value
            if message is not None:
                assert self.info.value.message == message
            return handled

    return Ctx()


# -- joining and reconciling -----------------------------------------------------------------


def test_first_member_gets_everything_at_once() -> None:
    h = Harness([topic("t", 4)])
    r = h.consumer_join("a")
    # Kafka 4.4: a new group starts at epoch 1, its first member's join bumps it to 2
    assert r.member_id == "a"
    assert r.member_epoch == 2
    assert r.heartbeat_interval_ms == 5000
    assert parts(r.assignment) == all_parts(4)
    g = h.consumer_group()
    assert g.group_epoch == 2
    assert g.assignment_epoch == 2
    assert g.state == GroupState.STABLE
    assert g.members["a"].state == MemberState.STABLE
    # Kafka's order: member metadata, epoch, target assignment, its epoch, current assignment.
    types = [rec.record_type(k) for k, _ in h.log]
    assert types == [5, 3, 7, 6, 8]
    # The deadline set by the heartbeat that created the group survived its creation.
    assert g.deadlines.session_ms("a") == h.now + 45_000


def test_heartbeat_only_computes() -> None:
    h = Harness([topic("t", 4)])
    fresh = ConsumerGroup(GROUP, h.shard.config.consumer)
    req = HeartbeatRequest(
        GROUP, "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), topic_partitions=()
    )
    before = fresh.snapshot()
    response, records = fresh.heartbeat(req, h.now, h.topics)
    assert fresh.snapshot() == before
    assert not fresh.exists
    assert consumer_group(h.shard) is None
    assert response.member_epoch == 2
    assert records
    fresh.replay_record(*records[0])  # what the coordinator's write does (for every record)
    assert fresh.exists
    h.apply(records)
    assert h.consumer_group().exists
    assert h.consumer_group().group_epoch == 2

    # The same for every kind of heartbeat of an existing group.
    Client(h, "b").heartbeat()
    a_owned = owned_list(parts(h.consumer_group().members["a"].assigned_partitions))
    for req in (
        HeartbeatRequest(GROUP, "a", 2, topic_partitions=a_owned),
        HeartbeatRequest(GROUP, "a", 2, topic_partitions=()),
        HeartbeatRequest(GROUP, "b", 3, subscribed_topic_names=("t", "u")),
        HeartbeatRequest(
            GROUP,
            "c",
            0,
            rebalance_timeout_ms=1,
            subscribed_topic_names=("t",),
            topic_partitions=(),
        ),
        HeartbeatRequest(GROUP, "a", -1),
    ):
        before = h.consumer_group().snapshot()
        h.consumer_group().heartbeat(req, h.now, h.topics)
        assert h.consumer_group().snapshot() == before


def test_three_members_converge_to_a_disjoint_cover() -> None:
    h = Harness([topic("t", 8)])
    clients = [Client(h, m) for m in ("a", "b", "c")]
    for c in clients:
        c.heartbeat()
        assert_disjoint(clients)
    assert h.consumer_group().state in (GroupState.RECONCILING, GroupState.STABLE)
    settle(clients)
    assert_disjoint(clients)
    assert set().union(*(c.owned for c in clients)) == all_parts(8)
    assert sorted(len(c.owned) for c in clients) == [2, 3, 3]
    g = h.consumer_group()
    assert g.state == GroupState.STABLE
    assert {c.epoch for c in clients} == {g.group_epoch} == {4}
    for c in clients:
        assert parts(g.members[c.member_id].assigned_partitions) == c.owned
    assert_replay_equal(h)


def test_late_joiner_waits_for_revocation() -> None:
    h = Harness([topic("t", 4)])
    a = Client(h, "a", eager=False)
    a.heartbeat()
    a.reconcile()
    assert a.owned == all_parts(4)

    b = Client(h, "b")
    r = b.heartbeat()
    # b is at the new epoch but everything it should get is still a's.
    assert r.member_epoch == 3
    assert parts(r.assignment) == set()
    assert h.consumer_group().members["b"].state == MemberState.UNRELEASED_PARTITIONS
    assert h.consumer_group().state == GroupState.RECONCILING

    r = a.heartbeat()  # a is asked to revoke half, stays at epoch 2
    assert r.member_epoch == 2
    assert len(present(a.assignment)) == 2
    assert h.consumer_group().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert h.consumer_group().deadlines.rebalance_ms("a") == h.now + 30_000

    b.heartbeat()  # a has not revoked yet: still nothing for b
    assert b.owned == set()
    a.heartbeat()  # a keeps reporting all 4: no progress
    assert h.consumer_group().members["a"].state == MemberState.UNREVOKED_PARTITIONS

    a.reconcile()
    r = a.heartbeat()  # a reports the smaller set: moves to epoch 3
    assert r.member_epoch == 3
    assert h.consumer_group().members["a"].state == MemberState.STABLE
    assert h.consumer_group().deadlines.rebalance_ms("a") is None
    r = b.heartbeat()
    assert parts(r.assignment) == all_parts(4) - a.owned
    assert h.consumer_group().state == GroupState.STABLE
    assert_disjoint([a, b])
    assert_replay_equal(h)


def test_revoking_partitions_the_member_no_longer_reports_is_immediate() -> None:
    h = Harness([topic("t", 4)])
    a, b = Client(h, "a"), Client(h, "b")
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()  # a gets the smaller assignment and revokes right away (eager)
    r = a.heartbeat()
    assert r.member_epoch == 3
    settle([a, b], 2)
    assert h.consumer_group().state == GroupState.STABLE


def test_leaving_member_releases_its_partitions() -> None:
    h = Harness([topic("t", 6)])
    clients = [Client(h, m) for m in ("a", "b", "c")]
    settle(clients)
    c = clients[2]
    epoch = h.consumer_group().group_epoch
    r = c.leave()
    assert r.member_id == "c"
    assert r.member_epoch == -1
    assert "c" not in h.consumer_group().members
    assert "c" not in h.consumer_group().target
    assert h.consumer_group().group_epoch == epoch + 1
    settle(clients[:2])
    assert set().union(*(x.owned for x in clients[:2])) == all_parts(6)
    assert h.consumer_group().state == GroupState.STABLE
    assert_replay_equal(h)


def test_last_member_leaving_empties_the_group() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a")
    a.heartbeat()
    a.leave()
    g = h.consumer_group()
    assert g.state == GroupState.EMPTY
    assert g.is_empty
    assert g.state_name == "Empty"
    assert g.members == {}
    assert g._owners == {}
    assert_replay_equal(h)
    # It can be joined again.
    assert Client(h, "b").heartbeat().member_epoch == g.group_epoch


def test_metadata_change_triggers_a_rebalance() -> None:
    h = Harness([topic("t", 2)])
    clients = [Client(h, "a"), Client(h, "b")]
    settle(clients)
    epoch = h.consumer_group().group_epoch
    h.set_topics([topic("t", 4)])
    settle(clients)
    assert h.consumer_group().group_epoch == epoch + 1
    assert set().union(*(c.owned for c in clients)) == all_parts(4)
    # Deleting the topic takes the partitions away.
    h.set_topics([])
    settle(clients)
    assert all(c.owned == set() for c in clients)
    assert h.consumer_group().state == GroupState.STABLE
    assert_replay_equal(h)


def test_subscription_change() -> None:
    h = Harness([topic("t", 2), topic("u", 2)])
    a, b = Client(h, "a", topics=("t",)), Client(h, "b", topics=("t",))
    settle([a, b])
    b.heartbeat(subscribed_topic_names=("t", "u"))
    settle([a, b])
    assert {p[0] for p in b.owned} >= {tid("u")}
    assert all(p[0] == T for p in a.owned)
    assert set().union(a.owned, b.owned) == all_parts(2, "t") | all_parts(2, "u")


def test_heartbeat_without_changes_writes_nothing() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a")
    a.heartbeat()
    n = len(h.log)
    r = a.heartbeat()
    assert len(h.log) == n
    assert r.assignment is None  # nothing changed, nothing sent
    # A full request (all the optional fields) gets the assignment again.
    r = a.heartbeat(rebalance_timeout_ms=30_000, subscribed_topic_names=("t",))
    assert parts(r.assignment) == all_parts(2)
    assert len(h.log) == n


def test_a_new_preferred_assignor_bumps_the_group_epoch() -> None:
    """Kafka 4.4: a heartbeat that changes which server assignor the group uses recomputes
    the target assignment, though no subscription changed."""
    h = Harness([topic("t", 4)])
    a = Client(h, "a")
    a.heartbeat()
    assert h.consumer_group().group_epoch == 2
    r = a.heartbeat(server_assignor="range")
    assert r.member_epoch == 3
    assert h.consumer_group().group_epoch == 3
    assert h.consumer_group().preferred_assignor() == "range"
    a.heartbeat(server_assignor="range")  # unchanged: no new epoch
    assert h.consumer_group().group_epoch == 3


def test_the_last_member_leaving_moves_the_assignment_epoch() -> None:
    """Kafka 4.4: fencing the last members sets the assignment epoch to the new group epoch,
    so the empty group reads as assigned at its epoch."""
    h = Harness([topic("t", 2)])
    a, b = Client(h, "a"), Client(h, "b")
    settle([a, b])
    epoch = h.consumer_group().group_epoch
    a.leave()
    assert (h.consumer_group().group_epoch, h.consumer_group().assignment_epoch) == (
        epoch + 1,
        epoch,
    )
    b.leave()
    g = h.consumer_group()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (epoch + 2, epoch + 2, GroupState.EMPTY)
    assert_replay_equal(h)


def test_range_assignor_chosen_by_members() -> None:
    h = Harness([topic("t", 4), topic("u", 4)])
    clients = [Client(h, m, topics=("t", "u")) for m in ("a", "b")]
    for c in clients:
        c.heartbeat(server_assignor="range")
    settle(clients)
    a = clients[0]
    assert a.owned == {(T, 0), (T, 1), (tid("u"), 0), (tid("u"), 1)}
    assert h.consumer_group().preferred_assignor() == "range"
    assert h.consumer_group().describe(h.topics).assignor_name == "range"


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
        kio_response = response.to_kio(ResponseBuilder(68, version))
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


# -- reconciliation unit -------------------------------------------------------------------------


def test_reconcile_unknown_state_forces_a_fresh_start() -> None:
    m = Member(
        "a", member_epoch=3, state=MemberState.UNKNOWN, assigned_partitions={T: frozenset({0})}
    )
    with raises(ErrorCode.fenced_member_epoch):
        reconcile(m, 4, {T: frozenset({0, 1})}, ((T, (0,)),), lambda t, p: False)
    out = reconcile(m, 4, {T: frozenset({0, 1})}, (), lambda t, p: False)
    assert out.state == MemberState.STABLE
    assert out.member_epoch == 4
    assert out.assigned_partitions == {T: frozenset({0, 1})}


def test_replay_refuses_double_ownership() -> None:
    from dataplane.coordinator.consumer.state import IllegalStateError

    g = ConsumerGroup(GROUP)
    value = rec.CurrentMemberAssignmentValue(1, 0, 0, (rec.TopicPartitions(T, (0,)),), ())
    g.replay(rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, GROUP, "a"), value)
    with pytest.raises(IllegalStateError):
        g.replay(rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, GROUP, "b"), value)
