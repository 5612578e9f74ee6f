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
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
from kio.schema.errors import ErrorCode

from cluster.client_security import ClientSecurity, salted_password
from cluster.internal_security import InternalSecurity
from cluster.kafka_client import PLAINTEXT, KafkaConnection, builder
from dataplane.protocol.message_codec import ArrayOf, Field, Message, Struct, Tags
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
        r = c.call(CREATE_TOPICS, 7, topics=(topic,), timeout=_TIMEOUT_MS, validate_only=False)
    (result,) = r.topics
    _check(f"create topic {name}", result.error_code, result.error_message)


def delete_topics(brokers: Brokers, names: list[str]) -> dict[str, AdminError | None]:
    """DeleteTopics: each name's error, None when deleted."""
    b = builder(DELETE_TOPICS, 6)
    with brokers.any() as c:
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
        co.key: _error(f"find the coordinator of {co.key}", co.error_code, co.error_message)
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
        _check(f"describe group {group}", g.error_code)
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
    _check(f"fetch the offsets of {group}", fetched.error_code)
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
            _check(f"delete group {group}", res.error_code)
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
    _check("describe ACLs", r.error_code, r.error_message)
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
        _error(f"add {x}", res.error_code, res.error_message)
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
            _error("remove ACLs", res.error_code, res.error_message),
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


def _error(what: str, code: int, message: str | None) -> AdminError | None:
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
    _check("describe users", r.error_code, r.error_message)
    out = []
    for res in r.results:
        _check(f"user {res.user}", res.error_code, res.error_message)
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
                out[res.user] = out.get(res.user) or _error(
                    f"user {res.user}", res.error_code, res.error_message
                )
    return out


# ---------------------------------------------------------------- transactions (APIs 65, 66)

DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
# States in which a transaction is open: it holds back the LSO of its partitions.
OPEN_TRANSACTION_STATES = frozenset(
    {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
)
# Worth asking again shortly: the coordinator is loading its partition, or has just moved.
_COORDINATOR_MOVING = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
    }
)
_RETRY_BACKOFF_S = 0.2


@dataclass
class TransactionListing:
    transactional_id: str
    coordinator: int  # the broker that answered for it
    producer_id: int
    state: str


@dataclass
class TransactionList:
    transactions: list[TransactionListing]
    failed: dict[int, Exception]  # broker id -> why it did not answer
    unknown_states: list[str]  # state filters the coordinators do not know


def list_transactions(
    brokers: Brokers,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_ms: int = -1,
    retry_s: float = 10,
) -> TransactionList:
    """ListTransactions at every broker, as Kafka's Admin.listTransactions does: each broker
    answers for the `__transaction_state` partitions it leads. v1 (KIP-994) carries the
    duration filter; a broker still loading a partition is asked again for `retry_s`."""
    info = metadata(brokers, [])
    version = 1 if duration_ms >= 0 else 0
    fields = {
        "state_filters": tuple(states),
        "producer_id_filters": tuple(producer_ids),
        "duration_filter": duration_ms,
    }
    out = TransactionList([], {}, [])
    for node, broker in info.brokers.items():

        def ask(broker: BrokerInfo = broker) -> Any:
            with brokers.at(broker.host, broker.port, timeout=10) as c:
                return c.call(LIST_TRANSACTIONS, version, **fields)

        try:
            r = _retrying(ask, lambda r: r.error_code in _COORDINATOR_MOVING, retry_s)
            _check(f"list the transactions of broker {node}", r.error_code)
        except (OSError, AdminError) as e:
            out.failed[node] = e
            continue
        out.unknown_states += [s for s in r.unknown_state_filters if s not in out.unknown_states]
        out.transactions += [
            TransactionListing(t.transactional_id, node, t.producer_id, t.transaction_state)
            for t in r.transaction_states
        ]
    out.transactions.sort(key=lambda t: t.transactional_id)
    return out


def _retrying(ask: Any, again: Any, timeout: float) -> Any:
    """`ask()` until `again(result)` is false or `timeout` seconds have passed (a client's
    retry with backoff, as Kafka's admin client does on retriable errors)."""
    deadline = time.monotonic() + timeout
    result = ask()
    while again(result) and time.monotonic() < deadline:
        time.sleep(_RETRY_BACKOFF_S)
        result = ask()
    return result


@dataclass
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1: no transaction started yet
    partitions: list[tuple[str, int]]  # in a Prepare* state: those still without a marker

    def age_ms(self, now_ms: int) -> int | None:
        """How long the open transaction has been running; None when none is open."""
        if self.state not in OPEN_TRANSACTION_STATES or self.start_time_ms < 0:
            return None
        return max(0, now_ms - self.start_time_ms)


def describe_transactions(
    brokers: Brokers, transactional_ids: list[str], retry_s: float = 10
) -> dict[str, TransactionDescription | AdminError]:
    """Each transactional id at its coordinator (FindCoordinator key type 1, then
    DescribeTransactions), as kafka-transactions.sh describe; ids whose coordinator is loading
    or moving are asked again for `retry_s`. Unknown ids get TRANSACTIONAL_ID_NOT_FOUND."""
    out: dict[str, TransactionDescription | AdminError] = {}
    pending = list(dict.fromkeys(transactional_ids))
    deadline = time.monotonic() + retry_s
    while pending:
        moving: dict[str, AdminError] = {}
        at: dict[tuple[int, str, int], list[str]] = {}
        for tid, found in find_coordinators(brokers, pending, TRANSACTION_KEY).items():
            if isinstance(found, AdminError):
                (moving if found.code in _COORDINATOR_MOVING else out)[tid] = found
            else:
                at.setdefault(found, []).append(tid)
        for (node, host, port), tids in at.items():
            try:
                with brokers.at(host, port, timeout=10) as c:
                    body = c.call_raw(DESCRIBE_TRANSACTIONS, 0, transactional_ids=tuple(tids))
            except OSError as e:  # the coordinator died and metadata does not say so yet
                for tid in tids:
                    moving[tid] = AdminError(
                        f"describe transaction {tid}",
                        ErrorCode.coordinator_not_available,
                        f"coordinator broker {node} at {host}:{port} unreachable: {e}",
                    )
                continue
            response, _ = _DESCRIBE_TRANSACTIONS_RESPONSE.decode(body, 0)
            for t in response.transaction_states:
                error = _error(f"describe transaction {t.transactional_id}", t.error_code, None)
                if error is None:
                    out[t.transactional_id] = _description(t, node)
                else:
                    (moving if error.code in _COORDINATOR_MOVING else out)[t.transactional_id] = (
                        error
                    )
        if moving and time.monotonic() < deadline:
            time.sleep(_RETRY_BACKOFF_S)
        else:
            out.update(moving)
            moving = {}
        pending = list(moving)
    return {tid: out[tid] for tid in dict.fromkeys(transactional_ids)}


def _description(t: _DescribedTransaction, node: int) -> TransactionDescription:
    return TransactionDescription(
        t.transactional_id,
        node,
        t.transaction_state,
        t.producer_id,
        t.producer_epoch,
        t.transaction_timeout_ms,
        t.transaction_start_time_ms,
        sorted((topic.topic, p) for topic in t.topics for p in topic.partitions),
    )


# DescribeTransactionsResponse v0 (Kafka's DescribeTransactionsResponse.json), decoded with our
# schema-driven codec rather than kio's: kio refuses the start time -1 Kafka sends for a
# transactional id with no transaction yet.


@dataclass(frozen=True, slots=True)
class _TransactionTopic:
    topic: str
    partitions: tuple[int, ...]
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class _DescribedTransaction:
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: tuple[_TransactionTopic, ...]
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class _DescribeTransactionsResponse:
    throttle_time_ms: int
    transaction_states: tuple[_DescribedTransaction, ...]
    unknown_tags: Tags = ()


_DESCRIBE_TRANSACTIONS_RESPONSE = Message(
    "DescribeTransactionsResponse",
    (0, 0),
    (0, 0),
    Struct(
        _DescribeTransactionsResponse,
        (
            Field("throttle_time_ms", "int32"),
            Field(
                "transaction_states",
                ArrayOf(
                    Struct(
                        _DescribedTransaction,
                        (
                            Field("error_code", "int16"),
                            Field("transactional_id", "string"),
                            Field("transaction_state", "string"),
                            Field("transaction_timeout_ms", "int32"),
                            Field("transaction_start_time_ms", "int64"),
                            Field("producer_id", "int64"),
                            Field("producer_epoch", "int16"),
                            Field(
                                "topics",
                                ArrayOf(
                                    Struct(
                                        _TransactionTopic,
                                        (
                                            Field("topic", "string"),
                                            Field("partitions", ArrayOf("int32")),
                                        ),
                                        keeps_tags=True,
                                    )
                                ),
                            ),
                        ),
                        keeps_tags=True,
                    )
                ),
            ),
        ),
        keeps_tags=True,
    ),
)


# ---------------------------------------------------------------- reassignments and elections

ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 45, 46
ELECTION_TYPES = {"preferred": 0, "unclean": 1}  # Kafka's ElectionType values


@dataclass
class Reassignment:
    """One partition being moved, as ListPartitionReassignments reports it."""

    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


def _partition_key(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, index in partitions:
        out.setdefault(topic, []).append(index)
    return out


def reassign_partitions(
    brokers: Brokers, changes: list[tuple[str, int, list[int] | None]]
) -> dict[str, AdminError | None]:
    """AlterPartitionReassignments (kafka-reassign-partitions.sh --execute / --cancel): each
    partition's error by "topic-partition", None when accepted; None replicas cancels."""
    b = builder(ALTER_REASSIGNMENTS, 0)
    by_topic: dict[str, list[Any]] = {}
    for topic, index, replicas in changes:
        by_topic.setdefault(topic, []).append(
            b.ReassignablePartition(
                partition_index=index, replicas=None if replicas is None else tuple(replicas)
            )
        )
    with brokers.any() as c:
        r = c.call(
            ALTER_REASSIGNMENTS,
            0,
            timeout=_TIMEOUT_MS,
            topics=tuple(
                b.ReassignableTopic(name=topic, partitions=tuple(parts))
                for topic, parts in by_topic.items()
            ),
        )
    _check("reassign partitions", r.error_code, r.error_message)
    return {
        _partition_key(t.name, p.partition_index): _error(
            f"reassign {t.name}-{p.partition_index}", p.error_code, p.error_message
        )
        for t in r.responses
        for p in t.partitions
    }


def list_reassignments(
    brokers: Brokers, partitions: list[tuple[str, int]] | None = None
) -> list[Reassignment]:
    """ListPartitionReassignments (kafka-reassign-partitions.sh --list): the partitions being
    moved among `partitions` (None: all)."""
    b = builder(LIST_REASSIGNMENTS, 0)
    topics = (
        None
        if partitions is None
        else tuple(
            b.ListPartitionReassignmentsTopics(name=topic, partition_indexes=tuple(indexes))
            for topic, indexes in _by_topic(partitions).items()
        )
    )
    with brokers.any() as c:
        r = c.call(LIST_REASSIGNMENTS, 0, timeout=_TIMEOUT_MS, topics=topics)
    _check("list reassignments", r.error_code, r.error_message)
    return sorted(
        (
            Reassignment(
                t.name,
                p.partition_index,
                list(p.replicas),
                list(p.adding_replicas),
                list(p.removing_replicas),
            )
            for t in r.topics
            for p in t.partitions
        ),
        key=lambda x: (x.topic, x.partition),
    )


def elect_leaders(
    brokers: Brokers, election: str, partitions: list[tuple[str, int]] | None = None
) -> dict[str, AdminError | None]:
    """ElectLeaders (kafka-leader-election.sh): each partition's outcome by "topic-partition",
    None when a leader was elected. `partitions` None: every partition (then only those that
    needed an election are reported)."""
    b = builder(ELECT_LEADERS, 2)
    topics = (
        None
        if partitions is None
        else tuple(
            b.TopicPartitions(topic=topic, partitions=tuple(indexes))
            for topic, indexes in _by_topic(partitions).items()
        )
    )
    with brokers.any() as c:
        r = c.call(
            ELECT_LEADERS,
            2,
            election_type=ELECTION_TYPES[election],
            topic_partitions=topics,
            timeout=_TIMEOUT_MS,
        )
    _check("elect leaders", r.error_code)
    return {
        _partition_key(t.topic, p.partition_id): _error(
            f"elect a leader of {t.topic}-{p.partition_id}", p.error_code, p.error_message
        )
        for t in r.replica_election_results
        for p in t.partition_result
    }


# ---------------------------------------------------------------- partitions and records

CREATE_PARTITIONS, DELETE_RECORDS = 37, 21


def create_partitions(
    brokers: Brokers,
    name: str,
    count: int,
    assignments: list[list[int]] | None = None,
    validate_only: bool = False,
) -> None:
    """CreatePartitions (kafka-topics.sh --alter --partitions): raise the topic's partition
    count to `count`; `assignments` the replicas of each new partition (None: the cluster
    places them)."""
    b = builder(CREATE_PARTITIONS, 3)
    topic = b.CreatePartitionsTopic(
        name=name,
        count=count,
        assignments=None
        if assignments is None
        else tuple(b.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignments),
    )
    with brokers.any() as c:
        r = c.call(
            CREATE_PARTITIONS, 3, topics=(topic,), timeout=_TIMEOUT_MS, validate_only=validate_only
        )
    (result,) = r.results
    _check(f"add partitions to {name}", result.error_code, result.error_message)


def delete_records(
    brokers: Brokers, offsets: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int | AdminError]:
    """DeleteRecords (kafka-delete-records.sh) at each partition's leader: the records before
    each offset (-1: the high watermark) go. Each partition's new low watermark, or its error."""
    info = metadata(brokers, sorted({t for t, _ in offsets}))
    leaders = {(t.name, p.partition): p.leader for t in info.topics for p in t.partitions}
    out: dict[tuple[str, int], int | AdminError] = {}
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in offsets:
        leader = leaders.get(tp)
        if leader is None or leader < 0:
            code = (
                ErrorCode.unknown_topic_or_partition
                if leader is None
                else ErrorCode.leader_not_available
            )
            out[tp] = AdminError(f"delete records of {tp[0]}-{tp[1]}", code)
        else:
            by_leader.setdefault(leader, []).append(tp)
    b = builder(DELETE_RECORDS, 2)
    for node, tps in by_leader.items():
        broker = info.brokers[node]
        request = tuple(
            b.DeleteRecordsTopic(
                name=topic,
                partitions=tuple(
                    b.DeleteRecordsPartition(partition_index=p, offset=offsets[(topic, p)])
                    for p in parts
                ),
            )
            for topic, parts in _by_topic(tps).items()
        )
        with brokers.at(broker.host, broker.port, timeout=_TIMEOUT_MS / 1000 + 15) as c:
            r = c.call(DELETE_RECORDS, 2, topics=request, timeout=_TIMEOUT_MS)
        for t in r.topics:
            for p in t.partitions:
                what = f"delete records of {t.name}-{p.partition_index}"
                error = _error(what, p.error_code, None)
                out[(t.name, p.partition_index)] = p.low_watermark if error is None else error
    return out


# ---------------------------------------------------------------- log dirs and features

DESCRIBE_LOG_DIRS, API_VERSIONS, UPDATE_FEATURES = 35, 18, 57
UPGRADE_TYPES = {"upgrade": 1, "safe-downgrade": 2, "unsafe-downgrade": 3}


@dataclass
class ReplicaInDir:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirInfo:
    path: str
    error: str  # "" or Kafka's error name (KAFKA_STORAGE_ERROR: the directory failed)
    total_bytes: int
    usable_bytes: int
    replicas: list[ReplicaInDir]


def describe_log_dirs(
    brokers: Brokers, broker_ids: Iterable[int] | None = None
) -> dict[int, list[LogDirInfo] | Exception]:
    """DescribeLogDirs v4 at each broker (or those of ``broker_ids``), as
    kafka-log-dirs.sh --describe does."""
    info = metadata(brokers, [])
    wanted = sorted(info.brokers) if broker_ids is None else list(broker_ids)
    out: dict[int, list[LogDirInfo] | Exception] = {}
    for node in wanted:
        broker = info.brokers.get(node)
        if broker is None:
            out[node] = AdminError(
                f"describe the log dirs of broker {node}",
                ErrorCode.broker_not_available,
                "no such live broker",
            )
            continue
        try:
            with brokers.at(broker.host, broker.port, timeout=10) as c:
                r = c.call(DESCRIBE_LOG_DIRS, 4, topics=None)
            _check(f"describe the log dirs of broker {node}", r.error_code)
        except (OSError, AdminError) as e:
            out[node] = e
            continue
        out[node] = [
            LogDirInfo(
                d.log_dir,
                "" if d.error_code == ErrorCode.none else d.error_code.name.upper(),
                d.total_bytes,
                d.usable_bytes,
                [
                    ReplicaInDir(
                        t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key
                    )
                    for t in d.topics
                    for p in t.partitions
                ],
            )
            for d in r.results
        ]
    return out


@dataclass
class FeatureInfo:
    name: str
    supported_min: int
    supported_max: int
    finalized: int  # 0: not finalized


def describe_features(brokers: Brokers) -> tuple[list[FeatureInfo], int]:
    """The supported and finalized feature levels and their epoch, from ApiVersions v4 (as
    kafka-features.sh describe, through Admin.describeFeatures)."""
    with brokers.any() as c:
        r = c.call(API_VERSIONS, 4, client_software_name="rafka", client_software_version="1")
    _check("describe the features", r.error_code)
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    features = [
        FeatureInfo(f.name, f.min_version, f.max_version, finalized.pop(f.name, 0))
        for f in r.supported_features
    ]
    features += [FeatureInfo(name, 0, 0, level) for name, level in finalized.items()]
    return sorted(features, key=lambda f: f.name), r.finalized_features_epoch


def update_features(
    brokers: Brokers, levels: dict[str, int], upgrade_type: str, validate_only: bool
) -> None:
    """UpdateFeatures v1 (as kafka-features.sh upgrade/downgrade): all or none; raises
    AdminError with the cluster's reason."""
    b = builder(UPDATE_FEATURES, 1)
    with brokers.any() as c:
        r = c.call(
            UPDATE_FEATURES,
            1,
            timeout=_TIMEOUT_MS,
            feature_updates=tuple(
                b.FeatureUpdateKey(
                    feature=name, max_version_level=level, upgrade_type=UPGRADE_TYPES[upgrade_type]
                )
                for name, level in levels.items()
            ),
            validate_only=validate_only,
        )
    _check("update the features", r.error_code, r.error_message)
    for result in r.results:
        _check(f"update feature {result.feature}", result.error_code, result.error_message)


# ---------------------------------------------------------------- configs (kafka-configs.sh)

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
CONFIG_RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker-logger": 8}
CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


@dataclass
class ConfigInfo:
    name: str
    value: str | None  # None: sensitive, or no value
    source: str
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, str]]  # (name, value, source), highest first
    documentation: str | None


def _config_connection(brokers: Brokers, resource: str, name: str) -> KafkaConnection:
    """Where a resource's configs are asked for: a broker's (and its loggers') on that broker,
    as Kafka's admin client sends them; the rest to any broker."""
    if resource == "topic" or not name:
        return brokers.any()
    node = metadata(brokers, []).brokers.get(int(name))
    if node is None:
        raise AdminError(f"broker {name}", ErrorCode.broker_not_available, "no such live broker")
    return brokers.at(node.host, node.port)


def describe_configs(brokers: Brokers, resource: str, name: str) -> list[ConfigInfo]:
    """DescribeConfigs v4 of one resource ("topic", "broker" with "" for the cluster-wide
    defaults, "broker-logger"), with synonyms and documentation."""
    b = builder(DESCRIBE_CONFIGS, 4)
    with _config_connection(brokers, resource, name) as c:
        r = c.call(
            DESCRIBE_CONFIGS,
            4,
            resources=(
                b.DescribeConfigsResource(
                    resource_type=CONFIG_RESOURCE_TYPES[resource],
                    resource_name=name,
                    configuration_keys=None,
                ),
            ),
            include_synonyms=True,
            include_documentation=True,
        )
    (result,) = r.results
    _check(f"describe the configs of {resource} {name!r}", result.error_code, result.error_message)
    return [
        ConfigInfo(
            e.name,
            e.value,
            CONFIG_SOURCES.get(e.config_source, str(e.config_source)),
            e.read_only,
            e.is_sensitive,
            [(s.name, s.value, CONFIG_SOURCES.get(s.source, str(s.source))) for s in e.synonyms],
            e.documentation,
        )
        for e in result.configs
    ]


def alter_configs(
    brokers: Brokers,
    resource: str,
    name: str,
    add: dict[str, str],
    delete: list[str],
    validate_only: bool = False,
) -> None:
    """IncrementalAlterConfigs v1 of one resource: SET each of `add`, DELETE each of `delete`
    (as kafka-configs.sh --alter --add-config/--delete-config); raises AdminError with the
    cluster's reason."""
    b = builder(INCREMENTAL_ALTER_CONFIGS, 1)
    ops = [(k, 0, v) for k, v in add.items()] + [(k, 1, None) for k in delete]
    with _config_connection(brokers, resource, name) as c:
        r = c.call(
            INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=(
                b.AlterConfigsResource(
                    resource_type=CONFIG_RESOURCE_TYPES[resource],
                    resource_name=name,
                    configs=tuple(
                        b.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                    ),
                ),
            ),
            validate_only=validate_only,
        )
    (result,) = r.responses
    _check(f"alter the configs of {resource} {name!r}", result.error_code, result.error_message)
