"""What the `rafka` admin commands ask of a cluster, as data (cli.py prints it).

Topics, groups, transactions, ACLs and SCRAM users are read and changed over the Kafka
protocol, as kafka-topics.sh, kafka-consumer-groups.sh, kafka-transactions.sh, kafka-acls.sh and
kafka-configs.sh do, so the commands see exactly what clients see (and need the same
credentials: `Brokers.security`).
Two things come from the meta service instead: the Raft quorum, and the registry of every
consumer group with its coordinator partition (`rafka groups list` finds a group even while its
coordinator is down, which per-broker ListGroups cannot).
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
from kio.schema.errors import ErrorCode

from cluster.client_security import ClientSecurity, salted_password
from cluster.kafka_client import PLAINTEXT, KafkaConnection, builder
from common.internal_security import InternalSecurity
from dataplane.security.sasl.scram import SCRAM_BY_TYPE, SCRAM_MECHANISMS
from meta.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

METADATA, CREATE_TOPICS, DELETE_TOPICS, FIND_COORDINATOR = 3, 19, 20, 10
DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE, OFFSET_FETCH, LIST_OFFSETS = 15, 69, 9, 2
DELETE_GROUPS, LIST_GROUPS = 42, 16
TIMEOUT_MS = 30_000
OFFSETS_TOPIC = "__consumer_offsets"


class AdminError(Exception):
    """A request the cluster refused: Kafka's error name and message."""

    def __init__(self, what: str, code: int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        detail = f": {message}" if message else ""
        super().__init__(f"{what}: {self.code.name.upper()}{detail}")


def check(what: str, code: int, message: str | None = None) -> None:
    if code != ErrorCode.none:
        raise AdminError(what, code, message)


@dataclass(frozen=True)
class Brokers:
    """Where the commands reach the cluster's brokers, and how they connect and authenticate
    (`--command-config`)."""

    bootstrap: str
    security: ClientSecurity = PLAINTEXT

    def any(self, timeout: float = 15) -> KafkaConnection:
        return KafkaConnection.to_any(self.bootstrap, timeout, self.security)

    def at(self, host: str, port: int, timeout: float = 15) -> KafkaConnection:
        return KafkaConnection(port, host, timeout, self.security)


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


def metadata(brokers: Brokers, topics: Iterable[str] | None = None) -> ClusterInfo:
    """Brokers and topics (all of them when `topics` is None); an unknown topic raises."""
    b = builder(METADATA, 12)
    requested = (
        None
        if topics is None
        else tuple(b.MetadataRequestTopic(topic_id=None, name=t) for t in topics)
    )
    with brokers.any() as c:
        r = c.call(
            METADATA,
            12,
            topics=requested,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    out = []
    for t in sorted(r.topics, key=lambda t: t.name or ""):
        check(f"topic {t.name}", t.error_code)
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
    nodes = {
        br.node_id: BrokerInfo(br.host, br.port, br.rack)
        for br in sorted(r.brokers, key=lambda br: br.node_id)
    }
    return ClusterInfo(r.cluster_id or "", r.controller_id, nodes, out)


def create_topic(
    brokers: Brokers, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
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
    with brokers.any() as c:
        r = c.call(CREATE_TOPICS, 7, topics=(topic,), timeout=TIMEOUT_MS, validate_only=False)
    (result,) = r.topics
    check(f"create topic {name}", result.error_code, result.error_message)


def delete_topics(brokers: Brokers, names: list[str]) -> dict[str, AdminError | None]:
    """DeleteTopics: each name's error, None when deleted."""
    b = builder(DELETE_TOPICS, 6)
    with brokers.any() as c:
        r = c.call(
            DELETE_TOPICS,
            6,
            topics=tuple(b.DeleteTopicState(name=n, topic_id=None) for n in names),
            timeout=TIMEOUT_MS,
        )
    out: dict[str, AdminError | None] = {}
    for res in r.responses:
        try:
            check(f"delete topic {res.name}", res.error_code, res.error_message)
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


@dataclass(frozen=True)
class Meta:
    """The meta service's gRPC addresses and the cluster's internal credentials (the
    `internal.*` entries of `--command-config`; its gRPC refuses callers without them)."""

    servers: str
    security: InternalSecurity | None = None


def quorum(meta: Meta, with_groups: bool = False) -> QuorumInfo:
    """The meta service's view: Raft leader and nodes, and (optionally) the group registry."""
    from meta.client import MetaClient

    async def ask() -> QuorumInfo:
        async with MetaClient(
            meta.servers, timeout_s=10, attempt_timeout_s=5, security=meta.security
        ) as client:
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


def list_groups(brokers: Brokers, meta: Meta) -> list[GroupListing]:
    """Every group of the registry, with state and type from its coordinator when it answers."""
    registry = quorum(meta, with_groups=True).groups
    if not registry:
        return []
    info = metadata(brokers, [OFFSETS_TOPIC])
    leaders = {p.partition: p.leader for t in info.topics for p in t.partitions}
    listed: dict[str, tuple[str, str]] = {}
    for node in {leaders.get(p, -1) for _, p in registry} & info.brokers.keys():
        broker = info.brokers[node]
        try:
            with brokers.at(broker.host, broker.port, timeout=10) as c:
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


GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types


def find_coordinators(
    brokers: Brokers, keys: list[str], key_type: int = GROUP_KEY
) -> dict[str, tuple[int, str, int] | AdminError]:
    """Each key's coordinator (node id, host, port), or why none was found: one batched
    FindCoordinator (v4) for groups (key type 0) or transactional ids (key type 1)."""
    with brokers.any() as c:
        r = c.call(FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=tuple(keys))
    return {
        co.key: refusal(f"find the coordinator of {co.key}", co.error_code, co.error_message)
        or (co.node_id, co.host, co.port)
        for co in r.coordinators
    }


def find_coordinator(brokers: Brokers, key: str, key_type: int = GROUP_KEY) -> tuple[int, str, int]:
    """(node id, host, port) of the coordinator of a group (or of a transactional id)."""
    found = find_coordinators(brokers, [key], key_type)[key]
    if isinstance(found, AdminError):
        raise found
    return found


def describe_group(brokers: Brokers, group: str) -> GroupDescription:
    """Members, assignments, committed offsets and lag, as kafka-consumer-groups --describe."""
    node, host, port = find_coordinator(brokers, group)
    with brokers.at(host, port) as c:
        classic = c.call(DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False)
        (g,) = classic.groups
        check(f"describe group {group}", g.error_code)
        if g.group_state == "Dead":  # unknown, or a consumer group (KIP-848): ask as such
            desc = _consumer_group(c, group, node)
        else:
            desc = GroupDescription(
                group, node, g.group_state, "classic", g.protocol_data, _classic_members(g), []
            )
        desc.offsets = _offsets(c, brokers, group, desc.members)
    return desc


def _consumer_group(c: KafkaConnection, group: str, node: int) -> GroupDescription:
    """A KIP-848 consumer group (DescribeGroups answers "Dead" for such a group)."""
    r = c.call(CONSUMER_GROUP_DESCRIBE, 0, group_ids=(group,), include_authorized_operations=False)
    (g,) = r.groups
    check(f"describe group {group}", g.error_code, g.error_message)
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
    c: KafkaConnection, brokers: Brokers, group: str, members: list[MemberInfo]
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
    check(f"fetch the offsets of {group}", fetched.error_code)
    committed = {
        (t.name, p.partition_index): p.committed_offset
        for t in fetched.topics
        for p in t.partitions
        if p.error_code == ErrorCode.none
    }
    owners = {tp: m.member_id for m in members for tp in m.partitions}
    keys = sorted(set(committed) | set(owners))
    ends = log_end_offsets(brokers, keys)
    return [
        OffsetRow(t, p, committed.get((t, p), -1), ends.get((t, p), -1), owners.get((t, p), ""))
        for t, p in keys
    ]


def log_end_offsets(brokers: Brokers, partitions: list[tuple[str, int]]) -> dict:
    """ListOffsets(latest) at each partition's leader; a partition without one is left out."""
    if not partitions:
        return {}
    info = metadata(brokers, sorted({t for t, _ in partitions}))
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
        with brokers.at(broker.host, broker.port) as c:
            r = c.call(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=request)
        for t in r.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none:
                    out[(t.name, p.partition_index)] = p.offset
    return out


def delete_groups(brokers: Brokers, groups: list[str]) -> dict[str, AdminError | None]:
    """DeleteGroups at each group's coordinator: each group's error, None when deleted."""
    out: dict[str, AdminError | None] = {}
    for group in groups:
        try:
            _node, host, port = find_coordinator(brokers, group)
            with brokers.at(host, port) as c:
                (res,) = c.call(DELETE_GROUPS, 2, groups_names=(group,)).results
            check(f"delete group {group}", res.error_code)
            out[group] = None
        except AdminError as e:
            out[group] = e
    return out


# ---------------------------------------------------------------- ACLs (APIs 29-31)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission_type,
    }


def describe_acls(brokers: Brokers, acl_filter: AclBindingFilter) -> list[AclBinding]:
    """DescribeAcls: the bindings that match the filter, as kafka-acls.sh --list shows them."""
    with brokers.any() as c:
        r = c.call(DESCRIBE_ACLS, 3, **_filter_fields(acl_filter))
    check("describe ACLs", r.error_code, r.error_message)
    return [
        AclBinding(
            ResourceType(res.resource_type),
            res.resource_name,
            PatternType(res.pattern_type),
            acl.principal,
            acl.host,
            AclOperation(acl.operation),
            AclPermissionType(acl.permission_type),
        )
        for res in r.resources
        for acl in res.acls
    ]


def create_acls(brokers: Brokers, bindings: list[AclBinding]) -> list[AdminError | None]:
    """CreateAcls: one result per binding, in order (None: created or already there)."""
    b = builder(CREATE_ACLS, 3)
    creations = tuple(
        b.AclCreation(
            resource_type=x.resource_type,
            resource_name=x.resource_name,
            resource_pattern_type=x.pattern_type,
            principal=x.principal,
            host=x.host,
            operation=x.operation,
            permission_type=x.permission_type,
        )
        for x in bindings
    )
    with brokers.any() as c:
        r = c.call(CREATE_ACLS, 3, creations=creations)
    return [
        refusal(f"add {x}", res.error_code, res.error_message)
        for x, res in zip(bindings, r.results, strict=True)
    ]


def delete_acls(
    brokers: Brokers, filters: list[AclBindingFilter]
) -> list[tuple[AdminError | None, list[AclBinding]]]:
    """DeleteAcls: per filter, its error (None: fine) and the bindings it removed."""
    b = builder(DELETE_ACLS, 3)
    with brokers.any() as c:
        r = c.call(
            DELETE_ACLS, 3, filters=tuple(b.DeleteAclsFilter(**_filter_fields(f)) for f in filters)
        )
    return [
        (
            refusal("remove ACLs", res.error_code, res.error_message),
            [
                AclBinding(
                    ResourceType(m.resource_type),
                    m.resource_name,
                    PatternType(m.pattern_type),
                    m.principal,
                    m.host,
                    AclOperation(m.operation),
                    AclPermissionType(m.permission_type),
                )
                for m in res.matching_acls
                if m.error_code == ErrorCode.none
            ],
        )
        for res in r.filter_results
    ]


def refusal(what: str, code: int, message: str | None) -> AdminError | None:
    return None if code == ErrorCode.none else AdminError(what, code, message)


# ---------------------------------------------------------------- SCRAM users (APIs 50, 51)

DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51


@dataclass
class UserCredentials:
    user: str
    credentials: list[tuple[str, int]]  # (mechanism, iterations)


def describe_users(brokers: Brokers, users: list[str] | None = None) -> list[UserCredentials]:
    """DescribeUserScramCredentials: every user with SCRAM credentials (or the named ones; an
    unknown name raises RESOURCE_NOT_FOUND)."""
    b = builder(DESCRIBE_SCRAM, 0)
    names = None if users is None else tuple(b.UserName(name=u) for u in users)
    with brokers.any() as c:
        r = c.call(DESCRIBE_SCRAM, 0, users=names)
    check("describe users", r.error_code, r.error_message)
    out = []
    for res in r.results:
        check(f"user {res.user}", res.error_code, res.error_message)
        creds = [
            (
                SCRAM_BY_TYPE[i.mechanism].name
                if i.mechanism in SCRAM_BY_TYPE
                else str(i.mechanism),
                i.iterations,
            )
            for i in res.credential_infos
        ]
        out.append(UserCredentials(res.user, sorted(creds)))
    return sorted(out, key=lambda u: u.user)


def alter_users(
    brokers: Brokers,
    upserts: list[tuple[str, str, str, int]],
    deletions: list[tuple[str, str]],
) -> dict[str, AdminError | None]:
    """AlterUserScramCredentials: `upserts` (user, mechanism, password, iterations) are salted
    and hashed here, as kafka-configs.sh does, so the password itself never leaves this
    process; `deletions` are (user, mechanism). Kafka refuses two changes of one user in one
    request (DUPLICATE_RESOURCE), so each round changes a user once. Per user: its first
    error, None when every change was made."""
    b = builder(ALTER_SCRAM, 0)
    changes: dict[str, list[tuple[str, Any]]] = {}
    for user, mechanism, password, iterations in upserts:
        salt = secrets.token_bytes(32)
        upsertion = b.ScramCredentialUpsertion(
            name=user,
            mechanism=SCRAM_MECHANISMS[mechanism].type_code,
            iterations=iterations,
            salt=salt,
            salted_password=salted_password(mechanism, password, salt, iterations),
        )
        changes.setdefault(user, []).append(("upsertions", upsertion))
    for user, mechanism in deletions:
        deletion = b.ScramCredentialDeletion(
            name=user, mechanism=SCRAM_MECHANISMS[mechanism].type_code
        )
        changes.setdefault(user, []).append(("deletions", deletion))
    out: dict[str, AdminError | None] = dict.fromkeys(changes)
    with brokers.any() as c:
        for round_ in range(max(map(len, changes.values()), default=0)):
            batch = [
                user_changes[round_]
                for user_changes in changes.values()
                if round_ < len(user_changes)
            ]
            r = c.call(
                ALTER_SCRAM,
                0,
                deletions=tuple(x for kind, x in batch if kind == "deletions"),
                upsertions=tuple(x for kind, x in batch if kind == "upsertions"),
            )
            for res in r.results:
                out[res.user] = out.get(res.user) or refusal(
                    f"user {res.user}", res.error_code, res.error_message
                )
    return out
