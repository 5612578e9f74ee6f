"""What the `rafka` admin commands ask of a cluster, as data (cli.py prints it).

Topics and groups are read and changed over the Kafka protocol, as kafka-topics.sh and
kafka-consumer-groups.sh do, so the commands see exactly what clients see. Two things come
from the meta service instead: the Raft quorum, and the registry of every consumer group with
its coordinator partition (`rafka groups list` finds a group even while its coordinator is
down, which per-broker ListGroups cannot).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
from kio.schema.errors import ErrorCode

from cluster.kafka_client import KafkaConnection, builder

METADATA, CREATE_TOPICS, DELETE_TOPICS, FIND_COORDINATOR = 3, 19, 20, 10
DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE, OFFSET_FETCH, LIST_OFFSETS = 15, 69, 9, 2
DELETE_GROUPS, LIST_GROUPS = 42, 16
_TIMEOUT_MS = 30_000
OFFSETS_TOPIC = "__consumer_offsets"


class AdminError(Exception):
    """A request the cluster refused: Kafka's error name and message."""

    def __init__(self, what: str, code: int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        detail = f": {message}" if message else ""
        super().__init__(f"{what}: {self.code.name.upper()}{detail}")


def _check(what: str, code: int, message: str | None = None) -> None:
    if code != ErrorCode.none:
        raise AdminError(what, code, message)


# ---------------------------------------------------------------- topics and brokers


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


@dataclass
class TopicInfo:
    name: str
    topic_id: str
    internal: bool
    partitions: list[PartitionInfo]

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass
class BrokerInfo:
    host: str
    port: int
    rack: str | None

    def __str__(self) -> str:
        return f"{self.host}:{self.port}" + (f" (rack {self.rack})" if self.rack else "")


@dataclass
class ClusterInfo:
    cluster_id: str
    controller: int
    brokers: dict[int, BrokerInfo]
    topics: list[TopicInfo]


def metadata(bootstrap: str, topics: Iterable[str] | None = None) -> ClusterInfo:
    """Brokers and topics (all of them when `topics` is None); an unknown topic raises."""
    b = builder(METADATA, 12)
    requested = (
        None
        if topics is None
        else tuple(b.MetadataRequestTopic(topic_id=None, name=t) for t in topics)
    )
    with KafkaConnection.to_any(bootstrap) as c:
        r = c.call(
            METADATA,
            12,
            topics=requested,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    out = []
    for t in sorted(r.topics, key=lambda t: t.name or ""):
        _check(f"topic {t.name}", t.error_code)
        parts = [
            PartitionInfo(
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                list(p.replica_nodes),
                list(p.isr_nodes),
                list(p.offline_replicas),
            )
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
        ]
        out.append(TopicInfo(t.name, str(t.topic_id), t.is_internal, parts))
    brokers = {
        br.node_id: BrokerInfo(br.host, br.port, br.rack)
        for br in sorted(r.brokers, key=lambda br: br.node_id)
    }
    return ClusterInfo(r.cluster_id or "", r.controller_id, brokers, out)


def create_topic(
    bootstrap: str, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> None:
    """CreateTopics at any broker (-1: the broker's default count / replication factor)."""
    b = builder(CREATE_TOPICS, 7)
    topic = b.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        assignments=(),
        configs=tuple(b.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()),
    )
    with KafkaConnection.to_any(bootstrap) as c:
        r = c.call(CREATE_TOPICS, 7, topics=(topic,), timeout=_TIMEOUT_MS, validate_only=False)
    (result,) = r.topics
    _check(f"create topic {name}", result.error_code, result.error_message)


def delete_topics(bootstrap: str, names: list[str]) -> dict[str, AdminError | None]:
    """DeleteTopics: each name's error, None when deleted."""
    b = builder(DELETE_TOPICS, 6)
    with KafkaConnection.to_any(bootstrap) as c:
        r = c.call(
            DELETE_TOPICS,
            6,
            topics=tuple(b.DeleteTopicState(name=n, topic_id=None) for n in names),
            timeout=_TIMEOUT_MS,
        )
    out: dict[str, AdminError | None] = {}
    for res in r.responses:
        try:
            _check(f"delete topic {res.name}", res.error_code, res.error_message)
            out[res.name] = None
        except AdminError as e:
            out[res.name] = e
    return out


# ---------------------------------------------------------------- the meta service


@dataclass
class QuorumInfo:
    cluster_id: str
    leader: int  # -1: no Raft leader
    nodes: list[tuple[int, str, str]]  # node id, gRPC address, role seen by the answering node
    groups: list[tuple[str, int]] = field(default_factory=list)  # registry: id, partition


def quorum(meta: str, with_groups: bool = False) -> QuorumInfo:
    """The meta service's view: Raft leader and nodes, and (optionally) the group registry."""
    from meta.client import MetaClient

    async def ask() -> QuorumInfo:
        async with MetaClient(meta, timeout_s=10, attempt_timeout_s=5) as client:
            d = await client.describe_cluster()
            groups = await client.list_groups() if with_groups else []
        nodes = [
            (n.node_id, n.grpc_address, "leader" if n.role == 1 else "follower")
            for n in sorted(d.nodes, key=lambda n: n.node_id)
        ]
        return QuorumInfo(d.cluster_id, d.leader_id, nodes, groups)

    return anyio.run(ask)


# ---------------------------------------------------------------- consumer groups


@dataclass
class GroupListing:
    group: str
    coordinator_partition: int
    coordinator: int  # broker id; -1: the partition has no leader
    state: str  # "" when the coordinator could not say
    type: str


def list_groups(bootstrap: str, meta: str) -> list[GroupListing]:
    """Every group of the registry, with state and type from its coordinator when it answers."""
    registry = quorum(meta, with_groups=True).groups
    if not registry:
        return []
    info = metadata(bootstrap, [OFFSETS_TOPIC])
    leaders = {p.partition: p.leader for t in info.topics for p in t.partitions}
    listed: dict[str, tuple[str, str]] = {}
    for node in {leaders.get(p, -1) for _, p in registry} & info.brokers.keys():
        broker = info.brokers[node]
        try:
            with KafkaConnection(broker.port, broker.host, timeout=10) as c:
                r = c.call(LIST_GROUPS, 5, states_filter=(), types_filter=())
        except OSError:
            continue  # its groups show with an unknown state
        listed.update({g.group_id: (g.group_state, g.group_type) for g in r.groups})
    return [GroupListing(g, p, leaders.get(p, -1), *listed.get(g, ("", ""))) for g, p in registry]


@dataclass
class MemberInfo:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    partitions: list[tuple[str, int]]


@dataclass
class OffsetRow:
    topic: str
    partition: int
    committed: int  # -1: none
    end: int  # -1: unknown
    owner: str  # member id, "" when no member owns it

    @property
    def lag(self) -> int | None:
        return None if self.committed < 0 or self.end < 0 else max(0, self.end - self.committed)


@dataclass
class GroupDescription:
    group: str
    coordinator: int
    state: str
    type: str  # "classic" or "consumer"
    protocol: str  # assignor
    members: list[MemberInfo]
    offsets: list[OffsetRow]


def find_coordinator(bootstrap: str, group: str) -> tuple[int, str, int]:
    """(node id, host, port) of the group's coordinator."""
    with KafkaConnection.to_any(bootstrap) as c:
        r = c.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,))
    (co,) = r.coordinators
    _check(f"find the coordinator of {group}", co.error_code, co.error_message)
    return co.node_id, co.host, co.port


def describe_group(bootstrap: str, group: str) -> GroupDescription:
    """Members, assignments, committed offsets and lag, as kafka-consumer-groups --describe."""
    node, host, port = find_coordinator(bootstrap, group)
    with KafkaConnection(port, host) as c:
        classic = c.call(DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False)
        (g,) = classic.groups
        _check(f"describe group {group}", g.error_code)
        if g.group_state == "Dead":  # unknown, or a consumer group (KIP-848): ask as such
            desc = _consumer_group(c, group, node)
        else:
            desc = GroupDescription(
                group, node, g.group_state, "classic", g.protocol_data, _classic_members(g), []
            )
        desc.offsets = _offsets(c, bootstrap, group, desc.members)
    return desc


def _consumer_group(c: KafkaConnection, group: str, node: int) -> GroupDescription:
    """A KIP-848 consumer group (DescribeGroups answers "Dead" for such a group)."""
    r = c.call(CONSUMER_GROUP_DESCRIBE, 0, group_ids=(group,), include_authorized_operations=False)
    (g,) = r.groups
    _check(f"describe group {group}", g.error_code, g.error_message)
    members = [
        MemberInfo(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            sorted((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions),
        )
        for m in g.members
    ]
    return GroupDescription(group, node, g.group_state, "consumer", g.assignor_name, members, [])


def _classic_members(g: Any) -> list[MemberInfo]:
    return [
        MemberInfo(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            assigned_partitions(m.member_assignment),
        )
        for m in g.members
    ]


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment (the "consumer" protocol's SyncGroup
    payload: int16 version, then [topic name, [partition]]); [] if it does not parse."""
    out = []
    try:
        pos = 2
        (topics,) = struct.unpack_from(">i", assignment, pos)
        pos += 4
        for _ in range(topics):
            (n,) = struct.unpack_from(">h", assignment, pos)
            name = assignment[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            (count,) = struct.unpack_from(">i", assignment, pos)
            out += [(name, p) for p in struct.unpack_from(f">{count}i", assignment, pos + 4)]
            pos += 4 + 4 * count
    except (struct.error, UnicodeDecodeError):
        return []
    return sorted(out)


def _offsets(
    c: KafkaConnection, bootstrap: str, group: str, members: list[MemberInfo]
) -> list[OffsetRow]:
    """Committed offsets of every partition the group committed or owns, with log ends."""
    b = builder(OFFSET_FETCH, 8)
    r = c.call(
        OFFSET_FETCH,
        8,
        groups=(b.OffsetFetchRequestGroup(group_id=group, topics=None),),
        require_stable=False,
    )
    (fetched,) = r.groups
    _check(f"fetch the offsets of {group}", fetched.error_code)
    committed = {
        (t.name, p.partition_index): p.committed_offset
        for t in fetched.topics
        for p in t.partitions
        if p.error_code == ErrorCode.none
    }
    owners = {tp: m.member_id for m in members for tp in m.partitions}
    keys = sorted(set(committed) | set(owners))
    ends = log_end_offsets(bootstrap, keys)
    return [
        OffsetRow(t, p, committed.get((t, p), -1), ends.get((t, p), -1), owners.get((t, p), ""))
        for t, p in keys
    ]


def log_end_offsets(bootstrap: str, partitions: list[tuple[str, int]]) -> dict:
    """ListOffsets(latest) at each partition's leader; a partition without one is left out."""
    if not partitions:
        return {}
    info = metadata(bootstrap, sorted({t for t, _ in partitions}))
    by_leader: dict[int, list[tuple[str, int]]] = {}
    leaders = {(t.name, p.partition): p.leader for t in info.topics for p in t.partitions}
    for tp in partitions:
        if leaders.get(tp, -1) >= 0:
            by_leader.setdefault(leaders[tp], []).append(tp)
    b = builder(LIST_OFFSETS, 7)
    out = {}
    for node, tps in by_leader.items():
        broker = info.brokers[node]
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        request = tuple(
            b.ListOffsetsTopic(
                name=t,
                partitions=tuple(
                    b.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                    for p in ps
                ),
            )
            for t, ps in topics.items()
        )
        with KafkaConnection(broker.port, broker.host) as c:
            r = c.call(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=request)
        for t in r.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none:
                    out[(t.name, p.partition_index)] = p.offset
    return out


def delete_groups(bootstrap: str, groups: list[str]) -> dict[str, AdminError | None]:
    """DeleteGroups at each group's coordinator: each group's error, None when deleted."""
    out: dict[str, AdminError | None] = {}
    for group in groups:
        try:
            _node, host, port = find_coordinator(bootstrap, group)
            with KafkaConnection(port, host) as c:
                (res,) = c.call(DELETE_GROUPS, 2, groups_names=(group,)).results
            _check(f"delete group {group}", res.error_code)
            out[group] = None
        except AdminError as e:
            out[group] = e
    return out
