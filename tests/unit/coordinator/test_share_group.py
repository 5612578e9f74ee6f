"""Share groups (KIP-932) in the group coordinator: ShareGroupHeartbeat through a shard (the
records written and replayed as the broker does), the simple assignor, session expiry, the
one-type-per-group-id rule, describe, deletion and the records' replay."""

from __future__ import annotations

import pytest

from dataplane.coordinator.base import GroupConfig, JoinRequest
from dataplane.coordinator.shard import GroupShard
from dataplane.coordinator.share.adapter import ShareGroupAdapter
from dataplane.coordinator.share.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    ShareGroup,
    ShareGroupConfig,
    simple_assign,
    validate_heartbeat,
)
from dataplane.protocol.errors import ErrorCode, KafkaError

from .harness import GROUP, Harness, parts, tid, topic
from .support import LocalServices

E = ErrorCode


ONE_PARTITION = (topic("t", 1),)


class ShareHarness(Harness):
    def __init__(self, topics=ONE_PARTITION, **share: int) -> None:
        super().__init__(topics)
        config = GroupConfig(min_session_timeout_ms=1, share=ShareGroupConfig(**share))  # type: ignore[arg-type]
        self.services.config = config
        self.shard.config = config

    def hb(self, member_id: str, epoch: int, topics=None, group_id=GROUP) -> HeartbeatResponse:
        req = HeartbeatRequest(group_id, member_id, epoch, None, topics)
        reply = self.shard.share_group_heartbeat(req, "cli", "/h")
        self.services.run_pending()
        response = reply.value
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        return response

    def join(self, member_id: str, topics=("t",)) -> HeartbeatResponse:  # type: ignore[override]
        return self.hb(member_id, 0, tuple(topics))

    def group(self, group_id: str = GROUP) -> ShareGroup:
        g = self.shard.groups[group_id]
        assert isinstance(g, ShareGroupAdapter)
        return g.group


def test_four_members_on_one_partition_all_get_it() -> None:
    h = ShareHarness()
    for m in ("a", "b", "c", "d"):
        h.join(m)
    # each member's next heartbeat brings it to the latest target
    responses = {m: h.hb(m, h.group().members[m].member_epoch) for m in "abcd"}
    epoch = h.group().group_epoch
    for m in "abcd":
        assert h.group().members[m].member_epoch == epoch
        assert parts(h.group().members[m].assigned) == {(tid("t"), 0)}
        assert responses[m].member_epoch == epoch
    assert h.group().state_name == "Stable"


def test_simple_assignor_spreads_partitions_and_shares_when_fewer() -> None:
    topics = {"t": topic("t", 4), "u": topic("u", 1)}
    assignment = simple_assign({"a": frozenset({"t"}), "b": frozenset({"t", "u"})}, topics)
    assert parts(assignment["a"]) == {(tid("t"), 0), (tid("t"), 2)}
    assert parts(assignment["b"]) == {(tid("t"), 1), (tid("t"), 3), (tid("u"), 0)}
    # more subscribers than partitions: each gets one, every partition is covered
    many = simple_assign({m: frozenset({"t"}) for m in "abcdefg"}, topics)
    assert all(len(parts(a)) == 1 for a in many.values())
    assert set().union(*(parts(a) for a in many.values())) == {(tid("t"), p) for p in range(4)}
    assert simple_assign({"a": frozenset({"missing"})}, topics) == {"a": {}}


def test_join_assigns_and_first_response_has_the_assignment() -> None:
    h = ShareHarness((topic("t", 2),))
    r = h.join("a")
    # Kafka 4.4: a new group starts at epoch 1, its first member's join bumps it to 2
    assert r.member_epoch == 2
    assert r.heartbeat_interval_ms == 5000
    assert parts(r.assignment) == {(tid("t"), 0), (tid("t"), 1)}
    # an unchanged heartbeat carries no assignment and writes nothing
    before = len(h.log)
    r2 = h.hb("a", 2)
    assert r2.assignment is None
    assert r2.member_epoch == 2
    assert len(h.log) == before
    # a second member: the group epoch moves, both end up with one partition each
    h.join("b")
    ra = h.hb("a", 2)
    assert ra.member_epoch == 3
    assert parts(ra.assignment) == {(tid("t"), 0)}
    assert parts(h.group().members["b"].assigned) == {(tid("t"), 1)}


def test_the_last_member_leaving_moves_the_assignment_epoch() -> None:
    """Kafka 4.4: when the group empties, its assignment epoch follows its group epoch."""
    h = ShareHarness((topic("t", 2),))
    h.join("a")
    r = h.hb("a", -1)
    assert r.member_epoch == -1
    assert (h.group().group_epoch, h.group().assignment_epoch) == (3, 3)


def test_heartbeat_errors() -> None:
    h = ShareHarness(max_size=1)
    with pytest.raises(KafkaError) as e:
        h.hb("", 0, ("t",))
    assert e.value.code == E.invalid_request
    with pytest.raises(KafkaError) as e:
        h.hb("a", 0, None)
    assert e.value.code == E.invalid_request  # SubscribedTopicNames must be set
    with pytest.raises(KafkaError) as e:
        h.hb("a", 3)
    assert e.value.code == E.group_id_not_found
    h.join("a")
    with pytest.raises(KafkaError) as e:
        h.join("b")
    assert e.value.code == E.group_max_size_reached
    with pytest.raises(KafkaError) as e:
        h.hb("a", 7)
    assert e.value.code == E.fenced_member_epoch
    with pytest.raises(KafkaError) as e:
        h.hb("zzz", 2)
    assert e.value.code == E.unknown_member_id


@pytest.mark.parametrize(
    ("req", "problem"),
    [
        (HeartbeatRequest("", "", 0), "MemberId can't be empty."),  # checked first, as Kafka
        (HeartbeatRequest(" ", "m", 0, None, ("t",)), "GroupId can't be empty."),
        (HeartbeatRequest("g", "m", 1, " "), "RackId can't be empty."),
        (HeartbeatRequest("g", "m", 0), "SubscribedTopicNames must be set in first request."),
        (HeartbeatRequest("g", "m", -2), "MemberEpoch is invalid."),
    ],
)
def test_invalid_heartbeats_in_kafkas_words(req: HeartbeatRequest, problem: str) -> None:
    with pytest.raises(KafkaError) as e:
        validate_heartbeat(req)
    assert (e.value.code, e.value.message) == (E.invalid_request, problem)


def test_leave_and_session_expiry_remove_members() -> None:
    h = ShareHarness(session_timeout_ms=10_000)
    h.join("a")
    h.join("b")
    left = h.hb("b", h.group().members["b"].member_epoch)
    r = h.hb("b", -1)
    assert r.member_epoch == -1
    assert "b" not in h.group().members
    assert left.member_epoch > 0
    h.advance(9_000)
    h.hb("a", h.group().members["a"].member_epoch)
    h.advance(9_000)
    assert "a" in h.group().members  # it heartbeated 9 s ago
    h.advance(2_000)
    assert not h.group().members
    assert h.group().state_name == "Empty"


def test_a_group_id_is_one_type() -> None:
    h = ShareHarness()
    h.consumer_join("c1")
    with pytest.raises(KafkaError) as e:
        h.hb("s1", 0, ("t",), group_id=GROUP)
    assert e.value.code == E.group_id_not_found
    assert "not a share group" in (e.value.message or "")
    h.hb("s1", 0, ("t",), group_id="share")
    # ConsumerGroupHeartbeat and JoinGroup to the (empty or not) share group are refused
    with pytest.raises(KafkaError) as e:
        h.consumer_group_heartbeat(
            group_id="share", member_id="c2", member_epoch=0, subscribed_topic_names=("t",),
            topic_partitions=(), rebalance_timeout_ms=1000,
        )  # fmt: skip
    assert e.value.code == E.group_id_not_found
    h.hb("s1", -1, group_id="share")
    reply = h.shard.join_group(
        JoinRequest("share", "", None, "c", "/h", 10_000, 10_000, "consumer", (("r", b""),), 9)
    )
    h.settle()
    assert reply.value.error == E.inconsistent_group_protocol


def test_list_describe_delete_and_replay() -> None:
    h = ShareHarness((topic("t", 2),))
    h.join("a")
    h.join("b")
    h.hb("a", 2)
    listed = h.shard.list_groups(types=("share",))
    assert [(g.group_id, g.type, g.protocol_type, g.state) for g in listed] == [
        (GROUP, "share", "share", "Stable")
    ]
    assert h.shard.list_groups(types=("consumer",)) == []
    (d,) = h.shard.share_group_describe([GROUP])
    assert not isinstance(d, KafkaError)
    assert [m.member_id for m in d.members] == ["a", "b"]
    assert d.assignor_name == "simple"
    assert d.members[0].assignment == ((tid("t"), "t", (0,)),)
    (missing,) = h.shard.share_group_describe(["nope"])
    assert isinstance(missing, KafkaError)
    assert missing.code == E.group_id_not_found
    assert h.shard.describe_group(GROUP).state == "Dead"  # DescribeGroups: classic only
    # the records rebuild the same group
    replayed = h.replayed()
    g = replayed.groups[GROUP]
    assert isinstance(g, ShareGroupAdapter)
    assert g.group.members == h.group().members
    assert g.group.target == h.group().target
    assert g.group.state_partitions == {tid("t"): ("t", frozenset({0, 1}))}
    assert [k.partition for k in g.state_keys()] == [0, 1]
    # deletion: refused while members are in; then the group and its records go
    errors, _ = h.shard.delete_groups([GROUP])
    assert errors[GROUP] == E.non_empty_group
    for m in ("a", "b"):
        h.hb(m, -1)
    errors, records = h.shard.delete_groups([GROUP])
    assert errors[GROUP] == E.none
    h.apply(records)
    assert GROUP not in h.shard.groups
    services = LocalServices(h.services.config)
    fresh = services.attach(GroupShard(0, services))
    assert GROUP not in fresh.groups
    assert GROUP not in h.replayed().groups
