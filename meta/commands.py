"""The commands of the metadata state machine and their results.

Every change of cluster metadata is one ``Command`` (a Raft log entry): a request id, the
proposer's wall clock and a body, one of the classes below (``Body``) or a command kind that lives
with its applier (``meta.resource_configs``, ``meta.quotas``). ``meta.dispatch.apply`` applies it
and answers one of the results below, which the state remembers to answer a retry. Commands and
results are stored as the versioned records of ``meta.records``: a change of these classes is a
change of its converters. The format before those records pickled some of them under their old
module, ``meta.state``, which therefore still answers for them (``meta.state.PICKLED_CLASS_NAMES``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from meta.acl import AclBinding, AclBindingFilter
from meta.model import ConfigAlteration, DelegationToken, Endpoint, Partition, ScramCredential
from meta.partition_leadership import ElectionType, IsrChange
from meta.protocol import ErrorCode
from meta.quotas import AlterClientQuotas, QuotaEntity
from meta.resource_configs import AlterResourceConfigs
from meta.topic_planning import NewTopic

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
class UnregisterBroker:
    """Kafka's UnregisterBroker (64): the registration removed, whatever its epoch; answers an
    Outcome (BROKER_ID_NOT_REGISTERED for an id no broker has)."""

    broker_id: int
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
    # allow_replication_factor_change=false (KIP-860): a target must keep the replica count
    keep_replication_factor: bool = False


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
    | UnregisterBroker
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
    "broker_unregistered",
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
