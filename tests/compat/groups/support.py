"""What more than one module's group flows send: the classic protocol's requests (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, a one-member stable group), DescribeGroups and the offset
requests, with the API keys, the topics every module uses and the masks their answers need."""

from __future__ import annotations

import datetime
from typing import Any

from cluster.kafka_client import builder
from tests.compat.flows import Broker, assignment, subscription

COMMIT, FETCH_OFFSETS, FIND, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 9, 10, 11, 12, 13, 14

DESCRIBE, LIST, DELETE, OFFSET_DELETE, CG_HEARTBEAT, CG_DESCRIBE = 15, 16, 42, 47, 68, 69

TOPIC = "compat-groups"  # 3 partitions

OTHER = "compat-groups-other"  # 1 partition, that no member subscribes to

MS = datetime.timedelta(milliseconds=1)


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


# Kafka answers the groups of a DescribeGroups per coordinator partition, and a group's members
# (in DescribeGroups and the leader's JoinGroup), in its hash maps' order: clients find them by
# id.
BY_GROUP = ["groups", "groups.*.members"]
MEMBERS = ["members", "groups.*.members"]


def describe(b: Broker, *groups: str, version: int = 5, ops: bool = False) -> Any:
    return b.call(DESCRIBE, version, groups=groups, include_authorized_operations=ops)


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
