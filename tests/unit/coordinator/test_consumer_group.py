"""The consumer group protocol (KIP-848): joining, heartbeats and reconciliation, and the
reconciliation rule itself."""

from __future__ import annotations

import pytest

from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.consumer.group import (
    ConsumerGroup,
    GroupState,
    HeartbeatRequest,
    Member,
    MemberState,
    reconcile,
)
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.message_codec import record_type
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
    tid,
    topic,
)

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
    types = [record_type(k) for k, _ in h.log]
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
