"""The classic protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, static members,
rebalances, and the errors a member can provoke."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.polling import wait_for
from tests.compat import flows
from tests.compat.flows import Broker, assignment, subscription
from tests.compat.groups.support import (
    ALL,
    MEMBERS,
    TOPIC,
    commit,
    describe,
    heartbeat,
    join,
    join_new,
    leave,
    stable_member,
    sync,
)
from tests.compat.pair import Pair


@pytest.mark.parametrize("version", range(10))
def test_join_a_new_group(pair: Pair, version: int) -> None:
    """v0-v3 join at once; v4+ first answer MEMBER_ID_REQUIRED with the id to join with."""
    group = f"compat-join-v{version}"

    def flow(b: Broker) -> None:
        j = join_new(b, group, version, label="a new member")
        b.step(
            "its SyncGroup",
            sync(
                b, group, j.generation_id, j.member_id, {j.member_id: ALL}, version=min(5, version)
            ),
        )

    flows.run(pair, f"JoinGroup v{version}", flow)


@pytest.mark.parametrize(
    ("what", "kw"),
    [
        ("session timeout below group.min.session.timeout.ms", {"session_ms": 1000}),
        ("session timeout above group.max.session.timeout.ms", {"session_ms": 1_800_001}),
        ("empty protocol type", {"protocol_type": ""}),
        ("no protocols", {"protocols": ()}),
        ("an unknown member id", {"member_id": "compat-nobody"}),
    ],
)
@pytest.mark.parametrize("version", [3, 9])
def test_join_refused(pair: Pair, what: str, kw: dict[str, Any], version: int) -> None:
    group = f"compat-join-refused-{version}-{what.split()[0]}-{len(what)}"
    flows.run(
        pair,
        f"JoinGroup v{version}: {what}",
        lambda b: b.step("join", join(b, group, version, **kw)),
    )


def test_join_empty_group_id(pair: Pair) -> None:
    flows.run(pair, "JoinGroup v9: empty group id", lambda b: b.step("join", join(b, "")))


def test_join_other_protocol_type_of_a_live_group(pair: Pair) -> None:
    group = "compat-join-type"

    def flow(b: Broker) -> None:
        stable_member(b, group)
        b.step(
            "a member of protocol type connect", join(b, group, protocol_type="connect", conn="b")
        )
        b.step(
            "a member with no protocol in common",
            join(b, group, protocols=(("roundrobin", subscription(TOPIC)),), conn="c"),
        )

    flows.run(pair, "JoinGroup: a second member that does not fit", flow)


def test_static_members(pair: Pair) -> None:
    """group.instance.id: a rejoin with the instance id and no member id replaces the member
    (the old id is fenced); a join naming the instance with another member id is fenced."""
    group = "compat-static"

    def flow(b: Broker) -> None:
        j = join_new(b, group, 5, label="static member", instance="i-1")
        s = sync(b, group, j.generation_id, j.member_id, {j.member_id: ALL}, instance="i-1")
        b.step("its SyncGroup", s)
        again = join(b, group, 5, instance="i-1", conn="b")
        b.step("the instance joins again without its member id", again)
        b.step(
            "the old member id's heartbeat",
            heartbeat(b, group, j.generation_id, j.member_id, instance="i-1"),
        )
        b.step(
            "the new member id's heartbeat",
            heartbeat(b, group, again.generation_id, again.member_id, instance="i-1"),
        )
        b.step(
            "a join naming the instance with another member id",
            join(b, group, 5, member_id="compat-other", instance="i-1"),
        )
        b.step(
            "a SyncGroup of the old member id",
            sync(b, group, j.generation_id, j.member_id, instance="i-1"),
        )
        b.step(
            "a commit of the old member id",
            commit(
                b,
                group,
                {(TOPIC, 0): 1},
                7,
                generation=j.generation_id,
                member=j.member_id,
                instance="i-1",
            ),
        )
        b.step(
            "LeaveGroup of the instance with the old member id",
            leave(b, group, [(j.member_id, "i-1")]),
        )
        b.step(
            "LeaveGroup of the instance with the new member id",
            leave(b, group, [(again.member_id, "i-1")]),
        )
        b.step("describe", describe(b, group))

    flows.run(pair, "Static membership", flow, sort=MEMBERS)


def test_sync_errors(pair: Pair) -> None:
    group = "compat-sync"

    def flow(b: Broker) -> None:
        j = join_new(b, group)
        gen, member = j.generation_id, j.member_id
        b.step("wrong generation", sync(b, group, gen + 1, member, {member: ALL}))
        b.step("unknown member", sync(b, group, gen, "compat-nobody", {}))
        b.step(
            "another protocol type",
            sync(b, group, gen, member, {member: ALL}, protocol_type="connect"),
        )
        b.step(
            "another protocol name",
            sync(b, group, gen, member, {member: ALL}, protocol_name="roundrobin"),
        )
        b.step(
            "no protocol type and name (v3)",
            sync(b, group, gen, member, {member: ALL}, version=3),
        )
        b.step("the leader's SyncGroup", sync(b, group, gen, member, {member: ALL}))
        b.step("SyncGroup again once stable", sync(b, group, gen, member, {}))
        b.step("an unknown group", sync(b, "compat-sync-nope", 1, member, {}))
        b.step("an empty group id", sync(b, "", 1, member, {}))

    flows.run(pair, "SyncGroup", flow)


def test_rebalance(pair: Pair) -> None:
    """A second member joins a stable group: the first hears REBALANCE_IN_PROGRESS at its
    heartbeat, rejoins, both sync the leader's assignment; then heartbeats of a wrong
    generation or an unknown member."""
    group = "compat-rebalance"

    def flow(b: Broker) -> None:
        m1, gen1 = stable_member(b, group)
        b.step("heartbeat of the stable member", heartbeat(b, group, gen1, m1))
        first = join(b, group, conn="b")
        b.step("a second member's first JoinGroup", first)
        parked = join(b, group, member_id=first.member_id, conn="b", send_only=True)
        r = wait_for(
            lambda: (h := heartbeat(b, group, gen1, m1)).error_code != 0 and h,
            30,
            "the rebalance to start",
        )
        b.step("heartbeat of the first member during the rebalance", r)
        b.step("describe during the rebalance", describe(b, group))
        j1 = join(b, group, member_id=m1)
        b.step("the first member rejoins", j1)
        j2 = b.receive(parked)
        b.step("the second member's parked JoinGroup", j2)
        gen2 = j1.generation_id
        b.step("a heartbeat of the old generation", heartbeat(b, group, gen1, m1))
        follower = sync(b, group, gen2, j2.member_id, conn="b", send_only=True)
        plan = {
            j1.member_id: assignment({TOPIC: [0, 1]}),
            j2.member_id: assignment({TOPIC: [2]}),
        }
        b.step("the leader's SyncGroup", sync(b, group, gen2, j1.member_id, plan))
        b.step("the follower's parked SyncGroup", b.receive(follower))
        b.step("heartbeat of the follower", heartbeat(b, group, gen2, j2.member_id))
        b.step("heartbeat of a wrong generation", heartbeat(b, group, gen2 + 5, m1))
        b.step("heartbeat of an unknown member", heartbeat(b, group, gen2, "compat-nobody"))
        b.step("heartbeat v0 of an unknown group", heartbeat(b, "compat-hb-nope", 1, m1, 0))
        b.step("heartbeat of an empty group id", heartbeat(b, "", 1, m1))
        b.step("describe the stable group", describe(b, group, version=5, ops=True))

    flows.run(pair, "Rebalance", flow, sort=MEMBERS)


@pytest.mark.parametrize("version", [0, 2, 3, 4, 5])
def test_leave(pair: Pair, version: int) -> None:
    group = f"compat-leave-v{version}"

    def flow(b: Broker) -> None:
        m1, _ = stable_member(b, group, instance="i-1" if version >= 3 else None)
        if version >= 3:
            b.step(
                "a batch of the member, an unknown member and an unknown instance",
                leave(
                    b,
                    group,
                    [(m1, "i-1"), ("compat-nobody", None), ("", "i-nobody")],
                    version,
                ),
            )
        else:
            b.step("an unknown member", leave(b, group, [("compat-nobody", None)], version))
            b.step("the member", leave(b, group, [(m1, None)], version))
        b.step("the group after", describe(b, group))
        b.step(
            "an unknown group", leave(b, "compat-leave-nope", [("compat-nobody", None)], version)
        )

    flows.run(pair, f"LeaveGroup v{version}", flow, sort=MEMBERS)
