"""The classic group state machine, driven by hand: joins, rejoins, leader election, protocol
selection, the initial delay, session and rebalance expirations, static membership, leaving,
generation checks — and a replay of what was written gives the same state."""

from __future__ import annotations

from dataplane.coordinator.classic.membership import GroupState
from dataplane.coordinator.records import GroupMetadataValue, decode_record
from tests.expect import present

from .harness import RANGE, E, Harness, snapshot, subscription


def test_first_join_needs_a_member_id_from_v4() -> None:
    h = Harness()
    first = h.join(client="app")
    assert first.done
    assert first.value.error == E.member_id_required
    assert first.value.member_id.startswith("app-")
    # the group exists (Empty) and is persisted right away, as Kafka does
    assert h.classic_group().state_name == "Empty"
    (key, value) = h.services.log[0]
    decoded = decode_record(key, value)
    assert decoded is not None
    assert decoded.value == GroupMetadataValue("", 0, None, None, -1, ())
    second = h.join(first.value.member_id)
    assert not second.done  # parked until the join phase completes
    h.settle()
    r = second.value
    assert r.error == E.none
    assert r.generation_id == 1
    assert r.leader == r.member_id
    assert r.protocol_type == "consumer"
    assert r.protocol_name == "range"
    assert [m.member_id for m in r.members] == [r.member_id]
    assert h.classic_group().state_name == "CompletingRebalance"


def test_old_versions_join_without_member_id_required() -> None:
    h = Harness()
    reply = h.join(version=3)
    h.settle()
    assert reply.value.error == E.none
    assert reply.value.generation_id == 1


def test_unknown_member_of_a_missing_group() -> None:
    h = Harness()
    assert h.join("who").value.error == E.unknown_member_id
    assert "g" not in h.shard.groups


def test_pending_member_that_never_rejoins_expires() -> None:
    h = Harness()
    first = h.join(session=5000)
    assert h.classic_group().pending_members == {first.value.member_id}
    h.advance(5000)
    assert not h.classic_group().pending_members
    assert h.join(first.value.member_id).value.error == E.unknown_member_id


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    a = h.new_member(rebalance=10_000)
    h.advance(2000)
    b = h.new_member(rebalance=10_000)  # arrives within the delay: the delay is extended
    h.advance(1000)
    assert not a.done
    assert not b.done
    h.advance(2999)
    assert not a.done
    h.advance(1)  # 3000 after the extension started
    assert a.value.error == E.none
    assert b.value.error == E.none
    assert a.value.generation_id == b.value.generation_id == 1
    leader = a.value.leader
    assert leader == a.value.member_id  # the first member to join leads
    assert len(a.value.members) == 2
    assert b.value.members == ()


def test_initial_delay_is_capped_by_the_rebalance_timeout() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    replies = [h.new_member(rebalance=4000)]
    for _ in range(3):  # members keep coming, but the rebalance timeout bounds the wait
        h.advance(1000)
        replies.append(h.new_member(rebalance=4000))
    assert not any(r.done for r in replies)
    h.advance(1000)  # 4000 ms after the first join
    assert {r.value.generation_id for r in replies} == {1}
    assert len(replies[0].value.members) == 4


def test_sync_hands_the_leaders_assignment_to_every_member() -> None:
    h = Harness()
    a, b = h.new_member(), h.new_member()
    h.settle()
    leader = a.value.leader
    follower = b.value.member_id if leader == a.value.member_id else a.value.member_id
    early = h.sync(follower, 1)
    assert not early.done  # parked until the leader's assignment is persisted
    writes = len(h.services.log)
    lead = h.sync(leader, 1, {leader: b"L", follower: b"F"})
    assert not lead.done
    assert len(h.services.log) == writes + 1  # the GroupMetadata record
    h.settle()
    assert lead.value.assignment == b"L"
    assert early.value.assignment == b"F"
    assert lead.value.protocol_name == "range"
    assert h.classic_group().state_name == "Stable"
    # a late sync in Stable gets the stored assignment at once
    again = h.sync(follower, 1)
    assert again.done
    assert again.value.assignment == b"F"


def test_failed_assignment_write_sends_members_back_to_rejoin() -> None:
    h = Harness()
    a = h.new_member()
    h.settle()
    h.services.fail_with = E.not_enough_replicas
    sync = h.sync(a.value.member_id, 1, {a.value.member_id: b"x"})
    h.settle()
    assert sync.value.error == E.coordinator_not_available
    assert h.classic_group().state_name == "PreparingRebalance"


def test_sync_errors() -> None:
    h = Harness()
    _leader, follower = h.stable_group(2)
    assert h.sync(follower, 0).value.error == E.illegal_generation
    assert h.sync("nobody", 1).value.error == E.unknown_member_id
    assert h.sync(follower, 1, protocol_name="roundrobin").value.error == (
        E.inconsistent_group_protocol
    )
    assert h.sync(follower, 1, group="other").value.error == E.unknown_member_id


def test_follower_rejoining_with_same_metadata_in_stable_gets_the_current_generation() -> None:
    h = Harness()
    _leader, follower = h.stable_group(2)
    reply = h.join(follower)
    assert reply.done
    assert reply.value.error == E.none
    assert reply.value.generation_id == 1
    assert reply.value.members == ()
    assert h.classic_group().state_name == "Stable"


def test_leader_rejoin_starts_a_rebalance_that_waits_for_everyone() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    lead = h.join(leader)
    assert not lead.done
    assert h.classic_group().state_name == "PreparingRebalance"
    assert h.heartbeat(follower, 1) == E.rebalance_in_progress
    assert h.sync(follower, 1).value.error == E.rebalance_in_progress
    h.settle()
    assert not lead.done  # still waiting for the follower
    follow = h.join(follower)
    assert lead.done
    assert follow.done
    assert lead.value.generation_id == follow.value.generation_id == 2
    assert lead.value.leader == leader
    assert len(lead.value.members) == 2


def test_members_that_do_not_rejoin_in_time_are_dropped() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    lead = h.join(leader, rebalance=20_000)
    # the follower keeps heartbeating (so its session does not expire) but never rejoins
    for _ in range(3):
        h.advance(5000)
        assert h.heartbeat(follower, 1) == E.rebalance_in_progress
    assert not lead.done
    h.advance(15_000)
    assert lead.value.error == E.none
    assert lead.value.generation_id == 2
    assert [m.member_id for m in lead.value.members] == [leader]
    assert h.heartbeat(follower, 2) == E.unknown_member_id


def test_new_leader_is_elected_when_the_leader_does_not_rejoin() -> None:
    h = Harness()
    _leader, follower = h.stable_group(2)
    follow = h.join(follower, protocols=(("range", subscription("t", "u")),))  # changed
    h.advance(30_000)
    assert follow.value.error == E.none
    assert follow.value.leader == follower
    assert len(follow.value.members) == 1


def test_session_expiry_removes_a_silent_member_and_rebalances() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    for _ in range(2):
        h.advance(4000)
        assert h.heartbeat(leader, 1) == E.none  # the follower goes silent
    assert follower in h.classic_group().members
    h.advance(2000)  # its 10 s session is over
    assert follower not in h.classic_group().members
    assert h.classic_group().state_name == "PreparingRebalance"
    assert h.heartbeat(leader, 1) == E.rebalance_in_progress
    reply = h.join(leader)
    assert reply.value.generation_id == 2
    assert len(reply.value.members) == 1


def test_offset_commits_keep_a_members_session_alive() -> None:
    """Kafka's commitOffset: a classic member's accepted commit counts as a heartbeat while
    the group is Stable or PreparingRebalance."""
    h = Harness()
    leader, follower = h.stable_group(2)
    for offset in range(3):
        h.advance(4000)
        assert h.heartbeat(leader, 1) == E.none
        assert h.commit(follower, 1, {("t", 0): offset})[0] == E.none  # commits, no heartbeats
    assert follower in h.classic_group().members  # 12 s without a heartbeat
    assert h.commit(follower, 0, {("t", 0): 9})[0] == E.illegal_generation  # refused: no renewal
    for _ in range(2):
        h.advance(5000)
        assert h.heartbeat(leader, 1) in (E.none, E.rebalance_in_progress)
    assert follower not in h.classic_group().members  # 10 s after its last accepted commit


def test_heartbeat_errors() -> None:
    h = Harness()
    _leader, follower = h.stable_group(2)
    assert h.heartbeat(follower, 1) == E.none
    assert h.heartbeat(follower, 0) == E.illegal_generation
    assert h.heartbeat("nobody", 1) == E.unknown_member_id
    assert h.heartbeat(follower, 1, group="missing") == E.unknown_member_id


def test_members_that_never_sync_are_dropped_after_the_rebalance_timeout() -> None:
    h = Harness()
    a, b = h.new_member(rebalance=10_000), h.new_member(rebalance=10_000)
    h.settle()
    leader = a.value.leader
    follower = b.value.member_id if leader == a.value.member_id else a.value.member_id
    h.sync(leader, 1, {leader: b"L", follower: b"F"})
    h.advance(5000)
    assert h.heartbeat(leader, 1) == E.none
    h.advance(5000)  # the follower never sent SyncGroup
    assert follower not in h.classic_group().members
    assert h.classic_group().state_name == "PreparingRebalance"


def test_protocol_selection_by_votes_among_protocols_all_support() -> None:
    h = Harness()
    rr = ("roundrobin", b"x")
    ra = ("range", b"y")
    replies = [
        h.new_member(protocols=(ra, rr)),
        h.new_member(protocols=(ra, rr)),
        h.new_member(protocols=(rr, ra)),
    ]
    h.settle()
    assert {r.value.protocol_name for r in replies} == {"range"}  # two votes to one
    # a protocol only some members support cannot be chosen
    h2 = Harness()
    replies = [
        h2.new_member(protocols=(ra, rr)),
        h2.new_member(protocols=(("sticky", b""), rr)),
    ]
    h2.settle()
    assert {r.value.protocol_name for r in replies} == {"roundrobin"}
    # a member sharing no protocol with the group is refused
    assert h2.join(protocols=(("cooperative-sticky", b""),)).value.error == (
        E.inconsistent_group_protocol
    )
    assert h2.join(protocol_type="connect").value.error == E.inconsistent_group_protocol


def test_group_max_size() -> None:
    h = Harness(max_size=2)
    h.stable_group(2)
    third = h.join(version=3)
    assert third.value.error == E.group_max_size_reached
    assert third.value.member_id == ""


def test_static_member_restart_keeps_its_assignment_without_a_rebalance() -> None:
    h = Harness()
    a = h.join(instance="i-a")  # static members need no MEMBER_ID_REQUIRED round
    b = h.join(instance="i-b")
    h.settle()
    leader = a.value.leader
    ids = {a.value.member_id: "i-a", b.value.member_id: "i-b"}
    assignments = {m: ids[m].encode() for m in ids}
    for m in sorted(ids, key=lambda m: m != leader):
        h.sync(m, 1, assignments if m == leader else None, instance=ids[m])
    h.settle()
    old_b = b.value.member_id
    # i-b restarts: it comes back without its member id
    rejoin = h.join(instance="i-b", version=8)
    assert not rejoin.done  # answered once the new member id is persisted
    h.settle()
    r = rejoin.value
    assert r.error == E.none
    assert r.member_id != old_b
    assert r.generation_id == 1  # no rebalance
    assert r.leader == leader
    assert r.members == ()
    group = h.classic_group()
    assert group.state_name == "Stable"
    assert group.generation == 1
    assert h.sync(r.member_id, 1, instance="i-b").value.assignment == b"i-b"
    # the old incarnation is fenced
    assert h.heartbeat(old_b, 1, instance="i-b") == E.fenced_instance_id
    assert h.heartbeat(r.member_id, 1, instance="i-b") == E.none
    error, _ = h.commit(old_b, 1, {("t", 0): 1}, instance="i-b")
    assert error == E.fenced_instance_id
    # a replay of the log knows the new member id
    assert snapshot(h.replayed().groups["g"]) == snapshot(group)  # type: ignore[arg-type]


def test_static_leader_restart_skips_the_assignment_from_v9() -> None:
    h = Harness()
    a = h.join(instance="i-a")
    h.settle()
    leader = a.value.member_id
    h.sync(leader, 1, {leader: b"mine"}, instance="i-a")
    h.settle()
    rejoin = h.join(instance="i-a", version=9)
    h.settle()
    r = rejoin.value
    assert r.leader == r.member_id
    assert r.skip_assignment  # KIP-814
    assert [m.member_id for m in r.members] == [r.member_id]
    old_style = h.join(instance="i-a", version=5)
    h.settle()
    # before v9 the old leader id is returned, so the restarted leader does not reassign
    assert old_style.value.leader == r.member_id != old_style.value.member_id


def test_second_live_instance_with_the_same_id_is_fenced() -> None:
    h = Harness()
    a = h.join(instance="i-a")
    h.settle()
    member = a.value.member_id
    assert h.join("someone-else", instance="i-a").value.error == E.fenced_instance_id
    assert h.sync("someone-else", 1, instance="i-a").value.error == E.fenced_instance_id
    assert h.join(member, instance="unknown").value.error == E.unknown_member_id


def test_static_member_that_changes_protocols_triggers_a_rebalance() -> None:
    h = Harness()
    a = h.join(instance="i-a")
    h.settle()
    h.sync(a.value.member_id, 1, {a.value.member_id: b"x"}, instance="i-a")
    h.settle()
    rejoin = h.join(instance="i-a", protocols=(("roundrobin", b""), *RANGE))
    h.settle()
    assert rejoin.value.generation_id == 2
    assert rejoin.value.protocol_name == "roundrobin"


def test_leave_group() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.shard.leave_group("g", [(follower, None, "bye"), ("nobody", None, None)]) == (
        E.none,
        [E.none, E.unknown_member_id],
    )
    assert h.classic_group().state_name == "PreparingRebalance"
    # Kafka answers each member UNKNOWN_MEMBER_ID when the group does not exist
    assert h.shard.leave_group("missing", [(leader, None, None)]) == (
        E.none,
        [E.unknown_member_id],
    )
    reply = h.join(leader)
    assert reply.value.generation_id == 2
    assert len(reply.value.members) == 1
    writes = len(h.services.log)
    assert h.shard.leave_group("g", [(leader, None, None)]) == (E.none, [E.none])
    h.settle()
    group = h.classic_group()
    assert group.state_name == "Empty"
    assert group.generation == 3
    assert group.protocol_type == "consumer"  # kept, as ListGroups shows it
    decoded = decode_record(*h.services.log[writes])
    assert decoded is not None
    value = present(decoded.value)
    assert value.members == ()
    assert value.generation == 3


def test_leave_of_a_static_member_by_instance_id() -> None:
    h = Harness()
    a = h.join(instance="i-a")
    h.settle()
    assert h.shard.leave_group("g", [("", "i-a", None)]) == (E.none, [E.none])
    assert h.shard.leave_group("g", [("", "i-a", None)]) == (E.none, [E.unknown_member_id])
    assert a.value.member_id not in h.classic_group().members


def test_a_member_leaving_while_parked_gets_unknown_member_id() -> None:
    h = Harness()
    leader, _follower = h.stable_group(2)
    parked = h.join(leader)
    assert h.shard.leave_group("g", [(leader, None, None)]) == (E.none, [E.none])
    assert parked.value.error == E.unknown_member_id


def test_offset_commit_member_and_generation_checks() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.commit(follower, 1, {("t", 0): 5})[0] == E.none
    assert h.commit(follower, 0, {("t", 0): 6})[0] == E.illegal_generation
    assert h.commit("nobody", 1, {("t", 0): 6})[0] == E.unknown_member_id
    # a commit from outside the group while it has members
    assert h.commit("", -1, {("t", 0): 6})[0] == E.unknown_member_id
    assert h.committed() == {("t", 0): 5}
    # during the sync phase the member must wait for its assignment
    h.join(leader)
    h.join(follower)
    assert h.classic_group().state_name == "CompletingRebalance"
    assert h.commit(follower, 2, {("t", 0): 7})[0] == E.rebalance_in_progress


def test_commits_outside_a_group() -> None:
    h = Harness()
    # a group that does not exist: generation -1 creates a "simple" group
    assert h.commit("", -1, {("t", 0): 3}, group="simple")[0] == E.none
    assert h.committed("simple") == {("t", 0): 3}
    assert h.shard.groups["simple"].listed().protocol_type == ""
    # a generation of a group that does not exist
    assert h.commit("m", 4, {("t", 0): 3}, group="nope", version=8)[0] == E.illegal_generation
    assert h.commit("m", 4, {("t", 0): 3}, group="nope", version=9)[0] == E.group_id_not_found
    # an empty group accepts them too
    h.stable_group(1)
    h.shard.leave_group("g", [(h.classic_group().leader_id or "", None, None)])
    h.settle()
    assert h.commit("", -1, {("t", 1): 9})[0] == E.none


def test_metadata_size_limit_is_per_partition() -> None:
    h = Harness(offset_metadata_max_bytes=4)
    error, errors = h.commit("", -1, {("t", 0): 1, ("t", 1): 2}, metadata="12345")
    assert error == E.none
    assert set(errors.values()) == {E.offset_metadata_too_large}
    error, errors = h.commit("", -1, {("t", 0): 1}, metadata="1234")
    assert errors == {("t", 0): E.none}


def test_replay_rebuilds_groups_and_offsets() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.commit(leader, 1, {("t", 0): 10, ("t", 1): 11})
    h.commit(follower, 1, {("t", 1): 12})
    h.commit("", -1, {("u", 0): 1}, group="simple")
    replayed = h.replayed()
    assert snapshot(replayed.groups["g"]) == snapshot(h.classic_group())  # type: ignore[arg-type]
    assert replayed.offsets.committed == h.shard.offsets.committed
    assert set(replayed.groups) == {"g", "simple"}
    # loaded members must heartbeat again within their session
    group = replayed.groups["g"]
    assert group.state_name == "Stable"
    assert replayed.timer.is_scheduled(f"heartbeat-g-{leader}")


def test_unload_answers_parked_requests_not_coordinator() -> None:
    h = Harness()
    leader, _follower = h.stable_group(2)
    parked = h.join(leader)
    h.shard.on_unloaded()
    assert parked.value.error == E.not_coordinator
    assert h.classic_group().state is GroupState.DEAD
    assert len(h.shard.timer) == 0


def test_duplicate_join_requests_are_both_answered() -> None:
    h = Harness()
    first = h.join(version=3)
    member = h.classic_group().leader_id
    assert member is not None
    again = h.join(member, version=3)  # a client retrying the same JoinGroup
    h.settle()
    assert first.value == again.value
    assert first.value.error == E.none


def test_describe_and_list() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    d = h.shard.describe_group("g")
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert {m.member_id: m.assignment for m in d.members} == {leader: b"a0", follower: b"a1"}
    assert all(m.metadata == RANGE[0][1] and m.client_host == "/127.0.0.1" for m in d.members)
    h.join(leader)
    d = h.shard.describe_group("g")
    assert d.state == "PreparingRebalance"
    assert d.protocol_data == ""
    # as Kafka: no metadata outside Stable, the last assignment kept until the next sync
    assert all(m.metadata == b"" for m in d.members)
    assert {m.member_id: m.assignment for m in d.members} == {leader: b"a0", follower: b"a1"}
    missing = h.shard.describe_group("missing")
    assert (missing.state, missing.members, missing.error) == ("Dead", (), E.none)
    h.commit("", -1, {("t", 0): 1}, group="simple")
    assert {g.group_id for g in h.shard.list_groups()} == {"g", "simple"}
    assert [g.group_id for g in h.shard.list_groups(states=["empty"])] == ["simple"]
    assert [g.group_id for g in h.shard.list_groups(states=["PreparingRebalance"])] == ["g"]
    assert len(h.shard.list_groups(types=["Classic"])) == 2
    assert h.shard.list_groups(types=["consumer"]) == []


def test_a_new_group_is_persisted_empty_even_when_its_first_member_is_parked() -> None:
    h = Harness(initial_rebalance_delay_ms=1000)
    parked = h.join(version=3)
    h.settle()
    assert not parked.done
    decoded = decode_record(*h.services.log[0])
    assert decoded is not None
    assert present(decoded.value).members == ()
    # a coordinator failing over now finds an empty group, not a half-joined one
    assert h.replayed().groups["g"].state_name == "Empty"
