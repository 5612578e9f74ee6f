"""Consumer groups: FindCoordinator, the classic protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup), the group admin APIs, committed offsets, and KIP-848's consumer protocol, with every
error a group client can provoke. Flows play the same requests on both brokers (flows.py);
member ids the brokers make up are compared by shape."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from cluster.kafka_client import builder
from cluster.polling import wait_for
from tests.compat import flows
from tests.compat.conftest import create_topics
from tests.compat.flows import Broker, assignment, subscription
from tests.compat.pair import Pair

COMMIT, FETCH_OFFSETS, FIND, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 9, 10, 11, 12, 13, 14
DESCRIBE, LIST, DELETE, OFFSET_DELETE, CG_HEARTBEAT, CG_DESCRIBE = 15, 16, 42, 47, 68, 69
TOPIC = "compat-groups"  # 3 partitions
OTHER = "compat-groups-other"  # 1 partition, that no member subscribes to
MS = datetime.timedelta(milliseconds=1)
NONE, GROUP, TRANSACTION, SHARE = 0, 0, 1, 2


@pytest.fixture(scope="module", autouse=True)
def topics(pair: Pair) -> None:
    create_topics(pair, NewTopic(TOPIC, 3, 1), NewTopic(OTHER, 1, 1))
    flows.wait_for_coordinators(pair)


# -- FindCoordinator ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_of_a_group(pair: Pair, version: int) -> None:
    pair.call(
        f"FindCoordinator v{version}: a group",
        FIND,
        version,
        key="compat-find",
        key_type=GROUP,
    )


@pytest.mark.parametrize("version", [1, 3])
def test_find_coordinator_of_a_transactional_id(pair: Pair, version: int) -> None:
    pair.call(
        f"FindCoordinator v{version}: a transactional id",
        FIND,
        version,
        key="compat-find-txn",
        key_type=TRANSACTION,
    )


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_batched(pair: Pair, version: int) -> None:
    pair.call(
        f"FindCoordinator v{version}: three groups at once",
        FIND,
        version,
        key_type=GROUP,
        coordinator_keys=("compat-find-a", "compat-find-b", "compat-find-c"),
    )


@pytest.mark.parametrize(
    ("what", "version", "key_type", "keys"),
    [
        ("an empty group id", 3, GROUP, ("",)),
        ("an empty group id among others", 4, GROUP, ("compat-find-a", "")),
        ("an empty transactional id", 3, TRANSACTION, ("",)),
        ("an unknown key type", 3, 5, ("compat-find",)),
        ("an unknown key type, batched", 4, 5, ("compat-find",)),
        ("a share key before v6", 5, SHARE, ("compat-find:AAAAAAAAAAAAAAAAAAAAAA:0",)),
        ("a share key without a partition", 6, SHARE, ("compat-find:AAAAAAAAAAAAAAAAAAAAAA",)),
        ("a share key with a bad topic id", 6, SHARE, ("compat-find:nope:0",)),
        ("a share key with a bad partition", 6, SHARE, ("compat-find:AAAAAAAAAAAAAAAAAAAAAA:x",)),
        ("no keys", 4, GROUP, ()),
    ],
)
def test_find_coordinator_invalid_keys(
    pair: Pair, what: str, version: int, key_type: int, keys: tuple[str, ...]
) -> None:
    pair.call(
        f"FindCoordinator v{version}: {what}",
        FIND,
        version,
        key=keys[0] if keys else "",
        key_type=key_type,
        coordinator_keys=keys,
    )


# -- the classic protocol -----------------------------------------------------------------------


def join(
    b: Broker,
    group: str,
    version: int = 9,
    member_id: str = "",
    conn: str = "main",
    instance: str | None = None,
    session_ms: int = 10_000,
    rebalance_ms: int = 20_000,
    protocol_type: str = "consumer",
    protocols: tuple[tuple[str, bytes], ...] | None = None,
    send_only: bool = False,
) -> Any:
    """JoinGroup (answered, or only sent with `send_only`: a join that will park)."""
    jb = builder(JOIN, version)
    if protocols is None:
        protocols = (("range", subscription(TOPIC)),)
    fields = dict(
        group_id=group,
        session_timeout=session_ms * MS,
        rebalance_timeout=rebalance_ms * MS,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=tuple(jb.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols),
        reason=None,
    )
    if send_only:
        return b.send(JOIN, version, conn, **fields)
    return b.call(JOIN, version, conn, **fields)


def join_new(b: Broker, group: str, version: int = 9, label: str = "", **kw: Any) -> Any:
    """A new member's join: from v4 the MEMBER_ID_REQUIRED round first, then the join with the
    id it gave (steps recorded when `label` is given)."""
    r = join(b, group, version, **kw)
    if label:
        b.step(f"{label} (first JoinGroup)", r)
    if version >= 4 and r.error_code == 79:  # MEMBER_ID_REQUIRED
        r = join(b, group, version, member_id=r.member_id, **kw)
        if label:
            b.step(f"{label} (JoinGroup with its id)", r)
    return r


def sync(
    b: Broker,
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
    version: int = 5,
    conn: str = "main",
    instance: str | None = None,
    protocol_type: str | None = "consumer",
    protocol_name: str | None = "range",
    send_only: bool = False,
) -> Any:
    sb = builder(SYNC, version)
    fields = dict(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=tuple(
            sb.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in (assignments or {}).items()
        ),
    )
    if send_only:
        return b.send(SYNC, version, conn, **fields)
    return b.call(SYNC, version, conn, **fields)


def heartbeat(
    b: Broker,
    group: str,
    generation: int,
    member_id: str,
    version: int = 4,
    instance: str | None = None,
    conn: str = "main",
) -> Any:
    return b.call(
        HEARTBEAT,
        version,
        conn,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
    )


def leave(b: Broker, group: str, members: list[tuple[str, str | None]], version: int = 5) -> Any:
    lb = builder(LEAVE, version)
    if version < 3:
        return b.call(LEAVE, version, group_id=group, member_id=members[0][0])
    return b.call(
        LEAVE,
        version,
        group_id=group,
        members=tuple(
            lb.MemberIdentity(member_id=m, group_instance_id=i, reason=None) for m, i in members
        ),
    )


def stable_member(b: Broker, group: str, instance: str | None = None) -> tuple[str, int]:
    """A one-member group, joined and synced with all of TOPIC: (member id, generation)."""
    j = join_new(b, group, instance=instance)
    assert j.error_code == 0, j
    s = sync(b, group, j.generation_id, j.member_id, {j.member_id: ALL}, instance=instance)
    assert s.error_code == 0, s
    return j.member_id, j.generation_id


ALL = assignment({TOPIC: [0, 1, 2]})


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


# -- DescribeGroups, ListGroups, DeleteGroups -----------------------------------------------------

# Kafka answers the groups of a DescribeGroups per coordinator partition, and a group's members
# (in DescribeGroups and the leader's JoinGroup), in its hash maps' order: clients find them by
# id.
BY_GROUP = ["groups", "groups.*.members"]
MEMBERS = ["members", "groups.*.members"]


def describe(b: Broker, *groups: str, version: int = 5, ops: bool = False) -> Any:
    return b.call(DESCRIBE, version, groups=groups, include_authorized_operations=ops)


@pytest.mark.parametrize("version", range(6))
def test_describe_groups(pair: Pair, version: int) -> None:
    group = f"compat-describe-v{version}"

    def flow(b: Broker) -> None:
        stable_member(b, group)
        b.step(
            "a stable group and an unknown one",
            describe(b, group, "compat-describe-nope", version=version, ops=version >= 3),
        )

    flows.run(pair, f"DescribeGroups v{version}", flow, sort=BY_GROUP)


def only(prefix: str) -> Callable[[Any], list[Any]]:
    """ListGroups' groups whose id starts with `prefix`, sorted (other cases' groups live on
    the same brokers)."""

    def pick(r: Any) -> list[Any]:
        return sorted(
            (g for g in r.groups if g.group_id.startswith(prefix)), key=lambda g: g.group_id
        )

    return pick


def test_list_groups(pair: Pair) -> None:
    prefix = "compat-list-"

    def flow(b: Broker) -> None:
        stable_member(b, prefix + "stable")
        commit(b, prefix + "empty", {(TOPIC, 0): 5}, 2)
        pick = only(prefix)
        for version in range(6):
            r = b.call(LIST, version, states_filter=(), types_filter=())
            b.step(f"v{version}", {"error_code": r.error_code, "groups": pick(r)})
        for states in (("Stable",), ("Empty",), ("stable", "EMPTY"), ("Dead",), ("nope",)):
            r = b.call(LIST, 4, states_filter=states, types_filter=())
            b.step(f"v4 states {states}", {"error_code": r.error_code, "groups": pick(r)})
        for types in (("classic",), ("consumer",), ("Classic", "share"), ("nope",)):
            r = b.call(LIST, 5, states_filter=(), types_filter=types)
            b.step(f"v5 types {types}", {"error_code": r.error_code, "groups": pick(r)})

    flows.run(pair, "ListGroups", flow)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_groups(pair: Pair, version: int) -> None:
    prefix = f"compat-delete-v{version}-"

    def flow(b: Broker) -> None:
        stable_member(b, prefix + "live")
        commit(b, prefix + "empty", {(TOPIC, 0): 5}, 2)
        r = b.call(
            DELETE,
            version,
            groups_names=(prefix + "live", prefix + "empty", prefix + "nope"),
        )
        b.step("a live group, an empty one, an unknown one", r)
        b.step(
            "the empty group's offsets after",
            fetch_offsets(b, prefix + "empty", {TOPIC: [0]}, 7),
        )
        b.step("delete again", b.call(DELETE, version, groups_names=(prefix + "empty",)))

    flows.run(pair, f"DeleteGroups v{version}", flow, sort=["results"])


def test_the_empty_group_id(pair: Pair) -> None:
    """Kafka keeps the empty group id working where pre-0.9 clients used it: offsets commit
    and fetch, DescribeGroups and DeleteGroups; the membership APIs refuse it."""

    def flow(b: Broker) -> None:
        b.step("OffsetCommit", commit(b, "", {(TOPIC, 0): 7}, 9))
        b.step("OffsetFetch v1", fetch_offsets(b, "", {TOPIC: [0]}, 1))
        b.step("OffsetFetch v8", fetch_groups(b, {"": None}, 8))
        b.step("DescribeGroups", describe(b, "", ops=True))
        b.step("OffsetDelete", b.call(OFFSET_DELETE, 0, group_id="", topics=()))
        b.step("DeleteGroups", b.call(DELETE, 2, groups_names=("",)))
        b.step("OffsetFetch after", fetch_offsets(b, "", {TOPIC: [0]}, 7))
        b.step("DeleteGroups again", b.call(DELETE, 2, groups_names=("",)))

    flows.run(pair, "The empty group id", flow)


# -- OffsetCommit, OffsetFetch, OffsetDelete ------------------------------------------------------


def commit(
    b: Broker,
    group: str,
    offsets: dict[tuple[str, int], int],
    version: int = 9,
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
    metadata: str | None = "",
    leader_epoch: int = -1,
) -> Any:
    cb = builder(COMMIT, version)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            cb.OffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=leader_epoch,
                committed_metadata=metadata,
            )
        )
    return b.call(
        COMMIT,
        version,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=instance,
        retention_time=-1,
        topics=tuple(
            cb.OffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )


def fetch_offsets(
    b: Broker,
    group: str,
    topics: dict[str, list[int]] | None,
    version: int = 7,
    require_stable: bool = False,
) -> Any:
    fb = builder(FETCH_OFFSETS, version)
    if version >= 8:
        return fetch_groups(b, {group: topics}, version, require_stable)
    topic_type = fb.OffsetFetchRequestTopic
    return b.call(
        FETCH_OFFSETS,
        version,
        group_id=group,
        topics=None
        if topics is None
        else tuple(topic_type(name=t, partition_indexes=tuple(p)) for t, p in topics.items()),
        require_stable=require_stable,
    )


def fetch_groups(
    b: Broker,
    groups: dict[str, dict[str, list[int]] | None],
    version: int = 9,
    require_stable: bool = False,
    member: tuple[str, int] | None = None,
) -> Any:
    fb = builder(FETCH_OFFSETS, version)
    return b.call(
        FETCH_OFFSETS,
        version,
        groups=tuple(
            fb.OffsetFetchRequestGroup(
                group_id=g,
                member_id=member[0] if member else None,
                member_epoch=member[1] if member else -1,
                topics=None
                if topics is None
                else tuple(
                    fb.OffsetFetchRequestTopics(name=t, partition_indexes=tuple(p))
                    for t, p in topics.items()
                ),
            )
            for g, topics in groups.items()
        ),
        require_stable=require_stable,
    )


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_simple_group(pair: Pair, version: int) -> None:
    """A commit outside any membership (generation -1): the group exists for its offsets."""
    group = f"compat-commit-v{version}"

    def flow(b: Broker) -> None:
        b.step(
            "two partitions",
            commit(
                b, group, {(TOPIC, 0): 10, (TOPIC, 1): 20}, version, metadata="m", leader_epoch=0
            ),
        )
        b.step(
            "unknown topic and partition",
            commit(b, group, {("compat-groups-nope", 0): 1, (TOPIC, 7): 1}, version),
        )
        b.step(
            "metadata of 4097 bytes",
            commit(b, group, {(TOPIC, 2): 1}, version, metadata="x" * 4097),
        )
        b.step(
            "metadata of 4096 bytes",
            commit(b, group, {(TOPIC, 2): 2}, version, metadata="x" * 4096),
        )
        b.step("null metadata", commit(b, group, {(TOPIC, 2): 3}, version, metadata=None))
        b.step("read back", fetch_offsets(b, group, {TOPIC: [0, 1, 2]}, 7))

    flows.run(pair, f"OffsetCommit v{version}", flow)


def test_offset_commit_membership_checks(pair: Pair) -> None:
    group = "compat-commit-members"

    def flow(b: Broker) -> None:
        member, gen = stable_member(b, group)
        for version in (2, 5, 7, 9):
            b.step(
                f"v{version} of the member",
                commit(b, group, {(TOPIC, 0): version}, version, gen, member),
            )
            b.step(
                f"v{version} of a wrong generation",
                commit(b, group, {(TOPIC, 0): 1}, version, gen + 1, member),
            )
            b.step(
                f"v{version} of an unknown member",
                commit(b, group, {(TOPIC, 0): 1}, version, gen, "compat-nobody"),
            )
            b.step(
                f"v{version} outside the membership (generation -1)",
                commit(b, group, {(TOPIC, 0): 1}, version),
            )
        b.step("a commit while rebalancing: join of a second member", join(b, group, conn="b"))

    flows.run(pair, "OffsetCommit to a live classic group", flow)


def test_offset_commits_keep_a_classic_session_alive(pair: Pair) -> None:
    """A classic member that commits every 2 s but sends no heartbeat for 1.5 session timeouts
    is still a member: Kafka counts an accepted OffsetCommit as a heartbeat while the group is
    Stable or PreparingRebalance."""
    group = "compat-commit-session"

    def flow(b: Broker) -> None:
        j = join_new(b, group, session_ms=6000)
        s = sync(b, group, j.generation_id, j.member_id, {j.member_id: ALL})
        assert j.error_code == 0, j
        assert s.error_code == 0, s
        for i in range(1, 5):
            time.sleep(2)  # the time that passes without a heartbeat is what is tested
            b.step(
                f"commit {i}, {2 * i} s after SyncGroup",
                commit(b, group, {(TOPIC, 0): i}, generation=j.generation_id, member=j.member_id),
            )
        b.step(
            "the first heartbeat, 8 s after SyncGroup",
            heartbeat(b, group, j.generation_id, j.member_id),
        )

    flows.run(pair, "OffsetCommit as a classic heartbeat", flow)


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch(pair: Pair, version: int) -> None:
    group = "compat-fetch-offsets"

    def flow(b: Broker) -> None:
        commit(b, group, {(TOPIC, 0): 10, (TOPIC, 1): 20}, 9, metadata="m", leader_epoch=0)
        b.step(
            "committed, not committed, unknown topic and partition",
            fetch_offsets(b, group, {TOPIC: [0, 1, 2, 9], "compat-groups-nope": [0]}, version),
        )
        b.step(
            "an unknown group", fetch_offsets(b, "compat-fetch-offsets-nope", {TOPIC: [0]}, version)
        )
        if version >= 2:
            b.step("every topic", fetch_offsets(b, group, None, version))
            b.step(
                "every topic of an unknown group",
                fetch_offsets(b, "compat-fetch-nope", None, version),
            )
        if version >= 7:
            b.step("require_stable", fetch_offsets(b, group, {TOPIC: [0]}, version, True))

    flows.run(pair, f"OffsetFetch v{version}", flow)


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_batched(pair: Pair, version: int) -> None:
    group = "compat-fetch-batched"

    def flow(b: Broker) -> None:
        commit(b, group, {(TOPIC, 0): 10}, 9)
        b.step(
            "three groups",
            fetch_groups(
                b,
                {group: {TOPIC: [0, 1]}, "compat-fetch-batched-nope": None, OTHER: {TOPIC: [0]}},
                version,
                require_stable=True,
            ),
        )

    flows.run(pair, f"OffsetFetch v{version}: batched groups", flow)


def test_offset_delete(pair: Pair) -> None:
    group = "compat-offset-delete"

    def fields(group: str, parts: dict[str, list[int]]) -> dict[str, Any]:
        ob = builder(OFFSET_DELETE, 0)
        return dict(
            group_id=group,
            topics=tuple(
                ob.OffsetDeleteRequestTopic(
                    name=t,
                    partitions=tuple(
                        ob.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                    ),
                )
                for t, ps in parts.items()
            ),
        )

    def flow(b: Broker) -> None:
        member, gen = stable_member(b, group)
        commit(b, group, {(TOPIC, 0): 1, (OTHER, 0): 1}, 9, gen, member)
        b.step(
            "a subscribed topic, another one, an unknown one",
            b.call(
                OFFSET_DELETE,
                0,
                **fields(group, {TOPIC: [0], OTHER: [0], "compat-groups-nope": [0]}),
            ),
        )
        b.step("offsets after", fetch_offsets(b, group, {TOPIC: [0], OTHER: [0]}))
        leave(b, group, [(member, None)])
        b.step(
            "the subscribed topic once the group is empty",
            b.call(OFFSET_DELETE, 0, **fields(group, {TOPIC: [0, 1]})),
        )
        b.step(
            "an unknown group", b.call(OFFSET_DELETE, 0, **fields("compat-od-nope", {TOPIC: [0]}))
        )
        b.step(
            "an unknown partition of a known topic",
            b.call(OFFSET_DELETE, 0, **fields(group, {OTHER: [0, 5], "compat-groups-nope": [1]})),
        )

    flows.run(pair, "OffsetDelete", flow)


# -- the consumer protocol (KIP-848) ------------------------------------------------------------


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
