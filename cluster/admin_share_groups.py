"""Share groups (KIP-932) for the `rafka groups` commands: members and assignments
(ShareGroupDescribe), and per share-partition the start offset and lag
(DescribeShareGroupOffsets v1), as kafka-share-groups.sh --describe shows them."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from cluster.admin import Brokers, MemberInfo, builder, check, find_coordinator

SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 77, 90


@dataclass
class SharePartitionRow:
    topic: str
    partition: int
    start_offset: int  # -1: the share-partition has no state yet
    lag: int  # -1: unknown
    members: list[str]  # the members it is assigned to (shared when several)


@dataclass
class ShareGroupDescription:
    group: str
    coordinator: int
    state: str
    group_epoch: int
    assignor: str
    members: list[MemberInfo]
    partitions: list[SharePartitionRow]


def describe_share_group(brokers: Brokers, group: str) -> ShareGroupDescription | None:
    """The share group `group`, None when the group is not a share group (or does not exist:
    the other describes say so)."""
    node, host, port = find_coordinator(brokers, group)
    with brokers.at(host, port) as c:
        r = c.call(SHARE_GROUP_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False)
        (g,) = r.groups
        if g.error_code == ErrorCode.group_id_not_found:
            return None
        check(f"describe share group {group}", g.error_code, g.error_message)
        members = [
            MemberInfo(
                m.member_id,
                None,
                m.client_id,
                m.client_host,
                sorted(
                    (t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
                ),
            )
            for m in g.members
        ]
        b = builder(DESCRIBE_SHARE_GROUP_OFFSETS, 1)
        o = c.call(
            DESCRIBE_SHARE_GROUP_OFFSETS,
            1,
            groups=(b.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),),
        )
    (offsets,) = o.groups
    check(f"describe the offsets of share group {group}", offsets.error_code, offsets.error_message)
    owners: dict[tuple[str, int], list[str]] = {}
    for m in members:
        for tp in m.partitions:
            owners.setdefault(tp, []).append(m.member_id)
    rows = {
        (t.topic_name, p.partition_index): SharePartitionRow(
            t.topic_name, p.partition_index, p.start_offset, p.lag, []
        )
        for t in offsets.topics
        for p in t.partitions
    }
    for tp, ids in owners.items():
        rows.setdefault(tp, SharePartitionRow(tp[0], tp[1], -1, -1, [])).members = sorted(ids)
    return ShareGroupDescription(
        group,
        node,
        g.group_state,
        g.group_epoch,
        g.assignor_name,
        members,
        [rows[k] for k in sorted(rows)],
    )
