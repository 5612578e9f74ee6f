"""KIP-848's consumer protocol: ConsumerGroupHeartbeat and ConsumerGroupDescribe, static
members, two members settling, and groups that mix or migrate between the protocols."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.kafka_client import builder
from cluster.polling import wait_for
from tests.compat import flows
from tests.compat.flows import Broker
from tests.compat.groups.support import (
    CG_DESCRIBE,
    CG_HEARTBEAT,
    DELETE,
    MS,
    TOPIC,
    commit,
    describe,
    fetch_groups,
    heartbeat,
    join,
    join_new,
    leave,
    stable_member,
    sync,
)
from tests.compat.pair import Pair


def cg_heartbeat(
    b: Broker,
    group: str,
    member_id: str,
    epoch: int,
    version: int = 1,
    topics: tuple[str, ...] | None = None,
    regex: str | None = None,
    assignor: str | None = None,
    instance: str | None = None,
    rebalance_ms: int = -1,
    owned: dict[str, list[int]] | None = None,
    conn: str = "main",
) -> Any:
    hb = builder(CG_HEARTBEAT, version)
    return b.call(
        CG_HEARTBEAT,
        version,
        conn,
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance,
        rack_id=None,
        rebalance_timeout=rebalance_ms * MS,
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=(() if epoch == 0 else None)
        if owned is None
        else tuple(
            hb.TopicPartitions(topic_id=b.topic_id(t), partitions=tuple(ps))
            for t, ps in owned.items()
        ),
    )


def cg_join(b: Broker, group: str, member_id: str, label: str = "", **kw: Any) -> int:
    """A member joins (epoch 0) and heartbeats until it owns its target assignment: its
    epoch then (the join's answer recorded as a step when `label` is given)."""
    kw.setdefault("topics", (TOPIC,))
    kw.setdefault("rebalance_ms", 30_000)
    r = cg_heartbeat(b, group, member_id, 0, **kw)
    if label:
        b.step(f"{label}: joins", r)
    assert r.error_code == 0, r
    member_id = r.member_id
    epoch = r.member_epoch

    def settled() -> Any:
        nonlocal epoch
        h = cg_heartbeat(b, group, member_id, epoch)
        epoch = h.member_epoch if h.error_code == 0 else epoch
        return h.error_code == 0 and h.assignment is None and h

    wait_for(settled, 30, f"{member_id} to settle")
    return epoch


def describe_consumer(b: Broker, *groups: str, version: int = 1) -> Any:
    return b.call(CG_DESCRIBE, version, group_ids=groups, include_authorized_operations=True)


# ConsumerGroupDescribe lists a member's topics and partitions in no particular order.
CG_SORT = [
    "groups.*.members",
    "groups.*.members.*.assignment.topic_partitions",
    "groups.*.members.*.target_assignment.topic_partitions",
]


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_join_and_describe(pair: Pair, version: int) -> None:
    group = f"compat-cg-v{version}"
    member = "compat-member-aaaaaaaaa" if version else ""

    def flow(b: Broker) -> None:
        r = cg_heartbeat(b, group, member, 0, version, topics=(TOPIC,), rebalance_ms=30_000)
        b.step("join with epoch 0", r)
        b.step("describe", describe_consumer(b, group, version=version))
        b.step(
            "heartbeat with its epoch",
            cg_heartbeat(b, group, r.member_id, r.member_epoch, version),
        )
        b.step("describe after", describe_consumer(b, group, "compat-cg-nope", version=version))
        b.step("DescribeGroups of it", describe(b, group, ops=True))
        b.step(
            "leave with epoch -1",
            cg_heartbeat(b, group, r.member_id, -1, version),
        )
        b.step("describe the empty group", describe_consumer(b, group, version=version))

    flows.run(
        pair,
        f"ConsumerGroupHeartbeat v{version}",
        flow,
        # v0: the coordinator makes up the member id (a random Uuid)
        masked=["member_id", "groups.*.members.*.member_id"] if not version else [],
        sort=CG_SORT,
    )


def test_consumer_group_errors(pair: Pair) -> None:
    group = "compat-cg-errors"
    m1 = "compat-member-errors-1"

    def flow(b: Broker) -> None:
        cg_join(b, group, m1, label="a member")
        b.step("a fenced epoch", cg_heartbeat(b, group, m1, 7))
        b.step("an unknown member", cg_heartbeat(b, group, "compat-nobody", 1))
        b.step(
            "an unknown assignor",
            cg_heartbeat(
                b, group, "compat-member-x", 0, topics=(TOPIC,), assignor="nope", rebalance_ms=1000
            ),
        )
        b.step(
            "an invalid regex",
            cg_heartbeat(b, group, "compat-member-y", 0, regex="[", rebalance_ms=1000),
        )
        # (a regex matching TOPIC only: Kafka resolves a new regex in the background, Rafka at
        # once, so the partitions of other topics it matched would come at another heartbeat)
        b.step(
            "both topic names and a regex",
            cg_heartbeat(
                b,
                group,
                "compat-member-y",
                0,
                topics=(TOPIC,),
                regex="compat-groups",
                rebalance_ms=1000,
            ),
        )
        b.step(
            "a join without a rebalance timeout",
            cg_heartbeat(b, group, "compat-member-z", 0, topics=(TOPIC,)),
        )
        b.step(
            "a join without subscription",
            cg_heartbeat(b, group, "compat-member-z", 0, rebalance_ms=1000),
        )
        b.step(
            "a join with an empty member id (v1)",
            cg_heartbeat(b, group, "", 0, topics=(TOPIC,), rebalance_ms=1000),
        )
        b.step("an empty group id", cg_heartbeat(b, "", m1, 0, topics=(TOPIC,), rebalance_ms=1000))
        b.step("epoch -2 without an instance id", cg_heartbeat(b, group, m1, -2))
        b.step("leave with -1", cg_heartbeat(b, group, m1, -1))
        b.step("leave again", cg_heartbeat(b, group, m1, -1))

    flows.run(pair, "ConsumerGroupHeartbeat errors", flow)


def test_consumer_group_static_member(pair: Pair) -> None:
    group = "compat-cg-static"

    def flow(b: Broker) -> None:
        cg_join(b, group, "compat-static-a", label="static member", instance="i-1")
        b.step(
            "another member id with the same instance id",
            cg_heartbeat(
                b, group, "compat-static-b", 0, topics=(TOPIC,), instance="i-1", rebalance_ms=30_000
            ),
        )
        b.step(
            "temporary leave with -2", cg_heartbeat(b, group, "compat-static-a", -2, instance="i-1")
        )
        b.step("describe", describe_consumer(b, group))
        b.step(
            "the instance rejoins with another member id",
            cg_heartbeat(
                b, group, "compat-static-b", 0, topics=(TOPIC,), instance="i-1", rebalance_ms=30_000
            ),
        )
        b.step("describe after", describe_consumer(b, group))

    flows.run(pair, "ConsumerGroupHeartbeat: static member", flow, sort=CG_SORT)


def test_consumer_group_two_members(pair: Pair) -> None:
    group = "compat-cg-two"

    def flow(b: Broker) -> None:
        epoch = cg_join(b, group, "compat-two-a", label="first member")
        r = cg_heartbeat(b, group, "compat-two-b", 0, topics=(TOPIC,), rebalance_ms=30_000)
        b.step("second member joins", r)
        b.step("describe while the first still owns everything", describe_consumer(b, group))

        settle(
            b,
            group,
            {"compat-two-a": (epoch, {TOPIC: [0, 1, 2]}), "compat-two-b": (r.member_epoch, {})},
        )
        b.step("describe once both own their target", describe_consumer(b, group))
        b.step("commit with a stale epoch", commit(b, group, {(TOPIC, 0): 1}, 9, 1, "compat-two-a"))
        b.step(
            "commit of an unknown member", commit(b, group, {(TOPIC, 0): 1}, 9, 1, "compat-nobody")
        )
        b.step(
            "OffsetFetch v9 with an unknown member",
            fetch_groups(b, {group: {TOPIC: [0]}}, member=("compat-nobody", 1)),
        )
        b.step(
            "OffsetFetch v9 with a stale epoch",
            fetch_groups(b, {group: {TOPIC: [0]}}, member=("compat-two-a", 0)),
        )
        b.step("DeleteGroups of the live group", b.call(DELETE, 2, groups_names=(group,)))

    flows.run(pair, "Consumer group of two members", flow, sort=CG_SORT)


def settle(b: Broker, group: str, members: dict[str, tuple[int, dict[str, list[int]]]]) -> None:
    """Heartbeat the members (each with its epoch and what it owns, reporting it) until every
    member owns its target assignment."""
    epochs = {m: e for m, (e, _) in members.items()}
    owned = {m: o for m, (_, o) in members.items()}

    def round_done() -> bool:
        done = True
        for member in epochs:
            h = cg_heartbeat(b, group, member, epochs[member], owned=owned[member])
            assert h.error_code == 0, h
            epochs[member] = h.member_epoch
            if h.assignment is not None:
                owned[member] = {
                    TOPIC: sorted(p for tp in h.assignment.topic_partitions for p in tp.partitions)
                }
                done = False
        d = describe_consumer(b, group).groups[0]
        return done and all(m.assignment == m.target_assignment for m in d.members)

    wait_for(round_done, 60, "the members' assignments to settle", interval=0.2)


def test_mixing_protocols(pair: Pair) -> None:
    """A group id has one protocol while it has members: the other protocol's requests are
    refused as Kafka 4.4 refuses them, and a group id changes protocol once empty. (Kafka's
    online migration of live groups of the consumer protocol type is in
    test_online_migration.)"""

    def flow(b: Broker) -> None:
        classic, consumer = "compat-mix-classic", "compat-mix-consumer"
        member, _ = stable_member(b, classic)
        b.step(
            "ConsumerGroupHeartbeat with an epoch to a classic group",
            cg_heartbeat(b, classic, "compat-mix-a", 3),
        )
        b.step("ConsumerGroupDescribe of a classic group", describe_consumer(b, classic))
        connect = "compat-mix-connect"
        j = join_new(b, connect, protocol_type="connect", protocols=(("v1", b"x"),))
        sync(
            b,
            connect,
            j.generation_id,
            j.member_id,
            {j.member_id: b""},
            protocol_type="connect",
            protocol_name="v1",
        )
        b.step(
            "ConsumerGroupHeartbeat joining a live classic group of protocol type connect",
            cg_heartbeat(b, connect, "compat-mix-a", 0, topics=(TOPIC,), rebalance_ms=30_000),
        )
        cg_join(b, consumer, "compat-mix-b", label="a consumer member")
        b.step(
            "JoinGroup of protocol type connect to a consumer group",
            join(b, consumer, protocol_type="connect", protocols=(("v1", b"x"),)),
        )
        b.step("SyncGroup of a consumer member", sync(b, consumer, 2, "compat-mix-b", {}))
        b.step("Heartbeat of a consumer member", heartbeat(b, consumer, 2, "compat-mix-b"))
        b.step("Heartbeat of an unknown member", heartbeat(b, consumer, 2, "compat-nobody"))
        b.step("DescribeGroups of a consumer group", describe(b, consumer))
        b.step(
            "LeaveGroup of a consumer member and an unknown one",
            leave(b, consumer, [("compat-mix-b", None), ("compat-nobody", None)]),
        )
        b.step("ConsumerGroupDescribe after", describe_consumer(b, consumer))
        leave(b, classic, [(member, None)])
        b.step(
            "ConsumerGroupHeartbeat joining the emptied classic group",
            cg_heartbeat(b, classic, "compat-mix-c", 0, topics=(TOPIC,), rebalance_ms=30_000),
        )
        b.step("DescribeGroups after", describe(b, classic))
        b.step("ConsumerGroupDescribe after the takeover", describe_consumer(b, classic))
        b.step("JoinGroup to the emptied consumer group", join_new(b, consumer))

    flows.run(pair, "Mixing protocols", flow, sort=CG_SORT)


def test_online_migration(pair: Pair) -> None:
    """Kafka 4.4 migrates a live group of the consumer protocol type between the protocols
    (group.consumer.migration.policy=bidirectional); Rafka does not (allowlisted)."""

    def flow(b: Broker) -> None:
        classic, consumer = "compat-migrate-classic", "compat-migrate-consumer"
        stable_member(b, classic)
        b.step(
            "ConsumerGroupHeartbeat joining a live classic group",
            cg_heartbeat(b, classic, "compat-migrate-a", 0, topics=(TOPIC,), rebalance_ms=30_000),
        )
        cg_join(b, consumer, "compat-migrate-b")
        b.step("JoinGroup to a live consumer group", join(b, consumer))

    flows.run(pair, "Online migration", flow)
