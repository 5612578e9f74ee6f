"""The replicated metadata state machine: ``MetaState``, which ``meta.dispatch.apply`` changes.

Every change of cluster metadata is one Raft command (a ``meta.commands.Command``) and
``apply`` is the only code that changes a ``MetaState``. Applying the same commands in the same
order yields the same state on every node and on every replay, so a command carries all of its
non-deterministic inputs: the proposer's wall clock, the UUIDs and random seeds it generated, its
config defaults. Nothing here (nor in the appliers) reads a clock, a random generator or a config.

Each change of a topic, a broker, the ACL set, a SCRAM credential, a delegation token, the
dynamic configs of a broker or the finalized features bumps ``MetaState.offset`` and is reported
as a ``Change``; Watch streams publish them. The
producer-id counter is state too, but nothing brokers watch: it bumps no offset. Commands and
the state are stored as the versioned records of ``meta.records`` (the Raft log and its
dumps): a change of these classes is a change of its converters.

Here are the state and the recording of changes. ``meta.dispatch.apply`` routes each command
kind to its applier, which lives with its concern and imports this module, never the dispatch:
``meta.replication_control`` (topics, brokers, ISRs, leaders, producer ids, groups),
``meta.security_state`` (ACLs, SCRAM credentials, delegation tokens), ``meta.cluster_admin``
(configs, partitions, reassignments, features, offline replicas), ``meta.resource_configs`` and
``meta.quotas``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from meta import commands
from meta.acl import AclBinding
from meta.commands import Body, Change, ChangeKey, ChangeKind
from meta.model import Broker, DelegationToken, ScramCredential, Topic
from meta.quotas import QuotaEntity


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


# The format before meta.records (log entries and dumps of pickled objects, still read: see
# meta.records) names these classes meta.state.<name>, after their module then: unpickling finds
# them here while that format is read. Code imports them from meta.commands, and type checkers
# do not see them here.
PICKLED_CLASS_NAMES = frozenset(
    (
        "Command",
        "InitCluster",
        "CreateTopics",
        "DeleteTopics",
        "RegisterBroker",
        "FenceBroker",
        "UnfenceBroker",
        "AlterPartition",
        "ControlledShutdown",
        "ElectLeaders",
        "BalanceLeaders",
        "AllocateProducerIds",
        "RegisterGroups",
        "UnregisterGroups",
        "DeleteOutcome",
        "IsrOutcome",
        "AlterPartitionOutcome",
        "ShutdownOutcome",
        "ElectionOutcome",
        "ProducerIdBlock",
    )
)

if not TYPE_CHECKING:

    def __getattr__(name: str) -> type:
        if name in PICKLED_CLASS_NAMES:
            return getattr(commands, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Changes:
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

    def broker_unregistered(self, broker_id: int) -> None:
        self._record("broker_unregistered", broker_id)

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
