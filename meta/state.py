"""The replicated metadata state machine: ``MetaState`` and the commands that change it.

Every change of cluster metadata is one Raft command (a ``Command``) and ``apply`` is the only
code that changes a ``MetaState``. Applying the same commands in the same order yields the same
state on every node and on every replay, so a command carries all of its non-deterministic
inputs: the proposer's wall clock, the UUIDs and random seeds it generated, its config defaults.
Nothing here reads a clock, a random generator or a config.

Each change of a topic, a broker, the ACL set, a SCRAM credential, a delegation token, the
dynamic configs of a broker or the finalized features bumps ``MetaState.offset`` and is reported
as a ``Change``; Watch streams publish them. The
producer-id counter is state too, but nothing brokers watch: it bumps no offset. Commands and
the state are stored as the versioned records of ``meta.records`` (the Raft log and its
dumps): a change of these classes is a change of its converters.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

from meta import controller
from meta.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    filter_matches,
    invalid_filter,
)
from meta.controller import ElectionType, IsrChange, NewTopic, Rejection
from meta.model import (
    CLUSTER_DEFAULT,
    NO_LEADER,
    Broker,
    ConfigAlteration,
    DelegationToken,
    Endpoint,
    Partition,
    ReassignmentInfo,
    ScramCredential,
    Topic,
)
from meta.protocol import ErrorCode
from meta.quotas import AlterClientQuotas, QuotaEntity
from meta.quotas import alter as _alter_client_quotas
from meta.resource_configs import AlterResourceConfigs
from meta.resource_configs import alter as _alter_resource_configs
from meta.topic_config import unclean_election_enabled

log = logging.getLogger("rafka.meta.state")

# How long a request id is remembered, so a client retry of an applied write is not re-applied.
REQUEST_MEMORY_MS = 5 * 60 * 1000
# Producer ids are handed to brokers in blocks of this many (Kafka's PRODUCER_ID_BLOCK_SIZE).
PRODUCER_ID_BLOCK_SIZE = 1000
_MAX_PRODUCER_ID = 2**63 - 1
# SCRAM mechanisms (Kafka's ScramMechanism) and the iteration bounds Kafka's controller accepts.
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384


class Remembered(NamedTuple):
    """An applied request's result, kept to answer a retry of the request with it."""

    now_ms: int  # of the command
    kind: type[Body]  # the command's body class
    result: Any


@dataclass
class MetaState:
    cluster_id: str = ""  # set once, by the first Raft leader (InitCluster)
    offset: int = 0  # offset of the latest Change
    topics: dict[str, Topic] = field(default_factory=dict)
    brokers: dict[int, Broker] = field(default_factory=dict)
    applied_requests: dict[str, Remembered] = field(default_factory=dict)  # oldest first
    next_producer_id: int = 0  # first id of the next producer-id block; never goes back
    # The group registry: group id -> its __consumer_offsets partition. Like the producer-id
    # counter it is state brokers do not watch: it bumps no offset.
    groups: dict[str, int] = field(default_factory=dict)
    # ACL bindings, in creation order (a dict used as an ordered set)
    acls: dict[AclBinding, None] = field(default_factory=dict)
    scram_credentials: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)
    delegation_tokens: dict[str, DelegationToken] = field(default_factory=dict)  # by token id
    # Dynamic broker configs (AlterConfigs on BROKER resources) by broker id; CLUSTER_DEFAULT
    # (-1) holds the cluster-wide defaults. Only resources with some config have an entry.
    broker_configs: dict[int, dict[str, str]] = field(default_factory=dict)
    # Finalized feature levels (Kafka's FeatureLevelRecords); a feature at level 0 is absent.
    features: dict[str, int] = field(default_factory=dict)
    features_initialized: bool = False  # set once by InitCluster (bootstrap levels)
    # GROUP and CLIENT_METRICS configs by (Kafka's ConfigResource type, name): meta.resource_configs
    resource_configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    # Client quotas by entity (meta.quotas): only entities with some quota have an entry.
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle a state of the pickled format dumped before a field existed: give it the
        field's default (``meta.records`` reads that format)."""
        self.__dict__.update(state)
        for name in (
            "groups",
            "acls",
            "scram_credentials",
            "delegation_tokens",
            "broker_configs",
            "features",
            "resource_configs",
            "client_quotas",
        ):
            self.__dict__.setdefault(name, {})
        self.__dict__.setdefault("features_initialized", False)


# ---------------------------------------------------------------- commands


@dataclass(frozen=True)
class InitCluster:
    """Proposed by the Raft leader until the cluster has an id and finalized features: only
    the first id counts, and only the first feature levels (bootstrap levels from the meta
    node's config; None in commands from before features, which leave them unset)."""

    cluster_id: str
    features: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True)
class CreateTopics:
    topics: tuple[NewTopic, ...]


@dataclass(frozen=True)
class DeleteTopics:
    names: tuple[str, ...]
    topic_ids: tuple[bytes, ...]


@dataclass(frozen=True)
class RegisterBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None
    replication_endpoint: str
    incarnation_id: bytes
    unclean_election_default: bool  # the proposer's unclean.leader.election.enable
    # Every advertised listener; empty (registrations from before listeners): host:port only
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True)
class FenceBroker:
    """Proposed by the Raft leader when a broker's lease expires."""

    broker_id: int
    epoch: int  # a fence of an older registration is ignored
    unclean_election_default: bool


@dataclass(frozen=True)
class UnfenceBroker:
    """Proposed when a fenced broker heartbeats again."""

    broker_id: int
    epoch: int
    unclean_election_default: bool


@dataclass(frozen=True)
class AlterPartition:
    """A partition leader asks to change the ISR of partitions it leads (Kafka's API 56)."""

    broker_id: int
    broker_epoch: int
    partitions: tuple[IsrChange, ...]


@dataclass(frozen=True)
class ControlledShutdown:
    """A broker about to stop asks to hand over its leaderships and leave every ISR."""

    broker_id: int
    broker_epoch: int
    unclean_election_default: bool


@dataclass(frozen=True)
class ElectLeaders:
    """An administrator's leader election (Kafka's API 43)."""

    election_type: ElectionType
    # (topic name, partition indexes), in request order; None: every partition
    topic_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None


@dataclass(frozen=True)
class BalanceLeaders:
    """Proposed by the Raft leader every leader.imbalance.check.interval.seconds: move each
    partition's leadership back to its preferred replica where possible."""


@dataclass(frozen=True)
class AllocateProducerIds:
    """A broker asks for the next block of producer ids (Kafka's API 67)."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class RegisterGroups:
    """Coordinators record groups they created: (group id, coordinator partition) each."""

    groups: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class UnregisterGroups:
    """Coordinators record groups they deleted."""

    group_ids: tuple[str, ...]


@dataclass(frozen=True)
class CreateAcls:
    """Kafka's CreateAcls (API 30): bindings already present are accepted and not added again."""

    bindings: tuple[AclBinding, ...]


@dataclass(frozen=True)
class DeleteAcls:
    """Kafka's DeleteAcls (API 31): every binding some filter matches is removed."""

    filters: tuple[AclBindingFilter, ...]


@dataclass(frozen=True)
class AlterScramCredentials:
    """Kafka's AlterUserScramCredentials (API 51), keys already derived by the broker."""

    upserts: tuple[tuple[str, str, ScramCredential], ...]  # (user, mechanism, credential)
    deletions: tuple[tuple[str, str], ...]  # (user, mechanism)


@dataclass(frozen=True)
class CreateDelegationToken:
    """Kafka's CreateDelegationToken (API 38): the broker made the token (id, HMAC, times)."""

    token: DelegationToken


@dataclass(frozen=True)
class RenewDelegationToken:
    """Kafka's RenewDelegationToken (API 39) by ``principal`` at ``now_ms``."""

    hmac: bytes
    principal: str
    renew_period_ms: int  # the broker resolved the default
    now_ms: int


@dataclass(frozen=True)
class ExpireDelegationToken:
    """Kafka's ExpireDelegationToken (API 40); a negative period expires the token now."""

    hmac: bytes
    principal: str
    expiry_period_ms: int
    now_ms: int


@dataclass(frozen=True)
class RemoveExpiredTokens:
    """Proposed by the Raft leader when some delegation token expired before ``now_ms``."""

    now_ms: int


@dataclass(frozen=True)
class AlterConfigs:
    """Kafka's AlterConfigs (33) and IncrementalAlterConfigs (44) of TOPIC and BROKER
    resources, values already validated by the broker."""

    alterations: tuple[ConfigAlteration, ...]
    validate_only: bool = False


@dataclass(frozen=True)
class CreatePartitions:
    """Kafka's CreatePartitions (37) of one topic."""

    topic: str
    count: int  # the new total
    assignments: tuple[tuple[int, ...], ...] | None  # one replica list per new partition
    validate_only: bool = False
    placement_seed: int = 0  # picks the placement's random start index and replica shift


@dataclass(frozen=True)
class AlterReassignments:
    """Kafka's AlterPartitionReassignments (45): per partition the target replicas, or None to
    cancel its reassignment."""

    reassignments: tuple[tuple[str, int, tuple[int, ...] | None], ...]
    unclean_election_default: bool = False  # the proposer's unclean.leader.election.enable


@dataclass(frozen=True)
class UpdateFeatures:
    """Kafka's UpdateFeatures (57): (feature, max version level, upgrade type) each."""

    updates: tuple[tuple[str, int, int], ...]
    validate_only: bool = False


@dataclass(frozen=True)
class OfflineReplicas:
    """A broker's replicas whose log dir failed (Kafka's heartbeat with offline dirs): the
    broker leaves their ISRs and leaderships, as if fenced for those partitions only."""

    broker_id: int
    broker_epoch: int
    partitions: tuple[tuple[str, int], ...]  # (topic, partition index)
    unclean_election_default: bool = False


Body = (
    InitCluster
    | CreateTopics
    | DeleteTopics
    | RegisterBroker
    | FenceBroker
    | UnfenceBroker
    | AlterPartition
    | ControlledShutdown
    | ElectLeaders
    | BalanceLeaders
    | AllocateProducerIds
    | RegisterGroups
    | UnregisterGroups
    | CreateAcls
    | DeleteAcls
    | AlterScramCredentials
    | CreateDelegationToken
    | RenewDelegationToken
    | ExpireDelegationToken
    | RemoveExpiredTokens
    | AlterConfigs
    | CreatePartitions
    | AlterReassignments
    | UpdateFeatures
    | OfflineReplicas
    | AlterResourceConfigs
    | AlterClientQuotas
)


@dataclass(frozen=True)
class Command:
    request_id: str  # retries of one request reuse it; a remembered id is not applied again
    now_ms: int  # the proposer's wall clock
    body: Body


# ---------------------------------------------------------------- results


ChangeKind = Literal[
    "topic",
    "topic_deleted",
    "broker",
    "acls",
    "scram",
    "token",
    "broker_config",
    "features",
    "resource_config",
    "client_quota",
]
ChangeKey = str | int | tuple[str, str] | tuple[int, str] | QuotaEntity


@dataclass(frozen=True)
class Change:
    """One change; watchers get the changed entity as it is after the command, so a scram or
    token change whose key is no longer in the state is a removal."""

    offset: int
    kind: ChangeKind
    # topic name, broker id (also of broker_config: -1 the cluster default), (user, mechanism),
    # token id; "" for acls and features
    key: ChangeKey
    topic_id: bytes = b""  # of a deleted topic
    acls_added: tuple[AclBinding, ...] = ()  # an "acls" change is a delta of the set
    acls_removed: tuple[AclBinding, ...] = ()


@dataclass(frozen=True)
class DeleteOutcome:
    name: str
    topic_id: bytes
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class IsrOutcome:
    """One partition of an AlterPartition: its state after the change, or why it was refused."""

    topic_id: bytes
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    partition: Partition | None = None  # set when error_code is NONE


@dataclass(frozen=True)
class AlterPartitionOutcome:
    error_code: ErrorCode  # request level (STALE_BROKER_EPOCH); each partition repeats it
    error_message: str
    partitions: list[IsrOutcome]


@dataclass(frozen=True)
class ShutdownOutcome:
    may_exit: bool  # the broker leads no partition any more (it is now fenced)
    leaderships_left: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class ElectionOutcome:
    topic: str
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class ProducerIdBlock:
    first: int  # -1 on error
    count: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class Outcome:
    """The error (or none) of one item of a request: one ACL binding, one delegation token."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class AclDeleteOutcome:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    deleted: tuple[AclBinding, ...] = ()  # the bindings the filter matched, all removed


@dataclass(frozen=True)
class ScramOutcome:
    user: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class TokenOutcome:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    expiry_ms: int = 0  # the token's expiry after the request (Kafka's expiryTimestampMs)


@dataclass(frozen=True)
class FeatureOutcome:
    name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class OfflineOutcome:
    partitions_changed: int  # partitions whose ISR or leader changed
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class Applied:
    result: Any
    changes: list[Change]


def apply(state: MetaState, command: Command) -> Applied:
    """Apply one command to ``state``; return its result and the changes it made."""
    _forget_requests_before(state, command.now_ms - REQUEST_MEMORY_MS)
    remembered = state.applied_requests.get(command.request_id)
    if remembered is not None:
        return Applied(remembered.result, [])
    changes = _Changes(state)
    kind = type(command.body)
    result = _APPLIERS[kind](state, command.body, changes)
    state.applied_requests[command.request_id] = Remembered(command.now_ms, kind, result)
    return Applied(result, changes.recorded)


def _forget_requests_before(state: MetaState, cutoff_ms: int) -> None:
    requests = state.applied_requests
    while requests:
        oldest = next(iter(requests))
        if requests[oldest].now_ms >= cutoff_ms:
            return
        del requests[oldest]


class _Changes:
    """Records what a command changed; each topic or broker once, with a new offset."""

    def __init__(self, state: MetaState) -> None:
        self._state = state
        self.recorded: list[Change] = []
        self._offsets: dict[tuple[ChangeKind, ChangeKey], int] = {}

    def topic(self, name: str) -> None:
        self._record("topic", name)

    def topic_deleted(self, topic: Topic) -> None:
        self._record("topic_deleted", topic.name, topic.topic_id)

    def broker(self, broker_id: int) -> int:
        """Record a broker change; return its offset."""
        return self._record("broker", broker_id)

    def acls(self, added: tuple[AclBinding, ...], removed: tuple[AclBinding, ...]) -> None:
        """Record a change of the ACL set (once per command)."""
        if added or removed:
            self._state.offset += 1
            self.recorded.append(Change(self._state.offset, "acls", "", b"", added, removed))

    def scram(self, user: str, mechanism: str) -> None:
        self._record("scram", (user, mechanism))

    def token(self, token_id: str) -> None:
        self._record("token", token_id)

    def broker_config(self, broker_id: int) -> None:
        self._record("broker_config", broker_id)

    def features(self) -> None:
        self._record("features", "")

    def resource_config(self, resource_type: int, name: str) -> None:
        self._record("resource_config", (resource_type, name))

    def client_quota(self, entity: QuotaEntity) -> None:
        self._record("client_quota", entity)

    def _record(self, kind: ChangeKind, key: ChangeKey, topic_id: bytes = b"") -> int:
        if (kind, key) not in self._offsets:
            self._state.offset += 1
            self._offsets[kind, key] = self._state.offset
            self.recorded.append(Change(self._state.offset, kind, key, topic_id))
        return self._offsets[kind, key]


# ---------------------------------------------------------------- appliers


def _init_cluster(state: MetaState, cmd: InitCluster, changes: _Changes) -> str:
    if not state.cluster_id:  # only the first proposal counts
        state.cluster_id = cmd.cluster_id
        log.info("Cluster initialised with cluster id %s", cmd.cluster_id)
    if cmd.features is not None and not state.features_initialized:
        state.features = {name: level for name, level in cmd.features if level > 0}
        state.features_initialized = True
        changes.features()
        log.info("Finalized features bootstrapped: %s", state.features)
    return state.cluster_id


def _create_topics(
    state: MetaState, cmd: CreateTopics, changes: _Changes
) -> list[Topic | Rejection]:
    outcomes = controller.plan_topics(cmd.topics, state.topics, state.brokers)
    for outcome in outcomes:
        if isinstance(outcome, Topic):
            state.topics[outcome.name] = outcome
            changes.topic(outcome.name)
            log.info(
                "Created topic %s (id %s) with %d partition(s)",
                outcome.name,
                outcome.topic_id.hex(),
                len(outcome.partitions),
            )
    return outcomes


def _delete_topics(state: MetaState, cmd: DeleteTopics, changes: _Changes) -> list[DeleteOutcome]:
    by_id = {topic.topic_id: topic for topic in state.topics.values()}
    wanted: list[tuple[str, bytes, Topic | None, ErrorCode]] = [
        (name, b"", state.topics.get(name), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        for name in cmd.names
    ] + [
        ("", topic_id, by_id.get(topic_id), ErrorCode.UNKNOWN_TOPIC_ID)
        for topic_id in cmd.topic_ids
    ]
    outcomes = []
    for name, topic_id, topic, missing in wanted:
        if topic is None:
            what = f"topic {name}" if name else f"topic id {topic_id.hex()}"
            outcomes.append(DeleteOutcome(name, topic_id, missing, f"Unknown {what}."))
        elif topic.name not in state.topics:
            outcomes.append(
                DeleteOutcome(
                    topic.name,
                    topic.topic_id,
                    ErrorCode.INVALID_REQUEST,
                    f"Topic {topic.name} is named more than once in the request.",
                )
            )
        else:
            del state.topics[topic.name]
            changes.topic_deleted(topic)
            log.info("Deleted topic %s (id %s)", topic.name, topic.topic_id.hex())
            outcomes.append(DeleteOutcome(topic.name, topic.topic_id))
    return outcomes


def _register_broker(state: MetaState, cmd: RegisterBroker, changes: _Changes) -> int:
    old = state.brokers.get(cmd.broker_id)
    epoch = changes.broker(cmd.broker_id)  # like KRaft: the offset of the registration
    # A new Broker: this also ends a controlled shutdown (the restarted broker is back).
    state.brokers[cmd.broker_id] = Broker(
        cmd.broker_id,
        cmd.host,
        cmd.port,
        cmd.rack,
        cmd.replication_endpoint,
        cmd.incarnation_id,
        epoch,
        fenced=True,
        endpoints=cmd.endpoints,
    )
    if old is not None and not old.fenced and old.incarnation_id != cmd.incarnation_id:
        # The old process died without being fenced: its leaderships and ISR memberships go,
        # exactly as if its lease had expired; it wins back offline partitions below.
        log.info(
            "Broker %d restarted (incarnation %s -> %s); moving its leaderships",
            cmd.broker_id,
            old.incarnation_id.hex(),
            cmd.incarnation_id.hex(),
        )
        _after_fencing(state, cmd.broker_id, cmd.unclean_election_default, changes)
    log.info("Registered broker %d at %s:%d, epoch %d", cmd.broker_id, cmd.host, cmd.port, epoch)
    _unfence_and_elect(state, cmd.broker_id, cmd.unclean_election_default, changes)
    return epoch


def _fence_broker(state: MetaState, cmd: FenceBroker, changes: _Changes) -> bool:
    broker = state.brokers.get(cmd.broker_id)
    if broker is None or broker.epoch != cmd.epoch or broker.fenced:
        return False
    state.brokers[broker.id] = replace(broker, fenced=True)
    changes.broker(broker.id)
    log.info("Fenced broker %d (epoch %d)", broker.id, broker.epoch)
    _after_fencing(state, broker.id, cmd.unclean_election_default, changes)
    return True


def _unfence_broker(state: MetaState, cmd: UnfenceBroker, changes: _Changes) -> bool:
    broker = state.brokers.get(cmd.broker_id)
    if broker is None or broker.epoch != cmd.epoch or not broker.fenced:
        return False
    if broker.in_controlled_shutdown:  # it was let go: only a new registration brings it back
        return False
    log.info("Unfenced broker %d (epoch %d)", broker.id, broker.epoch)
    _unfence_and_elect(state, broker.id, cmd.unclean_election_default, changes)
    return True


def _after_fencing(
    state: MetaState,
    broker_id: int,
    unclean_default: bool,
    changes: _Changes,
    only: set[tuple[str, int]] | None = None,
) -> int:
    """Move leadership and ISR membership off ``broker_id``, which is now fenced (or in a
    controlled shutdown), or only off its replicas ``only`` (which it cannot serve any more);
    return how many partitions changed."""
    active = controller.active_brokers(state.brokers) - {broker_id}
    moved, offline, left_isrs, changed = 0, [], 0, 0

    def decide(topic: Topic, partition: Partition) -> Partition | None:
        nonlocal moved, left_isrs, changed
        if only is not None and (topic.name, partition.index) not in only:
            return None
        new = controller.on_broker_fenced(
            partition, broker_id, active, _unclean(state, topic, unclean_default), topic.name
        )
        if new is not None:
            changed += 1
            left_isrs += broker_id not in new.isr
            if new.leader == NO_LEADER != partition.leader:
                offline.append(f"{topic.name}-{partition.index}")
            elif new.leader != partition.leader:
                moved += 1
        return new

    _update_partitions(state, changes, decide)
    if moved or left_isrs:
        log.info(
            "Broker %d left %d ISR(s); %d of its leaderships moved to other in-sync replicas",
            broker_id,
            left_isrs,
            moved,
        )
    if offline:
        log.warning(
            "%d partition(s) offline: broker %d was their last active in-sync replica; they "
            "come back when it does (or by unclean leader election): %s",
            len(offline),
            broker_id,
            ", ".join(offline[:20]) + (", ..." if len(offline) > 20 else ""),
        )
    return changed


def _unfence_and_elect(
    state: MetaState, broker_id: int, unclean_default: bool, changes: _Changes
) -> None:
    """Unfence ``broker_id`` and make it leader of the offline partitions it can lead."""
    state.brokers[broker_id] = replace(state.brokers[broker_id], fenced=False)
    changes.broker(broker_id)
    _update_partitions(
        state,
        changes,
        lambda topic, partition: controller.on_broker_unfenced(
            partition, broker_id, _unclean(state, topic, unclean_default), topic.name
        ),
    )


def _alter_partition(
    state: MetaState, cmd: AlterPartition, changes: _Changes
) -> AlterPartitionOutcome:
    if stale := _stale_broker_epoch(state, cmd.broker_id, cmd.broker_epoch):
        log.warning("Rejected AlterPartition from broker %d: %s", cmd.broker_id, stale)
        refused = [
            IsrOutcome(c.topic_id, c.partition_index, ErrorCode.STALE_BROKER_EPOCH, stale)
            for c in cmd.partitions
        ]
        return AlterPartitionOutcome(ErrorCode.STALE_BROKER_EPOCH, stale, refused)
    names = {topic.topic_id: name for name, topic in state.topics.items()}
    outcomes = []
    for change in cmd.partitions:
        outcome = _change_isr(state, cmd.broker_id, names.get(change.topic_id), change, changes)
        if outcome.error_code != ErrorCode.NONE:
            log.warning(
                "Rejected AlterPartition from broker %d: %s (%s)",
                cmd.broker_id,
                outcome.error_message,
                outcome.error_code.name,
            )
        outcomes.append(outcome)
    return AlterPartitionOutcome(ErrorCode.NONE, "", outcomes)


def _change_isr(
    state: MetaState, sender: int, name: str | None, change: IsrChange, changes: _Changes
) -> IsrOutcome:
    def refused(code: ErrorCode, message: str) -> IsrOutcome:
        return IsrOutcome(change.topic_id, change.partition_index, code, message)

    if name is None:
        return refused(
            ErrorCode.UNKNOWN_TOPIC_ID,
            f"Unknown topic id {change.topic_id.hex()} (partition {change.partition_index}).",
        )
    topic = state.topics[name]
    if not 0 <= change.partition_index < len(topic.partitions):
        return refused(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Topic {name} has no partition {change.partition_index}.",
        )
    partition = topic.partitions[change.partition_index]
    if rejection := controller.check_isr_change(partition, change, sender, state.brokers):
        return refused(rejection.error_code, f"{name}-{partition.index}: {rejection.message}")
    changed = controller.change_isr(partition, change.new_isr)
    if partition.reassigning:
        active = controller.active_brokers(state.brokers)
        completed = controller.complete_reassignment(partition, changed or partition, active)
        if not completed.reassigning:
            _replace_partition(state, topic, completed, changes)
            log.info(
                "Reassignment of %s-%d completed: replicas %s, ISR %s, leader %d (leader epoch %d)",
                name,
                partition.index,
                list(completed.replicas),
                list(completed.isr),
                completed.leader,
                completed.leader_epoch,
            )
            if completed.leader != sender:  # Kafka's answer when the leader moved with it
                return refused(
                    ErrorCode.NEW_LEADER_ELECTED,
                    f"{name}-{partition.index}: the ISR change completed the partition's "
                    f"reassignment and broker {completed.leader} now leads it.",
                )
            return IsrOutcome(change.topic_id, change.partition_index, partition=completed)
    if changed is not None:
        _replace_partition(state, topic, changed, changes)
        log.info(
            "ISR of %s-%d changed from %s to %s by leader %d (leader epoch %d, partition "
            "epoch %d -> %d)",
            name,
            partition.index,
            list(partition.isr),
            list(changed.isr),
            sender,
            changed.leader_epoch,
            partition.partition_epoch,
            changed.partition_epoch,
        )
    return IsrOutcome(change.topic_id, change.partition_index, partition=changed or partition)


def _controlled_shutdown(
    state: MetaState, cmd: ControlledShutdown, changes: _Changes
) -> ShutdownOutcome:
    """KRaft's controlled shutdown: the broker leaves every ISR (but as its last member) and
    hands each leadership to another active ISR member; a partition with none goes offline, as
    on a fence. Then it leads nothing, so it may exit: it is fenced right away (KRaft's
    SHUTDOWN_NOW) rather than when its lease runs out."""
    if stale := _stale_broker_epoch(state, cmd.broker_id, cmd.broker_epoch):
        log.warning("Rejected controlled shutdown of broker %d: %s", cmd.broker_id, stale)
        return ShutdownOutcome(False, 0, ErrorCode.STALE_BROKER_EPOCH, stale)
    broker = state.brokers[cmd.broker_id]
    if not broker.in_controlled_shutdown:
        state.brokers[broker.id] = replace(broker, in_controlled_shutdown=True)
        changes.broker(broker.id)
        log.info(
            "Broker %d (epoch %d) is shutting down: moving its leaderships to other in-sync "
            "replicas and removing it from ISRs",
            broker.id,
            broker.epoch,
        )
    _after_fencing(state, broker.id, cmd.unclean_election_default, changes)
    left = sum(
        partition.leader == broker.id
        for topic in state.topics.values()
        for partition in topic.partitions
    )
    broker = state.brokers[broker.id]
    if left == 0 and not broker.fenced:
        state.brokers[broker.id] = replace(broker, fenced=True)
        changes.broker(broker.id)
        log.info("Broker %d leads no partition any more: it may shut down (fenced)", broker.id)
    return ShutdownOutcome(left == 0, left)


def _elect_leaders(state: MetaState, cmd: ElectLeaders, changes: _Changes) -> list[ElectionOutcome]:
    active = controller.active_brokers(state.brokers)
    everything = cmd.topic_partitions is None
    wanted = cmd.topic_partitions
    if wanted is None:
        wanted = tuple(
            (name, tuple(range(len(topic.partitions))))
            for name, topic in sorted(state.topics.items())
        )
    outcomes = []
    for name, indexes in wanted:
        for index in indexes:
            topic = state.topics.get(name)
            if topic is None or not 0 <= index < len(topic.partitions):
                outcome = ElectionOutcome(
                    name,
                    index,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such partition as {name}-{index}." if topic else f"No such topic {name}.",
                )
            else:
                outcome = _elect(state, topic, index, cmd.election_type, active, changes)
            if not (everything and outcome.error_code == ErrorCode.ELECTION_NOT_NEEDED):
                outcomes.append(outcome)  # like Kafka: "all" omits partitions with no change
    return outcomes


def _elect(
    state: MetaState,
    topic: Topic,
    index: int,
    election: ElectionType,
    active: set[int],
    changes: _Changes,
) -> ElectionOutcome:
    old = topic.partitions[index]
    decided = controller.elect_leader(old, election, active, topic.name)
    if isinstance(decided, Rejection):
        return ElectionOutcome(topic.name, index, decided.error_code, decided.message)
    _replace_partition(state, topic, decided, changes)
    log.info(
        "%s leader election for %s-%d: leader %d -> %d (leader epoch %d)",
        election.name.capitalize(),
        topic.name,
        index,
        old.leader,
        decided.leader,
        decided.leader_epoch,
    )
    return ElectionOutcome(topic.name, index)


def _balance_leaders(state: MetaState, cmd: BalanceLeaders, changes: _Changes) -> int:
    active = controller.active_brokers(state.brokers)
    moved = 0

    def decide(topic: Topic, partition: Partition) -> Partition | None:
        nonlocal moved
        elected = controller.elect_preferred(partition, active)
        if elected is not None:
            moved += 1
            log.info(
                "Preferred leader election for %s-%d: leader %d -> %d (leader epoch %d)",
                topic.name,
                partition.index,
                partition.leader,
                elected.leader,
                elected.leader_epoch,
            )
        return elected

    _update_partitions(state, changes, decide)
    return moved


def _allocate_producer_ids(
    state: MetaState, cmd: AllocateProducerIds, changes: _Changes
) -> ProducerIdBlock:
    if stale := _stale_broker_epoch(state, cmd.broker_id, cmd.broker_epoch):
        log.warning("Refused producer ids to broker %d: %s", cmd.broker_id, stale)
        return ProducerIdBlock(-1, 0, ErrorCode.STALE_BROKER_EPOCH, stale)
    first = state.next_producer_id
    if first > _MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        message = "Exhausted all producer ids: the next block would pass the int64 limit."
        log.error("Refused producer ids to broker %d: %s", cmd.broker_id, message)
        return ProducerIdBlock(-1, 0, ErrorCode.UNKNOWN_SERVER_ERROR, message)
    state.next_producer_id = first + PRODUCER_ID_BLOCK_SIZE
    log.info(
        "Allocated producer ids %d-%d to broker %d",
        first,
        first + PRODUCER_ID_BLOCK_SIZE - 1,
        cmd.broker_id,
    )
    return ProducerIdBlock(first, PRODUCER_ID_BLOCK_SIZE)


def _register_groups(state: MetaState, cmd: RegisterGroups, changes: _Changes) -> int:
    added = 0
    for group_id, partition in cmd.groups:
        added += group_id not in state.groups
        state.groups[group_id] = partition
    return added


def _unregister_groups(state: MetaState, cmd: UnregisterGroups, changes: _Changes) -> int:
    return sum(state.groups.pop(group_id, None) is not None for group_id in cmd.group_ids)


# ---------------------------------------------------------------- security metadata


def _create_acls(state: MetaState, cmd: CreateAcls, changes: _Changes) -> list[Outcome]:
    """Kafka's AclControlManager.createAcls: each binding is validated on its own; one already
    present succeeds without being added again."""
    outcomes, added = [], []
    for binding in cmd.bindings:
        if invalid := _invalid_acl(binding):
            log.warning("Refused to create ACL %s: %s", binding, invalid)
            outcomes.append(Outcome(ErrorCode.INVALID_REQUEST, invalid))
            continue
        if binding not in state.acls:
            state.acls[binding] = None
            added.append(binding)
            log.info("Created ACL %s", binding)
        outcomes.append(Outcome())
    changes.acls(tuple(added), ())
    return outcomes


def _invalid_acl(binding: AclBinding) -> str:
    """Why Kafka refuses to store ``binding`` (INVALID_REQUEST), "" if it does not: the
    controller's validateNewAcl, the broker's CLUSTER name check, a parseable principal."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission_type.name}"
    if not binding.resource_name:
        return "Resource name should not be empty"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if ":" not in binding.principal:
        return (
            f"Could not parse principal from `{binding.principal}` (no colon is present "
            "separating the principal type from the principal name)"
        )
    return ""


def _delete_acls(state: MetaState, cmd: DeleteAcls, changes: _Changes) -> list[AclDeleteOutcome]:
    """Kafka's AclControlManager.deleteAcls: every filter is matched against the bindings as
    they were before the request, so a binding two filters match is reported by both."""
    outcomes, removed = [], {}
    for f in cmd.filters:
        if invalid := invalid_filter(f):
            outcomes.append(AclDeleteOutcome(ErrorCode.INVALID_REQUEST, invalid))
        else:
            deleted = tuple(b for b in state.acls if filter_matches(f, b))
            removed.update(dict.fromkeys(deleted))
            outcomes.append(AclDeleteOutcome(deleted=deleted))
    for binding in removed:
        del state.acls[binding]
        log.info("Deleted ACL %s", binding)
    changes.acls((), tuple(removed))
    return outcomes


def _alter_scram_credentials(
    state: MetaState, cmd: AlterScramCredentials, changes: _Changes
) -> list[ScramOutcome]:
    """Kafka's AlterUserScramCredentials: one result per user (in request order, deletions
    first); a user's alterations are applied together, or none of them if one is refused."""
    alterations: list[tuple[str, str, ScramCredential | None]] = [
        (user, mechanism, None) for user, mechanism in cmd.deletions
    ] + list(cmd.upserts)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: set[tuple[str, str]] = set()
    for user, mechanism, credential in alterations:
        error = _invalid_scram_alteration(state, user, mechanism, credential, seen)
        seen.add((user, mechanism))
        if error is not None and user not in errors:
            errors[user] = error
    results: dict[str, ScramOutcome] = {}
    for user, mechanism, credential in alterations:
        if user in errors:
            code, message = errors[user]
            log.warning("Refused to alter SCRAM credentials of user %s: %s", user, message)
            results[user] = ScramOutcome(user, code, message)
            continue
        if credential is None:
            del state.scram_credentials[user, mechanism]
            log.info("Deleted the %s credential of user %s", mechanism, user)
        else:
            state.scram_credentials[user, mechanism] = credential
            log.info("Stored the %s credential of user %s", mechanism, user)
        changes.scram(user, mechanism)
        results[user] = ScramOutcome(user)
    return list(results.values())


def _invalid_scram_alteration(
    state: MetaState,
    user: str,
    mechanism: str,
    credential: ScramCredential | None,
    seen: set[tuple[str, str]],
) -> tuple[ErrorCode, str] | None:
    """Kafka's ScramControlManager checks of one upsert (or deletion: ``credential`` None)."""
    if (user, mechanism) in seen:
        return (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in SCRAM_MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if credential is None:
        if (user, mechanism) not in state.scram_credentials:
            return (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
    elif credential.iterations < SCRAM_MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    elif credential.iterations > SCRAM_MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def _create_delegation_token(
    state: MetaState, cmd: CreateDelegationToken, changes: _Changes
) -> TokenOutcome:
    token = cmd.token
    if token.token_id in state.delegation_tokens:
        message = f"A delegation token with id {token.token_id} already exists."
        log.warning("Refused to create a delegation token: %s", message)
        return TokenOutcome(ErrorCode.INVALID_REQUEST, message)
    state.delegation_tokens[token.token_id] = token
    changes.token(token.token_id)
    log.info("Created delegation token %s for %s", token.token_id, token.owner)
    return TokenOutcome(expiry_ms=token.expiry_ms)


def _renew_delegation_token(
    state: MetaState, cmd: RenewDelegationToken, changes: _Changes
) -> TokenOutcome:
    token, refusal = _token_to_change(state, cmd.hmac, cmd.principal, cmd.now_ms, changes)
    if token is None:
        return refusal
    expiry_ms = min(token.max_ms, cmd.now_ms + cmd.renew_period_ms)
    state.delegation_tokens[token.token_id] = replace(token, expiry_ms=expiry_ms)
    changes.token(token.token_id)
    log.info("Renewed delegation token %s until %d", token.token_id, expiry_ms)
    return TokenOutcome(expiry_ms=expiry_ms)


def _expire_delegation_token(
    state: MetaState, cmd: ExpireDelegationToken, changes: _Changes
) -> TokenOutcome:
    """Kafka's expire: a negative period removes the token now (and answers now as its expiry,
    as KRaft does); otherwise it expires after the period, not past max_ms."""
    token, refusal = _token_to_change(state, cmd.hmac, cmd.principal, cmd.now_ms, changes)
    if token is None:
        return refusal
    if cmd.expiry_period_ms < 0:
        del state.delegation_tokens[token.token_id]
        changes.token(token.token_id)
        log.info("Expired delegation token %s", token.token_id)
        return TokenOutcome(expiry_ms=cmd.now_ms)
    expiry_ms = min(token.max_ms, cmd.now_ms + cmd.expiry_period_ms)
    state.delegation_tokens[token.token_id] = replace(token, expiry_ms=expiry_ms)
    changes.token(token.token_id)
    log.info("Delegation token %s now expires at %d", token.token_id, expiry_ms)
    return TokenOutcome(expiry_ms=expiry_ms)


def _token_to_change(
    state: MetaState, hmac: bytes, principal: str, now_ms: int, changes: _Changes
) -> tuple[DelegationToken | None, TokenOutcome]:
    """The token ``principal`` may renew or expire, or (None, why not) with Kafka's errors. An
    expired token is removed on the way."""
    token = next((t for t in state.delegation_tokens.values() if t.hmac == hmac), None)
    if token is None:
        refusal = TokenOutcome(ErrorCode.DELEGATION_TOKEN_NOT_FOUND, "Delegation token not found.")
    elif token.expiry_ms < now_ms or token.max_ms < now_ms:
        _remove_tokens(state, [token], changes)
        refusal = TokenOutcome(
            ErrorCode.DELEGATION_TOKEN_EXPIRED, f"Delegation token {token.token_id} has expired."
        )
    elif not token.may_renew(principal):
        refusal = TokenOutcome(
            ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH,
            f"{principal} is neither the owner nor a renewer of delegation token {token.token_id}.",
        )
    else:
        return token, TokenOutcome()
    log.warning("Refused to change a delegation token: %s", refusal.error_message)
    return None, refusal


def _remove_expired_tokens(state: MetaState, cmd: RemoveExpiredTokens, changes: _Changes) -> int:
    expired = [
        t for t in state.delegation_tokens.values() if min(t.expiry_ms, t.max_ms) < cmd.now_ms
    ]
    _remove_tokens(state, expired, changes)
    return len(expired)


def _remove_tokens(state: MetaState, tokens: list[DelegationToken], changes: _Changes) -> None:
    for token in tokens:
        del state.delegation_tokens[token.token_id]
        changes.token(token.token_id)
        log.info("Removed delegation token %s: it expired at %d", token.token_id, token.expiry_ms)


# ---------------------------------------------------------------- cluster administration


def _alter_configs(state: MetaState, cmd: AlterConfigs, changes: _Changes) -> list[Outcome]:
    """Kafka's ConfigurationControlManager: each resource must exist (QuorumController's
    ConfigResourceExistenceChecker); its dynamic configs are then replaced (AlterConfigs) or
    changed (IncrementalAlterConfigs). A broker resource is reported changed even when its
    configs are not, as Kafka does so brokers reload them (KAFKA-14136)."""
    outcomes = []
    for alteration in cmd.alterations:
        refusal = _config_resource_refusal(state, alteration)
        if refusal is not None:
            log.warning(
                "Refused to alter the configs of %s %r: %s",
                alteration.resource_type,
                alteration.name,
                refusal.error_message,
            )
            outcomes.append(refusal)
            continue
        outcomes.append(Outcome())
        if cmd.validate_only:
            continue
        if alteration.resource_type == "topic":
            topic = state.topics[alteration.name]
            configs = _altered(topic.configs, alteration)
            if configs != topic.configs:
                state.topics[topic.name] = replace(topic, configs=configs)
                changes.topic(topic.name)
            what = f"topic {topic.name}"
        else:
            broker_id = int(alteration.name) if alteration.name else CLUSTER_DEFAULT
            configs = _altered(state.broker_configs.get(broker_id, {}), alteration)
            if configs:
                state.broker_configs[broker_id] = configs
            else:
                state.broker_configs.pop(broker_id, None)
            changes.broker_config(broker_id)
            what = f"broker {broker_id}" if alteration.name else "the cluster-wide broker default"
        # names only: broker configs may hold secrets (Kafka's sensitive configs)
        log.info(
            "Altered the dynamic configs of %s (%s): set %s, removed %s",
            what,
            "replaced" if alteration.replace else "incremental",
            sorted(alteration.set),
            sorted(set(alteration.delete)),
        )
    return outcomes


def _config_resource_refusal(state: MetaState, alteration: ConfigAlteration) -> Outcome | None:
    name = alteration.name
    if alteration.resource_type == "topic":
        if name not in state.topics:
            return Outcome(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
    elif alteration.resource_type == "broker":
        if not name:
            return None  # the cluster-wide default always exists
        if not name.lstrip("-").isdigit():
            return Outcome(ErrorCode.INVALID_REQUEST, f"Invalid broker name {name}")
        if int(name) not in state.brokers:
            return Outcome(ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {name} found.")
    else:
        return Outcome(
            ErrorCode.INVALID_REQUEST, f"Unsupported resource type {alteration.resource_type!r}"
        )
    return None


def _altered(configs: dict[str, str], alteration: ConfigAlteration) -> dict[str, str]:
    """A new dict (configs are shared by frozen entities, never mutated)."""
    altered = {} if alteration.replace else dict(configs)
    altered.update(alteration.set)
    for name in alteration.delete:
        altered.pop(name, None)
    return altered


def _create_partitions(state: MetaState, cmd: CreatePartitions, changes: _Changes) -> Outcome:
    topic = state.topics.get(cmd.topic)
    if topic is None:
        outcome: Topic | Rejection = Rejection(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{cmd.topic}' does not exist."
        )
    else:
        outcome = controller.plan_new_partitions(
            topic, cmd.count, cmd.assignments, state.brokers, cmd.placement_seed
        )
    if isinstance(outcome, Rejection):
        log.warning(
            "Refused to create partitions of topic %s (to %d): %s",
            cmd.topic,
            cmd.count,
            outcome.message,
        )
        return Outcome(outcome.error_code, outcome.message)
    if not cmd.validate_only and topic is not None:
        state.topics[topic.name] = outcome
        changes.topic(topic.name)
        log.info(
            "Topic %s now has %d partition(s) (was %d); new replicas %s",
            topic.name,
            len(outcome.partitions),
            len(topic.partitions),
            [list(p.replicas) for p in outcome.partitions[len(topic.partitions) :]],
        )
    return Outcome()


def _alter_reassignments(
    state: MetaState, cmd: AlterReassignments, changes: _Changes
) -> list[Outcome]:
    """Kafka's alterPartitionReassignments: each partition on its own."""
    outcomes = []
    for name, index, target in cmd.reassignments:
        topic = state.topics.get(name)
        if topic is None:
            decided: Partition | Rejection = Rejection(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
            )
        elif not 0 <= index < len(topic.partitions):
            decided = Rejection(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}."
            )
        elif target is None:
            unclean = _unclean(state, topic, cmd.unclean_election_default)
            decided = controller.cancel_reassignment(
                topic.partitions[index], state.brokers, unclean, name
            )
        else:
            decided = controller.reassign(topic.partitions[index], target, state.brokers, name)
        if isinstance(decided, Rejection):
            log.warning(
                "Unable to alter the reassignment of %s-%d: %s", name, index, decided.message
            )
            outcomes.append(Outcome(decided.error_code, decided.message))
            continue
        old = state.topics[name].partitions[index]
        if decided != old:
            _replace_partition(state, state.topics[name], decided, changes)
        log.info(
            "%s of %s-%d: replicas %s -> %s (adding %s, removing %s), ISR %s, leader %d",
            "Cancelled the reassignment" if target is None else f"Reassignment to {list(target)}",
            name,
            index,
            list(old.replicas),
            list(decided.replicas),
            list(decided.adding_replicas),
            list(decided.removing_replicas),
            list(decided.isr),
            decided.leader,
        )
        outcomes.append(Outcome())
    return outcomes


def list_reassignments(
    state: MetaState, partitions: tuple[tuple[str, int], ...] | None
) -> list[ReassignmentInfo]:
    """Kafka's listPartitionReassignments: the given partitions (None: every partition) that
    are being reassigned; unknown topics and partitions are left out, as in Kafka."""
    if partitions is None:
        partitions = tuple(
            (name, p.index) for name, topic in state.topics.items() for p in topic.partitions
        )
    found = []
    for name, index in partitions:
        topic = state.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            continue
        p = topic.partitions[index]
        if p.reassigning:
            found.append(
                ReassignmentInfo(name, index, p.replicas, p.adding_replicas, p.removing_replicas)
            )
    return found


def _update_features(
    state: MetaState, cmd: UpdateFeatures, changes: _Changes
) -> list[FeatureOutcome]:
    """Kafka's FeatureControlManager.updateFeatures: all updates or none; the first refused
    one fails the request and every feature reports its error, as Kafka answers."""
    for name, level, upgrade_type in cmd.updates:
        current = state.features.get(name, 0)
        if problem := controller.check_feature_update(name, level, upgrade_type, current):
            log.warning("Refused to update features: %s", problem)
            return [
                FeatureOutcome(n, ErrorCode.INVALID_UPDATE_VERSION, problem)
                for n, _, _ in cmd.updates
            ]
    if not cmd.validate_only:
        before = dict(state.features)
        for name, level, _ in cmd.updates:
            if level > 0:
                state.features[name] = level
            else:
                state.features.pop(name, None)
        if state.features != before:
            changes.features()
            log.info("Finalized features changed from %s to %s", before, state.features)
    return [FeatureOutcome(name) for name, _, _ in cmd.updates]


def _offline_replicas(state: MetaState, cmd: OfflineReplicas, changes: _Changes) -> OfflineOutcome:
    if stale := _stale_broker_epoch(state, cmd.broker_id, cmd.broker_epoch):
        log.warning("Refused offline replicas of broker %d: %s", cmd.broker_id, stale)
        return OfflineOutcome(0, ErrorCode.STALE_BROKER_EPOCH, stale)
    log.warning(
        "Broker %d reports %d replica(s) offline (a failed log dir): moving their leaderships "
        "and ISR memberships to other replicas; they come back once the disk is repaired or "
        "replaced and the broker restarts: %s",
        cmd.broker_id,
        len(cmd.partitions),
        ", ".join(f"{t}-{p}" for t, p in cmd.partitions[:20])
        + (", ..." if len(cmd.partitions) > 20 else ""),
    )
    only = set(cmd.partitions)
    changed = _after_fencing(state, cmd.broker_id, cmd.unclean_election_default, changes, only)
    return OfflineOutcome(changed)


def _unclean(state: MetaState, topic: Topic, default: bool) -> bool:
    """The topic's unclean.leader.election.enable, else the cluster-wide dynamic broker
    default, else ``default`` (the proposer's static setting), as Kafka resolves it."""
    cluster = state.broker_configs.get(CLUSTER_DEFAULT, {})
    return unclean_election_enabled(topic.configs, unclean_election_enabled(cluster, default))


def _stale_broker_epoch(state: MetaState, broker_id: int, epoch: int) -> str:
    """Why ``epoch`` is not broker ``broker_id``'s current one ("" if it is), as KRaft checks."""
    broker = state.brokers.get(broker_id)
    if broker is None:
        return f"No broker registration found for broker {broker_id}."
    if broker.epoch != epoch:
        return f"Expected broker epoch {broker.epoch}, but got broker epoch {epoch}."
    return ""


def _replace_partition(
    state: MetaState, topic: Topic, partition: Partition, changes: _Changes
) -> None:
    topic = state.topics[topic.name]  # the latest version: this command may have changed it
    partitions = list(topic.partitions)
    partitions[partition.index] = partition
    state.topics[topic.name] = replace(topic, partitions=tuple(partitions))
    changes.topic(topic.name)


def _update_partitions(
    state: MetaState,
    changes: _Changes,
    decide: Callable[[Topic, Partition], Partition | None],
) -> None:
    for topic in list(state.topics.values()):
        decided = [decide(topic, partition) for partition in topic.partitions]
        if any(decided):
            partitions = tuple(
                new or old for new, old in zip(decided, topic.partitions, strict=True)
            )
            state.topics[topic.name] = replace(topic, partitions=partitions)
            changes.topic(topic.name)


_APPLIERS: dict[type, Callable[[MetaState, Any, _Changes], Any]] = {
    InitCluster: _init_cluster,
    CreateTopics: _create_topics,
    DeleteTopics: _delete_topics,
    RegisterBroker: _register_broker,
    FenceBroker: _fence_broker,
    UnfenceBroker: _unfence_broker,
    AlterPartition: _alter_partition,
    ControlledShutdown: _controlled_shutdown,
    ElectLeaders: _elect_leaders,
    BalanceLeaders: _balance_leaders,
    AllocateProducerIds: _allocate_producer_ids,
    RegisterGroups: _register_groups,
    UnregisterGroups: _unregister_groups,
    CreateAcls: _create_acls,
    DeleteAcls: _delete_acls,
    AlterScramCredentials: _alter_scram_credentials,
    CreateDelegationToken: _create_delegation_token,
    RenewDelegationToken: _renew_delegation_token,
    ExpireDelegationToken: _expire_delegation_token,
    RemoveExpiredTokens: _remove_expired_tokens,
    AlterConfigs: _alter_configs,
    CreatePartitions: _create_partitions,
    AlterReassignments: _alter_reassignments,
    UpdateFeatures: _update_features,
    OfflineReplicas: _offline_replicas,
    AlterResourceConfigs: _alter_resource_configs,
    AlterClientQuotas: _alter_client_quotas,
}
